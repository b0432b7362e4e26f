"""ghw's cost to a user, with and without it, interleaved (issue 34.1).

usage: run.py DIR ROUNDS [--gpu]   (DIR holds the binaries 'noghw' and 'ghw')

Each round, in alternating order (reversed every other round), for each
binary: the package initialisation of one process (GODEBUG=inittrace=1
amdrun --version, the clock times summed), the whole
`amdrun --no-python --ngpus 0 --nproc-per-node N true` for N = 1 and 8,
and the time from exec to the last rank's first line of user code (a
script whose first line records time.time_ns()): CPU ranks, N = 1 and 8,
and with --gpu one rank on one GPU. Medians to stdout, raw seconds to
$OUT/raw.json.
"""
import json, os, re, statistics, subprocess, sys, tempfile, time

d, rounds = sys.argv[1], int(sys.argv[2])
gpu = '--gpu' in sys.argv
bins = ['noghw', 'ghw']
py = os.environ.get('PY', sys.executable)
tmp = tempfile.mkdtemp()
env = dict(os.environ, OMP_NUM_THREADS='1', AMDRUN_LEASE_DIR=os.path.join(tmp, 'leases'))
os.makedirs(env['AMDRUN_LEASE_DIR'])
first = os.path.join(tmp, 'first.py')
with open(first, 'w') as f:
    f.write('import os, sys, time; open(os.path.join(sys.argv[1], os.environ["RANK"]), "w").write(str(time.time_ns()))\n')
inits = re.compile(r'^init \S+ @\S+ ms, ([0-9.]+) ms clock', re.M)


def init_ms(b):
    p = subprocess.run([os.path.join(d, b), '--version'], env=dict(env, GODEBUG='inittrace=1'), capture_output=True, text=True)
    got = [float(x) for x in inits.findall(p.stderr)]
    return sum(got) / 1e3, len(got)


def whole(b, n):
    t = time.perf_counter()
    p = subprocess.run([os.path.join(d, b), '--no-python', '--ngpus', '0', '--nproc-per-node', str(n), 'true'], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if p.returncode:
        sys.exit('%s whole N=%d: %s' % (b, n, p.stderr[-300:]))
    return time.perf_counter() - t


def first_code(b, args):
    out = tempfile.mkdtemp(dir=tmp)
    t0 = time.time_ns()
    p = subprocess.run([os.path.join(d, b)] + args + ['--python', py, first, out], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if p.returncode:
        sys.exit('%s %s: %s' % (b, args, p.stderr[-300:]))
    return (max(int(open(os.path.join(out, f)).read()) for f in os.listdir(out)) - t0) / 1e9


cases = {'init': None, 'whole N=1': ('w', 1), 'whole N=8': ('w', 8),
         'first code, CPU N=1': ['--ngpus', '0', '--nproc-per-node', '1'],
         'first code, CPU N=8': ['--ngpus', '0', '--nproc-per-node', '8']}
if gpu:
    cases['first code, 1 GPU'] = ['--ngpus', '1']
r = {c: {b: [] for b in bins} for c in cases}
npk = {}
for i in range(rounds):
    for c, how in cases.items():
        for b in (bins if i % 2 == 0 else bins[::-1]):
            if c == 'init':
                s, npk[b] = init_ms(b)
            elif c.startswith('whole'):
                s = whole(b, how[1])
            else:
                s = first_code(b, how)
            r[c][b].append(s)
json.dump({'rounds': rounds, 'packages': npk, 'seconds': r}, open(os.path.join(os.environ.get('OUT', tmp), 'raw.json'), 'w'))
print('packages initialised:', npk)
for c in cases:
    m = {b: statistics.median(r[c][b]) * 1e3 for b in bins}
    print('%-22s noghw %8.3f ms  ghw %8.3f ms  ghw-noghw %+7.3f ms  ghw/noghw %.3f' % (c, m['noghw'], m['ghw'], m['ghw'] - m['noghw'], m['ghw'] / m['noghw']))
