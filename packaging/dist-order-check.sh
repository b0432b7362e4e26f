#!/bin/sh
# packaging/dist-order-check.sh DIST: make deb, make wheel and make dist,
# in that order, into DIST (emptied first): each leaves the others' files,
# SHA256SUMS names exactly every other file in DIST and checks, and the
# license is in DIST, in each wheel's .dist-info and in each .deb's
# copyright file.
set -eu
dist=$1
rm -rf "$dist"
for t in deb wheel dist; do make -s "$t" DIST="$dist" >/dev/null; done
fail() { echo "dist order check: $*" >&2; exit 1; }
for f in LICENSE amdrun-linux-amd64 amdrun-linux-arm64 amdrun-darwin-arm64; do
	[ -f "$dist/$f" ] || fail "$f missing"
done
[ "$(ls "$dist"/*.whl | wc -l)" = 2 ] || fail "want 2 wheels after make dist: $(ls "$dist")"
[ "$(ls "$dist"/*.deb | wc -l)" = 2 ] || fail "want 2 .debs after make dist: $(ls "$dist")"
listed=$(cut -d' ' -f3- "$dist/SHA256SUMS" | LC_ALL=C sort)
present=$(cd "$dist" && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort)
[ "$listed" = "$present" ] || fail "SHA256SUMS does not name every file: listed
$listed
present
$present"
(cd "$dist" && sha256sum -c --quiet SHA256SUMS) || fail "sha256sum -c"
for w in "$dist"/*.whl; do
	/usr/bin/python3 - "$w" <<'PYEOF' || fail "$w: no Apache License in its .dist-info"
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
lic = [n for n in z.namelist() if ".dist-info/" in n and n.endswith("LICENSE")]
assert lic and b"Apache License" in z.read(lic[0]), z.namelist()
assert b"License: Apache-2.0" in z.read([n for n in z.namelist() if n.endswith("/METADATA")][0])
PYEOF
done
for d in "$dist"/*.deb; do
	dpkg-deb --fsys-tarfile "$d" | tar -xO ./usr/share/doc/amdrun/copyright | grep -q 'Apache License' ||
		fail "$d: no Apache License in its copyright file"
done
echo "dist order check: deb, wheel, dist: $(wc -l <"$dist/SHA256SUMS") files summed, license in dist, wheels and .debs"
