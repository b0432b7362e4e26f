#!/usr/bin/env bash
# on the lent host: the plugin rounds from prebuilt binaries, then the
# same-answer check (TestWriteChoices idle and beside 2 busy loops a CPU,
# against the file the 2-vCPU VM wrote)
set -u
B=$(cd "$(dirname "$0")" && pwd)
for t in topology-parsing-mi308 topo-mi300-cpx topo-mi210-xgmi-pcie; do tar xzf testdata/kfd/$t.tar.gz -C "$B/plugin/testdata"; done
nproc; uptime
R=$OUT/same; mkdir -p "$R"
run() { (cd internal/selector && "$B/selector.test" -test.run '^TestWriteChoices$' -choices-out "$R/$1.txt" >/dev/null); echo "$1: $(wc -l < "$R/$1.txt") selections, load $(cut -d' ' -f1 /proc/loadavg)"; }
run idle-1; run idle-2
pids=(); for _ in $(seq $((2*$(nproc)))); do sh -c 'while :; do :; done' & pids+=($!); done
sleep 2; run loaded-1; run loaded-2
kill "${pids[@]}"
for f in "$R"/*.txt; do cmp -s "$B/choices-vm.txt" "$f" && echo "$(basename $f): identical to the VM's" || { echo "$(basename $f): DIFFERENT"; diff "$B/choices-vm.txt" "$f" | head; }; done
sleep 3; uptime
RAW=$OUT/plugin-raw.txt BINS="$B" timeout 480 "$B/rocm-plugin.sh" 5 > $OUT/plugin-table.md 2>$OUT/plugin-err.txt; echo "plugin rc $?"
cat $OUT/plugin-table.md; tail -3 $OUT/plugin-err.txt
