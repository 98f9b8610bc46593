#!/bin/sh
# mremap of one of the program's mappings that spilling left in several
# VMAs does what it does with one (tests/spill/spill_mremap.c): grown in
# place or moved, refused with ENOMEM where it may not move, moved onto
# another mapping growing or shrinking, with MREMAP_DONTUNMAP; a range
# with a hole or two protections still fails with EFAULT.
. "$(cd "$(dirname "$0")/.." && pwd)/fidelity/lib.sh"
: "${SPILL_MREMAP:?SPILL_MREMAP must name tests/spill/spill_mremap (run through make)}"

# Skipped where this process cannot have a userfaultfd that serves system calls.
pre "scope=/probe,spill=1" /bin/true 2>"$T/probe" || true
grep -q "spill=1 refused" "$T/probe" && skip "no userfaultfd for system calls: $(head -1 "$T/probe")"

# spill_background=0: the engine is made in the constructor, not at the
# first reclaim (this program never reclaims), so that its mremap is the
# one of a process whose spilling has started.
within 60 pre "scope=/m,spill=1,spill_background=0" "$SPILL_MREMAP"
[ "$ST" != 77 ] || skip "$(sed -n 's/^spill_mremap: skipped: //p' "$T/out" | head -1)"
cat "$T/err" >&2
[ "$ST" = 0 ] || fail "spill_mremap exited $ST"
grep -qx "spill_mremap: ok" "$T/err" || fail "spill_mremap did not say ok"
echo "$TEST_NAME: every mremap of a mapping in pieces passed"
