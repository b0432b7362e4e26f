import importlib.util as u, os, re
s = u.find_spec("torch")
if s and s.submodule_search_locations:
    p = os.path.join(list(s.submodule_search_locations)[0], "version.py")
    try:
        m = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", open(p).read())
        print(m.group(1) if m else "")
    except OSError:
        pass
