/*
 * The object API: zp_malloc, zp_free, zp_obj_write, zp_obj_read_begin/end.
 *
 * Readers pin the zspage that holds the object (one fetch_add on its lock
 * word) and then check that the handle still points there: if compaction
 * moved the object in between, they follow it.  A pinned zspage is never
 * freed or handed to new objects, so the bytes under a reader stay put
 * even when compaction copies them elsewhere.  No reader ever waits and
 * no pool-wide lock is taken.
 *
 * Writers pin the same way but must also keep compaction from copying the
 * object while they write it, so they refuse a zspage that compaction
 * isolated and wait for it to be put back (stores may wait, loads never).
 */
#include <errno.h>
#include <string.h>

#include "cgm/log.h"
#include "zp_types.h"

static int zp_bad_handle_logged;

static CGM_COLD void bad_handle(const char *op, zp_handle_t handle)
{
	cgm_log_once(&zp_bad_handle_logged,
		     "zpool: %s: invalid or freed handle %u (ignored)", op, handle);
}

bool zp_handle_valid(struct zp_pool *pool, zp_handle_t handle)
{
	return handle != 0 && handle < pool->handles.cap &&
	       atomic_load_explicit(&pool->handle_slot[handle],
				    memory_order_relaxed) != 0;
}

uint64_t zp_handle_loc(struct zp_pool *pool, zp_handle_t handle)
{
	return atomic_load_explicit(&pool->handle_slot[handle],
				    memory_order_acquire);
}

/*
 * Pin the zspage holding @handle's object.  Returns its location, or 0 for
 * a bad handle.  @write: refuse zspages that compaction isolated.
 */
static uint64_t obj_pin(struct zp_pool *pool, zp_handle_t handle, bool write)
{
	uint32_t refuse = write ? ZS_ISOLATED : 0;

	if (handle == 0 || handle >= pool->handles.cap)
		return 0;
	for (;;) {
		uint64_t loc = zp_handle_loc(pool, handle);
		struct zp_zspage *zs;
		uint32_t old;

		if (loc == 0)
			return 0;
		zs = &pool->desc[zp_loc_page(loc)];
		old = atomic_fetch_add_explicit(&zs->lock, 1, memory_order_acquire);
		if ((old & ZS_LIVE) && !(old & refuse) &&
		    zp_handle_loc(pool, handle) == loc)
			return loc;
		atomic_fetch_sub_explicit(&zs->lock, 1, memory_order_release);
		if (old & refuse) {
			/* Compaction holds it, or a reader delays its return:
			 * help the deferred list along under the class lock. */
			struct zp_class *cls = &pool->classes[zp_loc_class(loc)];

			pthread_mutex_lock(&cls->lock);
			zp_drain_deferred(pool, cls);
			pthread_mutex_unlock(&cls->lock);
		}
	}
}

static void obj_unpin(struct zp_pool *pool, const void *ptr)
{
	size_t off = (size_t)((const char *)ptr - pool->arena);
	struct zp_zspage *zs = &pool->desc[pool->desc[off >> ZP_PAGE_SHIFT].head];

	/* Release: our reads of the object happen before the zspage can be
	 * reused by whoever next finds it unpinned. */
	atomic_fetch_sub_explicit(&zs->lock, 1, memory_order_release);
}

static char *loc_data(struct zp_pool *pool, uint64_t loc)
{
	struct zp_class *cls = &pool->classes[zp_loc_class(loc)];

	return zp_obj_addr(pool, cls, zp_loc_page(loc), zp_loc_obj(loc)) +
	       cls->hdr;
}

/* No zspage of @cls has room: an empty one, else a new one (class lock
 * held, dropped while mapping).  Returns 0 and the page, or -errno. */
static CGM_NOINLINE int zspage_get_slow(struct zp_pool *pool,
					struct zp_class *cls, uint32_t *pagep)
{
	int ret;

	zp_drain_deferred(pool, cls);
	*pagep = cls->fullness_list[ZP_FULLNESS_EMPTY];
	if (*pagep)
		return 0;
	/* Map outside the class lock; another thread may fill in meanwhile. */
	pthread_mutex_unlock(&cls->lock);
	ret = zp_zspage_create(pool, cls, pagep);
	pthread_mutex_lock(&cls->lock);
	if (ret == 0)
		zp_zspage_insert(pool, cls, *pagep);
	return ret;
}

/*
 * zp_malloc, saying why it failed: allocate an object of @size bytes and
 * set *handlep.  Returns 0, -EINVAL for a size out of range, -ENOSPC if
 * the object needs a new zspage that would take the pool past its limit,
 * or -ENOMEM (no handle, or the arena is full).
 */
int zp_obj_malloc(struct zp_pool *pool, size_t size, zp_handle_t *handlep)
{
	struct zp_class *cls;
	zp_handle_t handle;
	uint32_t page = 0;
	unsigned obj;
	int ret;

	if (size == 0 || size > ZP_PAGE_SIZE)
		return -EINVAL;
	cls = zp_size_class(pool, size);
	handle = zp_id_alloc(&pool->handles);
	if (!handle)
		return -ENOMEM;
	pthread_mutex_lock(&cls->lock);
	/* The fullest zspage that has room keeps the others emptiable. */
	for (int fg = ZP_FULLNESS_99; fg > ZP_FULLNESS_EMPTY && !page; fg--)
		page = cls->fullness_list[fg];
	if (!page) {
		ret = zspage_get_slow(pool, cls, &page);
		if (ret) {
			pthread_mutex_unlock(&cls->lock);
			zp_id_free(&pool->handles, handle);
			return ret;
		}
	}
	obj = zp_obj_alloc(pool, cls, page, handle);
	atomic_store_explicit(&pool->handle_slot[handle],
			      zp_loc(page, obj, cls->index), memory_order_release);
	pthread_mutex_unlock(&cls->lock);
	*handlep = handle;
	return 0;
}

zp_handle_t zp_malloc(struct zp_pool *pool, size_t size)
{
	zp_handle_t handle;

	return zp_obj_malloc(pool, size, &handle) ? 0 : handle;
}

int zp_free(struct zp_pool *pool, zp_handle_t handle)
{
	struct zp_class *cls;
	struct zp_zspage *zs;
	uint64_t loc;
	uint32_t page;

	if (!zp_handle_valid(pool, handle)) {
		bad_handle("zp_free", handle);
		return -EINVAL;
	}
	/* The class of a live object never changes, only its zspage does;
	 * under the class lock compaction cannot move it. */
	cls = &pool->classes[zp_loc_class(zp_handle_loc(pool, handle))];
	pthread_mutex_lock(&cls->lock);
	loc = zp_handle_loc(pool, handle);
	if (loc == 0) {
		pthread_mutex_unlock(&cls->lock);
		bad_handle("zp_free", handle);
		return -EINVAL;
	}
	atomic_store_explicit(&pool->handle_slot[handle], 0, memory_order_relaxed);
	page = zp_loc_page(loc);
	zs = &pool->desc[page];
	zp_obj_release(pool, cls, page, zp_loc_obj(loc));
	if (zs->inuse == 0 && (zs->flags & ZS_F_LISTED)) {
		zp_list_del(cls, pool->desc, page);
		zp_zspage_release(pool, cls, page);
	}
	pthread_mutex_unlock(&cls->lock);
	zp_id_free(&pool->handles, handle);
	zp_class_maybe_compact(pool, cls);
	return 0;
}

int zp_obj_write(struct zp_pool *pool, zp_handle_t handle, const void *buf,
		 size_t len)
{
	uint64_t loc = obj_pin(pool, handle, true);
	char *dst;

	if (!loc) {
		bad_handle("zp_obj_write", handle);
		return -EINVAL;
	}
	dst = loc_data(pool, loc);
	if (len > pool->classes[zp_loc_class(loc)].size -
		  pool->classes[zp_loc_class(loc)].hdr) {
		obj_unpin(pool, dst);
		return -EINVAL;
	}
	memcpy(dst, buf, len);
	obj_unpin(pool, dst);
	return 0;
}

const void *zp_obj_read_begin(struct zp_pool *pool, zp_handle_t handle,
			      void *local_copy)
{
	uint64_t loc = obj_pin(pool, handle, false);

	(void)local_copy;
	if (!loc) {
		bad_handle("zp_obj_read_begin", handle);
		return NULL;
	}
	return loc_data(pool, loc);
}

void zp_obj_read_end(struct zp_pool *pool, zp_handle_t handle, const void *ptr)
{
	(void)handle;
	if (ptr)
		obj_unpin(pool, ptr);
}

/*
 * In a child of fork(): the pins on the zspage of @handle are a parent's
 * thread's, copied with the address space while it read (the child has
 * no reader).  Left, the zspage could never be compacted, nor freed once
 * empty.  Nothing can move the object in the child before this runs.
 */
void zp_obj_forget_pins(struct zp_pool *pool, zp_handle_t handle)
{
	uint64_t loc = zp_handle_valid(pool, handle) ? zp_handle_loc(pool, handle) : 0;

	if (loc)
		atomic_fetch_and_explicit(&pool->desc[zp_loc_page(loc)].lock, ~ZS_PIN_MASK,
					  memory_order_relaxed);
}

size_t zp_obj_size(struct zp_pool *pool, zp_handle_t handle)
{
	struct zp_class *cls;

	if (!zp_handle_valid(pool, handle))
		return 0;
	cls = &pool->classes[zp_loc_class(zp_handle_loc(pool, handle))];
	return cls->size - cls->hdr;
}

/*
 * Compact @cls if the share of its object slots that are free passed the
 * threshold and at least two zspages' worth could be freed.  Only one
 * thread compacts a class at a time; the others go on.
 */
void zp_class_maybe_compact(struct zp_pool *pool, struct zp_class *cls)
{
	unsigned pct = pool->opt.compact_threshold;
	uint64_t allocated, used;

	if (pct >= 100 || cls->hdr == 0)
		return;
	/* Unlocked reads: a stale figure only shifts when we compact. */
	allocated = __atomic_load_n(&cls->nr_zspages, __ATOMIC_RELAXED) *
		    cls->objs_per_zspage;
	used = __atomic_load_n(&cls->obj_used, __ATOMIC_RELAXED);
	if (allocated - used < 2ull * cls->objs_per_zspage ||
	    (allocated - used) * 100 < allocated * pct)
		return;
	zp_compact_class(pool, cls);
}
