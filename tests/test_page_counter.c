/*
 * Invariants of accounting/page_counter.c on random trees of counters,
 * checked against a model kept by the test: usage is exactly what the
 * subtree charged, never negative, never above max; a refused try_charge
 * changes nothing but the refusing counter's failcnt; watermarks never
 * decrease; protected usage adds up; effective protection matches an
 * independent, plain transcription of the kernel's effective_protection().
 *
 * usage: test_page_counter [regressions] [seed]
 *   "regressions" runs only the cases of bugs found and fixed
 *   (check-accounting-regressions).
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acct_fixture.h"
#include "cgm/mul_div.h"
#include "cgm/size.h"
#include "cgm/page_counter.h"

#define NMAX 48

static uint64_t seed0 = 1;

/* A random tree: parent[i] < i, counter 0 is the root. */
struct tree {
	int n;
	int parent[NMAX];
	int64_t own[NMAX];		/* pages charged directly to each node */
	struct page_counter pc[NMAX];
};

static void tree_build(struct tree *t, uint64_t *rng, int n, int fanout_bias)
{
	memset(t, 0, sizeof(*t));
	t->n = n;
	t->parent[0] = -1;
	page_counter_init(&t->pc[0], NULL);
	for (int i = 1; i < n; i++) {
		/* A bias towards recent nodes makes deeper trees. */
		int lo = fanout_bias && i > 3 ? i - 3 : 0;

		t->parent[i] = lo + (int)acct_rand_below(rng, (uint64_t)(i - lo));
		page_counter_init(&t->pc[i], &t->pc[t->parent[i]]);
	}
}

/* usage[i] = sum of own[] over the subtree of i (parents precede children). */
static void tree_usage(const struct tree *t, int64_t *usage)
{
	for (int i = 0; i < t->n; i++)
		usage[i] = t->own[i];
	for (int i = t->n - 1; i > 0; i--)
		usage[t->parent[i]] += usage[i];
}

static bool is_ancestor_or_self(const struct tree *t, int a, int i)
{
	for (; i >= 0; i = t->parent[i])
		if (i == a)
			return true;
	return false;
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

START_TEST(test_charge_uncharge_model)
{
	uint64_t rng = seed0 + 11;
	int bad = 0, first_iter = -1;

	for (int iter = 0; iter < 200; iter++) {
		struct tree t;
		int64_t usage[NMAX];

		tree_build(&t, &rng, 2 + (int)acct_rand_below(&rng, NMAX - 1), iter & 1);
		for (int op = 0; op < 300; op++) {
			int i = (int)acct_rand_below(&rng, (uint64_t)t.n);
			int64_t nr = 1 + (int64_t)acct_rand_below(&rng, 100);

			if (acct_rand_below(&rng, 2) || t.own[i] < nr) {
				page_counter_charge(&t.pc[i], nr);
				t.own[i] += nr;
			} else {
				page_counter_uncharge(&t.pc[i], nr);
				t.own[i] -= nr;
			}
		}
		tree_usage(&t, usage);
		for (int i = 0; i < t.n; i++)
			if (page_counter_read(&t.pc[i]) != usage[i] && bad++ == 0)
				first_iter = iter;
		/* Everything uncharged: every ancestor is back at zero exactly. */
		for (int i = 0; i < t.n; i++)
			page_counter_uncharge(&t.pc[i], t.own[i]);
		for (int i = 0; i < t.n; i++)
			bad += page_counter_read(&t.pc[i]) != 0;
	}
	ck_assert_msg(bad == 0, "%d counters differ from the model (first in tree %d, seed %" PRIu64 ")",
		      bad, first_iter, seed0);
}
END_TEST

START_TEST(test_uncharge_clamps_at_zero)
{
	struct page_counter c[3];

	page_counter_init(&c[0], NULL);
	page_counter_init(&c[1], &c[0]);
	page_counter_init(&c[2], &c[1]);
	page_counter_charge(&c[1], 7);		/* c0 7, c1 7 */
	page_counter_charge(&c[2], 5);		/* c0 12, c1 12, c2 5 */
	page_counter_uncharge(&c[2], 8);	/* 3 too many at c2 */
	ck_assert_int_eq(page_counter_read(&c[2]), 0);
	ck_assert_int_eq(page_counter_read(&c[1]), 4);
	ck_assert_int_eq(page_counter_read(&c[0]), 4);
	page_counter_uncharge(&c[1], 1000);
	for (int i = 0; i < 3; i++)
		ck_assert_msg(page_counter_read(&c[i]) == 0, "counter %d at %" PRId64, i,
			      page_counter_read(&c[i]));
	/* A clamped counter charges normally afterwards. */
	page_counter_charge(&c[2], 3);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(page_counter_read(&c[i]), 3);
}
END_TEST

/* Every field but the watermark, which test_try_charge_failure_watermark covers. */
static bool same_but_watermark(const struct page_counter *a, const struct page_counter *b)
{
	struct page_counter x = *a, y = *b;

	x.watermark = y.watermark = 0;
	return memcmp(&x, &y, sizeof(x)) == 0;
}

START_TEST(test_try_charge_failure_restores)
{
	uint64_t rng = seed0 + 23;
	int bad = 0, fails = 0, oks = 0;
	char first[200] = "";

	for (int iter = 0; iter < 150; iter++) {
		struct tree t;
		int64_t usage[NMAX];

		tree_build(&t, &rng, 2 + (int)acct_rand_below(&rng, NMAX - 1), iter & 1);
		for (int i = 0; i < t.n; i++) {
			if (acct_rand_below(&rng, 3) == 0)
				page_counter_set_max(&t.pc[i], 50 + (int64_t)acct_rand_below(&rng, 400));
			if (acct_rand_below(&rng, 4) == 0)
				page_counter_set_min(&t.pc[i], (int64_t)acct_rand_below(&rng, 200));
			if (acct_rand_below(&rng, 4) == 0)
				page_counter_set_low(&t.pc[i], (int64_t)acct_rand_below(&rng, 200));
		}
		for (int op = 0; op < 200; op++) {
			struct page_counter before[NMAX], *fail = NULL;
			int i = (int)acct_rand_below(&rng, (uint64_t)t.n);
			int64_t nr = 1 + (int64_t)acct_rand_below(&rng, 64);

			memcpy(before, t.pc, sizeof(before));
			if (acct_rand_below(&rng, 4) == 0 && t.own[i] >= nr) {
				page_counter_uncharge(&t.pc[i], nr);
				t.own[i] -= nr;
				continue;
			}
			if (page_counter_try_charge(&t.pc[i], nr, &fail)) {
				oks++;
				t.own[i] += nr;
				tree_usage(&t, usage);
				for (int j = 0; j < t.n; j++)
					if (page_counter_read(&t.pc[j]) != usage[j] ||
					    usage[j] > t.pc[j].max)
						bad++;
				continue;
			}
			fails++;
			{
				int f = (int)(fail - t.pc);

				/* The refusal is legitimate and comes from the charged path. */
				if (f < 0 || f >= t.n || !is_ancestor_or_self(&t, f, i) ||
				    before[f].usage + nr <= before[f].max) {
					if (bad++ == 0)
						snprintf(first, sizeof(first), "bogus refusal by %d", f);
					continue;
				}
				before[f].failcnt++;
			}
			for (int j = 0; j < t.n; j++)
				if (!same_but_watermark(&before[j], &t.pc[j]) && bad++ == 0)
					snprintf(first, sizeof(first),
						 "counter %d changed by a refused charge of %" PRId64
						 " at %d: usage %" PRId64 " -> %" PRId64 ", failcnt %" PRId64
						 " -> %" PRId64, j, nr, i, before[j].usage, t.pc[j].usage,
						 before[j].failcnt, t.pc[j].failcnt);
		}
	}
	ck_assert_msg(fails > 100 && oks > 100, "the test did not exercise both sides (%d/%d)", fails, oks);
	ck_assert_msg(bad == 0, "%d violations; first: %s (seed %" PRIu64 ")", bad, first, seed0);
}
END_TEST

/*
 * page_counter.h: "a failed try_charge leaves no counter changed except
 * the refusing one's failcnt" -- the watermarks below the refusing
 * counter included.
 */
START_TEST(test_try_charge_failure_watermark)
{
	struct page_counter parent, child, *fail = NULL;

	page_counter_init(&parent, NULL);
	page_counter_init(&child, &parent);
	page_counter_set_max(&parent, 10);
	page_counter_charge(&child, 8);
	ck_assert_int_eq(child.watermark, 8);
	ck_assert(!page_counter_try_charge(&child, 5, &fail));
	ck_assert_ptr_eq(fail, &parent);
	ck_assert_int_eq(page_counter_read(&child), 8);
	ck_assert_msg(child.watermark == 8,
		      "child's memory.peak became %" PRId64 " pages after a charge its parent refused",
		      child.watermark);
	ck_assert_int_eq(parent.watermark, 8);
}
END_TEST

START_TEST(test_watermark_monotone)
{
	uint64_t rng = seed0 + 37;
	int bad = 0;

	for (int iter = 0; iter < 100; iter++) {
		struct tree t;
		int64_t usage[NMAX], peak[NMAX] = { 0 };

		tree_build(&t, &rng, 2 + (int)acct_rand_below(&rng, NMAX - 1), iter & 1);
		for (int op = 0; op < 400; op++) {
			int64_t wm_before[NMAX];
			int i = (int)acct_rand_below(&rng, (uint64_t)t.n);
			int64_t nr = 1 + (int64_t)acct_rand_below(&rng, 50);

			for (int j = 0; j < t.n; j++)
				wm_before[j] = t.pc[j].watermark;
			if (acct_rand_below(&rng, 2) && t.own[i] >= nr) {
				page_counter_uncharge(&t.pc[i], nr);
				t.own[i] -= nr;
			} else {
				page_counter_charge(&t.pc[i], nr);
				t.own[i] += nr;
			}
			tree_usage(&t, usage);
			for (int j = 0; j < t.n; j++) {
				if (usage[j] > peak[j])
					peak[j] = usage[j];
				/* Never down; exactly the highest usage seen (one thread). */
				if (t.pc[j].watermark < wm_before[j] || t.pc[j].watermark != peak[j])
					bad++;
			}
		}
		/* A reset restarts at the current usage, and grows from there. */
		page_counter_reset_watermark(&t.pc[0]);
		tree_usage(&t, usage);
		bad += t.pc[0].watermark != usage[0];
	}
	ck_assert_msg(bad == 0, "%d watermark violations (seed %" PRIu64 ")", bad, seed0);
}
END_TEST

/* ---- concurrent try_charge against a shared max ---- */

#define PC_THREADS 4
#define PC_CHUNK 3

struct race {
	struct page_counter root, mid, leaf[PC_THREADS];
	int64_t max;
	volatile int stop;
	int64_t held[PC_THREADS];
	int64_t refused[PC_THREADS];
	int64_t over_samples, worst;
};

/* root <- mid (max 100 pages) <- one leaf per thread */
static void race_init(struct race *r)
{
	memset(r, 0, sizeof(*r));
	r->max = 100;
	page_counter_init(&r->root, NULL);
	page_counter_init(&r->mid, &r->root);
	for (int i = 0; i < PC_THREADS; i++)
		page_counter_init(&r->leaf[i], &r->mid);
	ck_assert_int_eq(page_counter_set_max(&r->mid, r->max), 0);
}

static void *race_charger(void *arg)
{
	struct race *r = arg;
	static int next;
	int me = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED) % PC_THREADS;
	uint64_t rng = seed0 * 31 + (uint64_t)me;

	for (int op = 0; op < 200000; op++) {
		struct page_counter *fail;

		if (acct_rand_below(&rng, 2) && r->held[me] >= PC_CHUNK) {
			page_counter_uncharge(&r->leaf[me], PC_CHUNK);
			r->held[me] -= PC_CHUNK;
		} else if (page_counter_try_charge(&r->leaf[me], PC_CHUNK, &fail)) {
			r->held[me] += PC_CHUNK;
		} else {
			r->refused[me]++;
		}
	}
	return NULL;
}

static void *race_sampler(void *arg)
{
	struct race *r = arg;

	while (!__atomic_load_n(&r->stop, __ATOMIC_RELAXED)) {
		int64_t u = page_counter_read(&r->mid);

		if (u > r->max) {
			r->over_samples++;
			if (u > r->worst)
				r->worst = u;
		}
	}
	return NULL;
}

START_TEST(test_max_holds_under_concurrency)
{
	static struct race r;
	pthread_t th[PC_THREADS], sampler;
	int64_t total = 0, refused = 0;

	race_init(&r);
	pthread_create(&sampler, NULL, race_sampler, &r);
	for (int i = 0; i < PC_THREADS; i++)
		pthread_create(&th[i], NULL, race_charger, &r);
	for (int i = 0; i < PC_THREADS; i++)
		pthread_join(th[i], NULL);
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELAXED);
	pthread_join(sampler, NULL);
	for (int i = 0; i < PC_THREADS; i++) {
		total += r.held[i];
		refused += r.refused[i];
		ck_assert_int_eq(page_counter_read(&r.leaf[i]), r.held[i]);
	}
	ck_assert_msg(refused > 0, "the limit was never reached");
	ck_assert_int_eq(page_counter_read(&r.mid), total);
	ck_assert_int_eq(page_counter_read(&r.root), total);
	ck_assert_int_le(total, r.max);
	ck_assert_int_eq(r.mid.failcnt, refused);
	/* A reader sees at most the documented transient: each racing charger's add before it backs out. */
	ck_assert_msg(r.worst <= r.max + PC_THREADS * PC_CHUNK,
		      "usage seen at %" PRId64 " with max %" PRId64, r.worst, r.max);
}
END_TEST

/* The peak records only charges that stood: never above max, however they race. */
START_TEST(test_peak_within_max_under_concurrency)
{
	for (int round = 0; round < 5; round++) {
		static struct race r;
		pthread_t th[PC_THREADS];

		race_init(&r);
		for (int i = 0; i < PC_THREADS; i++)
			pthread_create(&th[i], NULL, race_charger, &r);
		for (int i = 0; i < PC_THREADS; i++)
			pthread_join(th[i], NULL);
		ck_assert_msg(r.mid.watermark <= r.max, "memory.peak %" PRId64 " > max %" PRId64,
			      r.mid.watermark, r.max);
	}
}
END_TEST

START_TEST(test_set_max)
{
	struct page_counter p, c;

	page_counter_init(&p, NULL);
	page_counter_init(&c, &p);
	page_counter_charge(&c, 30);
	ck_assert_int_eq(page_counter_set_max(&p, 29), -EBUSY);
	ck_assert(p.max == PAGE_COUNTER_MAX);
	ck_assert_int_eq(page_counter_set_max(&p, 30), 0);
	ck_assert_int_eq(p.max, 30);
	page_counter_force_max(&p, 10);		/* memory.max below usage, as the kernel accepts */
	ck_assert_int_eq(p.max, 10);
	ck_assert_int_eq(page_counter_read(&p), 30);

	ck_assert(page_counter_pages(CGM_SIZE_MAX) == PAGE_COUNTER_MAX);
	ck_assert_int_eq(page_counter_pages(4095), 0);
	ck_assert_int_eq(page_counter_pages(8191), 1);
	ck_assert(page_counter_bytes(PAGE_COUNTER_MAX) == CGM_SIZE_MAX);
	ck_assert(page_counter_bytes(3) == 3 * 4096);
}
END_TEST

/* ---- protection ---- */

/* Parents' children_{min,low}_usage against the children's settings and usage. */
START_TEST(test_protected_usage_propagation)
{
	uint64_t rng = seed0 + 41;
	int bad = 0;

	for (int iter = 0; iter < 200; iter++) {
		struct tree t;
		int64_t usage[NMAX], cmin[NMAX] = { 0 }, clow[NMAX] = { 0 };

		tree_build(&t, &rng, 2 + (int)acct_rand_below(&rng, NMAX - 1), iter & 1);
		for (int op = 0; op < 200; op++) {
			int i = (int)acct_rand_below(&rng, (uint64_t)t.n);
			int64_t nr = 1 + (int64_t)acct_rand_below(&rng, 100);

			switch (acct_rand_below(&rng, 5)) {
			case 0:
				page_counter_set_min(&t.pc[i], (int64_t)acct_rand_below(&rng, 300));
				break;
			case 1:
				page_counter_set_low(&t.pc[i], (int64_t)acct_rand_below(&rng, 300));
				break;
			case 2:
				if (t.own[i] >= nr) {
					page_counter_uncharge(&t.pc[i], nr);
					t.own[i] -= nr;
					break;
				}
				/* fall through */
			default:
				page_counter_charge(&t.pc[i], nr);
				t.own[i] += nr;
			}
		}
		tree_usage(&t, usage);
		memset(cmin, 0, sizeof(cmin));
		memset(clow, 0, sizeof(clow));
		for (int i = 1; i < t.n; i++) {
			cmin[t.parent[i]] += min64(usage[i], t.pc[i].min);
			clow[t.parent[i]] += min64(usage[i], t.pc[i].low);
		}
		for (int i = 0; i < t.n; i++)
			bad += t.pc[i].children_min_usage != cmin[i] ||
			       t.pc[i].children_low_usage != clow[i];
	}
	ck_assert_msg(bad == 0, "%d counters with wrong children_{min,low}_usage (seed %" PRIu64 ")",
		      bad, seed0);
}
END_TEST

/*
 * The kernel's effective_protection(), written out as plainly as possible
 * from its description: the children of @parent share its effective
 * protection in proportion to their protected usage if they claim more
 * than it has; otherwise each keeps what it claims, and with recursive
 * protection the unclaimed rest goes out in proportion to unprotected
 * usage.  Exact (128-bit) arithmetic, flooring like the kernel.
 */
static int64_t ref_share(int64_t usage, int64_t parent_usage, int64_t setting,
			 int64_t parent_effective, int64_t siblings_protected, bool recursive)
{
	int64_t protected = usage < setting ? usage : setting;

	if (siblings_protected > parent_effective)
		return (int64_t)((__int128)protected * parent_effective / siblings_protected);
	if (!recursive)
		return protected;
	if (parent_effective > siblings_protected && parent_usage > siblings_protected &&
	    usage > protected)
		return protected + (int64_t)((__int128)(parent_effective - siblings_protected) *
					     (usage - protected) /
					     (parent_usage - siblings_protected));
	return protected;
}

/* Reference emin/elow of every node of root's subtree, top-down. */
static void ref_protection(const struct tree *t, const int64_t *usage, int root, bool recursive,
			   int64_t *emin, int64_t *elow)
{
	int64_t smin[NMAX] = { 0 }, slow[NMAX] = { 0 };

	for (int i = 1; i < t->n; i++) {
		smin[t->parent[i]] += min64(usage[i], t->pc[i].min);
		slow[t->parent[i]] += min64(usage[i], t->pc[i].low);
	}
	for (int i = 0; i < t->n; i++) {
		int p = t->parent[i];

		/* Counters outside the subtree, the root itself and empty ones keep 0. */
		emin[i] = elow[i] = 0;
		if (i == root || !is_ancestor_or_self(t, root, i) || usage[i] == 0)
			continue;
		if (p == root) {
			emin[i] = t->pc[i].min;
			elow[i] = t->pc[i].low;
			continue;
		}
		emin[i] = ref_share(usage[i], usage[p], t->pc[i].min, emin[p], smin[p], recursive);
		elow[i] = ref_share(usage[i], usage[p], t->pc[i].low, elow[p], slow[p], recursive);
	}
}

static int64_t rand_setting(uint64_t *rng, int64_t scale)
{
	switch (acct_rand_below(rng, 6)) {
	case 0: case 1: return 0;
	case 2: return PAGE_COUNTER_MAX;
	default: return (int64_t)acct_rand_below(rng, (uint64_t)scale);
	}
}

START_TEST(test_effective_protection)
{
	uint64_t rng = seed0 + 53;
	int mismatch = 0, bound = 0, sum_bound = 0, checked = 0;
	char first[256] = "";

	for (int iter = 0; iter < 3000; iter++) {
		struct tree t;
		int64_t usage[NMAX], emin[NMAX], elow[NMAX];
		bool recursive = iter & 2;
		int root;

		tree_build(&t, &rng, 2 + (int)acct_rand_below(&rng, 24), iter & 1);
		for (int i = 0; i < t.n; i++) {
			if (acct_rand_below(&rng, 4))
				page_counter_charge(&t.pc[i], t.own[i] =
						    (int64_t)acct_rand_below(&rng, 1000000));
			page_counter_set_min(&t.pc[i], rand_setting(&rng, 2000000));
			page_counter_set_low(&t.pc[i], rand_setting(&rng, 3000000));
		}
		tree_usage(&t, usage);
		/* Reclaim walks the subtree of its root top-down (mem_cgroup_iter). */
		root = acct_rand_below(&rng, 3) ? 0 : (int)acct_rand_below(&rng, (uint64_t)t.n);
		for (int i = 0; i < t.n; i++)
			if (is_ancestor_or_self(&t, root, i))
				page_counter_calculate_protection(&t.pc[root], &t.pc[i], recursive);
		ref_protection(&t, usage, root, recursive, emin, elow);
		for (int i = 0; i < t.n; i++) {
			int p = t.parent[i];
			int64_t kids_emin = 0, kids_elow = 0;

			checked++;
			if ((t.pc[i].emin != emin[i] || t.pc[i].elow != elow[i]) && mismatch++ == 0)
				snprintf(first, sizeof(first),
					 "tree %d node %d (root %d, %s): emin %" PRId64 " want %" PRId64
					 ", elow %" PRId64 " want %" PRId64, iter, i, root,
					 recursive ? "recursive" : "plain", t.pc[i].emin, emin[i],
					 t.pc[i].elow, elow[i]);
			/* Below the top level, protection never exceeds what is used and claimed. */
			if (!recursive && i != root && p != root && is_ancestor_or_self(&t, root, i) &&
			    (t.pc[i].emin > min64(usage[i], t.pc[i].min) ||
			     t.pc[i].elow > min64(usage[i], t.pc[i].low)))
				bound++;
			/* Children never share out more than their parent has. */
			if (i == root || p == root || !is_ancestor_or_self(&t, root, i) || !usage[i])
				continue;
			for (int j = 1; j < t.n; j++) {
				if (t.parent[j] == i && usage[j]) {
					kids_emin += t.pc[j].emin;
					kids_elow += t.pc[j].elow;
				}
			}
			if (kids_emin > t.pc[i].emin || kids_elow > t.pc[i].elow)
				sum_bound++;
		}
	}
	ck_assert_msg(mismatch == 0, "%d of %d nodes differ from the reference; first: %s (seed %" PRIu64 ")",
		      mismatch, checked, first, seed0);
	ck_assert_msg(bound == 0, "%d nodes with emin > min(usage, min) or elow > min(usage, low)", bound);
	ck_assert_msg(sum_bound == 0, "%d parents whose children's effective protection exceeds theirs",
		      sum_bound);
}
END_TEST

/* A hand-computed case, so that the reference itself is checked too. */
START_TEST(test_effective_protection_example)
{
	struct page_counter r, a, b, c;

	page_counter_init(&r, NULL);
	page_counter_init(&a, &r);
	page_counter_init(&b, &a);
	page_counter_init(&c, &a);
	page_counter_charge(&b, 300);
	page_counter_charge(&c, 100);
	page_counter_set_min(&a, 200);
	page_counter_set_min(&b, 250);		/* protected 250 */
	page_counter_set_min(&c, 150);		/* protected 100 */
	page_counter_calculate_protection(&r, &a, false);
	page_counter_calculate_protection(&r, &b, false);
	page_counter_calculate_protection(&r, &c, false);
	/* Overcommitted 350 > 200: shares 250 * 200 / 350 and 100 * 200 / 350. */
	ck_assert_int_eq(a.emin, 200);
	ck_assert_int_eq(b.emin, 142);
	ck_assert_int_eq(c.emin, 57);

	page_counter_set_min(&a, 500);
	page_counter_calculate_protection(&r, &a, true);
	page_counter_calculate_protection(&r, &b, true);
	page_counter_calculate_protection(&r, &c, true);
	/* Unclaimed 150 goes by unprotected usage: b has 50 of a's 50. */
	ck_assert_int_eq(b.emin, 250 + 150 * 50 / 50);
	ck_assert_int_eq(c.emin, 100);
}
END_TEST

/* floor(a * b / c) as a 128-bit division does it, saturated as cgm_mul_div() is. */
static int64_t mul_div_reference(int64_t a, int64_t b, int64_t c)
{
	unsigned __int128 q;

	if (a <= 0 || b <= 0 || c <= 0)
		return 0;
	q = (unsigned __int128)a * (uint64_t)b / (uint64_t)c;
	return q > INT64_MAX ? INT64_MAX : (int64_t)q;
}

/*
 * The shares (NUMA split, protection, a process's part of a reclaim)
 * are divided without a 128-bit division (include/cgm/mul_div.h): the
 * same results at the edges and at random, products past 64 bits (the
 * long division of base/mul_div.c) and past 127 included.
 */
START_TEST(test_mul_div)
{
	static const int64_t edge[] = { 0, 1, 2, 3, 7, 4096, (1LL << 31) - 1, 1LL << 32,
					(1LL << 32) + 1, 1LL << 40, (1LL << 62) + 12345,
					INT64_MAX - 1, INT64_MAX, -1, INT64_MIN };
	const size_t n = sizeof(edge) / sizeof(edge[0]);
	uint64_t x = 0x9e3779b97f4a7c15ULL;

	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++)
			for (size_t k = 0; k < n; k++)
				ck_assert_msg(cgm_mul_div(edge[i], edge[j], edge[k]) ==
					      mul_div_reference(edge[i], edge[j], edge[k]),
					      "%" PRId64 " * %" PRId64 " / %" PRId64, edge[i],
					      edge[j], edge[k]);
	for (int round = 0; round < 200000; round++) {
		int64_t v[3];

		for (int m = 0; m < 3; m++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			/* Any width from 1 to 63 bits, so that every case is met. */
			v[m] = (int64_t)(x >> (1 + x % 63));
		}
		ck_assert_msg(cgm_mul_div(v[0], v[1], v[2]) == mul_div_reference(v[0], v[1], v[2]),
			      "%" PRId64 " * %" PRId64 " / %" PRId64, v[0], v[1], v[2]);
	}
	/* The wide path itself: r < c and r * b past 2^64. */
	ck_assert_int_eq(cgm_mul_div_wide((1LL << 62) - 1, 1LL << 40, 1LL << 62),
			 (1LL << 40) - 1);
}
END_TEST

static void add_tests(TCase *tc, bool regressions)
{
	if (regressions)
		return;
	tcase_add_test(tc, test_peak_within_max_under_concurrency);
	tcase_add_test(tc, test_try_charge_failure_watermark);
	tcase_add_test(tc, test_charge_uncharge_model);
	tcase_add_test(tc, test_uncharge_clamps_at_zero);
	tcase_add_test(tc, test_try_charge_failure_restores);
	tcase_add_test(tc, test_watermark_monotone);
	tcase_add_test(tc, test_max_holds_under_concurrency);
	tcase_add_test(tc, test_set_max);
	tcase_add_test(tc, test_protected_usage_propagation);
	tcase_add_test(tc, test_effective_protection);
	tcase_add_test(tc, test_effective_protection_example);
	tcase_add_test(tc, test_mul_div);
}

int main(int argc, char **argv)
{
	return acct_suite_main(argc, argv, "page_counter", &seed0, NULL, NULL, add_tests);
}
