#!/bin/sh
# packaging/deb/build.sh DIST VERSION GOARCH: amdrun_V_ARCH.deb from the
# dist files, with dpkg-deb: /usr/bin/amdrun, man pages (gzip -n), bash,
# zsh and fish completions, /usr/lib/tmpfiles.d/amdrun.conf and the
# oneshot amdrun-lease-init.service (runs `amdrun lease init` after boot;
# enable it with systemctl enable --now amdrun-lease-init).
set -eu
dist=$1 goarch=${3:-amd64}
# VERSION is packaging/version.sh's, a Debian version as it stands
# (0.4.0, 0.4.0+g86aa27d1b2c3.dirty).
debv=${2#v}
if ! printf '%s' "$debv" | grep -Eq '^[0-9][0-9A-Za-z.+~]*$'; then
	echo "deb: version \"$2\" is not a Debian upstream version (0.4.0+g86aa27d1b2c3)" >&2
	exit 1
fi
rm -f "$dist"/amdrun_*_"$goarch".deb
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
install -D -m 0755 "$dist/amdrun-linux-$goarch" "$root/usr/bin/amdrun"
mkdir -p "$root/usr/share/man/man1"
for m in "$dist"/man/man1/*.1; do gzip -9n <"$m" >"$root/usr/share/man/man1/$(basename "$m").gz"; done
install -D -m 0644 "$dist/completions/amdrun.bash" "$root/usr/share/bash-completion/completions/amdrun"
install -D -m 0644 "$dist/completions/_amdrun" "$root/usr/share/zsh/vendor-completions/_amdrun"
install -D -m 0644 "$dist/completions/amdrun.fish" "$root/usr/share/fish/vendor_completions.d/amdrun.fish"
install -D -m 0644 packaging/tmpfiles.d/amdrun.conf "$root/usr/lib/tmpfiles.d/amdrun.conf"
install -D -m 0644 packaging/deb/amdrun-lease-init.service "$root/usr/lib/systemd/system/amdrun-lease-init.service"
# copyright: machine-readable (DEP-5), the license's full text as its
# paragraph (blank lines as " .").
install -d "$root/usr/share/doc/amdrun"
{
	printf 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n'
	printf 'Upstream-Name: amdrun\nSource: https://github.com/amdrun/amdrun\n\n'
	printf 'Files: *\nCopyright: amdrun developers\nLicense: Apache-2.0\n'
	sed 's/^[[:space:]]*$/./; s/^/ /' LICENSE
} >"$root/usr/share/doc/amdrun/copyright"
mkdir -p "$root/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<CTL
Package: amdrun
Version: $debv
Architecture: $goarch
Maintainer: amdrun developers <amdrun@users.noreply.github.com>
Installed-Size: $size
Section: utils
Priority: optional
Homepage: https://github.com/amdrun/amdrun
Description: launcher for multi-GPU PyTorch jobs
 amdrun starts torchrun-compatible worker processes on the best-connected
 free set of GPUs of a node: it reads the GPU topology, leases the devices,
 binds ranks to NUMA nodes and supervises the workers.
CTL
(cd "$root" && find usr -type f | LC_ALL=C sort | xargs md5sum >DEBIAN/md5sums)
find "$root" -exec touch -h -d "@${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}" {} +
dpkg-deb --root-owner-group -Zxz --build "$root" "$dist/amdrun_${debv}_$goarch.deb" >/dev/null
echo "$dist/amdrun_${debv}_$goarch.deb"
