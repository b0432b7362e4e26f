# Torch's flight recorder dumps, read for amdrun (issue 33): one JSON line per
# dump named in argv (NAME=FD). The unpickler builds only plain values: a dump
# may be another user's.
import json, pickle, sys

class Plain(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError("refused %s.%s" % (module, name))

def ranks(v):
    try:
        return [int(r) for r in (json.loads(v) if isinstance(v, str) else v)]
    except Exception:
        return None

for arg in sys.argv[1:]:
    path, fd = arg.rsplit("=", 1)
    try:
        with open(int(fd), "rb") as f:
            raw = f.read(256 << 20)
        d = json.loads(raw) if raw[:1] == b"{" else Plain(__import__("io").BytesIO(raw)).load()
        if d.get("error"):
            raise RuntimeError("the rank could not dump: " + str(d["error"]))
        out = []
        for e in d.get("entries") or []:
            pg = e.get("process_group") or ["", ""]
            out.append({"pg": str(pg[0]), "desc": str(pg[1]) if len(pg) > 1 else "", "pg_id": str(e.get("pg_id", "")),
                "seq": int(e.get("collective_seq_id") or 0), "p2p": bool(e.get("is_p2p")),
                "op": str(e.get("profiling_name", "")), "state": str(e.get("state", "")),
                "in": e.get("input_sizes") or [], "out": e.get("output_sizes") or []})
        pgs = {}
        for k, v in (d.get("pg_config") or {}).items():
            r = ranks(v.get("ranks")) if isinstance(v, dict) else None
            if r is not None:
                pgs[str(k)] = r
        done = {}
        for k, v in (d.get("pg_status") or {}).items():
            if isinstance(v, dict) and isinstance(v.get("last_completed_collective"), int):
                done[str(k)] = v["last_completed_collective"]
        print(json.dumps({"file": path, "entries": out, "pgs": pgs, "completed": done}))
    except Exception as e:
        print(json.dumps({"file": path, "error": "%s: %s" % (type(e).__name__, e)}))
