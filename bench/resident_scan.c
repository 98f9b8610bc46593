/*
 * What counting the resident pages of a mapping costs, by the two ways
 * shim/regions.c has: mincore (a byte per page, 4 MiB of the mapping a
 * call) and PAGEMAP_SCAN on /proc/self/pagemap (the present pages as
 * ranges, Linux 6.7).  One private anonymous mapping of SIZE MiB, its
 * pages made resident in several layouts; for each, ROUNDS rounds that
 * alternate the two ways, and the median time of each, in microseconds.
 * Both counts must agree with what was touched (exit 1 otherwise).
 *
 * Usage: resident_scan [SIZE_MIB [ROUNDS]]   (defaults 1024, 31)
 * Prints a markdown table on stdout; exit 77 where PAGEMAP_SCAN is missing.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cgm/uffd_abi.h"

#define PAGE 4096UL

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static uint64_t by_mincore(uintptr_t start, uintptr_t end)
{
	unsigned char vec[1024];
	uint64_t pages = 0;

	while (start < end) {
		size_t len = end - start < sizeof(vec) * PAGE ? end - start : sizeof(vec) * PAGE;

		if (mincore((void *)start, len, vec) == 0)
			for (size_t i = 0; i < len / PAGE; i++)
				pages += vec[i] & 1;
		start += len;
	}
	return pages;
}

/* As shim/regions.c's sparse_bytes(): 64 ranges a call. */
static int64_t by_scan(int fd, uintptr_t start, uintptr_t end)
{
	struct page_region got[64];
	uint64_t pages = 0;

	while (start < end) {
		struct pm_scan_arg a = {
			.size = sizeof(a), .start = start, .end = end,
			.vec = (uintptr_t)got, .vec_len = sizeof(got) / sizeof(got[0]),
			.category_mask = PAGE_IS_PRESENT, .return_mask = PAGE_IS_PRESENT,
		};
		long n = ioctl(fd, PAGEMAP_SCAN, &a);

		if (n < 0)
			return -1;
		for (long i = 0; i < n; i++)
			pages += (got[i].end - got[i].start) / PAGE;
		if (a.walk_end <= start || a.walk_end > end)
			break;
		start = a.walk_end;
	}
	return (int64_t)pages;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

struct layout {
	const char *what;
	size_t every;	/* a page in every EVERY pages ... */
	size_t run;	/* ... or runs of RUN pages in every EVERY (0: single pages) */
};

static const struct layout layouts[] = {
	{ "every page", 1, 0 },
	{ "every other page", 2, 0 },
	{ "runs of 64 pages in every 128 (a purged heap)", 128, 64 },
	{ "a page in 8", 8, 0 },
	{ "a page in 64", 64, 0 },
	{ "one page", 0, 0 },
	{ "none (a reservation)", 0, 1 },
};

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 1024, size = mib << 20;
	int rounds = argc > 2 ? atoi(argv[2]) : 31;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	double *tm, *ts;

	if (mib == 0 || rounds < 1)
		return 2;
	tm = calloc((size_t)rounds, sizeof(*tm));
	ts = calloc((size_t)rounds, sizeof(*ts));
	if (fd < 0 || !tm || !ts) {
		perror("resident_scan");
		return 1;
	}
	{
		struct pm_scan_arg probe = { .size = sizeof(probe), .start = 0, .end = 0 };

		if (ioctl(fd, PAGEMAP_SCAN, &probe) < 0 && (errno == ENOTTY || errno == EINVAL)) {
			printf("resident_scan: this kernel has no PAGEMAP_SCAN: not measured\n");
			return 77;
		}
	}
	printf("Counting the resident pages of one %zu MiB private anonymous mapping\n"
	       "(bench/resident_scan.c, `make bench-resident`): medians of %d rounds that\n"
	       "alternate the two ways, microseconds.  Transparent huge pages are off for\n"
	       "the mapping (MADV_NOHUGEPAGE), as for most of a heap's.\n\n", mib, rounds);
	printf("| pages resident | count | mincore, us | PAGEMAP_SCAN, us | scan / mincore |\n");
	printf("|---|---:|---:|---:|---:|\n");
	for (size_t l = 0; l < sizeof(layouts) / sizeof(layouts[0]); l++) {
		const struct layout *y = &layouts[l];
		char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		uint64_t want = 0;
		uintptr_t lo = (uintptr_t)p, hi = lo + size;

		if (p == MAP_FAILED) {
			perror("resident_scan: mmap");
			return 1;
		}
		madvise(p, size, MADV_NOHUGEPAGE);
		if (y->every == 0 && y->run == 0) {
			p[size / 2] = 1;
			want = 1;
		}
		for (size_t i = 0; y->every && i < size / PAGE; i += y->every)
			for (size_t k = 0; k < (y->run ? y->run : 1); k++, want++)
				p[(i + k) * PAGE] = 1;
		for (int r = 0; r < rounds; r++) {
			double t0, t1;
			uint64_t m = 0;
			int64_t s = 0;

			/* Alternating which goes first: neither always finds the page tables cached. */
			for (int k = 0; k < 2; k++) {
				t0 = now_us();
				if ((k + r) % 2 == 0)
					m = by_mincore(lo, hi);
				else
					s = by_scan(fd, lo, hi);
				t1 = now_us();
				((k + r) % 2 == 0 ? tm : ts)[r] = t1 - t0;
			}
			if (m != want || s != (int64_t)want) {
				fprintf(stderr, "resident_scan: %s: %llu pages touched, mincore %llu, "
					"PAGEMAP_SCAN %lld\n", y->what, (unsigned long long)want,
					(unsigned long long)m, (long long)s);
				return 1;
			}
		}
		qsort(tm, (size_t)rounds, sizeof(*tm), cmp_double);
		qsort(ts, (size_t)rounds, sizeof(*ts), cmp_double);
		printf("| %s | %llu | %.0f | %.0f | %.2f |\n", y->what, (unsigned long long)want,
		       tm[rounds / 2], ts[rounds / 2], ts[rounds / 2] / tm[rounds / 2]);
		munmap(p, size);
	}
	return 0;
}
