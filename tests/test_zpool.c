/*
 * Unit tests of zpool/: size classes, the object API, compaction, the page
 * store, writeback, limits, statistics and bad input.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgm/zpool.h"
#include "smaps_rss.h"
#include "zpool_pages.h"
#include "check_run.h"

static struct zp_pool *new_pool(const struct zp_options *o)
{
	struct zp_pool *pool = NULL;

	ck_assert_int_eq(zp_create_pool(o, &pool), 0);
	ck_assert_ptr_nonnull(pool);
	return pool;
}

static void fill_pattern(unsigned char *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(seed * 31 + i * 7 + (i >> 8));
}

/* Capture what a call writes to stderr. */
struct capture { int fd, saved; char path[64]; };

static void capture_start(struct capture *c)
{
	strcpy(c->path, "/tmp/zpool-test-err-XXXXXX");
	c->fd = mkstemp(c->path);
	ck_assert_int_ge(c->fd, 0);
	unlink(c->path);
	c->saved = dup(2);
	dup2(c->fd, 2);
}

static void capture_end(struct capture *c, char *out, size_t len)
{
	ssize_t n;

	dup2(c->saved, 2);
	close(c->saved);
	n = pread(c->fd, out, len - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(c->fd);
}

/* Every entry of @pool invalidated: once compacted, nothing of them is left. */
static void assert_pool_empty(struct zp_pool *pool)
{
	struct zp_stats st;

	zp_compact(pool);
	zp_pool_stats(pool, &st);
	ck_assert_uint_eq(st.stored_pages, 0);
	ck_assert_uint_eq(st.same_pages, 0);
	ck_assert_uint_eq(st.huge_pages, 0);
	ck_assert_uint_eq(st.orig_data_size, 0);
	ck_assert_uint_eq(st.compr_data_size, 0);
	ck_assert_uint_eq(st.mem_used_total, 0);
}

START_TEST(test_class_geometry)
{
	struct zp_pool *pool = new_pool(NULL);
	struct zp_class_stats rows[300];
	unsigned n = zp_class_stats(pool, rows, 300), bad = 0, prev = 0;

	/* Merging leaves fewer classes than the 255 sizes plus huge. */
	ck_assert_uint_lt(n, 256);
	ck_assert_uint_gt(n, 40);
	for (unsigned i = 0; i < n; i++) {
		unsigned size = rows[i].size, ppz = rows[i].pages_per_zspage;
		size_t waste = (size_t)ppz * ZP_PAGE_SIZE % size;

		bad += size % 16 != 0 || size < 32 || size > ZP_PAGE_SIZE;
		bad += ppz < 1 || ppz > 8;
		/* the huge class repeats the page size, without header */
		bad += size <= prev && !(i == n - 1 && size == ZP_PAGE_SIZE);
		prev = size;
		/* No length wastes 5% of the zspage less, and no shorter
		 * one is within 5% of it (class.c's rule). */
		for (unsigned k = 1; k <= 8; k++) {
			double wk = (double)((size_t)k * ZP_PAGE_SIZE % size) / (k * ZP_PAGE_SIZE);
			double wp = (double)waste / (ppz * ZP_PAGE_SIZE);

			bad += wk < wp - 0.051;
			bad += k < ppz && wk <= wp - 0.001;
		}
	}
	ck_assert_uint_eq(bad, 0);
	/* Objects from 3k up fill a page by themselves; the huge class
	 * starts somewhere there, as zsmalloc's huge_class_size. */
	ck_assert_uint_gt(zp_huge_class_size(pool), 3000);
	ck_assert_uint_le(zp_huge_class_size(pool), ZP_PAGE_SIZE);
	zp_destroy_pool(pool);
}
END_TEST

START_TEST(test_obj_roundtrip)
{
	struct zp_pool *pool = new_pool(NULL);
	static zp_handle_t h[4097];
	unsigned char buf[ZP_PAGE_SIZE], want[ZP_PAGE_SIZE];
	unsigned bad = 0;

	for (size_t size = 1; size <= ZP_PAGE_SIZE; size++) {
		h[size] = zp_malloc(pool, size);
		bad += h[size] == 0 || zp_obj_size(pool, h[size]) < size;
		fill_pattern(buf, size, (unsigned)size);
		bad += zp_obj_write(pool, h[size], buf, size) != 0;
	}
	ck_assert_uint_eq(bad, 0);
	for (size_t size = 1; size <= ZP_PAGE_SIZE; size++) {
		const void *p = zp_obj_read_begin(pool, h[size], buf);

		fill_pattern(want, size, (unsigned)size);
		bad += p == NULL || memcmp(p, want, size) != 0;
		zp_obj_read_end(pool, h[size], p);
	}
	ck_assert_uint_eq(bad, 0);
	ck_assert_uint_eq(zp_malloc(pool, 0), 0);
	ck_assert_uint_eq(zp_malloc(pool, ZP_PAGE_SIZE + 1), 0);
	for (size_t size = 1; size <= ZP_PAGE_SIZE; size++)
		bad += zp_free(pool, h[size]) != 0;
	ck_assert_uint_eq(bad, 0);
	ck_assert_uint_eq(zp_get_total_pages(pool), 0);
	zp_destroy_pool(pool);
}
END_TEST

START_TEST(test_compaction_keeps_handles)
{
	struct zp_options o = { .compact_threshold = 100 };	/* manual only */
	struct zp_pool *pool = new_pool(&o);
	enum { N = 6000 };
	static zp_handle_t h[N];
	unsigned char buf[1200], want[1200];
	uint64_t rng = 99;
	unsigned long before, freed;
	unsigned bad = 0, live = 0;
	struct zp_stats st;

	for (unsigned i = 0; i < N; i++) {
		size_t size = 200 + i % 1000;

		h[i] = zp_malloc(pool, size);
		fill_pattern(buf, size, i);
		bad += h[i] == 0 || zp_obj_write(pool, h[i], buf, size) != 0;
	}
	ck_assert_uint_eq(bad, 0);
	/* Free 75% at random: every zspage is left sparse. */
	for (unsigned i = 0; i < N; i++) {
		if (zpt_rand(&rng) % 4) {
			bad += zp_free(pool, h[i]) != 0;
			h[i] = 0;
		} else {
			live++;
		}
	}
	ck_assert_uint_eq(bad, 0);
	before = zp_get_total_pages(pool);
	freed = zp_compact(pool);
	ck_assert_uint_gt(freed, before / 3);
	ck_assert_uint_eq(zp_get_total_pages(pool), before - freed);
	zp_pool_stats(pool, &st);
	ck_assert_uint_eq(st.pages_compacted, freed);
	ck_assert_uint_gt(st.objs_moved, 0);
	/* Nothing left to compact, and every object reads back. */
	ck_assert_uint_eq(zp_compact(pool), 0);
	for (unsigned i = 0; i < N; i++) {
		const void *p;
		size_t size = 200 + i % 1000;

		if (!h[i])
			continue;
		p = zp_obj_read_begin(pool, h[i], buf);
		fill_pattern(want, size, i);
		bad += p == NULL || memcmp(p, want, size) != 0;
		zp_obj_read_end(pool, h[i], p);
		bad += zp_free(pool, h[i]) != 0;
	}
	ck_assert_uint_eq(bad, 0);
	ck_assert_uint_gt(live, 0);
	ck_assert_uint_eq(zp_get_total_pages(pool), 0);
	zp_destroy_pool(pool);
}
END_TEST

START_TEST(test_reader_pins_against_compaction)
{
	struct zp_options o = { .compact_threshold = 100 };
	struct zp_pool *pool = new_pool(&o);
	enum { N = 400 };
	zp_handle_t h[N];
	unsigned char buf[500], want[500];
	const void *p;
	unsigned bad = 0;

	for (unsigned i = 0; i < N; i++) {
		h[i] = zp_malloc(pool, 500);
		fill_pattern(buf, 500, i);
		zp_obj_write(pool, h[i], buf, 500);
	}
	for (unsigned i = 1; i < N; i++)
		zp_free(pool, h[i]);
	/* h[0] sits alone in a sparse zspage; a reader holds it. */
	p = zp_obj_read_begin(pool, h[0], buf);
	ck_assert_ptr_nonnull(p);
	zp_compact(pool);
	fill_pattern(want, 500, 0);
	bad += memcmp(p, want, 500) != 0;
	zp_obj_read_end(pool, h[0], p);
	ck_assert_uint_eq(bad, 0);
	p = zp_obj_read_begin(pool, h[0], buf);
	ck_assert_int_eq(memcmp(p, want, 500), 0);
	zp_obj_read_end(pool, h[0], p);
	ck_assert_int_eq(zp_free(pool, h[0]), 0);
	zp_destroy_pool(pool);
}
END_TEST

START_TEST(test_auto_compaction)
{
	struct zp_options o = { .compact_threshold = 20 };
	struct zp_pool *pool = new_pool(&o);
	enum { N = 4000 };
	static zp_handle_t h[N];
	unsigned char buf[700];
	struct zp_stats st;

	for (unsigned i = 0; i < N; i++) {
		h[i] = zp_malloc(pool, 700);
		fill_pattern(buf, 700, i);
		zp_obj_write(pool, h[i], buf, 700);
	}
	for (unsigned i = 0; i < N; i++)
		if (i % 3)
			zp_free(pool, h[i]);
	zp_pool_stats(pool, &st);
	ck_assert_uint_gt(st.pages_compacted, 0);
	zp_destroy_pool(pool);
}
END_TEST

START_TEST(test_store_kinds)
{
	struct zp_pool *pool = new_pool(NULL);
	unsigned char page[ZPT_PAGE], out[ZPT_PAGE];
	zp_entry_t e[5];
	uint64_t rng = 5;
	struct zp_stats st;

	memset(page, 0, sizeof(page));
	ck_assert_int_eq(zp_store(pool, page, &e[0]), 0);
	zpt_page_same(0xdeadbeefcafef00dull, page);
	ck_assert_int_eq(zp_store(pool, page, &e[1]), 0);
	zpt_page_random(&rng, page);
	ck_assert_int_eq(zp_store(pool, page, &e[2]), 0);
	zpt_page_text(&rng, page);
	ck_assert_int_eq(zp_store(pool, page, &e[3]), 0);
	zpt_page_mixed(&rng, page);
	ck_assert_int_eq(zp_store(pool, page, &e[4]), 0);

	zp_pool_stats(pool, &st);
	ck_assert_uint_eq(st.stored_pages, 5);
	ck_assert_uint_eq(st.same_pages, 2);
	ck_assert_uint_eq(st.huge_pages, 1);
	ck_assert_uint_eq(st.orig_data_size, 5 * ZPT_PAGE);
	/* text compresses well; the random page is kept raw */
	ck_assert_uint_lt(st.compr_data_size, ZPT_PAGE + 2 * ZPT_PAGE * 3 / 4);
	ck_assert_uint_gt(st.compr_data_size, ZPT_PAGE);

	rng = 5;
	memset(page, 0, sizeof(page));
	ck_assert_int_eq(zp_load(pool, e[0], out), 0);
	ck_assert_int_eq(memcmp(page, out, ZPT_PAGE), 0);
	zpt_page_same(0xdeadbeefcafef00dull, page);
	ck_assert_int_eq(zp_load(pool, e[1], out), 0);
	ck_assert_int_eq(memcmp(page, out, ZPT_PAGE), 0);
	zpt_page_random(&rng, page);
	ck_assert_int_eq(zp_load(pool, e[2], out), 0);
	ck_assert_int_eq(memcmp(page, out, ZPT_PAGE), 0);
	zpt_page_text(&rng, page);
	ck_assert_int_eq(zp_load(pool, e[3], out), 0);
	ck_assert_int_eq(memcmp(page, out, ZPT_PAGE), 0);
	zpt_page_mixed(&rng, page);
	ck_assert_int_eq(zp_load(pool, e[4], out), 0);
	ck_assert_int_eq(memcmp(page, out, ZPT_PAGE), 0);

	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(zp_invalidate(pool, e[i]), 0);
	assert_pool_empty(pool);
	zp_destroy_pool(pool);
}
END_TEST

START_TEST(test_huge_reject)
{
	struct zp_options o = { .huge_policy = ZP_HUGE_REJECT };
	struct zp_pool *pool = new_pool(&o);
	unsigned char page[ZPT_PAGE];
	uint64_t rng = 77;
	zp_entry_t e = 0;
	struct zp_stats st;

	zpt_page_random(&rng, page);
	ck_assert_int_eq(zp_store(pool, page, &e), -E2BIG);
	zp_pool_stats(pool, &st);
	ck_assert_uint_eq(st.reject_compress_poor, 1);
	ck_assert_uint_eq(st.stored_pages, 0);
	zp_destroy_pool(pool);
}
END_TEST

START_TEST(test_zstd_vs_lz4)
{
	struct zp_options oz = { .codec = ZP_CODEC_ZSTD, .level = 3 };
	struct zp_pool *lz = new_pool(NULL), *zs = new_pool(&oz);
	unsigned char page[ZPT_PAGE], out[ZPT_PAGE];
	uint64_t rng = 3;
	struct zp_stats s1, s2;
	unsigned bad = 0;

	for (int i = 0; i < 64; i++) {
		zp_entry_t a, b;

		zpt_page_text(&rng, page);
		ck_assert_int_eq(zp_store(lz, page, &a), 0);
		ck_assert_int_eq(zp_store(zs, page, &b), 0);
		bad += zp_load(zs, b, out) != 0 || memcmp(out, page, ZPT_PAGE) != 0;
		bad += zp_load(lz, a, out) != 0 || memcmp(out, page, ZPT_PAGE) != 0;
	}
	ck_assert_uint_eq(bad, 0);
	zp_pool_stats(lz, &s1);
	zp_pool_stats(zs, &s2);
	ck_assert_uint_lt(s2.compr_data_size, s1.compr_data_size);
	zp_destroy_pool(lz);
	zp_destroy_pool(zs);
}
END_TEST

/*
 * zp_recompress: old enough entries move to zstd and still load
 * byte-identical; the pool's compressed bytes shrink; raw pages are
 * declined once and not looked at again; invalidation frees the zstd
 * objects; the option is refused where it does not apply.
 */
START_TEST(test_recompress)
{
	struct zp_options o = { .recompress = true };
	struct zp_options zo = { .codec = ZP_CODEC_ZSTD, .recompress = true };
	struct zp_options bo = { .recompress = true, .backing = "/tmp/zpool-test-recompress" };
	struct zp_pool *pool = NULL, *plain = new_pool(NULL);
	static unsigned char pages[96][ZPT_PAGE];
	unsigned char out[ZPT_PAGE];
	zp_entry_t e[96];
	struct zp_stats before, after;
	struct capture cap;
	char err[512];
	uint64_t rng = 11;
	unsigned bad = 0;

	capture_start(&cap);
	ck_assert_int_eq(zp_create_pool(&zo, &pool), -EINVAL);
	ck_assert_int_eq(zp_create_pool(&bo, &pool), -EINVAL);
	capture_end(&cap, err, sizeof(err));
	ck_assert_ptr_nonnull(strstr(err, "recompress: only for an lz4 pool without a backing file"));
	ck_assert_int_eq(zp_recompress(plain, 8, 0), -EOPNOTSUPP);
	zp_destroy_pool(plain);

	pool = new_pool(&o);
	/* 64 text pages (zstd shrinks them), 32 random ones (kept raw). */
	for (int i = 0; i < 96; i++) {
		if (i < 64)
			zpt_page_text(&rng, pages[i]);
		else
			zpt_page_random(&rng, pages[i]);
		ck_assert_int_eq(zp_store(pool, pages[i], &e[i]), 0);
	}
	/* Nothing is a minute old yet. */
	ck_assert_int_eq(zp_recompress(pool, 96, 60000), 0);
	zp_pool_stats(pool, &before);
	ck_assert_int_eq(zp_recompress(pool, 1000, 0), 96);
	zp_pool_stats(pool, &after);
	ck_assert_uint_eq(after.recompressed_pages, 64);
	ck_assert_uint_eq(after.recompress_declined, 32);
	/* Too few pages for a dictionary (4096 by default). */
	ck_assert_uint_eq(after.recompressed_dict, 0);
	ck_assert_uint_lt(after.compr_data_size, before.compr_data_size);
	ck_assert_uint_eq(after.orig_data_size, before.orig_data_size);
	ck_assert_uint_eq(after.stored_pages, 96);
	/* Every entry was looked at: nothing is left to look at. */
	ck_assert_int_eq(zp_recompress(pool, 1000, 0), 0);
	for (int i = 0; i < 96; i++)
		bad += zp_load(pool, e[i], out) != 0 || memcmp(out, pages[i], ZPT_PAGE) != 0;
	ck_assert_uint_eq(bad, 0);
	/* A new entry is recompressed in its turn. */
	zpt_page_text(&rng, pages[0]);
	ck_assert_int_eq(zp_invalidate(pool, e[0]), 0);
	ck_assert_int_eq(zp_store(pool, pages[0], &e[0]), 0);
	ck_assert_int_eq(zp_recompress(pool, 1000, 0), 1);
	ck_assert_int_eq(zp_load(pool, e[0], out), 0);
	ck_assert_mem_eq(out, pages[0], ZPT_PAGE);
	for (int i = 0; i < 96; i++)
		ck_assert_int_eq(zp_invalidate(pool, e[i]), 0);
	assert_pool_empty(pool);
	zp_destroy_pool(pool);
}
END_TEST

/* libzstd's mappings (code, tables, relocated data), for smaps_rss_kib(). */
static bool libzstd_mapping(const char *perms, const char *path, const void *arg)
{
	(void)perms;
	(void)arg;
	return strstr(path, "/libzstd.so") != NULL;
}

/*
 * A pool that may use zstd asks nothing of libzstd until it does: made
 * with the pool, zstd's contexts cost a process with spill=1 and nothing
 * to spill 320 KiB of libzstd resident and 128 KiB of the contexts (the
 * pages libzstd's code ran from map by fault-around).  Here libzstd's
 * resident pages do not change while a recompressing lz4 pool is made and
 * stores and loads with lz4; its first recompression runs libzstd, and
 * the pages come back byte-identical.
 */
START_TEST(test_zstd_state_lazy)
{
	struct zp_options o = { .recompress = true };
	static unsigned char pages[16][ZPT_PAGE];
	unsigned char out[ZPT_PAGE];
	zp_entry_t e[16];
	struct zp_pool *pool;
	uint64_t rng = 5;
	long before, made, used;

	before = smaps_rss_kib(libzstd_mapping, NULL);
	ck_assert_int_ge(before, 0);
	pool = new_pool(&o);
	for (int i = 0; i < 16; i++) {
		zpt_page_text(&rng, pages[i]);
		ck_assert_int_eq(zp_store(pool, pages[i], &e[i]), 0);
		ck_assert_int_eq(zp_load(pool, e[i], out), 0);
	}
	made = smaps_rss_kib(libzstd_mapping, NULL);
	ck_assert_msg(made == before, "libzstd resident: %ld KiB before the pool, %ld after "
		      "lz4 stores: zstd was asked before it was used", before, made);
	ck_assert_int_eq(zp_recompress(pool, 16, 0), 16);
	used = smaps_rss_kib(libzstd_mapping, NULL);
	ck_assert_msg(used > made, "libzstd resident: %ld KiB, and %ld once it recompressed",
		      made, used);
	for (int i = 0; i < 16; i++) {
		ck_assert_int_eq(zp_load(pool, e[i], out), 0);
		ck_assert_mem_eq(out, pages[i], ZPT_PAGE);
		ck_assert_int_eq(zp_invalidate(pool, e[i]), 0);
	}
	zp_destroy_pool(pool);
}
END_TEST

/*
 * zp_store_dense: in a recompressing lz4 pool a text page goes to zstd at
 * once -- the same bytes in the pool as zp_store() then zp_recompress()
 * would leave, loaded byte-identical, and never looked at by
 * zp_recompress(); a same-filled page stays a word and a random one goes
 * the lz4 way (kept raw); in a pool without recompression it is
 * zp_store().  Invalidated, nothing is left.
 */
START_TEST(test_store_dense)
{
	struct zp_options o = { .recompress = true, .no_dict = true };
	struct zp_pool *pool = new_pool(&o), *ref = new_pool(&o), *plain = new_pool(NULL);
	static unsigned char pages[66][ZPT_PAGE];
	unsigned char out[ZPT_PAGE];
	zp_entry_t e[66], r[64], p;
	struct zp_stats st, rst;
	uint64_t rng = 23;
	unsigned bad = 0;

	for (int i = 0; i < 64; i++)
		zpt_page_text(&rng, pages[i]);
	zpt_page_same(0x0123456789abcdefull, pages[64]);
	zpt_page_random(&rng, pages[65]);
	for (int i = 0; i < 66; i++)
		ck_assert_int_eq(zp_store_dense(pool, pages[i], &e[i]), 0);
	for (int i = 0; i < 64; i++)
		ck_assert_int_eq(zp_store(ref, pages[i], &r[i]), 0);
	ck_assert_int_eq(zp_recompress(ref, 1000, 0), 64);
	zp_pool_stats(pool, &st);
	zp_pool_stats(ref, &rst);
	ck_assert_uint_eq(st.stored_dense, 64);
	ck_assert_uint_eq(st.stored_dense_dict, 0);
	ck_assert_uint_eq(st.same_pages, 1);
	ck_assert_uint_eq(st.huge_pages, 1);
	ck_assert_uint_eq(st.stored_pages, 66);
	ck_assert_uint_eq(st.recompressed_pages, 0);
	ck_assert_uint_eq(rst.recompressed_pages, 64);
	/* The text pages' bytes: what recompression leaves, the raw page's besides. */
	ck_assert_uint_eq(st.compr_data_size, rst.compr_data_size + ZPT_PAGE);
	/* Only the raw page is an lz4 entry: recompression looks at it, and declines. */
	ck_assert_int_eq(zp_recompress(pool, 1000, 0), 1);
	zp_pool_stats(pool, &st);
	ck_assert_uint_eq(st.recompress_declined, 1);
	for (int i = 0; i < 66; i++)
		bad += zp_load(pool, e[i], out) != 0 || memcmp(out, pages[i], ZPT_PAGE) != 0;
	ck_assert_uint_eq(bad, 0);
	/* Without recompression: the pool's codec. */
	ck_assert_int_eq(zp_store_dense(plain, pages[0], &p), 0);
	zp_pool_stats(plain, &st);
	ck_assert_uint_eq(st.stored_dense, 0);
	ck_assert_uint_eq(st.stored_pages, 1);
	ck_assert_int_eq(zp_load(plain, p, out), 0);
	ck_assert_mem_eq(out, pages[0], ZPT_PAGE);
	ck_assert_int_eq(zp_store_dense(plain, NULL, &p), -EINVAL);
	for (int i = 0; i < 66; i++)
		ck_assert_int_eq(zp_invalidate(pool, e[i]), 0);
	assert_pool_empty(pool);
	zp_destroy_pool(pool);
	zp_destroy_pool(ref);
	zp_destroy_pool(plain);
}
END_TEST

/* Two pools, with the dictionary and without, over the same 128 text pages. */
struct dict_pair {
	unsigned char pages[128][ZPT_PAGE];
	unsigned char out[ZPT_PAGE];
	zp_entry_t e[2][128];
	struct zp_stats st[2];
	struct zp_pool *pools[2];
};

static struct dict_pair *dict_pair_new(uint64_t seed)
{
	static struct dict_pair dp;

	memset(&dp, 0, sizeof(dp));
	for (int i = 0; i < 128; i++)
		zpt_page_text(&seed, dp.pages[i]);
	return &dp;
}

/*
 * The recompression dictionary: a pool that makes one from a sample of
 * its pages holds the same pages in fewer bytes than one that does not
 * (no_dict), and both load them byte-identical -- those
 * recompressed against it and those recompressed before the sample
 * closed, and so does a forked child from its copy of the pool.  The
 * sample avoids what does not compress: a pool whose sample
 * met only pages of random bytes makes no dictionary.  Without the
 * dictionary (zp_compress_zstd() given none), the size check fails.
 */
START_TEST(test_recompress_dict)
{
	struct zp_options with = { .recompress = true, .dict_after = 64 };
	struct zp_options without = { .recompress = true, .no_dict = true };
	struct dict_pair *dp = dict_pair_new(5);
	struct zp_pool **pools = dp->pools, *rnd;
	unsigned char (*pages)[ZPT_PAGE] = dp->pages, *out = dp->out;
	zp_entry_t (*e)[128] = dp->e;
	struct zp_stats *st = dp->st;
	uint64_t rng = 5;
	unsigned bad = 0;

	pools[0] = new_pool(&with);
	pools[1] = new_pool(&without);
	for (int p = 0; p < 2; p++) {
		/* Two recompressed while the sample is open (32 of 64), the rest after. */
		for (int i = 0; i < 32; i++)
			ck_assert_int_eq(zp_store(pools[p], pages[i], &e[p][i]), 0);
		ck_assert_int_eq(zp_recompress(pools[p], 2, 0), 2);
		for (int i = 32; i < 128; i++)
			ck_assert_int_eq(zp_store(pools[p], pages[i], &e[p][i]), 0);
		ck_assert_int_eq(zp_recompress(pools[p], 1000, 0), 126);
		zp_pool_stats(pools[p], &st[p]);
		for (int i = 0; i < 128; i++)
			bad += zp_load(pools[p], e[p][i], out) != 0 ||
			       memcmp(out, pages[i], ZPT_PAGE) != 0;
	}
	ck_assert_uint_eq(bad, 0);
	/* A forked child loads them from its copy of the pool, dictionary included. */
	{
		pid_t pid = fork();
		int status = -1;

		if (pid == 0) {
			zp_pool_forked(pools[0]);
			for (int i = 0; i < 128; i++)
				bad += zp_load(pools[0], e[0][i], out) != 0 ||
				       memcmp(out, pages[i], ZPT_PAGE) != 0;
			_exit(bad ? 1 : 0);
		}
		ck_assert_int_gt(pid, 0);
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	ck_assert_uint_eq(st[0].recompressed_pages, 128);
	ck_assert_uint_eq(st[1].recompressed_pages, 128);
	ck_assert_uint_eq(st[0].recompressed_dict, 126);
	ck_assert_uint_eq(st[1].recompressed_dict, 0);
	/* A tenth smaller at least: 13% on these pages, 16-25% on real programs' heaps. */
	ck_assert_uint_lt(st[0].compr_data_size * 10, st[1].compr_data_size * 9);
	for (int p = 0; p < 2; p++) {
		for (int i = 0; i < 128; i++)
			ck_assert_int_eq(zp_invalidate(pools[p], e[p][i]), 0);
		zp_pool_stats(pools[p], &st[p]);
		ck_assert_uint_eq(st[p].compr_data_size, 0);
		zp_destroy_pool(pools[p]);
	}

	/* Random pages are never sampled (lz4 cannot halve them): no dictionary. */
	rnd = new_pool(&with);
	for (int i = 0; i < 96; i++) {
		zpt_page_random(&rng, pages[i]);
		ck_assert_int_eq(zp_store(rnd, pages[i], &e[0][i]), 0);
	}
	for (int i = 96; i < 128; i++) {
		zpt_page_text(&rng, pages[i]);
		ck_assert_int_eq(zp_store(rnd, pages[i], &e[0][i]), 0);
	}
	ck_assert_int_eq(zp_recompress(rnd, 1000, 0), 128);
	zp_pool_stats(rnd, &st[0]);
	ck_assert_uint_eq(st[0].recompressed_dict, 0);
	for (int i = 0; i < 128; i++)
		bad += zp_load(rnd, e[0][i], out) != 0 || memcmp(out, pages[i], ZPT_PAGE) != 0;
	ck_assert_uint_eq(bad, 0);
	zp_destroy_pool(rnd);
}
END_TEST

/*
 * A zstd pool compresses its stores against the dictionary once the
 * sample closes (16 pages that halved), holds the same pages in fewer
 * bytes than one without, and loads them byte-identical: from memory and
 * from the backing file after writeback (the entry keeps saying which
 * need the dictionary).  Without the dictionary at loads, they fail.
 */
START_TEST(test_zstd_pool_dict)
{
	struct dict_pair *dp = dict_pair_new(9);
	struct zp_pool **pools = dp->pools;
	unsigned char (*pages)[ZPT_PAGE] = dp->pages, *out = dp->out;
	zp_entry_t (*e)[128] = dp->e;
	struct zp_stats *st = dp->st;
	char paths[2][64];
	unsigned bad = 0;

	for (int p = 0; p < 2; p++) {
		struct zp_options o = { .codec = ZP_CODEC_ZSTD, .dict_after = 16, .no_dict = p == 1 };
		int fd;

		snprintf(paths[p], sizeof(paths[p]), "/tmp/zpool-test-zdict-XXXXXX");
		fd = mkstemp(paths[p]);
		ck_assert_int_ge(fd, 0);
		close(fd);
		o.backing = paths[p];
		pools[p] = new_pool(&o);
		for (int i = 0; i < 128; i++)
			ck_assert_int_eq(zp_store(pools[p], pages[i], &e[p][i]), 0);
		zp_pool_stats(pools[p], &st[p]);
		/* The oldest half goes to the file: those made before the dictionary and after. */
		ck_assert_int_eq(zp_writeback(pools[p], 64), 64);
		for (int i = 0; i < 128; i++)
			bad += zp_load(pools[p], e[p][i], out) != 0 ||
			       memcmp(out, pages[i], ZPT_PAGE) != 0;
	}
	ck_assert_uint_eq(bad, 0);
	/* The 16 sampled before it, and the one whose store chose it, are without. */
	ck_assert_uint_ge(st[0].stored_dict, 128 - 17);
	ck_assert_uint_lt(st[0].stored_dict, 128);
	ck_assert_uint_eq(st[1].stored_dict, 0);
	ck_assert_uint_lt(st[0].compr_data_size * 20, st[1].compr_data_size * 19);
	for (int p = 0; p < 2; p++) {
		zp_destroy_pool(pools[p]);
		unlink(paths[p]);
	}
}
END_TEST

START_TEST(test_bad_input)
{
	struct zp_pool *pool = new_pool(NULL);
	struct zp_pool *bad_pool = NULL;
	struct zp_options o = { .codec = (enum zp_codec)7 };
	unsigned char page[ZPT_PAGE];
	zp_handle_t h;
	zp_entry_t e;
	struct capture c;
	char err[2048];

	capture_start(&c);
	ck_assert_int_eq(zp_free(pool, 0), -EINVAL);
	ck_assert_int_eq(zp_free(pool, 12345), -EINVAL);
	ck_assert_int_eq(zp_free(pool, 0xffffffffu), -EINVAL);
	h = zp_malloc(pool, 100);
	ck_assert_int_eq(zp_free(pool, h), 0);
	ck_assert_int_eq(zp_free(pool, h), -EINVAL);
	ck_assert_ptr_null(zp_obj_read_begin(pool, h, NULL));
	ck_assert_int_eq(zp_obj_write(pool, h, page, 10), -EINVAL);
	h = zp_malloc(pool, 100);
	ck_assert_int_eq(zp_obj_write(pool, h, page, ZPT_PAGE), -EINVAL);
	ck_assert_int_eq(zp_load(pool, 0, page), -EINVAL);
	ck_assert_int_eq(zp_load(pool, 999, page), -EINVAL);
	ck_assert_int_eq(zp_invalidate(pool, 0xfffffff0u), -EINVAL);
	memset(page, 1, sizeof(page));
	ck_assert_int_eq(zp_store(pool, page, &e), 0);
	ck_assert_int_eq(zp_invalidate(pool, e), 0);
	ck_assert_int_eq(zp_invalidate(pool, e), -EINVAL);
	ck_assert_int_eq(zp_load(pool, e, page), -EINVAL);
	ck_assert_int_eq(zp_writeback(pool, 1), -ENODEV);
	ck_assert_int_eq(zp_create_pool(&o, &bad_pool), -EINVAL);
	o.codec = ZP_CODEC_ZSTD;
	o.level = 1000;
	ck_assert_int_eq(zp_create_pool(&o, &bad_pool), -EINVAL);
	capture_end(&c, err, sizeof(err));
	ck_assert_ptr_null(bad_pool);
	ck_assert_ptr_nonnull(strstr(err, "cgmalloc: zpool: zp_free: invalid"));
	ck_assert_ptr_nonnull(strstr(err, "cgmalloc: zpool: codec=7"));
	ck_assert_ptr_nonnull(strstr(err, "cgmalloc: zpool: zstd level 1000"));
	zp_destroy_pool(pool);
}
END_TEST

START_TEST(test_classes_show)
{
	struct zp_pool *pool = new_pool(NULL);
	char buf[65536], small[64];
	unsigned char page[ZPT_PAGE];
	uint64_t rng = 11;
	zp_entry_t e;
	int len, lines = 0;

	for (int i = 0; i < 200; i++) {
		zpt_page_mixed(&rng, page);
		ck_assert_int_eq(zp_store(pool, page, &e), 0);
	}
	len = zp_classes_show(pool, buf, sizeof(buf));
	ck_assert_int_gt(len, 0);
	ck_assert_uint_eq(strlen(buf), (size_t)len);
	ck_assert_ptr_nonnull(strstr(buf, "class  size       10%"));
	ck_assert_ptr_nonnull(strstr(buf, "99%      100% obj_allocated   obj_used pages_used pages_per_zspage freeable"));
	ck_assert_ptr_nonnull(strstr(buf, "\nTotal"));
	for (char *p = buf; *p; p++)
		lines += *p == '\n';
	ck_assert_int_gt(lines, 40);
	ck_assert_int_eq(zp_classes_show(pool, small, sizeof(small)), -ENOSPC);
	ck_assert_uint_lt(strlen(small), sizeof(small));
	zp_destroy_pool(pool);
}
END_TEST

static char backing[64];

static void make_backing(void)
{
	int fd;

	strcpy(backing, "/tmp/zpool-test-wb-XXXXXX");
	fd = mkstemp(backing);
	ck_assert_int_ge(fd, 0);
	close(fd);
}

/* Mappings of no file (the pool's arena and tables among them). */
static bool anon_mapping(const char *perms, const char *path, const void *arg)
{
	(void)perms;
	(void)arg;
	return path[0] == '\0';
}

/*
 * Resident pages of this process's mappings of no file, from
 * /proc/self/smaps, which the kernel counts by walking the page tables.
 * Not statm: it adds file pages, and check's forked child faults its libc
 * text back in as it runs (fork copies no page table of a file mapping),
 * 40-80 pages during this test; and Linux 6.2 on reads its counters per
 * CPU without summing them, off by up to 32 pages a CPU.  A make check
 * failed on that here.
 */
static long resident_pages(void)
{
	long kib = smaps_rss_kib(anon_mapping, NULL);

	ck_assert_int_ge(kib, 0);
	return kib / (ZPT_PAGE / 1024);
}

/*
 * Freed zspages go back to the OS 16 runs at a time, and the rest when
 * zp_release_freed() is called: every page of an emptied pool leaves
 * memory.  (Slack: this process's own pages move a little meanwhile --
 * the free runs' descriptors take 6 pages; under ASan its shadow memory
 * moves by a few dozen.)  2,990 pages: their last zspages leave 44-45
 * pages pending (at 3,000 there happened to be none, and the test passed
 * without zp_release_freed()).
 */
#if defined(__SANITIZE_ADDRESS__)
#define RELEASE_SLACK 512
#else
#define RELEASE_SLACK 16
#endif

START_TEST(test_release_freed)
{
	enum { N = 2990, SLACK = RELEASE_SLACK };
	static unsigned char page[ZPT_PAGE];
	static zp_entry_t e[N];
	struct zp_pool *pool = new_pool(NULL);
	uint64_t rng = 5;
	long full, emptied, released, pages;

	for (int i = 0; i < N; i++) {
		zpt_page_mixed(&rng, page);
		ck_assert_int_eq(zp_store(pool, page, &e[i]), 0);
	}
	pages = (long)zp_get_total_pages(pool);
	ck_assert_int_gt(pages, 200);
	full = resident_pages();
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(zp_invalidate(pool, e[i]), 0);
	ck_assert_uint_eq(zp_get_total_pages(pool), 0);
	emptied = resident_pages();
	/* All but the last 15 runs (8 pages at most each) went already. */
	ck_assert_int_ge(full - emptied, pages - 15 * 8 - SLACK);
	zp_release_freed(pool);
	released = resident_pages();
	ck_assert_int_ge(full - released, pages - SLACK);
	/* Nothing pending: a second call gives back nothing more. */
	zp_release_freed(pool);
	ck_assert_int_le(released - resident_pages(), SLACK);
	zp_destroy_pool(pool);
}
END_TEST

/* Store @n pages that @make writes from seed @seed into @e. */
static void store_made(struct zp_pool *pool, void (*make)(uint64_t *, unsigned char *),
		       uint64_t seed, zp_entry_t *e, int n)
{
	static unsigned char page[ZPT_PAGE];

	for (int i = 0; i < n; i++) {
		make(&seed, page);
		ck_assert_int_eq(zp_store(pool, page, &e[i]), 0);
	}
}

/*
 * A small pool's footprint is what it holds: the bottom of the arena is
 * not given huge pages, which would make 100 pages of pool 512 resident
 * (git pack-objects under memory.high=7.5M held 5.2 MB resident in the
 * arena for 1 MB of pool, charged to its group, and was throttled 25 s
 * of a 27 s run).  The slack: the pool's first tables and codec state.
 * (Where transparent huge pages are off it cannot fail.)
 */
START_TEST(test_small_pool_footprint)
{
	enum { N = 300, SLACK = RELEASE_SLACK + 48 };
	static zp_entry_t e[N];
	struct zp_pool *pool = new_pool(NULL);
	long before, grown, pages;

	before = resident_pages();
	store_made(pool, zpt_page_mixed, 11, e, N);
	pages = (long)zp_get_total_pages(pool);
	grown = resident_pages() - before;
	fprintf(stderr, "test_small_pool_footprint: %d pages stored in %ld pages of pool, %ld resident\n",
		N, pages, grown);
	ck_assert_int_gt(pages, 0);
	ck_assert_int_le(grown, pages + SLACK);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(zp_invalidate(pool, e[i]), 0);
	zp_destroy_pool(pool);
}
END_TEST

/* Bytes of this process's mappings of no file that say MADV_NOHUGEPAGE (smaps' "nh"). */
static size_t no_huge_bytes(void)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	size_t bytes = 0, size = 0;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8] = "", path[256] = "";

		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %255s", &lo, &hi, perms, path) >= 3)
			size = path[0] ? 0 : hi - lo;
		else if (!strncmp(line, "VmFlags:", 8) && strstr(line, " nh"))
			bytes += size;
	}
	fclose(f);
	return bytes;
}

/*
 * A pool that grew past the arena's small bottom (16 MiB) and gave runs
 * back asks for huge pages no more below its top: khugepaged would fill
 * each 2 MB with a page left in it back into a whole huge page (a pool
 * shrunk from 103 MB to 10 held 95 MB resident a minute later).  Checked
 * by the mapping's flag, not by waiting for khugepaged; it says so
 * wherever THP is on or off.
 */
START_TEST(test_shrunk_arena_no_huge)
{
	enum { N = 6000 };	/* incompressible: a page of arena each, 23 MiB */
	static zp_entry_t e[N];
	struct zp_pool *pool = new_pool(NULL);
	size_t before, grown, shrunk;

	before = no_huge_bytes();
	store_made(pool, zpt_page_random, 13, e, N);
	ck_assert_uint_ge(zp_get_total_pages(pool), (16u << 20) / ZPT_PAGE + 1000);
	grown = no_huge_bytes();
	/* Growing alone changes nothing. */
	ck_assert_uint_eq(grown, before);
	for (int i = 0; i < N; i++)
		if (i % 4)
			ck_assert_int_eq(zp_invalidate(pool, e[i]), 0);
	zp_release_freed(pool);
	shrunk = no_huge_bytes();
	fprintf(stderr, "test_shrunk_arena_no_huge: %zu KiB of the arena no longer asks for huge pages\n",
		(shrunk - before) / 1024);
	/* The arena used above 16 MiB: 1000 pages at least. */
	ck_assert_uint_ge(shrunk - before, 1000u * ZPT_PAGE);
	for (int i = 0; i < N; i += 4)
		ck_assert_int_eq(zp_invalidate(pool, e[i]), 0);
	zp_destroy_pool(pool);
}
END_TEST

/*
 * A zspage freed and not yet given back is taken again as it is: a pool
 * that frees and creates zspages of one class in turn (a page stored and
 * invalidated, over and over) faults no page in after its first.  Were a
 * new zspage taken from the discarded runs or fresh arena instead, each
 * store would fault its zspage's pages in (200 at least here).
 */
START_TEST(test_pending_run_reused)
{
	enum { ROUNDS = 200 };
	static unsigned char page[ZPT_PAGE];
	struct zp_pool *pool = new_pool(NULL);
	struct rusage before, after;
	zp_entry_t e;
	uint64_t rng = 9;
	long faults;

	zpt_page_mixed(&rng, page);
	ck_assert_int_eq(zp_store(pool, page, &e), 0);
	ck_assert_int_eq(zp_invalidate(pool, e), 0);
	ck_assert_int_eq(getrusage(RUSAGE_SELF, &before), 0);
	for (int i = 0; i < ROUNDS; i++) {
		ck_assert_int_eq(zp_store(pool, page, &e), 0);
		ck_assert_int_eq(zp_invalidate(pool, e), 0);
	}
	ck_assert_int_eq(getrusage(RUSAGE_SELF, &after), 0);
	faults = after.ru_minflt - before.ru_minflt;
	ck_assert_msg(faults < ROUNDS / 4, "%ld page faults in %d stores of one page", faults, ROUNDS);
	zp_destroy_pool(pool);
}
END_TEST

START_TEST(test_writeback_and_reuse)
{
	struct zp_options o = { .backing = NULL };
	struct zp_pool *pool;
	enum { N = 300 };
	static unsigned char pages[N][ZPT_PAGE];
	unsigned char out[ZPT_PAGE];
	zp_entry_t e[N];
	uint64_t rng = 21;
	struct zp_stats st;
	struct stat sb;
	off_t first_size;
	unsigned bad = 0;

	make_backing();
	o.backing = backing;
	pool = new_pool(&o);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < N; i++) {
			zpt_page_mixed(&rng, pages[i]);
			bad += zp_store(pool, pages[i], &e[i]) != 0;
		}
		ck_assert_int_eq(zp_writeback(pool, N), N);
		zp_pool_stats(pool, &st);
		ck_assert_uint_eq(st.wb_pages_on_disk, N);
		ck_assert_uint_eq(st.mem_used_total, 0);
		ck_assert_uint_eq(st.compr_data_size, 0);
		ck_assert_uint_gt(st.backing_bytes, 0);
		for (int i = 0; i < N; i++)
			bad += zp_load(pool, e[i], out) != 0 ||
			       memcmp(out, pages[i], ZPT_PAGE) != 0;
		ck_assert_int_eq(stat(backing, &sb), 0);
		if (round == 0)
			first_size = sb.st_size;
		/* The space of invalidated entries is reused. */
		ck_assert_int_le(sb.st_size, first_size + 16 * ZPT_PAGE);
		for (int i = 0; i < N; i++)
			bad += zp_invalidate(pool, e[i]) != 0;
	}
	ck_assert_uint_eq(bad, 0);
	zp_pool_stats(pool, &st);
	ck_assert_uint_eq(st.written_back_pages, 3 * N);
	ck_assert_uint_eq(st.wb_loads, 3 * N);
	ck_assert_uint_eq(st.backing_bytes, 0);
	ck_assert_uint_eq(st.stored_pages, 0);
	zp_destroy_pool(pool);
	unlink(backing);
}
END_TEST

/* Pages of file @path in the page cache (mincore of a mapping that touches none). */
static long file_pages_cached(const char *path)
{
	int fd = open(path, O_RDONLY);
	struct stat sb;
	unsigned char *vec;
	long pages, cached = 0;
	void *map;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &sb), 0);
	pages = (sb.st_size + ZPT_PAGE - 1) / ZPT_PAGE;
	if (pages == 0) {
		close(fd);
		return 0;
	}
	map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	vec = malloc((size_t)pages);
	ck_assert_ptr_nonnull(vec);
	ck_assert_int_eq(mincore(map, (size_t)sb.st_size, vec), 0);
	for (long i = 0; i < pages; i++)
		cached += vec[i] & 1;
	free(vec);
	munmap(map, (size_t)sb.st_size);
	close(fd);
	return cached;
}

/* The file's bytes on the disk (so its cached pages are clean and can go). */
static void sync_path(const char *path)
{
	int fd = open(path, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fdatasync(fd), 0);
	close(fd);
}

/*
 * What is written back leaves memory: a writeback drops the pages of the
 * batches written before it from the page cache, and a load the pages it
 * read.  Needs a file on a disk: on tmpfs the file is memory anyway (and
 * the advice does nothing), so the test looks for a directory that is not.
 */
START_TEST(test_writeback_leaves_no_cache)
{
	static const char *const dirs[] = { "/var/tmp", "/tmp", "." };
	struct zp_options o = { .backing = NULL };
	struct zp_pool *pool;
	enum { N = 2000 };
	/* On the heap: a static array this size moves test_release_freed's mappings. */
	unsigned char (*pages)[ZPT_PAGE] = malloc((size_t)N * ZPT_PAGE);
	zp_entry_t *e = malloc(N * sizeof(*e));
	unsigned char out[ZPT_PAGE];
	char path[PATH_MAX] = "";
	uint64_t rng = 33;
	unsigned bad = 0;
	long first, second;

	for (unsigned i = 0; i < sizeof(dirs) / sizeof(dirs[0]) && !path[0]; i++) {
		struct statfs fs;
		int fd;

		if (statfs(dirs[i], &fs) != 0 || fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC)
			continue;
		snprintf(path, sizeof(path), "%s/zpool-test-cache-XXXXXX", dirs[i]);
		fd = mkstemp(path);
		if (fd < 0) {
			path[0] = '\0';
			continue;
		}
		close(fd);
	}
	if (!path[0]) {
		fprintf(stderr, "test_writeback_leaves_no_cache: no disk file system found; not run\n");
		free(pages);
		free(e);
		return;
	}
	ck_assert_ptr_nonnull(pages);
	ck_assert_ptr_nonnull(e);
	o.backing = path;
	pool = new_pool(&o);
	for (int i = 0; i < N; i++) {
		zpt_page_mixed(&rng, pages[i]);
		bad += zp_store(pool, pages[i], &e[i]) != 0;
	}
	ck_assert_uint_eq(bad, 0);
	ck_assert_int_eq(zp_writeback(pool, N / 2), N / 2);
	first = file_pages_cached(path);
	/* Nothing else has dropped them: the first writeback's pages are there. */
	ck_assert_int_gt(first, N / 2 / 4);
	sync_path(path);
	ck_assert_int_eq(zp_writeback(pool, N / 2), N / 2);
	/* The first writeback's pages went: what is cached is about the second's (not twice as much). */
	second = file_pages_cached(path);
	ck_assert_int_lt(second, first * 3 / 2);
	sync_path(path);
	/* A writeback with nothing to write still drops what the last left. */
	ck_assert_int_eq(zp_writeback(pool, 0), 0);
	ck_assert_int_eq(file_pages_cached(path), 0);
	for (int i = 0; i < N; i++)
		bad += zp_load(pool, e[i], out) != 0 || memcmp(out, pages[i], ZPT_PAGE) != 0;
	ck_assert_uint_eq(bad, 0);
	/* Every load dropped the pages it read. */
	ck_assert_int_eq(file_pages_cached(path), 0);
	zp_destroy_pool(pool);
	unlink(path);
	free(pages);
	free(e);
}
END_TEST

/* A backing file in memory (tmpfs) saves nothing: the pool says so once, and works. */
START_TEST(test_backing_in_memory_said)
{
	struct zp_options o = { .backing = NULL };
	unsigned char page[ZPT_PAGE], out[ZPT_PAGE];
	char path[] = "/dev/shm/zpool-test-shm-XXXXXX", err[2048];
	struct zp_pool *pool;
	struct capture c;
	struct statfs fs;
	uint64_t rng = 41;
	zp_entry_t e;
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstatfs(fd, &fs), 0);
	close(fd);
	if (fs.f_type != TMPFS_MAGIC) {
		unlink(path);
		fprintf(stderr, "test_backing_in_memory_said: /dev/shm is not tmpfs; not run\n");
		return;
	}
	o.backing = path;
	capture_start(&c);
	pool = new_pool(&o);
	capture_end(&c, err, sizeof(err));
	ck_assert_ptr_nonnull(strstr(err, "is in memory (tmpfs)"));
	zpt_page_mixed(&rng, page);
	ck_assert_int_eq(zp_store(pool, page, &e), 0);
	ck_assert_int_eq(zp_writeback(pool, 1), 1);
	ck_assert_int_eq(zp_load(pool, e, out), 0);
	ck_assert_int_eq(memcmp(out, page, ZPT_PAGE), 0);
	zp_destroy_pool(pool);
	unlink(path);
}
END_TEST

START_TEST(test_limit_without_backing)
{
	struct zp_options o = { .max_bytes = 64 * ZPT_PAGE };
	struct zp_pool *pool = new_pool(&o);
	unsigned char page[ZPT_PAGE];
	uint64_t rng = 8;
	zp_entry_t e;
	int ret = 0, stored = 0;
	struct zp_stats st;

	while (stored < 10000 && (ret = zp_store(pool, page, &e)) == 0) {
		zpt_page_random(&rng, page);
		stored++;
	}
	ck_assert_int_eq(ret, -ENOSPC);
	zp_pool_stats(pool, &st);
	ck_assert_uint_ge(st.pool_limit_hit, 1);
	ck_assert_uint_le(st.mem_used_total, 64 * ZPT_PAGE);
	zp_destroy_pool(pool);
}
END_TEST

/*
 * The limit holds exactly, not to within a zspage: no store ever takes
 * the pool past max_bytes, whatever the size class (random pages are
 * one-page huge objects, mixed ones fill zspages of up to 8 pages), and
 * a limit that is not a whole number of pages rounds down.
 */
START_TEST(test_limit_exact)
{
	const size_t limits[] = { 64 * ZPT_PAGE, 40 * ZPT_PAGE + 100, 3 * ZPT_PAGE };

	for (size_t l = 0; l < sizeof(limits) / sizeof(limits[0]); l++) {
		for (int kind = 0; kind < 2; kind++) {
			struct zp_options o = { .max_bytes = limits[l] };
			struct zp_pool *pool = new_pool(&o);
			unsigned char page[ZPT_PAGE];
			uint64_t rng = 10 + l * 2 + (uint64_t)kind;
			unsigned long worst = 0;
			int ret = 0, stored = 0;
			zp_entry_t e;

			while (stored < 20000) {
				if (kind)
					zpt_page_random(&rng, page);
				else
					zpt_page_mixed(&rng, page);
				ret = zp_store(pool, page, &e);
				if (zp_get_total_pages(pool) > worst)
					worst = zp_get_total_pages(pool);
				if (ret)
					break;
				stored++;
			}
			ck_assert_int_eq(ret, -ENOSPC);
			/* A 3-page pool holds no zspage of 4 pages or more. */
			if (kind || limits[l] >= 8 * ZPT_PAGE)
				ck_assert_int_gt(stored, 0);
			ck_assert_uint_le(worst * ZPT_PAGE, limits[l]);
			zp_destroy_pool(pool);
		}
	}
}
END_TEST

/*
 * zp_malloc's objects count toward the limit, so zp_malloc enforces it
 * too: past it, 0 (the documented failure), and room again once an
 * object is freed.
 */
START_TEST(test_malloc_limit)
{
	struct zp_options o = { .max_bytes = 16 * ZPT_PAGE, .compact_threshold = 100 };
	struct zp_pool *pool = new_pool(&o);
	enum { MAX = 10000 };
	static zp_handle_t h[MAX];
	unsigned char page[ZPT_PAGE];
	uint64_t rng = 4;
	zp_entry_t e[20];
	int n = 0, ne, ret;

	while (n < MAX && (h[n] = zp_malloc(pool, 3000)) != 0) {
		ck_assert_uint_le(zp_get_total_pages(pool) * ZPT_PAGE, o.max_bytes);
		n++;
	}
	ck_assert_int_lt(n, MAX);
	ck_assert_int_gt(n, 0);
	ck_assert_uint_le(zp_get_total_pages(pool) * ZPT_PAGE, o.max_bytes);
	/* Stores meet the same limit: one-page objects fill what is left,
	 * then (no backing file) they are refused. */
	for (ret = 0, ne = 0; ne < 20 && ret == 0; ne++) {
		zpt_page_random(&rng, page);
		ret = zp_store(pool, page, &e[ne]);
	}
	ck_assert_int_eq(ret, -ENOSPC);
	ck_assert_uint_eq(zp_get_total_pages(pool), 16);
	/* Any class's next zspage is past the limit now. */
	ck_assert_uint_eq(zp_malloc(pool, 100), 0);
	ck_assert_uint_eq(zp_malloc(pool, 3000), 0);
	/* A freed object leaves room for the next one. */
	ck_assert_int_eq(zp_free(pool, h[--n]), 0);
	h[n] = zp_malloc(pool, 3000);
	ck_assert_uint_ne(h[n], 0);
	for (int i = 0; i <= n; i++)
		ck_assert_int_eq(zp_free(pool, h[i]), 0);
	for (int i = 0; i < ne - 1; i++)
		ck_assert_int_eq(zp_invalidate(pool, e[i]), 0);
	ck_assert_uint_eq(zp_get_total_pages(pool), 0);
	/* Without a limit, nothing is refused. */
	zp_destroy_pool(pool);
	pool = new_pool(NULL);
	for (int i = 0; i < 2000; i++)
		ck_assert_uint_ne(h[i] = zp_malloc(pool, 3000), 0);
	zp_destroy_pool(pool);
}
END_TEST

START_TEST(test_limit_writes_back)
{
	struct zp_options o = { .max_bytes = 64 * ZPT_PAGE };
	struct zp_pool *pool;
	enum { N = 2000 };
	static unsigned char pages[N][ZPT_PAGE];
	unsigned char out[ZPT_PAGE];
	static zp_entry_t e[N];
	uint64_t rng = 9;
	struct zp_stats st;
	unsigned bad = 0;

	make_backing();
	o.backing = backing;
	pool = new_pool(&o);
	for (int i = 0; i < N; i++) {
		zpt_page_mixed(&rng, pages[i]);
		bad += zp_store(pool, pages[i], &e[i]) != 0;
		/* Writeback makes room first: the limit is never passed. */
		bad += zp_get_total_pages(pool) > 64;
	}
	ck_assert_uint_eq(bad, 0);
	zp_pool_stats(pool, &st);
	ck_assert_uint_le(st.mem_used_total, 64 * ZPT_PAGE);
	ck_assert_uint_gt(st.written_back_pages, N / 2);
	for (int i = 0; i < N; i++)
		bad += zp_load(pool, e[i], out) != 0 ||
		       memcmp(out, pages[i], ZPT_PAGE) != 0;
	ck_assert_uint_eq(bad, 0);
	zp_destroy_pool(pool);
	unlink(backing);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("zpool");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_class_geometry);
	tcase_add_test(tc, test_obj_roundtrip);
	tcase_add_test(tc, test_compaction_keeps_handles);
	tcase_add_test(tc, test_reader_pins_against_compaction);
	tcase_add_test(tc, test_auto_compaction);
	tcase_add_test(tc, test_store_kinds);
	tcase_add_test(tc, test_huge_reject);
	tcase_add_test(tc, test_zstd_vs_lz4);
	tcase_add_test(tc, test_recompress);
	tcase_add_test(tc, test_zstd_state_lazy);
	tcase_add_test(tc, test_store_dense);
	tcase_add_test(tc, test_recompress_dict);
	tcase_add_test(tc, test_zstd_pool_dict);
	tcase_add_test(tc, test_bad_input);
	tcase_add_test(tc, test_classes_show);
	tcase_add_test(tc, test_writeback_and_reuse);
	tcase_add_test(tc, test_release_freed);
	tcase_add_test(tc, test_small_pool_footprint);
	tcase_add_test(tc, test_shrunk_arena_no_huge);
	tcase_add_test(tc, test_pending_run_reused);
	tcase_add_test(tc, test_writeback_leaves_no_cache);
	tcase_add_test(tc, test_backing_in_memory_said);
	tcase_add_test(tc, test_limit_without_backing);
	tcase_add_test(tc, test_limit_writes_back);
	tcase_add_test(tc, test_limit_exact);
	tcase_add_test(tc, test_malloc_limit);
	suite_add_tcase(s, tc);
	return check_run(s);
}
