#!/bin/sh
# A program built without cgmalloc that dlopen()s libraries which allocate
# (tests/libdlalloc.so and zlib), with and without the preload.
. "$(dirname "$0")/lib.sh"

: "${CGM_TEST_BIN:?CGM_TEST_BIN must name the directory of the built programs}"
: "${CGM_DLALLOC:?CGM_DLALLOC must name libdlalloc.so}"
pl_compare "dlopen of allocating libraries" 1 "$CGM_TEST_BIN/dlopen_main" "$CGM_DLALLOC"
pl_done
