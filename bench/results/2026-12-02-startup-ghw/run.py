import subprocess, time, statistics, sys, os, json
bins = ['old', 'ghw', 'new']
d = os.path.dirname(os.path.abspath(__file__))
r = {b: {1: [], 8: []} for b in bins}
for i in range(int(sys.argv[1])):
    for n in (1, 8):
        order = bins if i % 2 == 0 else bins[::-1]
        for b in order:
            t = time.perf_counter()
            p = subprocess.run([os.path.join(d, b), '--no-python', '--ngpus', '0', '--nproc-per-node', str(n), 'true'], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            r[b][n].append(time.perf_counter() - t)
            if p.returncode != 0:
                print(b, n, p.returncode, p.stderr[-300:]); sys.exit(1)
out = os.environ.get('OUT', '/tmp')
json.dump(r, open(os.path.join(out, 'wholecmd.json'), 'w'))
for n in (1, 8):
    m = {b: statistics.median(r[b][n]) * 1e3 for b in bins}
    print("N=%d " % n + " ".join("%s %.2f ms" % (b, m[b]) for b in bins) + "  ghw/old %.3f new/old %.3f new/ghw %.3f" % (m['ghw'] / m['old'], m['new'] / m['old'], m['new'] / m['ghw']))
