"""python -m amdrun: run the amdrun binary this wheel installed, with argv.

The binary is in the scripts directory of the scheme the package was
installed in: the environment's (pip install into a venv, or the system),
or the user's (pip install --user: ~/.local/bin). The ranks' default
interpreter is then this one, sys.executable, as torchrun runs its own
(AMDRUN_FROM_PYTHON; --python, $PYTHON_EXEC or an active environment
still choose first).
"""
import os
import sys
import sysconfig


def _scripts():
    """The scripts directories to look in, the installing scheme's first."""
    here = os.path.dirname(os.path.realpath(__file__))
    user = os.name + "_user"
    dirs = []
    for scheme in (None, user):
        try:
            paths = sysconfig.get_paths(scheme) if scheme else sysconfig.get_paths()
        except KeyError:
            continue
        libs = [os.path.realpath(paths[k]) for k in ("purelib", "platlib") if k in paths]
        if any(here.startswith(lib + os.sep) for lib in libs):
            dirs.insert(0, paths["scripts"])
        else:
            dirs.append(paths["scripts"])
    return dirs


def main():
    dirs = _scripts()
    for d in dirs:
        exe = os.path.join(d, "amdrun")
        if os.path.isfile(exe):
            break
    else:
        sys.stderr.write("amdrun: the wheel's binary is missing: not in %s\n" % " nor ".join(dirs))
        sys.exit(1)
    os.environ["AMDRUN_FROM_PYTHON"] = sys.executable
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    main()
