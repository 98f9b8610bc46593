/*
 * Charging by residency (accounting/sample.c and the pressure paths of
 * accounting/charge.c), driven with made-up samples: a sample charges the
 * anon a process has beyond what it holds by bytes, never past
 * memory.max (the rest is its shortfall); the inherited base is not
 * charged; charge=alloc publishes without charging; at memory.high and
 * memory.max reclaim runs first, and only what it does not bring back is
 * throttled or refused; a reader refreshes a stale sample from /proc.
 *
 * usage: test_sample [regressions] [seed]
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "acct_fixture.h"
#include "cgm/files.h"

#define PAGE CGM_PAGE_SIZE
#define MIB (1 << 20)

static uint64_t seed0 = 1;
static struct acct_tmp tmp;
static struct cgm_acct ac;

/* What the reclaim hook gives back: the next sample's anon, or -1 for nothing. */
static int64_t anon_after_reclaim;
static int reclaims;
static int64_t last_need;	/* what the last reclaim was asked to make room for */

/* Or, when set, the anon after each reclaim in turn (the last one repeats). */
static int64_t anon_after_each[20];
static int nr_after_each;
static int deep_reclaims, first_deep;	/* how many were deep; the first that was (1-based) */

static void fake_reclaim(int64_t need, bool deep)
{
	last_need = need;
	reclaims++;
	if (deep && !deep_reclaims++)
		first_deep = reclaims;
	if (nr_after_each)
		acct_sample_set(&ac, true, anon_after_each[reclaims <= nr_after_each ? reclaims - 1 :
							 nr_after_each - 1], 0, 0);
	else if (anon_after_reclaim >= 0)
		acct_sample_set(&ac, true, anon_after_reclaim, 0, 0);
}

static void setup(void)
{
	memset(&ac, 0, sizeof(ac));
	ac.proc = CGM_NONE;
	ac.batch_pages = CGM_CHARGE_BATCH;
	ac.oom_policy = ACCT_OOM_ENOMEM;
	ac.reclaim = fake_reclaim;
	anon_after_reclaim = -1;
	reclaims = 0;
	last_need = -1;
	nr_after_each = 0;
	deep_reclaims = first_deep = 0;
	acct_tmp_open(&tmp, &ac.h);
}

static void teardown(void)
{
	hier_close(&ac.h);
	acct_tmp_remove(&tmp);
}

static struct cgm_proc *me(void)
{
	return hier_proc(&ac.h, ac.proc);
}

static int64_t usage_of(const char *path)
{
	return acct_group_usage(&ac.h, path);
}

static void set_file(const char *path, const char *file, const char *value)
{
	acct_group_write(&ac.h, path, file, value);
}

/* A group's event count, read directly (see sampled_stat). */
static int64_t event_count(const char *path, enum cgm_event ev)
{
	uint32_t g = group_lookup(&ac.h, path);

	ck_assert_msg(g != CGM_NONE, "no group %s", path);
	return __atomic_load_n(&ac.h.groups[g].events[ev], __ATOMIC_RELAXED);
}

/*
 * A group's sampled statistic as flushed, read without cgm_file_read (a
 * reader refreshes samples older than 10 ms from /proc, which a loaded
 * machine can make any of these).
 */
static int64_t sampled_stat(const char *path, int stat)
{
	uint32_t g = group_lookup(&ac.h, path);

	ck_assert_msg(g != CGM_NONE, "no group %s", path);
	rstat_flush(&ac.h);
	return ac.h.groups[g].stat[stat];
}

/* A sample charges what is beyond the held bytes, and follows the anon down. */
START_TEST(test_sample_charges_beyond_held)
{
	int64_t held;

	ck_assert_int_eq(acct_attach(&ac, "/s"), 0);
	held = me()->held_pages;
	ck_assert_int_eq(acct_sample_set(&ac, true, held * PAGE + 10 * MIB, 3 * MIB, 5 * MIB),
			 10 * MIB / PAGE);
	ck_assert_int_eq(usage_of("/s"), held + 10 * MIB / PAGE);
	ck_assert_int_eq(usage_of("/"), held + 10 * MIB / PAGE);
	ck_assert_int_eq(sampled_stat("/s", CGM_STAT_ANON), held * PAGE + 10 * MIB);
	ck_assert_int_eq(sampled_stat("/s", CGM_STAT_HEAP_FREE), 3 * MIB);
	ck_assert_int_eq(sampled_stat("/s", CGM_STAT_MAPPED_ANON), 5 * MIB);
	/* Pages given back leave the charge; a partial page counts whole. */
	ck_assert_int_eq(acct_sample_set(&ac, true, held * PAGE + 2 * MIB + 1, 0, 0),
			 2 * MIB / PAGE + 1 - 10 * MIB / PAGE);
	ck_assert_int_eq(usage_of("/s"), held + 2 * MIB / PAGE + 1);
	/* Less anon than held bytes: nothing sampled, never negative. */
	acct_sample_set(&ac, true, 0, 0, 0);
	ck_assert_int_eq(me()->sampled_pages, 0);
	ck_assert_int_eq(usage_of("/s"), held);
}
END_TEST

/*
 * A sample of the anon alone (heap_free < 0: reclaim's, shim/resident.c)
 * charges as a full one and keeps the last split, bounded by the anon.
 */
START_TEST(test_sample_anon_keeps_split)
{
	int64_t held;

	ck_assert_int_eq(acct_attach(&ac, "/k"), 0);
	held = me()->held_pages;
	acct_sample_set(&ac, true, held * PAGE + 10 * MIB, 3 * MIB, 5 * MIB);
	ck_assert_int_eq(acct_sample_set(&ac, true, held * PAGE + 12 * MIB, -1, -1), 2 * MIB / PAGE);
	ck_assert_int_eq(usage_of("/k"), held + 12 * MIB / PAGE);
	ck_assert_int_eq(sampled_stat("/k", CGM_STAT_ANON), held * PAGE + 12 * MIB);
	ck_assert_int_eq(sampled_stat("/k", CGM_STAT_HEAP_FREE), 3 * MIB);
	ck_assert_int_eq(sampled_stat("/k", CGM_STAT_MAPPED_ANON), 5 * MIB);
	/* Spilled down to 4 MiB of anon in all: the split cannot say more than that. */
	acct_sample_set(&ac, true, 4 * MIB, -1, -1);
	ck_assert_int_eq(usage_of("/k"), held > 4 * MIB / PAGE ? held : 4 * MIB / PAGE);
	ck_assert_int_eq(sampled_stat("/k", CGM_STAT_HEAP_FREE), 3 * MIB);
	ck_assert_int_eq(sampled_stat("/k", CGM_STAT_MAPPED_ANON), 1 * MIB);
}
END_TEST

/* charge=alloc: the sample is published, nothing is charged by it. */
START_TEST(test_sample_alloc_mode_publishes_only)
{
	int64_t before;

	ck_assert_int_eq(acct_attach(&ac, "/a"), 0);
	before = usage_of("/a");
	ck_assert_int_eq(acct_sample_set(&ac, false, 64 * MIB, 1 * MIB, 0), 0);
	ck_assert_int_eq(usage_of("/a"), before);
	ck_assert_int_eq(sampled_stat("/a", CGM_STAT_ANON), 64 * MIB);
	/* Switching to resident charges it; back to alloc gives it back. */
	ck_assert_int_gt(acct_sample_set(&ac, true, 64 * MIB, 1 * MIB, 0), 0);
	ck_assert_int_gt(usage_of("/a"), before);
	ck_assert_int_lt(acct_sample_set(&ac, false, 64 * MIB, 1 * MIB, 0), 0);
	ck_assert_int_eq(usage_of("/a"), before);
}
END_TEST

/* A forked child's base (what it shares with its parent) is not charged. */
START_TEST(test_sample_base_not_charged)
{
	int64_t held;

	ck_assert_int_eq(acct_attach(&ac, "/f"), 0);
	held = me()->held_pages;
	acct_set_anon_base(&ac, 100 * MIB);
	ck_assert_int_eq(acct_sample_set(&ac, true, 100 * MIB + held * PAGE, 0, 0), 0);
	ck_assert_int_eq(acct_sample_set(&ac, true, 104 * MIB + held * PAGE, 0, 0), 4 * MIB / PAGE);
	ck_assert_int_eq(sampled_stat("/f", CGM_STAT_ANON), 4 * MIB + held * PAGE);
	/* Below the base (the child unmapped what it inherited): zero, not negative. */
	ck_assert_int_lt(acct_sample_set(&ac, true, 10 * MIB, 0, 0), 0);
	ck_assert_int_eq(me()->sampled_pages, 0);
	ck_assert_int_ge(sampled_stat("/f", CGM_STAT_ANON), 0);
}
END_TEST

/*
 * The library's own memory a process publishes (struct cgm_proc's
 * own_anon) leaves its charge and memory.stat's anon, in its own samples
 * and in a reader's refresh alike.
 */
START_TEST(test_sample_own_not_charged)
{
	struct acct_spill_state st = { 0 };
	int64_t held, real;

	ck_assert_int_eq(acct_attach(&ac, "/o"), 0);
	held = me()->held_pages;
	st.own_anon = 3 * MIB;
	acct_spill_publish(&ac, &st);
	/* 10 MiB beyond the held bytes, 3 of them the library's own. */
	ck_assert_int_eq(acct_sample_set(&ac, true, held * PAGE + 10 * MIB, 0, 0), 7 * MIB / PAGE);
	ck_assert_int_eq(usage_of("/o"), held + 7 * MIB / PAGE);
	ck_assert_int_eq(sampled_stat("/o", CGM_STAT_ANON), held * PAGE + 7 * MIB);
	/* Given back (the engine closed): charged again at the next sample. */
	st.own_anon = 0;
	acct_spill_publish(&ac, &st);
	ck_assert_int_eq(acct_sample_set(&ac, true, held * PAGE + 10 * MIB, 0, 0), 3 * MIB / PAGE);
	ck_assert_int_eq(usage_of("/o"), held + 10 * MIB / PAGE);
	/* More than the anon: nothing sampled, never negative. */
	st.own_anon = held * PAGE + 20 * MIB;
	acct_spill_publish(&ac, &st);
	acct_sample_set(&ac, true, held * PAGE + 10 * MIB, 0, 0);
	ck_assert_int_eq(me()->sampled_pages, 0);
	ck_assert_int_eq(sampled_stat("/o", CGM_STAT_ANON), 0);
	/* A reader's refresh of a stale sample leaves it out too. */
	real = acct_read_anon(0, -1);
	st.own_anon = real / 2;
	acct_spill_publish(&ac, &st);
	acct_refresh_stale(&ac.h, group_lookup(&ac.h, "/o"), 0);
	ck_assert_int_lt(sampled_stat("/o", CGM_STAT_ANON), real - real / 4);
	ck_assert_int_gt(sampled_stat("/o", CGM_STAT_ANON), real / 4);
}
END_TEST

/*
 * Never past memory.max: what does not fit is the shortfall, a max event;
 * acct_over_max reclaims first and answers 0 if that made room, -ENOMEM
 * (and an oom event) if it did not.
 */
START_TEST(test_sample_max_reclaims_then_refuses)
{
	int64_t held, max_pages = 32 * MIB / PAGE;

	ck_assert_int_eq(acct_attach(&ac, "/m/x"), 0);
	set_file("/m", "memory.max", "32M");
	held = me()->held_pages;
	acct_sample_set(&ac, true, held * PAGE + 48 * MIB, 0, 0);
	ck_assert_int_eq(usage_of("/m"), max_pages);
	ck_assert(acct_sample_short(&ac));
	ck_assert_int_ge(event_count("/m", CGM_EV_MAX), 1);
	/* Usage is at the limit, not over it: what must go is the charge that is short. */
	ck_assert_int_eq(acct_reclaim_excess(&ac), 0);
	ck_assert_int_eq(acct_max_lack(&ac, 1, NULL), 1);
	ck_assert_int_eq(acct_max_lack(&ac, 0, NULL), 0);
	/* Reclaim brings it back under: allowed, the shortfall gone. */
	anon_after_reclaim = held * PAGE + 16 * MIB;
	ck_assert_int_eq(acct_over_max(&ac), 0);
	ck_assert_int_eq(reclaims, 1);
	/* Reclaim was asked for room for the whole shortfall (not for "what is over": 0). */
	ck_assert_int_eq(last_need, held + 48 * MIB / PAGE - max_pages);
	ck_assert_int_eq(acct_max_lack(&ac, 1, NULL), 0);
	ck_assert_int_eq(acct_max_lack(&ac, max_pages, NULL), held + 16 * MIB / PAGE);
	ck_assert(!acct_sample_short(&ac));
	ck_assert_int_eq(usage_of("/m"), held + 16 * MIB / PAGE);
	ck_assert_int_eq(event_count("/m", CGM_EV_OOM), 0);
	/* Over again, and reclaim finds nothing: refused, with an oom event. */
	acct_sample_set(&ac, true, held * PAGE + 40 * MIB, 0, 0);
	anon_after_reclaim = -1;
	ck_assert_int_eq(acct_over_max(&ac), -ENOMEM);
	ck_assert_int_ge(reclaims, 2);
	ck_assert_int_eq(event_count("/m", CGM_EV_OOM), 1);
	ck_assert_int_le(usage_of("/m"), max_pages);
}
END_TEST

/*
 * The limit reclaim works towards (acct_limit_pages): the lowest
 * memory.high or memory.max of the group and its ancestors, whichever
 * kind it is, and no limit at all when none is set.
 */
START_TEST(test_limit_pages_lowest_up_the_tree)
{
	ck_assert_int_eq(acct_attach(&ac, "/l/a/b"), 0);
	ck_assert_int_eq(acct_limit_pages(&ac), PAGE_COUNTER_MAX);
	set_file("/l", "memory.max", "64M");
	ck_assert_int_eq(acct_limit_pages(&ac), 64 * MIB / PAGE);
	set_file("/l/a/b", "memory.high", "96M");
	ck_assert_int_eq(acct_limit_pages(&ac), 64 * MIB / PAGE);
	set_file("/l/a", "memory.high", "40M");
	ck_assert_int_eq(acct_limit_pages(&ac), 40 * MIB / PAGE);
	set_file("/l/a/b", "memory.max", "24M");
	ck_assert_int_eq(acct_limit_pages(&ac), 24 * MIB / PAGE);
	set_file("/l/a/b", "memory.max", "max");
	set_file("/l/a", "memory.high", "max");
	ck_assert_int_eq(acct_limit_pages(&ac), 64 * MIB / PAGE);
}
END_TEST

/*
 * The background reclaim's marks (acct_reclaim_excess_below) and how far
 * below one the group is (acct_reclaim_margin): the nearest of the group
 * and its ancestors counts, signed, with no limit far below, and the
 * excess is the margin once it is positive.
 */
START_TEST(test_reclaim_margin_signed_up_the_tree)
{
	int64_t held, mark = 64 * MIB / PAGE - 64 * MIB / PAGE / 16;

	ck_assert_int_eq(acct_attach(&ac, "/w/a"), 0);
	held = me()->held_pages;
	acct_sample_set(&ac, true, held * PAGE + 20 * MIB, 0, 0);
	ck_assert_int_lt(acct_reclaim_margin(&ac, 4), -(PAGE_COUNTER_MAX / 2));
	ck_assert_int_eq(acct_reclaim_excess_below(&ac, 4), 0);
	set_file("/w", "memory.high", "64M");
	set_file("/w/a", "memory.max", "256M");
	ck_assert_int_eq(acct_reclaim_margin(&ac, 4), usage_of("/w") - mark);
	ck_assert_int_lt(acct_reclaim_margin(&ac, 4), 0);
	ck_assert_int_eq(acct_reclaim_excess_below(&ac, 4), 0);
	/* Against the limit itself (shift 0), further below. */
	ck_assert_int_eq(acct_reclaim_margin(&ac, 0), usage_of("/w") - 64 * MIB / PAGE);
	/* Past the mark: the excess is the margin. */
	acct_sample_set(&ac, true, held * PAGE + 62 * MIB, 0, 0);
	ck_assert_int_gt(acct_reclaim_margin(&ac, 4), 0);
	ck_assert_int_eq(acct_reclaim_excess_below(&ac, 4), acct_reclaim_margin(&ac, 4));
	/* A lower limit in the group itself is the nearer one. */
	set_file("/w/a", "memory.max", "32M");
	ck_assert_int_eq(acct_reclaim_margin(&ac, 4),
			 usage_of("/w/a") - (32 * MIB / PAGE - 32 * MIB / PAGE / 16));
}
END_TEST

/*
 * memory.zswap.max's room counts what this process published of its pool
 * even while no flush has folded it into the groups: the fold after a
 * publish only tries the flush lock, and with another process flushing
 * (here: the lock held) the groups' zswap lagged, and the room reckoned on
 * them let the pool past the limit.
 */
START_TEST(test_zswap_room_counts_unfolded)
{
	struct acct_spill_state st = { 0 };

	ck_assert_int_eq(acct_attach(&ac, "/z/a"), 0);
	ck_assert_int_eq(acct_zswap_room(&ac, false), INT64_MAX);
	set_file("/z", "memory.zswap.max", "4M");
	st.zswap = 3 * MIB;
	acct_spill_publish(&ac, &st);
	rstat_fold_sampled(&ac.h, ac.proc);
	ck_assert_int_eq(acct_zswap_room(&ac, false), 1 * MIB);
	/* Another process flushing: the fold is skipped. */
	hier_lock(&ac.h.hdr->flush_lock);
	st.zswap = 3 * MIB + MIB / 2;
	acct_spill_publish(&ac, &st);
	rstat_fold_sampled(&ac.h, ac.proc);
	ck_assert_int_eq(acct_zswap_room(&ac, false), MIB / 2);
	st.zswap = 5 * MIB;
	acct_spill_publish(&ac, &st);
	ck_assert_int_eq(acct_zswap_room(&ac, false), 0);
	hier_unlock(&ac.h.hdr->flush_lock);
	/* Folded at last: the same room. */
	st.zswap = 3 * MIB + MIB / 2;
	acct_spill_publish(&ac, &st);
	rstat_fold_sampled(&ac.h, ac.proc);
	ck_assert_int_eq(acct_zswap_room(&ac, false), MIB / 2);
}
END_TEST

/*
 * A charge that memory.max refuses reclaims room for itself: at the limit
 * nothing is over it, so reclaim is asked for the pages the charge needs
 * (try_to_free_mem_cgroup_pages(nr_pages)), and the charge goes through
 * once they are back.
 */
START_TEST(test_refused_charge_reclaims_its_pages)
{
	uint32_t slot;
	int64_t held, max_pages = 32 * MIB / PAGE;

	ck_assert_int_eq(acct_attach(&ac, "/c/x"), 0);
	slot = acct_thread_register(&ac, (int)syscall(SYS_gettid));
	ck_assert_uint_ne(slot, CGM_NONE);
	set_file("/c", "memory.max", "32M");
	held = me()->held_pages;
	acct_sample_set(&ac, true, (max_pages - held) * PAGE, 0, 0);
	ck_assert_int_eq(usage_of("/c"), max_pages);
	ck_assert_int_eq(acct_max_lack(&ac, 3, NULL), 3);
	anon_after_reclaim = 16 * MIB;
	ck_assert_int_eq(acct_try_charge(&ac, &ac.h.threads[slot], 3 * PAGE, true), 0);
	ck_assert_int_eq(reclaims, 1);
	ck_assert_int_eq(last_need, 3);
	ck_assert_int_le(usage_of("/c"), max_pages);
}
END_TEST

/*
 * Over memory.high: reclaim first, and a high event for entering it
 * (the kernel's reclaim_high), whether reclaim brings the group under or not.
 */
START_TEST(test_sample_high_reclaims_first)
{
	uint32_t slot;
	int64_t held;

	ck_assert_int_eq(acct_attach(&ac, "/h/x"), 0);
	slot = acct_thread_register(&ac, (int)syscall(SYS_gettid));
	ck_assert_uint_ne(slot, CGM_NONE);
	set_file("/h", "memory.high", "32M");
	held = me()->held_pages;
	/* 33 MiB: over by a little, and reclaim gives back 8 MiB. */
	acct_sample_set(&ac, true, held * PAGE + 33 * MIB, 0, 0);
	anon_after_reclaim = held * PAGE + 25 * MIB;
	acct_handle_high(&ac, &ac.h.threads[slot], MIB / PAGE);
	ck_assert_int_eq(reclaims, 1);
	/* memory.high reclaims what is over it: no room to make for a charge. */
	ck_assert_int_eq(last_need, 0);
	ck_assert_int_eq(event_count("/h", CGM_EV_HIGH), 1);
	ck_assert_int_eq(usage_of("/h"), held + 25 * MIB / PAGE);
	/* Under high now: no reclaim, no event. */
	acct_handle_high(&ac, &ac.h.threads[slot], 1);
	ck_assert_int_eq(reclaims, 1);
	ck_assert_int_eq(event_count("/h", CGM_EV_HIGH), 1);
	/* Reclaim finds nothing: a high event again (the overage is too small to sleep for). */
	acct_sample_set(&ac, true, held * PAGE + 33 * MIB, 0, 0);
	anon_after_reclaim = -1;
	acct_handle_high(&ac, &ac.h.threads[slot], 1);
	ck_assert_int_eq(reclaims, 2);
	ck_assert_int_eq(event_count("/h", CGM_EV_HIGH), 2);
}
END_TEST

/*
 * A round of reclaim at memory.high that makes progress but leaves the
 * group over goes round again, deep (pages that came back lately too),
 * rather than throttle: a charge of 2,048 pages left 1 MiB over after
 * one round would otherwise sleep the full 2 s.  Rounds stop when one
 * makes no progress, and after 16 (MAX_RECLAIM_RETRIES).
 */
START_TEST(test_sample_high_reclaims_again_while_progress)
{
	uint32_t slot;
	int64_t held;
	struct cgm_thread_slot *t;

	ck_assert_int_eq(acct_attach(&ac, "/h/y"), 0);
	slot = acct_thread_register(&ac, (int)syscall(SYS_gettid));
	ck_assert_uint_ne(slot, CGM_NONE);
	t = &ac.h.threads[slot];
	set_file("/h", "memory.high", "32M");
	held = me()->held_pages;
	acct_sample_set(&ac, true, held * PAGE + 40 * MIB, 0, 0);
	anon_after_each[0] = held * PAGE + 33 * MIB;
	anon_after_each[1] = held * PAGE + 31 * MIB;
	nr_after_each = 2;
	acct_handle_high(&ac, t, 8 * MIB / PAGE);
	ck_assert_int_eq(reclaims, 2);
	ck_assert_int_eq(deep_reclaims, 1);
	ck_assert_int_eq(first_deep, 2);
	ck_assert_int_eq(event_count("/h", CGM_EV_HIGH), 1);
	ck_assert_int_eq(usage_of("/h"), held + 31 * MIB / PAGE);
	ck_assert_uint_eq(t->throttle_ns, 0);

	/* Progress of a page a round, never enough: 16 rounds, then the penalty (too small to sleep). */
	acct_sample_set(&ac, true, held * PAGE + 33 * MIB, 0, 0);
	reclaims = deep_reclaims = first_deep = 0;
	for (int i = 0; i < 20; i++)
		anon_after_each[i] = held * PAGE + 33 * MIB - (i + 1) * PAGE;
	nr_after_each = 20;
	acct_handle_high(&ac, t, 1);
	ck_assert_int_eq(reclaims, 16);
	ck_assert_int_eq(deep_reclaims, 15);

	/* No progress: one round only. */
	reclaims = deep_reclaims = 0;
	nr_after_each = 0;
	anon_after_reclaim = -1;
	acct_handle_high(&ac, t, 1);
	ck_assert_int_eq(reclaims, 1);
	ck_assert_int_eq(deep_reclaims, 0);
}
END_TEST

/* A reader refreshes a sample older than it accepts, from /proc/PID/statm. */
START_TEST(test_sample_reader_refreshes_stale)
{
	int64_t real = acct_read_anon(0, -1), seen;
	char buf[8192];

	ck_assert_int_gt(real, 0);
	ck_assert_int_eq(acct_attach(&ac, "/r"), 0);
	acct_sample_set(&ac, false, 1, 0, 0);
	ck_assert_int_eq(sampled_stat("/r", CGM_STAT_ANON), 1);
	/* Any age is too old for a reader that accepts none. */
	acct_refresh_stale(&ac.h, group_lookup(&ac.h, "/r"), 0);
	seen = sampled_stat("/r", CGM_STAT_ANON);
	/* This process's own RssAnon, give or take what it touched meanwhile. */
	ck_assert_msg(seen > real / 2 && seen < real * 2, "refreshed anon %" PRId64 ", statm %" PRId64,
		      seen, real);
	/* A sample younger than the reader's limit is left alone. */
	acct_sample_set(&ac, false, 7 * PAGE, 0, 0);
	acct_refresh_stale(&ac.h, group_lookup(&ac.h, "/r"), 10 * 1000000000LL);
	ck_assert_int_eq(sampled_stat("/r", CGM_STAT_ANON), 7 * PAGE);
	/* memory.stat, read as a reader does, shows a refreshed figure. */
	ck_assert_int_gt(cgm_file_read(&ac.h, group_lookup(&ac.h, "/r"), "memory.stat", buf,
				       sizeof(buf)), 0);
	ck_assert_int_ge(acct_file_value(buf, "anon"), 0);
}
END_TEST

/*
 * A memory.reclaim request answered by two threads of a process, the later
 * request finishing first (the handler's idle tick while the background
 * reclaim still answers the one before): the request must not stay
 * pending.  reclaim_done once went back to the earlier request with
 * reclaim_answering already at the later one, and no thread could begin
 * it again: pending for good.  Also across the counters' wrap.
 */
START_TEST(test_reclaim_answers_end_out_of_order)
{
	static struct cgm_proc p;
	uint32_t first, second, none;

	for (uint32_t base = 0; base != 2; base++) {
		uint32_t start = base ? UINT32_MAX : 0;

		memset(&p, 0, sizeof(p));
		p.reclaim_asked = p.reclaim_done = p.reclaim_answering = start;
		ck_assert(!acct_reclaim_pending(&p));
		p.reclaim_asked = start + 1;
		ck_assert(acct_reclaim_pending(&p));
		ck_assert(acct_reclaim_begin(&p, &first));
		ck_assert(!acct_reclaim_begin(&p, &none));
		/* A second request while the first is answered: another thread takes it. */
		p.reclaim_asked = start + 2;
		ck_assert(acct_reclaim_begin(&p, &second));
		ck_assert(!acct_reclaim_begin(&p, &none));
		acct_reclaim_end(&p, second);
		ck_assert(!acct_reclaim_pending(&p));
		acct_reclaim_end(&p, first);
		ck_assert(!acct_reclaim_pending(&p));
		ck_assert_uint_eq(p.reclaim_done, start + 2);
		/* The next request is answered as ever. */
		p.reclaim_asked = start + 3;
		ck_assert(acct_reclaim_begin(&p, &first));
		acct_reclaim_end(&p, first);
		ck_assert(!acct_reclaim_pending(&p));
	}
}
END_TEST

/* A child's part: fill 40 MiB, and sample it under the group's limit. */
static int fill_40m(struct cgm_acct *a, void *arg)
{
	/* Volatile: the stores into a block never read again are not left out. */
	static char *volatile kept;

	(void)arg;
	kept = malloc(40 * MIB);
	if (!kept)
		return -ENOMEM;
	memset(kept, 1, 40 * MIB);
	acct_sample_set(a, true, acct_read_anon(0, -1), 0, 0);
	return acct_sample_short(a) > 0 ? 0 : -ERANGE;
}

/*
 * A process asked to reclaim for its group is asked for its shortfall
 * too: what it has in use beyond its charge must go before what it gives
 * back lowers the group's usage.  Asked only for its share, a python3
 * that had brought every spilled page back for a fork gave 100 pages a
 * time and stayed at memory.max, and its forked child's first malloc
 * failed.
 */
START_TEST(test_reclaim_asks_for_shortfall)
{
	struct acct_child other;
	struct cgm_proc *p, *asked = NULL;
	int64_t short_pages;
	uint32_t i;

	ck_assert_int_eq(acct_attach(&ac, "/s/me"), 0);
	set_file("/s", "memory.max", "24M");
	ck_assert_int_eq(acct_child_start(&other, tmp.path, "/s/other", fill_40m, NULL), 0);
	ck_assert_int_eq(acct_child_result(&other), 0);
	for_each_live_proc(&ac.h, i, p)
		if (p->pid == other.pid)
			asked = p;
	ck_assert_ptr_nonnull(asked);
	/* The other process never answers: the pass waits half a second for it. */
	acct_reclaim_subtree(&ac.h, group_lookup(&ac.h, "/s"), 100, false);
	short_pages = __atomic_load_n(&asked->sample_short, __ATOMIC_RELAXED);
	ck_assert_int_gt(short_pages, 4 * MIB / PAGE);
	ck_assert_msg(asked->reclaim_want >= short_pages + 100,
		      "asked for %" PRId64 " pages, short by %" PRId64 " and 100 wanted",
		      asked->reclaim_want, short_pages);
	acct_child_finish(&other, true);
}
END_TEST

static void add_tests(TCase *tc, bool regressions)
{
	(void)regressions;
	tcase_add_test(tc, test_reclaim_answers_end_out_of_order);
	tcase_add_test(tc, test_sample_charges_beyond_held);
	tcase_add_test(tc, test_sample_anon_keeps_split);
	tcase_add_test(tc, test_sample_alloc_mode_publishes_only);
	tcase_add_test(tc, test_sample_base_not_charged);
	tcase_add_test(tc, test_sample_own_not_charged);
	tcase_add_test(tc, test_sample_max_reclaims_then_refuses);
	tcase_add_test(tc, test_limit_pages_lowest_up_the_tree);
	tcase_add_test(tc, test_reclaim_margin_signed_up_the_tree);
	tcase_add_test(tc, test_zswap_room_counts_unfolded);
	tcase_add_test(tc, test_refused_charge_reclaims_its_pages);
	tcase_add_test(tc, test_sample_high_reclaims_first);
	tcase_add_test(tc, test_sample_high_reclaims_again_while_progress);
	tcase_add_test(tc, test_sample_reader_refreshes_stale);
	tcase_add_test(tc, test_reclaim_asks_for_shortfall);
}

int main(int argc, char **argv)
{
	return acct_suite_main(argc, argv, "sample", &seed0, setup, teardown, add_tests);
}
