/*
 * mremap of one mapping that lies in several VMAs (tests/spill/test_spill_mremap.sh).
 *
 *   spill_mremap
 *
 * Run preloaded with spill=1.  Spilling can leave a mapping of the
 * program in VMAs that never merge again: an anonymous VMA made inside a
 * registered range (mmap MAP_FIXED over a part) gets an anon_vma of its
 * own at its first fault, and the kernel refuses an mremap over two VMAs
 * (EFAULT).  This program makes such a mapping on purpose, with a
 * userfaultfd of its own, and checks that mremap does with it what it
 * does with one VMA: grow in place or moved, not moving (ENOMEM where a
 * neighbour is in the way), MREMAP_FIXED onto another mapping growing and
 * shrinking, MREMAP_DONTUNMAP -- every byte kept, the growth zeros and
 * writable, the old range gone -- and that a range with a hole, or with
 * parts of different protection, still fails with EFAULT.
 * Exit 0 if every check passed, 1 if not, 77 where the kernel merges the
 * pieces anyway or gives no userfaultfd.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

#define PAGE	4096ul
#define NPAGES	6
#define FRAME	(NPAGES + 4)	/* pages of the mapping and of the PROT_NONE ones after it */
#define RW	(PROT_READ | PROT_WRITE)

static int failed;

static void fail(const char *what, const char *why)
{
	fprintf(stderr, "spill_mremap: FAIL %s: %s\n", what, why);
	failed = 1;
}

static unsigned char expect(size_t i)
{
	return (unsigned char)(i * 7 + i / PAGE + 1);
}

/* VMAs of this process over [p, p + len): one line each of /proc/self/maps. */
static int vmas(const void *p, size_t len)
{
	uintptr_t lo = (uintptr_t)p, a, b;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx", &a, &b) == 2 && b > lo && a < lo + len)
			n++;
	fclose(f);
	return n;
}

static bool mapped(const void *p, size_t len)
{
	/* msync fails with ENOMEM on a range not fully mapped. */
	return msync((void *)p, len, MS_ASYNC) == 0;
}

/*
 * A mapping of NPAGES pages filled with expect(), in three VMAs that do
 * not merge: pages 1..4 registered with @uffd, page 2 mapped afresh
 * (MAP_FIXED) and written while they were, then unregistered.  Page 0
 * and page 5 stay outside the registration, so the pieces are
 * [0, 2), [2, 3) and [3, 6).  Up to FRAME pages, PROT_NONE pages follow
 * it: there is no room to grow in place but what a test frees there.
 * NULL where the kernel merged the pieces.
 */
static unsigned char *pieces(int uffd)
{
	unsigned char *p = mmap(NULL, FRAME * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct uffdio_register reg = {
		.range = { (uintptr_t)p + PAGE, 4 * PAGE },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	struct uffdio_range range = { (uintptr_t)p + PAGE, 4 * PAGE };

	if (p == MAP_FAILED ||
	    mmap(p, NPAGES * PAGE, RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != p)
		return NULL;
	for (size_t i = 0; i < NPAGES * PAGE; i++)
		p[i] = expect(i);
	if (ioctl(uffd, UFFDIO_REGISTER, &reg) ||
	    mmap(p + 2 * PAGE, PAGE, RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
		    p + 2 * PAGE)
		return NULL;
	for (size_t i = 2 * PAGE; i < 3 * PAGE; i++)
		p[i] = expect(i);
	if (ioctl(uffd, UFFDIO_UNREGISTER, &range))
		return NULL;
	if (vmas(p, NPAGES * PAGE) < 2) {
		munmap(p, FRAME * PAGE);
		return NULL;
	}
	return p;
}

/* pieces(), where main() has seen that the kernel leaves them apart. */
static unsigned char *pieces_for(int uffd, const char *what)
{
	unsigned char *p = pieces(uffd);

	if (!p)
		fail(what, "no mapping in pieces this time");
	return p;
}

/* The first @keep bytes as pieces() wrote them, zeros to @len, writable. */
static void check(const char *what, unsigned char *p, size_t keep, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (p[i] != (i < keep ? expect(i) : 0)) {
			char why[96];

			snprintf(why, sizeof(why), "byte %zu is %u, not %u", i, p[i],
				 i < keep ? expect(i) : 0);
			fail(what, why);
			return;
		}
	}
	memset(p + keep, 0x5a, len - keep);
}

static void *remap(void *old, size_t old_len, size_t new_len, int flags, void *to)
{
	return mremap(old, old_len, new_len, flags, to);
}

/* Growing: refused where it cannot move, moved; then in place where there is room. */
static void grow(int uffd)
{
	unsigned char *p = pieces_for(uffd, "grow"), *q;

	if (!p)
		return;
	q = remap(p, NPAGES * PAGE, NPAGES * PAGE + 3 * PAGE, 0, NULL);
	if (q != MAP_FAILED || errno != ENOMEM)
		fail("grow, not moving, a neighbour in the way", q == MAP_FAILED ? strerror(errno) :
		     "it grew over the neighbour");
	else
		check("grow, not moving (refused)", p, NPAGES * PAGE, NPAGES * PAGE);
	q = remap(p, NPAGES * PAGE, NPAGES * PAGE + 3 * PAGE, MREMAP_MAYMOVE, NULL);
	if (q == MAP_FAILED) {
		fail("grow, moving", strerror(errno));
		return;
	}
	if (q == p || mapped(p, PAGE))
		fail("grow, moving", "the old range is still mapped");
	check("grow, moving", q, NPAGES * PAGE, NPAGES * PAGE + 3 * PAGE);
	if (!mapped(p + NPAGES * PAGE, (FRAME - NPAGES) * PAGE))
		fail("grow, moving", "the pages after the old range went");
	munmap(q, NPAGES * PAGE + 3 * PAGE);
	munmap(p, FRAME * PAGE);

	p = pieces_for(uffd, "grow in place");
	if (!p)
		return;
	munmap(p + NPAGES * PAGE, 2 * PAGE);
	q = remap(p, NPAGES * PAGE, NPAGES * PAGE + 2 * PAGE, 0, NULL);
	if (q != p)
		fail("grow in place", q == MAP_FAILED ? strerror(errno) : "it moved");
	else
		check("grow in place", p, NPAGES * PAGE, NPAGES * PAGE + 2 * PAGE);
	munmap(p, FRAME * PAGE);
}

/* MREMAP_FIXED onto another mapping: larger, smaller. */
static void fixed(int uffd)
{
	for (int larger = 0; larger < 2; larger++) {
		const char *what = larger ? "MREMAP_FIXED, growing" : "MREMAP_FIXED, shrinking";
		size_t len = larger ? (NPAGES + 2) * PAGE : 4 * PAGE;
		unsigned char *p = pieces_for(uffd, what), *to, *q;

		if (!p)
			return;
		to = mmap(NULL, len + PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (to == MAP_FAILED) {
			fail(what, strerror(errno));
			return;
		}
		q = remap(p, NPAGES * PAGE, len, MREMAP_MAYMOVE | MREMAP_FIXED, to);
		if (q != to) {
			fail(what, q == MAP_FAILED ? strerror(errno) : "not where asked");
			return;
		}
		if (mapped(p, PAGE) || mapped(p + NPAGES * PAGE - PAGE, PAGE))
			fail(what, "the old range is still mapped");
		check(what, q, larger ? NPAGES * PAGE : len, len);
		/* The target's last page was not asked for: it stays. */
		if (!mapped(to + len, PAGE))
			fail(what, "the page after the target went");
		munmap(to, len + PAGE);
		munmap(p, FRAME * PAGE);
	}
}

static void dontunmap(int uffd)
{
	unsigned char *p = pieces_for(uffd, "MREMAP_DONTUNMAP"), *q;

	if (!p)
		return;
	q = remap(p, NPAGES * PAGE, NPAGES * PAGE, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, NULL);
	if (q == MAP_FAILED) {
		fail("MREMAP_DONTUNMAP", strerror(errno));
		return;
	}
	check("MREMAP_DONTUNMAP", q, NPAGES * PAGE, NPAGES * PAGE);
	/* The old range stays, empty. */
	if (!mapped(p, NPAGES * PAGE))
		fail("MREMAP_DONTUNMAP", "the old range went");
	else
		for (size_t i = 0; i < NPAGES * PAGE; i++)
			if (p[i]) {
				fail("MREMAP_DONTUNMAP", "the old range kept bytes");
				break;
			}
	munmap(p, FRAME * PAGE);
	munmap(q, NPAGES * PAGE);
}

/* What the kernel refuses for one mapping too stays refused: a hole, two protections. */
static void refused(int uffd)
{
	for (int hole = 0; hole < 2; hole++) {
		const char *what = hole ? "a range with a hole" : "a range of two protections";
		unsigned char *p = pieces_for(uffd, what), *q;

		if (!p)
			return;
		if (hole ? munmap(p + 4 * PAGE, PAGE) : mprotect(p + 4 * PAGE, 2 * PAGE, PROT_READ)) {
			fail(what, strerror(errno));
			return;
		}
		q = remap(p, NPAGES * PAGE, (NPAGES + 4) * PAGE, MREMAP_MAYMOVE, NULL);
		if (q != MAP_FAILED || errno != EFAULT)
			fail(what, q == MAP_FAILED ? strerror(errno) : "it moved");
		else if (!mapped(p, 4 * PAGE))
			fail(what, "the range went");
		munmap(p, FRAME * PAGE);
	}
}

int main(void)
{
	int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	struct uffdio_api api = { .api = UFFD_API };
	unsigned char *p;

	if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api)) {
		printf("spill_mremap: skipped: no userfaultfd: %s\n", strerror(errno));
		return 77;
	}
	p = pieces(uffd);
	if (!p) {
		printf("spill_mremap: skipped: the kernel merges the pieces of a mapping\n");
		return 77;
	}
	munmap(p, FRAME * PAGE);
	grow(uffd);
	fixed(uffd);
	dontunmap(uffd);
	refused(uffd);
	if (!failed)
		fprintf(stderr, "spill_mremap: ok\n");
	return failed;
}
