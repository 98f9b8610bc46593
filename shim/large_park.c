/*
 * A freed large block that should leave memory, held back a moment in
 * case the thread allocates another large block at once.
 *
 * charge=resident gives a large block back to the system as it is freed
 * when it is larger than any freed before (accounted.c, glibc's dynamic
 * mmap threshold): a lone 16 MiB block freed by an idle program must
 * leave its charge.  Purged at once, though, it cost the program that
 * frees and allocates large blocks in turn every page of the next one
 * faulted in anew (bench/large: 6,450 faults more than mimalloc alone,
 * 1.15 times its time, all of them after the purges of two such blocks).
 *
 * So the block is parked: still allocated as far as mimalloc knows, not
 * live as far as the accounting knows (its free was counted; resident, it
 * is heap_free, as what mimalloc keeps is).  The thread's next large
 * allocation hands it to mimalloc with the usual delays, and the
 * allocation reuses its pages; otherwise it is purged at the first of the
 * thread's slow paths that reads the clock (every 16th, and any large
 * block's; shim/resident.c) PARK_NS after it was parked, at a reclaim by the thread
 * (memory.reclaim, pressure), near a limit, and when the thread exits.
 *
 * One block per thread, in a thread-local word changed only by exchange:
 * a signal handler's free or malloc in between takes or leaves the whole
 * block, never half of it.  A thread that does not reach a slow path
 * again keeps its block: that is the price, at most the largest block
 * the thread freed, and it is what mimalloc does with every block it
 * keeps.  A forked child inherits the forking thread's block, a live
 * mimalloc block in its copy, and releases it as the parent would.
 */
#include <mimalloc.h>
#include <stddef.h>
#include <stdint.h>

#include "cgm/clock.h"
#include "cgm/shim.h"

/* mimalloc's decommit delay for spans (25 ms), and a little. */
#define PARK_NS (30 * 1000000LL)

static CGM_TLS void *parked;
static CGM_TLS int64_t parked_ns;

void cgm_park_large(void *p)
{
	void *old;

	parked_ns = cgm_now_ns();
	old = __atomic_exchange_n(&parked, p, __ATOMIC_RELAXED);
	/* The older one goes the way of every other large block. */
	if (old)
		mi_free(old);
}

/* The thread's parked block, now no longer parked; NULL if none. */
static void *unpark(void)
{
	if (!__atomic_load_n(&parked, __ATOMIC_RELAXED))
		return NULL;
	return __atomic_exchange_n(&parked, NULL, __ATOMIC_RELAXED);
}

void cgm_park_release(void)
{
	void *p = unpark();

	if (p)
		mi_free(p);
}

void cgm_park_purge(void)
{
	void *p = unpark();

	if (p)
		cgm_mi_free_now(p);
}

void cgm_park_settle(int64_t now_ns)
{
	if (__atomic_load_n(&parked, __ATOMIC_RELAXED) && now_ns - parked_ns >= PARK_NS)
		cgm_park_purge();
}
