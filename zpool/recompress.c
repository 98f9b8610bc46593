/*
 * Recompression of idle entries with zstd: zram's recompress, for an lz4
 * pool without a backing file.
 *
 * lz4 keeps refaults fast; zstd packs a third or so tighter on heap pages
 * (bench/RESULTS-spill.md: 2.48 against 4.02) but costs a few times more
 * to compress and twice as much to load.  Entries that stayed in the pool
 * long enough are unlikely to be loaded soon, so they are worth the
 * exchange.
 *
 * The oldest entries are taken off the LRU with the WB flag set, as
 * writeback takes them (an invalidation meanwhile marks them DOOMED and
 * leaves the freeing here); each is decompressed and compressed again with
 * zstd into a new object.  The switch -- kind ZE_OBJ to ZE_ZOBJ, whose
 * loads read zhandle/zlen -- is one compare-and-swap of the state word
 * made under lru_lock once no load is in flight, so a load reads either
 * the old object (still alive) or the new one (published by the swap).
 * The old object is freed after the switch.  Entries that are not worth
 * it stay ZE_OBJ, off the LRU (OFFLRU), so they are not looked at again.
 */
#include <errno.h>
#include <string.h>

#include "zp_types.h"

/*
 * Worth its slower loads: the zstd object saves more than an eighth of its
 * own size, a ninth of the lz4 one.
 */
static bool worth_it(uint32_t lz4_len, size_t zstd_len)
{
	return zstd_len != 0 && zstd_len + zstd_len / 8 < lz4_len;
}

/* Take the oldest entry stored at least @min_age_ms ago off the LRU; 0 if none. */
static zp_entry_t take_oldest(struct zp_pool *pool, uint32_t min_age_ms)
{
	zp_entry_t e;

	pthread_mutex_lock(&pool->lru_lock);
	e = pool->lru_head;
	if (e && (uint32_t)(zp_now_ms() - pool->entry[e].stored_ms) >= min_age_ms) {
		zp_lru_pop_oldest(pool);
		atomic_fetch_or_explicit(&pool->entry[e].state, ZE_WB, memory_order_relaxed);
	} else {
		e = 0;
	}
	pthread_mutex_unlock(&pool->lru_lock);
	return e;
}

/*
 * End our hold on @e: switch it to the zstd object @zh of @zlen bytes, or
 * (@zh == 0) leave it as it is, off the LRU.  An entry invalidated
 * meanwhile is freed here, with both objects.
 */
static void finish(struct zp_pool *pool, zp_entry_t e, zp_handle_t zh, uint32_t zlen)
{
	struct zp_entry *ent = &pool->entry[e];
	uint32_t len = ent->len;
	zp_handle_t old = ent->handle;
	bool doomed;

	if (!zh) {
		pthread_mutex_lock(&pool->lru_lock);
		doomed = atomic_load_explicit(&ent->state, memory_order_acquire) & ZE_DOOMED;
		/* Loads in flight only count themselves in and out: keep their counts. */
		if (!doomed)
			atomic_fetch_xor_explicit(&ent->state, ZE_WB | ZE_OFFLRU, memory_order_release);
		pthread_mutex_unlock(&pool->lru_lock);
		if (!doomed) {
			zp_stat_add(pool, st_recompress_declined, 1);
			return;
		}
	} else {
		/* Loads of the lz4 object never read these: set before the switch publishes them. */
		ent->zhandle = zh;
		ent->zlen = zlen;
		doomed = !zp_entry_switch(pool, e, ZE_ZOBJ);
	}
	if (doomed) {
		if (zh)
			zp_free(pool, zh);
		zp_free(pool, old);
		zp_entry_release(pool, e);
		return;
	}
	zp_free(pool, old);
	zp_stat_sub(pool, st_compr, len);
	zp_stat_add(pool, st_compr, zp_zlen_bytes(zlen));
	zp_stat_add(pool, st_recompressed, 1);
	if (zlen & ZP_ZLEN_DICT)
		zp_stat_add(pool, st_recompressed_dict, 1);
}

/*
 * The zstd object for entry @e, or 0 when it is not worth one; *@zlen is
 * its length, with ZP_ZLEN_DICT when it was compressed against the
 * dictionary.
 */
static zp_handle_t recompress_one(struct zp_pool *pool, zp_entry_t e, uint32_t *zlen)
{
	struct zp_entry *ent = &pool->entry[e];
	unsigned char page[ZP_PAGE_SIZE];
	const void *p, *cdict;
	struct zp_cctx *c;
	zp_handle_t zh = 0;
	size_t n;
	bool dict;
	int ret;

	if (ent->len == ZP_PAGE_SIZE)
		return 0;	/* raw: lz4 could not shrink it, zstd will not do much better */
	p = zp_obj_read_begin(pool, ent->handle, NULL);
	if (!p)
		return 0;
	ret = zp_decompress(pool, p, ent->len, page, false);	/* lz4: no dictionary */
	zp_obj_read_end(pool, ent->handle, p);
	if (ret < 0)
		return 0;
	cdict = zp_zdict_cdict(pool);
	c = zp_cctx_get(pool);
	n = zp_compress_zstd(pool, c, page, cdict, &dict);
	if (worth_it(ent->len, n) && zp_obj_malloc(pool, n, &zh) == 0)
		zp_obj_write(pool, zh, c->buf, n);
	else
		zh = 0;
	zp_cctx_put(c);
	*zlen = (uint32_t)n | (dict ? ZP_ZLEN_DICT : 0);
	return zh;
}

long zp_recompress(struct zp_pool *pool, unsigned long nr, uint32_t min_age_ms)
{
	long looked = 0;

	if (!pool->opt.recompress)
		return -EOPNOTSUPP;
	while ((unsigned long)looked < nr) {
		zp_entry_t e = take_oldest(pool, min_age_ms);
		uint32_t zlen = 0;
		zp_handle_t zh;

		if (!e)
			break;
		zh = recompress_one(pool, e, &zlen);
		finish(pool, e, zh, zlen);
		looked++;
	}
	return looked;
}
