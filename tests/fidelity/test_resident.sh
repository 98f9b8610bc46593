#!/bin/sh
# Charged by use: a group's memory.current follows what its processes
# have resident (the kernel's anon), for large blocks touched in part, for
# memory the program maps itself and for python3's own arenas; charge=alloc
# keeps the old semantics (a malloc that would pass memory.max fails).
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

# malloc(256 MiB) with 10% of it touched: charged about 26 MiB, not 256.
start "scope=/big" "$FID_PROG" bigtouch 256M 10 hold=1500
reach peak
cur=$(value /big memory.current)
k=$(kernel_anon "$BG")
[ "$cur" -ge $((20 * MIB)) ] && [ "$cur" -le $((48 * MIB)) ] ||
	fail "malloc(256M), 10% touched: memory.current $(mib "$cur") (the kernel's anon: $(mib "$k"))"
within_ratio "$cur" "$k" 85 120 || fail "bigtouch: memory.current $(mib "$cur") against RssAnon $(mib "$k")"
finish
[ "$ST" = 0 ] || fail "bigtouch exited $ST"
CHECKS=$((CHECKS + 1))

# A program that allocates as it starts, works in its block later without
# allocating, and exits with it (xz -T2 -6: memory.peak 31 MB where 117 MiB
# were resident): with no reader meanwhile, its last sample was the
# malloc's, and only the charge taken at exit (a process whose last sample
# is a second old) brings what it touched into memory.peak.
within 60 pre "group=/late" "$FID_PROG" bigtouch 64M 100 late=1200 hold=0 keep
[ "$ST" = 0 ] || fail "bigtouch 64M, touched late, kept: exit $ST"
peak=$(value /late memory.peak)
[ "$peak" -ge $((60 * MIB)) ] ||
	fail "malloc(64M) touched 1.2 s later without a sample, not freed: memory.peak $(mib "$peak") after exit"
echo "$TEST_NAME: 64 MiB touched 1.2 s after its malloc, kept to the exit: memory.peak $(mib "$peak")"
CHECKS=$((CHECKS + 1))

# The program's own mmap of 128 MiB, touched: charged (a reader refreshes
# the process's anon from /proc even while it sleeps), and shown under
# mapped_anon once the process has sampled itself (at its slow paths:
# busy keeps it allocating); gone once it is unmapped.
start "scope=/map" "$FID_PROG" mmap 128M hold=1500
reach peak
cur=$(value /map memory.current)
[ "$cur" -ge $((120 * MIB)) ] || fail "mmap(128M), touched, idle: memory.current $(mib "$cur")"
finish
start "scope=/map" "$FID_PROG" mmap 128M hold=3000 busy
reach peak
cur=$(value /map memory.current)
[ "$cur" -ge $((120 * MIB)) ] || fail "mmap(128M), touched: memory.current $(mib "$cur")"
settle /map mapped_anon -ge $((120 * MIB)) || fail "mmap(128M), touched: mapped_anon $(mib "$V")"
reach end
settle /map mapped_anon -le $((8 * MIB)) || fail "after munmap: mapped_anon still $(mib "$V")"
finish
[ "$ST" = 0 ] || fail "mmap exited $ST"
CHECKS=$((CHECKS + 1))

# A large mapping with few pages in it (node's reservations): counted with
# PAGEMAP_SCAN once a sample has found it sparse (shim/regions.c), in runs
# of 64 ranges a call -- 8,192 ranges here, then 65,536.
start "scope=/sparse" "$FID_PROG" sparse 512M 64 hold=1500 busy
reach peak
sleep 0.3	# past the samples of the mapping's first moments (mincore's)
settle /sparse mapped_anon -ge $((8 * MIB)) || fail "512M, a page in 64 touched: mapped_anon $(mib "$V")"
[ "$V" -le $((10 * MIB)) ] || fail "512M, a page in 64 touched: mapped_anon $(mib "$V"), not 8 MiB"
reach more
settle /sparse mapped_anon -ge $((64 * MIB)) || fail "512M, a page in 8 touched: mapped_anon $(mib "$V")"
[ "$V" -le $((66 * MIB)) ] || fail "512M, a page in 8 touched: mapped_anon $(mib "$V"), not 64 MiB"
finish
[ "$ST" = 0 ] || fail "sparse exited $ST: $(head -3 "$T/bg.err")"
CHECKS=$((CHECKS + 1))

# mremap: grown (it may move) and touched, then shrunk to a quarter; sbrk;
# and a shared mapping, which is not charged (the kernel counts it as
# shmem, which cgmalloc does not model).
start "scope=/remap" "$FID_PROG" mremap 64M hold=1500 busy
reach peak
settle /remap mapped_anon -ge $((60 * MIB)) || fail "mremap to 64M, touched: mapped_anon $(mib "$V")"
reach shrunk
settle /remap mapped_anon -le $((20 * MIB)) || fail "mremap shrunk to 16M: mapped_anon $(mib "$V")"
[ "$(value /remap memory.current)" -le $((24 * MIB)) ] ||
	fail "mremap shrunk to 16M: memory.current $(mib "$(value /remap memory.current)")"
finish
[ "$ST" = 0 ] || fail "mremap exited $ST: $(head -3 "$T/bg.err")"
start "scope=/brk" "$FID_PROG" brk 64M hold=1500 busy
reach peak
settle /brk mapped_anon -ge $((60 * MIB)) || fail "sbrk(64M), touched: mapped_anon $(mib "$V")"
finish
[ "$ST" = 0 ] || fail "brk exited $ST: $(head -3 "$T/bg.err")"
start "scope=/shm" "$FID_PROG" shared 64M hold=1000 busy
reach peak
sleep 0.2
[ "$(value /shm memory.current)" -le $((8 * MIB)) ] ||
	fail "a shared mapping of 64M was charged: memory.current $(mib "$(value /shm memory.current)")"
finish
CHECKS=$((CHECKS + 1))

# python3 with its own allocator (pymalloc's arenas come from mmap): the
# group's charge is the process's RssAnon, within 10%.
start "scope=/py" "$PY" -c '
import sys, time
d = {i: str(i) * 3 for i in range(600000)}
print("peak", flush=True)
time.sleep(1.5)
'
reach peak
cur=$(value /py memory.current)
k=$(kernel_anon "$BG")
within_ratio "$cur" "$k" 90 115 || fail "python3 dict: memory.current $(mib "$cur"), RssAnon $(mib "$k")"
[ "$cur" -ge $((40 * MIB)) ] || fail "python3 dict: memory.current only $(mib "$cur")"
finish
[ "$ST" = 0 ] || fail "python3 exited $ST"
CHECKS=$((CHECKS + 1))

# fork: the child is charged the anon it has beyond what it inherited
# (the kernel charges nothing at fork; the shared pages stay the parent's):
# a 100 MiB parent and a child that adds 20 MiB make about 120, not 220.
start "scope=/fk" "$PY" -c '
import os, sys, time
hold = b"x" * (100 << 20)
pid = os.fork()
if pid == 0:
    mine = b"y" * (20 << 20)
    print("peak", flush=True)
    time.sleep(1.5)
    os._exit(0)
os.waitpid(pid, 0)
'
reach peak
sleep 0.2
cur=$(value /fk memory.current)
[ "$cur" -ge $((115 * MIB)) ] && [ "$cur" -le $((140 * MIB)) ] ||
	fail "a 100 MiB parent and a child adding 20 MiB: memory.current $(mib "$cur")"
finish
[ "$ST" = 0 ] || fail "the fork workload exited $ST: $(head -3 "$T/bg.err")"
CHECKS=$((CHECKS + 1))

# memory.stat: the kernel's key (anon) and cgmalloc's own.
start "scope=/keys" "$FID_PROG" small 32M hold=1000
reach peak
value /keys memory.stat >"$T/stat"
for key in anon heap_free mapped_anon heap_live allocs frees throttle_usec; do
	grep -q "^$key [0-9]" "$T/stat" || fail "memory.stat has no '$key': $(head -c 300 "$T/stat")"
done
a=$(awk '$1 == "anon" { print $2 }' "$T/stat")
l=$(awk '$1 == "heap_live" { print $2 }' "$T/stat")
[ "$l" -ge $((30 * MIB)) ] || fail "heap_live $(mib "$l") for 32 MiB of small objects"
[ "$a" -ge "$l" ] || fail "anon $(mib "$a") below heap_live $(mib "$l")"
finish
CHECKS=$((CHECKS + 1))

# Under memory.max=256M: a program that mallocs 512 MiB and touches 10%
# runs (the kernel would let it), and so does an allocator benchmark's
# pattern of 400 MiB with 40 MiB touched; with charge=alloc the malloc
# fails at once, as with overcommit off.
within 60 pre "scope=/r1,max=256M" "$FID_PROG" bigtouch 512M 10 hold=0
[ "$ST" = 0 ] || fail "bigtouch 512M 10% under max=256M (charge=resident): exit $ST"
within 60 pre "scope=/r2,max=256M" "$FID_PROG" mixed 400M 40M hold=0
[ "$ST" = 0 ] || fail "mixed 400M/40M under max=256M: exit $ST"
within 60 pre "scope=/r3,max=256M,charge=alloc" "$FID_PROG" bigtouch 512M 10 hold=0
[ "$ST" = 1 ] || fail "bigtouch 512M under max=256M, charge=alloc: exit $ST, expected 1 (malloc fails)"
grep -q "fid_prog: malloc" "$T/err" || fail "charge=alloc: the malloc did not fail: $(head -3 "$T/err")"
CHECKS=$((CHECKS + 1))

# A program that touches more than max through its own mapping: its next
# allocations find the group over max (at the sample of their slow path),
# reclaim, then fail (oom=enomem, the default) or kill it (oom=kill), as
# the kernel reclaims and then OOM-kills.
within 60 pre "scope=/r4,max=64M" "$FID_PROG" mmap 128M hold=300 busy
[ "$ST" = 0 ] || fail "mmap 128M touched under max=64M, oom=enomem: exit $ST"
grep -q "busy failed [1-9]" "$T/err" || fail "over max, no allocation failed: $(tail -1 "$T/err")"
# (timeout's own SIGTERM would give 124; the OOM kill gives 137)
run timeout 60 env LD_PRELOAD="$CGM_LIB" CGMALLOC_CONF="hierarchy=$H,scope=/r5,max=64M,oom=kill" \
	"$FID_PROG" mmap 128M hold=300 busy
[ "$ST" = 137 ] || fail "mmap 128M touched under max=64M, oom=kill: exit $ST, expected 137 (SIGKILL)"
grep -q "OOM-killing pid" "$T/err" || fail "oom=kill: no line about the kill: $(head -3 "$T/err")"
CHECKS=$((CHECKS + 1))

echo "$TEST_NAME: $CHECKS checks passed"
