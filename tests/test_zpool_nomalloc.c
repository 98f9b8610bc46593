/*
 * zpool must never call malloc: it will run inside the interposed malloc.
 * This program interposes the malloc family itself, counts the calls made
 * while the pool works (creation with zstd contexts and io_uring rings,
 * stores, loads, writeback, compaction, recompression against its
 * dictionary, statistics, bad input, teardown),
 * and fails if there is any.
 */
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgm/zpool.h"
#include "zpool_pages.h"

void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void *__libc_memalign(size_t, size_t);
void __libc_free(void *);

static volatile bool watching;
static volatile unsigned long calls;

static void seen(void)
{
	if (watching)
		calls++;
}

void *malloc(size_t n) { seen(); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { seen(); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { seen(); return __libc_realloc(p, n); }
void free(void *p) { if (p) seen(); __libc_free(p); }
void *memalign(size_t a, size_t n) { seen(); return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { seen(); return __libc_memalign(a, n); }
int posix_memalign(void **p, size_t a, size_t n)
{
	seen();
	*p = __libc_memalign(a, n);
	return *p ? 0 : ENOMEM;
}

/* Watching from here on: a pool made with @o. */
static struct zp_pool *watched_pool(const struct zp_options *o)
{
	struct zp_pool *pool;

	watching = true;
	if (zp_create_pool(o, &pool)) {
		watching = false;
		fprintf(stderr, "cannot create pool\n");
		exit(2);
	}
	return pool;
}

static void exercise(enum zp_codec codec, unsigned char (*pages)[ZPT_PAGE], int n)
{
	char path[] = "/tmp/zpool-nomalloc-XXXXXX";
	/* (zstd: against the dictionary once 16 stores have halved.) */
	struct zp_options o = { .codec = codec, .max_bytes = 32 * ZPT_PAGE, .dict_after = 16 };
	static char text[1 << 15];
	unsigned char out[ZPT_PAGE];
	zp_entry_t e[64];
	struct zp_stats st;
	struct zp_pool *pool;
	int fd = mkstemp(path);

	close(fd);
	o.backing = path;
	pool = watched_pool(&o);
	for (int i = 0; i < n; i++)
		zp_store(pool, pages[i], &e[i]);
	zp_writeback(pool, 8);
	for (int i = 0; i < n; i++)
		zp_load(pool, e[i], out);
	for (int i = 0; i < n; i += 2)
		zp_invalidate(pool, e[i]);
	zp_compact(pool);
	zp_pool_stats(pool, &st);
	zp_classes_show(pool, text, sizeof(text));
	zp_free(pool, 77777);		/* bad input logs a line */
	zp_load(pool, 0, out);
	zp_destroy_pool(pool);
	watching = false;
	unlink(path);
	if (codec == ZP_CODEC_ZSTD && !st.stored_dict) {
		fprintf(stderr, "the zstd pool made no use of its dictionary: not exercised\n");
		exit(2);
	}
}

/* Recompression to zstd, against the dictionary it makes of the pool's pages, and loads. */
static void exercise_recompress(unsigned char (*pages)[ZPT_PAGE], int n)
{
	struct zp_options o = { .recompress = true, .dict_after = 8 };
	unsigned char out[ZPT_PAGE];
	zp_entry_t e[64];
	struct zp_stats st;
	struct zp_pool *pool;

	pool = watched_pool(&o);
	for (int i = 0; i < n; i++)
		zp_store(pool, pages[i], &e[i]);
	zp_recompress(pool, (unsigned long)n, 0);
	for (int i = 0; i < n; i++)
		zp_load(pool, e[i], out);
	zp_pool_stats(pool, &st);
	zp_destroy_pool(pool);
	watching = false;
	if (!st.recompressed_dict) {
		fprintf(stderr, "recompression made no use of its dictionary: not exercised\n");
		exit(2);
	}
}

int main(void)
{
	static unsigned char pages[64][ZPT_PAGE];
	uint64_t rng = 1;

	for (int i = 0; i < 64; i++)
		if (i % 3 == 0)
			zpt_page_text(&rng, pages[i]);
		else if (i % 3 == 1)
			zpt_page_mixed(&rng, pages[i]);
		else
			zpt_page_same((uint64_t)i, pages[i]);
	exercise(ZP_CODEC_LZ4, pages, 64);
	exercise(ZP_CODEC_ZSTD, pages, 64);
	exercise_recompress(pages, 64);
	printf("malloc-family calls made by zpool: %lu\n", calls);
	printf("%d passed, %d failed\n", calls == 0, calls != 0);
	return calls != 0;
}
