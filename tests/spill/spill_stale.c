/*
 * A spilled mapping that the program cuts and maps a file into
 * (tests/spill/test_spill_lib.sh).
 *
 *   spill_stale tail|hole
 *
 * Run preloaded with spill=1.  A mapping of 32 pages is spilled whole
 * (memory.reclaim), then the program unmaps its last 16 pages (tail) or 4
 * in its middle (hole) and maps a file there, which cannot take a
 * userfaultfd.  It then reads back the rest, every byte checked: once
 * every page is back, no part of the mapping may stay registered for
 * missing pages (smaps "um").  The engine settled each spill's whole
 * span, file and all, and the kernel refused the call, so the pieces kept
 * their registration (and a mremap of them could fail: check-spill-model).
 * Exit 0 if it passed, 1 if not.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* The library's, found through the preload. */
extern int cgm_write(const char *group, const char *file, const char *value) __attribute__((weak));

#define PAGE	4096ul
#define PAGES	32

static unsigned char byte_at(size_t i)
{
	return (unsigned char)(i * 7 + i / PAGE + 1);
}

/* Pages of [p, p + len) in a VMA registered for missing pages, from smaps. */
static long registered(const unsigned char *p, size_t len)
{
	uintptr_t lo = (uintptr_t)p, hi = lo + len, a = 0, b = 0;
	char line[512];
	FILE *f = fopen("/proc/self/smaps", "r");
	long pages = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		uintptr_t x, y;

		if (sscanf(line, "%lx-%lx ", &x, &y) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			a = x;
			b = y;
		} else if (!strncmp(line, "VmFlags:", 8) && b > lo && a < hi && strstr(line, " um")) {
			pages += (long)(((b < hi ? b : hi) - (a > lo ? a : lo)) / PAGE);
		}
	}
	fclose(f);
	return pages;
}

int main(int argc, char **argv)
{
	bool hole = argc == 2 && !strcmp(argv[1], "hole");
	size_t cut = hole ? 8 : 16, cut_len = hole ? 4 : 16, wrong = 0;
	unsigned char *p, *f;
	long left = -1;
	int fd;

	if (argc != 2 || (!hole && strcmp(argv[1], "tail"))) {
		fprintf(stderr, "usage: spill_stale tail|hole\n");
		return 2;
	}
	if (!cgm_write) {
		fprintf(stderr, "spill_stale: FAIL: libcgmalloc.so is not preloaded\n");
		return 1;
	}
	p = mmap(NULL, PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 1;
	for (size_t i = 0; i < PAGES * PAGE; i++)
		p[i] = byte_at(i);
	cgm_write(NULL, "memory.reclaim", "64M");
	if (registered(p, PAGES * PAGE) != PAGES) {
		fprintf(stderr, "spill_stale: FAIL: memory.reclaim left %ld of the %d pages registered "
			"(all spilled expected)\n", registered(p, PAGES * PAGE), PAGES);
		return 1;
	}
	/* The program's own binary: a file's mapping, which takes no userfaultfd. */
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || munmap(p + cut * PAGE, cut_len * PAGE))
		return 1;
	f = mmap(p + cut * PAGE, cut_len * PAGE, PROT_READ, MAP_PRIVATE | MAP_FIXED_NOREPLACE, fd, 0);
	if (f != p + cut * PAGE) {
		fprintf(stderr, "spill_stale: FAIL: mapping a file where the pages were: %s\n",
			f == MAP_FAILED ? strerror(errno) : "elsewhere");
		return 1;
	}
	for (size_t i = 0; i < PAGES * PAGE; i++)
		if (i < cut * PAGE || i >= (cut + cut_len) * PAGE)
			wrong += p[i] != byte_at(i);
	/* The handler settles what came back before it sleeps: a moment. */
	for (int tries = 0; tries < 200; tries++) {
		left = registered(p, cut * PAGE) +
		       registered(p + (cut + cut_len) * PAGE, (PAGES - cut - cut_len) * PAGE);
		if (!left)
			break;
		nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
	}
	if (wrong || left) {
		fprintf(stderr, "spill_stale %s: FAIL: %zu bytes read back wrong; %ld pages still "
			"registered for missing pages after every page came back\n", argv[1], wrong, left);
		return 1;
	}
	printf("spill_stale: ok, %s: every byte back, no page left registered\n", argv[1]);
	return 0;
}
