#!/usr/bin/env bash
# Issue 25's check: every benchmark topology gives the same choices with
# the machine idle and with every CPU busy. The selector's
# TestWriteChoices writes one line per benchmark selection (every
# topology, policy and N that internal/selector/bench_test.go times:
# devices, ring, score, exactness, gap, work, runner-ups); this runs it
# RUNS times as it finds the machine, then RUNS times beside two busy
# loops per CPU (separate processes, so the Go runtime cannot schedule
# around them), and fails when any file differs from the first.
# usage: bench/same-answer.sh [runs]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${1:-2}
W=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$W"
}
trap cleanup EXIT
(cd "$here" && go test -c -o "$W/selector.test" ./internal/selector)
run() { # run NAME: one file of choices
	(cd "$here/internal/selector" && "$W/selector.test" -test.run '^TestWriteChoices$' -choices-out "$W/$1.txt" >/dev/null)
	echo "$1: $(wc -l < "$W/$1.txt") selections, load $(cut -d' ' -f1 /proc/loadavg)"
}
for i in $(seq "$RUNS"); do run "idle-$i"; done
for _ in $(seq $((2 * $(nproc)))); do
	sh -c 'while :; do :; done' &
	pids+=($!)
done
sleep 2
for i in $(seq "$RUNS"); do run "loaded-$i"; done
status=0
for f in "$W"/*.txt; do
	if ! cmp -s "$W/idle-1.txt" "$f"; then
		echo "DIFFERENT: $(basename "$f") vs idle-1.txt" >&2
		diff "$W/idle-1.txt" "$f" | head -20 >&2
		status=1
	fi
done
[ "$status" = 0 ] && echo "identical: $(ls "$W"/*.txt | wc -l) runs of $(wc -l < "$W/idle-1.txt") selections"
exit "$status"
