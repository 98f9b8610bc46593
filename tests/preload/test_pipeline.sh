#!/bin/sh
# A shell pipeline over about 8 MB (tests/preload/pipeline_workload.sh:
# awk, sort with its threads, gzip, gunzip, tee, md5sum, wc), every
# process of it preloaded.
. "$(dirname "$0")/lib.sh"

export PATH=/usr/bin:/bin

pl_compare "sort | gzip | gunzip | md5sum pipeline" 12 /bin/sh "$PL_DIR/pipeline_workload.sh"
pl_done
