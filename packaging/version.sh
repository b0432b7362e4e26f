#!/bin/sh
# packaging/version.sh: the version make stamps into amdrun (main.version),
# the wheels and the .debs: the version of record (const Release in
# cmd/amdrun/internal/version) when HEAD is its tag v<Release> and the
# tree is clean, else <Release>+g<12-digit revision>[.dirty], or
# <Release>+dev outside a git checkout. Every form is a PEP 440 and a
# Debian version as it stands.
set -eu
cd "$(dirname "$0")/.."
rel=$(sed -n 's/^const Release = "\(.*\)"$/\1/p' cmd/amdrun/internal/version/version.go)
[ -n "$rel" ] || { echo "version.sh: no const Release in cmd/amdrun/internal/version/version.go" >&2; exit 1; }
rev=$(git rev-parse --short=12 HEAD 2>/dev/null) || { echo "$rel+dev"; exit 0; }
dirty=
git diff --quiet HEAD -- 2>/dev/null || dirty=.dirty
if [ -z "$dirty" ] && [ "$(git tag --points-at HEAD --list "v$rel")" = "v$rel" ]; then
	echo "$rel"
else
	echo "$rel+g$rev$dirty"
fi
