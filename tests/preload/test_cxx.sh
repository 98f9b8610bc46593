#!/bin/sh
# A C++ program built without cgmalloc (std::string, std::map, std::thread,
# aligned new), with and without the preload.
. "$(dirname "$0")/lib.sh"

: "${CGM_TEST_BIN:?CGM_TEST_BIN must name the directory of the built programs}"
pl_compare "C++ strings/maps/threads/aligned new" 1 "$CGM_TEST_BIN/cxx_workload"
pl_done
