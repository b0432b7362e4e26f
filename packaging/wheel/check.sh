#!/bin/sh
# packaging/wheel/check.sh DIST: install the x86_64 wheel into a fresh venv
# (--system-site-packages, for Debian's python3-torch) with no index, run
# amdrun version, python -m amdrun version, and a 2-rank gloo job whose
# ranks must run on the venv's interpreter without --python; unactivated,
# both choose the venv's python; a --user install runs python -m amdrun.
set -eu
dist=$1
venv=$(mktemp -d)/venv
trap 'rm -rf "${venv%/venv}"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/pip" install -q --no-index "$dist"/amdrun-*-manylinux2014_x86_64.whl
# Not activated: the console script and python -m amdrun both choose the
# venv's interpreter (issue 31).
"$venv/bin/amdrun" --ngpus 0 --dry-run x.py | grep -F "Python:   $venv/bin/python (beside amdrun, in $venv)" ||
	{ echo "wheel check: \$VENV/bin/amdrun did not choose the venv's python" >&2; exit 1; }
"$venv/bin/python" -m amdrun --ngpus 0 --dry-run x.py | grep -F "Python:   $venv/bin/python (python -m amdrun)" ||
	{ echo "wheel check: \$VENV/bin/python -m amdrun did not choose that python" >&2; exit 1; }
# pip install --user: python -m amdrun finds the binary in the user scheme.
user=${venv%/venv}/user
PYTHONUSERBASE=$user /usr/bin/python3 -m pip install -q --user --break-system-packages --no-index "$dist"/amdrun-*-manylinux2014_x86_64.whl
PYTHONUSERBASE=$user /usr/bin/python3 -m amdrun version
. "$venv/bin/activate"
command -v amdrun
[ "$(command -v amdrun)" = "$venv/bin/amdrun" ] || { echo "wheel check: amdrun on PATH is not the venv's" >&2; exit 1; }
amdrun version
python -m amdrun version
[ "$(amdrun version)" = "$(python -m amdrun version)" ]
cat >"${venv%/venv}/rank.py" <<PYEOF
import os, sys
import torch, torch.distributed as dist
want = os.path.realpath("$venv/bin/python")
if os.path.realpath(sys.executable) != want and sys.prefix != "$venv":
    sys.exit("rank ran %s, not the venv's %s" % (sys.executable, want))
dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
assert t.item() == dist.get_world_size() == 2
print("rank", dist.get_rank(), "prefix", sys.prefix, "sum", t.item())
PYEOF
cd "${venv%/venv}"
amdrun --ngpus 0 --nproc-per-node 2 rank.py
