#!/bin/bash
# Selector old (a489e4a, 3,904 lines) against new (round 5, 3,532 lines): the
# test binaries in .devcarry, run from internal/selector of the carried tree,
# interleaved, the order swapped each round; medians of ns/op and old/new.
set -u
R=$(git rev-parse --show-toplevel 2>/dev/null || pwd); B=$R/.devcarry; raw=$OUT/sel-raw.txt
{ nproc; grep -m1 'model name' /proc/cpuinfo; cat /proc/loadavg; date -u; } > "$OUT/sel-host.txt"
one() { (cd "$R/internal/selector" && for b in 'PluginSizes/./N=/^model$' '^BenchmarkMI250$' '^BenchmarkCPXTree$'; do
  "$B/sel-$1.test" -test.run XXX -test.benchtime "${I:-1000}x" -test.bench "$b"; done) |
  awk -v who=$1 '/^Benchmark/ {n=$1; sub(/-[0-9]+$/,"",n); for(i=1;i<=NF;i++) if($(i+1)=="ns/op") print who, n, $i}' >> "$raw"; }
for r in $(seq "${ROUNDS:-15}"); do if [ $((r%2)) = 1 ]; then one old; one new; else one new; one old; fi; done
cat /proc/loadavg >> "$OUT/sel-host.txt"
python3 - "$raw" <<'PY' | tee "$OUT/sel-table.md"
import collections, statistics, sys
runs = collections.defaultdict(list)
for l in open(sys.argv[1]):
    w, n, v = l.split(); runs[(w, n)].append(float(v))
print('%d rounds, medians' % min(len(v) for v in runs.values()))
print('| benchmark | old | new | old/new | new faster rounds |'); print('| --- | --- | --- | --- | --- |')
for n in sorted({n for _, n in runs}):
    o, w = runs[('old', n)], runs[('new', n)]
    k = sum(1 for a, b in zip(o, w) if a >= b)
    print('| %s | %.1f us | %.1f us | %.3f | %d/%d |' % (n.replace('Benchmark', ''), statistics.median(o)/1e3, statistics.median(w)/1e3, statistics.median(o)/statistics.median(w), k, len(w)))
PY
