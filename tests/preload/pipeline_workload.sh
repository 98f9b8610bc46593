#!/bin/sh
# A shell pipeline over about 8 MB (awk, sort with its threads, gzip,
# gunzip, tee, md5sum, wc), run in an empty directory by
# tests/preload/test_pipeline.sh and tests/spill/test_spill_programs.sh.
set -eu
# sort spills to TMPDIR: keep it inside the work directory.
export TMPDIR="$PWD"
awk "BEGIN { for (i = 0; i < 300000; i++)
	printf \"%08d %s\n\", (i * 7919) % 1000003,
	       substr(\"abcdefghijklmnopqrstuvwxyz0123456789\", i % 26 + 1, 5 + i % 11) }" |
	sort -S 4M -k2,2 -k1,1n | gzip -6 | gunzip | tee sorted.txt |
	sort -u -k1,1n | md5sum
wc -l <sorted.txt
md5sum <sorted.txt
gzip -9 -n -c sorted.txt | wc -c
sort -r sorted.txt | head -3
