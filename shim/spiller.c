/*
 * spill=1: reclaim that compresses.  When the group is over memory.high
 * or at memory.max, or memory.reclaim asks, this process first gives back
 * what mimalloc keeps (shim/resident.c), then moves its coldest resident
 * pages into a compressed pool with the spill engine (zpool/spill.c).
 * The pages leave the process's charge and the pool's memory enters it
 * (accounting/sample.c), as the kernel charges zswap to the memcg.
 *
 * What is spillable is what the group is charged for by residency: the
 * regions of shim/regions.c, mimalloc's heap and the program's own private
 * anonymous mappings (python's arenas).  Coldness: a clock hand goes round
 * the regions, so the pages spilled are those the hand passed longest ago
 * (and has not come back to), and a page that refaults within the working
 * set (its refault distance below the process's resident pages) is skipped
 * until that many more pages have been spilled -- the kernel's workingset
 * rule.  Pages without live data were purged before (mi_collect).
 *
 * Two codecs (spill_recompress=1, the default, for an lz4 pool without a
 * backing file): pages go into the pool with lz4, whose refaults are fast,
 * and those that stay there a second or more are compressed again with
 * zstd (zp_recompress: zram's recompression of idle pages), which packs
 * them a third or so tighter.  The handler thread does it while no fault
 * comes.  Reclaim does it first, before it takes resident pages, to the
 * pool's oldest pages whatever their age: the oldest page in the pool is
 * colder than any resident one, and memory the pool gives back is memory
 * no resident page must leave for (python3 of bench/spill_workload.sh:
 * working phase 5.9 -> 3.8 s, sqlite3 4.9 -> 4.8 s, medians of 4
 * interleaved pairs against recompressing only pages a second old).
 *
 * The constructor only checks that spilling is allowed and starts the
 * background reclaim (shim/bg_reclaim.c).  The pool's libraries, the
 * engine, the pool and the handler thread come at the first reclaim, which
 * that thread makes (cgm_spill_load): a process that never reaches its
 * limit pays for none of them (see spill_libs_ready).  Without the
 * background reclaim (spill_background=0) they are all made in the
 * constructor.  A forked child takes over its copy of them (spill_fork_lazy=1 and the
 * kernel's fork events: see spill_prepare), so a fork brings nothing back;
 * otherwise every spilled page comes back before fork (the child's copy
 * of the address space has no userfaultfd registration, so it would read
 * zeros), and the child makes its own engine at its first reclaim.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgm/accounted.h"
#include "cgm/bind_now.h"
#include "cgm/clock.h"
#include "cgm/lazy_libs.h"
#include "cgm/log.h"
#include "cgm/nocancel.h"
#include "cgm/regions.h"
#include "cgm/self_proc.h"
#include "cgm/shim.h"
#include "cgm/spill.h"
#include "cgm/spiller.h"
#include "cgm/zpool.h"

DEFINE_STATIC_KEY_FALSE(cgm_spill_key);

#define PAGE		4096UL
/* Pages looked at per mincore and spill_out call: one uffd registration each. */
#define CHUNK_PAGES	512
/*
 * Pages a run of spillable ones may bridge: none.  A bridged page would be
 * registered while missing (a fresh page would then fault through the
 * handler) or spilled although written (its second chance lost).
 */
#define GAP_PAGES	0
#define MAX_SPANS	4096
/*
 * Most pages out at once: 64 GiB.  The engine's table grows with what is
 * out (24 bytes a slot, at most two slots a page), so the bound costs
 * nothing until it is used.
 */
#define MAX_SPILLED	(1u << 24)
/* Writeback makes room in batches of this many pages. */
#define WB_BATCH	256
/*
 * Recompression: pages that stayed in the pool this long are idle, for
 * the handler, which does this many between looks for a fault (about
 * 0.5 ms); reclaim, which does not wait for them to age, at most this
 * many per call.
 */
#define RECOMPRESS_AGE_MS	1000
#define RECOMPRESS_IDLE_BATCH	16
#define RECOMPRESS_RECLAIM_MAX	512

static bool allowed;			/* spill=1, and the probe passed */
/* spill=1 was accepted at start-up: cgm_spill_resume() may turn spilling on again... */
static bool resumable;
/* ... unless the program locked its memory (for good). */
static bool locked;
static bool recompress;			/* the pool was made with recompression */
static struct zp_pool *pool;
static struct spill_engine *engine;
static pthread_mutex_t spill_lock = PTHREAD_MUTEX_INITIALIZER;
/*
 * The background reclaim's recompression of the pool, outside spill_lock
 * (background_recompress): it also covers @pool and @recompress, which it
 * reads.  Taken after spill_lock where both are held (the pool's end, a
 * fork).
 */
static pthread_mutex_t recompress_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cgm_region_span *spans;	/* mmap'd: no malloc inside malloc */
static uintptr_t hand;			/* the clock hand */
/*
 * Pages reclaim looked at and pages it spilled, by whose thread: [0] the
 * library's (the background reclaim, the handler), [1] the program's --
 * memory.stat's *_kswapd and *_direct; pgscan is their sum.  The
 * process's own counts, not the engine's (own_counts).
 */
static uint64_t scanned_by[2], stolen_by[2];	/* stolen_by: chunk by chunk, as they go */
/* The background reclaim holds spill_lock for one of its batches. */
static bool background_holding;
static uint64_t second_chances;	/* resident pages left because they were written */
/*
 * Pages came back to a chunk lately (a fault, readahead): the hand looks
 * at which of its pages are written but does not write-protect them
 * again, until BACK_ACTIVE_MS after the last one came back -- as the
 * kernel activates a page that refaults within its working set.  The
 * pages that came back are the ones the program works on now, and each
 * one protected again costs the program a fault at its next write to it
 * (the kernel resolves it; no handler), several microseconds on this VM.
 * python3 in bench/spill_workload.sh's working phase writes a reference
 * count at every read: while its hot records came back, reclaim laps
 * protected them again, and 80% of its faults (26,000-30,000 in 1.5 s)
 * were these.  Written pages still stay (they are not spilled), and the
 * others of the chunk may go: passing such chunks over altogether left
 * sqlite3's build, whose pages come back here and there all over its
 * cache, unable to reclaim, and its working phase 1.2-1.5 times as long.
 */
#define BACK_ACTIVE_MS	1000u
static uint64_t unprotected_back;	/* chunks looked at so (the exit report) */
/* Pool pages recompressed by reclaim in the program's own threads (the exit report). */
static uint64_t recompressed_direct;
/* When a lap last spilled nothing (every page written since the one before). */
static int64_t last_empty_lap_ns;
#define EMPTY_LAP_NS	(20 * 1000000LL)
/* Pressure short of half its want with hot pages left: those back longer ago than this go. */
#define HOT_STUCK_MS	1000u
static uint64_t hot_taken_stuck;	/* pages taken so (the exit report) */
static int64_t last_verbose_ns;
static CGM_TLS bool fork_held;
/* This thread holds spill_lock in cgm_spill_reclaim. */
static CGM_TLS bool spilling;
/* This thread is the engine's handler (spill_idle runs there): it never waits for the lock. */
static CGM_TLS bool on_handler;
/* This thread is the background reclaim (shim/bg_reclaim.c). */
static CGM_TLS bool on_background;

void cgm_spill_background_thread(void)
{
	on_background = true;
	acct_exempt |= ACCT_EXEMPT_HIGH;
}

bool cgm_spill_on(void)
{
	return allowed;
}

/*
 * The handler thread, idle: a memory.reclaim (or a limit written below
 * usage) asked of this process and still unanswered after a whole tick --
 * the program is not allocating, so its slow paths will not answer -- is
 * answered here by spilling (not by collecting: mimalloc's state belongs
 * to the program's threads).  Nothing here touches spillable memory.
 */
#define IDLE_MS 100

static void spill_catch_judge(bool behind);

/* On the handler: is its engine catching first touches (spill_strict_high)?  Not yet set as it starts. */
static bool catching_now(void)
{
	struct spill_engine *e = engine;

	return e && spill_catching(e);
}

static bool spill_idle(void)
{
	static uint32_t pending;
	struct cgm_proc *p = hier_proc(&cgm_acct.h, cgm_acct.proc);
	uint32_t asked;
	bool more = false;

	if (!p)
		return false;
	/* Idle pool pages to zstd, a few at a time: a fault that comes waits for them. */
	if (recompress)
		more = zp_recompress(pool, RECOMPRESS_IDLE_BATCH, RECOMPRESS_AGE_MS) ==
		       RECOMPRESS_IDLE_BATCH;
	/* What the handler brought back since the last sample reaches the group's figures. */
	cgm_spill_publish();
	if (catching_now())
		spill_catch_judge(false);
	asked = __atomic_load_n(&p->reclaim_asked, __ATOMIC_ACQUIRE);
	if (asked == __atomic_load_n(&p->reclaim_done, __ATOMIC_ACQUIRE)) {
		pending = asked;
		return more;
	}
	if (asked != pending) {
		pending = asked;	/* new: give the program's threads a tick */
		return more;
	}
	/*
	 * Not while the background reclaim runs: it answers, and may wait
	 * for the spill lock, which the handler may not (its faults would
	 * wait behind a batch).  Nor while another thread holds that lock:
	 * the handler's answer took the request, spilled nothing, and ended
	 * it -- a python3 whose main thread was bringing every page back
	 * for a fork (0.6-1.8 s with a backing file) answered its pool
	 * workers' requests with 0 pages, and a worker's first malloc
	 * failed (check-spill-lib's multiprocessing pool, two at a time).
	 * The request stays pending for the next tick, or for the thread
	 * holding the lock, whose next slow path answers it.
	 */
	if (cgm_bg_reclaim_started() || pthread_mutex_trylock(&spill_lock) != 0)
		return more;
	pthread_mutex_unlock(&spill_lock);
	on_handler = true;
	cgm_spill_answer(p);
	return more;
}

int64_t cgm_spill_answer(struct cgm_proc *p)
{
	uint32_t asked;
	int64_t got;

	if (!acct_reclaim_begin(p, &asked))
		return -1;
	got = cgm_spill_over_limit(acct_reclaim_take(&cgm_acct), 0, NULL, true);
	acct_reclaim_end(p, asked);
	return got;
}

/* The handler serves faults: the threads that wait for them stall (memory.pressure). */
static void spill_serving(bool start)
{
	if (start)
		psi_memstall_enter(&cgm_acct.h, cgm_acct.proc);
	else
		psi_memstall_leave(&cgm_acct.h, cgm_acct.proc);
}

/*
 * spill_hold_high=1: memory.high holds for the pages that come back too.
 * The kernel charges a swap-in to the faulting task's group, and a task
 * whose charges took its group over memory.high reclaims that much on its
 * way back to user space (mem_cgroup_handle_over_high).  Here the handler
 * thread brings the pages back, and no allocation path sees them before
 * its next sample (a program reading what was spilled may not allocate
 * at all): so as pages come back, the handler samples now and then and
 * spills what the group is over by then, before it serves the next fault
 * (HOLD_LOOK_PAGES).  A program working through its spilled pages pays for
 * them as the faulting task does in the kernel -- here at about ten times
 * the kernel's cost a page, so a program that reads much of what was
 * spilled thrashes: off by default.  Off, the background reclaim stops
 * while the pages it spilled come back as fast as it spills, and the
 * group passes its memory.high meanwhile unless the throttle below
 * (spill_throttle=1) holds it (sqlite3 of bench/spill_workload.sh
 * reading its whole cache back at a commit: twice its memory.high).
 * The background reclaim, when it is spilling, is left to it.
 *
 * spill_hold_max=1: memory.max holds for them too, as far as pages that
 * did not come back lately allow.  It is the limit the kernel never lets
 * a charge pass, and a swap-in at it reclaims (or fails) in the faulting
 * task.  So what a sample finds beyond memory.max (the process's
 * shortfall) is spilled here before the next fault is served, and
 * readahead pauses meanwhile: every page brought back before it is asked
 * for would push another out.  Without it a program reading
 * back what was spilled went far past memory.max: python3 walking 160 MB
 * of records under memory.max=48M had 158 MiB of anonymous memory
 * resident while memory.current said 48M (now 49 MiB, at 8.7 s against
 * 1.9 s: the price of a working set that does not fit).  Pages that
 * refaulted lately are left, as in any reclaim but one that must make
 * room for a charge: taking them too held perl's global destruction
 * (which reads every value of its 200,000-key hash, 42 MiB, under
 * memory.max=30M) at 32 MiB, but at 20 s instead of 1.9 s; left, the
 * group stays over until the program's next charge reclaims.  Off by
 * default: a tight limit then thrashes or fails sooner (mawk's 13 MiB
 * array under memory.max=8M: 4.8 s against 1.0 s; under 6M it ran out
 * of memory).
 */
/* The handler is spilling for what came back (spill_served). */
static bool handler_reclaiming;

/*
 * spill_hold_high=1: how often the handler looks at the group while pages
 * come back, and what it then spills.  A look every 1/64 of the limit's
 * pages (at most HOLD_LOOK_PAGES), and when the group is past 1/64 below
 * its limit, a spill down to 1/32 below it, as the background reclaim
 * does: what comes back until the next look then finds room under the
 * limit, and the program's own threads, whose charges see the group over
 * its memory.high, seldom reclaim for it.  It looked at every charge
 * batch (64 pages) and spilled down to the limit itself, and the looks
 * were most of what holding cost: sqlite3 of bench/spill_sqlite.sql
 * under memory.high=112M built its table in 38.5-44.1 s, now in
 * 24.9-26.2 s, its working phase alike (1.94-2.22 s, now 1.77-2.22;
 * 3 interleaved rounds); python3 reading 100 MB of strings back twice
 * under memory.high=40M (check-spill-lib's hold case) in 1.67-1.86 s at
 * up to 43 MiB, now 1.65-1.69 s at up to 40.  Looking every 512 pages
 * and spilling down to the limit itself left the group over memory.high
 * between looks, where the program's threads reclaimed for it: that
 * python3 took 2.09-2.46 s.
 */
#define HOLD_LOOK_PAGES		512
#define HOLD_LOOK_SHIFT		6
#define HOLD_TARGET_SHIFT	5

/*
 * memory.high throttles the threads that bring pages back, as the
 * kernel's does a task whose swap-in charge took its group over: on its
 * way back to user space it reclaims, and sleeps for a penalty that grows
 * with the square of the overage and with the pages it charged, when
 * that comes to more than 10 ms (mem_cgroup_handle_over_high).  Here the
 * handler brings the pages back, and no thread charges them before a
 * sample: after each batch of faults the handler works out that penalty
 * for the batch's pages from its group's usage and what came back since
 * its last sample; past 10 ms, a sample says by how much the group is
 * really over (the program freed meanwhile, or the background reclaim
 * spilled), the background reclaim is woken, and unless it keeps pace
 * (reclaim_keeps_up) the handler holds off serving the next fault for
 * the penalty.  So the threads that fault pages back are the ones that
 * wait, as in the kernel, though at their next fault rather than after
 * this one.  Without it a program whose working set does not fit under
 * memory.high goes past it while the background reclaim stands back
 * from thrashing: java with a 300 MB heap under memory.high=120M held
 * 116-182 MiB (with it 116-132), node 224 MiB under 100M (with it
 * 95-105, and 28 s instead of 16; both measured when every look held
 * off).  On by default (spill_throttle=1) since the hold-off waits for
 * reclaim to fall behind: memory.high then holds as the kernel's does.
 * spill_throttle=1 only: with each process's start-up memory
 * (the library's in it included) over the limit, a small group thrashes
 * -- check-spill-programs' git workload under memory.high=6M (its peak
 * is 15-19 MiB) took 5-7 s, against 4 s without the key; it was
 * throttled for good there when every look held off, and at 7.5M too
 * until the engines' tables left the charge (own_bytes()) (README).
 */
/* What the handler held off for memory.high (published as throttle_usec); the process's own. */
static uint64_t throttled_ns;
/* Pages the handler brought back since reclaim_keeps_up() last looked (the handler's). */
static uint64_t back_since_look;
/* The pages whose penalty the current hold-off is (the handler's). */
static int64_t hold_pages;

/*
 * While the group is over memory.high, the handler wakes the background
 * reclaim and holds off only if that spills less than comes back
 * (acct_reclaim_keeps_pace: the kernel does not throttle while its reclaim
 * makes progress).  Holding off at every look throttled python3 reading
 * 100 MB of strings over and over under memory.high=40M half the time
 * (1.0-1.5 s of 2.5), a 13 ms hold-off every 20 ms with the group 0.8 MiB
 * over, while the background spilled more than came back; now never, at
 * 41-42 MiB all the same, and 6-7 reads of its strings instead of 5.
 */
static bool reclaim_keeps_up(void)
{
	static struct acct_reclaim_pace pace;
	uint64_t stolen = __atomic_load_n(&stolen_by[0], __ATOMIC_RELAXED) +
			  __atomic_load_n(&stolen_by[1], __ATOMIC_RELAXED);
	bool keeps_up = acct_reclaim_keeps_pace(&pace, stolen, back_since_look);

	back_since_look = 0;
	/*
	 * Behind, but the background reclaim is spilling right now: reclaim
	 * makes progress, which the kernel encourages rather than throttles
	 * (mem_cgroup_handle_over_high retries reclaim while it reclaims
	 * anything).  Without this the first fault after memory.high was
	 * written at half a program's usage -- the background answering the
	 * write, its first chunk not spilled yet -- held the program off for
	 * the whole penalty: 1.0 s in every run of the hot/cold python3 of
	 * scripts/demo, where spill_throttle=0 lost nothing; now 0.
	 */
	return keeps_up || __atomic_load_n(&background_holding, __ATOMIC_RELAXED);
}

/*
 * spill_strict_high=1: memory.high throttles memory touched without an
 * allocation too.  Such memory -- a block filled after its malloc, pages
 * mimalloc purged and hands out again, xz's buffers -- is charged only at
 * the next sample, and no throttle could hold the thread that touches it:
 * fid_prog bigtouch filling 256 MiB 1.5 s after its malloc under
 * memory.high=64M reached 83-112 MiB in 9 runs, and xz -T2 -6 under
 * memory.high=23M 37-40 MiB whenever the handler served its refaults
 * fast (8d3b890, reverted).  The kernel throttles every charge over
 * memory.high.  So while the process could fill past its limit without
 * allocating (the background reclaim's untouched threat) or the handler
 * holds off, the regions are registered MISSING whole (the engine's
 * spill_catch_touches, "caught" in the exit report): a first touch then
 * faults through the handler, whose throttle counts it as a page that
 * came back, a charge batch at a time, and holds off whenever the group
 * is over memory.high -- until reclaim brings it within 10 ms' penalty
 * (spill_holding), as the kernel's task reclaims while it is over --
 * not only when reclaim falls behind.  bigtouch then peaks at 65 MiB.
 * Off by default: a group whose processes' own start-up memory passes
 * its limit (check-spill-programs' pipeline under 6M, which reclaim
 * cannot bring under) is held for good, 2 s a batch, and took more than
 * 60 s instead of 4-6.  Each caught touch costs a handler round trip,
 * so catching ends once the group has stayed below memory.high for
 * CATCH_OFF_NS with no threat seen (a second: ending it clears the
 * regions' write-protect bits, so the coldness reclaim learned there
 * starts again).  The handler and the background judge under catch_lock,
 * by trylock only (the handler must not wait on the background, which
 * may wait on a fault).
 */
#define CATCH_OFF_NS	(1000 * 1000000LL)
static pthread_mutex_t catch_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t catch_under_ns;	/* since when catching saw the group under memory.high (0: not) */
static int64_t catch_threat_ns;	/* when the background last saw an untouched threat */
static uint64_t catch_episodes;

/* Is the group over memory.high by what a charge batch would be throttled for? */
static bool catch_over_high(void)
{
	return acct_high_penalty_ms(&cgm_acct, 0, cgm_acct.batch_pages, false) >
	       CGM_HIGH_DELAY_MIN_MS;
}

/*
 * Judge whether to catch first touches: with @start, catching starts if
 * the group is over memory.high or a threat was seen within CATCH_OFF_NS;
 * otherwise only whether it ends.  The engine must stay open meanwhile
 * (the handler's, or spill_lock held).
 */
static void spill_catch_judge(bool start)
{
	int64_t now;

	if (!cgm_conf.spill_strict_high || pthread_mutex_trylock(&catch_lock))
		return;
	now = cgm_now_ns();
	if (catch_over_high() ||
	    now - __atomic_load_n(&catch_threat_ns, __ATOMIC_RELAXED) < CATCH_OFF_NS) {
		catch_under_ns = 0;
		if (start && !spill_catching(engine) && spill_catch_touches(engine, true) >= 0) {
			catch_episodes++;
			if (cgm_conf.verbose)
				cgm_log("spill: first touches go through the handler now: the group is "
					"over memory.high, or the process could fill past its limit "
					"without allocating");
		}
	} else if (spill_catching(engine)) {
		if (!catch_under_ns) {
			catch_under_ns = now;
		} else if (now - catch_under_ns >= CATCH_OFF_NS) {
			spill_catch_touches(engine, false);
			catch_under_ns = 0;
			if (cgm_conf.verbose)
				cgm_log("spill: first touches no longer go through the handler: the "
					"group stayed under memory.high for a second, with nothing left "
					"to fill past its limit");
		}
	}
	pthread_mutex_unlock(&catch_lock);
}

void cgm_spill_catch_threat(void)
{
	if (!cgm_conf.spill_strict_high || !engine || pthread_mutex_trylock(&spill_lock))
		return;
	if (engine) {
		/* The regions no reclaim met yet are tracked first: only tracked ones are caught. */
		size_t n = spill_catching(engine) ? 0 : cgm_regions_spans(spans, MAX_SPANS);

		__atomic_store_n(&catch_threat_ns, cgm_now_ns(), __ATOMIC_RELAXED);
		for (size_t i = 0; i < n; i++)
			spill_track(engine, (void *)spans[i].start, spans[i].end - spans[i].start);
		spill_catch_judge(true);
	}
	pthread_mutex_unlock(&spill_lock);
}

/*
 * The handler spills @excess pages for what came back (spill_served_hold,
 * handler_reclaim_high), and samples what that left.  True if it spilled
 * anything.
 */
static bool handler_spill(int64_t excess)
{
	bool got;

	on_handler = true;
	__atomic_store_n(&handler_reclaiming, true, __ATOMIC_RELAXED);
	got = cgm_spill_reclaim(excess, NULL, false) > 0;
	if (got)
		cgm_resident_sample(false);
	__atomic_store_n(&handler_reclaiming, false, __ATOMIC_RELAXED);
	return got;
}

/* The handler in place of a walk of the regions it left out (spill_throttle). */
#define WALK_SLEEP_MAX_NS	(20 * 1000000LL)

static uint64_t walk_sleeps;	/* for the exit report */

static void walk_slept(int64_t ns)
{
	struct timespec ts = { 0, ns < WALK_SLEEP_MAX_NS ? (long)ns : (long)WALK_SLEEP_MAX_NS };

	__atomic_add_fetch(&walk_sleeps, 1, __ATOMIC_RELAXED);
	nanosleep(&ts, NULL);
	__atomic_add_fetch(&throttled_ns, (uint64_t)ts.tv_nsec, __ATOMIC_RELAXED);
}

/*
 * No background reclaim (spill_background=0, or its thread could not
 * start): the handler spills for what came back, down to 1/32 below the
 * limit, before it holds off -- as the kernel's faulting task reclaims
 * on its way back to user space and sleeps only for what reclaim left.
 * Nothing else would: the program's threads reclaim in their allocation
 * paths, and the one that faults is blocked in the fault.  Without this,
 * python3 reading 100 MB of strings back under memory.high=40M with
 * spill_background=0 was held off fault after fault, for the whole
 * penalty each time, and had not read them once in 60 s (2 reads take
 * 1.4-1.7 s by default); bench/spill_dict.py's working phase under
 * memory.high=159M alike.  True if it spilled anything.
 */
static bool handler_reclaim_high(void)
{
	int64_t excess = acct_reclaim_excess_below(&cgm_acct, HOLD_TARGET_SHIFT);

	return excess > 0 && handler_spill(excess);
}

static CGM_NOINLINE unsigned spill_throttle(uint64_t pages)
{
	static uint64_t unsampled, unjudged;
	uint64_t ms, walks;

	back_since_look += pages;
	unsampled += pages;
	/*
	 * spill_strict_high=1: judged a charge batch at a time, as the
	 * kernel's penalty is of the pages a task charged, which its stock
	 * takes 64 at a time: a thread touching page after page has each
	 * fault served alone, and the penalty of one page never passes 10 ms
	 * (bigtouch under memory.high=64M was held off 0 times).  Not by
	 * default: the look below, a whole sample, then comes 64 pages apart
	 * instead of at every batch of faults, and a group that the default's
	 * throttle holds by little more than that look's cost (xz -T2 under
	 * memory.high=23M) went to 33-38 MiB instead of 24-32.
	 */
	if (cgm_conf.spill_strict_high) {
		unjudged += pages;
		if (unjudged < (uint64_t)cgm_acct.batch_pages)
			return 0;
		pages = unjudged;
		unjudged = 0;
	}
	if (acct_high_penalty_ms(&cgm_acct, (int64_t)unsampled, (int64_t)pages, false) <=
	    CGM_HIGH_DELAY_MIN_MS)
		return 0;
	/*
	 * The charge from the anon alone where the regions are large and no
	 * sample is due by its cost (cgm_resident_sample(): 2% of the time
	 * at most), not a walk of the regions at every batch of faults of a
	 * group that stays over memory.high: python3 (bench/spill_dict.py)
	 * under memory.high=159M with an lz4-only pool, whose working set
	 * does not fit, had its handler walk them with mincore (and take the
	 * mmap lock the background reclaim's moves wait for) for a third of
	 * the process's time in perf.  But the walk's time is also what holds
	 * xz -T2 near its limit: its threads touch pages for the first time
	 * without allocating, which no throttle sees, and only a slower
	 * handler slows them (with the charge alone, 8d3b890, reverted: 37-40
	 * MiB under memory.high=23M instead of 24, 94-97 under 60M instead of
	 * 63-64).  So a walk left out is slept instead, as long as the last
	 * one took (at most WALK_SLEEP_MAX_NS), counted as throttling: the
	 * pace stays, the CPU goes to reclaim and the program.
	 */
	walks = cgm_resident_walks();
	cgm_resident_sample(true);
	if (cgm_resident_walks() == walks && cgm_resident_walk_ns() > 0)
		walk_slept(cgm_resident_walk_ns());
	unsampled = 0;
	ms = acct_high_penalty_ms(&cgm_acct, 0, (int64_t)pages, true);
	if (ms <= CGM_HIGH_DELAY_MIN_MS)
		return 0;
	cgm_bg_reclaim_kick();
	if (cgm_conf.spill_strict_high)
		spill_catch_judge(true);
	else if (reclaim_keeps_up())
		return 0;
	if (!cgm_bg_reclaim_started() && handler_reclaim_high()) {
		ms = acct_high_penalty_ms(&cgm_acct, 0, (int64_t)pages, false);
		if (ms <= CGM_HIGH_DELAY_MIN_MS)
			return 0;
	}
	hold_pages = (int64_t)pages;
	return (unsigned)ms;
}

/*
 * The hold-off ends once the group's usage, as the background reclaim's
 * samples publish it, no longer earns a penalty past 10 ms: the kernel's
 * faulting task reclaims while that reclaims anything and leaves as soon
 * as its group is that close to memory.high (mem_cgroup_handle_over_high);
 * it sleeps the whole penalty only when reclaim makes no progress, as
 * here a group that nothing samples lower meanwhile waits it out.
 */
static bool spill_holding(int64_t held_ns, bool ended)
{
	if (ended) {
		__atomic_add_fetch(&throttled_ns, (uint64_t)held_ns, __ATOMIC_RELAXED);
		return true;
	}
	return acct_high_penalty_ms(&cgm_acct, 0, hold_pages, false) <= CGM_HIGH_DELAY_MIN_MS;
}

/* spill_hold_high=1, spill_hold_max=1: the handler reclaims for what came back. */
static CGM_NOINLINE void spill_served_hold(uint64_t pages)
{
	static uint64_t unsampled, since_sample;
	int64_t excess;
	bool hold_look = false;

	unsampled += pages;
	since_sample += pages;
	if (unsampled < (uint64_t)cgm_acct.batch_pages)
		return;
	unsampled = 0;
	if (cgm_conf.spill_hold_high) {
		int64_t every = acct_limit_pages(&cgm_acct) >> HOLD_LOOK_SHIFT;

		hold_look = since_sample >= (uint64_t)(every < HOLD_LOOK_PAGES ? every : HOLD_LOOK_PAGES);
	}
	/*
	 * Between the looks of spill_hold_high=1, and for memory.max alone, a
	 * sample only once what came back since the handler's last one may
	 * have taken the group past memory.max: a sample per batch is most of
	 * a refault's cost (under memory.high alone, sqlite3 of
	 * bench/spill_workload.sh: working phase 2.8 -> 5.4 s when every
	 * batch sampled).  (Samples taken elsewhere are not counted: this
	 * errs towards sampling.)
	 */
	if (!hold_look && acct_max_lack(&cgm_acct, (int64_t)since_sample, NULL) <= 0) {
		spill_pause_readahead(engine, false);
		return;
	}
	since_sample = 0;
	/*
	 * A whole sample (the regions walked), as before reclaim's samples
	 * took the anon alone: with the anon alone here, spill_hold_high=1
	 * let memory.current reach 48-49 MiB over memory.high=40M in 2 of 6
	 * runs of check-spill-lib's case, against 40-41.
	 */
	cgm_resident_sample(false);
	excess = cgm_conf.spill_hold_max ? acct_sample_short(&cgm_acct) : 0;
	/* At memory.max every page read ahead displaces one the program may want next. */
	spill_pause_readahead(engine, excess > 0);
	if (excess <= 0 && cgm_conf.spill_hold_high &&
	    acct_reclaim_excess_below(&cgm_acct, HOLD_LOOK_SHIFT) > 0)
		excess = acct_reclaim_excess_below(&cgm_acct, HOLD_TARGET_SHIFT);
	if (excess <= 0)
		return;
	handler_spill(excess);
}

/*
 * Pages came back (the engine's served hook): reclaim for them where
 * asked (spill_served_hold), then throttle what reclaim did not cover.
 * Keyed: its site must lie with the others, in the pages patched at
 * start-up.
 */
static CGM_KEYED unsigned spill_served(uint64_t pages)
{
	if (!static_branch_unlikely(&cgm_limits_key))
		return 0;
	if (catching_now())
		spill_catch_judge(false);
	if (cgm_conf.spill_hold_high || cgm_conf.spill_hold_max)
		spill_served_hold(pages);
	return cgm_conf.spill_throttle ? spill_throttle(pages) : 0;
}

/*
 * spill_backing=FILE: each process writes back to a file of its own,
 * FILE.PID, which leaves the directory as soon as the pool has it open
 * (it goes with the process, however that ends).  They once all opened
 * FILE itself, with O_TRUNC: a forked child that spilled, or any other
 * program started with the same setting, emptied the file under the
 * pages its parent had written back there -- python3 forking under
 * memory.max with a backing file died of SIGBUS in 4 runs of 6
 * ("changed behind the pool's back").
 */
/* A page of its own: only spill_backing writes it, and it once split the bss every process writes. */
CGM_BIG_BSS static char backing_path[4096];

static const char *own_backing(void)
{
	int n;

	if (!cgm_conf.spill_backing[0])
		return NULL;
	n = snprintf(backing_path, sizeof(backing_path), "%s.%d", cgm_conf.spill_backing,
		     (int)getpid());
	if (n < 0 || (size_t)n >= sizeof(backing_path)) {
		cgm_log("spill: spill_backing path too long: no backing file");
		return NULL;
	}
	return backing_path;
}

static bool open_engine(void)
{
	struct zp_options zo = {
		.codec = cgm_conf.spill_codec == CGM_SPILL_ZSTD ? ZP_CODEC_ZSTD : ZP_CODEC_LZ4,
		.backing = own_backing(),
		.recompress = cgm_conf.spill_recompress && cgm_conf.spill_codec == CGM_SPILL_LZ4 &&
			      !cgm_conf.spill_backing[0],
		.no_dict = !cgm_conf.spill_dict,
	};
	int err;

	if (!spans) {
		void *p = mmap(NULL, MAX_SPANS * sizeof(*spans), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return false;
		spans = p;
	}
	pthread_mutex_lock(&recompress_lock);
	err = zp_create_pool(&zo, &pool);
	recompress = !err && zo.recompress;
	pthread_mutex_unlock(&recompress_lock);
	if (zo.backing)
		unlink(zo.backing);
	if (err) {
		cgm_log("spill: cannot create the pool (%s%s): spilling off", cgm_strerror(-err),
			cgm_conf.spill_backing[0] ? ", backing file" : "");
		allowed = false;
		return false;
	}
	err = spill_open(&(struct spill_options){ .pool = pool, .max_pages = MAX_SPILLED,
						  .idle = spill_idle, .idle_ms = IDLE_MS,
						  .serving = spill_serving,
						  .served = spill_served,
						  .holding = spill_holding,
						  .readahead = true,
						  .cpu_latency = cgm_conf.spill_cpu_latency,
						  .create_thread = cgm_pthread_create_raw },
			 &engine);
	if (err) {
		pthread_mutex_lock(&recompress_lock);
		zp_destroy_pool(pool);
		pool = NULL;
		pthread_mutex_unlock(&recompress_lock);
		cgm_log("spill: cannot start (%s): spilling off", cgm_strerror(-err));
		allowed = false;
		return false;
	}
	/* A forked child is not charged for what it shares with its parent: no copy of it is spilled. */
	if (cgm_resident_exclusive_only())
		spill_unshare_shared(engine, false);
	static_branch_enable(&cgm_spill_key);
	/* Samples from here on read through descriptors kept open (shim/self_proc.c). */
	cgm_self_keep_open();
	cgm_bg_reclaim_start();
	if (cgm_conf.spill_core)
		cgm_core_dump_watch();
	if (cgm_conf.verbose) {
		struct spill_stats st;

		spill_stats(engine, &st);
		cgm_log("spill: on, %s pool%s%s%s%s",
			cgm_conf.spill_codec == CGM_SPILL_ZSTD ? "zstd" : "lz4",
			recompress ? ", idle pages recompressed with zstd" : "",
			(recompress || cgm_conf.spill_codec == CGM_SPILL_ZSTD) && cgm_conf.spill_dict ?
			" (against a dictionary of the program's own pages)" : "",
			cgm_conf.spill_backing[0] ? ", writeback to " : "", cgm_conf.spill_backing);
		if (cgm_conf.spill_cpu_latency)
			cgm_log("spill: %s%s", st.cpu_latency_err ?
				"no CPU latency request in fault bursts: /dev/cpu_dma_latency: " :
				"idle CPUs poll during fault bursts (/dev/cpu_dma_latency)",
				st.cpu_latency_err ? cgm_strerror(st.cpu_latency_err) : "");
	}
	return true;
}

/*
 * No function of the library may be bound lazily from here on: the
 * resolver could fault on a spilled page in the handler, or under a lock
 * the handler takes (include/cgm/bind_now.h).
 */
static void bind_all_now(void)
{
	struct cgm_bind_count n;

	if (cgm_bind_now(&n) < 0)
		return;
	if (n.failed)
		cgm_log("spill: %d of the library's %d lazily bound functions not found by "
			"dlsym: they stay lazily bound", n.failed, n.slots);
	if (cgm_conf.verbose)
		cgm_log("spill: %d of the library's %d lazily bound functions bound now, "
			"%d left unbound", n.bound, n.slots, cgm_bind_pending());
}

/* ---- the first reclaim ---- */

static void spill_hold_lock_always(void);

/*
 * The pool's libraries: not loaded until the first reclaim (or the
 * constructor, without the background reclaim).  What a process with
 * spill=1 that never reaches its limit paid for them, the engine and its
 * handler thread, all made in the constructor before: bench/bignum under
 * spill=1,high=100M,max=200M had 2,480 KiB resident at exit against 2,116
 * with the limits alone -- liblz4, libzstd and liburing 200 KiB of it,
 * the spiller's start-up code 100, the handler's stack and the pool's
 * tables the rest.  A futex word: a program thread's reclaim waits on it
 * (spill_libs_ready).
 */
enum { LIBS_NONE, LIBS_READY, LIBS_FAILED };
static uint32_t libs_state;
/*
 * How long a program thread waits for the background thread to load them
 * (a few milliseconds here).  Bounded: the thread that waits may hold the
 * loader's own lock (an allocation inside dlopen, or in a library's
 * constructor), which the load needs.  Its reclaim then gets nothing, as
 * if nothing could be spilled.
 */
#define LIBS_WAIT_NS	(2000 * 1000000LL)

/*
 * This thread is loading them: the reclaims its own allocations (the
 * loader's) would start return at once -- they recursed into the load,
 * and waited for spill_lock inside dlopen, holding the loader's lock that
 * a thread opening the engine needed for its handler (a process exec'd
 * at memory.max hung).
 */
static CGM_TLS bool loading;

bool cgm_spill_load(void)
{
	uint32_t st = __atomic_load_n(&libs_state, __ATOMIC_ACQUIRE);

	if (st != LIBS_NONE || loading)
		return st == LIBS_READY;
	/* Spilling stopped (mlockall, cgm_spill_stop): nothing will use them until it resumes. */
	if (!__atomic_load_n(&allowed, __ATOMIC_RELAXED))
		return false;
	loading = true;
	/* Its own line names the library that is missing, or what failed. */
	if (cgm_lazy_libs_load() < 0) {
		__atomic_store_n(&allowed, false, __ATOMIC_RELAXED);
		resumable = false;
		st = LIBS_FAILED;
	} else {
		bind_all_now();
		/*
		 * The engine too, here, before any other thread may spill
		 * (they wait for LIBS_READY): a thread that took spill_lock
		 * while it held the loader's lock (its allocation in dlopen)
		 * would wait for this one, whose handler thread needs that lock.
		 */
		spill_hold_lock_always();
		if (!engine && __atomic_load_n(&allowed, __ATOMIC_RELAXED))
			open_engine();
		cgm_spill_release();
		st = LIBS_READY;
	}
	loading = false;
	__atomic_store_n(&libs_state, st, __ATOMIC_RELEASE);
	syscall(SYS_futex, &libs_state, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
	return st == LIBS_READY;
}

bool cgm_spill_loading(void)
{
	return loading;
}

bool cgm_spill_loaded(void)
{
	return __atomic_load_n(&libs_state, __ATOMIC_ACQUIRE) == LIBS_READY;
}

bool cgm_spill_load_failed(void)
{
	return __atomic_load_n(&libs_state, __ATOMIC_ACQUIRE) == LIBS_FAILED;
}

/*
 * May this reclaim make the engine, or has it one?  The background thread
 * loads the libraries itself; a program thread asks it to and waits for
 * it.  A program thread never loads them: this may be malloc's slow path,
 * and dlopen allocates and takes the loader's lock.  Not waiting, a
 * program over memory.high was throttled for what spilling covered a few
 * milliseconds later (2 s for spill_prog in test_spill_lib).  After a
 * wait that timed out, the next reclaims do not wait until the load is
 * done: the same thread may still hold the loader's lock.
 */
static bool spill_libs_ready(void)
{
	static bool gave_up;
	int64_t until = 0, now;
	uint32_t st;

	while ((st = __atomic_load_n(&libs_state, __ATOMIC_ACQUIRE)) == LIBS_NONE) {
		if (on_background)
			return cgm_spill_load();
		now = cgm_now_ns();
		if (!until) {
			/* A forked child has no background thread until it needs one. */
			cgm_bg_reclaim_start();
			if (!cgm_bg_reclaim_load_kick() || __atomic_load_n(&gave_up, __ATOMIC_RELAXED))
				return false;
			until = now + LIBS_WAIT_NS;
		}
		if (now >= until) {
			__atomic_store_n(&gave_up, true, __ATOMIC_RELAXED);
			return false;
		}
		syscall(SYS_futex, &libs_state, FUTEX_WAIT_PRIVATE, LIBS_NONE,
			&(struct timespec){ (until - now) / 1000000000, (until - now) % 1000000000 },
			NULL, 0);
	}
	return st == LIBS_READY;
}

static void spill_prepare(void);
static void spill_parent(void);
static void spill_child(void);

void cgm_spill_init(void)
{
	if (!cgm_conf.spill)
		return;
	if (cgm_acct.proc == CGM_NONE) {
		cgm_log("spill=1 needs accounting (a group to reclaim for): spilling off");
		return;
	}
	if (cgm_conf.charge != CGM_CHARGE_RESIDENT) {
		cgm_log("spill=1 needs charge=resident (a spilled page leaves the charge only "
			"when it is charged by residency): spilling off");
		return;
	}
	/* The engine's one line says it is refused, and what to grant. */
	if (spill_probe() < 0)
		return;
	allowed = resumable = true;
	pthread_atfork(spill_prepare, spill_parent, spill_child);
	/* The background thread makes the rest at the first reclaim (spill_libs_ready). */
	cgm_bg_reclaim_start();
	if (cgm_bg_reclaim_started()) {
		if (cgm_conf.verbose)
			cgm_log("spill: on; the pool, its libraries and the fault handler start at "
				"the first reclaim");
		return;
	}
	cgm_spill_load();
}

/* ---- figures ---- */

/* What the engine and the pool say, for the group's figures. */
/*
 * A forked child that kept its copy of the engine: what the copy held at
 * the fork (the parent's, shared copy-on-write), taken off its figures.
 */
static struct acct_spill_state fork_base;
static bool fork_base_set;

static int64_t less_base(int64_t v, int64_t base)
{
	return v > base ? v - base : 0;
}

/*
 * The library's own memory in the process, left out of its charge (struct
 * cgm_proc's own_anon): the engine's tables and scratch as resident, and
 * the pool's tables (@pool_meta, what they can have made resident).  The
 * kernel's counterparts -- zswap's entries and tree, zsmalloc's handles,
 * the buffers it compresses in -- are memory it charges to no group; here
 * they count in the process's anon, and in a small group they kept it
 * over memory.high with nothing left to spill: check-spill-programs' git
 * workload, its engines holding 0.9 MiB of a 7.5M limit, stayed 15-20%
 * over and spill_throttle=1 held it off for good (README).  Measured
 * (a read of /proc/self/pagemap per table) at most every OWN_EVERY_NS:
 * every sample publishes it, and the handler samples as pages come back.
 */
#define OWN_EVERY_NS	(100 * 1000000LL)

static int64_t own_cached, own_at_ns;

static int64_t own_bytes(uint64_t pool_meta)
{
	int64_t now = cgm_now_ns(), at = __atomic_load_n(&own_at_ns, __ATOMIC_RELAXED);
	struct spill_footprint fp;

	if ((at && now - at < OWN_EVERY_NS) || spill_footprint_try(engine, &fp) < 0)
		return __atomic_load_n(&own_cached, __ATOMIC_RELAXED) + (int64_t)pool_meta;
	__atomic_store_n(&own_cached, (int64_t)(fp.tables + fp.scratch), __ATOMIC_RELAXED);
	__atomic_store_n(&own_at_ns, now, __ATOMIC_RELAXED);
	return (int64_t)(fp.tables + fp.scratch + pool_meta);
}

/*
 * The counts an engine closed by cgm_spill_stop() had reached, less what
 * a new one would report from the start (own_counts are the process's):
 * the engine made after cgm_spill_resume() counts from zero, and the
 * totals the group folds must go on from where they were.  Zero in a
 * forked child, whose slot counts afresh.
 */
static int64_t carried[CGM_NR_SPILL_COUNTS];

/*
 * The counts kept by the process rather than the engine, which go on
 * across an engine restart: pgscan and the kswapd and direct parts of it
 * and of pgsteal.  -1 for the engine's.
 */
static void own_counts(int64_t own[CGM_NR_SPILL_COUNTS])
{
	int64_t scan[2], steal[2];

	for (int i = 0; i < CGM_NR_SPILL_COUNTS; i++)
		own[i] = -1;
	for (int k = 0; k < 2; k++) {
		scan[k] = (int64_t)__atomic_load_n(&scanned_by[k], __ATOMIC_RELAXED);
		steal[k] = (int64_t)__atomic_load_n(&stolen_by[k], __ATOMIC_RELAXED);
	}
	own[CGM_STAT_PGSCAN - CGM_STAT_SPILL0] = scan[0] + scan[1];
	own[CGM_STAT_PGSCAN_KSWAPD - CGM_STAT_SPILL0] = scan[0];
	own[CGM_STAT_PGSCAN_DIRECT - CGM_STAT_SPILL0] = scan[1];
	own[CGM_STAT_PGSTEAL_KSWAPD - CGM_STAT_SPILL0] = steal[0];
	own[CGM_STAT_PGSTEAL_DIRECT - CGM_STAT_SPILL0] = steal[1];
}

/*
 * The process's figures as of now.  @own_anon: measure the library's own
 * memory too (own_bytes()), which only a publish needs -- not a stop,
 * which publishes none, nor a forked child's base, taken in its fork
 * handler.
 */
static void spill_state(struct acct_spill_state *out, bool own_anon)
{
	struct acct_spill_state st = { 0 };
	int64_t own[CGM_NR_SPILL_COUNTS];
	struct spill_stats ss;
	struct zp_stats zs;

	spill_stats(engine, &ss);
	zp_pool_stats(pool, &zs);
	st.spilled_pages = (int64_t)ss.in_pool;
	/*
	 * The pool's pages alone, as the kernel's memory.zswap.current counts
	 * its zpool's: the tables (a handle and an entry per page stored or
	 * written back, never shrinking) are like zswap's entries and
	 * zsmalloc's handles, which the kernel allocates without charging
	 * any group; they are left out of the charge (own_bytes()).  Counted
	 * in zswap they filled a small memory.zswap.max on their own once
	 * enough had been written back (python3 building 80 MB under 1M with
	 * a backing file: MemoryError, nothing more could spill).
	 */
	st.zswap = (int64_t)zs.mem_used_total;
	st.zswapped = (int64_t)zs.orig_data_size;
	st.swap = (int64_t)zs.wb_pages_on_disk * (int64_t)PAGE;
	st.counts[CGM_STAT_ZSWPOUT - CGM_STAT_SPILL0] = ss.spilled;
	st.counts[CGM_STAT_ZSWPIN - CGM_STAT_SPILL0] = ss.refaulted + ss.restored + ss.readahead;
	st.counts[CGM_STAT_ZSWPWB - CGM_STAT_SPILL0] = zs.written_back_pages;
	st.counts[CGM_STAT_PSWPIN - CGM_STAT_SPILL0] = zs.wb_loads;
	st.counts[CGM_STAT_PSWPOUT - CGM_STAT_SPILL0] = zs.written_back_pages;
	st.counts[CGM_STAT_WORKINGSET_REFAULT_ANON - CGM_STAT_SPILL0] = ss.refaulted_hot;
	st.counts[CGM_STAT_PGSTEAL - CGM_STAT_SPILL0] = ss.spilled;
	/*
	 * As long as the handler held off (spill_holding); not the engine's
	 * held_off_ms, which starts again with each engine while this total
	 * must only grow.
	 */
	st.throttle_ns = __atomic_load_n(&throttled_ns, __ATOMIC_RELAXED);
	/* A forked child's copy is in the anon it inherited: nothing to leave out of it. */
	if (own_anon && !fork_base_set)
		st.own_anon = own_bytes(zs.meta_bytes);
	own_counts(own);
	for (int i = 0; i < CGM_NR_SPILL_COUNTS; i++)
		if (own[i] >= 0)
			st.counts[i] = (uint64_t)own[i];
	if (fork_base_set) {
		st.spilled_pages = less_base(st.spilled_pages, fork_base.spilled_pages);
		st.zswap = less_base(st.zswap, fork_base.zswap);
		st.zswapped = less_base(st.zswapped, fork_base.zswapped);
		st.swap = less_base(st.swap, fork_base.swap);
		for (int i = 0; i < CGM_NR_SPILL_COUNTS; i++)
			st.counts[i] = (uint64_t)less_base((int64_t)st.counts[i],
							   (int64_t)fork_base.counts[i]);
	}
	for (int i = 0; i < CGM_NR_SPILL_COUNTS; i++)
		st.counts[i] = (uint64_t)((int64_t)st.counts[i] + carried[i]);
	*out = st;
}

void cgm_spill_publish(void)
{
	struct acct_spill_state st;

	if (!engine)
		return;
	spill_state(&st, true);
	acct_spill_publish(&cgm_acct, &st);
}

void cgm_spill_mark_refaults(void)
{
	if (engine)
		spill_mark_refaults(engine);
}

uint64_t cgm_spill_refaults_since_mark(void)
{
	return engine ? spill_refaults_since_mark(engine) : 0;
}

int cgm_spill_report(char *buf, size_t len)
{
	struct spill_stats ss;
	struct spill_footprint fp;
	struct zp_stats zs;

	if (!engine)
		return 0;
	spill_stats(engine, &ss);
	spill_footprint(engine, &fp);
	zp_pool_stats(pool, &zs);
	return snprintf(buf, len,
			"== spill\nspilled %llu refaulted %llu (hot %llu) read ahead %llu restored %llu "
			"discarded %llu misreported %llu zero_filled %llu unshared %llu "
			"skipped %llu (hot %llu, written %llu, in chunks just back %llu) hot_taken_stuck %llu in_pool %llu pool_bytes %llu dict_stores %llu "
			"written_back %llu recompressed %llu (by the program's threads %llu, "
			"against the dictionary %llu) zstd_at_once %llu (against the dictionary %llu) "
			"engine_bytes %zu (scratch %zu) held_off %llu (%llu ms) background %llu (stopped %llu) "
			"caught %llu samples walked %llu (slept %llu)\n",
			(unsigned long long)ss.spilled, (unsigned long long)ss.refaulted,
			(unsigned long long)ss.refaulted_hot, (unsigned long long)ss.readahead,
			(unsigned long long)ss.restored,
			(unsigned long long)ss.forgotten, (unsigned long long)ss.misreported,
			(unsigned long long)ss.zero_filled, (unsigned long long)ss.unshared,
			(unsigned long long)ss.skipped,
			(unsigned long long)ss.skipped_hot, (unsigned long long)second_chances,
			(unsigned long long)unprotected_back,
			(unsigned long long)__atomic_load_n(&hot_taken_stuck, __ATOMIC_RELAXED),
			(unsigned long long)ss.in_pool,
			(unsigned long long)(zs.mem_used_total + zs.meta_bytes),
			(unsigned long long)zs.stored_dict,
			(unsigned long long)zs.written_back_pages,
			(unsigned long long)zs.recompressed_pages,
			(unsigned long long)__atomic_load_n(&recompressed_direct, __ATOMIC_RELAXED),
			(unsigned long long)zs.recompressed_dict,
			(unsigned long long)zs.stored_dense,
			(unsigned long long)zs.stored_dense_dict,
			fp.tables + fp.scratch, fp.scratch,
			(unsigned long long)ss.held_off, (unsigned long long)ss.held_off_ms,
			(unsigned long long)cgm_bg_reclaim_pages(),
			(unsigned long long)cgm_bg_reclaim_thrash_stops(),
			(unsigned long long)catch_episodes,
			(unsigned long long)cgm_resident_walks(),
			(unsigned long long)__atomic_load_n(&walk_sleeps, __ATOMIC_RELAXED));
}

/* ---- choosing pages ---- */

/*
 * May the pool write back now: a backing file is configured, the group
 * allows it (memory.zswap.writeback) and memory.swap.max has room for a
 * batch.
 */
static bool writeback_allowed(void)
{
	struct cgm_proc *p = hier_proc(&cgm_acct.h, cgm_acct.proc);
	struct cgm_group *g = p ? hier_group(&cgm_acct.h, p->group) : NULL;

	return cgm_conf.spill_backing[0] && g && __atomic_load_n(&g->zswap_writeback, __ATOMIC_RELAXED) &&
	       acct_zswap_room(&cgm_acct, true) >= WB_BATCH * (int64_t)PAGE;
}

/* The group's figures must see the pool change before the next look at them. */
static void pool_republish(void)
{
	cgm_spill_publish();
	rstat_fold_sampled(&cgm_acct.h, cgm_acct.proc);
}

/*
 * How many of @pages the pool has room for under memory.zswap.max (a
 * compressed page takes a third of a page or so: half a page is asked
 * for each), after writing back the oldest entries if the group allows
 * it and there is a backing file.  0: none.
 *
 * Fewer than @pages is an answer too.  It was all or nothing per chunk
 * (512 pages: 1 MiB of room), and under a small memory.zswap.max less
 * than a chunk's room may be all there is: python3 under
 * memory.zswap.max=2M with a backing file, its pool empty after its forks
 * had brought everything back, had 1,035,108 bytes of room (the pool's
 * tables then counted in zswap), found no chunk it could take ("0
 * spilled of 0 resident looked at") and got MemoryError.
 */
static int64_t pool_fit(int64_t pages)
{
	int64_t room;

	for (int i = 0;; i++) {
		/* The group's zswap as of now: this lap's stores included. */
		pool_republish();
		room = acct_zswap_room(&cgm_acct, false);
		if (room >= pages * (int64_t)PAGE / 2)
			return pages;
		/* Past memory.zswap.max: the oldest entries go to the backing file, as far as swap.max lets them. */
		if (i == 16 || !writeback_allowed() || zp_writeback(pool, WB_BATCH) <= 0)
			return room / (PAGE / 2);
	}
}

/*
 * A reclaim that must make room (a charge refused at memory.max,
 * memory.reclaim, a limit write) and fell @pages short after the laps:
 * the pool's oldest entries go to the backing file, as the kernel's zswap
 * shrinker writes zswap back to swap under a memcg's pressure
 * (memory.zswap.writeback=1).  The pool is charged to the group, and
 * without this a limit below what the pool holds could never be met:
 * python3 building 160 MB of records that compress 2:1 under
 * memory.max=24M with a backing file ended in MemoryError with nothing
 * written back.  Objects written back leave their zspages; the pages
 * come back once a zspage is empty, so the pool is compacted when
 * writeback alone gave back too little.  Returns the pool pages given
 * back.
 */
#define WB_PRESSURE_BATCHES 64

static int64_t pool_write_back_for(int64_t pages)
{
	int64_t before = (int64_t)zp_get_total_pages(pool), gave = 0;
	int batches = 0;

	while (batches < WB_PRESSURE_BATCHES && gave < pages && writeback_allowed()) {
		if (zp_writeback(pool, WB_BATCH) <= 0)
			break;
		/* Every few batches, the zspages they thinned out are packed. */
		if (++batches % 8 == 0)
			zp_compact(pool);
		gave = before - (int64_t)zp_get_total_pages(pool);
		pool_republish();
	}
	if (batches % 8 && gave < pages) {
		zp_compact(pool);
		gave = before - (int64_t)zp_get_total_pages(pool);
		pool_republish();
	}
	return gave > 0 ? gave : 0;
}

/*
 * Pages the background spilled since its window began (bg_reclaim.c)
 * that may come back before it stops storing zstd at once
 * (spill_background_zstd) for the rest of the window: past it, the pages
 * it spills are not that cold here, and lz4 both spills them faster and
 * brings them back faster.  Without it, python3 reading its strings over
 * and over under memory.high=40M (check-spill-lib's thrashing case) let
 * the group spill 45,129, 46,318 and 100,202 pages in 2.5 s in 3 runs of
 * about 60, against 13,000-35,000 in the others: a window grows until a
 * quarter of it has come back, and with zstd the program's passes over
 * what is spilled slow down while the thread spills faster.  With it:
 * 15,823-36,107 in 14 runs (the build before zstd at once: 11,615-29,704
 * in 14 runs beside them).
 */
#define BG_DENSE_BACK	1024

/*
 * spill_background_zstd=1: the background reclaim's pages go to zstd at
 * once (zp_store_dense), as recompression would leave them.  They are
 * the coldest pages, and in a pool that must recompress to fit (python3
 * of bench/spill_workload.sh under memory.high at half its peak: 52,530
 * of 55,059 pool pages recompressed) a page stored with lz4 costs its lz4
 * compression, then an lz4 decompression and the zstd compression anyway.
 * Timed inside the background thread there: batches of 256 pages took
 * 17-39 ms, 20 ms and more of it recompressing up to 512 pool pages (some
 * 40 us each) to give back 90-200 pool pages, while the pages came back
 * at 20-35 a millisecond; so the program's own thread found the group
 * 13,000-15,000 pages over memory.high and spilled them itself (0.18-0.23
 * s in one reclaim).  The handler's refaults and the program thread's
 * reclaim keep lz4, whose loads are faster.
 */
static long spill_run(void *addr, size_t npages)
{
	/* (Only the background marks refaults: the count is of its window.) */
	if (on_background && cgm_conf.spill_background_zstd &&
	    cgm_spill_refaults_since_mark() < BG_DENSE_BACK)
		return spill_out_dense(engine, addr, npages);
	return spill_out(engine, addr, npages);
}

/*
 * Spill the resident pages of [start, end) (at most CHUNK_PAGES), in runs
 * that bridge small gaps.  Returns the pages spilled; *scanned counts
 * the resident ones looked at; *full is set when the engine refused
 * another run (as many out as the process's mappings allow: spill_open's
 * range budget).  In a chunk that pages came back to lately, written
 * pages are not protected again, unless @all.
 */
static int64_t spill_chunk(uintptr_t start, uintptr_t end, int64_t want, uint64_t *scanned,
			   bool tracked, bool all, bool *full)
{
	unsigned char vec[CHUNK_PAGES];
	size_t n = (end - start) / PAGE, i = 0;
	int64_t got = 0;

	if (mincore((void *)start, end - start, vec) < 0)
		return 0;
	/*
	 * Pages written since the hand last passed get a second chance: they
	 * stay, and are write-protected again, so that the next pass sees
	 * whether they are written meanwhile -- not where pages came back
	 * lately (BACK_ACTIVE_MS), but on a second lap.
	 */
	if (tracked) {
		struct spill_run runs[64];
		bool protect = all || !spill_came_back_within(engine, (void *)start, end - start,
								BACK_ACTIVE_MS);
		long nr = spill_written(engine, (void *)start, end - start, runs, 64, protect);

		if (!protect)
			unprotected_back++;
		for (long r = 0; r < nr; r++) {
			size_t from = ((uintptr_t)runs[r].addr - start) / PAGE;

			for (size_t k = from; k < from + runs[r].npages && k < n; k++) {
				*scanned += vec[k] & 1;
				vec[k] = 0;
				second_chances++;
			}
		}
	}
	while (i < n && got < want) {
		size_t first, last, gap = 0;

		while (i < n && !(vec[i] & 1))
			i++;
		if (i == n)
			break;
		first = last = i;
		for (; i < n && gap <= GAP_PAGES; i++) {
			if (vec[i] & 1) {
				last = i;
				gap = 0;
				(*scanned)++;
			} else {
				gap++;
			}
		}
		{
			long r = spill_run((void *)(start + first * PAGE), last - first + 1);

			if (r > 0)
				got += r;
			if (r == -ENOSPC) {
				*full = true;
				break;
			}
			if (r == -EBADF) {
				/* Closed by a raw system call (shim/fd_guard.c sees the rest). */
				static int said;

				cgm_log_once(&said, "spill: the program closed the engine's descriptors: "
					     "no more pages spill");
				*full = true;
				break;
			}
		}
		i = last + 1;
	}
	return got;
}

/* One lap at most of the clock over the regions, from the hand; with @all, chunks just back protected too. */
static int64_t spill_lap(int64_t want, uint64_t *scanned, bool all)
{
	size_t n = cgm_regions_spans(spans, MAX_SPANS), first = 0;
	int64_t got = 0;
	bool full = false;

	if (!n)
		return 0;
	while (first < n && spans[first].end <= hand)
		first++;
	for (size_t k = 0; k <= n && got < want; k++) {
		size_t i = (first + k) % n;
		uintptr_t pos = spans[i].start;
		bool tracked;

		/* The hand's own region is taken from the hand on, and its start at the end of the lap. */
		if (k == 0 && hand > pos && hand < spans[i].end)
			pos = hand;
		else if (k == n)
			break;
		/* A region first met starts its write tracking here (the kernel may lack it). */
		tracked = spill_track(engine, (void *)spans[i].start,
				      spans[i].end - spans[i].start) == 0;
		while (pos < spans[i].end && got < want) {
			uintptr_t end = pos + CHUNK_PAGES * PAGE < spans[i].end ?
					pos + CHUNK_PAGES * PAGE : spans[i].end;

			int64_t fit = pool_fit(end - pos > PAGE ? (int64_t)((end - pos) / PAGE) : 1);

			if (fit <= 0)
				return got;
			int64_t chunk = spill_chunk(pos, end, want - got < fit ? want - got : fit,
						    scanned, tracked, all, &full);

			/* Counted now, not at the reclaim's end: reclaim_keeps_up() sees the progress. */
			if (chunk > 0)
				__atomic_add_fetch(&stolen_by[!on_background && !on_handler],
						   (uint64_t)chunk, __ATOMIC_RELAXED);
			got += chunk;
			pos = end;
			hand = pos;
			/* No room for another run: the rest of the lap would be refused too. */
			if (full)
				return got;
		}
	}
	return got;
}

/* The longest the handler waits for one (a batch recompressing took 32 ms here). */
#define HANDLER_WAIT_NS	(50 * 1000000L)

/* Take spill_lock, waiting @ns at most: pthread_mutex_clocklock()'s result. */
static int spill_lock_within(long ns)
{
	int64_t until_ns = cgm_now_ns() + ns;

	return pthread_mutex_clocklock(&spill_lock, CLOCK_MONOTONIC,
				       &(struct timespec){ until_ns / 1000000000,
							   until_ns % 1000000000 });
}

/* How long the background reclaim's round waits for the lock between looks for a request. */
#define BACKGROUND_LOOK_NS	(5 * 1000000L)

/*
 * The background reclaim's round waits for the lock in slices, and gives
 * its batch up when a memory.reclaim or another process's refused charge
 * asks this process for reclaim meanwhile: the thread then begins that
 * answer, and an asker waits for a process that is answering, where it
 * gives up after half a second on one that has not begun.  Blocked here
 * while the main thread brought every page back for a fork (0.6-1.8 s
 * with a backing file), it began no answer, and python3's pool workers,
 * refused their first malloc, found their parent silent.
 */
static bool background_lock_take(void)
{
	struct cgm_proc *p = hier_proc(&cgm_acct.h, cgm_acct.proc);

	for (;;) {
		int err = spill_lock_within(BACKGROUND_LOOK_NS);

		if (err != ETIMEDOUT)
			return err == 0;
		if (p && acct_reclaim_pending(p))
			return false;
	}
}

/*
 * Take spill_lock for a reclaim, or say why not (see cgm_spill_reclaim).
 * The handler waits only when it holds a limit for what came back
 * (spill_served) and the background reclaim has the lock: otherwise it
 * tried once a charge batch of pages served and went on serving, and
 * the background, which takes the lock again as soon as its batch ends,
 * had it nearly always -- python3 reading back 150 MiB under
 * memory.high=40M with spill_hold_high=1 found it taken 300-470 times
 * against 20-90 spills of its own, and reached 50-68 MiB.  The
 * background touches no spillable memory, so it never waits for the
 * handler; the wait is still bounded, since the lock may pass meanwhile
 * to a thread that does (a fork waits for the handler to read its
 * event).
 */
static bool spill_lock_take(bool thorough)
{
	if (pthread_mutex_trylock(&spill_lock) == 0)
		return true;
	if (spilling)
		return false;
	if (on_handler) {
		if (!__atomic_load_n(&handler_reclaiming, __ATOMIC_RELAXED) ||
		    !__atomic_load_n(&background_holding, __ATOMIC_RELAXED))
			return false;
		return spill_lock_within(HANDLER_WAIT_NS) == 0;
	}
	if (!thorough && !cgm_bg_reclaim_busy() &&
	    !__atomic_load_n(&handler_reclaiming, __ATOMIC_RELAXED))
		return false;
	if (on_background && !thorough)
		return background_lock_take();
	return pthread_mutex_lock(&spill_lock) == 0;
}

/*
 * Recompress up to four times @want of the pool's oldest pages (at most
 * RECOMPRESS_RECLAIM_MAX) to zstd; *@freed: the pool pages that gave
 * back.  Returns the pages recompressed.
 */
static long pool_recompress(int64_t want, int64_t *freed)
{
	int64_t before = (int64_t)zp_get_total_pages(pool);
	long n = zp_recompress(pool, want * 4 < RECOMPRESS_RECLAIM_MAX ? (unsigned long)want * 4 :
						  RECOMPRESS_RECLAIM_MAX, 0);
	int64_t after = (int64_t)zp_get_total_pages(pool);

	*freed = before > after ? before - after : 0;
	return n;
}

/*
 * The background reclaim's pool_recompress(), under recompress_lock
 * alone; false without a pool that recompresses.
 */
static bool background_recompress(int64_t want, int64_t *freed)
{
	bool done = false;

	pthread_mutex_lock(&recompress_lock);
	if (pool && recompress) {
		pool_recompress(want, freed);
		done = true;
	}
	pthread_mutex_unlock(&recompress_lock);
	return done;
}

int64_t cgm_spill_reclaim(int64_t want, uint64_t *looked, bool thorough)
{
	sigset_t all, old;
	uint64_t scanned = 0;
	int64_t got = 0, freed = 0, start;
	bool background_done = false;
	int nc;

	if (!allowed || want <= 0 || loading || !spill_libs_ready())
		return 0;
	/*
	 * A lap that found every page written a moment ago is not tried again
	 * within the next 20 ms by pressure alone: the pages need time to
	 * show which stay unwritten, and meanwhile the charge is throttled.
	 */
	if (!thorough && cgm_now_ns() - __atomic_load_n(&last_empty_lap_ns, __ATOMIC_RELAXED) <
			 EMPTY_LAP_NS)
		return 0;
	/*
	 * Signals are blocked while pages are in transit: a handler that
	 * touched one of them here (malloc in a signal handler) would wait
	 * for this very thread to finish storing it.
	 */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	nc = cgm_nocancel_begin();
	/*
	 * Another thread spilling: for pressure, its spill is as good as
	 * ours -- unless it is the background reclaim, whose batch ends soon
	 * and which does not spill for this thread's charge, or the handler
	 * holding memory.max for what came back (the room it makes is the
	 * group's, not this charge's): wait for it rather than be throttled.
	 * A thorough reclaim (a charge refused at memory.max) always waits
	 * and then spills what it still needs: the other thread spills for
	 * its own charge, and a refused charge that came back empty-handed
	 * while it did ran through its retries in no time and failed --
	 * node's garbage-collector threads, several at memory.max at once,
	 * got NULL from malloc (and V8, which does not check, SIGSEGV) in 2
	 * of 4 runs of 400,000 strings under memory.max=100M.
	 * Never when this very thread holds the lock (the engine's own munmap
	 * comes through the library's, whose sample may ask for reclaim), nor
	 * on the handler thread, whose faults would wait behind the batch --
	 * but for a background batch when it holds a limit (spill_lock_take).
	 *
	 * The background reclaim recompresses before it takes the lock: a
	 * program thread under pressure waits for the background's batch
	 * (spill_wait_background), and waited for the recompression too --
	 * 512 pages to zstd, 15-20 ms on this VM, for a spill of 256 pages
	 * that took 8.  python3 of bench/spill_workload.sh lost 180 ms of a
	 * 2.8 s working phase in 9 such waits of 20-30 ms each.
	 */
	if (on_background && !thorough && background_recompress(want, &freed))
		background_done = true;
	if (!spill_lock_take(thorough)) {
		cgm_nocancel_end(nc);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return 0;
	}
	spilling = true;
	if (on_background)
		__atomic_store_n(&background_holding, true, __ATOMIC_RELAXED);
	start = cgm_now_ns();
	/* (Not if the program locked its memory since the check above.) */
	if (engine || (__atomic_load_n(&allowed, __ATOMIC_RELAXED) && open_engine())) {
		struct cgm_proc *p = hier_proc(&cgm_acct.h, cgm_acct.proc);

		/* Hot: refaulting within as many spills as the process has pages resident. */
		size_t hot_distance = p ? (size_t)(__atomic_load_n(&p->sampled[CGM_STAT_ANON], __ATOMIC_RELAXED) /
						   (int64_t)PAGE) : 0;
		bool program_thread = !on_background && !on_handler;
		uint64_t hot_before = spill_skipped_hot(engine);

		spill_set_hot_distance(engine, hot_distance);
		/*
		 * The pool's oldest pages to zstd first: what the pool gives
		 * back, no resident page must.  Not for pressure alone on a
		 * program thread while the background reclaim runs: there zstd
		 * is the program's time (python3 of bench/spill_workload.sh: 17%
		 * of its thread's working phase in zp_recompress, at up to 512
		 * pages a reclaim), and the background thread recompresses on
		 * its own batches, before it takes the lock (above).  A reclaim
		 * that must reach its amount (a memory.reclaim, a charge refused
		 * at memory.max) still does.
		 */
		if (recompress && !background_done &&
		    (thorough || !program_thread || !cgm_bg_reclaim_started())) {
			long n = pool_recompress(want, &freed);

			if (n > 0 && program_thread)
				__atomic_add_fetch(&recompressed_direct, (uint64_t)n, __ATOMIC_RELAXED);
		}
		if (freed < want)
			got = spill_lap(want - freed, &scanned, false);
		/*
		 * A whole lap of second chances: go round again and take what
		 * was not written since -- pages of regions met for the first
		 * time, never protected yet, included -- as the kernel's reclaim
		 * deactivates its active pages and takes them on the next pass
		 * when the inactive ones do not suffice.  An explicit reclaim
		 * always does; pressure does when the first lap got nothing or
		 * the group is still far over (a quarter of the want left).
		 * This lap protects written pages where pages came back lately
		 * too: what came back is written as far as the hand can tell,
		 * and sqlite3's build (bench/spill_workload.sh), which reads
		 * much of its cache back at the end, ended its build at 220 MiB
		 * under memory.high=112M in 4 runs of 5 when they stayed
		 * unprotected here after a first lap that got a little (3 of
		 * 10 before chunks just back were left unprotected; 1 of 6
		 * with this lap).
		 */
		if (freed + got < want && (thorough || !got || want - freed - got > want / 4))
			got += spill_lap(want - freed - got, &scanned, true);
		/*
		 * Pressure that got less than half its want and left hot pages
		 * in place: those that came back more than HOT_STUCK_MS ago are
		 * taken.  While little is spilled the distance that would cool
		 * them hardly grows, and only their 10 s age did:
		 *  - check-spill-programs' python3 under memory.high, its dict
		 *    read back once, sat at its limit with 0 of 15,480 resident
		 *    pages taken, and was held off 4-9.5 s in 4 runs of 38
		 *    (none of 30 with this lap);
		 *  - with spill_background=0, where the program's threads and
		 *    the handler reclaim alone, each reclaim took a few pages of
		 *    the 1,800 it wanted: fork_workload.py at half its peak was
		 *    throttled 20-27 s (now 2.6-5.5), python3's dict/list at 40%
		 *    took 18.7 s (11.7), perl's 37 s (18.5).
		 * Not every hot page, as a thorough reclaim takes them below:
		 * a pipeline under memory.high=6M, whose own pages pass its
		 * limit, thrashed so (2.2-20 s against 4.4-5.8; with this lap
		 * 3.1-6.3 s against 4.7-6.7 in 5 interleaved pairs).
		 */
		if (!thorough && freed + got < want / 2 && hot_distance &&
		    spill_skipped_hot(engine) != hot_before) {
			int64_t aged;

			spill_set_hot_age(engine, HOT_STUCK_MS);
			aged = spill_lap(want - freed - got, &scanned, true);
			spill_set_hot_age(engine, 0);
			got += aged;
			__atomic_add_fetch(&hot_taken_stuck, (uint64_t)aged, __ATOMIC_RELAXED);
		}
		if (thorough && freed + got < want)
			freed += pool_write_back_for(want - freed - got);
		/*
		 * Still short where room must be made: pages that came back
		 * lately are taken too, as the kernel's reclaim deactivates
		 * its active pages when the inactive ones do not suffice.  A
		 * refault marks a page hot for up to 10 s, and while nothing
		 * is spilled the distance that would end it does not grow:
		 * python3 checking its records under memory.max=32M (every
		 * old page read back once, then a new copy built) had 15,549
		 * resident pages looked at, 5 spilled, and a MemoryError.
		 */
		if (thorough && freed + got < want && hot_distance) {
			spill_set_hot_distance(engine, 0);
			got += spill_lap(want - freed - got, &scanned, true);
			spill_set_hot_distance(engine, hot_distance);
		}
		/* The staging copies of what was spilled go now, not at the next reclaim. */
		spill_stage_clear(engine);
		__atomic_add_fetch(&scanned_by[program_thread], scanned, __ATOMIC_RELAXED);
		if (!got && !freed)
			__atomic_store_n(&last_empty_lap_ns, cgm_now_ns(), __ATOMIC_RELAXED);
		cgm_spill_publish();
	}
	spilling = false;
	if (on_background)
		__atomic_store_n(&background_holding, false, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&spill_lock);
	cgm_nocancel_end(nc);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (looked)
		*looked += scanned;
	if (cgm_conf.verbose && cgm_now_ns() - last_verbose_ns > 1000000000LL) {
		struct zp_stats zs;

		last_verbose_ns = cgm_now_ns();
		zp_pool_stats(pool, &zs);
		cgm_log("spill: reclaim wanted %lld pages: %lld spilled of %llu resident looked at, "
			"%lld pool pages given back by recompression, in %lld us; pool: %llu pages "
			"in %llu KiB compressed, %llu KiB of memory (%llu recompressed)", (long long)want,
			(long long)got, (unsigned long long)scanned, (long long)freed,
			(long long)((cgm_now_ns() - start) / 1000),
			(unsigned long long)(zs.orig_data_size / PAGE),
			(unsigned long long)(zs.compr_data_size >> 10),
			(unsigned long long)(zs.mem_used_total >> 10),
			(unsigned long long)zs.recompressed_pages);
	}
	return got + freed;
}

/*
 * The background reclaim is in the middle of a batch: wait for it to end
 * (about 2 ms at most).  True if this thread waited.
 */
static bool spill_wait_background(void)
{
	sigset_t all, old;
	bool waited = false;

	if (!engine || spilling || on_handler || !cgm_bg_reclaim_busy())
		return false;
	/* As a spill: a signal handler's malloc must not find the lock held by this thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_mutex_trylock(&spill_lock) != 0) {
		if (pthread_mutex_lock(&spill_lock) != 0)
			goto out;
		waited = true;
	}
	pthread_mutex_unlock(&spill_lock);
out:
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return waited;
}

/*
 * Spill @want pages (what memory.reclaim asked of this process), or what
 * is still over the lower of memory.high and memory.max (a charge batch
 * beyond it: room for the charge that asked), or what must go before a
 * refused charge of @need pages fits under memory.max, whichever is
 * more.  The pool grows by the compressed copies, so it spills again,
 * eight rounds at most, until the group is under or nothing more goes.
 * Returns the pages spilled.
 */
int64_t cgm_spill_over_limit(int64_t want, int64_t need, uint64_t *looked, bool thorough)
{
	int64_t got, total = 0;

	for (int round = 0; round < 8; round++) {
		int64_t excess;

		/*
		 * Pressure while the background reclaim spills: what is over
		 * is looked at again after its batch, which may have covered
		 * it -- a program thread's own reclaim is the program's time.
		 * (Before, the thread waited for the batch and then spilled
		 * what had been over before it.)
		 */
		if (!thorough && spill_wait_background())
			cgm_resident_charge(false);
		excess = acct_reclaim_excess(&cgm_acct);
		if (need > 0) {
			int64_t lack = acct_max_lack(&cgm_acct, need, NULL);

			if (lack > excess)
				excess = lack;
		}

		/* The pool takes about a third of what it is given back: ask half as much again. */
		if (excess > 0 && excess + excess / 2 + cgm_acct.batch_pages > want)
			want = excess + excess / 2 + cgm_acct.batch_pages;
		if (want <= 0 || (got = cgm_spill_reclaim(want, looked, thorough)) <= 0)
			break;
		total += got;
		cgm_resident_charge(false);
		want = 0;
	}
	return total;
}

/* ---- what the program does to spilled memory ---- */


static CGM_TLS sigset_t hold_mask;
static CGM_TLS int hold_cancel;

/*
 * Hold off spilling while the program changes its mappings (the discard
 * or move must not race a spill of the same pages): the spill lock, with
 * signals blocked as a spilling thread has them.
 */
static void spill_hold_lock_always(void)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &hold_mask);
	hold_cancel = cgm_nocancel_begin();
	pthread_mutex_lock(&spill_lock);
}

static bool spill_hold_lock(void)
{
	if (!engine)
		return false;
	spill_hold_lock_always();
	/* A forked child may have dropped the engine meanwhile: nothing to hold. */
	if (!engine) {
		cgm_spill_release();
		return false;
	}
	return true;
}

bool cgm_spill_hold(const void *addr, size_t len, const void *onto, size_t onto_len)
{
	if (!spill_hold_lock())
		return false;
	spill_release_range(engine, addr, len);
	/* mremap needs the mapping whole: no registration left on it. */
	spill_untrack(engine, addr, len);
	/*
	 * What it replaces is unmapped.  Its spilled pages kept, a later
	 * restore put them back into the moved mapping (or failed, "could
	 * not be put back", where nothing was registered there any more):
	 * check-spill-model once read another mapping's bytes in the part a
	 * mremap onto it had grown.
	 */
	if (onto)
		spill_unmapped(engine, onto, onto_len);
	return true;
}

void cgm_spill_release(void)
{
	pthread_mutex_unlock(&spill_lock);
	cgm_nocancel_end(hold_cancel);
	pthread_sigmask(SIG_SETMASK, &hold_mask, NULL);
}

bool cgm_spill_discard_begin(const void *addr, size_t len, bool unmaps)
{
	/* Unaligned: the call fails with EINVAL and discards nothing. */
	if ((uintptr_t)addr % PAGE || !spill_hold_lock())
		return false;
	if (unmaps)
		spill_unmapped(engine, addr, len);
	else
		spill_forget_range(engine, addr, len);
	return true;
}

/* ---- the end of spilling in this process ---- */

/*
 * The engine (closed: every spilled page comes back; or, in a forked
 * child, abandoned: its thread is the parent's), the pool and the key go.
 * Spill lock held, or in a forked child, its only thread.
 */
static void spill_end(bool ours)
{
	if (ours)
		spill_close(engine);
	else
		spill_abandon(engine);
	engine = NULL;
	/* (Its handler, which judges too, is gone; a new engine starts not catching.) */
	catch_under_ns = 0;
	pthread_mutex_lock(&recompress_lock);
	zp_destroy_pool(pool);
	pool = NULL;
	pthread_mutex_unlock(&recompress_lock);
	static_branch_disable(&cgm_spill_key);
}

/* ---- a core dump ---- */

/*
 * A signal is about to dump core (shim/core_dump.c): spilling stops for
 * good and every spilled page comes back, so that the core holds it.
 * The spill lock is taken and never given back (the process is ending):
 * nothing spills again meanwhile.  Never called on a thread that holds
 * it: wherever it is held, signals are blocked.  Returns the pages
 * brought back, or -1 without an engine.
 */
long cgm_spill_restore_for_core(void)
{
	if (!__atomic_load_n(&engine, __ATOMIC_ACQUIRE))
		return -1;
	__atomic_store_n(&allowed, false, __ATOMIC_RELAXED);
	pthread_mutex_lock(&spill_lock);
	if (!engine)
		return -1;
	return spill_restore_range(engine, NULL, SIZE_MAX);
}

/* ---- the end of spilling, asked for ---- */

/*
 * Spilling stops in this process (until cgm_spill_resume(), unless the
 * memory is locked) and every spilled page comes back; the pool and what
 * was in it leave the group's figures, the counts stay (every page in the
 * pool comes back: zswpin).  Spill lock held.  Returns the pages that
 * were spilled.
 */
static long spill_stop(void)
{
	struct acct_spill_state st;
	int64_t own[CGM_NR_SPILL_COUNTS];
	long back;

	allowed = false;
	spill_state(&st, false);
	back = (long)st.spilled_pages;
	st.counts[CGM_STAT_ZSWPIN - CGM_STAT_SPILL0] += (uint64_t)st.spilled_pages;
	st.spilled_pages = st.zswap = st.zswapped = st.swap = 0;
	/* The process's own counts go on from where they are: only the engine's restart. */
	own_counts(own);
	for (int i = 0; i < CGM_NR_SPILL_COUNTS; i++)
		carried[i] = (int64_t)st.counts[i] - (own[i] >= 0 ? own[i] : 0);
	/* A new engine has no fork base: what it counts is all this process's. */
	fork_base_set = false;
	spill_end(true);
	acct_spill_publish(&cgm_acct, &st);
	return back;
}

/*
 * The program locks its memory (mlockall): locked pages are never
 * reclaimed -- the kernel keeps them on its unevictable list, out of
 * zswap's reach -- so spilling stops for this process, and what it spilled
 * comes back first, as the kernel's mlockall faults swapped pages in.
 * It must also go before the lock is taken: the pool's tables and the
 * engine's are reserved address space that only becomes memory where it
 * is touched (gigabytes of it), and mlockall(MCL_CURRENT) would make all
 * of it resident -- a python3 that called it sat in the kernel for good,
 * with 6.4 GiB locked.
 */
void cgm_spill_stop_locked(const char *why)
{
	bool was;

	/* For good: cgm_spill_resume() cannot undo a lock. */
	__atomic_store_n(&locked, true, __ATOMIC_RELAXED);
	was = __atomic_exchange_n(&allowed, false, __ATOMIC_RELAXED);
	/*
	 * No engine yet (nothing reclaimed so far): none will be made -- a
	 * reclaim making one now does it under the lock, and one that comes
	 * later finds spilling off.
	 */
	spill_hold_lock_always();
	if (!engine) {
		cgm_spill_release();
		if (was)
			cgm_log("spill: the program locked its memory (%s) before anything was "
				"spilled: locked pages are never reclaimed, as in the kernel; "
				"spilling is off for this process", why);
		return;
	}
	spill_stop();
	cgm_spill_release();
	cgm_log("spill: the program locked its memory (%s): locked pages are never reclaimed, "
		"as in the kernel; spilling is off for this process, every spilled page brought "
		"back", why);
	cgm_resident_sample(false);
}

/*
 * cgm_spill_stop() (cgmalloc.h), until cgm_spill_resume(): a debugger
 * cannot read a spilled page (the kernel does not wait for a userfaultfd
 * on a remote access), so gdb, or the program itself, asks for them all
 * back.  The caller waits for the spill lock: a thread spilling now
 * finishes its batch first (with gdb, whose call lets the other threads
 * run, the one it stopped there too).
 */
long cgm_spill_stop_asked(void)
{
	long back;

	if (!spill_hold_lock())
		return 0;
	back = spill_stop();
	cgm_spill_release();
	cgm_log("spill: cgm_spill_stop() was called: spilling is off for this process, "
		"%ld spilled pages brought back", back);
	cgm_resident_sample(false);
	return back;
}

/*
 * cgm_spill_resume(): spilling may start again.  Nothing more than that
 * here: the next reclaim that needs the engine makes a new one, as a
 * forked child's first reclaim does.
 */
int cgm_spill_resume_asked(void)
{
	if (!resumable)
		return -ENODEV;
	if (__atomic_load_n(&locked, __ATOMIC_RELAXED))
		return -EPERM;
	if (__atomic_exchange_n(&allowed, true, __ATOMIC_RELAXED))
		return 0;
	cgm_log("spill: cgm_spill_resume() was called: spilling is on again for this process");
	return 0;
}

/* ---- fork ---- */

/*
 * The child takes over its copy of the engine and the pool
 * (spill_fork_prepare): what was spilled stays spilled in both, and each
 * brings back what it touches -- unless the previous child still runs
 * (workers: they share the parent's pages, brought back first).  Not with a backing file (the child's
 * copy of the pool would read slots the parent reuses) nor where the
 * kernel does not report forks (UFFD_FEATURE_EVENT_FORK needs
 * CAP_SYS_PTRACE): there every page comes back before the fork.
 */
static bool handoff;

static void spill_prepare(void)
{
	/* A thread that spills has signals blocked: fork() from a handler never finds it holding. */
	fork_held = pthread_mutex_lock(&spill_lock) == 0;
	/* Nor is the child's copy of the pool caught in a recompression. */
	pthread_mutex_lock(&recompress_lock);
	handoff = false;
	if (engine) {
		handoff = spill_fork_prepare(engine, fork_held && !cgm_conf.spill_backing[0] &&
							 cgm_conf.spill_fork_lazy);
		if (!handoff)
			spill_restore_range(engine, NULL, SIZE_MAX);
		/*
		 * And the staging copies and freed zspages still resident go
		 * now: a child would keep its copy of them, up to 1.5 MiB.
		 */
		spill_stage_clear(engine);
	}
}

static void spill_parent(void)
{
	if (engine)
		spill_fork_parent(engine);
	handoff = false;
	pthread_mutex_unlock(&recompress_lock);
	if (fork_held)
		pthread_mutex_unlock(&spill_lock);
	fork_held = false;
}

static void spill_child(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

	spill_lock = fresh;
	recompress_lock = fresh;
	catch_lock = fresh;
	memset(carried, 0, sizeof(carried));
	throttled_ns = 0;
	own_at_ns = 0;
	fork_held = false;
	cgm_bg_reclaim_forked();
	cgm_self_kept_fork_child();
	if (engine && handoff && spill_fork_child(engine) == 0) {
		handoff = false;
		cgm_self_keep_open();
		/* The child is charged for what it adds from here, not for its copy. */
		fork_base_set = false;
		spill_state(&fork_base, false);
		fork_base_set = true;
		spill_unshare_shared(engine, false);
		cgm_bg_reclaim_start();
		return;
	}
	handoff = false;
	/* Its next reclaim makes an engine of its own. */
	if (engine)
		spill_end(false);
	/*
	 * Without an engine to take over (its parent had not spilled yet, or
	 * could not hand it over) the child needs its background reclaim as
	 * much: an idle child (a worker waiting for work, holding what it
	 * built) answers a memory.reclaim or a limit write through that
	 * thread only.  Without it, python3's forked child holding 40 MB gave
	 * back nothing to memory.reclaim 20M of its group (the writer waited
	 * half a second and said EAGAIN).  Made at the child's first
	 * allocation slow path, not here: a thread made at fork cost 0.8-1 ms
	 * a fork on this machine (the child's page faults), paid by every
	 * fork that only execs or exits.  (Not made if spilling is off by
	 * then: cgm_bg_reclaim_start_wanted.)
	 */
	cgm_bg_reclaim_start_later();
}
