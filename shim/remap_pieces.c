/*
 * mremap of a mapping that spilling left in pieces (shim/regions.c calls
 * it when the kernel refuses one with EFAULT).
 *
 * A userfaultfd registration splits a VMA, and an anonymous VMA made next
 * to a registered one (mmap MAP_FIXED over a part of it) cannot share its
 * anon_vma when it first faults, their flags differing: after the
 * unregistration the two stay two VMAs, and mremap refuses a range over
 * two (EFAULT).  The program sees one mapping, which the kernel would
 * have moved whole without spilling.  So it is moved here piece by piece,
 * each by the kernel's own mremap: its flags, protection and pages go with
 * it, and the growth is the last piece's, as the kernel grows the VMA the
 * range ends in.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgm/compiler.h"
#include "cgm/proc_maps.h"
#include "cgm/regions.h"

#define PAGE 4096UL
#define PAGE_UP(x) (((x) + PAGE - 1) & ~(PAGE - 1))

#define REMAP_MAX_PIECES 64

struct remap_piece {
	uintptr_t start, end;
};

/*
 * The flags of a VmFlags line, two letters each, but those a
 * registration changes (um uw ui: userfaultfd) and soft-dirty (sd, which
 * a new VMA has): what the pieces of one mapping have in common.
 */
static bool flags_key(const char *s, char *key, size_t max)
{
	size_t n = 0;

	for (; *s; s++) {
		if (*s == ' ' || !s[1])
			continue;
		if (memcmp(s, "um", 2) && memcmp(s, "uw", 2) && memcmp(s, "ui", 2) &&
		    memcmp(s, "sd", 2)) {
			if (n + 2 >= max)
				return false;
			key[n++] = s[0];
			key[n++] = s[1];
		}
		s++;
	}
	key[n] = '\0';
	return true;
}

/*
 * Read the VMAs over [lo, hi) into @pc: each one next to the one before,
 * all private and anonymous with one protection, one name and one set of
 * flags but userfaultfd's -- one mapping of the program that spilling
 * left in pieces.  Returns how many, or 0 where mremap's EFAULT stands (a
 * hole, mappings of different kinds, more pieces than @max, no smaps).
 */
static size_t read_pieces(uintptr_t lo, uintptr_t hi, struct remap_piece *pc, size_t max)
{
	/* smaps through a buffer on the stack: mremap may run inside malloc. */
	struct cgm_line_reader r = { .pos = 0 };
	char key[128], first_key[128], name[96], perms[4] = { 0 };
	struct cgm_maps_line v;
	size_t n = 0, keys = 0;
	bool in = false;		/* the entry being read is a piece */
	char *s;

	r.fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/smaps", O_RDONLY | O_CLOEXEC);
	if (r.fd < 0)
		return 0;
	while ((s = cgm_next_line(&r))) {
		/* A VMA's line starts with its address; VmFlags ends its entry. */
		if (cgm_hex_digit(*s) == 16) {
			if (!in || strncmp(s, "VmFlags:", 8))
				continue;
			in = false;
			if (!flags_key(s + 8, keys ? key : first_key, sizeof(key)) ||
			    (keys && strcmp(key, first_key)))
				goto refuse;
			keys++;
			continue;
		}
		if (!cgm_parse_maps_line(s, &v) || v.end <= lo)
			continue;
		if (v.start >= hi)
			break;
		if (n == max || !(n ? v.start == pc[n - 1].end : v.start <= lo) || !v.anon ||
		    v.perms[3] != 'p')
			goto refuse;
		if (!n) {
			if (strlen(v.name) >= sizeof(name))
				goto refuse;
			memcpy(name, v.name, strlen(v.name) + 1);
			memcpy(perms, v.perms, 4);
		} else if (memcmp(v.perms, perms, 4) || strcmp(v.name, name)) {
			goto refuse;
		}
		pc[n++] = (struct remap_piece){ v.start, v.end };
		in = true;
	}
	if (n && keys == n && pc[n - 1].end >= hi) {
		syscall(SYS_close, r.fd);
		return n;
	}
refuse:
	syscall(SYS_close, r.fd);
	return 0;
}

/*
 * mremap(2) of [old, old + old_len) that the kernel refused with EFAULT,
 * done piece by piece with what the caller asked (@flags, @want): in
 * place where the range ends where its last piece does and the room after
 * it is free, else moved to a fresh reservation (or @want with
 * MREMAP_FIXED), each piece to its offset there, the last one grown.
 * Called with spilling held off, so that no registration splits the range
 * again as it moves.  Returns what mremap would, or MAP_FAILED with errno
 * set: EFAULT where the range is not one mapping in pieces; a piece the
 * kernel will not move is put back with the ones before it, so that a
 * failure leaves the range where it was (but for the tail a shrinking
 * move drops first, as the kernel's does).
 */
void *cgm_mremap_pieces(void *old, size_t old_len, size_t new_len, int flags,
					void *want)
{
	uintptr_t lo = (uintptr_t)old, len = PAGE_UP(old_len), nlen = PAGE_UP(new_len);
	uintptr_t keep = len < nlen ? len : nlen, grow = nlen - keep, dst, s, e;
	bool moving = flags & (MREMAP_FIXED | MREMAP_DONTUNMAP);
	struct remap_piece pc[REMAP_MAX_PIECES];
	size_t n, i;
	int err;

	/* Staying put, a shrink needs no VMA but the first: its EFAULT is the kernel's. */
	if (!moving && nlen <= len)
		goto efault;
	n = read_pieces(lo, lo + keep, pc, CGM_ARRAY_SIZE(pc));
	if (!n)
		goto efault;
	s = pc[n - 1].start > lo ? pc[n - 1].start : lo;
	if (!moving) {
		/* The kernel grows in place first: the VMA the range ends in, when it ends there. */
		if (syscall(SYS_mremap, s, lo + len - s, lo + nlen - s, 0) != (long)MAP_FAILED)
			return old;
		if (errno != ENOMEM || !(flags & MREMAP_MAYMOVE))
			return MAP_FAILED;
	} else if (nlen < len && syscall(SYS_munmap, lo + nlen, len - nlen)) {
		return MAP_FAILED;	/* a move that shrinks drops the tail first, as the kernel does */
	}
	dst = (uintptr_t)syscall(SYS_mmap, flags & MREMAP_FIXED ? want : NULL, nlen, PROT_NONE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
				  (flags & MREMAP_FIXED ? MAP_FIXED : 0), -1, 0);
	if (dst == (uintptr_t)MAP_FAILED)
		return MAP_FAILED;
	for (i = 0; i < n; i++) {
		s = pc[i].start > lo ? pc[i].start : lo;
		e = pc[i].end < lo + keep ? pc[i].end : lo + keep;
		if (syscall(SYS_mremap, s, e - s, e - s + (i == n - 1 ? grow : 0),
			    MREMAP_MAYMOVE | MREMAP_FIXED | (flags & MREMAP_DONTUNMAP),
			    dst + (s - lo)) == (long)MAP_FAILED)
			goto undo;
	}
	return (void *)dst;

undo:
	err = errno;
	while (i--) {
		s = pc[i].start > lo ? pc[i].start : lo;
		e = pc[i].end < lo + keep ? pc[i].end : lo + keep;
		syscall(SYS_mremap, dst + (s - lo), e - s, e - s, MREMAP_MAYMOVE | MREMAP_FIXED, s);
	}
	syscall(SYS_munmap, dst, nlen);
	errno = err;
	return MAP_FAILED;
efault:
	errno = EFAULT;
	return MAP_FAILED;
}
