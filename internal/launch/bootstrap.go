package launch

// stackBootstrap is the sitecustomize.py amdrun writes into the job's
// private directory and puts first on every rank's PYTHONPATH, so that it
// runs before the rank's own code with nothing of the user's script
// changed (issue 33). A torch rank (RANK set) that is not the child of
// one blocks amdrun's real-time signal in its main thread, before any
// other thread exists (so every thread started later blocks it too), and
// starts a thread that waits for it (sigwait) and writes every thread's
// stack with faulthandler to its own file, stacks.ATTEMPT.RANK.PID.
// Why this way, each found on torch 1.13 ranks sampled by the stall watch:
// a handler (faulthandler.register) interrupts whichever thread the
// signal lands in, and a system call that is not restarted (poll, a
// connect with a timeout) fails with EINTR, which torch's TCPStore does
// not retry (init_process_group failed); run in a thread that does not
// hold the GIL it reads the frames of a thread that runs Python meanwhile
// (a rank died of SIGSEGV); and after faulthandler's exit it is the
// default action, death. Dumped from Python, the thread holds the GIL:
// every other thread is in C code or waiting, its frames still. A rank
// that holds the GIL in C code (loading a library) answers once it lets
// go. A blocked signal kills nothing: a forked child (a DataLoader
// worker), an exec'd program, a rank at its exit keep it pending. A child
// started afresh sees AMDRUN_STACKS_RANK and registers nothing; the
// agent of a torchrun job has no RANK: its workers, which do, register.
// A second signal, the next one, makes the thread write torch's flight
// recorder (its collectives: _dump_fr_trace, _dump_nccl_trace in older
// releases; without their stack traces, which took torch 2.11 6.5 s to
// symbolise on the H200 machine, against under a millisecond) to AMDRUN_FR followed by the rank, when torch.distributed is
// initialised (an empty file when not): amdrun asks for it on a stall
// (flight_linux.go).
// Then it hands over to the next sitecustomize on sys.path (Debian's, a
// user's), as if it had not been there. It never fails the rank: what it
// cannot do it leaves.
const stackBootstrap = `# Written by amdrun for one job (issue 33); see docs/supervision.md.
import os, sys

def _amdrun_stacks():
    e = os.environ
    prefix, sig, rank = e.get("AMDRUN_STACKS"), e.get("AMDRUN_STACKS_SIGNAL"), e.get("RANK")
    if not prefix or not sig or not rank or not rank.isdigit() or e.get("AMDRUN_STACKS_RANK"):
        return
    import faulthandler, signal, threading
    e["AMDRUN_STACKS_RANK"] = rank
    sig = int(sig)
    f = open("%s.%s.%d" % (prefix, rank, os.getpid()), "ab", buffering=0)
    fr = e.get("AMDRUN_FR")
    sigs = [sig, sig + 1] if fr else [sig]
    signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    def _amdrun_listen():
        while True:
            if signal.sigwait(sigs) == sig:
                faulthandler.dump_traceback(file=f, all_threads=True)
            else:
                _amdrun_fr(fr + rank)
    threading.Thread(target=_amdrun_listen, name="amdrun-stacks", daemon=True).start()

def _amdrun_fr(path):
    data = b""
    try:
        d = sys.modules.get("torch.distributed")
        c = getattr(getattr(sys.modules.get("torch"), "_C", None), "_distributed_c10d", None)
        dump = getattr(c, "_dump_fr_trace", None) or getattr(c, "_dump_nccl_trace", None)
        if d is not None and dump is not None and d.is_initialized():
            data = dump(True, False, False)
    except Exception as x:
        import json
        data = json.dumps({"error": "%s: %s" % (type(x).__name__, x)})
    if isinstance(data, str):
        data = data.encode()
    try:
        with open(path + ".tmp", "wb") as o:
            o.write(data)
        os.replace(path + ".tmp", path)
    except Exception:
        pass

try:
    _amdrun_stacks()
except Exception:
    pass

def _amdrun_next():
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    me = sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize
    except ImportError as e:
        if e.name != "sitecustomize":
            raise
        sys.modules["sitecustomize"] = me

_amdrun_next()
`
