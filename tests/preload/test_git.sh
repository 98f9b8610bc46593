#!/bin/sh
# git creating a repository, committing, branching, merging, gc and fsck:
# every git process preloaded, the hashes compared.
. "$(dirname "$0")/lib.sh"

[ -x /usr/bin/git ] || pl_fail "/usr/bin/git is missing (scripts/install-deps installs git)"
# The workload runs git (and the helpers it spawns) from PATH: keep it to
# the system's.
export PATH=/usr/bin:/bin

# sh, git init, add, commit, gc (which runs pack-objects), ...: many processes.
pl_compare "git init/commit/merge/gc" 10 /bin/sh "$PL_DIR/git_workload.sh"
pl_done
