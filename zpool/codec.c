/*
 * Compression: lz4 (default) or zstd, through a small set of contexts.
 *
 * A context holds the codec's state and a scratch buffer the page is
 * compressed into before its size, and so its class, is known (zswap's
 * per-CPU acomp buffer).  Threads take any free context, starting from one
 * of their own choosing, so two threads rarely meet on one; nothing here
 * is per-thread state that would need a destructor.  zstd's contexts are
 * "static" ones laid out in mmap'd memory: zstd never calls malloc.
 * lz4 decompression needs no state; zstd's does, so zstd loads take a
 * context too.  An lz4 pool made with recompress has zstd state as well,
 * for the entries zp_recompress() moves to zstd.
 *
 * zstd's memory is mapped at the first use of zstd, for every context at
 * once (a page compressed with one context loads with any other), and
 * the pool asks nothing of libzstd before: made with the pool, its
 * sizes and contexts cost a process with spill=1 and nothing to spill
 * 320 KiB of libzstd's code and tables (four fault-around windows of it
 * ran) and 128 KiB of the contexts' first pages.  If that memory cannot
 * be had, zstd compresses nothing (the page stays lz4, or in the heap)
 * and the next use tries again; a load never needs it first, since
 * only a page that zstd compressed loads with zstd.  lz4's state is the
 * size of its public type, and lz4 compresses into it from scratch.
 *
 * A context's zstd state is laid out in that memory when the context
 * first uses zstd, not with the others: laying out all eight wrote 16
 * KiB of each, 112 KiB a process for contexts that one thread spilling
 * never takes.  And zp_trim() gives back the memory a context
 * wrote (its scratch pages, its zstd state, 100 KiB once zstd has run),
 * to be laid out again at its next use: the spill engine calls it once
 * its handler has been idle a while, so that a process that spilled
 * once does not keep that scratch charged to its group for good.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include <lz4.h>
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include "cgm/log.h"
#include "zp_types.h"

#define ZP_SCRATCH	(2 * ZP_PAGE_SIZE)

/* zstd's level: the pool's own, or recompression's in an lz4 pool. */
static int zstd_level(const struct zp_pool *pool)
{
	return pool->opt.codec == ZP_CODEC_ZSTD ? pool->opt.level : pool->opt.recompress_level;
}

static bool zstd_used(const struct zp_pool *pool)
{
	return pool->opt.codec == ZP_CODEC_ZSTD || pool->opt.recompress;
}

/* A context's compression state and its decompression state, each page-aligned. */
static void zstd_sizes(const struct zp_pool *pool, size_t *zc, size_t *zd)
{
	ZSTD_compressionParameters cp = ZSTD_getCParams(zstd_level(pool), ZP_PAGE_SIZE, 0);
	size_t c = ZSTD_estimateCCtxSize_usingCParams(cp);

	/* zstd compresses against the dictionary too (zdict.c). */
	if (zp_zdict_wanted(pool) && zp_zdict_cctx_bytes(zstd_level(pool)) > c)
		c = zp_zdict_cctx_bytes(zstd_level(pool));
	*zc = zp_page_align(c);
	*zd = zp_page_align(ZSTD_estimateDCtxSize());
}

static size_t lz4_bytes(const struct zp_pool *pool)
{
	return pool->opt.codec == ZP_CODEC_LZ4 ? zp_page_align(sizeof(LZ4_stream_t)) : 0;
}

int zp_codec_init(struct zp_pool *pool)
{
	size_t per = ZP_SCRATCH + lz4_bytes(pool);

	pthread_mutex_init(&pool->zstd_lock, NULL);
	pool->ctx = zp_map(sizeof(struct zp_cctx) * ZP_NR_CTX, false);
	if (!pool->ctx)
		return -ENOMEM;
	for (unsigned i = 0; i < ZP_NR_CTX; i++) {
		struct zp_cctx *c = &pool->ctx[i];
		unsigned char *mem = zp_map(per, false);

		pthread_mutex_init(&c->lock, NULL);
		if (!mem)
			return -ENOMEM;
		c->buf = mem;
		if (lz4_bytes(pool))
			c->lz4_state = mem + ZP_SCRATCH;
	}
	return zp_zdict_init(pool);
}

/*
 * zstd's state in every context, made on the first call: 0, or -ENOMEM
 * (nothing kept: the next call tries again).  Callers may hold a
 * context's lock; the others' zstd fields are read only once zstd_ready
 * says so.
 */
static int zstd_state(struct zp_pool *pool)
{
	size_t zc, zd;
	unsigned i;
	bool ok = true;
	int ret = 0;

	if (cgm_likely(atomic_load_explicit(&pool->zstd_ready, memory_order_acquire)))
		return 0;
	if (!zstd_used(pool))
		return -EINVAL;
	pthread_mutex_lock(&pool->zstd_lock);
	if (atomic_load_explicit(&pool->zstd_ready, memory_order_relaxed))
		goto out;
	zstd_sizes(pool, &zc, &zd);
	for (i = 0; ok && i < ZP_NR_CTX; i++) {
		struct zp_cctx *c = &pool->ctx[i];

		c->zstd_mem = zp_map(zc + zd, false);
		ok = c->zstd_mem != NULL;
	}
	if (!ok) {
		/* The contexts tried, the last of them the one that failed. */
		while (i-- > 0) {
			struct zp_cctx *c = &pool->ctx[i];

			zp_unmap(c->zstd_mem, zc + zd);
			c->zstd_mem = NULL;
		}
		ret = -ENOMEM;
		goto out;
	}
	pool->zstd_cbytes = zc;
	pool->zstd_bytes = zc + zd;
	atomic_store_explicit(&pool->zstd_ready, true, memory_order_release);
out:
	pthread_mutex_unlock(&pool->zstd_lock);
	return ret;
}

/*
 * @c's zstd state, laid out in its memory if it is not (@c held, zstd's
 * memory mapped): 0, or -ENOMEM if zstd finds the memory too small.  It
 * never does: the sizes are zstd's own estimates, and every context's
 * memory is the same size and page-aligned.
 */
static int zstd_ctx_ready(const struct zp_pool *pool, struct zp_cctx *c)
{
	if (cgm_likely(c->zstd_c))
		return 0;
	c->zstd_c = ZSTD_initStaticCCtx(c->zstd_mem, pool->zstd_cbytes);
	c->zstd_d = ZSTD_initStaticDCtx(c->zstd_mem + pool->zstd_cbytes,
					pool->zstd_bytes - pool->zstd_cbytes);
	if (c->zstd_c && c->zstd_d)
		return 0;
	c->zstd_c = c->zstd_d = NULL;
	return -ENOMEM;
}

void zp_trim(struct zp_pool *pool)
{
	bool zstd = atomic_load_explicit(&pool->zstd_ready, memory_order_acquire);

	if (!pool->ctx)
		return;
	for (unsigned i = 0; i < ZP_NR_CTX; i++) {
		struct zp_cctx *c = &pool->ctx[i];

		/* One in use is left: it is not idle, and the next call takes it. */
		if (pthread_mutex_trylock(&c->lock))
			continue;
		if (c->used) {
			madvise(c->buf, ZP_SCRATCH + lz4_bytes(pool), MADV_DONTNEED);
			/*
			 * The state forgotten before its memory goes: a child
			 * forked in between (the engine's handler runs through
			 * a fork) has either both or neither.
			 */
			if (zstd && c->zstd_c) {
				c->zstd_c = c->zstd_d = NULL;
				madvise(c->zstd_mem, pool->zstd_bytes, MADV_DONTNEED);
			}
			c->used = false;
		}
		pthread_mutex_unlock(&c->lock);
	}
}

size_t zp_scratch_resident(struct zp_pool *pool, int pagemap)
{
	bool zstd = atomic_load_explicit(&pool->zstd_ready, memory_order_acquire);
	size_t bytes = 0;

	if (!pool->ctx)
		return 0;
	for (unsigned i = 0; i < ZP_NR_CTX; i++) {
		bytes += zp_resident_bytes(pagemap, pool->ctx[i].buf, ZP_SCRATCH + lz4_bytes(pool));
		if (zstd)
			bytes += zp_resident_bytes(pagemap, pool->ctx[i].zstd_mem, pool->zstd_bytes);
	}
	return bytes;
}

void zp_codec_destroy(struct zp_pool *pool)
{
	bool zstd = atomic_load_explicit(&pool->zstd_ready, memory_order_relaxed);

	zp_zdict_destroy(pool);
	if (!pool->ctx)
		return;
	for (unsigned i = 0; i < ZP_NR_CTX; i++) {
		zp_unmap(pool->ctx[i].buf, ZP_SCRATCH + lz4_bytes(pool));
		if (zstd)
			zp_unmap(pool->ctx[i].zstd_mem, pool->zstd_bytes);
	}
	zp_unmap(pool->ctx, sizeof(struct zp_cctx) * ZP_NR_CTX);
	pool->ctx = NULL;
	atomic_store_explicit(&pool->zstd_ready, false, memory_order_relaxed);
}

static CGM_TLS unsigned zp_ctx_hint;
static unsigned zp_ctx_next;

struct zp_cctx *zp_cctx_get(struct zp_pool *pool)
{
	unsigned start = zp_ctx_hint;
	struct zp_cctx *c = NULL;

	if (cgm_unlikely(start == 0))
		start = zp_ctx_hint =
			__atomic_add_fetch(&zp_ctx_next, 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; !c && i < ZP_NR_CTX; i++)
		if (pthread_mutex_trylock(&pool->ctx[(start + i) % ZP_NR_CTX].lock) == 0)
			c = &pool->ctx[(start + i) % ZP_NR_CTX];
	if (!c) {
		c = &pool->ctx[start % ZP_NR_CTX];
		pthread_mutex_lock(&c->lock);
	}
	c->used = true;
	return c;
}

void zp_cctx_put(struct zp_cctx *c)
{
	pthread_mutex_unlock(&c->lock);
}

size_t zp_compress_zstd(struct zp_pool *pool, struct zp_cctx *c, const void *page,
			const void *cdict, bool *dict)
{
	size_t n;

	*dict = false;
	if (zstd_state(pool) < 0 || zstd_ctx_ready(pool, c) < 0)
		return 0;
	n = cdict ? ZSTD_compress_usingCDict(c->zstd_c, c->buf, ZP_SCRATCH, page, ZP_PAGE_SIZE,
					     cdict) : 0;
	*dict = cdict && !ZSTD_isError(n);
	/* Without: no dictionary yet, or (never seen: the context is sized for it) it failed. */
	if (!*dict)
		n = ZSTD_compressCCtx(c->zstd_c, c->buf, ZP_SCRATCH, page, ZP_PAGE_SIZE,
				      zstd_level(pool));
	return ZSTD_isError(n) ? 0 : n;
}

int zp_decompress_zstd(struct zp_pool *pool, const void *src, size_t len, void *dst, bool dict)
{
	const void *ddict = dict ? zp_zdict_ddict(pool) : NULL;
	struct zp_cctx *c;
	size_t n;

	/* (An object of the dictionary without it: corrupt, never made so.) */
	if (dict && !ddict)
		return -EIO;
	/* (Made before any page was compressed with zstd: this does not fail then.) */
	if (zstd_state(pool) < 0)
		return -EIO;
	c = zp_cctx_get(pool);
	if (zstd_ctx_ready(pool, c) < 0) {
		zp_cctx_put(c);
		return -EIO;
	}
	n = ddict ? ZSTD_decompress_usingDDict(c->zstd_d, dst, ZP_PAGE_SIZE, src, len, ddict) :
		    ZSTD_decompressDCtx(c->zstd_d, dst, ZP_PAGE_SIZE, src, len);
	zp_cctx_put(c);
	return !ZSTD_isError(n) && n == ZP_PAGE_SIZE ? 0 : -EIO;
}

size_t zp_compress(struct zp_pool *pool, struct zp_cctx *c, const void *page, const void *cdict,
		   bool *dict)
{
	*dict = false;
	if (pool->opt.codec == ZP_CODEC_ZSTD)
		return zp_compress_zstd(pool, c, page, cdict, dict);
	int n = LZ4_compress_fast_extState(c->lz4_state, page, (char *)c->buf,
					   (int)ZP_PAGE_SIZE, (int)ZP_SCRATCH,
					   pool->opt.level);

	return n > 0 ? (size_t)n : 0;
}

/* Decompress @len bytes at @src into the page @dst; -EIO if the data do not
 * make exactly one page (corruption: never a buffer overrun). */
int zp_decompress(struct zp_pool *pool, const void *src, size_t len, void *dst, bool dict)
{
	if (pool->opt.codec == ZP_CODEC_ZSTD)
		return zp_decompress_zstd(pool, src, len, dst, dict);
	return LZ4_decompress_safe(src, dst, (int)len, (int)ZP_PAGE_SIZE) ==
	       (int)ZP_PAGE_SIZE ? 0 : -EIO;
}
