#!/usr/bin/env bash
# amdrun on a real NVIDIA node, against torchrun, in one run:
#   1. topology: nvidia-smi captures, amdrun topo and doctor
#   2. NCCL all-reduce bus bandwidth, amdrun vs torchrun, alternating, 3 each
#   3. launch overhead until every rank runs user code, N=1 and N=2
#   4. busy avoidance: memory held on GPU 0 -> amdrun chooses GPU 1, ps shows it
#   5. fail-fast: a rank raising mid all-reduce -> amdrun exits with its code, no orphans
# usage: bench/gpu-proof.sh [path/to/amdrun] [outdir]
set -uo pipefail
AMDRUN=$(realpath "${1:-bin/amdrun}")
OUT=${2:-${OUT:-/tmp/amdrun-gpu-proof}}
REPS=${REPS:-3}
LREPS=${LREPS:-10}
NG=$(nvidia-smi -L | wc -l)
mkdir -p "$OUT/capture" "$OUT/logs"
here=$(cd "$(dirname "$0")/.." && pwd)
export AMDRUN_LEASE_DIR="$OUT/leases"
# The root-prepared lease directory (docs/shared-nodes.md), when run as root.
if [ "$(id -u)" = 0 ]; then "$AMDRUN" lease init; fi
summary="$OUT/summary.tsv"
: > "$summary"
say() { printf '%s\n' "$*" | tee -a "$OUT/proof.log"; }

say "== 1. topology ($NG GPUs, $(date -u +%Y-%m-%dT%H:%MZ))"
nvidia-smi topo -m > "$OUT/capture/topo-m.txt"
nvidia-smi nvlink -s > "$OUT/capture/nvlink-s.txt" 2>&1
nvidia-smi --query-gpu=index,pci.bus_id,uuid,name,memory.total,memory.used,utilization.gpu --format=csv,noheader,nounits > "$OUT/capture/query-gpu.txt"
nvidia-smi --query-compute-apps=gpu_bus_id,pid,used_memory --format=csv,noheader,nounits > "$OUT/capture/compute-apps.txt"
nvidia-smi --query-gpu=driver_version --format=csv,noheader > "$OUT/capture/driver.txt"
lscpu > "$OUT/capture/lscpu.txt"; numactl -H > "$OUT/capture/numactl-H.txt" 2>&1
"$AMDRUN" topo 2>&1 | tee -a "$OUT/proof.log"
"$AMDRUN" topo --json > "$OUT/topo.json"
"$AMDRUN" doctor 2>&1 | tee -a "$OUT/proof.log"
echo -e "topology\t$(python3 -c "import json;m=json.load(open('$OUT/topo.json'));l=m['links'][0] if m['links'] else {};print(len(m['devices']),'devices', l.get('level',''), l.get('max_bandwidth_mb_s',''),'MB/s')")" >> "$summary"

if [ "$NG" -ge 2 ]; then
say "== 2. NCCL all-reduce, amdrun vs torchrun, alternating x$REPS"
for i in $(seq 1 "$REPS"); do
  "$AMDRUN" --ngpus 2 "$here/examples/allreduce.py" --json "$OUT/ar-amdrun-$i.json" > "$OUT/logs/ar-amdrun-$i.log" 2>&1 || say "amdrun allreduce run $i failed"
  torchrun --standalone --nproc-per-node 2 "$here/examples/allreduce.py" --json "$OUT/ar-torchrun-$i.json" > "$OUT/logs/ar-torchrun-$i.log" 2>&1 || say "torchrun allreduce run $i failed"
done
tail -n 15 "$OUT/logs/ar-amdrun-1.log" | tee -a "$OUT/proof.log"
fi

say "== 3. launch overhead (until every rank runs user code), x$LREPS each"
for n in 1 $([ "$NG" -ge 2 ] && echo 2); do
  for i in $(seq 1 "$LREPS"); do
    for L in amdrun torchrun; do
      d="$OUT/launch/$L-$n-$i"; mkdir -p "$d"
      start=$(date +%s%N)
      if [ $L = amdrun ]; then
        "$AMDRUN" --ngpus "$n" "$here/bench/launch_probe.py" "$d" > /dev/null 2>&1
      else
        torchrun --standalone --nproc-per-node "$n" "$here/bench/launch_probe.py" "$d" > /dev/null 2>&1
      fi
      end=$(date +%s%N)
      echo "$start $end" > "$d/times"
    done
  done
done

if [ "$NG" -ge 2 ]; then
say "== 4. busy avoidance: 4 GiB held on GPU 0"
python3 "$here/bench/hold_gpu.py" 0 > "$OUT/logs/hold.log" 2>&1 &
holder=$!
for _ in $(seq 1 100); do grep -q holding "$OUT/logs/hold.log" && break; sleep 0.2; done
sleep 1
"$AMDRUN" --ngpus 1 --dry-run --json x.py > "$OUT/busy-dryrun.json" 2> "$OUT/logs/busy-dryrun.err"
"$AMDRUN" ps | tee "$OUT/busy-ps.txt" | tee -a "$OUT/proof.log"
"$AMDRUN" --ngpus 1 --dry-run x.py 2>&1 | tee -a "$OUT/proof.log"
kill "$holder"; wait "$holder" 2>/dev/null
echo -e "busy\t$(python3 -c "import json;print('chose', json.load(open('$OUT/busy-dryrun.json'))['devices'])") ps: $(grep -c busy "$OUT/busy-ps.txt") busy row(s)" >> "$summary"

say "== 5. fail-fast: rank 1 raises mid all-reduce"
t0=$(date +%s%N)
"$AMDRUN" --ngpus 2 --grace 5s "$here/bench/failfast.py" > "$OUT/logs/failfast.log" 2>&1
code=$?
t1=$(date +%s%N)
sleep 1
left=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)
orphans=$(pgrep -fc "bench/failfast.py" || true)
tail -n 25 "$OUT/logs/failfast.log" | tee -a "$OUT/proof.log"
echo -e "failfast\texit $code in $(( (t1-t0)/1000000 )) ms; compute apps left: $left; failfast.py processes left: $orphans" >> "$summary"
fi

if [ "$NG" -ge 2 ]; then
say "== 6. $NG concurrent amdrun --ngpus 1 jobs on one node: disjoint GPUs"
pids=()
for j in $(seq 1 "$NG"); do
  "$AMDRUN" --ngpus 1 --wait=60s "$here/bench/which_gpu.py" "$OUT/which-$j.txt" 4 > "$OUT/logs/which-$j.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
cat "$OUT"/which-*.txt | tee -a "$OUT/proof.log"
distinct=$(cut -d' ' -f2 "$OUT"/which-*.txt | sort -u | wc -l)
echo -e "concurrent jobs\t$NG jobs of --ngpus 1 got $distinct distinct GPU(s)" >> "$summary"
fi

python3 - "$OUT" "$summary" <<'PY'
import glob, json, os, statistics, sys
out, summary = sys.argv[1], sys.argv[2]
rows = []
def peak(f):
    try:
        return json.load(open(f))["peak_busbw_gbs"]
    except Exception:
        return None
a = [p for p in (peak(f) for f in sorted(glob.glob(out + "/ar-amdrun-*.json"))) if p]
t = [p for p in (peak(f) for f in sorted(glob.glob(out + "/ar-torchrun-*.json"))) if p]
if a and t:
    rows.append(("allreduce busbw peak GB/s", "amdrun median %.1f %s / torchrun median %.1f %s; ratio %.3f" % (
        statistics.median(a), [round(x, 1) for x in a], statistics.median(t), [round(x, 1) for x in t], statistics.median(a) / statistics.median(t))))
for n in (1, 2):
    res = {}
    for L in ("amdrun", "torchrun"):
        xs = []
        for d in glob.glob("%s/launch/%s-%d-*" % (out, L, n)):
            try:
                start = int(open(d + "/times").read().split()[0])
                ranks = [int(open(f).read()) for f in glob.glob(d + "/r*")]
            except Exception:
                continue
            if len(ranks) == n:
                xs.append((max(ranks) - start) / 1e6)
        if xs:
            res[L] = xs
    if len(res) == 2:
        ma, mt = statistics.median(res["amdrun"]), statistics.median(res["torchrun"])
        rows.append(("launch to user code N=%d ms" % n, "amdrun median %.0f / torchrun median %.0f; ratio %.2f (%d runs each)" % (ma, mt, ma / mt, len(res["amdrun"]))))
with open(summary, "a") as f:
    for k, v in rows:
        f.write("%s\t%s\n" % (k, v))
PY
echo
echo "== summary"
column -t -s $'\t' "$summary" 2>/dev/null || cat "$summary"
