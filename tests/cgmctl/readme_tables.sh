#!/bin/sh
# The README's table of CGMALLOC_CONF keys is the output of
# `cgmctl help conf --markdown`, between the conf-table markers.
# Usage: readme_conf.sh [--update] README.md   (CGMCTL names cgmctl)
# Without --update: exit 1, showing the difference, if they differ.
set -eu
: "${CGMCTL:?CGMCTL must name the cgmctl binary (run through make)}"
update=0
if [ "${1:-}" = "--update" ]; then
	update=1
	shift
fi
readme=$1
begin='^<!-- conf-table'
end='^<!-- end conf-table -->'
grep -q "$begin" "$readme" && grep -q "$end" "$readme" ||
	{ echo "readme_conf: $readme has no conf-table markers" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cgm-readme.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$CGMCTL" help conf --markdown >"$tmp/table"
[ -s "$tmp/table" ] || { echo "readme_conf: cgmctl printed no table" >&2; exit 1; }
sed -n "/$begin/,/$end/p" "$readme" | sed '1d;$d' >"$tmp/readme"

if [ "$update" = 1 ]; then
	# Everything up to the first marker, the table, everything from the second.
	sed -n "1,/$begin/p" "$readme" >"$tmp/new"
	cat "$tmp/table" >>"$tmp/new"
	sed -n "/$end/,\$p" "$readme" >>"$tmp/new"
	cat "$tmp/new" >"$readme"
	echo "readme_conf: $readme: table updated"
	exit 0
fi
if ! cmp -s "$tmp/table" "$tmp/readme"; then
	diff -u "$tmp/readme" "$tmp/table" | sed 's/^/  /' >&2 || true
	echo "readme_conf: FAIL: the table in $readme is not \`cgmctl help conf --markdown\`" \
		"(update it with: make readme-conf-update)" >&2
	exit 1
fi
echo "readme_conf: $readme: the configuration table matches cgmctl help conf --markdown ($(wc -l <"$tmp/table") lines)"
