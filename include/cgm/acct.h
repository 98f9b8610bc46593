/*
 * The accounting of one process: its slot in the hierarchy, its threads'
 * slots and their charge stocks, harvesting frees, flushing statistics,
 * limits, the OOM policy.
 *
 * The shim owns one struct cgm_acct for the process (cgm_acct) and calls
 * these from its slow paths; cgmctl uses the same functions on behalf of
 * other processes (flush, reclaim of dead processes, moves).  Nothing
 * here knows about the shim: configuration comes in through struct
 * cgm_acct, and the only call back out is a->reclaim.
 */
#ifndef CGM_ACCT_H
#define CGM_ACCT_H

#include <stdbool.h>
#include <stdint.h>

#include "cgm/compiler.h"
#include "cgm/hier.h"

/* What happens at memory.max once reclaim has failed. */
enum acct_oom_policy {
	ACCT_OOM_ENOMEM,	/* the allocation fails */
	ACCT_OOM_KILL,		/* the largest process (or the oom.group) is killed */
};

struct cgm_acct {
	struct cgm_hier h;
	uint32_t proc;			/* our slot; CGM_NONE when detached */
	int64_t batch_pages;		/* MEMCG_CHARGE_BATCH */
	enum acct_oom_policy oom_policy;
	/*
	 * Give memory back to the OS (mi_collect, spilling).  @need: the
	 * pages a charge that memory.max refused lacks -- the room to make
	 * below the limit, not only what is over it (0: pressure at
	 * memory.high, or usage already over a limit).  @deep: a round at
	 * memory.high fell short -- take pages that came back lately too,
	 * as the kernel deactivates its active pages when the inactive ones
	 * do not suffice.
	 */
	void (*reclaim)(int64_t need, bool deep);
	/*
	 * Per small bin, the blocks the last thread to exit took at its last
	 * refill of the bin: a new thread's first refill starts there, not at
	 * 8 blocks, since threads that come and go (larson's chains, a pool's
	 * workers) allocate as the ones before them did, and ramping every
	 * bin up again from 8 took about a quarter of the refills' work in
	 * bench/larson and bench/tchurn.  A hint, read and written without a
	 * lock; bin_cap() (stock.c) bounds it like any refill.
	 */
	uint16_t first_refill[CGM_NR_BINS];
	/*
	 * Until then a refused charge does not ask the other processes of
	 * its group (accounting/charge.c: they gave nothing lately).  Zeroed
	 * at attach: a forked child's others include its parent, which the
	 * parent's quiet time was not about.
	 */
	int64_t others_quiet_until;
};

/* MAX_RECLAIM_RETRIES in the kernel. */
#define CGM_RECLAIM_RETRIES 16

/* The kernel's throttling constants (mm/memcontrol.c). */
#define CGM_DELAY_PRECISION_SHIFT 20
#define CGM_DELAY_SCALING_SHIFT 14
#define CGM_CHARGE_BATCH 64
#define CGM_MAX_HIGH_DELAY_MS 2000
/* A penalty this short or shorter is not slept (HZ / 100). */
#define CGM_HIGH_DELAY_MIN_MS 10

/* ---- attach.c: process and thread slots ---- */

/*
 * Attach this process to the group at @path (created if missing).  Dead
 * processes' slots are reclaimed first.  Returns 0 or a negative errno.
 */
int acct_attach(struct cgm_acct *a, const char *path);

/*
 * acct_attach() to a scope: a group that, if this call creates it, is
 * transient -- removed, with its limits, once its last process is gone
 * (systemd-run --scope).
 */
int acct_attach_scope(struct cgm_acct *a, const char *path);

/* Uncharge everything this process holds and free its slots. */
void acct_detach(struct cgm_acct *a);

/*
 * Attach this process to the existing group @group (a forked child joins
 * its parent's group so).  Nothing is charged for what the process
 * inherited.  Returns 0, -ENOENT (no such group) or -ENOSPC.
 */
int acct_attach_group(struct cgm_acct *a, uint32_t group);

/* A slot for the calling thread (tid), or CGM_NONE if the table is full. */
uint32_t acct_thread_register(struct cgm_acct *a, int tid);

/*
 * The thread is exiting: its stock goes back to the process and the slot
 * is marked for reclaim once the thread is gone (frees that run after
 * this still land in it).
 */
void acct_thread_exit(struct cgm_acct *a, uint32_t slot);

/*
 * Return the charges of processes that died without detaching (pid gone,
 * or reused: start time differs), and of thread slots whose thread is
 * gone.  Callable from any process.  Returns the number reclaimed.
 */
int acct_reclaim_dead(struct cgm_hier *h);

/*
 * Is the process of slot @p gone: exited (no such pid, or a zombie), or
 * its pid reused by a process that started after @p attached?  When it
 * cannot tell, it answers no.
 */
bool acct_proc_gone(const struct cgm_proc *p);

/* Wake @p's background reclaim (shim/bg_reclaim.c), if it has one, to look now. */
void acct_proc_wake(struct cgm_proc *p);

/* Has a memory.reclaim or limit write asked @p for reclaim it has not answered yet? */
static inline bool acct_reclaim_pending(const struct cgm_proc *p)
{
	return (int32_t)(__atomic_load_n(&p->reclaim_done, __ATOMIC_ACQUIRE) -
			 __atomic_load_n(&p->reclaim_asked, __ATOMIC_ACQUIRE)) < 0;
}

/* Is a thread of process @p answering the request it was asked last? */
static inline bool acct_reclaim_answering(const struct cgm_proc *p)
{
	return __atomic_load_n(&p->reclaim_answering, __ATOMIC_ACQUIRE) ==
	       __atomic_load_n(&p->reclaim_asked, __ATOMIC_ACQUIRE);
}

/*
 * A thread of process @p starts answering a memory.reclaim (or limit
 * write), and says so in its slot; *@asked is what it answers, for
 * acct_reclaim_end().  False when nothing is asked, or when another of
 * its threads is answering already: only that one may say it is done.
 * (The handler thread's idle tick once said so while the background
 * reclaim was still spilling: the writer, on a loaded machine, then
 * counted 2-3 MB reclaimed of the 30M it asked, and said EAGAIN.)
 */
static inline bool acct_reclaim_begin(struct cgm_proc *p, uint32_t *asked)
{
	uint32_t a, cur;

	if (!acct_reclaim_pending(p))
		return false;
	a = __atomic_load_n(&p->reclaim_asked, __ATOMIC_ACQUIRE);
	cur = __atomic_load_n(&p->reclaim_answering, __ATOMIC_ACQUIRE);
	if (cur == a || !__atomic_compare_exchange_n(&p->reclaim_answering, &cur, a, false,
						     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return false;
	*asked = a;
	return true;
}

/*
 * The answer that acct_reclaim_begin() started is done: reclaim_done moves
 * up to @asked, never back (accounting/group_reclaim.c says why).  Out of
 * line: its compare-and-swap loop, inlined into the allocation path's
 * answer (shim/epoch.c), pushed spill=1's background loop out of the
 * window of hot code (check-text-rss: 128 KiB resident), and it runs only
 * when a request is answered.
 */
void acct_reclaim_end(struct cgm_proc *p, uint32_t asked);

/* Free the slots of exited, fully harvested threads (flush lock + proc lock held). */
void acct_reap_threads(struct cgm_hier *h, uint32_t proc);

/* ---- stock.c: per-thread charge stocks (the kernel's memcg_stock) ---- */

/* Bytes a thread slot has precharged: its stock and unused bin allowances. */
int64_t acct_slot_precharge(const struct cgm_thread_slot *t);

/* Return a slot's allowances to its stock (allocation counts kept). */
void acct_slot_unprecharge(struct cgm_thread_slot *t);

/*
 * The stock of @t (the calling thread's slot) ran short after taking
 * @bytes: refill it -- from the process's frees, else by charging -- or,
 * when a limit refuses, give the @bytes back.  Returns 0 or -ENOMEM.  May
 * sleep (memory.high throttling).
 */
int acct_stock_refill(struct cgm_acct *a, struct cgm_thread_slot *t, int64_t bytes,
		      bool check_limits);

/* Take @bytes from @t's stock (consume_stock), refilling it when it runs short. */
static inline int acct_stock_take(struct cgm_acct *a, struct cgm_thread_slot *t,
				  int64_t bytes, bool check_limits)
{
	cgm_owner_add(t->stock, -bytes);
	if (cgm_likely(t->stock >= 0))
		return 0;
	return acct_stock_refill(a, t, bytes, check_limits);
}

/*
 * Precharge another run of blocks of bin @bin from @t's stock (the
 * allowance that malloc's fast path counts down): the run doubles on
 * every refill of the bin up to an eighth of a charge batch, and is one
 * block while a group of ours is near a limit.  Returns 0 or -ENOMEM.
 */
int acct_refill_bin(struct cgm_acct *a, struct cgm_thread_slot *t, unsigned int bin,
		    bool check_limits);

/* Charge @bytes to the process whatever the limits (memory already in use). */
void acct_force_charge(struct cgm_acct *a, struct cgm_thread_slot *t, int64_t bytes);

/*
 * Give back everything @t (the calling thread's slot) has precharged:
 * allowances and stock go to the process's pool, whose whole pages are
 * uncharged (the kernel's drain_local_stock).
 */
void acct_stock_drain(struct cgm_acct *a, struct cgm_thread_slot *t);

/* acct_stock_trim()'s locked part, for a stock above two batches. */
void acct_stock_trim_excess(struct cgm_acct *a, struct cgm_thread_slot *t);

/* Is @t's stock above two batches, what acct_stock_trim() gives back? */
static inline bool acct_stock_over(const struct cgm_acct *a, const struct cgm_thread_slot *t)
{
	return t->stock > 2 * a->batch_pages * CGM_PAGE_SIZE;
}

/*
 * Give back stock above two batches (after a free restocked it, a realloc
 * shrink, or at exit).  Inline, since every free of a medium block asks,
 * and the answer is almost always no.
 */
static inline void acct_stock_trim(struct cgm_acct *a, struct cgm_thread_slot *t)
{
	if (cgm_unlikely(acct_stock_over(a, t)))
		acct_stock_trim_excess(a, t);
}

/* ---- harvest.c: returning freed bytes ---- */

/*
 * Uncharge whole pages of the process's freed bytes (harvested from all
 * its threads' slots).  Called from slow paths, flushers and readers.
 */
void acct_harvest(struct cgm_hier *h, uint32_t proc);

/* Harvest every process attached in the subtree of @group. */
void acct_harvest_subtree(struct cgm_hier *h, uint32_t group);

/* ---- charge.c: try_charge, memory.high ---- */

/*
 * Charge at least @need bytes into @t's stock (the caller's own slot), in
 * the kernel's try_charge_memcg() order: a batch, else exactly what is
 * needed; at a refusal, reclaim and retry, then the OOM policy.  Returns
 * 0, or -ENOMEM when the allocation must fail.  May sleep (memory.high).
 */
int acct_try_charge(struct cgm_acct *a, struct cgm_thread_slot *t, int64_t need,
		    bool check_limits);

/* Would @pages more (plus a batch) bring a group of ours to its max or high? */
bool acct_limit_near(struct cgm_acct *a, int64_t pages);

/* Throttle delay in ms for @usage over @high pages (0: no penalty). */
uint64_t acct_high_delay_ms(int64_t usage, int64_t high, int64_t nr_pages);
/*
 * The memory.high penalty of a charge of @nr_pages by this process as its
 * group and ancestors stand, with @unsampled pages more in use than they
 * were charged for (the greatest of theirs, ms, at most 2 s; 0 when none
 * is over its high).  With @event, each group over its high counts a high
 * event, as one that enters reclaim for it does.
 */
uint64_t acct_high_penalty_ms(struct cgm_acct *a, int64_t unsampled, int64_t nr_pages, bool event);

/*
 * Whether reclaim keeps pace with pages coming back: the kernel throttles
 * a task over memory.high only while its reclaim makes no progress, and
 * that reclaim is the task's own, of at least what it charged.  Reclaim
 * running beside the faults (spill_throttle's background) keeps pace
 * while what it reclaimed, over time, is at least what came back: a
 * credit of their difference, bounded by CGM_RECLAIM_PACE_CAP pages
 * either way, as reclaim comes in bursts (one look 7,000 pages, the
 * next none).  @reclaimed: the total so far; @back: pages that came back
 * since the last call.
 */
#define CGM_RECLAIM_PACE_CAP	2048
struct acct_reclaim_pace {
	uint64_t last_reclaimed;
	int64_t credit;
};
bool acct_reclaim_keeps_pace(struct acct_reclaim_pace *pace, uint64_t reclaimed, uint64_t back);

/*
 * Is the process over its group's memory.max -- a residency sample found
 * more in use than the limit has room for (acct_sample_short), or a
 * counter is above its max (a limit lowered)?  Then reclaim, then the OOM
 * policy, as the kernel does at a fault.  Returns 0 when it is back
 * within its limits, or -ENOMEM when the allocation must fail.
 */
int acct_over_max(struct cgm_acct *a);

/*
 * The throttling of try_charge for memory charged some other way (a
 * residency sample of @nr_pages): over memory.high, reclaim first, then
 * sleep the calling thread (@t's) by the kernel's penalty.
 */
void acct_handle_high(struct cgm_acct *a, struct cgm_thread_slot *t, int64_t nr_pages);
/*
 * What the calling thread's charges are exempt from (ACCT_EXEMPT_*).
 *  - HIGH, set for good on the library's own reclaim thread: its charges
 *    over memory.high neither reclaim nor sleep, as the kernel never
 *    throttles kswapd.  It is the thread that makes room, and it was found
 *    asleep in a throttle inside dlopen (loading the spill pool's
 *    libraries), the loader's lock held, while the program waited for it
 *    to spill.
 *  - MAX, for a moment (cgm_charge_nofail_begin): a charge memory.max
 *    refuses is charged past it, exactly what it lacks, with no reclaim,
 *    as the kernel forces a __GFP_NOFAIL charge.
 */
#define ACCT_EXEMPT_HIGH	1u
#define ACCT_EXEMPT_MAX		2u
extern CGM_TLS unsigned char acct_exempt;

/* ---- sample.c: residency samples ---- */

/*
 * The anonymous resident memory of process @pid (0: this one), RssAnon
 * from /proc/PID/statm, in bytes; -1 if it cannot be read.  @fd >= 0: read
 * through it instead, that statm kept open (read again from its start).
 */
int64_t acct_read_anon(int pid, int fd);

/*
 * The process sampled its resident memory: @anon bytes of anonymous
 * memory in all, @heap_free of heap pages beyond its live bytes, @mapped
 * of its own mappings.  With @charge (charge=resident), what @anon holds
 * beyond the byte charges is charged -- the change since the last sample,
 * charged or uncharged whatever the limits: the memory is in use.  The
 * statistics are published for flushes to fold.  Returns the pages
 * charged (negative: uncharged).  A negative @heap_free leaves the split
 * (@heap_free, @mapped) as the last sample found it, bounded by @anon, as
 * a reader's refresh does: the charge needs only the anon, and the split
 * costs the process a walk of its regions.
 */
int64_t acct_sample_set(struct cgm_acct *a, bool charge, int64_t anon, int64_t heap_free,
			int64_t mapped);

/*
 * spill=1: the process's pool as of now, and its spill counts (totals).
 * The next sample takes the spilled pages off the charge (the pool's own
 * pages are in the anon it reads).
 */
struct acct_spill_state {
	int64_t spilled_pages;	/* pages in the pool or written back */
	int64_t zswap;		/* bytes of pool memory */
	int64_t zswapped;	/* bytes of the pages held in it */
	int64_t swap;		/* bytes of pages written back to the backing file */
	uint64_t counts[CGM_NR_SPILL_COUNTS];	/* CGM_STAT_SPILL0 on */
	uint64_t throttle_ns;	/* the handler held off for memory.high (throttle_usec) */
	int64_t own_anon;	/* bytes of the library's own tables and scratch (struct cgm_proc) */
};
void acct_spill_publish(struct cgm_acct *a, const struct acct_spill_state *st);

/*
 * The memory.zswap.max room left for the process's group (@swap:
 * memory.swap.max's): the least of the limit less the usage over the group
 * and its ancestors, in bytes (INT64_MAX: no limit), never below 0.
 */
int64_t acct_zswap_room(struct cgm_acct *a, bool swap);

/* Pages a memory.reclaim or limit write asked of this process (0: none); cleared. */
int64_t acct_reclaim_take(struct cgm_acct *a);

/*
 * Pages by which the process's group or an ancestor is over the lower of
 * its memory.high and memory.max, at most (0: none).
 */
int64_t acct_reclaim_excess(struct cgm_acct *a);
/*
 * The same against a watermark below the limit: the limit less a
 * 2^-@shift part of it (0: the limit itself).  The background reclaim's
 * marks (shim/bg_reclaim.c).
 */
int64_t acct_reclaim_excess_below(struct cgm_acct *a, unsigned int shift);
/*
 * The same, signed: how far below that mark the nearest group is
 * (negative pages), INT64_MIN for a process with no group.  How fast a
 * group nears its limit (shim/bg_reclaim.c's watch).
 */
int64_t acct_reclaim_margin(struct cgm_acct *a, unsigned int shift);
/*
 * The lowest memory.high or memory.max of the process's group and its
 * ancestors, in pages: PAGE_COUNTER_MAX when none is set.
 */
int64_t acct_limit_pages(struct cgm_acct *a);
/*
 * Reclaim from the subtree of @group, @want pages (0: whatever the first
 * pass gives), as the kernel's reclaim honours memory.min and memory.low:
 * the processes of unprotected groups are asked first, then, if they did
 * not give enough, those of groups within their low (a "low" event),
 * never those within their min; each gives back what it can at its next
 * slow path, and the caller waits up to half a second for them.  This
 * process reclaims at once if @ask_self, else is left out.  Returns the
 * pages by which the group's usage fell (a spilled page counts, as a page
 * stored in zswap does).  accounting/group_reclaim.c.
 */
int64_t acct_reclaim_subtree(struct cgm_hier *h, uint32_t group, int64_t want, bool ask_self);
/*
 * Wake the background reclaim of every process of the subtree of @group
 * (a limit was written): each looks at its groups now, and one near its
 * limit with spill=1 loads the pool's libraries while there is room for
 * them (shim/bg_reclaim.c).  accounting/group_reclaim.c.
 */
void acct_wake_subtree(struct cgm_hier *h, uint32_t group);
/*
 * Above limit - limit / 2^this, a process with spill=1 loads the spill
 * pool's libraries (shim/bg_reclaim.c), and a limit write wakes it.
 */
#define ACCT_SPILL_LOAD_SHIFT	2

/*
 * Pages that must go before a charge of @need pages fits under the
 * memory.max of the process's group and each ancestor (0: it fits).
 * *@where (if not NULL): the lowest group whose max it does not fit
 * under -- the kernel's mem_over_limit -- or CGM_NONE.
 */
int64_t acct_max_lack(struct cgm_acct *a, int64_t need, uint32_t *where);

/* The anon of the coming sample per NUMA node (memory.numa_stat), bytes. */
void acct_numa_publish(struct cgm_acct *a, const int64_t bytes[CGM_MAX_NODES]);

/* Pages the last sample found in use that memory.max had no room for (0: none). */
int64_t acct_sample_short(const struct cgm_acct *a);

/* Anon that a forked child shares with its parent: not counted as its own. */
void acct_set_anon_base(struct cgm_acct *a, int64_t base);

/*
 * For a reader: the anon and charge of every process in the subtree of
 * @group whose last sample is older than @max_age_ns, from /proc.
 */
void acct_refresh_stale(struct cgm_hier *h, uint32_t group, int64_t max_age_ns);
/* A process's sample older than this is refreshed by a reader (RssAnon costs a read of /proc). */
#define CGM_SAMPLE_STALE_NS (10 * 1000000LL)

/* ---- oom.c: the OOM policy ---- */

/*
 * Group @over is at its memory.max and reclaim did not help: apply the
 * OOM policy.  Returns true if processes other than this one were killed
 * and their charge returned (the charge is worth retrying).
 */
bool acct_out_of_memory(struct cgm_acct *a, uint32_t over);

/* ---- rstat.c ---- */

/*
 * Fold every thread slot's counters that changed since the last flush
 * into its group's local statistics and into the hierarchical statistics
 * of the group and its ancestors.  After it, reading any group's
 * hierarchical statistics is O(1).  Callable from any process.
 */
void rstat_flush(struct cgm_hier *h);

/*
 * Fold the deltas of thread slot @slot up the tree now: what a thread does
 * once its unflushed updates pass a threshold (the kernel flushes past
 * MEMCG_CHARGE_BATCH updates per CPU).  Never waits: false, and nothing
 * done, while another flush holds the lock.
 */
bool rstat_flush_thread(struct cgm_hier *h, uint32_t slot);

/*
 * Fold the deltas of every thread of process @proc now (a sample wants its
 * live bytes current).  Never waits: nothing is done while another flush
 * holds the lock.
 */
void rstat_flush_proc(struct cgm_hier *h, uint32_t proc);

/*
 * Fold the change in process @proc's sampled statistics into its group
 * now, unless another flush holds the lock (that one, or the next,
 * folds it: the process is marked in sample_map).
 */
void rstat_fold_sampled(struct cgm_hier *h, uint32_t proc);

/*
 * A process is leaving: its threads' last deltas are folded, and what it
 * still held live, freed by its exit, leaves its group's heap_live, which stays
 * the live bytes of the processes that remain.  Its thread slots are
 * flushed no more.
 */
void rstat_fold_exit(struct cgm_hier *h, struct cgm_proc *p);

/*
 * Fold the statistics of process @proc's exited threads and free their
 * slots once the threads are gone.  Never waits: nothing is done while
 * another flush holds the lock.
 */
void rstat_reap_exited(struct cgm_hier *h, uint32_t proc);

/*
 * Put process @p in group @to, its heap_live and sampled statistics going along.  Caller holds the
 * flush lock and then p->lock, so that no flush or harvest sees the
 * process half moved.
 */
void rstat_switch_group(struct cgm_hier *h, struct cgm_proc *p, uint32_t to);

/* Map a block size to its histogram bucket: bucket b holds (2^(b+2), 2^(b+3)]. */
static inline unsigned int rstat_hist_bucket(uint64_t size)
{
	unsigned int b;

	if (size <= 8)
		return 0;
	b = (unsigned int)(64 - __builtin_clzll(size - 1)) - 3;
	return b < CGM_HIST_BUCKETS ? b : CGM_HIST_BUCKETS - 1;
}

/* ---- move.c ---- */

/* Move process slot @proc to @group, migrating its charge. */
int acct_move(struct cgm_hier *h, uint32_t proc, uint32_t group);

/* ---- limits.c ---- */

enum acct_limit { CGM_LIMIT_MAX, CGM_LIMIT_HIGH, CGM_LIMIT_LOW, CGM_LIMIT_MIN };

/*
 * The machine's NUMA nodes, from /sys/devices/system/node/online (1 where
 * it cannot be read), at most CGM_MAX_NODES (files.c).
 */
int acct_online_nodes(void);

/* ---- psi.c: memory.pressure ---- */

/*
 * A thread of process slot @proc stalls on memory (reclaim, throttling,
 * a spilled page's refault) and stops stalling: each enter is matched by a
 * leave.  The stall counts in its group and every ancestor.
 */
void psi_memstall_enter(struct cgm_hier *h, uint32_t proc);
void psi_memstall_leave(struct cgm_hier *h, uint32_t proc);
/* Process @p is gone: the stalls it was in end. */
void psi_proc_gone(struct cgm_hier *h, struct cgm_proc *p);

/* memory.pressure of a group: totals (ns) and averages (percent) as of now. */
struct cgm_psi_view {
	int64_t total[CGM_PSI_KINDS];
	double avg[CGM_PSI_KINDS][CGM_PSI_AVGS];
};
void psi_read(struct cgm_hier *h, uint32_t group, struct cgm_psi_view *v);
/* Only the totals as of @now (no averages, no lock): what a trigger polls. */
void psi_totals_now(struct cgm_hier *h, uint32_t group, int64_t now, struct cgm_psi_view *v);

/* ---- psi_trigger.c: memory.pressure triggers ---- */

#define PSI_TRIGGER_SAMPLES 11		/* one per window/10: a window's worth */

struct psi_trigger {
	int kind;			/* CGM_PSI_SOME or CGM_PSI_FULL */
	int64_t threshold_ns, window_ns;
	int64_t fired_ns;		/* last time it fired (0: never) */
	int64_t at[PSI_TRIGGER_SAMPLES], total[PSI_TRIGGER_SAMPLES];
	unsigned head, nr;
};

/*
 * Parse "some|full THRESHOLD_US WINDOW_US" with the kernel's rules:
 * 0, or -EINVAL with a reason in @why.
 */
int psi_trigger_parse(const char *spec, struct psi_trigger *t, char *why, size_t whylen);
/* How often to poll @t (window / 10). */
int64_t psi_trigger_period_ns(const struct psi_trigger *t);
/*
 * Look at group @group at @now (CLOCK_MONOTONIC ns): true when the
 * trigger fires -- the stall grew by its threshold within its window,
 * and it has not fired within the last window.
 */
bool psi_trigger_poll(struct cgm_hier *h, uint32_t group, struct psi_trigger *t, int64_t now);

/* ---- vmpressure.c: cgroup v1's pressure levels, for listeners ---- */

/* The level of a reclaim that looked at @scanned pages and got @reclaimed back. */
int vmpressure_level(int64_t scanned, int64_t reclaimed);
/*
 * Reclaim for group @group looked at @scanned pages and reclaimed
 * @reclaimed (@scanned 0: nothing was left to look at, at the limit):
 * counted in the windows of the group and its ancestors with listeners,
 * raising their events when a window fills.
 */
void vmpressure_account(struct cgm_hier *h, uint32_t group, int64_t scanned, int64_t reclaimed);
/* "low", "medium", "critical" -> CGM_VMP_*, or -1. */
int vmpressure_parse_level(const char *s);
/* A listener of group @group comes (@on) or goes. */
void vmpressure_listen(struct cgm_hier *h, uint32_t group, bool on);
/* Events raised in @group at @level or above, so far. */
uint64_t vmpressure_events(struct cgm_hier *h, uint32_t group, int level);

/* ---- protect.c: memory.min and memory.low in reclaim ---- */

enum acct_protection {
	ACCT_PROT_NONE,		/* reclaimed first */
	ACCT_PROT_LOW,		/* reclaimed only if the others did not give enough */
	ACCT_PROT_MIN,		/* never reclaimed */
};

/*
 * How @group is protected in a reclaim of the subtree of @root (the group
 * at its limit, or whose memory.reclaim was written): its usage against
 * its effective memory.min and memory.low, computed from @root down.
 * @root itself, and a group not below it, are not protected.
 */
enum acct_protection acct_reclaim_protection(struct cgm_hier *h, uint32_t root, uint32_t group);

/* Set memory.max/high/low/min of @group (bytes; UINT64_MAX: "max"). */
int acct_set_limit(struct cgm_hier *h, uint32_t group, enum acct_limit which, uint64_t bytes);

#endif /* CGM_ACCT_H */
