/*
 * Spill engine benchmark: how long a thread that touches a spilled page
 * waits, against the kernel's own refaults on this machine, and how fast
 * pages go out through spill_out() and come back, against raw compression
 * of the same pages.
 *
 *   spill_bench PAGEFILE SCRATCHDIR [rounds] [pages] [scattered|halting]
 *
 * PAGEFILE holds real heap pages (tests/zpool_pages.c; made if missing);
 * SCRATCHDIR gets the page-cache reference's file, unlinked at once.
 * Every round runs every configuration once, @pages pages each, in an
 * order rotated round by round, so that all of them meet the same states
 * of a shared machine:
 *
 *   spill latency  spill_out() the pages into an lz4 or a zstd pool; 1, 2
 *                  or 4 threads each walk their own share, touching one
 *                  byte per page, each touch timed with CLOCK_MONOTONIC
 *   kernel         the same timed touch where the kernel brings the page
 *                  back: a page-cache hit (the PTE of a private file
 *                  mapping dropped with MADV_DONTNEED), a swap-in after
 *                  MADV_PAGEOUT (only with a swap device), a first write to
 *                  untouched anonymous memory, and a resident page (what
 *                  the timing itself costs); and no fault: the first read
 *                  of a page UFFDIO_MOVE just moved, present at an address
 *                  whose page-table entry is new (what a spill reading its
 *                  page where it was moved to pays: a trip to the host
 *                  where the hypervisor keeps shadow page tables)
 *   bare uffd      the least a refault through userfaultfd costs here:
 *                  a thread of this program serves each MISSING fault
 *                  with UFFDIO_COPY of one ready page (no lookup, no
 *                  decompression, no accounting), spinning between faults
 *                  as the engine's handler does in a burst; and again with
 *                  that thread and the faulting one bound to one CPU, the
 *                  thread asleep in read() between faults
 *   throughput     spill_out() of all the pages in one call, one thread
 *                  walking them back, and the codec's raw compress and
 *                  decompress of the same pages
 *
 * Output: "key value..." lines that bench/spill_bench.sh turns into
 * bench/RESULTS-spill.md; a lone "unavailable REASON" line when the kernel
 * gives this process no uffd the engine can use.
 *
 * Nothing here forks once a page is spilled (a child would read zeros
 * there): the heap pages, whose capture may run python3, come first.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <lz4.h>
#include <zstd.h>

#include "cgm/spill.h"
#include "cgm/uffd_abi.h"
#include "cgm/zpool.h"
#include "zpool_pages.h"

#define PG		ZPT_PAGE
#define MAX_ROUNDS	32
#define MAX_THREADS	4
#define ZSTD_LEVEL	3	/* the pool's default level */
/* Byte touched in each page: away from the start, which a same-filled or
 * zero page would share with every other. */
#define TOUCH_AT	100

static const int thread_counts[] = { 1, 2, 4 };
#define NR_THREAD_COUNTS (sizeof(thread_counts) / sizeof(thread_counts[0]))

static unsigned char *heap;
static long nheap;
static size_t npages;
static int rounds;

/* Pages that came back with other bytes than they left with. */
static unsigned long mismatches;
/* Waits for the handler's bookkeeping that ran out of time. */
static unsigned long settle_timeouts;

static void die(const char *what, int err)
{
	fprintf(stderr, "spill_bench: %s: %s\n", what, strerror(err));
	exit(2);
}

static void *xmalloc(size_t bytes)
{
	void *p = malloc(bytes);

	if (!p)
		die("malloc", ENOMEM);
	return p;
}

static unsigned char *map_anon(size_t n)
{
	void *p = mmap(NULL, n * PG, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap", errno);
	/* The engine moves 4 KiB pages; a huge page would be split first. */
	madvise(p, n * PG, MADV_NOHUGEPAGE);
	return p;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* The heap page that page @i of round @round holds: the mapping shifts
 * every round, so each page meets many contents over a run. */
static const unsigned char *heap_page(size_t i, int round)
{
	return heap + (size_t)((i + (size_t)round * 131) % (size_t)nheap) * PG;
}

static void fill(unsigned char *p, size_t n, int round)
{
	for (size_t i = 0; i < n; i++)
		memcpy(p + i * PG, heap_page(i, round), PG);
}

static void verify(const unsigned char *p, size_t n, int round)
{
	for (size_t i = 0; i < n; i++)
		mismatches += memcmp(p + i * PG, heap_page(i, round), PG) != 0;
}

/* ---- statistics ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The value at quantile @q of @n sorted values (nearest rank). */
static double quantile(const double *sorted, size_t n, double q)
{
	return sorted[(size_t)(q * (double)(n - 1) + 0.5)];
}

/* The median of @n values (at most MAX_ROUNDS), @v left as it was. */
static double median_of(const double *v, size_t n)
{
	double tmp[MAX_ROUNDS];

	memcpy(tmp, v, n * sizeof(*v));
	qsort(tmp, n, sizeof(*tmp), cmp_double);
	return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

/* Latencies of one configuration over every round, and each round's p50. */
struct lat {
	double *us;
	size_t n;
	double round_p50[MAX_ROUNDS];
	int nrounds;
};

static void lat_init(struct lat *l)
{
	l->us = xmalloc((size_t)rounds * npages * sizeof(*l->us));
}

/* Add one round's @n latencies (reordered in place). */
static void lat_add(struct lat *l, double *us, size_t n)
{
	if (!n)
		return;
	qsort(us, n, sizeof(*us), cmp_double);
	l->round_p50[l->nrounds++] = quantile(us, n, 0.5);
	memcpy(l->us + l->n, us, n * sizeof(*us));
	l->n += n;
}

static void lat_print(struct lat *l, const char *name, int threads)
{
	double lo, hi, sum = 0;

	if (!l->n) {
		printf("lat %s %d 0\n", name, threads);
		return;
	}
	qsort(l->us, l->n, sizeof(*l->us), cmp_double);
	qsort(l->round_p50, (size_t)l->nrounds, sizeof(double), cmp_double);
	lo = l->round_p50[0];
	hi = l->round_p50[l->nrounds - 1];
	for (size_t i = 0; i < l->n; i++)
		sum += l->us[i];
	/* threads, samples, p50, p99, p99.9, least and greatest round p50, mean */
	printf("lat %s %d %zu %.2f %.2f %.2f %.2f %.2f %.2f\n", name, threads, l->n,
	       quantile(l->us, l->n, 0.5), quantile(l->us, l->n, 0.99),
	       quantile(l->us, l->n, 0.999), lo, hi, sum / (double)l->n);
}

/* One MB/s figure per round. */
struct tput {
	double mbps[MAX_ROUNDS];
	int n;
};

static void tput_add_pages(struct tput *t, size_t pages, double seconds)
{
	t->mbps[t->n++] = (double)pages * PG / 1e6 / seconds;
}

static void tput_add(struct tput *t, double seconds)
{
	tput_add_pages(t, npages, seconds);
}

static void tput_print(const struct tput *t, const char *name)
{
	double lo = t->mbps[0], hi = t->mbps[0];

	for (int i = 1; i < t->n; i++) {
		lo = t->mbps[i] < lo ? t->mbps[i] : lo;
		hi = t->mbps[i] > hi ? t->mbps[i] : hi;
	}
	printf("tput %s %.0f %.0f %.0f\n", name, median_of(t->mbps, (size_t)t->n),
	       lo, hi);
}

/* Median over rounds of @a / @b, each round's pair measured together. */
static double ratio_median(const struct tput *a, const struct tput *b)
{
	double r[MAX_ROUNDS];

	for (int i = 0; i < a->n; i++)
		r[i] = a->mbps[i] / b->mbps[i];
	return median_of(r, (size_t)a->n);
}

/* ---- timed walks ---- */

enum touch { TOUCH_READ, TOUCH_WRITE, TOUCH_AFTER_DONTNEED };

/*
 * Touch one byte of each of @n pages at @p, timing each touch into us[i].
 * TOUCH_AFTER_DONTNEED drops the page's PTE first, outside the timing:
 * one page faults at a time, whatever fault-around would map.
 */
static void walk_timed(unsigned char *p, size_t n, double *us, enum touch how)
{
	for (size_t i = 0; i < n; i++) {
		volatile unsigned char *b = p + i * PG + TOUCH_AT;
		double t0;

		if (how == TOUCH_AFTER_DONTNEED)
			madvise(p + i * PG, PG, MADV_DONTNEED);
		t0 = now_us();
		if (how == TOUCH_WRITE)
			*b = 1;
		else
			(void)*b;
		us[i] = now_us() - t0;
	}
}

static void walk(unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		(void)*(volatile unsigned char *)(p + i * PG + TOUCH_AT);
}

struct walker {
	pthread_t thread;
	pthread_barrier_t *start;
	unsigned char *first;
	size_t n;
	double *us;
};

static void *walker_main(void *arg)
{
	struct walker *w = arg;

	pthread_barrier_wait(w->start);
	walk_timed(w->first, w->n, w->us, TOUCH_READ);
	return NULL;
}

/* Share @i of @n pages split @threads ways. */
static size_t share_start(size_t n, int threads, int i)
{
	return n * (size_t)i / (size_t)threads;
}

/* @threads threads walk their shares of the @n pages at @p, all released
 * at once; the latencies land in us[0 .. n-1]. */
static void walk_threads(unsigned char *p, size_t n, int threads, double *us)
{
	struct walker w[MAX_THREADS];
	pthread_barrier_t start;
	int err;

	pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
	for (int i = 0; i < threads; i++) {
		size_t first = share_start(n, threads, i);

		w[i] = (struct walker){
			.start = &start,
			.first = p + first * PG,
			.n = share_start(n, threads, i + 1) - first,
			.us = us + first,
		};
		err = pthread_create(&w[i].thread, NULL, walker_main, &w[i]);
		if (err)
			die("pthread_create", err);
	}
	pthread_barrier_wait(&start);
	for (int i = 0; i < threads; i++)
		pthread_join(w[i].thread, NULL);
	pthread_barrier_destroy(&start);
}

/* ---- the spill engine, one per codec ---- */

struct codec_side {
	const char *name;
	enum zp_codec codec;
	bool readahead;			/* spill_options.readahead */
	bool halting;			/* without spill_options.cpu_latency */
	struct zp_pool *pool;
	struct spill_engine *eng;
	unsigned char *region;		/* npages, spilled and walked */
	struct lat lat[NR_THREAD_COUNTS];
	struct tput spill, refault, raw_compress, raw_decompress, scattered;
	unsigned long short_spills;	/* pages spill_out() left in place */
	double ratio;

	/* Raw codec reference: every heap page compressed once, for the
	 * decompress side; a scratch buffer for the compress side. */
	void **packed;
	size_t *packed_len;
	void *scratch;
	size_t bound;
	ZSTD_CCtx *zc;
	ZSTD_DCtx *zd;
};

static struct codec_side sides[] = {
	{ .name = "lz4", .codec = ZP_CODEC_LZ4 },
	{ .name = "zstd", .codec = ZP_CODEC_ZSTD },
	/* What the library runs: readahead on sequential faults. */
	{ .name = "lz4+readahead", .codec = ZP_CODEC_LZ4, .readahead = true },
	/*
	 * Without the CPU latency request in fault bursts (the library's
	 * spill_cpu_latency=0; the other sides hold it, where this process
	 * may): idle CPUs halt while the handler works.  In a process of its
	 * own (spill_bench ... halting): next to the other sides, its p50 came
	 * out 11-22 us in runs where a process without any request measured
	 * 22-26.
	 */
	{ .name = "lz4-halting", .codec = ZP_CODEC_LZ4, .halting = true },
};
#define NR_SIDES (sizeof(sides) / sizeof(sides[0]))

static size_t raw_compress(struct codec_side *s, const void *src, void *dst)
{
	if (s->codec == ZP_CODEC_LZ4)
		return (size_t)LZ4_compress_default(src, dst, PG, (int)s->bound);
	return ZSTD_compressCCtx(s->zc, dst, s->bound, src, PG, ZSTD_LEVEL);
}

static bool raw_decompress(struct codec_side *s, const void *src, size_t len,
			   void *dst)
{
	if (s->codec == ZP_CODEC_LZ4)
		return LZ4_decompress_safe(src, dst, (int)len, PG) == (int)PG;
	return ZSTD_decompressDCtx(s->zd, dst, PG, src, len) == PG;
}

static void raw_prepare(struct codec_side *s)
{
	s->bound = s->codec == ZP_CODEC_LZ4 ? (size_t)LZ4_compressBound(PG)
					    : ZSTD_compressBound(PG);
	s->scratch = xmalloc(s->bound);
	if (s->codec == ZP_CODEC_ZSTD) {
		s->zc = ZSTD_createCCtx();
		s->zd = ZSTD_createDCtx();
		if (!s->zc || !s->zd)
			die("ZSTD_createCCtx", ENOMEM);
	}
	s->packed = xmalloc((size_t)nheap * sizeof(*s->packed));
	s->packed_len = xmalloc((size_t)nheap * sizeof(*s->packed_len));
	for (long i = 0; i < nheap; i++) {
		size_t len = raw_compress(s, heap + (size_t)i * PG, s->scratch);

		if (!len || (s->codec == ZP_CODEC_ZSTD && ZSTD_isError(len)))
			die("raw compress", EIO);
		s->packed[i] = xmalloc(len);
		memcpy(s->packed[i], s->scratch, len);
		s->packed_len[i] = len;
	}
}

/* Returns 0, or spill_open()'s error. */
static int side_open(struct codec_side *s)
{
	struct zp_options o = { .codec = s->codec, .arena_bytes = 1ull << 30 };
	int err = zp_create_pool(&o, &s->pool);

	if (err)
		die("zp_create_pool", -err);
	err = spill_open(&(struct spill_options){ .pool = s->pool, .readahead = s->readahead,
						  .cpu_latency = !s->halting },
			 &s->eng);
	if (err)
		return err;
	s->region = map_anon(npages);
	for (size_t k = 0; k < NR_THREAD_COUNTS; k++)
		lat_init(&s->lat[k]);
	raw_prepare(s);
	return 0;
}

/*
 * Wait, up to 2 s, until the handler has dropped the entries and ranges of
 * the pages already back (it wakes the faulting thread first): a page
 * whose entry is still there would be skipped by the next spill_out().
 */
static void settle(struct codec_side *s)
{
	struct spill_stats st;

	for (int i = 0; i < 2000; i++) {
		spill_stats(s->eng, &st);
		if (!st.in_pool && !st.ranges)
			return;
		usleep(1000);
	}
	settle_timeouts++;
}

/* Spill the @n pages at @p in @calls spill_out() calls, one per share. */
static void spill_shares(struct codec_side *s, unsigned char *p, size_t n, int calls)
{
	for (int i = 0; i < calls; i++) {
		size_t first = share_start(n, calls, i);
		size_t len = share_start(n, calls, i + 1) - first;
		long got = spill_out(s->eng, p + first * PG, len);

		if (got < 0)
			die("spill_out", (int)-got);
		s->short_spills += len - (size_t)got;
	}
}

static void step_spill_latency(struct codec_side *s, size_t k, int round,
			       double *us)
{
	int threads = thread_counts[k];

	settle(s);
	fill(s->region, npages, round);
	spill_shares(s, s->region, npages, threads);
	walk_threads(s->region, npages, threads, us);
	verify(s->region, npages, round);
	lat_add(&s->lat[k], us, npages);
}

static void step_spill_throughput(struct codec_side *s, int round)
{
	struct zp_stats zs;
	double t0, t1, t2;

	settle(s);
	fill(s->region, npages, round);
	t0 = now_us();
	spill_shares(s, s->region, npages, 1);
	t1 = now_us();
	zp_pool_stats(s->pool, &zs);
	walk(s->region, npages);
	t2 = now_us();
	verify(s->region, npages, round);
	tput_add(&s->spill, (t1 - t0) * 1e-6);
	tput_add(&s->refault, (t2 - t1) * 1e-6);
	if (zs.compr_data_size)
		s->ratio = (double)zs.orig_data_size / (double)zs.compr_data_size;
}

static atomic_bool spinner_stop;

static void *spinner(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&spinner_stop, memory_order_relaxed))
		;
	return NULL;
}

/*
 * Reclaim's common case: single pages between resident ones, one
 * spill_out() each, while another thread of the program runs -- then
 * every change to the page tables that must be flushed costs an IPI to
 * its CPU (the staging area is cleared once per 64 staged pages, not per
 * call).  Every other page of the region, spill_stage_clear() included.
 */
static void step_spill_scattered(struct codec_side *s, int round)
{
	pthread_t t;
	size_t spilled = 0;
	double t0, t1;
	int err;

	settle(s);
	fill(s->region, npages, round);
	atomic_store(&spinner_stop, false);
	err = pthread_create(&t, NULL, spinner, NULL);
	if (err)
		die("pthread_create", err);
	t0 = now_us();
	for (size_t i = 0; i < npages; i += 2) {
		long got = spill_out(s->eng, s->region + i * PG, 1);

		if (got < 0)
			die("spill_out", (int)-got);
		spilled += (size_t)got;
		s->short_spills += 1 - (size_t)got;
	}
	spill_stage_clear(s->eng);
	t1 = now_us();
	atomic_store(&spinner_stop, true);
	pthread_join(t, NULL);
	walk(s->region, npages);
	verify(s->region, npages, round);
	if (spilled)
		tput_add_pages(&s->scattered, spilled, (t1 - t0) * 1e-6);
}

/* The codec alone on the same pages: compress into one scratch buffer,
 * decompress from copies compressed beforehand. */
static void step_raw(struct codec_side *s, int round)
{
	unsigned char out[PG];
	double t0, t1, t2;
	size_t sum = 0;

	t0 = now_us();
	for (size_t i = 0; i < npages; i++)
		sum += raw_compress(s, heap_page(i, round), s->scratch);
	t1 = now_us();
	for (size_t i = 0; i < npages; i++) {
		size_t h = (size_t)(heap_page(i, round) - heap) / PG;

		if (!raw_decompress(s, s->packed[h], s->packed_len[h], out))
			die("raw decompress", EIO);
	}
	t2 = now_us();
	if (!sum)
		die("raw compress", EIO);
	tput_add(&s->raw_compress, (t1 - t0) * 1e-6);
	tput_add(&s->raw_decompress, (t2 - t1) * 1e-6);
}

/* ---- the kernel's refaults ---- */

static struct lat lat_pagecache, lat_swapin, lat_zerofill, lat_resident, lat_moved;
static unsigned char *file_map, *resident_map;
/* A uffd with UFFDIO_MOVE and the area it registers, for step_moved (-1: none). */
static int move_uffd = -1;
static unsigned char *move_dst;
static bool have_swap;
static unsigned long swapped_out;

/* A file of @npages heap pages in @dir, in the page cache, mapped
 * private and read-only, every page mapped once. */
static void pagecache_open(const char *dir)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/spill-bench.XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0)
		die(path, errno);
	unlink(path);
	for (size_t i = 0; i < npages; i++)
		if (write(fd, heap_page(i, 0), PG) != (ssize_t)PG)
			die("write", errno);
	file_map = mmap(NULL, npages * PG, PROT_READ, MAP_PRIVATE, fd, 0);
	if (file_map == MAP_FAILED)
		die("mmap", errno);
	close(fd);
	walk(file_map, npages);
}

/* Whether /proc/swaps lists a device (anything past its header line). */
static bool swap_present(void)
{
	FILE *f = fopen("/proc/swaps", "r");
	char line[512];
	int lines = 0;

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		lines++;
	fclose(f);
	return lines > 1;
}

static void step_pagecache(double *us)
{
	walk_timed(file_map, npages, us, TOUCH_AFTER_DONTNEED);
	lat_add(&lat_pagecache, us, npages);
}

/* Anonymous heap pages pushed out with MADV_PAGEOUT; only the pages that
 * mincore() then finds gone (not even in the swap cache) are timed. */
static void step_swapin(double *us, int round)
{
	unsigned char *p = map_anon(npages), *vec = xmalloc(npages);
	size_t n = 0;

	fill(p, npages, round);
	if (madvise(p, npages * PG, MADV_PAGEOUT) || mincore(p, npages * PG, vec))
		memset(vec, 1, npages);
	for (size_t i = 0; i < npages; i++) {
		volatile unsigned char *b = p + i * PG + TOUCH_AT;
		double t0;

		if (vec[i] & 1)
			continue;
		t0 = now_us();
		(void)*b;
		us[n++] = now_us() - t0;
	}
	swapped_out += n;
	lat_add(&lat_swapin, us, n);
	munmap(p, npages * PG);
	free(vec);
}

static void step_zerofill(double *us)
{
	unsigned char *p = map_anon(npages);

	walk_timed(p, npages, us, TOUCH_WRITE);
	lat_add(&lat_zerofill, us, npages);
	munmap(p, npages * PG);
}

/* The uffd and area step_moved moves pages into; off when the kernel refuses. */
static void moved_open(void)
{
	struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_MOVE };
	struct uffdio_register reg = { .mode = UFFDIO_REGISTER_MODE_MISSING };

	move_uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (move_uffd < 0)
		return;
	move_dst = map_anon(npages);
	reg.range.start = (uintptr_t)move_dst;
	reg.range.len = npages * PG;
	if (ioctl(move_uffd, UFFDIO_API, &api) || ioctl(move_uffd, UFFDIO_REGISTER, &reg)) {
		close(move_uffd);
		move_uffd = -1;
	}
}

/* Fresh pages moved 64 at a time (as the engine does) into the area, each then read once. */
static void step_moved(double *us, int round)
{
	unsigned char *p = map_anon(npages);

	fill(p, npages, round);
	for (size_t i = 0; i < npages; i += 64) {
		size_t n = npages - i < 64 ? npages - i : 64;
		struct uffdio_move m = {
			.dst = (uintptr_t)(move_dst + i * PG), .src = (uintptr_t)(p + i * PG),
			.len = n * PG, .mode = UFFDIO_MOVE_MODE_DONTWAKE,
		};

		if (ioctl(move_uffd, UFFDIO_MOVE, &m))
			die("UFFDIO_MOVE", errno);
	}
	walk_timed(move_dst, npages, us, TOUCH_READ);
	lat_add(&lat_moved, us, npages);
	madvise(move_dst, npages * PG, MADV_DONTNEED);
	munmap(p, npages * PG);
}

/*
 * The bare userfaultfd round trip: its own uffd over an area whose pages
 * are all missing, and a thread that serves each fault with UFFDIO_COPY
 * of one page filled beforehand.  No CPU latency request.  Off when the
 * kernel refuses the uffd.  Two ways:
 *  - spinning: between faults the thread reads the uffd without sleeping
 *    until BARE_SPIN_US pass without one (the engine's SP_SPIN_BURST_NS),
 *    then sleeps in poll() until the next walk;
 *  - two spinning: two such threads read the one uffd, for 1, 2 and 4
 *    walking threads as the spill rows have: what a second handler thread
 *    could give the engine when several threads fault at once (and what
 *    it takes from one thread faulting alone); and again with the second
 *    of them asleep in poll() between faults instead of spinning;
 *  - same CPU: the thread and the walking one are bound to one CPU and
 *    the thread sleeps in read() between faults, so that a fault switches
 *    to it on that CPU and no CPU wakes another (the least two system
 *    calls a fault; a design with a handler for each CPU could come no
 *    closer).  A fault on the page after the area stops it.
 * The spinning kinds are walked by 1, 2 and 4 threads, as the spill rows
 * are; the same-CPU one by one.
 */
#define BARE_SERVERS_MAX	2
#define BARE_SPIN_US	200.0

struct bare {
	bool same_cpu;
	int servers;			/* serving threads: 1 or BARE_SERVERS_MAX */
	bool second_asleep;		/* the second never spins */
	atomic_int started;		/* serving threads so far: each one's index */
	const char *key;
	int uffd, stop, cpu;
	unsigned char *area, *src;
	pthread_t thread[BARE_SERVERS_MAX];
	atomic_bool quit;
	struct lat lat[NR_THREAD_COUNTS];	/* by walking threads; same CPU: [0] */
};

static struct bare bare_spin = { .servers = 1, .key = "bare-uffd", .uffd = -1 };
static struct bare bare_two = { .servers = 2, .key = "bare-uffd-two", .uffd = -1 };
static struct bare bare_two_asleep = { .servers = 2, .second_asleep = true,
				       .key = "bare-uffd-two-asleep", .uffd = -1 };
static struct bare bare_same = { .same_cpu = true, .servers = 1, .key = "bare-uffd-same-cpu",
				 .uffd = -1 };

/* Serve the fault @msg; false when it was not one. */
static bool bare_serve(struct bare *b, const struct uffd_msg *msg)
{
	struct uffdio_copy c = { .src = (uintptr_t)b->src, .len = PG };

	if (msg->event != UFFD_EVENT_PAGEFAULT)
		return false;
	c.dst = msg->arg.pagefault.address & ~(uint64_t)(PG - 1);
	if (ioctl(b->uffd, UFFDIO_COPY, &c) && errno != EEXIST)
		die("UFFDIO_COPY", errno);
	return true;
}

static void *bare_handler(void *arg)
{
	struct bare *b = arg;
	struct uffd_msg msg;
	bool asleep = b->second_asleep && atomic_fetch_add(&b->started, 1) > 0;

	while (b->same_cpu) {
		if (read(b->uffd, &msg, sizeof(msg)) != (ssize_t)sizeof(msg)) {
			if (errno != EINTR && errno != EAGAIN)
				die("read uffd", errno);
			continue;
		}
		bare_serve(b, &msg);
		if (atomic_load(&b->quit))
			return NULL;
	}
	for (;;) {
		struct pollfd pf[2] = { { .fd = b->uffd, .events = POLLIN },
					{ .fd = b->stop, .events = POLLIN } };
		double idle_since = now_us();

		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			die("poll", errno);
		if (pf[1].revents)
			return NULL;
		if (asleep) {
			while (read(b->uffd, &msg, sizeof(msg)) == (ssize_t)sizeof(msg))
				bare_serve(b, &msg);
			continue;
		}
		while (now_us() - idle_since < BARE_SPIN_US) {
			if (read(b->uffd, &msg, sizeof(msg)) != (ssize_t)sizeof(msg) ||
			    !bare_serve(b, &msg)) {
				__builtin_ia32_pause();
				continue;
			}
			idle_since = now_us();
		}
	}
}

/* The first CPU this process may run on. */
static int first_cpu(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set))
		die("sched_getaffinity", errno);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			return c;
	return 0;
}

static void bare_open(struct bare *b)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = { .mode = UFFDIO_REGISTER_MODE_MISSING };
	pthread_attr_t attr;
	int err;

	b->uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | (b->same_cpu ? 0 : O_NONBLOCK));
	if (b->uffd < 0)
		return;
	/* One page more: the same-CPU thread's stop. */
	b->area = map_anon(npages + 1);
	b->src = map_anon(1);
	memset(b->src, 0x5a, PG);
	reg.range.start = (uintptr_t)b->area;
	reg.range.len = (npages + 1) * PG;
	if (ioctl(b->uffd, UFFDIO_API, &api) || ioctl(b->uffd, UFFDIO_REGISTER, &reg)) {
		close(b->uffd);
		b->uffd = -1;
		return;
	}
	b->stop = b->same_cpu ? -1 : eventfd(0, EFD_CLOEXEC);
	if (!b->same_cpu && b->stop < 0)
		die("eventfd", errno);
	atomic_init(&b->quit, false);
	pthread_attr_init(&attr);
	if (b->same_cpu) {
		cpu_set_t one;

		b->cpu = first_cpu();
		CPU_ZERO(&one);
		CPU_SET(b->cpu, &one);
		err = pthread_attr_setaffinity_np(&attr, sizeof(one), &one);
		if (err)
			die("pthread_attr_setaffinity_np", err);
	}
	for (int i = 0; i < b->servers; i++) {
		err = pthread_create(&b->thread[i], &attr, bare_handler, b);
		if (err)
			die("pthread_create", err);
	}
	pthread_attr_destroy(&attr);
}

static void bare_close(struct bare *b)
{
	if (b->uffd < 0)
		return;
	if (b->same_cpu) {
		atomic_store(&b->quit, true);
		(void)*(volatile unsigned char *)(b->area + npages * PG);
	} else if (eventfd_write(b->stop, 1)) {
		die("eventfd_write", errno);
	}
	for (int i = 0; i < b->servers; i++)
		pthread_join(b->thread[i], NULL);
	if (b->stop >= 0)
		close(b->stop);
	close(b->uffd);
}

/* Walk @b's area with thread_counts[@k] threads. */
static void step_bare(struct bare *b, size_t k, double *us)
{
	cpu_set_t was, one;

	if (b->same_cpu) {
		if (sched_getaffinity(0, sizeof(was), &was))
			die("sched_getaffinity", errno);
		CPU_ZERO(&one);
		CPU_SET(b->cpu, &one);
		if (sched_setaffinity(0, sizeof(one), &one))
			die("sched_setaffinity", errno);
	}
	if (thread_counts[k] == 1)
		walk_timed(b->area, npages, us, TOUCH_READ);
	else
		walk_threads(b->area, npages, thread_counts[k], us);
	if (b->same_cpu && sched_setaffinity(0, sizeof(was), &was))
		die("sched_setaffinity", errno);
	lat_add(&b->lat[k], us, npages);
	for (size_t i = 0; i < npages; i++)
		if (b->area[i * PG + TOUCH_AT] != 0x5a)
			mismatches++;
	/* Missing again for the next round. */
	madvise(b->area, npages * PG, MADV_DONTNEED);
}

static void step_resident(double *us)
{
	walk_timed(resident_map, npages, us, TOUCH_READ);
	lat_add(&lat_resident, us, npages);
}

/* ---- rounds ---- */

enum step_kind {
	STEP_SPILL_LATENCY, STEP_SPILL_THROUGHPUT, STEP_SPILL_SCATTERED, STEP_RAW,
	STEP_PAGECACHE, STEP_SWAPIN, STEP_ZEROFILL, STEP_RESIDENT, STEP_MOVED, STEP_BARE,
	STEP_BARE_TWO, STEP_BARE_TWO_ASLEEP, STEP_BARE_SAME_CPU,
};

struct step {
	enum step_kind kind;
	struct codec_side *side;
	size_t k;			/* index in thread_counts */
};

/*
 * The scattered spills run in a process of their own (spill_bench ...
 * scattered): thousands of one-page spill_out() calls leave the
 * process's mappings split and merged again, and the refault latencies
 * measured after them in the same process had a p99 of 0.6-1 ms instead
 * of 0.16.
 */
static bool scattered_only;
/* spill_bench ... halting: the halting side alone (see sides[]). */
static bool halting_only;

static size_t make_steps(struct step *steps)
{
	size_t n = 0;

	if (scattered_only) {
		for (size_t s = 0; s < NR_SIDES; s++)
			if (!sides[s].halting)
				steps[n++] = (struct step){ STEP_SPILL_SCATTERED, &sides[s], 0 };
		return n;
	}

	for (size_t s = 0; s < NR_SIDES; s++) {
		if (sides[s].halting != halting_only)
			continue;
		for (size_t k = 0; k < NR_THREAD_COUNTS; k++)
			steps[n++] = (struct step){ STEP_SPILL_LATENCY, &sides[s], k };
		steps[n++] = (struct step){ STEP_SPILL_THROUGHPUT, &sides[s], 0 };
		if (!halting_only)
			steps[n++] = (struct step){ STEP_RAW, &sides[s], 0 };
	}
	if (halting_only)
		return n;
	steps[n++] = (struct step){ STEP_PAGECACHE, NULL, 0 };
	if (have_swap)
		steps[n++] = (struct step){ STEP_SWAPIN, NULL, 0 };
	steps[n++] = (struct step){ STEP_ZEROFILL, NULL, 0 };
	steps[n++] = (struct step){ STEP_RESIDENT, NULL, 0 };
	if (move_uffd >= 0)
		steps[n++] = (struct step){ STEP_MOVED, NULL, 0 };
	for (size_t k = 0; k < NR_THREAD_COUNTS; k++) {
		if (bare_spin.uffd >= 0)
			steps[n++] = (struct step){ STEP_BARE, NULL, k };
		if (bare_two.uffd >= 0)
			steps[n++] = (struct step){ STEP_BARE_TWO, NULL, k };
		if (bare_two_asleep.uffd >= 0)
			steps[n++] = (struct step){ STEP_BARE_TWO_ASLEEP, NULL, k };
	}
	if (bare_same.uffd >= 0)
		steps[n++] = (struct step){ STEP_BARE_SAME_CPU, NULL, 0 };
	return n;
}

static void run_step(const struct step *st, int round, double *us)
{
	switch (st->kind) {
	case STEP_SPILL_LATENCY:
		step_spill_latency(st->side, st->k, round, us);
		break;
	case STEP_SPILL_THROUGHPUT:
		step_spill_throughput(st->side, round);
		break;
	case STEP_SPILL_SCATTERED:
		step_spill_scattered(st->side, round);
		break;
	case STEP_RAW:
		step_raw(st->side, round);
		break;
	case STEP_PAGECACHE:
		step_pagecache(us);
		break;
	case STEP_SWAPIN:
		step_swapin(us, round);
		break;
	case STEP_ZEROFILL:
		step_zerofill(us);
		break;
	case STEP_RESIDENT:
		step_resident(us);
		break;
	case STEP_MOVED:
		step_moved(us, round);
		break;
	case STEP_BARE:
		step_bare(&bare_spin, st->k, us);
		break;
	case STEP_BARE_TWO:
		step_bare(&bare_two, st->k, us);
		break;
	case STEP_BARE_TWO_ASLEEP:
		step_bare(&bare_two_asleep, st->k, us);
		break;
	case STEP_BARE_SAME_CPU:
		step_bare(&bare_same, 0, us);
		break;
	}
}

static void report(void)
{
	struct spill_stats st;

	if (scattered_only) {
		for (size_t s = 0; s < NR_SIDES; s++) {
			char name[48];

			if (sides[s].halting)
				continue;
			snprintf(name, sizeof(name), "scattered-%s", sides[s].name);
			tput_print(&sides[s].scattered, name);
		}
		printf("mismatches %lu\n", mismatches);
		return;
	}
	if (halting_only) {
		for (size_t s = 0; s < NR_SIDES; s++) {
			char name[48];

			if (!sides[s].halting)
				continue;
			snprintf(name, sizeof(name), "spill-%s", sides[s].name);
			for (size_t k = 0; k < NR_THREAD_COUNTS; k++)
				lat_print(&sides[s].lat[k], name, thread_counts[k]);
			snprintf(name, sizeof(name), "refault-%s", sides[s].name);
			tput_print(&sides[s].refault, name);
		}
		printf("mismatches %lu\n", mismatches);
		printf("settle_timeouts %lu\n", settle_timeouts);
		return;
	}

	for (size_t s = 0; s < NR_SIDES; s++) {
		struct codec_side *c = &sides[s];
		char name[32];

		if (c->halting)
			continue;
		snprintf(name, sizeof(name), "spill-%s", c->name);
		for (size_t k = 0; k < NR_THREAD_COUNTS; k++)
			lat_print(&c->lat[k], name, thread_counts[k]);
	}
	lat_print(&lat_pagecache, "kernel-pagecache", 1);
	if (have_swap) {
		lat_print(&lat_swapin, "kernel-swapin", 1);
		printf("swapped_out %lu\n", swapped_out);
	} else {
		printf("swap none\n");
	}
	lat_print(&lat_zerofill, "kernel-zerofill", 1);
	lat_print(&lat_resident, "resident", 1);
	lat_print(&lat_moved, "moved", 1);
	for (size_t k = 0; k < NR_THREAD_COUNTS; k++) {
		lat_print(&bare_spin.lat[k], bare_spin.key, thread_counts[k]);
		lat_print(&bare_two.lat[k], bare_two.key, thread_counts[k]);
		lat_print(&bare_two_asleep.lat[k], bare_two_asleep.key, thread_counts[k]);
	}
	lat_print(&bare_same.lat[0], bare_same.key, 1);

	for (size_t s = 0; s < NR_SIDES; s++) {
		struct codec_side *c = &sides[s];
		char name[48];

		if (c->halting)
			continue;
		snprintf(name, sizeof(name), "spill-%s", c->name);
		tput_print(&c->spill, name);
		snprintf(name, sizeof(name), "refault-%s", c->name);
		tput_print(&c->refault, name);
		snprintf(name, sizeof(name), "raw-compress-%s", c->name);
		tput_print(&c->raw_compress, name);
		snprintf(name, sizeof(name), "raw-decompress-%s", c->name);
		tput_print(&c->raw_decompress, name);
		printf("vs_raw %s %.0f %.0f\n", c->name,
		       100 * ratio_median(&c->spill, &c->raw_compress),
		       100 * ratio_median(&c->refault, &c->raw_decompress));
		printf("ratio %s %.2f\n", c->name, c->ratio);
		settle(c);
		spill_stats(c->eng, &st);
		printf("engine %s %llu %llu %llu %llu %lu %llu\n", c->name,
		       (unsigned long long)st.spilled, (unsigned long long)st.refaulted,
		       (unsigned long long)st.skipped,
		       (unsigned long long)st.store_failed, c->short_spills,
		       (unsigned long long)st.readahead);
	}
	spill_stats(sides[0].eng, &st);
	printf("cpu_latency_err %d\n", st.cpu_latency_err);
	printf("mismatches %lu\n", mismatches);
	printf("settle_timeouts %lu\n", settle_timeouts);
}

int main(int argc, char **argv)
{
	struct step steps[48];
	const char *source;
	size_t nsteps;
	double *us;

	if (argc < 3) {
		fprintf(stderr, "usage: spill_bench PAGEFILE SCRATCHDIR [rounds] [pages] [scattered|halting]\n");
		return 2;
	}
	rounds = argc > 3 ? atoi(argv[3]) : 10;
	npages = argc > 4 ? (size_t)atol(argv[4]) : 4096;
	scattered_only = argc > 5 && strcmp(argv[5], "scattered") == 0;
	halting_only = argc > 5 && strcmp(argv[5], "halting") == 0;
	if (rounds < 1 || rounds > MAX_ROUNDS || npages < MAX_THREADS) {
		fprintf(stderr, "spill_bench: rounds must be 1..%d and pages at least %d\n",
			MAX_ROUNDS, MAX_THREADS);
		return 2;
	}
	/* First, while nothing is spilled: this may fork python3. */
	nheap = zpt_heap_pages_cached(argv[1], 8192, &heap, &source);
	if (nheap <= 0) {
		fprintf(stderr, "spill_bench: no heap pages\n");
		return 2;
	}

	for (size_t s = 0; s < NR_SIDES; s++) {
		int err = side_open(&sides[s]);

		if (err == -EPERM || err == -EOPNOTSUPP) {
			printf("unavailable spill_open: %s\n", strerror(-err));
			return 0;
		}
		if (err)
			die("spill_open", -err);
	}
	if (!scattered_only && !halting_only) {
		printf("heap_pages %ld %s\n", nheap, source);
		printf("pages %zu\n", npages);
		printf("rounds %d\n", rounds);
	}

	pagecache_open(argv[2]);
	have_swap = swap_present();
	resident_map = map_anon(npages);
	memset(resident_map, 1, npages * PG);
	us = xmalloc(npages * sizeof(*us));
	lat_init(&lat_pagecache);
	lat_init(&lat_swapin);
	lat_init(&lat_zerofill);
	lat_init(&lat_resident);
	lat_init(&lat_moved);
	for (size_t k = 0; k < NR_THREAD_COUNTS; k++) {
		lat_init(&bare_spin.lat[k]);
		lat_init(&bare_two.lat[k]);
		lat_init(&bare_two_asleep.lat[k]);
	}
	lat_init(&bare_same.lat[0]);
	moved_open();
	if (!scattered_only && !halting_only) {
		bare_open(&bare_spin);
		bare_open(&bare_two);
		bare_open(&bare_two_asleep);
		bare_open(&bare_same);
	}

	nsteps = make_steps(steps);
	for (int r = 0; r < rounds; r++)
		for (size_t i = 0; i < nsteps; i++)
			run_step(&steps[(i + (size_t)r) % nsteps], r, us);
	report();

	bare_close(&bare_spin);
	bare_close(&bare_two);
	bare_close(&bare_two_asleep);
	bare_close(&bare_same);
	for (size_t s = 0; s < NR_SIDES; s++) {
		spill_close(sides[s].eng);
		zp_destroy_pool(sides[s].pool);
	}
	free(us);
	return 0;
}
