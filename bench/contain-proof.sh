#!/usr/bin/env bash
# Containment on a real NVIDIA node (issue 13). TRIES times: 2 ranks on 2
# GPUs, each with a DataLoader of 4 workers holding CUDA memory
# (bench/contain_job.py); a second job is queued behind it with --wait
# (bench/contain_check.py); amdrun is SIGKILLed mid-epoch. Per try it
# measures the time until no process of the job and no nvidia-smi compute
# app remains (polled every 50 ms, given up at 10 s), and checks that the
# queued job got both GPUs, started only after the last process of the
# killed one was gone, and found no compute app left. One summary line per
# figure at the end (and in OUT/summary.tsv).
#
# usage: bench/contain-proof.sh path/to/amdrun [outdir] [--cpu]
#   --cpu   no GPU needed: the ranks run on the bundled example topology
#           with torch on the CPU and nvidia-smi is not asked (to check this
#           script's own logic on any machine)
# env: TRIES (default 5); PYTHON, the interpreter with torch (default
#      python3 on PATH); NG, the ranks and GPUs of each job (default 2)
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
OUT=${args[1]:-${OUT:-/tmp/amdrun-contain-proof}}
TRIES=${TRIES:-5}
NG=${NG:-2}
PY=${PYTHON:-$(command -v python3)}
here=$(cd "$(dirname "$0")/.." && pwd)
SRC=() DEVS=()
# On the example topology's 8 devices, two of them stand for the node's 2.
[ -n "$CPU" ] && SRC=(--source example) DEVS=(--devices "0-$((NG - 1))")
POLL_MS=50
GIVE_UP_MS=10000

mkdir -p "$OUT"
export AMDRUN_LEASE_DIR="$OUT/leases"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
summary="$OUT/summary.tsv"
: > "$summary"
: > "$OUT/tries.txt"
say() { printf '%s\n' "$*" | tee -a "$OUT/proof.log"; }
now_ns() { date +%s%N; }

# marked MARK: the pids of the live processes that carry
# AMDRUN_PROOF_MARK=MARK in their environment (every process of the job
# inherits it, whatever PID namespace it is in; the environment of a
# process that has begun to exit reads empty).
marked() {
  grep -lsFxz "AMDRUN_PROOF_MARK=$1" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3
}

# snapshot PID...: "PID STARTTIME" for each, to follow them across pid reuse.
snapshot() {
  local pid stat
  for pid in "$@"; do
    { stat=$(< "/proc/$pid/stat"); } 2>/dev/null || continue
    set -- ${stat##*) }
    echo "$pid ${20}"
  done
}

# holding SNAPSHOT-FILE: the pids of it that are not gone: running, or
# exiting but still holding memory or open files (a killed process with
# much memory takes a while to free it; its device memory goes when its
# device files close). A zombie, or a process that has let go of
# everything and only waits to be reaped, is gone.
holding() {
  local pid start stat fds
  while read -r pid start; do
    { stat=$(< "/proc/$pid/stat"); } 2>/dev/null || continue
    set -- ${stat##*) }
    [ "${20}" = "$start" ] || continue
    case $1 in Z | X) continue ;; esac
    fds=$(shopt -s nullglob; f=(/proc/"$pid"/fd/*); echo ${#f[@]})
    if (( ($7 & 4) != 0 && ${22} == 0 && fds == 0 )); then
      continue
    fi
    echo "$pid"
  done < "$1"
}

# job_procs MARK SNAPSHOT-FILE: how many processes of the job are not gone.
job_procs() {
  { marked "$1"; holding "$2"; } | sort -u | wc -l
}

# compute_apps: how many compute apps nvidia-smi lists (0 with --cpu).
compute_apps() {
  if [ -n "$CPU" ]; then echo 0; return; fi
  nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -c .
}

# wait_for SECONDS COMMAND...: until COMMAND succeeds; 1 when time runs out.
wait_for() {
  local end=$(( $(date +%s) + $1 )); shift
  until "$@"; do
    [ "$(date +%s)" -ge "$end" ] && return 1
    sleep 0.1
  done
}

say "== containment proof, $TRIES tries, $(date -u +%Y-%m-%dT%H:%MZ)${CPU:+ (--cpu: no GPU)}"
"$AMDRUN" "${SRC[@]}" doctor 2>&1 | grep -A1 containment | tee -a "$OUT/proof.log"
[ -z "$CPU" ] && nvidia-smi -L | tee -a "$OUT/proof.log"

for try in $(seq 1 "$TRIES"); do
  d="$OUT/try$try"
  rm -rf "$d"; mkdir -p "$d"
  mark="contain-proof-$$-$try-$(now_ns)"
  AMDRUN_PROOF_MARK=$mark "$AMDRUN" "${SRC[@]}" "${DEVS[@]}" --ngpus "$NG" --python "$PY" \
    "$here/bench/contain_job.py" "$d" $CPU > "$d/job.log" 2>&1 &
  apid=$!
  disown "$apid" # no "Killed" notice from the shell
  ready() {
    kill -0 "$apid" 2>/dev/null || return 0
    [ "$(ls "$d" | grep -c '^ready-')" -ge "$NG" ] && [ "$(ls "$d" | grep -c '^worker-')" -ge $((4 * NG)) ]
  }
  if ! wait_for 600 ready || ! kill -0 "$apid" 2>/dev/null; then
    say "try $try: the job did not get ready; see $d/job.log"
    tail -n 20 "$d/job.log" | tee -a "$OUT/proof.log"
    kill -KILL "$apid" 2>/dev/null
    echo "$try fail" >> "$OUT/tries.txt"
    continue
  fi
  snapshot $(marked "$mark") > "$d/snapshot"
  before=$(wc -l < "$d/snapshot")
  # The queued job first sees the GPUs busy with the running job's memory;
  # when that job's leases go it discovers them again (no --allow-busy).
  "$AMDRUN" "${SRC[@]}" "${DEVS[@]}" --ngpus "$NG" --wait=300s --python "$PY" \
    "$here/bench/contain_check.py" "$d" $CPU > "$d/queued.log" 2>&1 &
  bpid=$!
  if ! wait_for 60 grep -q "waiting for" "$d/queued.log"; then
    say "try $try: the second job did not queue; see $d/queued.log"
  fi

  t0=$(now_ns)
  kill -KILL "$apid"
  last_seen=$t0 t_procs= t_apps= procs=$before apps=
  while :; do
    procs=$(job_procs "$mark" "$d/snapshot")
    apps=$(compute_apps)
    t=$(now_ns)
    [ "$procs" -gt 0 ] && last_seen=$t
    [ -z "$t_procs" ] && [ "$procs" -eq 0 ] && t_procs=$(( (t - t0) / 1000000 ))
    [ -z "$t_apps" ] && [ "$apps" -eq 0 ] && t_apps=$(( (t - t0) / 1000000 ))
    [ -n "$t_procs" ] && [ -n "$t_apps" ] && break
    [ $(( (t - t0) / 1000000 )) -ge "$GIVE_UP_MS" ] && break
    sleep 0.05 # POLL_MS
  done
  if [ "$procs" -gt 0 ]; then
    say "try $try: $procs process(es) of the job left after ${GIVE_UP_MS} ms:"
    for pid in $({ marked "$mark"; holding "$d/snapshot"; } | sort -u); do
      say "  $pid $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)"
    done
  fi
  wait "$bpid"; bcode=$?
  # The queued job: both GPUs, started after the last process was seen,
  # no compute app at its start.
  read -r got after apps0 < <("$PY" - "$d" "$last_seen" "$NG" <<'PY'
import glob, json, sys
d, last_seen, ng = sys.argv[1], int(sys.argv[2]) / 1e9, int(sys.argv[3])
rs = [json.load(open(f)) for f in glob.glob(d + "/queued-*.json")]
devs = sorted({v for r in rs for v in r["visible"].split(",") if v})
after = len(rs) == ng and all(r["start"] > last_seen for r in rs)
apps = [r["apps"] for r in rs if r["apps"] is not None]
print(",".join(devs) or "-", "yes" if after else "no", max(apps) if apps else "n/a")
PY
)
  say "try $try: $before processes; no job process after ${t_procs:-?} ms, no compute app after ${t_apps:-?} ms; left: $procs; queued job exit $bcode, devices $got, started after the last: $after, compute apps at its start: $apps0"
  echo "$try ok $before ${t_procs:--} ${t_apps:--} $procs $bcode $got $after $apps0" >> "$OUT/tries.txt"
done

"$PY" - "$OUT/tries.txt" "$summary" "$TRIES" "${CPU:-gpu}" "$NG" <<'PY'
import statistics, sys
path, summary, tries, mode, ng = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
rows = [l.split() for l in open(path)] if tries else []
ok = [r for r in rows if r[1] == "ok"]
def ms(i):
    xs = [int(r[i]) for r in ok if r[i] != "-"]
    if not xs:
        return "n/a"
    return "median %d ms %s (%d of %d tries)" % (statistics.median(xs), xs, len(xs), len(ok))
both = [max(int(r[3]), int(r[4])) for r in ok if r[3] != "-" and r[4] != "-"]
out = [
    ("tries", "%d run, %d failed to start" % (len(ok), len(rows) - len(ok))),
    ("survivors", "%d in all (per try %s)" % (sum(int(r[5]) for r in ok), [int(r[5]) for r in ok])),
    ("time to no job process", ms(3)),
    ("time to no compute app", ms(4) if mode != "--cpu" else "n/a (--cpu)"),
    ("time to clean (both)", "median %d ms %s" % (statistics.median(both), both) if both else "n/a"),
    ("queued job got all %d GPUs" % ng, "%d/%d (devices %s)" % (sum(r[6] == "0" and len(r[7].split(",")) == ng for r in ok), len(ok), sorted({r[7] for r in ok}))),
    ("queued job started after the last process", "%d/%d; compute apps at its start: %s" % (sum(r[8] == "yes" for r in ok), len(ok), [r[9] for r in ok])),
]
with open(summary, "a") as f:
    for k, v in out:
        f.write("%s\t%s\n" % (k, v))
PY
echo
echo "== summary"
column -t -s $'\t' "$summary" 2>/dev/null || cat "$summary"
