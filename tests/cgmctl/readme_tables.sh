#!/bin/sh
# The README's generated tables: the CGMALLOC_CONF keys are the output of
# `cgmctl help conf --markdown` between the conf-table markers, a group's
# files that of `cgmctl help files --markdown` between the files-table
# markers.
# Usage: readme_tables.sh [--update] README.md   (CGMCTL names cgmctl)
# Without --update: exit 1, showing the difference, if one differs.
set -eu
: "${CGMCTL:?CGMCTL must name the cgmctl binary (run through make)}"
update=0
if [ "${1:-}" = "--update" ]; then
	update=1
	shift
fi
readme=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cgm-readme.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
status=0

# table NAME TOPIC: the table between <!-- NAME ... --> and <!-- end NAME -->.
table() {
	name=$1
	topic=$2
	begin="^<!-- $name"
	end="^<!-- end $name -->"
	grep -q "$begin" "$readme" && grep -q "$end" "$readme" ||
		{ echo "readme_tables: $readme has no $name markers" >&2; status=1; return; }
	"$CGMCTL" help "$topic" --markdown >"$tmp/table"
	[ -s "$tmp/table" ] || { echo "readme_tables: cgmctl help $topic printed no table" >&2; status=1; return; }
	sed -n "/$begin/,/$end/p" "$readme" | sed '1d;$d' >"$tmp/readme"
	if [ "$update" = 1 ]; then
		# Everything up to the first marker, the table, everything from the second.
		sed -n "1,/$begin/p" "$readme" >"$tmp/new"
		cat "$tmp/table" >>"$tmp/new"
		sed -n "/$end/,\$p" "$readme" >>"$tmp/new"
		cat "$tmp/new" >"$readme"
		echo "readme_tables: $readme: $name updated"
		return
	fi
	if ! cmp -s "$tmp/table" "$tmp/readme"; then
		diff -u "$tmp/readme" "$tmp/table" | sed 's/^/  /' >&2 || true
		echo "readme_tables: FAIL: the $name in $readme is not \`cgmctl help $topic --markdown\`" \
			"(update it with: make readme-tables-update)" >&2
		status=1
		return
	fi
	echo "readme_tables: $readme: $name matches cgmctl help $topic --markdown ($(wc -l <"$tmp/table") lines)"
}

table conf-table conf
table files-table files
exit $status
