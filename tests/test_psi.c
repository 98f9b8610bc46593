/*
 * memory.pressure (accounting/psi.c, accounting/psi_trigger.c): stall
 * totals from memstall enter/leave, in the group and its ancestors, "some"
 * and "full"; the averages against stall patterns whose result is known
 * (the kernel's decay: 2 s periods, e^(-2/W)); the file's format; the
 * trigger rules and when a trigger fires and does not.
 *
 * usage: test_psi [regressions] [seed]
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "acct_fixture.h"
#include "cgm/clock.h"
#include "cgm/files.h"

#define MS 1000000LL
#define SEC 1000000000LL

static uint64_t seed0 = 1;
static struct acct_tmp tmp;
static struct cgm_acct ac;

static void setup(void)
{
	memset(&ac, 0, sizeof(ac));
	ac.proc = CGM_NONE;
	ac.batch_pages = CGM_CHARGE_BATCH;
	acct_tmp_open(&tmp, &ac.h);
}

static void teardown(void)
{
	hier_close(&ac.h);
	acct_tmp_remove(&tmp);
}

static struct cgm_psi *psi_of(const char *path)
{
	uint32_t g = group_lookup(&ac.h, path);

	ck_assert_msg(g != CGM_NONE, "no group %s", path);
	return &ac.h.groups[g].psi;
}

static void sleep_ns(int64_t ns)
{
	struct timespec ts = { (time_t)(ns / SEC), (long)(ns % SEC) };

	nanosleep(&ts, NULL);
}

/* A stall is timed in the group and its ancestors, not in a sibling. */
START_TEST(test_psi_totals)
{
	struct cgm_psi_view v;
	int64_t t0;

	ck_assert_int_ge(group_create(&ac.h, "/a", 0), 0);
	ck_assert_int_ge(group_create(&ac.h, "/a/b", 0), 0);
	ck_assert_int_ge(group_create(&ac.h, "/c", 0), 0);
	ck_assert_int_eq(acct_attach(&ac, "/a/b"), 0);
	t0 = cgm_now_ns();
	psi_memstall_enter(&ac.h, ac.proc);
	sleep_ns(60 * MS);
	psi_memstall_leave(&ac.h, ac.proc);
	t0 = cgm_now_ns() - t0;
	psi_totals_now(&ac.h, group_lookup(&ac.h, "/a/b"), cgm_now_ns(), &v);
	ck_assert_int_ge(v.total[CGM_PSI_SOME], 60 * MS);
	ck_assert_int_le(v.total[CGM_PSI_SOME], t0);
	/* One process with no thread slot of its own: every thread of it is stalled. */
	ck_assert_int_eq(v.total[CGM_PSI_FULL], v.total[CGM_PSI_SOME]);
	psi_totals_now(&ac.h, group_lookup(&ac.h, "/a"), cgm_now_ns(), &v);
	ck_assert_int_ge(v.total[CGM_PSI_SOME], 60 * MS);
	psi_totals_now(&ac.h, group_lookup(&ac.h, "/c"), cgm_now_ns(), &v);
	ck_assert_int_eq(v.total[CGM_PSI_SOME], 0);
	/* Two stalls at once count once; the time goes on until the last one leaves. */
	psi_memstall_enter(&ac.h, ac.proc);
	psi_memstall_enter(&ac.h, ac.proc);
	sleep_ns(20 * MS);
	psi_memstall_leave(&ac.h, ac.proc);
	psi_totals_now(&ac.h, group_lookup(&ac.h, "/a/b"), cgm_now_ns(), &v);
	ck_assert_int_ge(v.total[CGM_PSI_SOME], 80 * MS);
	ck_assert_int_le(v.total[CGM_PSI_SOME], t0 + 200 * MS);
	ck_assert_uint_eq(psi_of("/a/b")->stalled, 1);
	psi_memstall_leave(&ac.h, ac.proc);
	ck_assert_uint_eq(psi_of("/a/b")->stalled, 0);
	ck_assert_uint_eq(psi_of("/a")->stalled, 0);
	/* A leave without an enter changes nothing. */
	psi_memstall_leave(&ac.h, ac.proc);
	ck_assert_uint_eq(psi_of("/a")->stalled, 0);
}
END_TEST

/* A dead process's stalls end with it. */
START_TEST(test_psi_dead_process)
{
	ck_assert_int_ge(group_create(&ac.h, "/d", 0), 0);
	ck_assert_int_eq(acct_attach(&ac, "/d"), 0);
	psi_memstall_enter(&ac.h, ac.proc);
	ck_assert_uint_eq(psi_of("/d")->stalled, 1);
	psi_proc_gone(&ac.h, hier_proc(&ac.h, ac.proc));
	ck_assert_uint_eq(psi_of("/d")->stalled, 0);
	ck_assert_uint_eq(psi_of("/")->stalled, 0);
}
END_TEST

/*
 * Stalled half of the time for 10 s (five periods): avg10 is
 * 50 * (1 - e^-1), avg60 50 * (1 - e^(-1/6)), avg300 50 * (1 - e^(-1/30)).
 * Then 10 s without stall: each decays by e^(-10/W).
 */
START_TEST(test_psi_averages)
{
	struct cgm_psi *s;
	struct cgm_psi_view v;
	const double w[3] = { 10, 60, 300 };
	double want[3];
	char buf[256];
	int n;

	ck_assert_int_ge(group_create(&ac.h, "/avg", 0), 0);
	s = psi_of("/avg");
	s->avg_ns = cgm_now_ns() - 10 * SEC - 100 * MS;
	s->total[CGM_PSI_SOME] = 5 * SEC + 50 * MS;	/* half of the 10.1 s */
	psi_read(&ac.h, group_lookup(&ac.h, "/avg"), &v);
	for (int i = 0; i < 3; i++) {
		want[i] = 50 * (1 - exp(-10 / w[i]));
		ck_assert_msg(fabs(v.avg[CGM_PSI_SOME][i] - want[i]) < 0.2,
			      "avg%.0f = %.3f, expected %.3f", w[i], v.avg[CGM_PSI_SOME][i], want[i]);
		ck_assert_double_eq_tol(v.avg[CGM_PSI_FULL][i], 0, 1e-9);
	}
	/* 10 s more with no stall. */
	s->avg_ns -= 10 * SEC;
	s->avg_total[CGM_PSI_SOME] = s->total[CGM_PSI_SOME];
	psi_read(&ac.h, group_lookup(&ac.h, "/avg"), &v);
	for (int i = 0; i < 3; i++) {
		double decayed = want[i] * exp(-10 / w[i]);

		ck_assert_msg(fabs(v.avg[CGM_PSI_SOME][i] - decayed) < 0.2,
			      "after 10 s idle avg%.0f = %.3f, expected %.3f", w[i],
			      v.avg[CGM_PSI_SOME][i], decayed);
	}
	/* The file: two lines in the kernel's format, total in microseconds. */
	n = cgm_file_read(&ac.h, group_lookup(&ac.h, "/avg"), "memory.pressure", buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	ck_assert_msg(strstr(buf, "some avg10=") == buf && strstr(buf, " total=5050000\nfull avg10=0.00 "),
		      "memory.pressure reads:\n%s", buf);
}
END_TEST

START_TEST(test_psi_trigger_rules)
{
	struct psi_trigger t;
	char why[160];

	ck_assert_int_eq(psi_trigger_parse("some 150000 1000000", &t, why, sizeof(why)), 0);
	ck_assert_int_eq(t.kind, CGM_PSI_SOME);
	ck_assert_int_eq(t.threshold_ns, 150 * MS);
	ck_assert_int_eq(t.window_ns, 1 * SEC);
	ck_assert_int_eq(psi_trigger_parse("full 1 500000", &t, why, sizeof(why)), 0);
	ck_assert_int_eq(t.kind, CGM_PSI_FULL);
	ck_assert_int_eq(psi_trigger_parse("full 10000000 10000000", &t, why, sizeof(why)), 0);
	ck_assert_int_eq(psi_trigger_parse("some 1 499999", &t, why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(psi_trigger_parse("some 1 10000001", &t, why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(psi_trigger_parse("some 0 1000000", &t, why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(psi_trigger_parse("some 1000001 1000000", &t, why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(psi_trigger_parse("medium 1 1000000", &t, why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(psi_trigger_parse("some 1 1000000 x", &t, why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(psi_trigger_parse("some", &t, why, sizeof(why)), -EINVAL);
	/* Blanks as the kernel's sscanf takes them; a word that is not a number is refused. */
	ck_assert_int_eq(psi_trigger_parse(" full\t2  500000\n", &t, why, sizeof(why)), 0);
	ck_assert_int_eq(t.kind, CGM_PSI_FULL);
	ck_assert_int_eq(t.threshold_ns, 2000);
	ck_assert_int_eq(psi_trigger_parse("some 1x 1000000", &t, why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(psi_trigger_parse("some -1 1000000", &t, why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(psi_trigger_parse("somes 1 1000000", &t, why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(psi_trigger_parse("", &t, why, sizeof(why)), -EINVAL);
}
END_TEST

/* Fires when the stall grows by the threshold within the window, once per window. */
START_TEST(test_psi_trigger_fires)
{
	struct psi_trigger t;
	struct cgm_psi *s;
	uint32_t g;
	char why[160];
	int64_t now = cgm_now_ns();

	ck_assert_int_ge(group_create(&ac.h, "/t", 0), 0);
	g = group_lookup(&ac.h, "/t");
	s = psi_of("/t");
	ck_assert_int_eq(psi_trigger_parse("some 150000 1000000", &t, why, sizeof(why)), 0);
	ck_assert(!psi_trigger_poll(&ac.h, g, &t, now));
	/* 100 ms of stall in 100 ms: under the threshold. */
	s->total[CGM_PSI_SOME] += 100 * MS;
	ck_assert(!psi_trigger_poll(&ac.h, g, &t, now + 100 * MS));
	/* 160 ms within the window: fires. */
	s->total[CGM_PSI_SOME] += 60 * MS;
	ck_assert(psi_trigger_poll(&ac.h, g, &t, now + 200 * MS));
	/* More stall within the same window: not again. */
	s->total[CGM_PSI_SOME] += 300 * MS;
	ck_assert(!psi_trigger_poll(&ac.h, g, &t, now + 300 * MS));
	/* Windows later with no growth: nothing. */
	for (int64_t at = 1400; at <= 3000; at += 100)
		ck_assert_msg(!psi_trigger_poll(&ac.h, g, &t, now + at * MS), "fired at %lld ms",
			      (long long)at);
	/* Growth spread thinly (100 ms per second): never the threshold within a window. */
	for (int64_t at = 3100; at <= 6000; at += 100) {
		s->total[CGM_PSI_SOME] += 10 * MS;
		ck_assert_msg(!psi_trigger_poll(&ac.h, g, &t, now + at * MS), "thin stall fired at %lld ms",
			      (long long)at);
	}
	/* A burst fires again, a window after the last firing. */
	s->total[CGM_PSI_SOME] += 200 * MS;
	ck_assert(psi_trigger_poll(&ac.h, g, &t, now + 6100 * MS));
	/* "full" does not fire on "some" stall. */
	ck_assert_int_eq(psi_trigger_parse("full 150000 1000000", &t, why, sizeof(why)), 0);
	ck_assert(!psi_trigger_poll(&ac.h, g, &t, now));
	s->total[CGM_PSI_SOME] += 500 * MS;
	ck_assert(!psi_trigger_poll(&ac.h, g, &t, now + 200 * MS));
	s->total[CGM_PSI_FULL] += 500 * MS;
	ck_assert(psi_trigger_poll(&ac.h, g, &t, now + 300 * MS));
}
END_TEST

/* vmpressure: the levels of reclaim efficiency, over windows of 512 pages, only with listeners. */
START_TEST(test_vmpressure)
{
	uint32_t a, b;

	ck_assert_int_eq(vmpressure_level(512, 512), CGM_VMP_LOW);
	ck_assert_int_eq(vmpressure_level(512, 210), CGM_VMP_LOW);	/* 59% not reclaimed */
	ck_assert_int_eq(vmpressure_level(512, 200), CGM_VMP_MEDIUM);	/* 61% */
	ck_assert_int_eq(vmpressure_level(512, 26), CGM_VMP_MEDIUM);	/* 94.9% */
	ck_assert_int_eq(vmpressure_level(512, 25), CGM_VMP_CRITICAL);	/* 95.1% */
	ck_assert_int_eq(vmpressure_level(0, 0), CGM_VMP_CRITICAL);
	ck_assert_int_eq(vmpressure_parse_level("medium"), CGM_VMP_MEDIUM);
	ck_assert_int_eq(vmpressure_parse_level("high"), -1);
	ck_assert_int_ge(group_create(&ac.h, "/v", 0), 0);
	ck_assert_int_ge(group_create(&ac.h, "/v/w", 0), 0);
	a = group_lookup(&ac.h, "/v");
	b = group_lookup(&ac.h, "/v/w");
	/* No listener: nothing is counted. */
	vmpressure_account(&ac.h, b, 1000, 0);
	ck_assert_uint_eq(vmpressure_events(&ac.h, b, CGM_VMP_LOW), 0);
	vmpressure_listen(&ac.h, a, true);
	ck_assert_uint_eq(ac.h.hdr->vmp_listeners, 1);
	/* Half a window: no event yet; the window fills in the ancestor with the listener. */
	vmpressure_account(&ac.h, b, 300, 250);
	ck_assert_uint_eq(vmpressure_events(&ac.h, a, CGM_VMP_LOW), 0);
	vmpressure_account(&ac.h, b, 300, 250);
	ck_assert_uint_eq(vmpressure_events(&ac.h, a, CGM_VMP_LOW), 1);
	ck_assert_uint_eq(vmpressure_events(&ac.h, a, CGM_VMP_MEDIUM), 0);
	ck_assert_uint_eq(vmpressure_events(&ac.h, b, CGM_VMP_LOW), 0);	/* no listener there */
	/* A poor window is medium; nothing to look at, at a limit, is critical at once. */
	vmpressure_account(&ac.h, b, 600, 100);
	ck_assert_uint_eq(vmpressure_events(&ac.h, a, CGM_VMP_MEDIUM), 1);
	vmpressure_account(&ac.h, b, 0, 0);
	ck_assert_uint_eq(vmpressure_events(&ac.h, a, CGM_VMP_CRITICAL), 1);
	ck_assert_uint_eq(vmpressure_events(&ac.h, a, CGM_VMP_LOW), 3);
	vmpressure_listen(&ac.h, a, false);
	ck_assert_uint_eq(ac.h.hdr->vmp_listeners, 0);
	vmpressure_account(&ac.h, b, 0, 0);
	ck_assert_uint_eq(vmpressure_events(&ac.h, a, CGM_VMP_LOW), 3);
}
END_TEST

static void add_tests(TCase *tc, bool regressions)
{
	(void)regressions;
	tcase_add_test(tc, test_vmpressure);
	tcase_add_test(tc, test_psi_totals);
	tcase_add_test(tc, test_psi_dead_process);
	tcase_add_test(tc, test_psi_averages);
	tcase_add_test(tc, test_psi_trigger_rules);
	tcase_add_test(tc, test_psi_trigger_fires);
}

int main(int argc, char **argv)
{
	return acct_suite_main(argc, argv, "psi", &seed0, setup, teardown, add_tests);
}
