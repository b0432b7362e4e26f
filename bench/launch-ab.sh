#!/bin/bash
# BenchmarkLaunch of two launch test binaries, BINS/old.test and BINS/new.test (default
# .devcarry in the repository), interleaved, the order swapped each round: medians of
# ms-median-to-ready and ns/op per variant, and old/new. Output under $OUT.
set -u
R=$(git rev-parse --show-toplevel 2>/dev/null || pwd); D=${BINS:-$R/.devcarry}; raw=$OUT/launch-raw.txt
{ nproc; cat /proc/loadavg; id -u; } > "$OUT/launch-host.txt"
one() { (cd "${RUNDIR:-$R/internal/launch}" && "$D/$1.test" -test.run XXX -test.bench "Launch" -test.benchtime "${ITER:-10}x") | awk -v who=$1 '/^BenchmarkLaunch/ {for(i=1;i<=NF;i++){if($(i+1)=="ns/op")ns=$i; if($(i+1)=="ms-median-to-ready")ms=$i}; n=$1; sub(/-[0-9]+$/,"",n); print who, n, ns, ms}' >> "$raw"; }
for r in $(seq "${ROUNDS:-5}"); do if [ $((r%2)) = 1 ]; then one old; one new; else one new; one old; fi; done
cat /proc/loadavg >> "$OUT/launch-host.txt"
python3 - "$raw" <<'PY' | tee "$OUT/launch-table.md"
import collections, statistics, sys
ns=collections.defaultdict(list); ms=collections.defaultdict(list)
for l in open(sys.argv[1]):
    w,n,a,b=l.split(); ns[(w,n)].append(float(a)); ms[(w,n)].append(float(b))
names=sorted({n for _,n in ns})
print('| variant | old ready ms | new ready ms | old/new ready | old/new whole Run |'); print('| --- | --- | --- | --- | --- |')
rr=[];rw=[]
for n in names:
    if ('old',n) not in ns or ('new',n) not in ns: continue
    a=statistics.median(ms[('old',n)]); b=statistics.median(ms[('new',n)]); c=statistics.median(ns[('old',n)])/statistics.median(ns[('new',n)])
    rr.append(a/b); rw.append(c)
    print('| %s | %.2f | %.2f | %.3f | %.3f |'%(n.replace('BenchmarkLaunch/',''),a,b,a/b,c))
print('median over %d variants: old/new ready %.3f, whole Run %.3f' % (len(rr), statistics.median(rr), statistics.median(rw)))
PY
