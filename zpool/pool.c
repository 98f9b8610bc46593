/*
 * Pool creation and destruction, and the options it is created with.
 *
 * Every table is reserved at creation for the largest pool the options
 * allow (MAP_NORESERVE: only what is touched becomes resident), so nothing
 * is ever resized under concurrent readers.
 */
#include <errno.h>
#include <string.h>

#include <zstd.h>

#include "cgm/log.h"
#include "zp_types.h"

#define ZP_DEFAULT_ARENA	(4ull << 30)
#define ZP_DEFAULT_BACKING_MAX	(16ull << 30)
#define ZP_DEFAULT_BATCH	32u
#define ZP_MAX_BATCH		256u
#define ZP_DEFAULT_COMPACT	30u
#define ZP_MAX_IDS		(1u << 27)

/*
 * Is @level one of zstd's?  1..19 are in every release, and asking
 * libzstd would run its code at pool creation, which a pool that may
 * never use zstd should not (codec.c); only other levels are asked.
 */
static bool zstd_level_ok(int level)
{
	return (level >= 1 && level <= 19) ||
	       (level >= ZSTD_minCLevel() && level <= ZSTD_maxCLevel());
}

/* Fill in defaults and check ranges; -EINVAL names the bad option. */
static int options_resolve(struct zp_options *o)
{
	if (o->codec != ZP_CODEC_LZ4 && o->codec != ZP_CODEC_ZSTD) {
		cgm_log("zpool: codec=%d: expected lz4 or zstd", (int)o->codec);
		return -EINVAL;
	}
	if (o->codec == ZP_CODEC_LZ4) {
		if (o->level == 0)
			o->level = 1;
		if (o->level < 1 || o->level > 65537) {
			cgm_log("zpool: lz4 level %d: expected 1..65537 (acceleration)",
				o->level);
			return -EINVAL;
		}
	} else {
		if (o->level == 0)
			o->level = 3;
		if (!zstd_level_ok(o->level)) {
			cgm_log("zpool: zstd level %d: expected %d..%d", o->level,
				ZSTD_minCLevel(), ZSTD_maxCLevel());
			return -EINVAL;
		}
	}
	if (o->recompress && (o->codec != ZP_CODEC_LZ4 || (o->backing && o->backing[0]))) {
		cgm_log("zpool: recompress: only for an lz4 pool without a backing file");
		return -EINVAL;
	}
	if (o->recompress_level == 0)
		o->recompress_level = 3;
	if (o->recompress && !zstd_level_ok(o->recompress_level)) {
		cgm_log("zpool: recompress level %d: expected %d..%d", o->recompress_level,
			ZSTD_minCLevel(), ZSTD_maxCLevel());
		return -EINVAL;
	}
	if (o->huge_policy != ZP_HUGE_RAW && o->huge_policy != ZP_HUGE_REJECT) {
		cgm_log("zpool: huge policy %d: expected raw or reject",
			(int)o->huge_policy);
		return -EINVAL;
	}
	if (o->huge_watermark > ZP_PAGE_SIZE) {
		cgm_log("zpool: huge watermark %zu: expected at most %u",
			o->huge_watermark, ZP_PAGE_SIZE);
		return -EINVAL;
	}
	if (o->wb_batch > ZP_MAX_BATCH) {
		cgm_log("zpool: writeback batch %u: expected at most %u",
			o->wb_batch, ZP_MAX_BATCH);
		return -EINVAL;
	}
	if (o->wb_batch == 0)
		o->wb_batch = ZP_DEFAULT_BATCH;
	if (o->compact_threshold == 0)
		o->compact_threshold = ZP_DEFAULT_COMPACT;
	if (o->arena_bytes == 0)
		o->arena_bytes = o->max_bytes * 2 > ZP_DEFAULT_ARENA ?
				 o->max_bytes * 2 : ZP_DEFAULT_ARENA;
	if (o->backing_max == 0)
		o->backing_max = ZP_DEFAULT_BACKING_MAX;
	if (o->backing && strlen(o->backing) >= sizeof(((struct zp_pool *)0)->backing_path)) {
		cgm_log("zpool: zpool_backing: path too long");
		return -EINVAL;
	}
	return 0;
}

static int id_table_init(struct zp_idpool *ip, void **table, size_t entry_size,
			 uint32_t cap)
{
	*table = zp_map((size_t)cap * entry_size, true);
	ip->cap = cap;
	if (!*table)
		return -ENOMEM;
	return zp_idpool_init(ip, cap);
}

int zp_create_pool(const struct zp_options *opt, struct zp_pool **poolp)
{
	struct zp_options o = { 0 };
	struct zp_pool *pool;
	uint64_t cap;
	int ret;

	if (opt)
		o = *opt;
	ret = options_resolve(&o);
	if (ret)
		return ret;
	pool = zp_map(sizeof(*pool), false);
	if (!pool)
		return -ENOMEM;
	pool->opt = o;
	if (o.backing && o.backing[0]) {
		memcpy(pool->backing_path, o.backing, strlen(o.backing) + 1);
		pool->opt.backing = pool->backing_path;
	} else {
		pool->opt.backing = NULL;
	}
	/* Whole pages: a limit between two page counts holds at the lower. */
	pool->limit_pages = o.max_bytes ? o.max_bytes / ZP_PAGE_SIZE : UINT64_MAX;
	pthread_mutex_init(&pool->lru_lock, NULL);
	zp_classes_init(pool);
	pool->huge_watermark = o.huge_watermark ? o.huge_watermark :
			       zp_huge_class_size(pool) - 1;

	ret = zp_arena_init(pool, o.arena_bytes);
	if (ret)
		goto fail;
	/* At most 32 objects per page on average: tiny objects are rare. */
	cap = (uint64_t)pool->arena_pages * 32;
	if (cap > ZP_MAX_IDS)
		cap = ZP_MAX_IDS;
	ret = id_table_init(&pool->handles, (void **)&pool->handle_slot,
			    sizeof(*pool->handle_slot), (uint32_t)cap);
	if (!ret)
		ret = id_table_init(&pool->entries, (void **)&pool->entry,
				    sizeof(*pool->entry), (uint32_t)cap);
	if (!ret)
		ret = zp_codec_init(pool);
	if (!ret && pool->opt.backing)
		ret = zp_wb_init(pool);
	if (ret)
		goto fail;
	*poolp = pool;
	return 0;
fail:
	zp_destroy_pool(pool);
	return ret;
}

void zp_destroy_pool(struct zp_pool *pool)
{
	if (!pool)
		return;
	zp_wb_destroy(pool);
	zp_codec_destroy(pool);
	if (pool->entry) {
		zp_unmap(pool->entry, (size_t)pool->entries.cap * sizeof(*pool->entry));
		zp_idpool_destroy(&pool->entries);
	}
	if (pool->handle_slot) {
		zp_unmap(pool->handle_slot,
			 (size_t)pool->handles.cap * sizeof(*pool->handle_slot));
		zp_idpool_destroy(&pool->handles);
	}
	zp_arena_destroy(pool);
	zp_unmap(pool, sizeof(*pool));
}

void zp_pool_forked(struct zp_pool *pool)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

	if (!pool)
		return;
	pool->arena_lock = pool->lru_lock = fresh;
	for (unsigned i = 0; i < ZP_NR_ALL_CLASSES; i++)
		pool->classes[i].lock = fresh;
	for (unsigned i = 0; pool->ctx && i < ZP_NR_CTX; i++)
		pool->ctx[i].lock = fresh;
	pool->zdict.lock = fresh;
	pool->zstd_lock = fresh;
}
