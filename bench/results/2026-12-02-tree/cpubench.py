import os, subprocess, statistics, sys, json
benches = [
 ("CPXTreeAllN", "^BenchmarkCPXTreeAllN$", 30),
 ("16Devices/tree/N=8", "^Benchmark16Devices$/^tree$/^N=8$", 150),
 ("16Devices/ring/N=8", "^Benchmark16Devices$/^ring$/^N=8$", 40),
 ("PluginSizes/mi308-32/N=8/prepared", "^BenchmarkPluginSizes$/^mi308-32$/^N=8$/^prepared$", 30000),
 ("PluginSizes/cpx-63/N=56/prepared", "^BenchmarkPluginSizes$/^cpx-63$/^N=56$/^prepared$", 20000),
 ("Distinct/tree/n=128/N=8", "^BenchmarkDistinct$/^tree$/^n=128$/^N=8$", 30),
 ("Distinct/tree/n=128/N=64", "^BenchmarkDistinct$/^tree$/^n=128$/^N=64$", 30),
 ("Distinct/tree/n=256/N=8", "^BenchmarkDistinct$/^tree$/^n=256$/^N=8$", 12),
 ("Distinct/tree/n=256/N=128", "^BenchmarkDistinct$/^tree$/^n=256$/^N=128$", 12),
 ("Distinct/ring/n=128/N=64", "^BenchmarkDistinct$/^ring$/^n=128$/^N=64$", 20),
]
bins = sys.argv[2].split(',')
os.chdir(os.environ.get('SELECTOR_DIR', 'internal/selector'))
env = dict(os.environ, GOMAXPROCS="1")
res = {}
loads = []
for i in range(int(sys.argv[1])):
    order = bins if i % 2 == 0 else bins[::-1]
    for name, rx, n in benches:
        for t in order:
            p = subprocess.Popen([os.path.join(os.environ["BIN_DIR"], t + ".test"), "-test.run", "XXX", "-test.bench", rx, "-test.benchtime", "%dx" % n],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            _, status, ru = os.wait4(p.pid, 0)
            res.setdefault(name, {}).setdefault(t, []).append((ru.ru_utime + ru.ru_stime) / n)
    loads.append(os.getloadavg()[0])
    json.dump({"res": res, "loads": loads}, open('cpubench.json', 'w'))
for k, v in res.items():
    a = statistics.median(v[bins[0]])
    print("%-36s" % k, " ".join("%s %9.1fus (%.3f)" % (t, statistics.median(v[t]) * 1e6, statistics.median(v[t]) / a) for t in bins))
print("loads", min(loads), max(loads))
