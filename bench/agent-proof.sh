#!/usr/bin/env bash
# Jobs amdrun hands to torch's elastic agent (issue 23), against torchrun
# itself. Two "nodes" on this host (two launchers, each with a lease
# directory of its own, as two machines would have), a c10d rendezvous
# on 127.0.0.1, NP ranks per node. TRIES times, alternating launchers:
#   first-code  launch of both launchers -> the last rank's first line of
#               user code (bench/launch_probe.py)
#   restart     rank 0 of attempt 0 exits 1 -> the first rank of attempt 1
#               runs user code (bench/restart_probe.py, --max-restarts 1)
# Medians per launcher at the end (and in OUT/summary.tsv).
#
# usage: bench/agent-proof.sh path/to/amdrun [outdir] [--cpu]
#   --cpu   no GPU needed: amdrun plans on the bundled example topology,
#           the ranks run torch on the CPU (gloo)
# env: TRIES (default 5); NP (ranks per node, default 1); LIMIT (seconds
#      a launcher may take before it is stopped, default 120);
#      SKIP_RESTART=1 measures first-code only; PYTHON, the
#      interpreter with torch (default python3 on PATH; for Debian's
#      torch 1.13 under Python 3.11 give a wrapper with its Std.from_str
#      fix, as cmd/amdrun/agent_test.go writes one)
set -uo pipefail

CPU=
args=()
for a in "$@"; do
  if [ "$a" = --cpu ]; then CPU=--cpu; else args+=("$a"); fi
done
if [ "${#args[@]}" -lt 1 ]; then
  echo "usage: $0 path/to/amdrun [outdir] [--cpu]" >&2
  exit 2
fi
AMDRUN=$(realpath "${args[0]}")
OUT=${args[1]:-${OUT:-/tmp/amdrun-agent-proof}}
TRIES=${TRIES:-5}
NP=${NP:-1}
LIMIT=${LIMIT:-120}
PY=${PYTHON:-$(command -v python3)}
here=$(cd "$(dirname "$0")/.." && pwd)
SRC=()
[ -n "$CPU" ] && SRC=(--source example)
mkdir -p "$OUT"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
summary="$OUT/summary.tsv"
: > "$summary"
say() { printf '%s\n' "$*" | tee -a "$OUT/proof.log"; }
now_ns() { date +%s%N; }
port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# launch WHO NODE PORT ID SCRIPT DIR [extra...]: one node's launcher.
launch() {
  local who=$1 node=$2 p=$3 id=$4 script=$5 dir=$6
  shift 6
  local common=(--nnodes 2 --nproc_per_node "$NP" --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$p" --rdzv_id "$id" "$@")
  # A launcher that has not finished after LIMIT seconds is stopped.
  if [ "$who" = amdrun ]; then
    AMDRUN_LEASE_DIR="$OUT/leases$node" PYTHON_EXEC="$PY" timeout "$LIMIT" "$AMDRUN" "${SRC[@]}" "${common[@]}" "$script" "$dir"
  else
    timeout "$LIMIT" "$PY" -m torch.distributed.run "${common[@]}" "$script" "$dir"
  fi
}

# both WHO SCRIPT DIR [extra...]: both nodes, to the end; prints the start
# time (ns).
both() {
  local who=$1 script=$2 dir=$3
  shift 3
  local p id t0
  p=$(port)
  id="$who$RANDOM"
  t0=$(now_ns)
  launch "$who" 0 "$p" "$id" "$script" "$dir" "$@" >> "$OUT/$who.log" 2>&1 &
  local a=$!
  launch "$who" 1 "$p" "$id" "$script" "$dir" "$@" >> "$OUT/$who.log" 2>&1 &
  local b=$!
  wait "$a"; local ca=$?
  wait "$b"; local cb=$?
  [ "$ca" = 0 ] && [ "$cb" = 0 ] || say "  $who: exit $ca/$cb (see $OUT/$who.log)"
  echo "$t0"
}

# stamps FILE...: the probes' times, one a line (they write no newline).
stamps() { local f; for f in "$@"; do [ -s "$f" ] && { cat "$f"; echo; }; done; }

median() { sort -n | awk '{a[NR]=$1} END {if (NR) print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2); else print "nan"}'; }

for try in $(seq 1 "$TRIES"); do
  for who in amdrun torchrun; do
    d=$(mktemp -d "$OUT/first.XXXX")
    t0=$(both "$who" "$here/bench/launch_probe.py" "$d")
    last=$(stamps "$d"/r* | sort -n | tail -1)
    [ -n "$last" ] && printf 'first-code\t%s\t%s\n' "$who" "$(( (last - t0) / 1000000 ))" >> "$summary"
    [ "${SKIP_RESTART:-}" = 1 ] && continue
    d=$(mktemp -d "$OUT/restart.XXXX")
    both "$who" "$here/bench/restart_probe.py" "$d" --max_restarts 1 > /dev/null
    fail=$(stamps "$d/fail")
    first=$(stamps "$d"/a1.r* | sort -n | head -1)
    [ -n "$fail" ] && [ -n "$first" ] && printf 'restart\t%s\t%s\n' "$who" "$(( (first - fail) / 1000000 ))" >> "$summary"
  done
  say "try $try done"
done
for fig in first-code restart; do
  for who in amdrun torchrun; do
    m=$(awk -F'\t' -v f="$fig" -v w="$who" '$1==f && $2==w {print $3}' "$summary" | median)
    n=$(awk -F'\t' -v f="$fig" -v w="$who" '$1==f && $2==w' "$summary" | wc -l)
    say "$fig $who: median ${m} ms of $n (2 nodes x $NP ranks, c10d)"
  done
done
