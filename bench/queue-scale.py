#!/usr/bin/env python3
"""The queue at scale (issue 36.7), for one or more amdrun binaries, interleaved.

start:  the wall time of a plain 1-device job (`amdrun --ngpus 1 --no-python
        /bin/true`, no --wait) while root's job holds 7 of the example
        topology's 8 devices and N `--wait` jobs of throwaway users wait for all
        8 (so the plain job starts by backfill), for each N of --waiters.
storm:  --jobs `--wait` jobs of --users throwaway users, 1, 2, 4 or 8 devices
        each (seeded), submitted at once, each holding its devices --hold
        seconds: how many started, overlaps (two jobs on one device at once,
        from what each job's rank logged), FIFO order among queued tickets
        (a later ticket that started before an earlier one asking for no more
        devices, by more than the queue's 3 s patience: not explained by
        backfill), and the total time.

Run as root on a quiet machine. The users (queue-bNN) are made with useradd
and removed at the end; everything else lives in a temporary directory.
Every command is an argv list: nothing is passed through a shell.

usage: bench/queue-scale.py [--waiters 0,16,96,256] [--tries 3] [--jobs 200]
           [--users 13] [--hold 0.3] [--limit 300] [--rounds 1] LABEL=AMDRUN...
"""
import argparse
import glob
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

PER_USER = 16  # MaxTicketsPerUser
HERE = os.path.dirname(os.path.abspath(__file__))


def useradd(name):
    subprocess.run(["useradd", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", name], check=True)
    out = subprocess.run(["id", "-u", name], check=True, capture_output=True, text=True).stdout
    gid = subprocess.run(["id", "-g", name], check=True, capture_output=True, text=True).stdout
    return name, int(out), int(gid)


def userdel(name):
    subprocess.run(["userdel", name], capture_output=True)
    subprocess.run(["groupdel", name], capture_output=True)


class Node:
    """A temporary node: the binaries, the rank script, a lease directory per run."""

    def __init__(self, work, binaries):
        self.work = work
        self.bins = {}
        for label, path in binaries:
            dst = os.path.join(work, "amdrun-" + label)
            shutil.copyfile(path, dst)
            os.chmod(dst, 0o755)
            self.bins[label] = dst
        self.rank = os.path.join(work, "queue_rank.py")
        shutil.copyfile(os.path.join(HERE, "queue_rank.py"), self.rank)
        os.chmod(self.rank, 0o644)
        self.runs = 0

    def env(self, leases):
        return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/", "LANG": "C", "OMP_NUM_THREADS": "1",
                "AMDRUN_LEASE_DIR": leases, "XDG_CACHE_HOME": os.path.join(self.work, "no-cache")}

    def leases(self, label):
        self.runs += 1
        d = os.path.join(self.work, "leases-%d" % self.runs)
        subprocess.run([self.bins[label], "--source", "example", "lease", "init", "--lease-dir", d],
                       env=self.env(d), check=True, capture_output=True)
        return d

    def start(self, label, leases, user, args, **kw):
        argv = [self.bins[label], "--source", "example"] + args
        extra = {}
        if user is not None:
            extra = dict(user=user[1], group=user[2], extra_groups=[])
        return subprocess.Popen(argv, env=self.env(leases), cwd="/", stdin=subprocess.DEVNULL, **extra, **kw)


def proc_locks():
    """(dev major, minor, inode) of every flock /proc/locks lists."""
    out = set()
    with open("/proc/locks") as f:
        for line in f:
            w = line.split()
            if len(w) >= 6 and w[1] == "FLOCK":
                maj, mnr, ino = w[5].split(":")
                out.add((int(maj, 16), int(mnr, 16), int(ino)))
    return out


def live(paths):
    """How many of paths are locked now."""
    locks = proc_locks()
    n = 0
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            continue
        if (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino) in locks:
            n += 1
    return n


def wait_until(cond, limit):
    end = time.time() + limit
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


def stop(procs, sig=signal.SIGTERM, limit=60):
    for p in procs:
        if p.poll() is None:
            p.send_signal(sig)
    end = time.time() + limit
    for p in procs:
        try:
            p.wait(max(end - time.time(), 0.1))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def start_time(node, label, users, n, tries):
    """Seconds a plain 1-device job takes with n waiters for 8 devices queued."""
    leases = node.leases(label)
    devs = glob.glob(os.path.join(leases, "gpu*.lock"))
    holder = node.start(label, leases, None, ["--ngpus", "7", "--nproc-per-node", "1", "--no-python", "/bin/sleep", "3600"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    waiters = []
    try:
        if not wait_until(lambda: live(devs) == 7, 60):
            return {"error": "the holding job did not lease 7 devices"}
        t0 = time.time()
        for i in range(n):
            waiters.append(node.start(label, leases, users[i % len(users)],
                                      ["--wait=600s", "--ngpus", "8", "--nproc-per-node", "1", "--no-python", "/bin/true"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        queue = os.path.join(leases, "queue")
        if not wait_until(lambda: live(glob.glob(os.path.join(queue, "*.lock"))) >= n, 110):
            return {"error": "only %d of %d waiters queued in 110 s" % (live(glob.glob(os.path.join(queue, "*.lock"))), n)}
        queued = time.time() - t0
        took, failed = [], []
        for _ in range(tries):
            t = time.time()
            p = node.start(label, leases, None, ["--ngpus", "1", "--no-python", "/bin/true"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            _, err = p.communicate(timeout=120)
            if p.returncode != 0:
                failed.append("exit %d after %.2f s: %s" % (p.returncode, time.time() - t, err.strip()))
                continue
            took.append(time.time() - t)
        res = {"ok": len(took), "tries": tries, "queued_in": queued, "failed": failed}
        if took:
            res.update(median=statistics.median(took), max=max(took))
        return res
    finally:
        stop(waiters)
        stop([holder])


def observe(queue, seen):
    """Records each live ticket's (inode change time in seconds, pid), the queue's order."""
    for path in glob.glob(os.path.join(queue, "*.lock")):
        parts = os.path.basename(path).split("-")
        try:
            pid = int(parts[1])
            if pid not in seen:
                seen[pid] = (int(os.stat(path).st_ctime), pid)
        except (IndexError, ValueError, OSError):
            pass


def storm(node, label, users, jobs, hold, limit, seed):
    leases = node.leases(label)
    logs = tempfile.mkdtemp(prefix="log-", dir=node.work)
    os.chmod(logs, 0o777)
    rng = random.Random(seed)
    need = [rng.choice([1, 1, 2, 2, 4, 8]) for _ in range(jobs)]
    queue = os.path.join(leases, "queue")
    seen = {}
    procs = []
    t0 = time.time()
    for j in range(jobs):
        procs.append(node.start(label, leases, users[j % len(users)],
                                ["--wait=%ds" % limit, "--ngpus", str(need[j]), "--nproc-per-node", "1", "--no-python",
                                 "/usr/bin/python3", node.rank, logs, str(j), str(hold)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        observe(queue, seen)
    while time.time() - t0 < limit + 10 and any(p.poll() is None for p in procs):
        observe(queue, seen)
        time.sleep(0.1)
    total = time.time() - t0
    stop(procs, signal.SIGKILL)
    runs = {}
    for j in range(jobs):
        try:
            with open(os.path.join(logs, str(j))) as f:
                s, e, devs = f.read().split()
            runs[j] = (float(s), float(e), [int(d) for d in devs.split(",")])
        except (OSError, ValueError):
            pass
    overlaps = 0
    for a in runs:
        for b in runs:
            if a < b and set(runs[a][2]) & set(runs[b][2]) and runs[a][0] < runs[b][1] and runs[b][0] < runs[a][1]:
                overlaps += 1
    order = {j: seen[p.pid] for j, p in enumerate(procs) if p.pid in seen}
    backfilled, unexplained = 0, 0
    for a in order:
        for b in order:
            if order[a] < order[b] and a in runs and b in runs and runs[b][0] < runs[a][0]:
                if need[a] > need[b]:
                    backfilled += 1
                elif runs[a][0] - runs[b][0] > 3.5:
                    unexplained += 1
    return {"started": len(runs), "jobs": jobs, "exit0": sum(p.returncode == 0 for p in procs),
            "overlaps": overlaps, "queued": len(order), "backfilled": backfilled, "unexplained": unexplained,
            "total": total}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binaries", nargs="+", metavar="LABEL=AMDRUN")
    ap.add_argument("--waiters", default="0,16,96,256")
    ap.add_argument("--tries", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--users", type=int, default=13)
    ap.add_argument("--hold", type=float, default=0.3)
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--skip", default="", help="start or storm: leave that part out")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("queue-scale: run as root (it makes throwaway users)")
    binaries = []
    for b in a.binaries:
        label, sep, path = b.partition("=")
        if not sep or not os.path.isfile(path):
            sys.exit("queue-scale: %r is not LABEL=PATH to an amdrun binary" % b)
        binaries.append((label, path))
    waiters = [int(x) for x in a.waiters.split(",") if x]
    nusers = max([(n + PER_USER - 1) // PER_USER for n in waiters] + [a.users, 1])
    work = tempfile.mkdtemp(prefix="queue-bench-")
    os.chmod(work, 0o755)
    tag = os.urandom(2).hex()
    users = []
    try:
        for i in range(nusers):
            users.append(useradd("queue-b%s%02d" % (tag, i)))
        node = Node(work, binaries)
        print("date\tmachine\tbinary\tpart\tN\tresult", flush=True)
        machine = "%d vCPUs" % os.cpu_count()
        for r in range(a.rounds):
            if a.skip != "start":
                for n in waiters:
                    for label, _ in binaries:
                        res = start_time(node, label, users[:max((n + PER_USER - 1) // PER_USER, 1)], n, a.tries)
                        print("%s\t%s\t%s\tstart\t%d\t%s" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), machine, label, n, json.dumps(res)), flush=True)
            if a.skip != "storm":
                for label, _ in binaries:
                    res = storm(node, label, users[:a.users], a.jobs, a.hold, a.limit, seed=r)
                    print("%s\t%s\t%s\tstorm\t%d\t%s" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), machine, label, a.jobs, json.dumps(res)), flush=True)
    finally:
        for name, _, _ in users:
            userdel(name)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
