/*
 * What other processes change in the shared hierarchy -- limits, a move
 * of this process -- reaches it without a thread of its own: every change
 * bumps the hierarchy's epoch, and the allocation slow paths (stock
 * refills, large blocks) compare it with the epoch they saw last.  A
 * process that does not allocate has nothing to throttle or refuse, and
 * one asked to move that does not answer is moved by the asker
 * (accounting/files.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "cgm/accounted.h"
#include "cgm/log.h"
#include "cgm/shim.h"
#include "cgm/spiller.h"

uint32_t cgm_seen_epoch;

/* One thread at a time learns of a change; a signal handler never waits. */
static pthread_mutex_t epoch_lock = PTHREAD_MUTEX_INITIALIZER;

void cgm_sync_limits(void)
{
	struct cgm_proc *p = hier_proc(&cgm_acct.h, cgm_acct.proc);
	bool limited, listened;

	/*
	 * Detached (the exit path): the keys stay as they are, as the
	 * accounting key does -- what is still allocated charges nothing.
	 * Rewriting them here ran the patching code, among the cold code, in
	 * an exit that happened to refill a stock after its scope was gone
	 * (the scope's removal moves the epoch): python3 under limits had
	 * 128 KiB of the library's code resident at exit instead of 64 when
	 * a destructor after ours allocated.
	 */
	if (!p)
		return;
	limited = group_limited(&cgm_acct.h, p->group);
	listened = __atomic_load_n(&cgm_acct.h.hdr->vmp_listeners, __ATOMIC_RELAXED) > 0;
	if (limited && !static_key_enabled(&cgm_limits_key))
		static_branch_enable(&cgm_limits_key);
	else if (!limited && static_key_enabled(&cgm_limits_key))
		static_branch_disable(&cgm_limits_key);
	/* vmpressure levels are computed only while someone listens. */
	if (listened != static_key_enabled(&cgm_vmpressure_key)) {
		if (listened)
			static_branch_enable(&cgm_vmpressure_key);
		else
			static_branch_disable(&cgm_vmpressure_key);
	}
}

/* Carry out a move another process asked for, with the moving key on. */
static void sync_move(void)
{
	struct cgm_proc *p = hier_proc(&cgm_acct.h, cgm_acct.proc);
	uint32_t to = p ? __atomic_load_n(&p->move_to, __ATOMIC_ACQUIRE) : CGM_NONE;
	int err;

	if (to == CGM_NONE)
		return;
	err = cgm_move_self(to);
	if (err && err != -ESRCH)
		cgm_log("accounting: move to another group refused: %s",
			err == -ENOMEM ? "the destination's memory.max is too small" : "no such group");
	__atomic_store_n(&p->move_to, CGM_NONE, __ATOMIC_RELEASE);
	cgm_sync_limits();
}

/* memory.reclaim written by another process: reclaim, and say it is done. */
static void sync_reclaim(void)
{
	struct cgm_proc *p = hier_proc(&cgm_acct.h, cgm_acct.proc);
	uint32_t asked;

	/*
	 * Not while this thread loads the pool's libraries (the background
	 * reclaim, in an allocation of the loader's): its reclaim would
	 * return at once and say it is done, having spilled nothing, and the
	 * writer went away.  memory.high=20M written over an idle python3
	 * holding 40 MB -- the write itself wakes the thread to load them --
	 * left it at 43-45 MiB in 8 of 10 runs.  The request stays pending:
	 * the thread answers it once they are loaded.  (Pending first: the
	 * spiller's code lies outside the library's hot text.)
	 */
	if (!p || !acct_reclaim_pending(p) || cgm_spill_loading() || !acct_reclaim_begin(p, &asked))
		return;
	cgm_reclaim_self(true);
	cgm_reclaim_later();
	acct_reclaim_end(p, asked);
}

void cgm_epoch_changed(void)
{
	uint32_t epoch;

	if (!cgm_acct.h.hdr || pthread_mutex_trylock(&epoch_lock) != 0)
		return;
	epoch = __atomic_load_n(&cgm_acct.h.hdr->epoch, __ATOMIC_ACQUIRE);
	if (epoch != __atomic_load_n(&cgm_seen_epoch, __ATOMIC_RELAXED)) {
		__atomic_store_n(&cgm_seen_epoch, epoch, __ATOMIC_RELAXED);
		cgm_sync_limits();
		sync_move();
		sync_reclaim();
	}
	pthread_mutex_unlock(&epoch_lock);
}

void cgm_epoch_fork_child(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

	/* Held by another thread of the parent at fork, perhaps: not ours. */
	epoch_lock = fresh;
}
