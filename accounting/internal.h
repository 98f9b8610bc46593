/*
 * What one file of accounting/ offers another, and nothing outside
 * accounting/ includes: the process's pool of freed bytes (harvest.c) and
 * the limit checks that stocks and charges share (charge.c).
 */
#ifndef CGM_ACCT_INTERNAL_H
#define CGM_ACCT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "cgm/acct.h"

/* Add freed bytes to @p's pool, saturating: the counts come from the shared file. */
void harvest_pool_add(struct cgm_proc *p, uint64_t bytes);

/* Collect the frees of @proc's threads since the last harvest into its pool.  p->lock held. */
void harvest_collect(struct cgm_hier *h, uint32_t proc, struct cgm_proc *p);
void harvest_collect_thread(struct cgm_proc *p, struct cgm_thread_slot *ts);

/* Uncharge the whole pages of @p's pool.  p->lock held. */
void harvest_uncharge(struct cgm_hier *h, struct cgm_proc *p);

/* Is some counter from @group up within @pages (plus a batch) of its max or high? */
bool charge_limit_near(const struct cgm_hier *h, uint32_t group, int64_t pages);

/* What a negative stock lacks, bounded (a scribbled slot may hold INT64_MIN). */
/*
 * charge=resident: the pages a process's sample charges -- its @anon bytes
 * beyond the @held_pages its byte charging holds, a partial page counted
 * whole.  Saturating: a corrupt held count makes it charge nothing.
 */
static inline int64_t sample_pages_beyond(int64_t anon, int64_t held_pages)
{
	int64_t held;

	if (held_pages > INT64_MAX / CGM_PAGE_SIZE)
		return 0;
	held = held_pages > 0 ? held_pages * CGM_PAGE_SIZE : 0;
	return anon > held ? (anon - held + CGM_PAGE_SIZE - 1) / CGM_PAGE_SIZE : 0;
}

/*
 * What a sample charges beyond the held pages (sampled_pages): the anon
 * beyond them, less the spilled pages that they still count (spill=1:
 * spilled pages leave the charge; the pool's own pages are in the anon).
 * Never below -held_pages.
 */
static inline int64_t sample_target(int64_t anon, int64_t held_pages, int64_t spilled_pages)
{
	int64_t credit = spilled_pages > 0 ? spilled_pages : 0;

	if (held_pages < 0)
		held_pages = 0;
	if (credit > held_pages)
		credit = held_pages;
	return sample_pages_beyond(anon, held_pages - credit) - credit;
}

/*
 * A spin flag in the shared file over a few instructions (the PSI and
 * vmpressure transitions): a holder killed inside them (it cannot be for
 * long) is waited out for about a million spins and then ignored.
 */
static inline void shared_spin_lock(uint32_t *flag)
{
	for (unsigned spins = 0; __atomic_exchange_n(flag, 1, __ATOMIC_ACQUIRE); spins++) {
		if (spins > (1u << 20))
			return;
		cgm_cpu_relax();
	}
}

static inline void shared_spin_unlock(uint32_t *flag)
{
	__atomic_store_n(flag, 0, __ATOMIC_RELEASE);
}

static inline int64_t stock_lack(const struct cgm_thread_slot *t)
{
	return t->stock < -(INT64_MAX / 2) ? INT64_MAX / 2 : -t->stock;
}

#endif /* CGM_ACCT_INTERNAL_H */
