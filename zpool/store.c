/*
 * The page store on top of the object allocator: what zswap does with
 * zsmalloc.
 *
 * A page that repeats one 8-byte word is kept as that word.  Any other is
 * compressed; if it compresses worse than the huge watermark it is kept
 * raw or refused, by policy.  Entries held as objects sit on an LRU,
 * oldest first, from which writeback takes them.
 *
 * An entry's state word carries its kind and a count of loads in flight;
 * writeback switches an entry to "on disk" only when no load is in
 * flight, so a load never takes a lock and never sees its object freed.
 * Invalidating an entry that writeback holds marks it DOOMED and leaves
 * the freeing to writeback.  Recompression (recompress.c) holds entries
 * the same way.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "cgm/log.h"
#include "zp_types.h"

static int zp_bad_entry_logged;

static CGM_COLD int bad_entry(const char *op, zp_entry_t e)
{
	cgm_log_once(&zp_bad_entry_logged,
		     "zpool: %s: invalid or freed entry %u (ignored)", op, e);
	return -EINVAL;
}

/* ---- LRU (lru_lock held) ---- */

static void lru_add_tail(struct zp_pool *pool, zp_entry_t e)
{
	struct zp_entry *ent = &pool->entry[e];

	ent->lru_next = 0;
	ent->lru_prev = pool->lru_tail;
	if (pool->lru_tail)
		pool->entry[pool->lru_tail].lru_next = e;
	else
		pool->lru_head = e;
	pool->lru_tail = e;
}

void zp_lru_add_head(struct zp_pool *pool, zp_entry_t e)
{
	struct zp_entry *ent = &pool->entry[e];

	ent->lru_prev = 0;
	ent->lru_next = pool->lru_head;
	if (pool->lru_head)
		pool->entry[pool->lru_head].lru_prev = e;
	else
		pool->lru_tail = e;
	pool->lru_head = e;
}

static void lru_del(struct zp_pool *pool, zp_entry_t e)
{
	struct zp_entry *ent = &pool->entry[e];

	if (ent->lru_prev)
		pool->entry[ent->lru_prev].lru_next = ent->lru_next;
	else
		pool->lru_head = ent->lru_next;
	if (ent->lru_next)
		pool->entry[ent->lru_next].lru_prev = ent->lru_prev;
	else
		pool->lru_tail = ent->lru_prev;
	ent->lru_prev = ent->lru_next = 0;
}

zp_entry_t zp_lru_pop_oldest(struct zp_pool *pool)
{
	zp_entry_t e = pool->lru_head;

	if (e)
		lru_del(pool, e);
	return e;
}

/* ---- entries ---- */

/* A coarse clock for entry ages: the vDSO's tick-granular one, no system call. */
uint32_t zp_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint32_t)((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
}

static zp_entry_t entry_new(struct zp_pool *pool)
{
	return zp_id_alloc(&pool->entries);
}

/* Publish an entry: fields first, then the kind, which loads acquire.
 * OR, not store: a bogus load of a free entry may hold a transient count. */
static void entry_publish(struct zp_pool *pool, zp_entry_t e, uint32_t kind)
{
	atomic_fetch_or_explicit(&pool->entry[e].state, kind, memory_order_release);
}

void zp_entry_release(struct zp_pool *pool, zp_entry_t e)
{
	atomic_fetch_and_explicit(&pool->entry[e].state,
				  ~(ZE_KIND_MASK | ZE_WB | ZE_DOOMED | ZE_OFFLRU),
				  memory_order_release);
	zp_id_free(&pool->entries, e);
}

bool zp_entry_switch(struct zp_pool *pool, zp_entry_t e, uint32_t kind)
{
	struct zp_entry *ent = &pool->entry[e];
	bool switched = false;

	pthread_mutex_lock(&pool->lru_lock);
	for (;;) {
		uint32_t st = atomic_load_explicit(&ent->state, memory_order_acquire);

		if (st & ZE_DOOMED)
			break;
		/* Loads of the object in flight: let them finish. */
		if ((st >> ZE_LOADER_SHIFT) == 0 &&
		    atomic_compare_exchange_strong_explicit(&ent->state, &st, kind,
							    memory_order_acq_rel,
							    memory_order_relaxed)) {
			switched = true;
			break;
		}
		pthread_mutex_unlock(&pool->lru_lock);
		sched_yield();
		pthread_mutex_lock(&pool->lru_lock);
	}
	pthread_mutex_unlock(&pool->lru_lock);
	return switched;
}

static bool entry_in_range(struct zp_pool *pool, zp_entry_t e)
{
	return e != 0 && e < pool->entries.cap;
}

/* ---- same-filled pages ---- */

static bool page_same_filled(const void *page, uint64_t *word)
{
	const unsigned char *p = page;
	uint64_t first, w;

	/*
	 * Front to back: the first cache line settles almost every page
	 * that is not same-filled, and it is the line the compressor reads
	 * first anyway; peeking at the last word first, as zswap does,
	 * touches a line early that the compressor reaches last.
	 */
	memcpy(&first, p, sizeof(first));
	for (size_t off = sizeof(w); off < ZP_PAGE_SIZE; off += sizeof(w)) {
		memcpy(&w, p + off, sizeof(w));
		if (w != first)
			return false;
	}
	*word = first;
	return true;
}

static void page_fill(void *dst, uint64_t word)
{
	unsigned char *p = dst;

	for (size_t off = 0; off < ZP_PAGE_SIZE; off += sizeof(word))
		memcpy(p + off, &word, sizeof(word));
}

/* ---- the pool limit ---- */

/*
 * Would @need more pages take the pool past @pct percent of its limit?
 * The arena enforces the limit itself (zp_arena_alloc); this is the
 * store's early look, which spares the compression of a page that would
 * be refused, and its measure of how much room writeback must make.
 */
static bool pool_over(struct zp_pool *pool, uint64_t need, uint64_t pct)
{
	return pool->limit_pages != UINT64_MAX &&
	       ((uint64_t)zp_get_total_pages(pool) + need) * 100 >
	       pool->limit_pages * pct;
}

/*
 * Must a store make room before it compresses?  When the next page would
 * pass the limit, and, after a store was refused, until the pool is back
 * under 90% of it: the kernel's hysteresis, which spares a pool just
 * under its limit from compressing page after page only to find that
 * each needs a zspage past it.
 */
static bool pool_at_limit(struct zp_pool *pool)
{
	if (pool_over(pool, 1, 100))
		return true;
	if (!atomic_load_explicit(&pool->limit_full, memory_order_relaxed))
		return false;
	if (pool_over(pool, 0, 90))
		return true;
	atomic_store_explicit(&pool->limit_full, false, memory_order_relaxed);
	return false;
}

/*
 * The pool is at its limit: write back the oldest entries and compact
 * until @need pages fit below 90% of it (zswap's accept threshold), as
 * far as writeback succeeds.  While writeback backs off after a failure
 * (writeback.c) nothing is tried: the store is refused at once.  Returns
 * false if the store must be refused.
 */
static CGM_NOINLINE bool pool_make_room(struct zp_pool *pool, unsigned need)
{
	if (!pool->wb || need > pool->limit_pages || zp_wb_backing_off(pool))
		return false;
	for (unsigned round = 0; round < 64 && pool_over(pool, need, 90); round++) {
		long n = zp_writeback(pool, pool->opt.wb_batch);

		zp_compact(pool);
		if (n <= 0)
			break;
	}
	if (pool_over(pool, need, 100))
		return false;
	atomic_store_explicit(&pool->limit_full, false, memory_order_relaxed);
	return true;
}

static CGM_NOINLINE int store_refused(struct zp_pool *pool)
{
	atomic_store_explicit(&pool->limit_full, true, memory_order_relaxed);
	return -ENOSPC;
}

/* ---- store, load, invalidate ---- */

static int store_same(struct zp_pool *pool, uint64_t word, zp_entry_t *entry)
{
	zp_entry_t e = entry_new(pool);

	if (!e) {
		zp_stat_add(pool, st_reject_alloc, 1);
		return -ENOMEM;
	}
	pool->entry[e].word = word;
	pool->entry[e].len = 0;
	entry_publish(pool, e, ZE_SAME);
	zp_stat_add(pool, st_same, 1);
	zp_stat_add(pool, st_orig, ZP_PAGE_SIZE);
	zp_stat_add(pool, st_stored, 1);
	*entry = e;
	return 0;
}

/* An object of @len bytes for a store; at the limit, writeback makes
 * room for its zspage and it is tried once more.  @hit: the store was
 * already counted in pool_limit_hit. */
static int store_malloc(struct zp_pool *pool, size_t len, zp_handle_t *handle,
			bool hit)
{
	int ret = zp_obj_malloc(pool, len, handle);

	if (cgm_unlikely(ret == -ENOSPC)) {
		unsigned need = zp_size_class(pool, len)->pages_per_zspage;

		if (!hit)
			zp_stat_add(pool, st_limit_hit, 1);
		if (pool_make_room(pool, need))
			ret = zp_obj_malloc(pool, len, handle);
	}
	return ret;
}

/* At the limit, as zswap: make room before compressing, or refuse (-ENOSPC). */
static int store_room(struct zp_pool *pool, bool *hit)
{
	if (cgm_likely(!pool_at_limit(pool)))
		return 0;
	*hit = true;
	zp_stat_add(pool, st_limit_hit, 1);
	return pool_make_room(pool, 1) ? 0 : store_refused(pool);
}

/*
 * An object of @len bytes holding @src, and an entry for it (not yet
 * published); the context @c, which @src may lie in, is put back either
 * way.  Returns 0, or the store's -ENOSPC or -ENOMEM.
 */
static int store_place(struct zp_pool *pool, struct zp_cctx *c, const void *src, size_t len,
		       bool hit, zp_handle_t *handle, zp_entry_t *e)
{
	int ret = store_malloc(pool, len, handle, hit);

	if (ret == -ENOSPC) {
		zp_cctx_put(c);
		return store_refused(pool);
	}
	*e = ret == 0 ? entry_new(pool) : 0;
	if (!*e) {
		zp_cctx_put(c);
		if (ret == 0)
			zp_free(pool, *handle);
		zp_stat_add(pool, st_reject_alloc, 1);
		return -ENOMEM;
	}
	zp_obj_write(pool, *handle, src, len);
	zp_cctx_put(c);
	return 0;
}

/* A page that is not same-filled, with the pool's codec, room made already. */
static int store_codec(struct zp_pool *pool, const void *page, zp_entry_t *entry, bool hit)
{
	struct zp_cctx *c;
	zp_handle_t handle = 0;
	zp_entry_t e;
	const void *cdict;
	size_t len;
	bool raw, dict;
	int ret;

	/* Before the context: choosing the dictionary takes one. */
	cdict = pool->opt.codec == ZP_CODEC_ZSTD ? zp_zdict_cdict(pool) : NULL;
	c = zp_cctx_get(pool);
	len = zp_compress(pool, c, page, cdict, &dict);
	raw = len == 0 || len > pool->huge_watermark;
	if (raw && pool->opt.huge_policy == ZP_HUGE_REJECT) {
		zp_cctx_put(c);
		zp_stat_add(pool, st_reject_poor, 1);
		return -E2BIG;
	}
	if (raw)
		len = ZP_PAGE_SIZE;
	ret = store_place(pool, c, raw ? page : c->buf, len, hit, &handle, &e);
	if (ret)
		return ret;

	pool->entry[e].handle = handle;
	pool->entry[e].len = (uint32_t)len;
	pool->entry[e].dict = !raw && dict;
	pool->entry[e].stored_ms = zp_now_ms();
	entry_publish(pool, e, ZE_OBJ);
	pthread_mutex_lock(&pool->lru_lock);
	lru_add_tail(pool, e);
	pthread_mutex_unlock(&pool->lru_lock);

	zp_stat_add(pool, st_stored, 1);
	zp_stat_add(pool, st_orig, ZP_PAGE_SIZE);
	zp_stat_add(pool, st_compr, len);
	if (raw)
		zp_stat_add(pool, st_huge, 1);
	else
		zp_zdict_offer(pool, page, len);
	if (!raw && dict)
		zp_stat_add(pool, st_stored_dict, 1);
	*entry = e;
	return 0;
}

/* A same-filled page as its word; any other, room made, as @how stores it. */
static int store_page(struct zp_pool *pool, const void *page, zp_entry_t *entry,
		      int (*how)(struct zp_pool *, const void *, zp_entry_t *, bool))
{
	uint64_t word;
	bool hit = false;
	int ret;

	if (!page || !entry)
		return -EINVAL;
	if (page_same_filled(page, &word))
		return store_same(pool, word, entry);
	ret = store_room(pool, &hit);
	return ret ? ret : how(pool, page, entry, hit);
}

int zp_store(struct zp_pool *pool, const void *page, zp_entry_t *entry)
{
	return store_page(pool, page, entry, store_codec);
}

/*
 * A page that is not same-filled, with zstd, room made already (store_page
 * for zp_store_dense).  The entry is born as recompression leaves one
 * (ZE_ZOBJ, off the LRU: zp_recompress() never looks at it).  The
 * dictionary is offered the page as after an lz4 store, so that it is
 * still chosen when most stores come here; zstd halves a few pages that
 * lz4 does not, which it then sees too.
 */
static int store_zstd(struct zp_pool *pool, const void *page, zp_entry_t *entry, bool hit)
{
	struct zp_cctx *c;
	zp_handle_t handle = 0;
	zp_entry_t e;
	const void *cdict;
	size_t len;
	bool dict;
	int ret;

	cdict = zp_zdict_cdict(pool);
	c = zp_cctx_get(pool);
	len = zp_compress_zstd(pool, c, page, cdict, &dict);
	if (len == 0 || len > pool->huge_watermark) {
		zp_cctx_put(c);
		return store_codec(pool, page, entry, hit);
	}
	ret = store_place(pool, c, c->buf, len, hit, &handle, &e);
	if (ret)
		return ret;

	pool->entry[e].zhandle = handle;
	pool->entry[e].zlen = (uint32_t)len | (dict ? ZP_ZLEN_DICT : 0);
	pool->entry[e].len = (uint32_t)len;
	pool->entry[e].dict = false;
	pool->entry[e].stored_ms = zp_now_ms();
	entry_publish(pool, e, ZE_ZOBJ);

	zp_stat_add(pool, st_stored, 1);
	zp_stat_add(pool, st_orig, ZP_PAGE_SIZE);
	zp_stat_add(pool, st_compr, len);
	zp_stat_add(pool, st_stored_dense, 1);
	if (dict)
		zp_stat_add(pool, st_stored_dense_dict, 1);
	zp_zdict_offer(pool, page, len);
	*entry = e;
	return 0;
}

int zp_store_dense(struct zp_pool *pool, const void *page, zp_entry_t *entry)
{
	bool dense = pool->opt.recompress && pool->opt.codec == ZP_CODEC_LZ4;

	return store_page(pool, page, entry, dense ? store_zstd : store_codec);
}

int zp_load(struct zp_pool *pool, zp_entry_t e, void *dst)
{
	struct zp_entry *ent;
	uint32_t st;
	int ret = 0;

	if (!entry_in_range(pool, e) || !dst)
		return bad_entry("zp_load", e);
	ent = &pool->entry[e];
	/* Count ourselves in: writeback will not free the object under us. */
	st = atomic_fetch_add_explicit(&ent->state, ZE_LOADER, memory_order_acquire);
	switch (st & ZE_KIND_MASK) {
	case ZE_SAME:
		page_fill(dst, ent->word);
		break;
	case ZE_OBJ: {
		const void *p = zp_obj_read_begin(pool, ent->handle, NULL);

		if (!p)
			ret = -EIO;
		else if (ent->len == ZP_PAGE_SIZE)
			memcpy(dst, p, ZP_PAGE_SIZE);
		else
			ret = zp_decompress(pool, p, ent->len, dst, ent->dict);
		zp_obj_read_end(pool, ent->handle, p);
		break;
	}
	case ZE_ZOBJ: {
		const void *p = zp_obj_read_begin(pool, ent->zhandle, NULL);

		ret = p ? zp_decompress_zstd(pool, p, zp_zlen_bytes(ent->zlen), dst,
					     ent->zlen & ZP_ZLEN_DICT) : -EIO;
		zp_obj_read_end(pool, ent->zhandle, p);
		break;
	}
	case ZE_DISK:
		ret = zp_wb_load(pool, atomic_load_explicit(&ent->offset,
					memory_order_relaxed), ent->len, ent->csum,
				 ent->dict, dst);
		break;
	default:
		ret = bad_entry("zp_load", e);
		break;
	}
	atomic_fetch_sub_explicit(&ent->state, ZE_LOADER, memory_order_release);
	return ret;
}

void zp_load_forked(struct zp_pool *pool, zp_entry_t e)
{
	struct zp_entry *ent;
	uint32_t st;

	if (!entry_in_range(pool, e))
		return;
	ent = &pool->entry[e];
	st = atomic_fetch_and_explicit(&ent->state, ZE_LOADER - 1, memory_order_relaxed);
	if ((st & ZE_KIND_MASK) == ZE_OBJ)
		zp_obj_forget_pins(pool, ent->handle);
	else if ((st & ZE_KIND_MASK) == ZE_ZOBJ)
		zp_obj_forget_pins(pool, ent->zhandle);
}

int zp_invalidate(struct zp_pool *pool, zp_entry_t e)
{
	struct zp_entry *ent;
	bool doomed = false;
	uint32_t kind, len;

	if (!entry_in_range(pool, e))
		return bad_entry("zp_invalidate", e);
	ent = &pool->entry[e];
	kind = atomic_load_explicit(&ent->state, memory_order_acquire) & ZE_KIND_MASK;
	/* Read now: once DOOMED, writeback may free the entry any time. */
	len = ent->len;
	if (kind == ZE_OBJ) {
		/* Writeback moves entries off the LRU and to disk only under
		 * lru_lock: decide under it whether we or writeback free it. */
		uint32_t st;

		pthread_mutex_lock(&pool->lru_lock);
		st = atomic_load_explicit(&ent->state, memory_order_acquire);
		kind = st & ZE_KIND_MASK;
		if (kind == ZE_OBJ && (st & ZE_WB)) {
			atomic_fetch_or_explicit(&ent->state, ZE_DOOMED,
						 memory_order_relaxed);
			doomed = true;
		} else if (kind == ZE_OBJ && !(st & ZE_OFFLRU)) {
			lru_del(pool, e);
		}
		/* Recompression may have switched it meanwhile: its length is zlen. */
		len = kind == ZE_ZOBJ ? zp_zlen_bytes(ent->zlen) : ent->len;
		pthread_mutex_unlock(&pool->lru_lock);
	} else if (kind == ZE_ZOBJ) {
		len = zp_zlen_bytes(ent->zlen);
	}
	switch (kind) {
	case ZE_SAME:
		zp_stat_sub(pool, st_same, 1);
		zp_stat_sub(pool, st_orig, ZP_PAGE_SIZE);
		break;
	case ZE_OBJ:
		zp_stat_sub(pool, st_orig, ZP_PAGE_SIZE);
		zp_stat_sub(pool, st_compr, len);
		if (len == ZP_PAGE_SIZE)
			zp_stat_sub(pool, st_huge, 1);
		zp_stat_sub(pool, st_stored, 1);
		if (doomed)
			return 0;	/* writeback frees it */
		zp_free(pool, ent->handle);
		zp_entry_release(pool, e);
		return 0;
	case ZE_ZOBJ:
		zp_stat_sub(pool, st_orig, ZP_PAGE_SIZE);
		zp_stat_sub(pool, st_compr, len);
		zp_free(pool, ent->zhandle);
		break;
	case ZE_DISK:
		zp_wb_space_free(pool, atomic_load_explicit(&ent->offset,
				 memory_order_relaxed), len);
		zp_stat_sub(pool, st_on_disk, 1);
		break;
	default:
		return bad_entry("zp_invalidate", e);
	}
	zp_stat_sub(pool, st_stored, 1);
	zp_entry_release(pool, e);
	return 0;
}
