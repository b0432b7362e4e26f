#!/bin/bash
cd /work/wt/ring/internal/selector
for r in 1 2 3 4 5; do
  for b in 'ring/n=64/N=48$' 'ring/n=64/N=54$' 'ring/n=128/N=8$' 'ring/n=128/N=64$' 'ring/n=256/N=8$' 'ring/n=256/N=128$' 'tree/n=128/N=64$'; do
    for v in before after; do
      /usr/bin/time -f "cpu $v $b %U %S load $(cut -d' ' -f1 /proc/loadavg)" /tmp/ring/sel-$v.test -test.run XXX -test.bench "Distinct/$b" -test.benchtime 10x 2>&1 | grep -E "^cpu|Benchmark" | sed "s/^Benchmark/wall $v Benchmark/"
    done
  done
done
