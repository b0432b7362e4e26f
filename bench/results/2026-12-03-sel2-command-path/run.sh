#!/bin/bash
# On the device: unpack the plugin's KFD trees, run bench/rocm-plugin.sh's
# interleaved rounds from the prebuilt binaries, then amdrun before (8feb734)
# and after, alternating, on the prepared and model columns.
set -u
D=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$D/plugin/testdata"
for t in "$D"/amdrun/testdata/kfd/*.tar.gz; do tar xzf "$t" -C "$D/plugin/testdata"; done
{ nproc; uname -m; grep -m1 'model name' /proc/cpuinfo; cat /proc/loadavg; date -u; } > "$OUT/host.txt"
cp "$D/BUILD" "$OUT/BUILD"
ITER=2000 COLD_ITER=${COLD_ITER:-40} RAW="$OUT/raw.txt" BINS="$D" timeout "${T1:-75}" "$D/rocm-plugin.sh" "${ROUNDS:-3}" > "$OUT/table.md" 2> "$OUT/err.txt"
echo "rocm-plugin.sh rc=$?" >> "$OUT/err.txt"
cd "$D/amdrun/internal/selector"
for r in 1 2 3; do
	for b in selector-base selector; do
		"$D/$b.test" -test.run XXX -test.bench 'PluginSizes/.*/.*/^(prepared|model)$' -test.benchtime 2000x |
			sed -n "s/^BenchmarkPluginSizes\/\([^ ]*\)-[0-9]*[[:space:]].*[[:space:]]\([0-9.]*\) ns\/op.*/$b \1 \2/p" >> "$OUT/ab.txt"
	done
done
cat /proc/loadavg >> "$OUT/host.txt"
cat "$OUT/table.md" "$OUT/err.txt"
