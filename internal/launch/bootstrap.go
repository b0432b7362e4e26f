package launch

// stackBootstrap is the sitecustomize.py amdrun writes into the job's
// private directory and puts first on every rank's PYTHONPATH, so that it
// runs before the rank's own code with nothing of the user's script
// changed (issue 33). A torch rank (RANK set) that is not the child of
// one registers faulthandler on amdrun's real-time signal: every thread's
// stack goes to its own file, stacks.ATTEMPT.RANK.PID, when amdrun sends
// it, written by faulthandler's C handler, so that a rank blocked in a
// collective (no Python code running) answers too, and a handler that
// was there before still runs (chain; not the default action, death).
// Only a thread of the bootstrap's own takes the signal (every other
// thread blocks it): a signal that lands in a thread blocked in a system
// call that is not restarted (poll, a connect with a timeout) makes it
// fail with EINTR, which torch 1.13's TCPStore does not retry
// ("RuntimeError: Interrupted system call" in init_process_group, seen
// with the stall watch's sampling). A forked child (a DataLoader
// worker) drops the registration; a child started afresh sees
// AMDRUN_STACKS_RANK and registers nothing. The agent of a torchrun job
// has no RANK: its workers, which do, register. Then it hands over to
// the next sitecustomize on sys.path (Debian's, a user's), as if it had
// not been there. It never fails the rank: what it cannot do it leaves.
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
    # Chained to a handler that was there; never to the default action,
    # which is to die.
    chain = signal.getsignal(sig) not in (signal.SIG_DFL, signal.SIG_IGN, None)
    f = open("%s.%s.%d" % (prefix, rank, os.getpid()), "ab", buffering=0)
    faulthandler.register(sig, file=f, all_threads=True, chain=chain)
    # Only _amdrun_listen's thread takes the signal: every other thread,
    # started from this one (which blocks it now) or from its threads,
    # blocks it, so that no system call of the rank's own is interrupted
    # (torch 1.13's TCPStore fails on EINTR).
    signal.pthread_sigmask(signal.SIG_BLOCK, [sig])
    def _amdrun_listen():
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        threading.Event().wait()
    threading.Thread(target=_amdrun_listen, name="amdrun-stacks", daemon=True).start()
    def child():
        faulthandler.unregister(sig)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=child)

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
