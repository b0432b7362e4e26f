#!/bin/sh
# packaging/wheel/build.sh DIST VERSION: the manylinux wheels, built offline
# with Debian's setuptools + wheel (python3-setuptools, python3-wheel) from
# the static binaries make dist left in DIST (tag py3-none-manylinux2014_ARCH,
# the same platform as manylinux_2_17; wheel 0.38 cannot write the dotted pair). Each wheel carries the binary
# in amdrun-V.data/scripts/ (pip puts it on the environment's PATH) and a
# tiny amdrun package whose __main__ execs it (python -m amdrun), and
# LICENSE in its .dist-info. VERSION is packaging/version.sh's, already a
# PEP 440 version (0.4.0, 0.4.0+g86aa27d1b2c3.dirty).
set -eu
dist=$1
pyver=${2#v}
if ! printf '%s' "$pyver" | grep -Eq '^[0-9]+(\.[0-9]+)*(\+[a-z0-9]+(\.[a-z0-9]+)*)?$'; then
	echo "wheel: version \"$2\" is not a PEP 440 release with an optional local part (0.4.0+g86aa27d1b2c3)" >&2
	exit 1
fi
PY=${PYTHON:-/usr/bin/python3}
here=$(pwd)
rm -f "$dist"/amdrun-*.whl
for pair in amd64:x86_64 arm64:aarch64; do
	goarch=${pair%%:*} arch=${pair#*:}
	stage=$(mktemp -d)
	cp -r packaging/wheel/amdrun "$stage/"
	cp LICENSE "$stage/"
	mkdir -p "$stage/bin"
	cp "$dist/amdrun-linux-$goarch" "$stage/bin/amdrun"
	cat >"$stage/setup.py" <<PYEOF
import os
from setuptools import setup
from distutils.command.build_scripts import build_scripts


class copy_scripts(build_scripts):
    # The script is a static binary: copy it as is (setuptools would read
    # it as Python to rewrite a #! line).
    def run(self):
        self.mkpath(self.build_dir)
        for s in self.scripts:
            self.copy_file(s, os.path.join(self.build_dir, os.path.basename(s)))


setup(
    cmdclass={"build_scripts": copy_scripts},
    name="amdrun",
    version="$pyver",
    description="Launch multi-GPU PyTorch jobs on the best-connected free GPUs (a torchrun replacement)",
    license="Apache-2.0",
    license_files=["LICENSE"],
    classifiers=["License :: OSI Approved :: Apache Software License"],
    packages=["amdrun"],
    scripts=["bin/amdrun"],
    python_requires=">=3.8",
)
PYEOF
	(cd "$stage" && SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(cd "$here" && git log -1 --format=%ct)} \
		$PY setup.py -q bdist_wheel --python-tag py3 \
		--plat-name "manylinux2014_$arch" -d "$here/$dist" >/dev/null)
	rm -rf "$stage"
done
ls "$dist"/*.whl
