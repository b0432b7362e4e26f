#!/bin/bash
# Which of s5sel's commits moved CPXTree and MI308 8/16: every binary in
# .devcarry/sel-COMMIT.test, round-robin, the order rotated each round.
set -u
R=$(git rev-parse --show-toplevel 2>/dev/null || pwd); raw=$OUT/bisect-raw.txt
bins=($(cd "$R/.devcarry" && ls sel-*.test | sed 's/^sel-//; s/\.test$//'))
for r in $(seq "${ROUNDS:-9}"); do
  n=${#bins[@]}
  for i in $(seq 0 $((n-1))); do c=${bins[$(( (i+r) % n ))]}
    (cd "$R/internal/selector" && for b in 'PluginSizes/mi308-32/N=(8|16)/^model$' '^BenchmarkCPXTree$'; do
      "$R/.devcarry/sel-$c.test" -test.run XXX -test.benchtime "${I:-500}x" -test.bench "$b"; done) |
      awk -v who=$c '/^Benchmark/ {n=$1; sub(/-[0-9]+$/,"",n); for(i=1;i<=NF;i++) if($(i+1)=="ns/op") print who, n, $i}' >> "$raw"
  done
done
python3 - "$raw" "${bins[@]}" <<'PY' | tee "$OUT/bisect-table.md"
import collections, statistics, sys
runs = collections.defaultdict(list); bins = sys.argv[2:]
for l in open(sys.argv[1]):
    w, n, v = l.split(); runs[(w, n)].append(float(v))
names = sorted({n for _, n in runs})
base = 'a489e4a'
print('| benchmark | ' + ' | '.join(bins) + ' |'); print('| --- ' * (len(bins)+1) + '|')
for n in names:
    b = statistics.median(runs[(base, n)])
    print('| %s | ' % n.replace('Benchmark','') + ' | '.join('%.3f' % (b / statistics.median(runs[(c, n)])) for c in bins) + ' |')
g = {c: statistics.geometric_mean([statistics.median(runs[(base, n)]) / statistics.median(runs[(c, n)]) for n in names]) for c in bins}
print('geomean base/commit: ' + ', '.join('%s %.3f' % (c, g[c]) for c in bins))
PY
