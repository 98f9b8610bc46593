/*
 * Moving this process to another group, and the careful paths its threads
 * take while the move is in progress (the kernel's 2012 memcg_moving idea:
 * page statistics take the memcg's move_lock only while a charge is being
 * moved, and skip it otherwise).
 *
 * A move that another process asked for is carried out by the first of
 * this process's threads to look at the epoch in an allocation slow path
 * (shim/epoch.c).  It switches cgm_moving_key on, moves the charge and
 * the statistics under the process's lock (acct_move), and switches the
 * key off.  malloc, calloc and free share one site with the accounting
 * key (static_branch_unlikely_refined): the site jumps to the usual
 * accounted fast path, or, while the moving key is on as well, to the
 * careful versions below, which update the thread's counters under the
 * same process lock that the move holds while it switches groups.  So an
 * allocation or a free that starts after the key is on is counted wholly
 * before or wholly after the switch.  One that was already past the site
 * when the key came on (a few instructions) is not held back: it lands on
 * one side or the other, as without the key; nothing is lost either way,
 * because the move carries every page the process holds.
 *
 * Off, the key costs nothing: the site was already there for accounting.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>

#include "cgm/accounted.h"
#include "cgm/clock.h"
#include "cgm/log.h"
#include "cgm/shim.h"

DEFINE_STATIC_KEY_FALSE(cgm_moving_key);

/* Allocations and frees that took the careful path, in this process. */
static atomic_ullong careful_ops;
/* Careful paths under way: a move's report waits for them (see cgm_move_self). */
static atomic_uint careful_inside;

static unsigned long long careful_count(void)
{
	return atomic_load_explicit(&careful_ops, memory_order_relaxed);
}

/*
 * The careful path's lock: the process's, which acct_move() holds while it
 * switches groups.  Also taken by cgm_careful_begin() (accounted.h) in the
 * slow paths.  NULL, and nothing held, without a process slot.
 */
struct cgm_proc *cgm_careful_lock(void)
{
	struct cgm_proc *p = hier_proc(&cgm_acct.h, cgm_acct.proc);

	atomic_fetch_add_explicit(&careful_ops, 1, memory_order_relaxed);
	if (p)
		hier_lock(&p->lock);
	return p;
}

void cgm_careful_unlock(struct cgm_proc *p)
{
	if (p)
		hier_unlock(&p->lock);
}

void *cgm_acct_malloc_careful(size_t n, bool zero)
{
	struct cgm_proc *p;
	unsigned int bin;
	bool took;

	/* Above the small sizes the slow path charges under the same lock. */
	if (n > CGM_SMALL_MAX)
		return cgm_acct_alloc_slow(n, 0, zero);
	atomic_fetch_add_explicit(&careful_inside, 1, memory_order_relaxed);
	bin = cgm_bin_of(n);
	p = cgm_careful_lock();
	took = cgm_owner_add(cgm_tslot->allow[bin], -1) >= 0;
	cgm_careful_unlock(p);
	atomic_fetch_sub_explicit(&careful_inside, 1, memory_order_release);
	/* The refill path charges under the lock itself: not held here. */
	if (!took)
		return cgm_acct_refill(n, zero);
	return zero ? mi_zalloc(n) : mi_malloc(n);
}

void cgm_acct_free_careful(void *ptr)
{
	struct cgm_proc *p;
	uint32_t size;

	if (ptr == NULL)
		return;
	atomic_fetch_add_explicit(&careful_inside, 1, memory_order_relaxed);
	size = mi209_slice_block_size(ptr);
	p = cgm_careful_lock();
	if (size - 8 > CGM_SMALL_MAX - 8)
		cgm_acct_count_big_free(ptr);
	else
		cgm_count_small_free(size);
	cgm_careful_unlock(p);
	atomic_fetch_sub_explicit(&careful_inside, 1, memory_order_release);
	mi_free(ptr);
}

int cgm_move_self(uint32_t to)
{
	unsigned long long before = careful_count();
	int64_t start = cgm_now_ns();
	int err;

	static_branch_enable(&cgm_moving_key);
	err = acct_move(&cgm_acct.h, cgm_acct.proc, to);
	static_branch_disable(&cgm_moving_key);
	/* "in all" lets a test see that nothing went careful between moves. */
	if (cgm_conf.verbose) {
		char path[CGM_PATH_MAX];
		unsigned long long after;

		/*
		 * A thread that saw the key on before it went off may still be
		 * in a careful path: it belongs to this move's count, not to
		 * the time between moves.  (Only for the report: bounded.)
		 */
		for (int i = 0; i < 10000 &&
		     atomic_load_explicit(&careful_inside, memory_order_acquire); i++)
			sched_yield();
		after = careful_count();
		if (group_path(&cgm_acct.h, to, path, sizeof(path)) < 0)
			snprintf(path, sizeof(path), "#%u", to);
		cgm_log("accounting: move to group %s %s; moving key on for %lld us; "
			"careful path: %llu allocations and frees during the move, %llu in all",
			path, err ? "refused" : "done", (long long)(cgm_now_ns() - start) / 1000,
			after - before, after);
	}
	return err;
}

/*
 * In the child of fork(): a move of the parent's was in progress.  The
 * child has a slot of its own and no move to finish.  The static keys'
 * own fork handler, registered first, has released the patch lock.
 */
void cgm_moving_fork_child(void)
{
	if (static_key_enabled(&cgm_moving_key))
		static_branch_disable(&cgm_moving_key);
}
