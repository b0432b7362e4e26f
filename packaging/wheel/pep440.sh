#!/bin/sh
# pep440.sh VERSION: amdrun's build version as a PEP 440 version.
#   v0.1.0            -> 0.1.0
#   v0.1.0-5-gabc1234 -> 0.1.0.post5+gabc1234
#   v0.1.0-dirty      -> 0.1.0+dirty ; v0.1.0-5-gabc1234-dirty -> 0.1.0.post5+gabc1234.dirty
#   abc1234[-dirty]   -> 0.0.0+gabc1234[.dirty] (no tag yet)
#   anything else     -> refused
v=${1#v}
dirty=
case $v in *-dirty) dirty=dirty v=${v%-dirty} ;; esac
if printf '%s' "$v" | grep -Eq '^[0-9]+(\.[0-9]+)*$'; then
	out=$v local=
elif printf '%s' "$v" | grep -Eq '^[0-9]+(\.[0-9]+)*-[0-9]+-g[0-9a-f]+$'; then
	base=${v%%-*} rest=${v#*-}
	out=$base.post${rest%%-*} local=${rest#*-}
elif printf '%s' "$v" | grep -Eq '^[0-9a-f]{4,40}$'; then
	out=0.0.0 local=g$v
else
	echo "pep440: cannot map version \"$1\" to PEP 440" >&2
	exit 1
fi
[ -n "$dirty" ] && local=${local:+$local.}$dirty
printf '%s%s\n' "$out" "${local:++$local}"
