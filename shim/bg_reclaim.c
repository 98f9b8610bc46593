/*
 * spill=1: reclaim in the background.  A thread of the process keeps its
 * group a margin below the lower of memory.high and memory.max by
 * spilling, so that the program's own threads seldom reclaim in their
 * allocation paths -- the group's kswapd, as the asynchronous memory.high
 * reclaim proposed on linux-mm and the memcg watermarks some distribution
 * kernels carry.  The reclaim in the allocation path stays (memory.high
 * still reclaims, then throttles, what the background did not cover); the
 * background only takes it off the program's thread, onto a CPU the
 * program may not be using.
 *
 * Marks, as fractions of the limit below it: the thread wakes when usage
 * passes limit - limit/64, and spills until it is at limit - limit/32.
 * Usage also grows without an allocation (pages that fault back from the
 * pool), which no slow path sees: while usage is above limit - limit/16
 * the thread looks every 10 ms (doubling, up to 0.64 s, while its looks
 * find nothing to spill); below it, it sleeps until an allocation
 * path's sample wakes it, or for half a second while the group has a
 * limit (a sample of its own then: memory touched without an
 * allocation).  A block made that, filled, could take the group to its
 * limit starts a watch of the group's growth (bg_watch_wait()): a block
 * written after its malloc is charged at no allocation path, and half a
 * second is long enough to fill 256 MiB.  So is one written long after:
 * while what the process could fill without allocating could take the
 * group to its limit (cgm_untouched_bytes), it looks every 0.1 s -- or,
 * where what it could fill unseen (the same less the spilled pages, which
 * come back through the handler) could, sooner the less room is left --
 * and watches once the group grows.  When the pages it spills come
 * back as fast as it spills them, the program's working set does not fit
 * below its target: it stops for half a second rather than make the
 * program thrash.
 *
 * A memory.reclaim, or a limit written below usage, is asked of each
 * process of the group through its slot in the hierarchy; the writer
 * wakes this thread through the slot's futex word (shared: the writer is
 * another process).  The program's threads answer at their next slow
 * path, collecting what mimalloc keeps first; when none has within
 * 10 ms (an idle program), this thread answers by spilling -- the writer,
 * which waits up to half a second for every process it asked, returns
 * then instead of after the handler thread's idle ticks (100-200 ms).
 *
 * The thread is made in the constructor (a forked child makes it at its
 * first allocation slow path, or its first reclaim), has every signal
 * blocked, and touches no spillable memory.  It loads the spill pool's
 * libraries when it first has to spill, or when a program thread's
 * reclaim asks it to: a program thread may be in malloc, where dlopen
 * must not run (shim/spiller.c).
 */
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgm/accounted.h"
#include "cgm/clock.h"
#include "cgm/log.h"
#include "cgm/shim.h"
#include "cgm/spiller.h"

#define BG_WAKE_SHIFT	6	/* wakes above limit - limit/64 */
#define BG_TARGET_SHIFT	5	/* spills down to limit - limit/32 */
#define BG_NEAR_SHIFT	4	/* looks every BG_POLL_NS above limit - limit/16 */
/*
 * Loads the spill pool's libraries above limit - limit/4, before the
 * first reclaim needs them.  The loader's allocations are charged past
 * the limits (shim/lazy_libs.c): loaded at the limit, they took perl under
 * memory.max=30M (test_spill_lib) past it, by 256 KiB when they were
 * charged ahead, which their load in the constructor never had.
 */
#define BG_LOAD_SHIFT	ACCT_SPILL_LOAD_SHIFT
#define BG_POLL_NS	(10 * 1000000L)
/* Each look that spilled nothing doubles the interval, up to this: an idle program costs little. */
#define BG_POLL_MAX_NS	(640 * 1000000L)
/*
 * Under a limit, an idle thread looks this often at least: memory the
 * program touches without allocating (a block filled after its malloc,
 * pages of its own mappings) is charged only at a sample, and a program
 * that does not allocate takes none -- python3 that filled 40 MB under
 * memory.max=20M stayed at 51 MB resident until something read its
 * group.  (Below 1 s: it is a timespec's nanoseconds.)
 */
#define BG_IDLE_LOOK_NS	(500 * 1000000L)
/*
 * While what the process could fill without allocating could take the
 * group to its limit (cgm_untouched_bytes), it looks this often at least
 * (a watch, bg_watch_wait()) -- and, where what it could fill unseen
 * could (bg_fill_threat()), more often the nearer the group is to its
 * mark: a thread filling at BG_FILL_PAGE_NS a page (4 GB/s, above
 * the 1.5 GB/s of a first-touch fill here) must not get from there to
 * the mark between two looks, BG_POLL_NS at the least.  At a fixed 0.1 s,
 * fid_prog bigtouch filling 256 MiB 1.5 s after its malloc under
 * memory.high=64M (0.17 s to fill here) peaked at 80-183 MiB, and at 256
 * in a CI run, the fill over between two looks; paced by the room left
 * (14 ms there), 76-113 MiB.  While such a block waits, the thread took
 * 0.6-0.7% of a CPU, against 0.35-0.4% looking every 0.1 s (its
 * schedstat over 4 s of bigtouch's hold: 261 looks instead of 40; the
 * regions walked 149 times in the run instead of 51, as often as their
 * walk's cost allows, cgm_resident_sample()).
 */
#define BG_THREAT_LOOK_NS	(100 * 1000000L)
#define BG_FILL_PAGE_NS		1000
/*
 * A batch got nothing (every page hot or written): wait before the next,
 * twice as long each time up to BG_BACKOFF_MAX_NS, until a batch gets
 * some.  A fixed 20 ms had the thread of a program whose working set does
 * not fit look at the same hot pages 40 times a second: git pack-objects
 * under memory.high at half its group's peak scanned 290,000 pages in the
 * background to take 5,800, 3 ms a batch that got nothing.
 */
#define BG_BACKOFF_NS	(20 * 1000000L)
#define BG_BACKOFF_MAX_NS	(320 * 1000000L)
/*
 * Thrashing: more pages brought back by faults while it spilled than a
 * quarter of what it spilled, and 4 MiB at least (a program growing an
 * array it made long ago brings back a few hundred pages once) -- the
 * program is working on what is spilled, and spilling below the limit
 * would only bring more of it back.  Reclaim is left to memory.high
 * itself (the allocating threads) for this long.
 */
#define BG_THRASH_NS	(500 * 1000000L)
#define BG_THRASH_MIN	1024
/* Pages a spill call takes: the spill lock is held this long (about 2 ms). */
#define BG_BATCH	256
/* How long the program's threads have to answer a memory.reclaim themselves. */
#define BG_ANSWER_MS	10

static bool started;
/* The thread is looking or spilling: a kick needs no system call. */
static bool awake;
/* Pages it reclaimed (the exit report); when verbose last said so. */
static uint64_t reclaimed, thrash_stops;
static int64_t last_verbose_ns;
/* Waited on while the process has no slot (it is exiting): nobody wakes it. */
static uint32_t no_slot_word;
/* A program thread's reclaim asks for the pool's libraries. */
static bool load_wanted;
/*
 * The thread watches how fast the group grows (bg_watch_wait()); a block
 * that could take the group to its limit was made since its last look
 * (watch_wanted).
 */
static bool watching, watch_wanted;
/* A forked child's thread is to be made at its next allocation slow path. */
bool cgm_bg_start_wanted;

/* What the process can fill without allocating, as of its last walk of its regions (pages). */
static inline int64_t bg_untouched_pages(void)
{
	return __atomic_load_n(&cgm_untouched_bytes, __ATOMIC_RELAXED) / CGM_PAGE_SIZE;
}

/*
 * Could those pages take its group to its limit?  Inline: bg_main's idle
 * look asks, in shim/warm-text.ld's window.
 */
static inline bool bg_untouched_threat(void)
{
	return acct_limit_near(&cgm_acct, bg_untouched_pages());
}

/*
 * The same without the pages the process spilled: what it could fill
 * with no thread of the library seeing it.  Spilled pages come back
 * through the handler, whose throttle charges them and wakes this thread,
 * so they need no quicker looks (BG_FILL_PAGE_NS): counted, a python3
 * that had spilled 48 MB and then had room (memory.high raised from 40M
 * to 60M, 38 MiB in use) looked every 10 ms while it idled, 1.8-1.9% of
 * a CPU against 0.4%.  (The spilled count is as of the last sample, the
 * untouched bytes as of the last walk: pages back since the walk make
 * this err towards looking.)
 */
static bool bg_fill_threat(void)
{
	struct cgm_proc *p = hier_proc(&cgm_acct.h, cgm_acct.proc);
	int64_t pages = bg_untouched_pages();

	if (p)
		pages -= __atomic_load_n(&p->spilled_pages, __ATOMIC_RELAXED);
	return pages > 0 && acct_limit_near(&cgm_acct, pages);
}

static void bg_wait(uint32_t *word, uint32_t seen, long ns)
{
	struct timespec ts = { 0, ns };

	/* Not FUTEX_PRIVATE: acct_proc_wake() in another process wakes it. */
	syscall(SYS_futex, word, FUTEX_WAIT, seen, ns ? &ts : NULL, NULL, 0);
}

/*
 * Answer what was asked of @p, if the program's threads do not within
 * BG_ANSWER_MS.  This, the spilling round and the messages are out of
 * bg_main, whose loop an idle process runs every half second: that loop
 * lies with the library's hot code (shim/warm-text.ld), which has little
 * room; these run only when there is work, the pool's libraries loaded.
 */
static CGM_NOINLINE void bg_answer(struct cgm_proc *p)
{
	struct timespec ms = { 0, 1000000 };
	int64_t got;

	for (int i = 0; i < BG_ANSWER_MS && acct_reclaim_pending(p); i++)
		nanosleep(&ms, NULL);
	if (!acct_reclaim_pending(p))
		return;
	got = cgm_spill_answer(p);
	if (got < 0)
		return;
	__atomic_add_fetch(&reclaimed, (uint64_t)got, __ATOMIC_RELAXED);
	if (cgm_conf.verbose)
		cgm_log("spill: background reclaim answered a memory.reclaim or limit write: "
			"%lld pages reclaimed", (long long)got);
}

/*
 * Since the window began (@spilled pages reclaimed since), have the pages
 * spilled in it come back as fast as the thread spilled?  Only those
 * count: pages that left before it and come back now are the program
 * turning to data it left long ago (python3 starting to work on the
 * records it built first, spilled during the build: 1,700-2,000 pages
 * back in each window, two stops of half a second in its 2-second working
 * phase, which its own thread then spent reclaiming), and the cold pages
 * the thread spills are what makes room for them.
 */
static bool bg_thrashing(int64_t spilled)
{
	uint64_t back = cgm_spill_refaults_since_mark();

	return spilled > 0 && back >= BG_THRASH_MIN && (int64_t)back * 4 > spilled;
}

/*
 * Spill down to the target, the group above it: the pages spilled.
 * *@wait_ns is set when it stopped short (thrashing, nothing could go).
 */
static CGM_NOINLINE int64_t bg_spill_round(struct cgm_proc *p, int64_t *win_spilled, long *wait_ns)
{
	static long backoff_ns = BG_BACKOFF_NS;
	int64_t want, got, round = 0;

	while ((want = acct_reclaim_excess_below(&cgm_acct, BG_TARGET_SHIFT)) > 0) {
		/*
		 * A writer waiting: answer it first (the next turn, at once),
		 * before it stops waiting for a start.
		 */
		if (p && acct_reclaim_pending(p))
			break;
		if (bg_thrashing(*win_spilled)) {
			/*
			 * What came back counts the pages spilled since the
			 * window began by any thread, each time one came back:
			 * more than this thread spilled, at times.
			 */
			if (cgm_conf.verbose)
				cgm_log("spill: background reclaim stops for 0.5 s: %llu pages "
					"spilled since its window began came back, against %lld "
					"it spilled in it (the program works on what is spilled)",
					(unsigned long long)cgm_spill_refaults_since_mark(),
					(long long)*win_spilled);
			__atomic_add_fetch(&thrash_stops, 1, __ATOMIC_RELAXED);
			*wait_ns = BG_THRASH_NS;
			*win_spilled = 0;
			break;
		}
		got = cgm_spill_reclaim(want < BG_BATCH ? want : BG_BATCH, NULL, false);
		if (got <= 0) {
			/* Given up for a request (the spill lock was busy): answered next, no back-off. */
			if (p && acct_reclaim_pending(p))
				break;
			*wait_ns = backoff_ns;
			backoff_ns = backoff_ns * 2 < BG_BACKOFF_MAX_NS ? backoff_ns * 2 : BG_BACKOFF_MAX_NS;
			break;
		}
		backoff_ns = BG_BACKOFF_NS;
		round += got;
		*win_spilled += got;
		__atomic_add_fetch(&reclaimed, (uint64_t)got, __ATOMIC_RELAXED);
		cgm_resident_charge(false);
	}
	return round;
}

/* verbose=1: what a round spilled, once a second at most. */
static CGM_COLD void bg_say_round(int64_t round, bool stopped)
{
	if (cgm_now_ns() - last_verbose_ns <= 1000000000LL)
		return;
	last_verbose_ns = cgm_now_ns();
	cgm_log("spill: background reclaim: %lld pages, to keep the group 1/32 below its limit%s",
		(long long)round, stopped ? "; stopped: nothing more could go" : "");
}

/*
 * Watching a group that may grow without allocating: the next look, in
 * ns (0: the watch ends, the idle interval again).  @margin: how far the
 * group is below its near mark now (acct_reclaim_margin(), negative
 * pages; INT64_MIN without a group).  @fresh: a block that
 * could take the group to its limit was just made; @threat: what the
 * process could fill without allocating could (cgm_untouched_bytes: in a
 * forked child, the pages it shares count, which only makes it look more
 * often); @fill: what it could fill unseen could (bg_fill_threat()).
 * From how fast the group neared its mark since the last look, half the
 * time it would take at that pace to reach it, 10 ms at least;
 * doubling while it does not grow, and the watch ends once that passes
 * BG_IDLE_LOOK_NS -- but while the threat lasts, every BG_THREAT_LOOK_NS
 * at most, and at least as often as a fill at BG_FILL_PAGE_NS a page
 * would take to reach the mark.  A group above
 * three quarters of its limit that grew fast between two idle looks is
 * watched too.  fid_prog bigtouch 256M 100 under spill=1,high=64M filled
 * its block between two looks of half a second: memory.peak 256 MiB, the
 * thread spilling it only after.
 */
static CGM_NOINLINE long bg_watch_wait(bool fresh, bool threat, bool fill, int64_t margin)
{
	static int64_t last_margin, last_ns;
	static long last_wait;
	int64_t now = cgm_now_ns(), wait;
	/* A pace needs a look not long before (the last watch may be long over). */
	bool paced = !fresh && last_ns && now - last_ns < 2 * BG_IDLE_LOOK_NS &&
		     margin > last_margin;
	bool watched = __atomic_load_n(&watching, __ATOMIC_RELAXED);

	if (margin == INT64_MIN)
		wait = BG_IDLE_LOOK_NS;		/* no group: the process is exiting */
	else if (fresh)
		wait = BG_POLL_NS;
	else if (paced)
		wait = margin >= 0 ? BG_POLL_NS :
		       (int64_t)((double)(now - last_ns) * (double)-margin /
				 (double)(margin - last_margin) / 2);
	else
		wait = watched && last_wait ? last_wait * 2 : BG_IDLE_LOOK_NS;
	if (threat && wait > BG_THREAT_LOOK_NS)
		wait = BG_THREAT_LOOK_NS;
	if (fill && margin != INT64_MIN) {
		/* The time to fill the room left to the mark (none past it: BG_POLL_NS). */
		int64_t room = margin >= 0 ? 0 :
			       -margin < BG_THREAT_LOOK_NS / BG_FILL_PAGE_NS ? -margin * BG_FILL_PAGE_NS :
			       BG_THREAT_LOOK_NS;

		if (wait > room)
			wait = room;
	}
	if (wait < BG_POLL_NS)
		wait = BG_POLL_NS;
	watched = wait < BG_IDLE_LOOK_NS;
	__atomic_store_n(&watching, watched, __ATOMIC_RELAXED);
	last_margin = margin;
	last_ns = now;
	last_wait = watched ? (long)wait : 0;
	return watched ? (long)wait : 0;
}

/*
 * What a look does when the group is near a mark, a load is asked for, a
 * watch is on or the process could fill what takes the group to its
 * limit: load the pool's libraries, spill down to the target,
 * and say when to look next (0: at the idle interval; -1: the libraries
 * failed to load, nothing will spill).  Out of bg_main, whose idle loop
 * lies in shim/warm-text.ld's window: this runs only when there is work.
 */
static CGM_NOINLINE long bg_look(struct cgm_proc *p, int64_t *win_spilled, long *poll_ns)
{
	/* Taken now, whatever this look does: the thread's wait skips while it is set. */
	bool fresh = __atomic_exchange_n(&watch_wanted, false, __ATOMIC_ACQUIRE);
	bool threat = bg_untouched_threat(), fill;
	long wait_ns = 0;
	int64_t round = 0, margin;

	/*
	 * Asked for by a program thread, the group near its limit, or a
	 * block just made that could take it there faster than the load (a
	 * no-op once loaded).
	 */
	if (__atomic_exchange_n(&load_wanted, false, __ATOMIC_ACQUIRE) || fresh ||
	    acct_reclaim_excess_below(&cgm_acct, BG_LOAD_SHIFT) > 0)
		cgm_spill_load();
	if (cgm_spill_load_failed())
		return -1;
	if (!*win_spilled)
		cgm_spill_mark_refaults();
	if (acct_reclaim_excess_below(&cgm_acct, BG_TARGET_SHIFT) > 0)
		round = bg_spill_round(p, win_spilled, &wait_ns);
	/*
	 * spill_strict_high=1: its first touches are to be throttled.  A
	 * block just made counts as the threat: @threat is as of the last
	 * walk of the regions, and a watch's looks charge from statm alone,
	 * so a block filled at once went uncaught in 2 runs of 10 (228 and
	 * 141 MiB under memory.high=64M, against 65).
	 */
	if ((threat || fresh) && cgm_spill_loaded())
		cgm_spill_catch_threat();
	/* At the target: whatever came back, the group fits; judge afresh next time. */
	if (!wait_ns)
		*win_spilled = 0;
	if (cgm_conf.verbose && round)
		bg_say_round(round, wait_ns && wait_ns != BG_THRASH_NS);	/* backing off */
	if (wait_ns)
		return wait_ns;
	margin = acct_reclaim_margin(&cgm_acct, BG_NEAR_SHIFT);
	/* (What it could fill unseen is within what it could fill: no threat, no fill threat.) */
	fill = threat && bg_fill_threat();
	if (margin > 0) {
		wait_ns = *poll_ns;
		*poll_ns = round ? BG_POLL_NS :
			   *poll_ns * 2 < BG_POLL_MAX_NS ? *poll_ns * 2 : BG_POLL_MAX_NS;
		/*
		 * Past the near mark, what the process could fill unseen
		 * takes it to its limit at once: no backing off.  fid_prog
		 * bigtouch 256M 100 late=2000 base=61M (61 MiB written
		 * first) under memory.high=64M reached 317 MiB, the thread
		 * looking every 0.64 s by then; 77-94 MiB in 25 runs with
		 * this, 172 once with both CPUs kept busy.
		 */
		if (fill && wait_ns > BG_POLL_NS)
			wait_ns = BG_POLL_NS;
	} else {
		wait_ns = bg_watch_wait(fresh, threat, fill, margin);
		/* Nearing the mark fast: the spilling will not wait for the libraries. */
		if (wait_ns && wait_ns < BG_THREAT_LOOK_NS)
			cgm_spill_load();
	}
	return wait_ns;
}

static void *bg_main(void *arg)
{
	long wait_ns = 0, poll_ns = BG_POLL_NS;
	/* The window thrashing is judged over: it ends when the group reaches the target. */
	int64_t win_spilled = 0;

	(void)arg;
	cgm_spill_background_thread();
	for (;;) {
		/* Its process slot's word, which other processes wake (none while exiting). */
		struct cgm_proc *p = hier_proc(&cgm_acct.h, cgm_acct.proc);
		uint32_t *word = p ? &p->wake : &no_slot_word;
		uint32_t seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);

		/* Not at the end of a round: the first wait, from the start, needs it too. */
		if (!wait_ns && static_key_enabled(&cgm_limits_key))
			wait_ns = BG_IDLE_LOOK_NS;
		/*
		 * (A request that came while it was busy: no wait.)  Nor for
		 * a load asked before @seen was read: the kick's wake-up was
		 * already counted in it, and the thread slept on -- with no
		 * limit set, for good -- while memory.reclaim, written by a
		 * program that did so within its first milliseconds, waited
		 * 2 s for the libraries and spilled nothing (spill_stale, 1
		 * run in 25 on a machine whose faults cost 2.4 us).  A watch
		 * likewise: a program that fills a block as it starts asked
		 * for it before the thread's first wait.
		 */
		if ((!p || !acct_reclaim_pending(p)) &&
		    !__atomic_load_n(&load_wanted, __ATOMIC_ACQUIRE) &&
		    !__atomic_load_n(&watch_wanted, __ATOMIC_ACQUIRE))
			bg_wait(word, seen, wait_ns);
		__atomic_store_n(&awake, true, __ATOMIC_RELAXED);
		if (p && acct_reclaim_pending(p))
			bg_answer(p);
		/*
		 * Usage as of now: the pages that came back since the last
		 * slow path included.  A watch's frequent looks need the
		 * charge alone (the regions are walked when a sample is due).
		 */
		cgm_resident_sample(__atomic_load_n(&watching, __ATOMIC_RELAXED));
		wait_ns = 0;
		/* Far below every mark, nothing asked or to watch: an idle look ends here. */
		if (__atomic_load_n(&load_wanted, __ATOMIC_RELAXED) ||
		    __atomic_load_n(&watching, __ATOMIC_RELAXED) ||
		    acct_reclaim_excess_below(&cgm_acct, BG_LOAD_SHIFT) > 0 || bg_untouched_threat())
			wait_ns = bg_look(p, &win_spilled, &poll_ns);
		else
			win_spilled = 0;
		if (wait_ns < 0)
			break;
		__atomic_store_n(&awake, false, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&awake, false, __ATOMIC_RELAXED);
	return NULL;
}

void cgm_bg_reclaim_start(void)
{
	static bool starting;
	sigset_t all, old;
	pthread_t th;
	int err;

	/* (A start inside a start -- its allocations' reclaim -- returns at once.) */
	if (started || !cgm_conf.spill_background ||
	    __atomic_exchange_n(&starting, true, __ATOMIC_ACQUIRE))
		return;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = cgm_pthread_create_raw(&th, NULL, bg_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		__atomic_store_n(&starting, false, __ATOMIC_RELEASE);
		cgm_log("spill: cannot start the background reclaim (%s): reclaim stays in the "
			"allocating threads", cgm_strerror(err));
		return;
	}
	pthread_detach(th);
	__atomic_store_n(&started, true, __ATOMIC_RELEASE);
	__atomic_store_n(&starting, false, __ATOMIC_RELEASE);
}

static void bg_wake(struct cgm_proc *p)
{
	/* Awake: the bump alone keeps its next wait from sleeping. */
	if (__atomic_load_n(&awake, __ATOMIC_RELAXED))
		__atomic_add_fetch(&p->wake, 1, __ATOMIC_RELEASE);
	else
		acct_proc_wake(p);
}

void cgm_bg_reclaim_kick(void)
{
	struct cgm_proc *p;

	if (!started || !(p = hier_proc(&cgm_acct.h, cgm_acct.proc)))
		return;
	if (!cgm_spill_loaded() && acct_reclaim_excess_below(&cgm_acct, BG_LOAD_SHIFT) > 0)
		__atomic_store_n(&load_wanted, true, __ATOMIC_RELEASE);
	else if (acct_reclaim_excess_below(&cgm_acct, BG_WAKE_SHIFT) <= 0)
		return;
	bg_wake(p);
}

void cgm_bg_reclaim_watch(void)
{
	struct cgm_proc *p;

	if (!__atomic_load_n(&started, __ATOMIC_RELAXED) ||
	    !(p = hier_proc(&cgm_acct.h, cgm_acct.proc)))
		return;
	__atomic_store_n(&watching, true, __ATOMIC_RELAXED);
	/* Watched already: it looks again soon, on a fresh start of the pace. */
	if (!__atomic_exchange_n(&watch_wanted, true, __ATOMIC_RELEASE))
		bg_wake(p);
}

bool cgm_bg_reclaim_load_kick(void)
{
	struct cgm_proc *p = hier_proc(&cgm_acct.h, cgm_acct.proc);

	if (!__atomic_load_n(&started, __ATOMIC_RELAXED) || !p)
		return false;
	__atomic_store_n(&load_wanted, true, __ATOMIC_RELEASE);
	bg_wake(p);
	return true;
}

uint64_t cgm_bg_reclaim_pages(void)
{
	return __atomic_load_n(&reclaimed, __ATOMIC_RELAXED);
}

uint64_t cgm_bg_reclaim_thrash_stops(void)
{
	return __atomic_load_n(&thrash_stops, __ATOMIC_RELAXED);
}

bool cgm_bg_reclaim_started(void)
{
	return __atomic_load_n(&started, __ATOMIC_RELAXED);
}

bool cgm_bg_reclaim_busy(void)
{
	return __atomic_load_n(&awake, __ATOMIC_RELAXED);
}

void cgm_bg_reclaim_forked(void)
{
	/* The thread is the parent's: the child makes its own with its engine. */
	started = false;
	awake = false;
	load_wanted = false;
	watching = false;
	watch_wanted = false;
	cgm_bg_start_wanted = false;
}

void cgm_bg_reclaim_start_later(void)
{
	__atomic_store_n(&cgm_bg_start_wanted, cgm_conf.spill_background, __ATOMIC_RELAXED);
}

void cgm_bg_reclaim_start_wanted(void)
{
	/* (Not if spilling stopped meanwhile: mlockall, cgm_spill_stop.) */
	if (__atomic_exchange_n(&cgm_bg_start_wanted, false, __ATOMIC_ACQUIRE) && cgm_spill_on())
		cgm_bg_reclaim_start();
}
