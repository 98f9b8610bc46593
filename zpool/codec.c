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
 */
#include <errno.h>
#include <string.h>

#include <lz4.h>
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include "cgm/log.h"
#include "zp_types.h"

#define ZP_SCRATCH	(2 * ZP_PAGE_SIZE)

struct ctx_sizes {
	size_t lz4, zc, zd;
};

/* zstd's level: the pool's own, or recompression's in an lz4 pool. */
static int zstd_level(const struct zp_pool *pool)
{
	return pool->opt.codec == ZP_CODEC_ZSTD ? pool->opt.level : pool->opt.recompress_level;
}

static struct ctx_sizes ctx_sizes(const struct zp_pool *pool)
{
	struct ctx_sizes s = { .lz4 = 0, .zc = 0, .zd = 0 };

	if (pool->opt.codec == ZP_CODEC_ZSTD || pool->opt.recompress) {
		ZSTD_compressionParameters cp =
			ZSTD_getCParams(zstd_level(pool), ZP_PAGE_SIZE, 0);

		size_t zc = ZSTD_estimateCCtxSize_usingCParams(cp);

		/* zstd compresses against the dictionary too (zdict.c). */
		if (zp_zdict_wanted(pool) && zp_zdict_cctx_bytes(zstd_level(pool)) > zc)
			zc = zp_zdict_cctx_bytes(zstd_level(pool));
		s.zc = zp_page_align(zc);
		s.zd = zp_page_align(ZSTD_estimateDCtxSize());
	}
	if (pool->opt.codec == ZP_CODEC_LZ4)
		s.lz4 = zp_page_align((size_t)LZ4_sizeofState());
	return s;
}

int zp_codec_init(struct zp_pool *pool)
{
	struct ctx_sizes s = ctx_sizes(pool);
	size_t per = ZP_SCRATCH + s.lz4 + s.zc + s.zd;

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
		mem += ZP_SCRATCH;
		if (s.lz4) {
			c->lz4_state = mem;
			mem += s.lz4;
		}
		if (s.zc) {
			c->zstd_c = ZSTD_initStaticCCtx(mem, s.zc);
			c->zstd_d = ZSTD_initStaticDCtx(mem + s.zc, s.zd);
			if (!c->zstd_c || !c->zstd_d)
				return -ENOMEM;
		}
	}
	return zp_zdict_init(pool);
}

void zp_codec_destroy(struct zp_pool *pool)
{
	struct ctx_sizes s = ctx_sizes(pool);

	zp_zdict_destroy(pool);
	if (!pool->ctx)
		return;
	for (unsigned i = 0; i < ZP_NR_CTX; i++)
		zp_unmap(pool->ctx[i].buf, ZP_SCRATCH + s.lz4 + s.zc + s.zd);
	zp_unmap(pool->ctx, sizeof(struct zp_cctx) * ZP_NR_CTX);
	pool->ctx = NULL;
}

static CGM_TLS unsigned zp_ctx_hint;
static unsigned zp_ctx_next;

struct zp_cctx *zp_cctx_get(struct zp_pool *pool)
{
	unsigned start = zp_ctx_hint;

	if (cgm_unlikely(start == 0))
		start = zp_ctx_hint =
			__atomic_add_fetch(&zp_ctx_next, 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < ZP_NR_CTX; i++) {
		struct zp_cctx *c = &pool->ctx[(start + i) % ZP_NR_CTX];

		if (pthread_mutex_trylock(&c->lock) == 0)
			return c;
	}
	pthread_mutex_lock(&pool->ctx[start % ZP_NR_CTX].lock);
	return &pool->ctx[start % ZP_NR_CTX];
}

void zp_cctx_put(struct zp_cctx *c)
{
	pthread_mutex_unlock(&c->lock);
}

size_t zp_compress_zstd(struct zp_pool *pool, struct zp_cctx *c, const void *page,
			const void *cdict, bool *dict)
{
	size_t n = cdict ? ZSTD_compress_usingCDict(c->zstd_c, c->buf, ZP_SCRATCH, page,
						    ZP_PAGE_SIZE, cdict) : 0;

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
	c = zp_cctx_get(pool);
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
