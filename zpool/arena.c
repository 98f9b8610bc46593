/*
 * The arena: address space for zspages, handed out in runs of 1..8 pages.
 *
 * The arena and its page descriptors are reserved once (MAP_NORESERVE).
 * A freed run goes back to the OS at once (MADV_DONTNEED: the pool's
 * footprint is what it holds, as zsmalloc frees zspage pages) and its
 * address range onto a free list of runs of its length.  A request takes a
 * run of the exact length, else fresh address space, else splits a longer
 * free run.  Runs are never merged: zspage lengths come from a few class
 * geometries, so exact-length reuse is the common case.
 *
 * The arena asks for transparent huge pages: the pool fills it from the
 * bottom and keeps it dense, and a fault per 2 MB instead of per page made
 * stores 10% faster here (page faults cost about 9,000 cycles a page on
 * these machines, a third of an lz4 compression for each 2.5 objects).
 * Freeing 4 KB pieces of a huge page splits it; the kernel does that.
 * Without THP ("never") the hint is ignored.
 *
 * The pool's limit is enforced here, where every zspage gets its pages:
 * a run is charged to pages_allocated before it is taken, by a
 * compare-and-swap that refuses to pass limit_pages, so the limit holds
 * exactly however many threads allocate at once.
 *
 * Page 0 is never handed out, so a location is never 0.
 */
#include <errno.h>
#include <sys/mman.h>

#include "zp_types.h"

int zp_arena_init(struct zp_pool *pool, size_t bytes)
{
	size_t pages = bytes >> ZP_PAGE_SHIFT;

	if (pages < 16)
		pages = 16;
	if (pages > UINT32_MAX / 2)
		pages = UINT32_MAX / 2;
	pool->arena = zp_map(pages << ZP_PAGE_SHIFT, true);
	pool->desc = zp_map(pages * sizeof(struct zp_zspage), true);
	if (!pool->arena || !pool->desc) {
		zp_arena_destroy(pool);
		return -ENOMEM;
	}
	pool->arena_pages = (uint32_t)pages;
	madvise(pool->arena, pages << ZP_PAGE_SHIFT, MADV_HUGEPAGE);
	pool->arena_top = 1;
	pthread_mutex_init(&pool->arena_lock, NULL);
	return 0;
}

void zp_arena_destroy(struct zp_pool *pool)
{
	zp_unmap(pool->arena, (size_t)pool->arena_pages << ZP_PAGE_SHIFT);
	zp_unmap(pool->desc, (size_t)pool->arena_pages * sizeof(struct zp_zspage));
	pool->arena = NULL;
	pool->desc = NULL;
}

static void run_push(struct zp_pool *pool, uint32_t page, unsigned n)
{
	pool->desc[page].next = pool->free_runs[n];
	pool->desc[page].nr_pages = (uint16_t)n;
	pool->free_runs[n] = page;
}

static uint32_t run_pop(struct zp_pool *pool, unsigned n)
{
	uint32_t page = pool->free_runs[n];

	if (page)
		pool->free_runs[n] = pool->desc[page].next;
	return page;
}

/* Charge @nr_pages to the pool unless that passes its limit. */
static bool limit_charge(struct zp_pool *pool, unsigned nr_pages)
{
	uint64_t cur = atomic_load_explicit(&pool->pages_allocated,
					    memory_order_relaxed);

	do {
		if (cur + nr_pages > pool->limit_pages)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&pool->pages_allocated,
			&cur, cur + nr_pages, memory_order_relaxed,
			memory_order_relaxed));
	return true;
}

/*
 * Take a free run of @nr_pages pages; its first page in *page.  Returns 0,
 * -ENOSPC if the run would take the pool past its limit, or -ENOMEM if
 * the arena is full.
 */
int zp_arena_alloc(struct zp_pool *pool, unsigned nr_pages, uint32_t *pagep)
{
	uint32_t page;

	if (!limit_charge(pool, nr_pages))
		return -ENOSPC;
	pthread_mutex_lock(&pool->arena_lock);
	page = run_pop(pool, nr_pages);
	if (!page && pool->arena_pages - pool->arena_top >= nr_pages) {
		page = pool->arena_top;
		pool->arena_top += nr_pages;
	}
	for (unsigned m = nr_pages + 1; !page && m <= ZP_MAX_PAGES_PER_ZSPAGE; m++) {
		page = run_pop(pool, m);
		if (page)
			run_push(pool, page + nr_pages, m - nr_pages);
	}
	pthread_mutex_unlock(&pool->arena_lock);
	if (!page) {
		atomic_fetch_sub_explicit(&pool->pages_allocated, nr_pages,
					  memory_order_relaxed);
		return -ENOMEM;
	}
	*pagep = page;
	return 0;
}

void zp_arena_free(struct zp_pool *pool, uint32_t page, unsigned nr_pages)
{
	madvise(zp_page_addr(pool, page), (size_t)nr_pages << ZP_PAGE_SHIFT,
		MADV_DONTNEED);
	atomic_fetch_sub_explicit(&pool->pages_allocated, nr_pages,
				  memory_order_relaxed);
	pthread_mutex_lock(&pool->arena_lock);
	run_push(pool, page, nr_pages);
	pthread_mutex_unlock(&pool->arena_lock);
}

unsigned long zp_get_total_pages(struct zp_pool *pool)
{
	return (unsigned long)atomic_load_explicit(&pool->pages_allocated,
						   memory_order_relaxed);
}
