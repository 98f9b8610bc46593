#!/bin/sh
# python3 (Debian's, not a pyenv one from PATH) running a dict- and
# list-heavy script, with and without the preload.
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x "$PY" ] || pl_fail "$PY is missing (scripts/install-deps installs python3)"

pl_compare "python3 dict/list workload" 1 "$PY" "$PL_DIR/dict_list_workload.py"
# The interpreter's own start-up and imports, a second process shape.
pl_compare "python3 -c imports" 1 "$PY" -c \
	'import json, re, collections, decimal, fractions, sqlite3, hashlib; print(sorted(dir(collections))[:5], decimal.Decimal(1) / 7, hashlib.sha256(b"x" * 10**6).hexdigest())'
pl_done
