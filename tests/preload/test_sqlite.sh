#!/bin/sh
# sqlite3 on an in-memory database of 200,000 rows, with and without the
# preload.
. "$(dirname "$0")/lib.sh"

SQLITE=/usr/bin/sqlite3
[ -x "$SQLITE" ] || pl_fail "$SQLITE is missing (scripts/install-deps installs sqlite3)"

pl_compare "sqlite3 200k rows in memory" 1 "$SQLITE" -batch -bail :memory: \
	".read $PL_DIR/sqlite_workload.sql"
pl_done
