/*
 * cgm_spill_stop() for a debugger (tests/spill/test_spill_lib.sh,
 * spill_stop).
 *
 *   spill_stop MB
 *
 * Fills MB MiB of cold blocks (cold_blocks.h) and has its own process
 * reclaim them (memory.reclaim through cgm_write): spilled pages cannot
 * be read through /proc/self/mem, as a debugger reads them (EIO: the
 * kernel does not wait for a userfaultfd on a remote access).  Then
 * cgm_spill_stop(): every page must read through /proc/self/mem with
 * its bytes right, and a second memory.reclaim must spill nothing.  Then
 * cgm_spill_resume(): a third memory.reclaim spills again, and zswpout
 * goes on from where it was (a new engine counts from zero).  Prints
 * "spill_stop: ok, ..." or says what failed (exit 1).
 *
 *   spill_stop refused
 *
 * In a process where nothing spills (spill=0, or spill=1 refused at
 * start-up): cgm_spill_stop() brings back nothing (0) and
 * cgm_spill_resume() says -ENODEV.
 *
 *   spill_stop onto
 *
 * A mapping of its own, spilled, replaced by another that a mremap
 * (MREMAP_FIXED) moves onto it and grows: cgm_spill_stop() then brings
 * back nothing of the replaced one.  The moved page keeps its bytes, the
 * grown one reads zeros (the test also checks that no "could not be put
 * back" line was said).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cold_blocks.h"

/* The library's, found through the preload. */
extern int cgm_write(const char *group, const char *file, const char *value) __attribute__((weak));
extern int cgm_read(const char *group, const char *file, char *buf, size_t len) __attribute__((weak));
extern long cgm_spill_stop(void) __attribute__((weak));
extern int cgm_spill_resume(void) __attribute__((weak));

static long zswpout(void)
{
	static char buf[16384];
	const char *at;

	if (cgm_read(NULL, "memory.stat.local", buf, sizeof(buf)) < 0 || !(at = strstr(buf, "\nzswpout ")))
		return -1;
	return strtol(at + 9, NULL, 10);
}

/*
 * Pages of the @n blocks that /proc/self/mem (@mem) cannot read (EIO),
 * and in *@bad the bytes of the readable ones that differ.
 */
static size_t unreadable(int mem, unsigned char **cold, size_t n, size_t *bad)
{
	static unsigned char page[4096];
	size_t count = 0;

	*bad = 0;
	for (size_t b = 0; b < n; b++) {
		/* Whole pages inside the block. */
		uintptr_t lo = ((uintptr_t)cold[b] + 4095) & ~(uintptr_t)4095;
		uintptr_t hi = ((uintptr_t)cold[b] + COLD_BLOCK) & ~(uintptr_t)4095;

		for (uintptr_t a = lo; a < hi; a += 4096) {
			if (pread(mem, page, sizeof(page), (off_t)a) != (ssize_t)sizeof(page)) {
				count++;
				continue;
			}
			for (size_t i = 0; i < sizeof(page); i++)
				*bad += page[i] != cold_byte(b, a - (uintptr_t)cold[b] + i);
		}
	}
	return count;
}

/* spill_stop refused: the calls where nothing spills. */
static int refused(void)
{
	long back = cgm_spill_stop();
	int resumed = cgm_spill_resume();

	if (back != 0 || resumed != -ENODEV) {
		fprintf(stderr, "spill_stop: FAIL: where nothing spills, cgm_spill_stop() returned "
			"%ld (0 expected) and cgm_spill_resume() %d (-ENODEV expected)\n", back,
			resumed);
		return 1;
	}
	printf("spill_stop: ok, nothing spills: stop 0, resume -ENODEV\n");
	return 0;
}

/* spill_stop onto: a mremap onto a spilled mapping. */
static int onto(void)
{
	const size_t page = 4096, pages = 16;
	unsigned char *target, *moved;
	size_t wrong = 0, nonzero = 0;

	target = mmap(NULL, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	moved = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (target == MAP_FAILED || moved == MAP_FAILED)
		return 1;
	for (size_t i = 0; i < pages * page; i++)
		target[i] = (unsigned char)(0x7e ^ (i * 13 >> 4));
	memset(moved, 0x11, page);
	cgm_write(NULL, "memory.reclaim", "64M");
	if (mremap(moved, page, 2 * page, MREMAP_MAYMOVE | MREMAP_FIXED, target) != target) {
		fprintf(stderr, "spill_stop: FAIL: mremap onto the spilled mapping: %s\n",
			strerror(errno));
		return 1;
	}
	cgm_spill_stop();
	for (size_t i = 0; i < page; i++) {
		wrong += target[i] != 0x11;
		nonzero += target[page + i] != 0;
	}
	if (wrong || nonzero) {
		fprintf(stderr, "spill_stop: FAIL: after a mremap onto a spilled mapping, %zu bytes of "
			"the moved page wrong, %zu of the grown one not zero\n", wrong, nonzero);
		return 1;
	}
	printf("spill_stop: ok, a mremap onto a spilled mapping\n");
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long mb;
	unsigned char **cold;
	size_t n, before, after, again, bad;
	long back, out;
	int mem;
	char want[32];

	if (!cgm_write || !cgm_read || !cgm_spill_stop || !cgm_spill_resume) {
		fprintf(stderr, "spill_stop: FAIL: libcgmalloc.so is not preloaded\n");
		return 1;
	}
	if (argc == 2 && strcmp(argv[1], "refused") == 0)
		return refused();
	if (argc == 2 && strcmp(argv[1], "onto") == 0)
		return onto();
	if (!spill_args(argc, argv, 1, "MB", &mb))
		return 2;
	cold = cold_fill("spill_stop", mb, &n);
	mem = open("/proc/self/mem", O_RDONLY);
	if (!cold || n == 0 || mem < 0)
		return 1;
	snprintf(want, sizeof(want), "%luM", mb);
	cgm_write(NULL, "memory.reclaim", want);
	before = unreadable(mem, cold, n, &bad);
	if (before == 0 || bad) {
		fprintf(stderr, "spill_stop: FAIL: after memory.reclaim %s, %zu pages unreadable "
			"through /proc/self/mem, %zu bytes wrong\n", want, before, bad);
		return 1;
	}
	back = cgm_spill_stop();
	after = unreadable(mem, cold, n, &bad);
	if (back < (long)before || after || bad) {
		fprintf(stderr, "spill_stop: FAIL: cgm_spill_stop() brought back %ld pages of %zu "
			"unreadable; %zu still unreadable, %zu bytes wrong\n", back, before, after, bad);
		return 1;
	}
	out = zswpout();
	cgm_write(NULL, "memory.reclaim", want);
	if (out < 0 || zswpout() != out) {
		fprintf(stderr, "spill_stop: FAIL: zswpout %ld -> %ld: memory.reclaim spilled after "
			"cgm_spill_stop()\n", out, zswpout());
		return 1;
	}
	if (cgm_spill_stop() != 0) {
		fprintf(stderr, "spill_stop: FAIL: a second cgm_spill_stop() brought pages back\n");
		return 1;
	}
	/* Resumed: the next reclaim spills again, and the counts go on from where they were. */
	if (cgm_spill_resume() != 0) {
		fprintf(stderr, "spill_stop: FAIL: cgm_spill_resume() refused\n");
		return 1;
	}
	cgm_write(NULL, "memory.reclaim", want);
	again = unreadable(mem, cold, n, &bad);
	if (again == 0 || bad || zswpout() < out + (long)again) {
		fprintf(stderr, "spill_stop: FAIL: after cgm_spill_resume(), memory.reclaim left %zu "
			"pages unreadable (%zu bytes wrong); zswpout %ld -> %ld\n", again, bad, out, zswpout());
		return 1;
	}
	if (cold_check("spill_stop", cold, n))
		return 1;
	printf("spill_stop: ok, %zu pages unreadable, %ld brought back; %zu unreadable again after "
	       "cgm_spill_resume()\n", before, back, again);
	return 0;
}
