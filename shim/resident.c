/*
 * This process's resident memory, sampled: the heap's pages and the
 * program's own mappings that are in memory (shim/regions.c, mincore),
 * published as the sampled statistics of memory.stat and, with
 * charge=resident, charged (accounting/sample.c).
 *
 * With no thread of its own, the process samples in its allocation slow
 * paths: stock refills, blocks above 128 KiB, realloc past 16 KiB, mmap.  A sample is
 * due 20 ms after the last one, or later when sampling is slow -- the
 * interval is at least 50 times what the last sample cost, so sampling
 * takes at most 2% of the time -- and every 16th slow path of a thread
 * reads the clock to see (a block of 1 MiB or more, or a mapping, looks
 * at once).  A large block is sampled before it is freed, so that what
 * was touched in it reaches memory.peak.  Readers in the process (the
 * C API) and reclaim sample at once.  A process that touches memory it
 * already has without allocating is seen at its next slow path: that is
 * the lag.
 */
#include <mimalloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "cgm/accounted.h"
#include "cgm/clock.h"
#include "cgm/log.h"
#include "cgm/nocancel.h"
#include "cgm/regions.h"
#include "cgm/self_proc.h"
#include "cgm/shim.h"
#include "cgm/spiller.h"

#define SAMPLE_MIN_NS		(20 * 1000000LL)
#define SAMPLE_COST_SHARE	50	/* interval >= 50 x cost: at most 2% */
#define TICKS_PER_CLOCK		16	/* slow paths per clock read */
#define COLLECT_MIN_NS		(1 * 1000000LL)	/* reclaims closer than this collect once */
#define RECLAIM_WAIT_MIN	(1 << 20)	/* heap_free worth waiting for */

static pthread_mutex_t sample_lock = PTHREAD_MUTEX_INITIALIZER;
int64_t cgm_next_sample_ns;
/*
 * A forked child's small blocks wait this long for its first sample:
 * until it maps memory of its own, all it has resident is what it shares
 * with its parent, which is the parent's charge.  A child that runs a
 * moment and exits (a shell's $(...)) then reads no statm and no pagemap.
 */
static int64_t small_sample_after_ns;
/* Bytes of large blocks and mappings made since the last sample. */
static int64_t unsampled_bytes;
/*
 * What the process could fill without allocating, as of its last walk of
 * its regions: its own mappings' pages not resident, and the live heap
 * bytes beyond the heap's resident ones (large blocks not yet touched;
 * mimalloc's free space is not the program's to fill).
 */
int64_t cgm_untouched_bytes;
/* What the last walk of the regions took, and how many there were (cgm_resident_walks). */
static int64_t walk_ns;
static uint64_t walks;
static int64_t last_collect_ns;
/* Until then, every sample collects first: a reclaim asked by another process goes on. */
static int64_t collect_until_ns;
/* A forked child counts only the pages it does not share with its parent. */
static bool exclusive_only;
static CGM_TLS unsigned int ticks;
/* This thread is sampling: a signal handler's malloc must not sample again. */
static CGM_TLS bool sampling;

/* RssAnon; a process that spills reads it through a statm kept open (shim/self_proc.c). */
static inline __attribute__((always_inline)) int64_t read_anon(void)
{
	return acct_read_anon(0, cgm_self_kept(CGM_SELF_STATM));
}

/* The calling thread's own slot, or NULL (boot or unaccounted slot). */
static struct cgm_thread_slot *own_slot(void)
{
	struct cgm_thread_slot *t = cgm_tslot;

	return hier_thread_index(&cgm_acct.h, t) == CGM_NONE ? NULL : t;
}

/*
 * Charge @anon, memory.stat's split left as the last sample found it.  Out
 * of line: sample_locked() lies in shim/hot-text.ld's window, which has
 * no room for the call's arguments.
 */
static CGM_NOINLINE int64_t charge_split_kept(int64_t anon)
{
	return acct_sample_set(&cgm_acct, cgm_conf.charge == CGM_CHARGE_RESIDENT, anon, -1, -1);
}

/*
 * Take a sample and charge it.  memory.stat's split of the anon comes
 * from a walk of the regions, unless @lazy_split, the process has
 * CGM_REGIONS_LARGE of them and no sample is due yet by its interval:
 * then the last walk's split stays, within the anon (acct_sample_set;
 * cgm_resident_charge() says why).  By size, not by the time a walk took:
 * a small process never keeps the split, and the code that keeps it (the
 * NUMA rescaling included) stays out of the pages such a process has
 * resident (check-text-rss); on a loaded machine a small process's walk,
 * preempted, took longer than 0.2 ms.  sample_lock held.  Returns the
 * pages charged.
 */
static CGM_KEYED int64_t sample_locked(bool lazy_split)
{
	struct cgm_proc *p = hier_proc(&cgm_acct.h, cgm_acct.proc);
	int64_t start = cgm_now_ns(), anon, heap, mapped, live, delta, cost, numa[CGM_MAX_NODES];
	struct cgm_regions_usage u;
	static int warned;

	if (!p)
		return 0;
	__atomic_store_n(&unsampled_bytes, 0, __ATOMIC_RELAXED);
	anon = read_anon();
	if (anon < 0) {
		cgm_log_once(&warned, "accounting: /proc/self/statm cannot be read: resident "
			     "memory is not sampled (large blocks and mappings go uncharged)");
		return 0;
	}
	/* What is in the pool leaves the charge at this sample. */
	if (static_branch_unlikely(&cgm_spill_key))
		cgm_spill_publish();
	if (lazy_split && cgm_regions_reserved >= CGM_REGIONS_LARGE &&
	    start < __atomic_load_n(&cgm_next_sample_ns, __ATOMIC_RELAXED))
		return charge_split_kept(anon);
	/* The split between heap and the program's mappings, which only we can see. */
	if (cgm_regions_usage(&u, exclusive_only) < 0 && (!exclusive_only ||
	    (exclusive_only = false, cgm_regions_usage(&u, false) < 0)))
		memset(&u, 0, sizeof(u));
	heap = (int64_t)u.resident[CGM_REGION_HEAP];
	mapped = (int64_t)u.resident[CGM_REGION_PROGRAM];
	cgm_numa_split(anon - __atomic_load_n(&p->anon_base, __ATOMIC_RELAXED), numa);
	acct_numa_publish(&cgm_acct, numa);
	/* The live bytes as of now, not as of the last flush. */
	rstat_flush_proc(&cgm_acct.h, cgm_acct.proc);
	live = __atomic_load_n(&p->heap_live, __ATOMIC_RELAXED);
	/* (Read by the background reclaim without the lock.) */
	__atomic_store_n(&cgm_untouched_bytes, (int64_t)u.reserved[CGM_REGION_PROGRAM] - mapped +
			 (live > heap ? live - heap : 0), __ATOMIC_RELAXED);
	delta = acct_sample_set(&cgm_acct, cgm_conf.charge == CGM_CHARGE_RESIDENT, anon,
				heap > live ? heap - live : 0, mapped);
	cost = cgm_now_ns() - start;
	__atomic_store_n(&walk_ns, cost, __ATOMIC_RELAXED);
	__atomic_add_fetch(&walks, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&cgm_next_sample_ns, start + cost +
			 (cost * SAMPLE_COST_SHARE > SAMPLE_MIN_NS ? cost * SAMPLE_COST_SHARE :
			  SAMPLE_MIN_NS), __ATOMIC_RELAXED);
	return delta;
}

/* Reclaim: one thread at a time collects; another arriving meanwhile finds it done. */
static void collect_now(void)
{
	static pthread_mutex_t collect_lock = PTHREAD_MUTEX_INITIALIZER;

	if (pthread_mutex_trylock(&collect_lock) != 0)
		return;
	cgm_mi_collect_now();
	pthread_mutex_unlock(&collect_lock);
}

CGM_NOINLINE int64_t cgm_resident_sample(bool lazy_split)
{
	int64_t delta;
	int nc;

	if (cgm_acct.proc == CGM_NONE || sampling)
		return 0;
	sampling = true;
	atomic_signal_fence(memory_order_seq_cst);
	nc = cgm_nocancel_begin();
	pthread_mutex_lock(&sample_lock);
	delta = sample_locked(lazy_split);
	pthread_mutex_unlock(&sample_lock);
	cgm_nocancel_end(nc);
	atomic_signal_fence(memory_order_seq_cst);
	sampling = false;
	return delta;
}

uint64_t cgm_resident_walks(void)
{
	return __atomic_load_n(&walks, __ATOMIC_RELAXED);
}

int64_t cgm_resident_walk_ns(void)
{
	return __atomic_load_n(&walk_ns, __ATOMIC_RELAXED);
}

/*
 * Under reclaim a sample followed every batch spilled (the background
 * reclaim's, each round of a program thread's), and each walked the
 * process's regions for the split of memory.stat, which the charge does
 * not need: node building a Map of a million strings under
 * spill=1,high=100M walked them 694 times, 4.1 s of its threads' time.
 * The charge itself is statm's anon.  So those read the anon alone, and
 * the regions are walked only once a sample is due by its interval, as
 * from a slow path.  cgm_resident_refuse() samples so too: node maps
 * often near its limit (220 of the 290 walks left).  Now 82-92 walks,
 * 0.27 s.
 */
int64_t cgm_resident_charge(bool split)
{
	/* vmpressure's listeners are told the heap's free pages a reclaim purged: from the split. */
	return cgm_resident_sample(!split && !static_key_enabled(&cgm_vmpressure_key));
}

/*
 * A sample charged @delta pages: memory found in use that takes the
 * group over memory.high is reclaimed, then throttled, as a charge is.
 */
static CGM_KEYED void found_in_use(int64_t delta)
{
	struct cgm_thread_slot *t = own_slot();

	if (!t || !static_branch_unlikely(&cgm_limits_key))
		return;
	/*
	 * Near the limit: the background reclaim makes room before a charge
	 * must -- before the first reclaim too, which it makes (the key is
	 * on once there is an engine).
	 */
	if (cgm_spill_on())
		cgm_bg_reclaim_kick();
	if (delta > 0)
		acct_handle_high(&cgm_acct, t, delta);
	/*
	 * A reader may have charged what this process touched (a stale
	 * sample refreshed from /proc): the process still reclaims what is
	 * over -- it is the one that can -- but is not throttled for it.
	 */
	else if (cgm_spill_on() && acct_reclaim_excess(&cgm_acct) > 0)
		cgm_reclaim_self(false);
}

void cgm_resident_tick(bool large)
{
	int64_t delta, now;
	int nc;

	/* A forked child's background reclaim, not made at fork (shim/spiller.c). */
	if (__builtin_expect(__atomic_load_n(&cgm_bg_start_wanted, __ATOMIC_RELAXED), 0) && !sampling)
		cgm_bg_reclaim_start_wanted();
	/* A thread's first slow path looks too: a process's first sample is there. */
	if (!large && (++ticks % TICKS_PER_CLOCK) != 1)
		return;
	if (sampling || cgm_acct.proc == CGM_NONE)
		return;
	now = cgm_now_ns();
	/* A block the thread parked and did not take again goes now. */
	cgm_park_settle(now);
	if (now < __atomic_load_n(&cgm_next_sample_ns, __ATOMIC_RELAXED) ||
	    (!large && now < small_sample_after_ns))
		return;
	if (__atomic_load_n(&collect_until_ns, __ATOMIC_RELAXED) > now)
		collect_now();
	/* Up before the lock: a signal handler's malloc here must not sample (and wait on it). */
	sampling = true;
	atomic_signal_fence(memory_order_seq_cst);
	/* Another thread is sampling: its sample is as good as ours. */
	if (pthread_mutex_trylock(&sample_lock) != 0) {
		sampling = false;
		return;
	}
	nc = cgm_nocancel_begin();
	delta = sample_locked(false);
	pthread_mutex_unlock(&sample_lock);
	cgm_nocancel_end(nc);
	atomic_signal_fence(memory_order_seq_cst);
	sampling = false;
	found_in_use(delta);
}

CGM_KEYED bool cgm_resident_refuse(int64_t bytes)
{
	int64_t pending;

	if (cgm_conf.charge != CGM_CHARGE_RESIDENT || !static_branch_unlikely(&cgm_limits_key) ||
	    cgm_acct.proc == CGM_NONE)
		return false;
	/*
	 * A program that fills each large block as it gets it would run
	 * far past memory.max in the 20 ms between samples: once what was
	 * made since the last sample could reach a limit, look now.
	 */
	pending = __atomic_add_fetch(&unsampled_bytes, bytes, __ATOMIC_RELAXED);
	if (acct_limit_near(&cgm_acct, pending / CGM_PAGE_SIZE)) {
		found_in_use(cgm_resident_sample(true));
		/*
		 * Filled later, with no allocation to sample it: the
		 * background reclaim watches (out of shim/hot-text.ld's
		 * window, as its spilling: not called without spill=1).
		 */
		if (cgm_spill_on())
			cgm_bg_reclaim_watch();
	}
	return acct_over_max(&cgm_acct) < 0;
}

/* On while some group of the hierarchy has a vmpressure listener (epoch.c). */
DEFINE_STATIC_KEY_FALSE(cgm_vmpressure_key);

/* What mimalloc keeps of this process's heap, as of its last sample (bytes). */
static int64_t own_heap_free(void)
{
	struct cgm_proc *p = hier_proc(&cgm_acct.h, cgm_acct.proc);

	return p ? __atomic_load_n(&p->sampled[CGM_STAT_HEAP_FREE], __ATOMIC_RELAXED) : 0;
}

/*
 * Tell vmpressure what a reclaim did: the free heap pages it found
 * (@free_before, all of them looked at) and purged, and the resident
 * pages spilling looked at (@looked) and spilled.  Nothing at all to look
 * at while over a limit is critical.
 */
static void vmpressure_reclaimed(int64_t free_before, int64_t spilled, uint64_t looked)
{
	struct cgm_proc *p = hier_proc(&cgm_acct.h, cgm_acct.proc);
	int64_t purged = free_before - own_heap_free() / CGM_PAGE_SIZE;
	int64_t scanned = free_before + (int64_t)looked;

	if (!p || (scanned <= 0 && acct_reclaim_excess(&cgm_acct) <= 0))
		return;
	vmpressure_account(&cgm_acct.h, __atomic_load_n(&p->group, __ATOMIC_RELAXED), scanned,
			   (purged > 0 ? purged : 0) + spilled);
}

static CGM_KEYED void reclaim_self(bool force, int64_t need, bool deep)
{
	int64_t now = cgm_now_ns(), free_before = 0, spilled = 0;
	struct cgm_thread_slot *t = own_slot();
	uint64_t looked = 0;

	/*
	 * An explicit reclaim (memory.reclaim, a limit written below usage)
	 * also gives back this thread's precharged stock, as the kernel
	 * drains its per-CPU stocks when memory.high or memory.max is
	 * written.  Pressure in a charge path leaves it: the charge needs it.
	 */
	if (force && t)
		acct_stock_drain(&cgm_acct, t);

	/* vmpressure: the pages this reclaim looks at and gets back, for listeners only. */
	if (static_branch_unlikely(&cgm_vmpressure_key))
		free_before = own_heap_free() / CGM_PAGE_SIZE;
	/* The large block this thread parked is the first thing to give back. */
	cgm_park_purge();
	/* Pressure that asks again within a millisecond finds nothing new to collect. */
	if (force || now - __atomic_load_n(&last_collect_ns, __ATOMIC_RELAXED) >= COLLECT_MIN_NS) {
		collect_now();
		__atomic_store_n(&last_collect_ns, cgm_now_ns(), __ATOMIC_RELAXED);
	}
	/*
	 * What went back to the system leaves the charge now; the split of
	 * memory.stat too when asked (memory.reclaim, a limit written: its
	 * waits read heap_free).
	 */
	cgm_resident_charge(force);
	/*
	 * spill=1: what is still over the limit, or what memory.reclaim
	 * asked of this process, or the room a refused charge needs, is
	 * spilled, coldest first.  For a refused charge every lap counts
	 * (thorough): the charge fails, or kills, when reclaim comes back
	 * empty.
	 */
	if (cgm_spill_on())
		spilled = cgm_spill_over_limit(acct_reclaim_take(&cgm_acct), need, &looked,
					       force || need > 0 || deep);
	if (static_branch_unlikely(&cgm_vmpressure_key))
		vmpressure_reclaimed(free_before, spilled, looked);
}

CGM_KEYED void cgm_reclaim_self(bool force)
{
	reclaim_self(force, 0, false);
}

CGM_KEYED void cgm_reclaim_for(int64_t need, bool deep)
{
	reclaim_self(false, need, deep);
}

/* The delays after which mimalloc decommits what was freed: pages, then whole segments. */
static const int64_t settle_ns[] = { 30 * 1000000LL, 520 * 1000000LL };


void cgm_reclaim_self_wait(void)
{
	int64_t start = cgm_now_ns();

	cgm_reclaim_self(true);
	/*
	 * What was freed within mimalloc's delays is decommitted only once
	 * they have passed, forced collect or not: an administrator's request
	 * (not an allocation) waits for them while much is left.
	 */
	for (size_t i = 0; i < sizeof(settle_ns) / sizeof(settle_ns[0]) &&
	     own_heap_free() >= RECLAIM_WAIT_MIN; i++) {
		int64_t left = start + settle_ns[i] - cgm_now_ns();
		struct timespec ts = { (time_t)(left / 1000000000), (long)(left % 1000000000) };

		if (left > 0)
			nanosleep(&ts, NULL);
		cgm_reclaim_self(true);
	}
}

void cgm_reclaim_later(void)
{
	__atomic_store_n(&collect_until_ns, cgm_now_ns() + settle_ns[1], __ATOMIC_RELAXED);
}

void cgm_resident_joined(void)
{
	/* A forked child: what it shares with its parent at the fork is the parent's charge. */
	if (exclusive_only)
		acct_set_anon_base(&cgm_acct, read_anon());
}

bool cgm_resident_exclusive_only(void)
{
	return exclusive_only;
}

void cgm_resident_fork_child(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

	sample_lock = fresh;
	sampling = false;
	exclusive_only = true;
	cgm_next_sample_ns = 0;
	small_sample_after_ns = cgm_now_ns() + SAMPLE_MIN_NS;
	unsampled_bytes = 0;
	collect_until_ns = 0;
}
