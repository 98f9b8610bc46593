/*
 * zpool benchmark on one set of real heap pages (a Python program's heap,
 * read once and kept in a page file so every run and every mode sees the
 * same pages).
 *
 *   zpool_bench PAGEFILE throughput [rounds]
 *       store and load throughput against raw LZ4_compress_default /
 *       LZ4_decompress_safe, interleaved round by round; memory per
 *       compressed byte, fresh and after churn + compaction; lz4 vs zstd;
 *       recompression to zstd without and with the pool's dictionary
 *   zpool_bench PAGEFILE store|load|raw-compress|raw-decompress [n]
 *       n operations inside one function, for callgrind --toggle-collect
 *   zpool_bench PAGEFILE load-zstd|load-zstd-dict
 *       loads of every page recompressed with zstd, without or with the
 *       dictionary (measured_load_loop)
 *
 * Output: "key value" lines that bench/zpool_bench.sh turns into
 * bench/RESULTS-zpool.md.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lz4.h>

#include "cgm/zpool.h"
#include "zpool_pages.h"

static unsigned char *pages;
static long npages;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static unsigned char *page(long i)
{
	return pages + (size_t)i * ZPT_PAGE;
}

static struct zp_pool *make_pool(enum zp_codec codec)
{
	struct zp_options o = { .codec = codec, .arena_bytes = 1ull << 30 };
	struct zp_pool *pool;

	if (zp_create_pool(&o, &pool)) {
		fprintf(stderr, "zpool_bench: cannot create pool\n");
		exit(2);
	}
	return pool;
}

/* ---- the measured loops (callgrind toggles collection on these) ---- */

/* Store pages first .. first + n - 1 into e[0 .. n - 1]. */
static __attribute__((noinline)) void measured_store_loop(struct zp_pool *pool,
						    zp_entry_t *e, long first,
						    long n)
{
	for (long i = 0; i < n; i++)
		if (zp_store(pool, page((first + i) % npages), &e[i]))
			abort();
}

static __attribute__((noinline)) void measured_load_loop(struct zp_pool *pool,
						   const zp_entry_t *e, long n,
						   unsigned char *dst)
{
	for (long i = 0; i < n; i++)
		if (zp_load(pool, e[i], dst))
			abort();
}

/* The same pages compressed by plain LZ4_compress_default, output to one
 * scratch buffer as zswap's per-CPU buffer. */
static __attribute__((noinline)) void measured_raw_compress_loop_at(long first, long n,
							      char *dst, int *lens)
{
	for (long i = 0; i < n; i++)
		lens[i] = LZ4_compress_default((const char *)page((first + i) % npages),
					       dst, ZPT_PAGE,
					       LZ4_compressBound(ZPT_PAGE));
}

static __attribute__((noinline)) void measured_raw_decompress_loop(long n,
							     char *const *src,
							     const int *lens,
							     char *dst)
{
	for (long i = 0; i < n; i++)
		if (LZ4_decompress_safe(src[i], dst, lens[i], ZPT_PAGE) != ZPT_PAGE)
			abort();
}

/* ---- raw lz4 reference data ---- */

static char **raw_c;
static int *raw_len;

static void raw_prepare(void)
{
	char tmp[LZ4_COMPRESSBOUND(ZPT_PAGE)];

	raw_c = malloc(sizeof(*raw_c) * (size_t)npages);
	raw_len = malloc(sizeof(*raw_len) * (size_t)npages);
	for (long i = 0; i < npages; i++) {
		raw_len[i] = LZ4_compress_default((const char *)page(i), tmp,
						  ZPT_PAGE, sizeof(tmp));
		raw_c[i] = malloc((size_t)raw_len[i]);
		memcpy(raw_c[i], tmp, (size_t)raw_len[i]);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Pages per timed slice: raw and zpool alternate slice by slice, so both
 * see the same machine state (other tenants, frequency) within ~1 ms. */
#define SLICE 128

static double cpu_now(void)
{
	struct timespec ts;

	/* Thread CPU time, kernel time (page faults) included: what the
	 * work costs this thread, minus time it was preempted. */
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* What the four sides of a round work on. */
struct round {
	struct zp_pool *pool;
	zp_entry_t *e;
	char *dst;
	int *lens;
	unsigned char *out;
};

typedef void side_fn(struct round *rd, long first, long n);

static void side_raw_compress(struct round *rd, long first, long n)
{
	measured_raw_compress_loop_at(first, n, rd->dst, rd->lens);
}

static void side_store(struct round *rd, long first, long n)
{
	measured_store_loop(rd->pool, rd->e + first, first, n);
}

static void side_raw_decompress(struct round *rd, long first, long n)
{
	measured_raw_decompress_loop(n, raw_c + first, raw_len + first, rd->dst);
}

static void side_load(struct round *rd, long first, long n)
{
	measured_load_loop(rd->pool, rd->e + first, n, rd->out);
}

/* Run @a and @b over all pages slice by slice, alternately first; add
 * their CPU times to *ta and *tb. */
static void interleave(struct round *rd, int r, side_fn *a, side_fn *b,
		       double *ta, double *tb)
{
	for (long i = 0; i < npages; i += SLICE) {
		long n = npages - i < SLICE ? npages - i : SLICE;
		bool a_first = (i / SLICE + r) % 2;
		double t0 = cpu_now(), t1, t2;

		(a_first ? a : b)(rd, i, n);
		t1 = cpu_now();
		(a_first ? b : a)(rd, i, n);
		t2 = cpu_now();
		*ta += a_first ? t1 - t0 : t2 - t1;
		*tb += a_first ? t2 - t1 : t1 - t0;
	}
}

static void throughput(int rounds)
{
	unsigned char out[ZPT_PAGE];
	struct round rd = {
		.e = malloc(sizeof(*rd.e) * (size_t)npages),
		.dst = malloc(LZ4_COMPRESSBOUND(ZPT_PAGE)),
		.lens = malloc(sizeof(*rd.lens) * (size_t)npages),
		.out = out,
	};
	double t_rc[64], t_st[64], t_rd[64], t_ld[64], r_st[64], r_ld[64];
	double mb = (double)npages * ZPT_PAGE / 1e6;

	if (rounds > 64)
		rounds = 64;
	raw_prepare();
	for (int r = 0; r < rounds; r++) {
		rd.pool = make_pool(ZP_CODEC_LZ4);
		t_rc[r] = t_st[r] = t_rd[r] = t_ld[r] = 0;
		interleave(&rd, r, side_raw_compress, side_store, &t_rc[r], &t_st[r]);
		interleave(&rd, r, side_raw_decompress, side_load, &t_rd[r], &t_ld[r]);
		r_st[r] = t_rc[r] / t_st[r];
		r_ld[r] = t_rd[r] / t_ld[r];
		zp_destroy_pool(rd.pool);
	}
	printf("rounds %d\n", rounds);
	printf("raw_compress_MBps %.0f\n", mb / median(t_rc, rounds));
	printf("store_MBps %.0f\n", mb / median(t_st, rounds));
	printf("raw_decompress_MBps %.0f\n", mb / median(t_rd, rounds));
	printf("load_MBps %.0f\n", mb / median(t_ld, rounds));
	printf("store_vs_raw_pct %.0f\n", 100 * median(r_st, rounds));
	printf("load_vs_raw_pct %.0f\n", 100 * median(r_ld, rounds));
	free(rd.lens);
	free(rd.dst);
	free(rd.e);
}

static void memory(enum zp_codec codec, const char *name)
{
	struct zp_pool *pool = make_pool(codec);
	zp_entry_t *e = malloc(sizeof(*e) * (size_t)npages);
	uint64_t rng = 2024;
	struct zp_stats st;
	double t0, t;

	t0 = now();
	measured_store_loop(pool, e, 0, npages);
	t = now() - t0;
	zp_compact(pool);
	zp_pool_stats(pool, &st);
	printf("%s_ratio %.2f\n", name, (double)st.orig_data_size /
	       (double)(st.compr_data_size ? st.compr_data_size : 1));
	printf("%s_store_MBps %.0f\n", name, (double)npages * ZPT_PAGE / 1e6 / t);
	printf("%s_same_pages %lu\n", name, (unsigned long)st.same_pages);
	printf("%s_huge_pages %lu\n", name, (unsigned long)st.huge_pages);
	printf("%s_fresh_mem_per_compr %.3f\n", name,
	       (double)st.mem_used_total / (double)st.compr_data_size);
	/* Churn: drop half at random, as a workload frees pages; compact. */
	for (long i = 0; i < npages; i++)
		if (zpt_rand(&rng) % 2) {
			zp_invalidate(pool, e[i]);
			e[i] = 0;
		}
	zp_pool_stats(pool, &st);
	printf("%s_churned_mem_per_compr %.3f\n", name,
	       (double)st.mem_used_total / (double)st.compr_data_size);
	zp_compact(pool);
	zp_pool_stats(pool, &st);
	printf("%s_compacted_mem_per_compr %.3f\n", name,
	       (double)st.mem_used_total / (double)st.compr_data_size);
	printf("%s_compacted_mem_meta_per_compr %.3f\n", name,
	       (double)(st.mem_used_total + st.meta_bytes) /
	       (double)st.compr_data_size);
	printf("%s_pages_compacted %lu\n", name, (unsigned long)st.pages_compacted);
	if (codec == ZP_CODEC_LZ4) {
		static char table[1 << 16];

		zp_classes_show(pool, table, sizeof(table));
		fprintf(stderr, "%s", table);
	}
	zp_destroy_pool(pool);
	free(e);
}

/* The pages stored with lz4 and all recompressed with zstd, with the dictionary or not. */
static struct zp_pool *recompressed_pool(bool dict, zp_entry_t *e, long n)
{
	struct zp_options o = { .recompress = true, .no_dict = !dict, .arena_bytes = 1ull << 30 };
	struct zp_pool *pool;

	if (zp_create_pool(&o, &pool)) {
		fprintf(stderr, "zpool_bench: cannot create pool\n");
		exit(2);
	}
	measured_store_loop(pool, e, 0, n);
	zp_recompress(pool, (unsigned long)n, 0);
	return pool;
}

/*
 * zram's recompression of idle pages: every page stored with lz4, then all
 * recompressed with zstd, without and with the dictionary of the pool's own
 * pages (zpool/zdict.c, chosen from a sample of the first 4,096 pages lz4
 * halved: the library's default).  The pool's compressed bytes, and the
 * load time of every page (thread CPU time, the fastest of three passes).
 */
static void recompressed(bool dict, const char *name)
{
	zp_entry_t *e = malloc(sizeof(*e) * (size_t)npages);
	struct zp_pool *pool = recompressed_pool(dict, e, npages);
	unsigned char out[ZPT_PAGE];
	struct zp_stats st;
	double best = 0;

	zp_pool_stats(pool, &st);
	for (int pass = 0; pass < 3; pass++) {
		double t0 = cpu_now(), t;

		measured_load_loop(pool, e, npages, out);
		t = cpu_now() - t0;
		if (pass == 0 || t < best)
			best = t;
	}
	printf("%s_ratio %.2f\n", name, (double)st.orig_data_size /
	       (double)(st.compr_data_size ? st.compr_data_size : 1));
	printf("%s_recompressed %lu\n", name, (unsigned long)st.recompressed_pages);
	printf("%s_against_dict %lu\n", name, (unsigned long)st.recompressed_dict);
	printf("%s_load_us %.2f\n", name, best * 1e6 / (double)npages);
	zp_destroy_pool(pool);
	free(e);
}

/* One mode, n operations in one function, for callgrind. */
static void counted(const char *mode, long n)
{
	zp_entry_t *e = malloc(sizeof(*e) * (size_t)n);
	unsigned char out[ZPT_PAGE];
	char *dst = malloc(LZ4_COMPRESSBOUND(ZPT_PAGE));
	int *lens = malloc(sizeof(*lens) * (size_t)n);
	struct zp_pool *pool = make_pool(ZP_CODEC_LZ4);

	if (n > npages)
		n = npages;
	if (!strcmp(mode, "store")) {
		measured_store_loop(pool, e, 0, n);
	} else if (!strcmp(mode, "load")) {
		measured_store_loop(pool, e, 0, n);
		measured_load_loop(pool, e, n, out);
	} else if (!strcmp(mode, "raw-compress")) {
		measured_raw_compress_loop_at(0, n, dst, lens);
	} else if (!strcmp(mode, "raw-decompress")) {
		raw_prepare();
		measured_raw_decompress_loop(n, raw_c, raw_len, dst);
	} else if (!strcmp(mode, "load-zstd") || !strcmp(mode, "load-zstd-dict")) {
		/* Every page, so that the dictionary is chosen (4,096 that halved, by default). */
		struct zp_pool *rp;

		free(e);
		n = npages;
		e = malloc(sizeof(*e) * (size_t)n);
		rp = recompressed_pool(!strcmp(mode, "load-zstd-dict"), e, n);
		measured_load_loop(rp, e, n, out);
		zp_destroy_pool(rp);
	} else {
		fprintf(stderr, "zpool_bench: unknown mode %s\n", mode);
		exit(2);
	}
	printf("ops %ld\n", n);
	zp_destroy_pool(pool);
}

int main(int argc, char **argv)
{
	const char *source;

	if (argc < 3) {
		fprintf(stderr, "usage: zpool_bench PAGEFILE throughput [rounds] | "
			"store|load|raw-compress|raw-decompress [n] | load-zstd|load-zstd-dict\n");
		return 2;
	}
	npages = zpt_heap_pages_cached(argv[1], 8192, &pages, &source);
	if (npages <= 0) {
		fprintf(stderr, "zpool_bench: no heap pages\n");
		return 2;
	}
	printf("pages %ld\n", npages);
	if (!strcmp(argv[2], "throughput")) {
		throughput(argc > 3 ? atoi(argv[3]) : 9);
		memory(ZP_CODEC_LZ4, "lz4");
		memory(ZP_CODEC_ZSTD, "zstd");
		recompressed(false, "recompressed");
		recompressed(true, "recompressed_dict");
	} else {
		counted(argv[2], argc > 3 ? atol(argv[3]) : 2000);
	}
	return 0;
}
