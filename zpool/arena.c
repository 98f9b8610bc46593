/*
 * The arena: address space for zspages, handed out in runs of 1..8 pages.
 *
 * The arena and its page descriptors are reserved once (MAP_NORESERVE).
 * A freed run goes back to the OS (MADV_DONTNEED: the pool's footprint is
 * what it holds, as zsmalloc frees zspage pages) and its address range
 * onto a free list of runs of its length.  A request takes a run of the
 * exact length (one still pending first, below), else fresh address
 * space, else splits a longer free run.
 * Runs are never merged: zspage lengths come from a few class geometries,
 * so exact-length reuse is the common case.
 *
 * Freed runs go back to the OS ZP_PENDING_RUNS at a time, in one
 * process_madvise(): each MADV_DONTNEED costs a TLB-flush IPI to every
 * CPU the program runs on, 20 us a call on this VM with another thread
 * running, and Linux 6.18 here flushes once for all the ranges of one
 * process_madvise() -- 16 one-page ranges: 300-370 us in 16 madvise()
 * calls, 35-39 us in one process_madvise().  A pool that refaults frees
 * a zspage every few pages.  Until then a freed run is resident but no
 * longer counted in pages_allocated (at most 15 runs, 480 KiB);
 * zp_release_freed() gives them back at once.
 *
 * The arena asks for transparent huge pages above its first
 * ZP_ARENA_SMALL bytes: the pool fills it from the bottom and keeps it
 * dense, and a fault per 2 MB instead of per page made stores 10% faster
 * here (page faults cost about 9,000 cycles a page on these machines, a
 * third of an lz4 compression for each 2.5 objects).  Not below: there a
 * small pool's footprint would be whole huge pages -- git pack-objects
 * under memory.high=7.5M (check-spill-programs) held 5.2 MB resident in
 * the arena for 1 MB of pool, charged to its group as anon, which then
 * could not get under its high and was throttled 25 s of a 27 s run; now
 * 0.6-0.9 s, never throttled.  Below it, fresh arena is populated a
 * chunk at a time (populate_chunk()).  Freeing 4 KB pieces of a huge
 * page splits it; the kernel does that.  Without THP ("never") the hint
 * is ignored.
 *
 * And once runs above ZP_ARENA_SMALL go back to the OS, the arena below
 * its top asks for huge pages no more (MADV_NOHUGEPAGE; fresh arena above
 * the top still does): khugepaged, with max_ptes_none at 511 here,
 * collapses any 2 MB of a huge-page mapping that has a page left in it
 * into a whole huge page again.  A pool of 60,000 pages (103 MB) that
 * shrank to 10 MB held 16 MB of the arena resident, and 95 MB a minute
 * later, all of it huge pages -- charged to the group as anon for a pool
 * that counts 10 (no_huge_from()).  The kernel's own zsmalloc takes
 * single pages.
 *
 * The pool's limit is enforced here, where every zspage gets its pages:
 * a run is charged to pages_allocated before it is taken, by a
 * compare-and-swap that refuses to pass limit_pages, so the limit holds
 * exactly however many threads allocate at once.
 *
 * Page 0 is never handed out, so a location is never 0.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "zp_types.h"

/* The bottom of the arena left to small pages (a multiple of 2 MB; above, THP). */
#define ZP_ARENA_SMALL	((size_t)16 << 20)

int zp_arena_init(struct zp_pool *pool, size_t bytes)
{
	size_t pages = bytes >> ZP_PAGE_SHIFT;

	if (pages < 16)
		pages = 16;
	if (pages > UINT32_MAX / 2)
		pages = UINT32_MAX / 2;
	bytes = pages << ZP_PAGE_SHIFT;
	pool->arena = zp_map(bytes, true);
	pool->desc = zp_map(pages * sizeof(struct zp_zspage), true);
	if (!pool->arena || !pool->desc) {
		zp_arena_destroy(pool);
		return -ENOMEM;
	}
	pool->arena_pages = (uint32_t)pages;
	if (bytes > ZP_ARENA_SMALL)
		madvise((char *)pool->arena + ZP_ARENA_SMALL, bytes - ZP_ARENA_SMALL, MADV_HUGEPAGE);
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
 * A pending run of @nr_pages (freed, not yet given back: still resident),
 * taken off the pending list; 0 if none (arena_lock held).  Reusing it
 * costs no page fault: a fresh page costs the writer a zero-fill fault
 * and, on a VM whose host keeps shadow page tables (PVM here), a trip to
 * the host for the new entry -- zp_zspage_create's first write to a
 * page took 5 us there, as much as compressing a page (perf of
 * bench/spill_bench).  A pool that spills and refaults at once frees
 * and creates zspages of the same classes in turn.
 */
static uint32_t pending_pop(struct zp_pool *pool, unsigned nr_pages)
{
	for (unsigned i = pool->nr_pending; i-- > 0;) {
		uint32_t page = pool->pending[i].page;

		if (pool->pending[i].nr_pages != nr_pages)
			continue;
		pool->pending[i] = pool->pending[pool->nr_pending - 1];
		__atomic_store_n(&pool->nr_pending, pool->nr_pending - 1, __ATOMIC_RELAXED);
		return page;
	}
	return 0;
}

/*
 * Below ZP_ARENA_SMALL, fresh arena is made resident ZP_POPULATE_PAGES at
 * a time, in one system call, as the pool's top reaches each such chunk:
 * a fault a page made stores there 78% of raw lz4's speed instead of 93%
 * (bench-zpool).  A chunk is made resident ahead of the pages the pool
 * counts by 15 pages at most.  Refused once (a kernel before 5.14): the
 * pages fault in as they are written.
 */
#define ZP_POPULATE_PAGES	16
static bool populate_refused;

static void populate_chunk(struct zp_pool *pool, uint32_t first, uint32_t end)
{
	uint32_t chunk = (first + ZP_POPULATE_PAGES - 1) / ZP_POPULATE_PAGES * ZP_POPULATE_PAGES;
	size_t n = ZP_POPULATE_PAGES;

	if (chunk >= end || __atomic_load_n(&populate_refused, __ATOMIC_RELAXED) ||
	    ((size_t)chunk << ZP_PAGE_SHIFT) >= ZP_ARENA_SMALL)
		return;
	if (chunk + n > pool->arena_pages)
		n = pool->arena_pages - chunk;
	if (madvise(zp_page_addr(pool, chunk), n << ZP_PAGE_SHIFT, MADV_POPULATE_WRITE) != 0 &&
	    errno == EINVAL)
		__atomic_store_n(&populate_refused, true, __ATOMIC_RELAXED);
}

/*
 * Take a free run of @nr_pages pages; its first page in *page.  Returns 0,
 * -ENOSPC if the run would take the pool past its limit, or -ENOMEM if
 * the arena is full.
 */
int zp_arena_alloc(struct zp_pool *pool, unsigned nr_pages, uint32_t *pagep)
{
	uint32_t page, fresh = 0;

	if (!limit_charge(pool, nr_pages))
		return -ENOSPC;
	pthread_mutex_lock(&pool->arena_lock);
	page = pending_pop(pool, nr_pages);
	if (!page)
		page = run_pop(pool, nr_pages);
	if (!page && pool->arena_pages - pool->arena_top >= nr_pages) {
		page = fresh = pool->arena_top;
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
	/* (Outside the lock: another thread may take the next run meanwhile and fault.) */
	if (fresh)
		populate_chunk(pool, fresh, fresh + nr_pages);
	*pagep = page;
	return 0;
}

/* The calling process, for process_madvise() (the kernel's PIDFD_SELF): no descriptor to keep. */
#define PIDFD_SELF_PROCESS	(-10000)

/* process_madvise() on ourselves refused once (older kernel, seccomp): madvise() each run. */
static atomic_bool one_call_refused;

/* Give the pages of @runs back to the OS, in one system call where the kernel takes it. */
static void runs_discard(struct zp_pool *pool, const struct zp_run *runs, unsigned n)
{
	struct iovec iov[ZP_PENDING_RUNS];
	long bytes = 0;

	for (unsigned i = 0; i < n; i++) {
		iov[i].iov_base = zp_page_addr(pool, runs[i].page);
		iov[i].iov_len = (size_t)runs[i].nr_pages << ZP_PAGE_SHIFT;
		bytes += (long)iov[i].iov_len;
	}
	if (n > 1 && !atomic_load_explicit(&one_call_refused, memory_order_relaxed)) {
		long done = syscall(SYS_process_madvise, PIDFD_SELF_PROCESS, iov, (size_t)n,
				    MADV_DONTNEED, 0u);

		if (done == bytes)
			return;
		if (done < 0)
			atomic_store_explicit(&one_call_refused, true, memory_order_relaxed);
	}
	/* (A range done already is only done again.) */
	for (unsigned i = 0; i < n; i++)
		madvise(iov[i].iov_base, iov[i].iov_len, MADV_DONTNEED);
}

/*
 * Runs above ZP_ARENA_SMALL went back to the OS: no huge pages below the
 * top from here on (above, the header says why).  One VMA flag change
 * for all the arena used so far, made again only after it has grown:
 * the arena stays at most three mappings (small, no huge pages below the
 * top, huge pages above).  The first page of what is to change, or 0
 * (arena_lock held); it ends at no_huge_top.
 */
static uint32_t no_huge_from(struct zp_pool *pool, const struct zp_run *runs, unsigned n)
{
	uint32_t small = (uint32_t)(ZP_ARENA_SMALL >> ZP_PAGE_SHIFT), from;
	bool above = false;

	for (unsigned i = 0; i < n && !above; i++)
		above = runs[i].page + runs[i].nr_pages > small;
	from = pool->no_huge_top > small ? pool->no_huge_top : small;
	if (!above || pool->arena_top <= from)
		return 0;
	pool->no_huge_top = pool->arena_top;
	return from;
}

/* Discard @runs and put them on the free lists. */
static void runs_release(struct zp_pool *pool, const struct zp_run *runs, unsigned n)
{
	uint32_t from, to;

	runs_discard(pool, runs, n);
	pthread_mutex_lock(&pool->arena_lock);
	for (unsigned i = 0; i < n; i++)
		run_push(pool, runs[i].page, runs[i].nr_pages);
	from = no_huge_from(pool, runs, n);
	to = pool->no_huge_top;
	pthread_mutex_unlock(&pool->arena_lock);
	if (from)
		madvise(zp_page_addr(pool, from), (size_t)(to - from) << ZP_PAGE_SHIFT,
			MADV_NOHUGEPAGE);
}

/* Take the pending runs into @runs (arena_lock held); returns how many. */
static unsigned pending_take(struct zp_pool *pool, struct zp_run *runs)
{
	unsigned n = pool->nr_pending;

	memcpy(runs, pool->pending, n * sizeof(*runs));
	__atomic_store_n(&pool->nr_pending, 0, __ATOMIC_RELAXED);
	return n;
}

void zp_arena_free(struct zp_pool *pool, uint32_t page, unsigned nr_pages)
{
	struct zp_run runs[ZP_PENDING_RUNS];
	unsigned n = 0;

	atomic_fetch_sub_explicit(&pool->pages_allocated, nr_pages,
				  memory_order_relaxed);
	pthread_mutex_lock(&pool->arena_lock);
	pool->pending[pool->nr_pending] = (struct zp_run){ page, nr_pages };
	__atomic_store_n(&pool->nr_pending, pool->nr_pending + 1, __ATOMIC_RELAXED);
	if (pool->nr_pending == ZP_PENDING_RUNS)
		n = pending_take(pool, runs);
	pthread_mutex_unlock(&pool->arena_lock);
	if (n)
		runs_release(pool, runs, n);
}

void zp_release_freed(struct zp_pool *pool)
{
	struct zp_run runs[ZP_PENDING_RUNS];
	unsigned n;

	if (!__atomic_load_n(&pool->nr_pending, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&pool->arena_lock);
	n = pending_take(pool, runs);
	pthread_mutex_unlock(&pool->arena_lock);
	if (n)
		runs_release(pool, runs, n);
}

unsigned long zp_get_total_pages(struct zp_pool *pool)
{
	return (unsigned long)atomic_load_explicit(&pool->pages_allocated,
						   memory_order_relaxed);
}
