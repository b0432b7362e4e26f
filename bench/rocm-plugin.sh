#!/usr/bin/env bash
# amdrun's selector against the ROCm Kubernetes device plugin's best-effort
# allocator, on the plugin's own test topologies and sizes (issue 25):
# MI308 4/8/16 of 32 partitions, MI300X CPX 8/56/62 of 63, MI210 2/4 of 8.
#
# The plugin is not part of amdrun: point PLUGIN at a checkout of
# github.com/ROCm/k8s-device-plugin (measured at ed764684). Its
# internal/pkg/allocator/*.go are copied into a scratch module with
# bench/rocm-plugin/bench_test.go.txt and a glog stand-in that logs nothing
# (only makes the plugin faster); both sides read the KFD trees of
# amdrun's testdata/kfd, which are the plugin's own.
#
# Columns, each a median over the rounds:
#   plugin Allocate     BenchmarkPlugin: Init once, then Allocate, as the
#                       plugin runs; against amdrun "prepared" (Prepare
#                       once, then Prepared.Select)
#   plugin Init+Alloc   BenchmarkPluginCold: a fresh policy's Init (it reads
#                       the tree's io_links and weighs every pair) and one
#                       Allocate, the plugin's work for one request from a
#                       cold start; against amdrun "model" (Select on the
#                       read model: weighs every pair, one amdrun command's
#                       selection) and "read+model" (kfd.Read of the tree,
#                       then Select: one command from a cold start, reading
#                       as Init reads)
# Ratios are plugin / amdrun (above 1: amdrun faster). Rounds alternate the
# two test binaries, ITER iterations a size each (COLD_ITER for the
# cold-start columns, which read files); CPX 56 and 62 take seconds in the
# plugin, so they run once a round.
#
# Three ways to run it:
#   PLUGIN=/path/to/k8s-device-plugin bench/rocm-plugin.sh [rounds]
#       build both test binaries here and run the rounds (default 5)
#   PLUGIN=/path/to/k8s-device-plugin BUILD_ONLY=DIR bench/rocm-plugin.sh
#       build them with CGO_ENABLED=0 (static, any linux/amd64 machine) into
#       DIR with the KFD testdata beside them and a copy of this script, and
#       exit; carry DIR to the machine that is to measure
#   BINS=DIR DIR/rocm-plugin.sh [rounds]
#       run the rounds from DIR's prebuilt binaries: needs bash, coreutils
#       and python3 (for the table), no Go, no checkout
# RAW=FILE keeps the raw lines ("plugin|plugin-cold|amdrun NAME NS");
# TABLE=FILE bench/rocm-plugin.sh prints the table of a kept RAW file.
set -euo pipefail
ROUNDS=${1:-5}
ITER=${ITER:-2000}
COLD_ITER=${COLD_ITER:-100}

table() { # table RAWFILE NOTE
	python3 - "$@" <<'EOF'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    who, name, ns = line.split()
    runs[(who, name)].append(float(ns))
med = {k: statistics.median(v) for k, v in runs.items()}
def us(ns):
    if ns is None: return '-'
    return '%.1f us' % (ns / 1e3) if ns < 1e6 else '%.2f ms' % (ns / 1e6) if ns < 1e9 else '%.2f s' % (ns / 1e9)
def ratio(a, b):
    if a is None or b is None: return '-'
    r = a / b
    return '%.2f' % r if r < 100 else '%.0f' % r
print('%d rounds; %s' % (min(len(v) for v in runs.values()), sys.argv[2].strip()))
print('| size | plugin Allocate | plugin Init+Allocate | amdrun prepared (+5 runner-ups) | amdrun model | amdrun read+model '
      '| plugin Allocate / prepared | plugin Init+Allocate / model | plugin Init+Allocate / read+model |')
print('| --- | --- | --- | --- | --- | --- | --- | --- | --- |')
for (who, name), v in sorted(med.items()):
    if who != 'plugin':
        continue
    c = med.get(('plugin-cold', name))
    p, a, m, r = (med.get(('amdrun', name + '/' + s)) for s in ('prepared', 'prepared+5', 'model', 'read+model'))
    if p is None:
        continue
    print('| %s | %s | %s | %s (%s) | %s | %s | %s | %s | %s |' % (
        name, us(v), us(c), us(p), us(a), us(m), us(r), ratio(v, p), ratio(c, m), ratio(c, r)))
EOF
}

if [ -n "${TABLE:-}" ]; then
	table "$TABLE" "from $TABLE"
	exit 0
fi

W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

# build DIR: both test binaries, static, with what they read beside them:
# DIR/plugin/allocator (the plugin's working directory) and
# DIR/plugin/testdata (the trees, unpacked); DIR/amdrun/internal/selector
# (amdrun's working directory) under DIR/amdrun/go.mod and
# DIR/amdrun/testdata/kfd (the archives testutil.KFD unpacks).
build() {
	local out=$1 here
	here=$(cd "$(dirname "$0")/.." && pwd)
	: "${PLUGIN:?set PLUGIN to a k8s-device-plugin checkout}"
	local src="$W/src"
	mkdir -p "$src/allocator" "$W/glog" "$out/plugin/allocator" "$out/plugin/testdata" \
		"$out/amdrun/internal/selector" "$out/amdrun/testdata/kfd"
	# the plugin's tests come too: the benchmark uses their testInfo and
	# getTestDevices
	cp "$PLUGIN"/internal/pkg/allocator/*.go "$src/allocator/"
	sed -i 's#"\.\./\.\./\.\./testdata/#"../testdata/#' "$src"/allocator/*_test.go
	cp "$here/bench/rocm-plugin/bench_test.go.txt" "$src/allocator/bench_test.go"
	cp "$here/bench/rocm-plugin/glog.go.txt" "$W/glog/glog.go"
	printf 'module github.com/golang/glog\n\ngo 1.24\n' > "$W/glog/go.mod"
	printf 'module rocmplug\n\ngo 1.24\n\nrequire github.com/golang/glog v1.2.5\n\nreplace github.com/golang/glog => ../glog\n' > "$src/go.mod"
	for t in topology-parsing-mi308 topo-mi300-cpx topo-mi210-xgmi-pcie; do
		tar xzf "$here/testdata/kfd/$t.tar.gz" -C "$out/plugin/testdata"
		cp "$here/testdata/kfd/$t.tar.gz" "$out/amdrun/testdata/kfd/"
	done
	printf 'module amdrunbench\n' > "$out/amdrun/go.mod"
	(cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=mod go test -c -o "$out/plugin.test" ./allocator)
	(cd "$here" && CGO_ENABLED=0 go test -c -o "$out/selector.test" ./internal/selector)
	cp "$here/bench/rocm-plugin.sh" "$here/bench/plugin-sizes.sh" "$out/"
	{
		echo "amdrun $(git -C "$here" rev-parse --short HEAD)$(git -C "$here" diff --quiet HEAD -- internal bench || echo '+changes')"
		echo "plugin $(git -C "$PLUGIN" rev-parse --short HEAD 2>/dev/null || echo "at $PLUGIN")"
		echo "built $(date -u +%Y-%m-%dT%H:%MZ) with $(go version | cut -d' ' -f3-)"
	} > "$out/BUILD"
}

if [ -n "${BUILD_ONLY:-}" ]; then
	mkdir -p "$BUILD_ONLY"
	B=$(cd "$BUILD_ONLY" && pwd)
	build "$B"
	echo "built into $B; run there: BINS=$B $B/rocm-plugin.sh [rounds]" >&2
	exit 0
fi
if [ -n "${BINS:-}" ]; then
	[ -d "$BINS" ] || { echo "rocm-plugin.sh: BINS=$BINS is not a directory (make one with BUILD_ONLY=DIR)" >&2; exit 2; }
	B=$(cd "$BINS" && pwd)
	for f in plugin.test selector.test plugin/testdata amdrun/go.mod amdrun/testdata/kfd; do
		[ -e "$B/$f" ] || { echo "rocm-plugin.sh: $B/$f missing (make DIR with BUILD_ONLY=DIR)" >&2; exit 2; }
	done
else
	B="$W/bins"
	build "$B"
fi

raw="${RAW:-$W/raw.txt}" # RAW is written as the rounds go: a cut-short run keeps its lines
: > "$raw"
# plugin BENCH PATTERN ITERATIONS WHO / amdrun PATTERN ITERATIONS: one
# binary's run appended to raw.txt
plugin() {
	(cd "$B/plugin/allocator" && "$B/plugin.test" -test.run XXX -test.bench "$2" -test.benchtime "$3") |
		sed -n "s/^$1\/\([^ ]*\)-[0-9]*[[:space:]].*[[:space:]]\([0-9.]*\) ns\/op.*/$4 \1 \2/p" >> "$raw"
}
amdrun() {
	(cd "$B/amdrun/internal/selector" && "$B/selector.test" -test.run XXX -test.bench "$1" -test.benchtime "$2") |
		sed -n 's/^BenchmarkPluginSizes\/\([^ ]*\)-[0-9]*[[:space:]].*[[:space:]]\([0-9.]*\) ns\/op.*/amdrun \1 \2/p' >> "$raw"
}
load() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime; }
start_load=$(load)
for round in $(seq "$ROUNDS"); do
	echo "round $round of $ROUNDS (load $(load))" >&2
	plugin BenchmarkPlugin 'Plugin$/(mi308|mi210)' "${ITER}x" plugin
	plugin BenchmarkPlugin 'Plugin$/cpx-63/N=8$' "${ITER}x" plugin
	amdrun 'PluginSizes/.*/.*/^(prepared|prepared\+5|model)$' "${ITER}x"
	plugin BenchmarkPluginCold 'PluginCold/(mi308|mi210)' "${COLD_ITER}x" plugin-cold
	plugin BenchmarkPluginCold 'PluginCold/cpx-63/N=8$' "${COLD_ITER}x" plugin-cold
	amdrun 'PluginSizes/.*/.*/^read\+model$' "${COLD_ITER}x"
	plugin BenchmarkPlugin 'Plugin$/cpx-63/N=(56|62)' 1x plugin
	plugin BenchmarkPluginCold 'PluginCold/cpx-63/N=(56|62)' 1x plugin-cold
done
table "$raw" "$(nproc) CPUs; load average at the start $start_load, at the end $(load); $(head -2 "$B/BUILD" 2>/dev/null | tr '\n' ';')"
