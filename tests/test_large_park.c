/*
 * A freed large block larger than any freed before leaves memory
 * (charge=resident, glibc's dynamic mmap threshold), but not before the
 * thread had the chance to allocate a large block in its place
 * (shim/large_park.c).  Checked on the process's own page faults and
 * resident pages, in a fresh process (the bar is process-wide):
 *  - a large allocation right after such a free reuses its pages: few
 *    faults, where a purge at the free faulted every page in anew;
 *  - without one, the block is gone after the thread's slow paths of the
 *    next 30 ms and more;
 *  - a thread that parked a block and ends (a return, pthread_exit())
 *    leaves nothing resident.
 * Run with accounting on (the default charge=resident).
 *
 * Usage: test_large_park
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MiB (1L << 20)

/* Through volatile pointers: the compiler may not elide a malloc/free pair. */
static void *(*volatile alloc)(size_t) = malloc;
static void (*volatile release)(void *) = free;
static long page;
static int failed;

static void check(int ok, const char *what, long got, long limit)
{
	printf("test_large_park: %s: %ld (%s %ld)\n", what, got, ok ? "within" : "NOT within",
	       limit);
	failed |= !ok;
}

static long minor_faults(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

/* Resident pages of the process (/proc/self/statm). */
static long resident_pages(void)
{
	long size = 0, resident = -1;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &size, &resident) != 2)
			resident = -1;
		fclose(f);
	}
	return resident;
}

static char *touched(size_t size)
{
	char *p = alloc(size);

	if (!p) {
		fprintf(stderr, "test_large_park: malloc(%zu) failed\n", size);
		exit(1);
	}
	for (size_t off = 0; off < size; off += (size_t)page)
		p[off] = 1;
	return p;
}

/* Slow paths for a while: blocks above 128 KiB and below 1 MiB. */
static void slow_paths_for(long ms)
{
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		release(touched(256 * 1024));
		usleep(1000);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < ms);
}

/* Frees a block larger than any before (parked), and returns or calls pthread_exit(). */
struct parker {
	size_t size;
	int by_exit;
};

static void *thread_parks(void *arg)
{
	const struct parker *k = arg;

	release(touched(k->size));
	if (k->by_exit)
		pthread_exit(NULL);
	return NULL;
}

/* The resident pages a thread that parked a block of @size leaves behind. */
static void thread_leaves(size_t size, int by_exit, const char *what)
{
	struct parker k = { size, by_exit };
	long before = resident_pages(), pages;
	pthread_t th;

	if (pthread_create(&th, NULL, thread_parks, &k) != 0 || pthread_join(th, NULL) != 0) {
		fprintf(stderr, "test_large_park: no thread\n");
		exit(1);
	}
	pages = resident_pages();
	check(pages - before <= (long)size / page / 10, what, pages - before,
	      (long)size / page / 10);
}

int main(void)
{
	long pages, faults, before;
	char *p;

	page = sysconf(_SC_PAGESIZE);

	/* The first large free in the process is above the bar: parked. */
	release(touched(12 * MiB));
	faults = minor_faults();
	p = touched(12 * MiB);
	faults = minor_faults() - faults;
	pages = 12 * MiB / page;
	check(faults <= pages / 10, "faults touching a 12 MiB block allocated after freeing one",
	      faults, pages / 10);
	release(p);

	/* A record again (14 > 12 MiB), and no large allocation after it. */
	p = touched(14 * MiB);
	before = resident_pages();
	release(p);
	slow_paths_for(100);
	pages = resident_pages();
	check(before - pages >= 14 * MiB / page * 9 / 10,
	      "resident pages given back 100 ms after freeing 14 MiB", before - pages,
	      14 * MiB / page * 9 / 10);

	/*
	 * Threads park records (15, then 16 MiB: a large block, not one of
	 * mimalloc's huge ones, above 16 MiB, which it gives back however
	 * freed) and end: by pthread_exit(), by a return.
	 */
	thread_leaves(15 * MiB, 1, "resident pages left by a thread that freed 15 MiB and called pthread_exit");
	thread_leaves(16 * MiB, 0, "resident pages left by a thread that freed 16 MiB and returned");
	return failed;
}
