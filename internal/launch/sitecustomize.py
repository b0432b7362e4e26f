# Written by amdrun for one job (issue 33); see docs/supervision.md, "How
# ranks answer". A thread sigwaits rather than a handler: a handler makes an
# unrestarted system call fail with EINTR (torch's TCPStore does not retry).
# The flight recorder is dumped without stack traces (torch 2.11 took 6.5 s
# to symbolise them).
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
