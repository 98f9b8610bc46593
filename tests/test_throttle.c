/*
 * memory.high throttling (accounting/charge.c): acct_high_delay_ms()
 * against the kernel's table and an independent transcription of
 * calculate_high_delay(); monotone in usage and charge size, capped at
 * 2 s; and a charge over memory.high really sleeps about that long,
 * accounts the stall and counts the high event where the kernel would.
 *
 * usage: test_throttle [regressions] [seed]
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "acct_fixture.h"
#include "cgm/clock.h"
#include "cgm/files.h"

#define MB_PAGES(mb) ((int64_t)(mb) * 1024 * 1024 / CGM_PAGE_SIZE)

static uint64_t seed0 = 1;

/*
 * mm/memcontrol.c, HZ = 1000: overage = (usage - high) << 20 / high;
 * penalty = overage^2 * HZ >> 20 >> 14, times nr_pages / MEMCG_CHARGE_BATCH;
 * the caller caps it at MEMCG_MAX_HIGH_DELAY_JIFFIES (2 s).  Plain
 * 64-bit arithmetic, as the kernel does it; valid while overage^2 * 1000
 * fits (usage below about 128 times high).
 */
static uint64_t kernel_delay_ms(uint64_t usage, uint64_t high, uint64_t nr_pages)
{
	uint64_t overage, penalty;

	if (usage <= high)
		return 0;
	if (high < 1)
		high = 1;
	overage = ((usage - high) << 20) / high;
	penalty = overage * overage * 1000;
	penalty >>= 20;
	penalty >>= 14;
	penalty = penalty * nr_pages / 64;
	return penalty < 2000 ? penalty : 2000;
}

START_TEST(test_kernel_table)
{
	int64_t high = MB_PAGES(100);

	/* The kernel's figures for high = 100M, one MEMCG_CHARGE_BATCH charge. */
	ck_assert_int_eq(acct_high_delay_ms(MB_PAGES(100), high, CGM_CHARGE_BATCH), 0);
	ck_assert_int_eq(acct_high_delay_ms(MB_PAGES(100) + 1, high, CGM_CHARGE_BATCH), 0);
	ck_assert_int_eq(acct_high_delay_ms(MB_PAGES(101), high, CGM_CHARGE_BATCH), 6);
	ck_assert_int_eq(acct_high_delay_ms(MB_PAGES(110), high, CGM_CHARGE_BATCH), 639);
	ck_assert_int_eq(acct_high_delay_ms(MB_PAGES(117), high, CGM_CHARGE_BATCH), 1849);
	for (int mb = 118; mb <= 4096; mb = mb < 130 ? mb + 1 : mb * 2)
		ck_assert_msg(acct_high_delay_ms(MB_PAGES(mb), high, CGM_CHARGE_BATCH) == 2000,
			      "%d M over 100 M: %" PRIu64 " ms", mb,
			      acct_high_delay_ms(MB_PAGES(mb), high, CGM_CHARGE_BATCH));
	/* The cap holds at absurd values too: no overflow, no wrap to small. */
	ck_assert_int_eq(acct_high_delay_ms(INT64_MAX / 2, 1, CGM_CHARGE_BATCH), 2000);
	ck_assert_int_eq(acct_high_delay_ms(INT64_MAX, 0, INT64_MAX / 4096), 2000);
	ck_assert_int_eq(acct_high_delay_ms(5, 0, 1), 2000);
	/* A quarter of a batch pays a quarter of the penalty. */
	ck_assert_int_eq(acct_high_delay_ms(MB_PAGES(110), high, 16), 639 / 4);
}
END_TEST

START_TEST(test_matches_kernel_formula)
{
	uint64_t rng = seed0 + 17;
	int bad = 0;
	char first[200] = "";

	for (int i = 0; i < 200000; i++) {
		int64_t high = 1 + (int64_t)acct_rand_below(&rng, acct_rand_below(&rng, 2) ? 1000 : 50000000);
		int64_t usage = (int64_t)acct_rand_below(&rng, (uint64_t)high * (1 + acct_rand_below(&rng, 3)) +
							   (uint64_t)high / 4 + 2);
		int64_t nr = 1 + (int64_t)acct_rand_below(&rng, 512);
		uint64_t got = acct_high_delay_ms(usage, high, nr);
		uint64_t want = kernel_delay_ms((uint64_t)usage, (uint64_t)high, (uint64_t)nr);

		if (got != want && bad++ == 0)
			snprintf(first, sizeof(first), "usage %" PRId64 " high %" PRId64 " nr %" PRId64
				 ": %" PRIu64 " ms, kernel %" PRIu64, usage, high, nr, got, want);
	}
	ck_assert_msg(bad == 0, "%d differences; first: %s", bad, first);
}
END_TEST

START_TEST(test_monotone)
{
	uint64_t rng = seed0 + 19;
	int bad = 0;

	for (int i = 0; i < 300; i++) {
		int64_t high = 1 + (int64_t)acct_rand_below(&rng, 1000000);
		int64_t nr = 1 + (int64_t)acct_rand_below(&rng, 256);
		uint64_t last = 0, last_nr = 0;

		for (int64_t usage = high - 5; usage < high * 2; usage += 1 + high / 500) {
			uint64_t d = acct_high_delay_ms(usage, high, nr);

			bad += d < last || d > 2000;
			last = d;
		}
		for (int64_t n = 1; n < 1024; n += 7) {
			uint64_t d = acct_high_delay_ms(high + high / 10, high, n);

			bad += d < last_nr;
			last_nr = d;
		}
	}
	ck_assert_msg(bad == 0, "%d steps where the delay went down or past the cap", bad);
}
END_TEST

/* This process attached to /top/h1/h2, with memory.high=4000K (1000 pages) on /top/h1. */
static void attach_h1(struct acct_tmp *tmp, struct cgm_acct *a, uint32_t *top, uint32_t *h1,
		      uint32_t *h2)
{
	char why[256];

	acct_tmp_open(tmp, &a->h);
	ck_assert_int_eq(acct_attach(a, "/top/h1/h2"), 0);
	*top = group_lookup(&a->h, "/top");
	*h1 = group_lookup(&a->h, "/top/h1");
	*h2 = group_lookup(&a->h, "/top/h1/h2");
	ck_assert_int_eq(cgm_file_write(&a->h, CGM_NONE, *h1, "memory.high", "4000K", why,
					sizeof(why)), 0);
	ck_assert_int_eq(a->h.groups[*h1].memory.high, 1000);
}

/*
 * A charge that takes /h1 past its memory.high throttles the charging
 * thread by the penalty of its charge, accounts the stall in the thread's
 * slot (throttle_usec), and counts a high event on /h1 -- local on /h1,
 * hierarchical on /h1 and its ancestors but not the root, nothing on the
 * group below it that did the charging.
 */
START_TEST(test_high_throttles)
{
	struct acct_tmp tmp = { .dir = "" };
	struct cgm_acct a = { .proc = CGM_NONE, .batch_pages = CGM_CHARGE_BATCH };
	struct cgm_thread_slot *t;
	uint32_t slot, h1, h2, top;
	char buf[4096];
	int64_t usage, high = 1000, start, elapsed, want_ms, stock, throttled;

	attach_h1(&tmp, &a, &top, &h1, &h2);
	slot = acct_thread_register(&a, (int)syscall(SYS_gettid));
	t = &a.h.threads[slot];

	/* Up to just under high: no throttling, no event. */
	while (page_counter_read(&a.h.groups[h1].memory) + 64 <= high)
		ck_assert_int_gt(sim_malloc(&a, t, 64 * CGM_PAGE_SIZE, true), 0);
	ck_assert_int_eq(t->throttle_ns, 0);
	ck_assert_int_eq(a.h.groups[h1].events_local[CGM_EV_HIGH], 0);

	/* Over it without limit checks (as before the limits key is on): no penalty. */
	while (page_counter_read(&a.h.groups[h1].memory) < high - 20)
		ck_assert_int_gt(sim_malloc(&a, t, CGM_PAGE_SIZE, false), 0);
	ck_assert_int_gt(page_counter_read(&a.h.groups[h1].memory), high);
	ck_assert_int_eq(t->throttle_ns, 0);
	/* Use up the stock (whole pages here), so the next block is charged exactly. */
	stock = t->stock;
	if (stock > 0)
		ck_assert_int_eq(sim_malloc(&a, t, (size_t)stock, false), stock);
	ck_assert_int_eq(t->stock, 0);

	/* One charge of 64 pages now: a few percent over, a few hundred ms. */
	usage = page_counter_read(&a.h.groups[h1].memory) + 64;
	want_ms = (int64_t)acct_high_delay_ms(usage, high, 64);
	ck_assert_int_gt(want_ms, 100);
	start = cgm_now_ns();
	ck_assert_int_gt(sim_malloc(&a, t, 64 * CGM_PAGE_SIZE, true), 0);
	elapsed = cgm_now_ns() - start;
	/* At least the penalty; the upper bound only catches a sleep gone wrong (noisy machine). */
	ck_assert_msg(elapsed >= want_ms * 1000000 && elapsed < want_ms * 1000000 + 5000000000LL,
		      "slept %" PRId64 " ms for a penalty of %" PRId64 " ms", elapsed / 1000000, want_ms);
	ck_assert_int_ge((int64_t)t->throttle_ns, want_ms * 1000000);
	ck_assert_int_le((int64_t)t->throttle_ns, elapsed);

	ck_assert_int_eq(a.h.groups[h1].events_local[CGM_EV_HIGH], 1);
	ck_assert_int_eq(a.h.groups[h1].events[CGM_EV_HIGH], 1);
	ck_assert_int_eq(a.h.groups[top].events[CGM_EV_HIGH], 1);
	ck_assert_int_eq(a.h.groups[top].events_local[CGM_EV_HIGH], 0);
	ck_assert_int_eq(a.h.groups[h2].events[CGM_EV_HIGH], 0);
	ck_assert_int_eq(a.h.groups[h2].events_local[CGM_EV_HIGH], 0);
	ck_assert_int_eq(a.h.groups[CGM_ROOT].events[CGM_EV_HIGH], 0);

	/* The stall is in memory.stat, of the charging group and above. */
	ck_assert_int_gt(cgm_file_read(&a.h, h2, "memory.stat.local", buf, sizeof(buf)), 0);
	ck_assert_int_eq(acct_file_value(buf, "throttle_usec"), (int64_t)t->throttle_ns / 1000);
	ck_assert_int_gt(cgm_file_read(&a.h, top, "memory.stat", buf, sizeof(buf)), 0);
	ck_assert_int_eq(acct_file_value(buf, "throttle_usec"), (int64_t)t->throttle_ns / 1000);
	ck_assert_int_gt(cgm_file_read(&a.h, h1, "memory.events.local", buf, sizeof(buf)), 0);
	ck_assert_int_eq(acct_file_value(buf, "high"), 1);

	/* Under high again (frees harvested by the charge path): no more penalty. */
	sim_free(t, (page_counter_read(&a.h.groups[h1].memory) - high / 2) * CGM_PAGE_SIZE);
	throttled = (int64_t)t->throttle_ns;
	ck_assert_int_gt(sim_malloc(&a, t, 64 * CGM_PAGE_SIZE, true), 0);
	ck_assert_int_eq((int64_t)t->throttle_ns, throttled);
	ck_assert_int_eq(a.h.groups[h1].events_local[CGM_EV_HIGH], 1);
	acct_detach(&a);
	hier_close(&a.h);
	acct_tmp_remove(&tmp);
}
END_TEST

/*
 * The penalty the spill handler holds off for (acct_high_penalty_ms): the
 * greatest over the group and its ancestors of the kernel's, with the
 * pages not charged yet counted in; a high event on each group over its
 * high only when asked; and the hold-off a process publishes lands in
 * memory.stat's throttle_usec of its group and above.
 */
START_TEST(test_high_penalty)
{
	struct acct_tmp tmp = { .dir = "" };
	struct cgm_acct a = { .proc = CGM_NONE, .batch_pages = CGM_CHARGE_BATCH };
	struct acct_spill_state st = { 0 };
	struct cgm_thread_slot *t;
	uint32_t slot, h1, h2, top;
	char why[256], buf[4096];
	int64_t usage, high = 1000;

	attach_h1(&tmp, &a, &top, &h1, &h2);
	ck_assert_int_eq(cgm_file_write(&a.h, CGM_NONE, top, "memory.high", "8000K", why, sizeof(why)), 0);
	slot = acct_thread_register(&a, (int)syscall(SYS_gettid));
	t = &a.h.threads[slot];

	while (page_counter_read(&a.h.groups[h1].memory) + 64 <= high - 100)
		ck_assert_int_gt(sim_malloc(&a, t, 64 * CGM_PAGE_SIZE, false), 0);
	usage = page_counter_read(&a.h.groups[h1].memory);
	ck_assert_int_eq(acct_high_penalty_ms(&a, 0, 64, true), 0);
	ck_assert_int_eq(a.h.groups[h1].events_local[CGM_EV_HIGH], 0);
	/* What came back and is not charged yet takes it over: h1's penalty, no event. */
	ck_assert_int_eq(acct_high_penalty_ms(&a, 200, 64, false),
			 (int64_t)acct_high_delay_ms(usage + 200, high, 64));
	ck_assert_int_gt(acct_high_penalty_ms(&a, 200, 64, false), 0);
	ck_assert_int_eq(acct_high_penalty_ms(&a, 200, 0, false), 0);
	ck_assert_int_eq(a.h.groups[h1].events_local[CGM_EV_HIGH], 0);

	/* Charged over h1's high (not /top's): h1's penalty, and with @event its high event alone. */
	while (page_counter_read(&a.h.groups[h1].memory) <= high + 100)
		ck_assert_int_gt(sim_malloc(&a, t, 64 * CGM_PAGE_SIZE, false), 0);
	usage = page_counter_read(&a.h.groups[h1].memory);
	ck_assert_int_lt(usage, 2 * high);
	ck_assert_int_eq(acct_high_penalty_ms(&a, 0, 16, true),
			 (int64_t)acct_high_delay_ms(usage, high, 16));
	ck_assert_int_eq(a.h.groups[h1].events_local[CGM_EV_HIGH], 1);
	ck_assert_int_eq(a.h.groups[top].events_local[CGM_EV_HIGH], 0);
	ck_assert_int_eq(a.h.groups[h2].events_local[CGM_EV_HIGH], 0);
	/* Far past /top's too: the greater of the two, and an event on each. */
	ck_assert_int_eq(acct_high_penalty_ms(&a, 3 * high, 16, true),
			 (int64_t)acct_high_delay_ms(usage + 3 * high, high, 16));
	ck_assert_int_eq(a.h.groups[h1].events_local[CGM_EV_HIGH], 2);
	ck_assert_int_eq(a.h.groups[top].events_local[CGM_EV_HIGH], 1);

	/* A hold-off the process publishes is its groups' throttle_usec. */
	st.throttle_ns = 250000000;
	acct_spill_publish(&a, &st);
	rstat_fold_sampled(&a.h, a.proc);
	ck_assert_int_gt(cgm_file_read(&a.h, top, "memory.stat", buf, sizeof(buf)), 0);
	ck_assert_int_eq(acct_file_value(buf, "throttle_usec"), 250000);
	st.throttle_ns = 400000000;
	acct_spill_publish(&a, &st);
	rstat_fold_sampled(&a.h, a.proc);
	ck_assert_int_gt(cgm_file_read(&a.h, h2, "memory.stat.local", buf, sizeof(buf)), 0);
	ck_assert_int_eq(acct_file_value(buf, "throttle_usec"), 400000);
	acct_detach(&a);
	hier_close(&a.h);
	acct_tmp_remove(&tmp);
}
END_TEST

/*
 * Reclaim keeps pace while what it reclaimed, over time, is at least what
 * came back: bursts even out, a deficit is paid back before it keeps pace
 * again, and neither side banks more than CGM_RECLAIM_PACE_CAP pages.
 */
START_TEST(test_reclaim_pace)
{
	struct acct_reclaim_pace pace = { 0 };
	uint64_t total = 0;

	/* A burst, then looks where nothing was reclaimed: paid for by the burst. */
	ck_assert(acct_reclaim_keeps_pace(&pace, total += 700, 700));
	ck_assert(acct_reclaim_keeps_pace(&pace, total += 1500, 500));
	ck_assert(acct_reclaim_keeps_pace(&pace, total, 500));
	ck_assert(acct_reclaim_keeps_pace(&pace, total, 500));
	/* Behind: nothing reclaimed while more came back. */
	ck_assert(!acct_reclaim_keeps_pace(&pace, total, 300));
	ck_assert_int_eq(pace.credit, -300);
	/* Caught up only once the deficit is paid. */
	ck_assert(!acct_reclaim_keeps_pace(&pace, total += 200, 0));
	ck_assert(acct_reclaim_keeps_pace(&pace, total += 100, 0));
	/* A long run ahead banks no more than the cap... */
	ck_assert(acct_reclaim_keeps_pace(&pace, total += 100000, 0));
	ck_assert_int_eq(pace.credit, CGM_RECLAIM_PACE_CAP);
	ck_assert(!acct_reclaim_keeps_pace(&pace, total, CGM_RECLAIM_PACE_CAP + 1));
	/* ...nor a long run behind owes more. */
	ck_assert(!acct_reclaim_keeps_pace(&pace, total, 100000));
	ck_assert_int_eq(pace.credit, -CGM_RECLAIM_PACE_CAP);
	ck_assert(acct_reclaim_keeps_pace(&pace, total += CGM_RECLAIM_PACE_CAP, 0));
}
END_TEST

static void add_tests(TCase *tc, bool regressions)
{
	if (regressions)
		return;
	tcase_add_test(tc, test_kernel_table);
	tcase_add_test(tc, test_matches_kernel_formula);
	tcase_add_test(tc, test_monotone);
	tcase_add_test(tc, test_high_throttles);
	tcase_add_test(tc, test_high_penalty);
	tcase_add_test(tc, test_reclaim_pace);
}

int main(int argc, char **argv)
{
	return acct_suite_main(argc, argv, "throttle", &seed0, NULL, NULL, add_tests);
}
