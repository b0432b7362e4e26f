#!/usr/bin/env bash
# amdrun's selector against the ROCm Kubernetes device plugin's best-effort
# allocator, on the plugin's own test topologies and sizes (issue 25):
# MI308 4/8/16 of 32 partitions, MI300X CPX 8/56/62 of 63, MI210 2/4 of 8.
#
# The plugin is not part of amdrun: point PLUGIN at a checkout of
# github.com/ROCm/k8s-device-plugin (measured at ed764684). Its
# internal/pkg/allocator/*.go are copied into a scratch module with
# bench/rocm-plugin/bench_test.go.txt (BenchmarkPlugin: Init once, then
# Allocate, as the plugin runs) and a glog stand-in that logs nothing
# (only makes the plugin faster); both read the KFD trees of amdrun's
# testdata/kfd, which are the plugin's own.
#
# Rounds alternate the two test binaries, ITER iterations a size each;
# the table gives the median of the rounds and the ratio plugin/amdrun
# (above 1: amdrun faster). CPX 56 and 62 take seconds in the plugin, so
# they run once a round.
# usage: PLUGIN=/path/to/k8s-device-plugin bench/rocm-plugin.sh [rounds]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
: "${PLUGIN:?set PLUGIN to a k8s-device-plugin checkout}"
ROUNDS=${1:-5}
ITER=${ITER:-2000}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/src/allocator" "$W/src/testdata" "$W/glog"
# the plugin's tests come too: the benchmark uses their testInfo and
# getTestDevices
cp "$PLUGIN"/internal/pkg/allocator/*.go "$W/src/allocator/"
sed -i 's#"\.\./\.\./\.\./testdata/#"../testdata/#' "$W"/src/allocator/*_test.go
cp "$here/bench/rocm-plugin/bench_test.go.txt" "$W/src/allocator/bench_test.go"
cp "$here/bench/rocm-plugin/glog.go.txt" "$W/glog/glog.go"
printf 'module github.com/golang/glog\n\ngo 1.24\n' > "$W/glog/go.mod"
printf 'module rocmplug\n\ngo 1.24\n\nrequire github.com/golang/glog v1.2.5\n\nreplace github.com/golang/glog => ../glog\n' > "$W/src/go.mod"
for t in topology-parsing-mi308 topo-mi300-cpx topo-mi210-xgmi-pcie; do
	tar xzf "$here/testdata/kfd/$t.tar.gz" -C "$W/src/testdata"
done
(cd "$W/src" && GOFLAGS=-mod=mod go test -c -o "$W/plugin.test" ./allocator)
(cd "$here" && go test -c -o "$W/selector.test" ./internal/selector)
raw="$W/raw.txt"
# plugin PATTERN ITERATIONS / amdrun: one binary's run into raw.txt
plugin() {
	(cd "$W/src/allocator" && "$W/plugin.test" -test.run XXX -test.bench "$1" -test.benchtime "$2") |
		sed -n 's/^BenchmarkPlugin\/\([^ ]*\)-[0-9]*[[:space:]].*[[:space:]]\([0-9.]*\) ns\/op.*/plugin \1 \2/p' >> "$raw"
}
amdrun() {
	(cd "$here/internal/selector" && "$W/selector.test" -test.run XXX -test.bench PluginSizes -test.benchtime "${ITER}x") |
		sed -n 's/^BenchmarkPluginSizes\/\([^ ]*\)-[0-9]*[[:space:]].*[[:space:]]\([0-9.]*\) ns\/op.*/amdrun \1 \2/p' >> "$raw"
}
for round in $(seq "$ROUNDS"); do
	echo "round $round of $ROUNDS" >&2
	plugin 'Plugin/(mi308|mi210)' "${ITER}x"
	plugin 'Plugin/cpx-63/N=8$' "${ITER}x"
	amdrun
	plugin 'Plugin/cpx-63/N=(56|62)' 1x
done
cp "$raw" "${RAW:-/dev/null}" 2>/dev/null || true
python3 - "$raw" "$ROUNDS" "$(uptime)" <<'EOF'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    who, name, ns = line.split()
    runs[(who, name)].append(float(ns))
med = {k: statistics.median(v) for k, v in runs.items()}
def us(ns): return '%.1f us' % (ns / 1e3) if ns < 1e6 else '%.2f ms' % (ns / 1e6) if ns < 1e9 else '%.2f s' % (ns / 1e9)
print('%s rounds; %s' % (sys.argv[2], sys.argv[3].strip()))
print('| size | plugin | amdrun prepared (+5 runner-ups; Select on the model) | ratio plugin/prepared | ratio plugin/model |')
print('| --- | --- | --- | --- | --- |')
for (who, name), v in sorted(med.items()):
    if who != 'plugin':
        continue
    p, m, a = (med.get(('amdrun', name + '/' + s)) for s in ('prepared', 'model', 'prepared+5'))
    if p is None:
        continue
    print('| %s | %s | %s (%s; %s) | %.2f | %.2f |' % (name, us(v), us(p), us(a), us(m), v / p, v / m))
EOF
