#!/usr/bin/env bash
# Issue 15 on a 2-GPU NVIDIA node: one process seeing both GPUs through
# --ngpus 2 --nproc-per-node 1 while a second --ngpus 1 job waits for the
# lease; torchrun's spellings with the installed (current) torch.
# usage: bench/one-process.sh [path/to/amdrun] [outdir]
set -uo pipefail
AMDRUN=$(realpath "${1:-bin/amdrun}")
OUT=${2:-${OUT:-/tmp/amdrun-one-process}}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
export AMDRUN_LEASE_DIR="$OUT/leases" OMP_NUM_THREADS=4
say() { printf '%s\n' "$*" | tee -a "$OUT/one-process.log"; }

say "== torch $(python3 -c 'import torch;print(torch.__version__)'), $(nvidia-smi -L | wc -l) GPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
say "== 1. --ngpus 2 --nproc-per-node 1: one process, both GPUs, lease held for 8 s"
"$AMDRUN" --ngpus 2 --nproc-per-node 1 --dry-run --no-python python3 "$here/bench/one_process.py" 2>&1 | tee -a "$OUT/one-process.log"
"$AMDRUN" --ngpus 2 --nproc-per-node 1 --no-python python3 "$here/bench/one_process.py" 8 > "$OUT/first.out" 2> "$OUT/first.err" &
first=$!
sleep 4
"$AMDRUN" ps 2>&1 | tee -a "$OUT/one-process.log"
t0=$(date +%s.%N)
"$AMDRUN" --ngpus 1 --wait=60s --no-python python3 -c 'import time, os; print("second", os.environ["CUDA_VISIBLE_DEVICES"], time.time())' > "$OUT/second.out" 2> "$OUT/second.err"
say "second job exit $? after $(python3 -c "import time;print(round(time.time()-$t0,2))") s: $(cat "$OUT/second.out")"
sed 's/^/  second stderr: /' "$OUT/second.err" | tee -a "$OUT/one-process.log"
wait $first; say "first job exit $?"
sed 's/^/  first: /' "$OUT/first.out" | tee -a "$OUT/one-process.log"
grep -v OMP_NUM_THREADS "$OUT/first.err" | sed 's/^/  first stderr: /' | tee -a "$OUT/one-process.log"

say "== 2. torchrun spellings with this torch (NCCL all-reduce)"
"$AMDRUN" --nproc_per_node 2 --master_port 29555 --max_restarts 0 --role trainer "$here/examples/allreduce.py" > "$OUT/underscore.log" 2>&1; say "underscore spellings: exit $?"
PET_NPROC_PER_NODE=2 PET_RDZV_ID=pet "$AMDRUN" --standalone "$here/examples/allreduce.py" > "$OUT/pet.log" 2>&1; say "PET_* variables: exit $?"
grep -ih "deprecat" "$OUT/underscore.log" "$OUT/pet.log" | sort | uniq -c | sed 's/^/  /' | tee -a "$OUT/one-process.log"
"$AMDRUN" --launcher torchrun --ngpus 2 --role trainer --monitor-interval 0.5 --log-dir "$OUT/trlogs" -t 3 "$here/examples/allreduce.py" > "$OUT/launcher-torchrun.log" 2>&1; say "--launcher torchrun (underscore flags to this torchrun): exit $?"
ls -R "$OUT/trlogs" | head -20 | sed 's/^/  /' | tee -a "$OUT/one-process.log"
for args in "-n 2 t.py" "-n 2 --nnodes 2 --node-rank 1 --master-addr n0 --master-port 29400 --no-python ./a.out" \
  "-n 1 --nnodes 1:2 --rdzv-backend c10d --rdzv-endpoint n0:29400 --rdzv-id j --rdzv-conf timeout=5 --max-restarts 2 --role r -r 0:1 -t 0:2 --local-ranks-filter 0 --shutdown-timeout 5 --virtual-local-rank -m pkg.mod"; do
  line=$("$AMDRUN" --launcher torchrun --dry-run $args 2>/dev/null | head -1)
  python3 -c "import sys; from torch.distributed.run import get_args_parser; get_args_parser().parse_args(sys.argv[1:])" ${line#Launcher: torchrun } \
    && say "this torch parses: ${line#Launcher: }" || say "REJECTED: ${line#Launcher: }"
done
