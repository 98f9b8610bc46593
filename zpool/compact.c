/*
 * Compaction: move objects out of the emptiest zspages into the fullest,
 * and free the zspages left empty.
 *
 * The compactor holds the class lock while it empties one source zspage,
 * so no object of the class is allocated, freed or moved by anyone else
 * meanwhile; it drops the lock between sources.  It takes a source only if
 * it can isolate it, which needs nobody to pin it: busy zspages are
 * skipped, never waited for (the zspage_lock idea of the 2025 zsmalloc
 * series).  Readers that arrive after isolation may still pin it and read
 * the old copies; a source they pin is freed or put back only when they
 * have left (the deferred list), so its bytes stay valid under them.
 */
#include <string.h>

#include "zp_types.h"

/* Pages that moving objects could free: whole zspages' worth of free
 * slots, as zsmalloc's zs_can_compact. */
uint64_t zp_class_freeable(const struct zp_class *cls)
{
	uint64_t allocated, used;

	if (cls->hdr == 0)
		return 0;
	allocated = __atomic_load_n(&cls->nr_zspages, __ATOMIC_RELAXED) *
		    cls->objs_per_zspage;
	used = __atomic_load_n(&cls->obj_used, __ATOMIC_RELAXED);
	if (used >= allocated)
		return 0;
	return (allocated - used) / cls->objs_per_zspage * cls->pages_per_zspage;
}

/* How far down a fullness list we look for a zspage nobody pins. */
#define ZP_ISOLATE_SCAN	64

/* Isolate the emptiest zspage nobody pins and take it off its list. */
static uint32_t isolate_src(struct zp_pool *pool, struct zp_class *cls)
{
	for (unsigned fg = ZP_FULLNESS_EMPTY + 1; fg <= ZP_FULLNESS_99; fg++) {
		uint32_t page = cls->fullness_list[fg];

		for (unsigned n = 0; page && n < ZP_ISOLATE_SCAN; n++) {
			struct zp_zspage *zs = &pool->desc[page];
			uint32_t expect = ZS_LIVE;

			if (atomic_compare_exchange_strong_explicit(&zs->lock,
					&expect, ZS_LIVE | ZS_ISOLATED,
					memory_order_acquire, memory_order_relaxed)) {
				zp_list_del(cls, pool->desc, page);
				return page;
			}
			page = zs->next;
		}
	}
	return 0;
}

/* Take the fullest zspage that still has room off its list.  Readers may
 * pin it: we only write into its free slots. */
static uint32_t pick_dst(struct zp_pool *pool, struct zp_class *cls)
{
	for (unsigned fg = ZP_FULLNESS_99; fg > ZP_FULLNESS_EMPTY; fg--) {
		uint32_t page = cls->fullness_list[fg];

		if (page) {
			zp_list_del(cls, pool->desc, page);
			return page;
		}
	}
	return 0;
}

/*
 * Move every object of @src into destination zspages; *dstp is the current
 * destination (0: none yet) and is left unlisted for the next source.
 * Returns false if destinations ran out first.
 */
static bool migrate_zspage(struct zp_pool *pool, struct zp_class *cls,
			   uint32_t src, uint32_t *dstp)
{
	struct zp_zspage *zs = &pool->desc[src];
	uint32_t dst = *dstp;

	for (unsigned obj = 0; obj < cls->objs_per_zspage && zs->inuse; obj++) {
		uint32_t hdr = *zp_obj_hdr(pool, cls, src, obj);
		zp_handle_t handle = hdr >> 1;
		unsigned dobj;

		if (!(hdr & ZP_OBJ_ALLOCATED))
			continue;
		if (dst && pool->desc[dst].inuse == cls->objs_per_zspage) {
			zp_zspage_list(pool, cls, dst);
			dst = 0;
		}
		if (!dst)
			dst = pick_dst(pool, cls);
		if (!dst)
			break;
		dobj = zp_obj_alloc(pool, cls, dst, handle);
		memcpy(zp_obj_addr(pool, cls, dst, dobj) + cls->hdr,
		       zp_obj_addr(pool, cls, src, obj) + cls->hdr,
		       cls->size - cls->hdr);
		/* Publish the copy: a reader that sees the new location sees
		 * the bytes.  One that saw the old one reads the old copy,
		 * which stays while it pins the source. */
		atomic_store_explicit(&pool->handle_slot[handle],
				      zp_loc(dst, dobj, cls->index),
				      memory_order_release);
		zp_obj_release(pool, cls, src, obj);
		zp_stat_add(pool, st_moved, 1);
	}
	*dstp = dst;
	return zs->inuse == 0;
}

/* Upper bound on sources per call, so a pathological pool cannot keep a
 * compactor busy forever. */
#define ZP_COMPACT_MAX_SRC	(1u << 20)

/*
 * Compact one class.  Returns the pages freed.  Skips the class if another
 * thread is compacting it.
 */
unsigned long zp_compact_class(struct zp_pool *pool, struct zp_class *cls)
{
	unsigned long freed = 0;
	bool busy = false;

	if (cls->hdr == 0 || !atomic_compare_exchange_strong(&cls->compacting,
							     &busy, true))
		return 0;
	pthread_mutex_lock(&cls->lock);
	freed += zp_drain_deferred(pool, cls);
	for (unsigned n = 0; n < ZP_COMPACT_MAX_SRC && zp_class_freeable(cls); n++) {
		uint32_t src = isolate_src(pool, cls), dst = 0;
		bool emptied;

		if (!src)
			break;
		emptied = migrate_zspage(pool, cls, src, &dst);
		if (dst)
			zp_zspage_list(pool, cls, dst);
		freed += zp_zspage_release(pool, cls, src);
		if (!emptied)
			break;
		/* Let stores and frees of this class in between sources. */
		pthread_mutex_unlock(&cls->lock);
		pthread_mutex_lock(&cls->lock);
	}
	pthread_mutex_unlock(&cls->lock);
	atomic_store(&cls->compacting, false);
	return freed;
}

unsigned long zp_compact(struct zp_pool *pool)
{
	unsigned long freed = 0;

	for (unsigned i = 0; i < ZP_NR_CLASSES; i++)
		if (pool->class_map[i] == i)
			freed += zp_compact_class(pool, &pool->classes[i]);
	return freed;
}
