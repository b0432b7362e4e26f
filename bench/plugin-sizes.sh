#!/bin/bash
# On the device: the command's selection against the ROCm plugin's warm
# Allocate at MI308 4/8/16 of 32 and CPX 8 of 63: the plugin's
# BenchmarkPlugin and amdrun's BenchmarkPluginSizes sub-benchmarks named in
# COLS (default "links prepared model search": one walk over the model's
# links for every device's locality; Prepared.Select on a Prepared kept
# from the previous call; Prepare and Prepared.Select as one command runs
# them; the same without settledNaive), alternating, ROUNDS rounds of ITER
# iterations; then the table of medians in OUT/table.md.
# usage: OUT=dir DIR/plugin-sizes.sh, from the DIR (binaries and a copy of
# this script) that `PLUGIN=<checkout> BUILD_ONLY=DIR bench/rocm-plugin.sh` built.
set -u
D=$(cd "$(dirname "$0")" && pwd)
COLS=${COLS:-links prepared model search}
mkdir -p "$D/plugin/testdata"
for t in "$D"/amdrun/testdata/kfd/*.tar.gz; do tar xzf "$t" -C "$D/plugin/testdata"; done
{ nproc; uname -m; grep -m1 'model name' /proc/cpuinfo; cat /proc/loadavg; date -u; } > "$OUT/host.txt"
cp "$D/BUILD" "$OUT/BUILD"
raw="$OUT/raw.txt"
for r in $(seq "${ROUNDS:-7}"); do
	(cd "$D/plugin/allocator" && "$D/plugin.test" -test.run XXX -test.bench 'Plugin$/mi308' -test.benchtime "${ITER:-2000}x" &&
		"$D/plugin.test" -test.run XXX -test.bench 'Plugin$/cpx-63/N=8$' -test.benchtime "${ITER:-2000}x") |
		sed -n 's/^BenchmarkPlugin\/\([^ ]*\)-[0-9]*[[:space:]].*[[:space:]]\([0-9.]*\) ns\/op.*/plugin \1 \2/p' >> "$raw"
	(cd "$D/amdrun/internal/selector" && "$D/selector.test" -test.run XXX -test.benchtime "${ITER:-2000}x" \
		-test.bench "PluginSizes/(mi308-32|cpx-63)/N=(4|8|16)\$/^(${COLS// /|})\$") |
		sed -n 's/^BenchmarkPluginSizes\/\([^ ]*\)-[0-9]*[[:space:]].*[[:space:]]\([0-9.]*\) ns\/op.*/amdrun \1 \2/p' >> "$raw"
done
cat /proc/loadavg >> "$OUT/host.txt"
COLS="$COLS" python3 - "$raw" <<'PY' | tee "$OUT/table.md"
import collections, os, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    who, name, ns = line.split()
    runs[(who, name)].append(float(ns))
med = {k: statistics.median(v) for k, v in runs.items()}
print('%d rounds, medians' % min(len(v) for v in runs.values()))
cols = os.environ['COLS'].split()
print('| size | plugin Allocate | ' + ' | '.join(cols) + ' | ' + ' | '.join('Allocate / ' + c for c in cols) + ' |')
print('| --- ' * (2 + 2 * len(cols)) + '|')
for (who, name), v in sorted(med.items()):
    if who != 'plugin':
        continue
    a = [med.get(('amdrun', name + '/' + c)) for c in cols]
    if None in a:
        continue
    print('| %s | %.1f us | %s | %s |' % (name, v / 1e3, ' | '.join('%.1f us' % (x / 1e3) for x in a),
                                         ' | '.join('%.2f' % (v / x) for x in a)))
PY
