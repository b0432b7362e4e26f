#!/bin/bash
# plugin warm Allocate vs amdrun command path (model) new (main + revert of 1b97b48) and old (b3b2b0e), interleaved, order swapped each round
set -u
D=$(cd "$(dirname "$0")/new" && pwd)
mkdir -p "$D/plugin/testdata"
for t in "$D"/amdrun/testdata/kfd/*.tar.gz; do tar xzf "$t" -C "$D/plugin/testdata"; done
{ nproc; grep -m1 'model name' /proc/cpuinfo; cat /proc/loadavg; date -u; } > "$OUT/host.txt"
raw="$OUT/raw.txt"; I=${ITER:-2000}
sel() { (cd "$D/amdrun/internal/selector" && "$D/$1" -test.run XXX -test.benchtime "${I}x" -test.bench 'PluginSizes/(mi308-32|cpx-63)/N=(4|8|16)$/^model$') |
  sed -n "s/^BenchmarkPluginSizes\/\([^ ]*\)-[0-9]*[[:space:]].*[[:space:]]\([0-9.]*\) ns\/op.*/$2 \1 \2/p" >> "$raw"; }
for r in $(seq "${ROUNDS:-15}"); do
  (cd "$D/plugin/allocator" && "$D/plugin.test" -test.run XXX -test.bench 'Plugin$/mi308' -test.benchtime "${I}x" &&
   "$D/plugin.test" -test.run XXX -test.bench 'Plugin$/cpx-63/N=8$' -test.benchtime "${I}x") |
   sed -n 's/^BenchmarkPlugin\/\([^ ]*\)-[0-9]*[[:space:]].*[[:space:]]\([0-9.]*\) ns\/op.*/plugin \1 \2/p' >> "$raw"
  if [ $((r % 2)) = 1 ]; then sel selector.test new; sel selector-old.test old; else sel selector-old.test old; sel selector.test new; fi
done
cat /proc/loadavg >> "$OUT/host.txt"
python3 - "$raw" <<'PY' | tee "$OUT/table.md"
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    who, name, ns = line.split(); runs[(who, name.replace('/model',''))].append(float(ns))
med = {k: statistics.median(v) for k, v in runs.items()}
print('%d rounds, medians' % min(len(v) for v in runs.values()))
print('| size | plugin Allocate | old model | new model | Allocate/old | Allocate/new | new>=1 rounds | old/new |')
print('| --- | --- | --- | --- | --- | --- | --- | --- |')
for (who, name), v in sorted(med.items()):
    if who != 'plugin': continue
    o, n = med.get(('old', name)), med.get(('new', name))
    if o is None or n is None: continue
    pr, nr = runs[('plugin', name)], runs[('new', name)]
    k = sum(1 for a, b in zip(pr, nr) if a >= b)
    print('| %s | %.1f us | %.1f us | %.1f us | %.2f | %.2f | %d/%d | %.2f |' % (name, v/1e3, o/1e3, n/1e3, v/o, v/n, k, len(nr), o/n))
PY
