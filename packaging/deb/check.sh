#!/bin/sh
# packaging/deb/check.sh DEB: as root, dpkg -i the package, check every file
# is in place (dpkg -L), man amdrun renders, the unit's ExecStart is
# `/usr/bin/amdrun lease init`, amdrun version runs; dpkg -r after.
set -eu
deb=$1
[ "$(id -u)" = 0 ] || { echo "deb check: needs root (dpkg -i); skipped" >&2; exit 0; }
dpkg -i "$deb" >/dev/null
trap 'dpkg -r amdrun >/dev/null' EXIT
for f in /usr/bin/amdrun /usr/share/man/man1/amdrun.1.gz /usr/share/man/man1/amdrun-lease-init.1.gz \
	/usr/share/bash-completion/completions/amdrun /usr/share/zsh/vendor-completions/_amdrun \
	/usr/share/fish/vendor_completions.d/amdrun.fish /usr/lib/tmpfiles.d/amdrun.conf \
	/usr/lib/systemd/system/amdrun-lease-init.service; do
	dpkg -L amdrun | grep -qx "$f" || { echo "deb check: dpkg -L lacks $f" >&2; exit 1; }
	[ -f "$f" ] || { echo "deb check: $f not installed" >&2; exit 1; }
done
man -P cat amdrun 2>/dev/null | grep -q "best-connected" || { echo "deb check: man amdrun does not render" >&2; exit 1; }
grep -qx 'ExecStart=/usr/bin/amdrun lease init' /usr/lib/systemd/system/amdrun-lease-init.service
/usr/bin/amdrun version
echo "deb check: $(basename "$deb") installs $(dpkg -L amdrun | wc -l) paths, man renders, ExecStart ok"
