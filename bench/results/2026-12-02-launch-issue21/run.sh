#!/usr/bin/env bash
# BenchmarkLaunch before issue 21's move (3264a3c) and now, interleaved rounds;
# then whole `amdrun --no-python true` exec to exit, alternating.
set -u
d=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp}/launchbench
mkdir -p "$out"
ROUNDS=${ROUNDS:-5}
nproc; uptime; id -u
for r in $(seq "$ROUNDS"); do
  for who in old new; do
    "$d/$who.test" -test.run XXX -test.bench 'Launch/N=(1|8)/(subreaper|pid-namespace)/unbound' -test.benchtime 15x 2>&1 |
      sed -n "s/^\(BenchmarkLaunch[^ ]*\).*[[:space:]]\([0-9.]*\) ms-median-to-ready.*/$who r$r \1 \2/p" >> "$out/launch.txt"
  done
done
cat "$out/launch.txt" | head -4
# whole command
for r in $(seq 15); do
  for who in old new; do
    for n in 1 8; do
      s=$(date +%s%N); "$d/amdrun-$who" --no-python --ngpus 0 --nproc-per-node $n true >/dev/null 2>"$out/err-$who.txt"; rc=$?; e=$(date +%s%N)
      echo "$who N=$n rc=$rc $(( (e-s)/1000 ))" >> "$out/cli.txt"
    done
  done
done
tail -3 "$out/err-new.txt" "$out/err-old.txt"
python3 - "$out" <<'PY'
import collections, statistics, sys, os
o=sys.argv[1]
L=collections.defaultdict(list)
for line in open(os.path.join(o,'launch.txt')):
    who,r,name,ms=line.split(); L[(name,who)].append(float(ms))
for name in sorted({k[0] for k in L}):
    a,b=statistics.median(L[(name,'old')]),statistics.median(L[(name,'new')])
    print('%s old %.2f ms new %.2f ms new/old %.3f (rounds %d)'%(name,a,b,b/a,len(L[(name,'new')])))
C=collections.defaultdict(list)
for line in open(os.path.join(o,'cli.txt')):
    who,n,rc,us=line.split(); C[(n,who,rc)].append(int(us))
for k in sorted(C): print('cli',k,'median %.1f ms'%(statistics.median(C[k])/1000),'n',len(C[k]))
PY
