/*
 * zspages: creation and release, fullness groups, objects within a zspage.
 *
 * Every function here except zp_zspage_create runs under the class lock.
 *
 * A zspage is on at most one list of its class: the fullness list of its
 * group while allocations may use it, or the deferred list while it waits
 * for pinned readers to leave (see zp_drain_deferred).  Compaction takes a
 * zspage off every list while it owns it.
 */
#include "zp_types.h"

static unsigned fullness_group(const struct zp_class *cls, unsigned inuse)
{
	if (inuse == 0)
		return ZP_FULLNESS_EMPTY;
	if (inuse == cls->objs_per_zspage)
		return ZP_FULLNESS_FULL;
	/* 1 object of 127 is 0% by integer division but belongs in 1-10%. */
	return 100 * inuse / cls->objs_per_zspage / 10 + 1;
}

static void list_add(struct zp_zspage *desc, uint32_t *head, uint32_t page)
{
	struct zp_zspage *zs = &desc[page];

	zs->prev = 0;
	zs->next = *head;
	if (*head)
		desc[*head].prev = page;
	*head = page;
}

static void list_unlink(struct zp_zspage *desc, uint32_t *head, uint32_t page)
{
	struct zp_zspage *zs = &desc[page];

	if (zs->prev)
		desc[zs->prev].next = zs->next;
	else
		*head = zs->next;
	if (zs->next)
		desc[zs->next].prev = zs->prev;
	zs->prev = zs->next = 0;
}

/* Take the zspage off whatever list it is on. */
void zp_list_del(struct zp_class *cls, struct zp_zspage *desc, uint32_t page)
{
	struct zp_zspage *zs = &desc[page];

	if (zs->flags & ZS_F_LISTED)
		list_unlink(desc, &cls->fullness_list[zs->fullness], page);
	else if (zs->flags & ZS_F_DEFERRED)
		list_unlink(desc, &cls->deferred, page);
	zs->flags &= (uint8_t)~(ZS_F_LISTED | ZS_F_DEFERRED);
}

/* Recompute the zspage's group; move it between lists if it is listed. */
void zp_fix_fullness(struct zp_class *cls, struct zp_zspage *zs,
		     uint32_t page, struct zp_zspage *desc)
{
	unsigned fg = fullness_group(cls, zs->inuse);

	if (fg == zs->fullness)
		return;
	cls->fullness_count[zs->fullness]--;
	cls->fullness_count[fg]++;
	if (zs->flags & ZS_F_LISTED) {
		list_unlink(desc, &cls->fullness_list[zs->fullness], page);
		list_add(desc, &cls->fullness_list[fg], page);
	}
	zs->fullness = (uint8_t)fg;
}

/* Put an unlisted zspage on the list of its group. */
void zp_zspage_list(struct zp_pool *pool, struct zp_class *cls,
			  uint32_t page)
{
	struct zp_zspage *zs = &pool->desc[page];

	list_add(pool->desc, &cls->fullness_list[zs->fullness], page);
	zs->flags |= ZS_F_LISTED;
}

/*
 * Map a new zspage for @cls, its objects all free, and make it LIVE.
 * Called without the class lock (the arena has its own, and a fresh zspage
 * is nobody else's yet); zp_zspage_insert then lists it under the lock.
 * Returns 0 and the first page in *pagep, or zp_arena_alloc's -ENOSPC
 * (past the pool's limit) or -ENOMEM.
 */
int zp_zspage_create(struct zp_pool *pool, struct zp_class *cls,
		     uint32_t *pagep)
{
	unsigned n = cls->pages_per_zspage;
	struct zp_zspage *zs;
	uint32_t page;
	int ret = zp_arena_alloc(pool, n, &page);

	if (ret)
		return ret;
	for (unsigned i = 0; i < n; i++)
		pool->desc[page + i].head = page;
	zs = &pool->desc[page];
	zs->class_idx = (uint16_t)cls->index;
	zs->nr_pages = (uint16_t)n;
	zs->inuse = 0;
	zs->fullness = ZP_FULLNESS_EMPTY;
	zs->flags = 0;
	zs->prev = zs->next = 0;
	zs->huge_handle = 0;
	if (cls->hdr) {
		/* Link every object into the free list through its header. */
		for (unsigned i = 0; i < cls->objs_per_zspage; i++) {
			unsigned next = i + 1 < cls->objs_per_zspage ? i + 1 : ZP_NO_OBJ;

			*zp_obj_hdr(pool, cls, page, i) = next << 1;
		}
	}
	zs->freeobj = 0;
	/*
	 * Add LIVE rather than store it: a reader holding a stale location of
	 * an earlier zspage at this page may have a transient pin in the
	 * count, which it will take back.
	 */
	atomic_fetch_add_explicit(&zs->lock, ZS_LIVE, memory_order_release);
	*pagep = page;
	return 0;
}

/* Account a created zspage to its class and list it (class lock held). */
void zp_zspage_insert(struct zp_pool *pool, struct zp_class *cls, uint32_t page)
{
	__atomic_fetch_add(&cls->nr_zspages, 1, __ATOMIC_RELAXED);
	cls->fullness_count[ZP_FULLNESS_EMPTY]++;
	zp_zspage_list(pool, cls, page);
}

/*
 * Try to settle a zspage that is off every list: free it if it is empty,
 * else put it back on its fullness list; either needs nobody to pin it.
 * @expect is the lock word it must hold with no pins (LIVE, plus ISOLATED
 * if compaction owned it).  Returns false if a pin is present, else the
 * pages freed (that compaction freed, counted in pages_compacted) in *freed.
 */
static bool zspage_settle(struct zp_pool *pool, struct zp_class *cls,
			  uint32_t page, uint32_t expect, unsigned *freed)
{
	struct zp_zspage *zs = &pool->desc[page];
	unsigned n = zs->nr_pages;

	*freed = 0;
	if (zs->inuse == 0) {
		if (!atomic_compare_exchange_strong_explicit(&zs->lock, &expect, 0,
				memory_order_acq_rel, memory_order_relaxed))
			return false;
		cls->fullness_count[zs->fullness]--;
		__atomic_fetch_sub(&cls->nr_zspages, 1, __ATOMIC_RELAXED);
		zs->flags = 0;
		zp_arena_free(pool, page, n);
		if (expect & ZS_ISOLATED) {
			zp_stat_add(pool, st_compacted, n);
			*freed = n;
		}
		return true;
	}
	if (!atomic_compare_exchange_strong_explicit(&zs->lock, &expect, ZS_LIVE,
			memory_order_acq_rel, memory_order_relaxed))
		return false;
	zp_zspage_list(pool, cls, page);
	return true;
}

/*
 * Settle an unlisted zspage now, or defer it until its readers leave.
 * Returns the pages compaction freed.  The pins that can delay it are
 * readers that reached the zspage while compaction owned it, or readers
 * holding a stale location for an instant.
 */
unsigned zp_zspage_release(struct zp_pool *pool, struct zp_class *cls,
			   uint32_t page)
{
	struct zp_zspage *zs = &pool->desc[page];
	uint32_t expect = atomic_load_explicit(&zs->lock, memory_order_relaxed) &
			  (ZS_LIVE | ZS_ISOLATED);
	unsigned freed;

	if (!zspage_settle(pool, cls, page, expect, &freed))
		zp_defer(cls, pool->desc, page);
	return freed;
}

void zp_defer(struct zp_class *cls, struct zp_zspage *desc, uint32_t page)
{
	list_add(desc, &cls->deferred, page);
	desc[page].flags |= ZS_F_DEFERRED;
}

/* Settle every deferred zspage whose readers have left; returns the
 * pages compaction freed. */
unsigned zp_drain_deferred(struct zp_pool *pool, struct zp_class *cls)
{
	uint32_t page = cls->deferred;
	unsigned total = 0;

	while (page) {
		uint32_t next = pool->desc[page].next;

		zp_list_del(cls, pool->desc, page);
		total += zp_zspage_release(pool, cls, page);
		page = next;
	}
	return total;
}

/* Take a free object of a zspage for @handle; returns its index. */
unsigned zp_obj_alloc(struct zp_pool *pool, struct zp_class *cls,
		      uint32_t page, zp_handle_t handle)
{
	struct zp_zspage *zs = &pool->desc[page];
	unsigned obj = zs->freeobj;

	if (cls->hdr) {
		uint32_t *hdr = zp_obj_hdr(pool, cls, page, obj);

		zs->freeobj = (uint16_t)(*hdr >> 1);
		*hdr = (handle << 1) | ZP_OBJ_ALLOCATED;
	} else {
		zs->freeobj = ZP_NO_OBJ;
		zs->huge_handle = handle;
	}
	zs->inuse++;
	__atomic_fetch_add(&cls->obj_used, 1, __ATOMIC_RELAXED);
	zp_fix_fullness(cls, zs, page, pool->desc);
	return obj;
}

/* Return an object to its zspage's free list. */
void zp_obj_release(struct zp_pool *pool, struct zp_class *cls,
		    uint32_t page, unsigned obj)
{
	struct zp_zspage *zs = &pool->desc[page];

	if (cls->hdr)
		*zp_obj_hdr(pool, cls, page, obj) = (uint32_t)zs->freeobj << 1;
	else
		zs->huge_handle = 0;
	zs->freeobj = (uint16_t)obj;
	zs->inuse--;
	__atomic_fetch_sub(&cls->obj_used, 1, __ATOMIC_RELAXED);
	zp_fix_fullness(cls, zs, page, pool->desc);
}
