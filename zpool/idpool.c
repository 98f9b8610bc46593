/*
 * Lock-free allocator of small integer ids, for handles and entries.
 *
 * Freed ids go on a Treiber stack whose head carries a tag that changes on
 * every push and pop, so a pop that read a stale link fails its CAS instead
 * of corrupting the stack (the ABA problem).  Ids never handed out come
 * from a bump counter, so the link table is touched only as far as ids
 * were ever used.  Id 0 is never handed out: callers use it as "none".
 */
#include <errno.h>

#include "zp_types.h"

int zp_idpool_init(struct zp_idpool *ip, uint32_t cap)
{
	ip->next = zp_map((size_t)cap * sizeof(*ip->next), true);
	if (!ip->next)
		return -ENOMEM;
	ip->cap = cap;
	atomic_init(&ip->head, 0);
	atomic_init(&ip->top, 1);
	return 0;
}

void zp_idpool_destroy(struct zp_idpool *ip)
{
	zp_unmap((void *)ip->next, (size_t)ip->cap * sizeof(*ip->next));
	ip->next = NULL;
}

/* Returns a free id, or 0 when all cap - 1 ids are in use. */
uint32_t zp_id_alloc(struct zp_idpool *ip)
{
	uint64_t old = atomic_load_explicit(&ip->head, memory_order_acquire);
	uint32_t id, top;

	while ((id = (uint32_t)old) != 0) {
		uint32_t next = atomic_load_explicit(&ip->next[id],
						     memory_order_relaxed);
		uint64_t new = (((old >> 32) + 1) << 32) | next;

		if (atomic_compare_exchange_weak_explicit(&ip->head, &old, new,
				memory_order_acquire, memory_order_acquire))
			return id;
	}
	top = atomic_load_explicit(&ip->top, memory_order_relaxed);
	do {
		if (top >= ip->cap)
			return 0;
	} while (!atomic_compare_exchange_weak_explicit(&ip->top, &top, top + 1,
			memory_order_relaxed, memory_order_relaxed));
	return top;
}

void zp_id_free(struct zp_idpool *ip, uint32_t id)
{
	uint64_t old = atomic_load_explicit(&ip->head, memory_order_relaxed);
	uint64_t new;

	do {
		atomic_store_explicit(&ip->next[id], (uint32_t)old,
				      memory_order_relaxed);
		new = (((old >> 32) + 1) << 32) | id;
	} while (!atomic_compare_exchange_weak_explicit(&ip->head, &old, new,
			memory_order_release, memory_order_relaxed));
}
