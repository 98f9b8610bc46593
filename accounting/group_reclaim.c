/*
 * Reclaim from every process of a subtree, as the kernel's reclaim scans
 * every memcg below the one it works for.  A process can only give back
 * its own memory (what its allocator keeps, and with spill=1 its cold
 * pages), so the others are asked through their slots in the hierarchy
 * (reclaim_want, reclaim_asked, the futex word of acct_proc_wake) and
 * answer at their next allocation slow path, or through their background
 * reclaim thread; the asker waits for them (half a second, longer for
 * one that is answering).
 *
 * Used by a write of memory.reclaim or of a limit below usage (cgmctl or
 * the cgroupfs view; the writer's own process reclaims at once), and by a
 * charge that memory.max refused, or a group still over memory.high, after
 * the charging process's own reclaim (accounting/charge.c; it does not ask
 * itself again).
 */
#include <time.h>
#include <unistd.h>

#include "cgm/acct.h"
#include "cgm/files.h"
#include "cgm/mul_div.h"

/*
 * How long the asker waits: half a second for the processes asked to
 * start their answers (a process that is not allocating and does not
 * spill never does), and while one is answering, up to ten seconds:
 * spilling takes a while (120M of an idle python3 holding 160 MB:
 * 0.3-0.4 s here; a loaded machine, or more memory, takes longer), and
 * a writer that stopped waiting counted only what was spilled by then.
 */
#define ANSWER_TICK_NS		5000000L
#define ANSWER_WAIT_TICKS	100
#define ANSWER_WAIT_MAX_TICKS	2000

/*
 * One reclaim pass: ask the processes of the subtree of @group whose
 * group has protection @level to give back what their allocators keep --
 * each does at its next allocation slow path, the caller's own process at
 * once if @ask_self, else not at all -- and wait for them (above).  A
 * group below its low that is reclaimed gets a "low" event.
 * False if no process was asked.
 */
static bool reclaim_pass(struct cgm_hier *h, uint32_t group, enum acct_protection level,
			 int64_t want, bool ask_self)
{
	struct cgm_group *g = hier_group(h, group);
	int64_t usage = page_counter_read(&g->memory);
	int32_t self = (int32_t)getpid();
	struct cgm_proc *p;
	bool any = false, asked = false;
	uint32_t i;

	for_each_live_proc(h, i, p) {
		uint32_t pg = __atomic_load_n(&p->group, __ATOMIC_RELAXED);
		int64_t share;

		if (!group_in_subtree(h, pg, group) || acct_reclaim_protection(h, group, pg) != level)
			continue;
		if (p->pid == self && !ask_self)
			continue;
		if (level == ACCT_PROT_LOW)
			group_event(h, pg, CGM_EV_LOW);
		asked = true;
		/*
		 * What a spilling process is asked for: its part of @want, by
		 * its share of the group's usage (rounded up, one batch at
		 * least), as the kernel's proportional reclaim scans each
		 * memcg by its size.
		 */
		share = want > 0 && usage > 0 ?
			cgm_mul_div(want, proc_charged_pages(p), usage) : 0;
		/*
		 * And first what it has in use beyond its charge (its
		 * shortfall at memory.max): until that is gone, what it gives
		 * back leaves the group's usage where it was.  A python3
		 * that had brought every spilled page back for a fork (with
		 * a backing file) was short by 2,204 pages and gave about
		 * 100 in each of its pool workers' reclaims: the group stayed
		 * at memory.max, and a worker's first malloc failed (1 run
		 * in 10-20 of check-spill-lib's multiprocessing pool, two
		 * runs at a time).
		 */
		if (want > 0)
			share += proc_sample_short(p);
		/* Spilling adds the pool's pages and its bookkeeping: an eighth more. */
		share = share > 0 ? share + share / 8 + 32 : 0;
		__atomic_store_n(&p->reclaim_want, share, __ATOMIC_RELAXED);
		if (p->pid == self) {
			if (cgm_files_reclaim_self)
				cgm_files_reclaim_self();
			continue;
		}
		__atomic_add_fetch(&p->reclaim_asked, 1, __ATOMIC_RELEASE);
		acct_proc_wake(p);
		any = true;
	}
	if (any) {
		hier_bump_epoch(h);
		for (int t = 0; t < ANSWER_WAIT_MAX_TICKS; t++) {
			struct timespec ts = { 0, ANSWER_TICK_NS };
			bool waiting = false, answering = false;

			for_each_live_proc(h, i, p)
				if (group_in_subtree(h, __atomic_load_n(&p->group, __ATOMIC_RELAXED), group) &&
				    p->pid != self && !acct_proc_gone(p) && acct_reclaim_pending(p)) {
					waiting = true;
					answering |= acct_reclaim_answering(p);
				}
			if (!waiting || (t >= ANSWER_WAIT_TICKS && !answering))
				break;
			nanosleep(&ts, NULL);
		}
	}
	acct_harvest_subtree(h, group);
	return asked;
}

/*
 * reclaim_done moves up to @asked, never back.  Another thread may have
 * begun answering a later request meanwhile and finished first (the
 * handler's idle tick while the background reclaim answered the one
 * before): a plain store then put reclaim_done back under reclaim_asked,
 * with reclaim_answering already equal to it, so that the request stayed
 * pending and no thread could ever begin it -- and the background
 * reclaim, which answers a pending request before it spills, never
 * spilled again (python3 of check-spill-programs' fork workload under
 * spill_throttle=1: the handler held off for good, 3 runs in 30).
 */
void acct_reclaim_end(struct cgm_proc *p, uint32_t asked)
{
	uint32_t done = __atomic_load_n(&p->reclaim_done, __ATOMIC_ACQUIRE);

	while ((int32_t)(asked - done) > 0 &&
	       !__atomic_compare_exchange_n(&p->reclaim_done, &done, asked, false,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		;
}

void acct_wake_subtree(struct cgm_hier *h, uint32_t group)
{
	struct cgm_proc *p;
	uint32_t i;

	for_each_live_proc(h, i, p)
		if (group_in_subtree(h, __atomic_load_n(&p->group, __ATOMIC_RELAXED), group))
			acct_proc_wake(p);
}

/*
 * Pages reclaimed from the subtree of @g since @usage and @zswap: the fall
 * of its usage, plus what the compressed copies of spilled pages put back
 * in it -- a spilled page is reclaimed, as the kernel counts a page
 * stored in zswap.
 */
static int64_t reclaimed_since(struct cgm_hier *h, struct cgm_group *g, int64_t usage, int64_t zswap)
{
	rstat_flush(h);
	return usage - page_counter_read(&g->memory) +
	       (__atomic_load_n(&g->stat[CGM_STAT_ZSWAP], __ATOMIC_RELAXED) - zswap) / CGM_PAGE_SIZE;
}

int64_t acct_reclaim_subtree(struct cgm_hier *h, uint32_t group, int64_t want, bool ask_self)
{
	struct cgm_group *g = hier_group(h, group);
	int64_t before, zswap, got;

	if (!g)
		return 0;
	acct_reclaim_dead(h);
	acct_harvest_subtree(h, group);
	/*
	 * The usage it starts from must be now's, as a reader's is: an idle
	 * process's last sample may be from before it filled what it holds
	 * (python3 idle after making a 40 MB bytes object, charged by its
	 * resident pages), and the spill that answers samples it afresh --
	 * then the usage rose by what was spilled, and the writer said
	 * "reclaimed 0" and failed (6 of 6 runs of cgmctl set
	 * memory.reclaim 30M with nothing read before it).
	 */
	acct_refresh_stale(h, group, CGM_SAMPLE_STALE_NS);
	rstat_flush(h);
	before = page_counter_read(&g->memory);
	zswap = __atomic_load_n(&g->stat[CGM_STAT_ZSWAP], __ATOMIC_RELAXED);
	reclaim_pass(h, group, ACCT_PROT_NONE, want, ask_self);
	got = reclaimed_since(h, g, before, zswap);
	if (want > 0 && got < want) {
		reclaim_pass(h, group, ACCT_PROT_LOW, want - got, ask_self);
		got = reclaimed_since(h, g, before, zswap);
	}
	return got;
}
