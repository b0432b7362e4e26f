#!/bin/bash
# First GPU job on the H200: what amdrun prints besides the job's own output.
set -u
D=$(cd "$(dirname "$0")" && pwd)
source /opt/torch/.venv/bin/activate
A=$D/amdrun
cd "$(mktemp -d)"
cat > first.py <<'PY'
import os, torch
x = torch.ones(4, device="cuda")
print("rank", os.environ["RANK"], "of", os.environ["WORLD_SIZE"], "sum", x.sum().item(), torch.cuda.get_device_name(0))
PY
cat > ddp.py <<'PY'
import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
t = torch.ones(1, device="cuda") * (dist.get_rank() + 1)
dist.all_reduce(t)
print("allreduce", t.item())
dist.destroy_process_group()
PY
echo "== amdrun version"; $A version
echo "== amdrun topo"; $A topo 2>&1 | head -20
for cmd in "--ngpus 1 first.py" "first.py" "--ngpus 1 ddp.py" "--nproc-per-node 2 --ngpus 0 --no-python true" "--ngpus 1 --dry-run first.py"; do
  echo "== amdrun $cmd"
  $A $cmd >out.txt 2>err.txt; echo "rc $?"
  echo "-- stdout:"; head -5 out.txt; echo "-- stderr ($(wc -l <err.txt) lines):"; cat err.txt | head -20
done
echo "== doctor"; $A doctor 2>&1 | tail -15
echo "== stall with the flight recorder: 4 gloo ranks, rank 2 sleeps before its second all_reduce"
cat > stall.py <<'PY'
import os, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
r = dist.get_rank()
t = torch.ones(4)
dist.all_reduce(t)
print("first all_reduce", t[0].item(), flush=True)
if r == 2:
    time.sleep(600)
dist.all_reduce(t)
print("second", t[0].item())
PY
start=$(date +%s.%N)
$A --nproc-per-node 4 --ngpus 0 --stall-timeout 10s --on-stall stop --log-dir logs stall.py >out.txt 2>err.txt; rc=$?
end=$(date +%s.%N)
echo "rc $rc, wall $(echo "$end - $start" | bc) s"
cat out.txt | head -40; echo "-- stderr"; cat err.txt | head -60
ls -R logs | head -30
