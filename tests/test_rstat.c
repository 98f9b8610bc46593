/*
 * Statistics (accounting/rstat.c): processes with several threads each,
 * in a random tree, count allocations, frees, reallocs and throttle time
 * in their slots while flushes run concurrently; after a full flush every
 * group's local statistics are exactly what its processes did, and every
 * hierarchical counter is the group's local one plus its children's
 * hierarchical ones.  memory.stat renders the same numbers.
 *
 * usage: test_rstat [regressions] [seed]
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

#define NGROUPS 16
#define NPROCS 8
#define SLOTS_PER_PROC 3

static uint64_t seed0 = 1;
static struct acct_tmp tmp;

/* What one process did, as the statistics should show it. */
struct expect {
	uint32_t group;
	int64_t stat[CGM_NR_STATS];
	int64_t live;
};

struct job {
	uint64_t seed;
	int ops;
	struct expect *out;
};

static void setup(void)
{
	ck_assert_int_eq(acct_tmp_create(&tmp), 0);
}

static void teardown(void)
{
	acct_tmp_remove(&tmp);
}

/* One process: random work spread over a few thread slots, flushing now and then. */
static int work(struct cgm_acct *a, void *arg)
{
	struct job *j = arg;
	struct expect *e = j->out;
	uint64_t rng = j->seed;
	uint32_t slot[SLOTS_PER_PROC];
	static int64_t blocks[4096];
	int n = 0;

	e->group = a->h.procs[a->proc].group;
	for (int i = 0; i < SLOTS_PER_PROC; i++) {
		slot[i] = acct_thread_register(a, (int)syscall(SYS_gettid));
		if (slot[i] == CGM_NONE)
			return -ENOSPC;
	}
	for (int op = 0; op < j->ops; op++) {
		struct cgm_thread_slot *t = &a->h.threads[slot[acct_rand_below(&rng, SLOTS_PER_PROC)]];
		unsigned r = (unsigned)acct_rand_below(&rng, 100);

		if (r < 45 && n < 4096) {
			size_t req = acct_rand_below(&rng, 4) ? 1 + acct_rand_below(&rng, 1024)
							       : 1 + acct_rand_below(&rng, 1 << 20);
			int64_t sz = sim_malloc(a, t, req, false);

			if (sz < 0)
				return (int)sz;
			blocks[n++] = sz;
			e->stat[CGM_STAT_HEAP_LIVE] += sz;
			e->stat[CGM_STAT_ALLOCS]++;
			e->stat[CGM_STAT_ALLOC_BYTES] += sz;
			e->stat[CGM_STAT_HIST0 + rstat_hist_bucket((uint64_t)sz)]++;
		} else if (r < 80 && n) {
			int k = (int)acct_rand_below(&rng, (uint64_t)n);

			/* Any thread frees any block: it counts in the freeing thread's slot. */
			sim_free(t, blocks[k]);
			e->stat[CGM_STAT_HEAP_LIVE] -= blocks[k];
			e->stat[CGM_STAT_FREES]++;
			e->stat[CGM_STAT_FREE_BYTES] += blocks[k];
			blocks[k] = blocks[--n];
		} else if (r < 95 && n) {
			int k = (int)acct_rand_below(&rng, (uint64_t)n);
			int64_t sz = sim_realloc(a, t, blocks[k], 1 + acct_rand_below(&rng, 300000), false);

			if (sz < 0)
				return (int)sz;
			e->stat[CGM_STAT_HEAP_LIVE] += sz - blocks[k];
			e->stat[CGM_STAT_ALLOCS]++;
			e->stat[CGM_STAT_FREES]++;
			e->stat[CGM_STAT_ALLOC_BYTES] += sz;
			e->stat[CGM_STAT_FREE_BYTES] += blocks[k];
			e->stat[CGM_STAT_HIST0 + rstat_hist_bucket((uint64_t)sz)]++;
			blocks[k] = sz;
		} else if (r < 98) {
			uint64_t ns = acct_rand_below(&rng, 5000000);

			t->throttle_ns += ns;
			e->stat[CGM_STAT_THROTTLE_NS] += (int64_t)ns;
		} else {
			/* Flushes race with the other processes' counting. */
			rstat_flush(&a->h);
		}
	}
	for (int i = 0; i < n; i++)
		e->live += blocks[i];
	return 0;
}

/* The sums expected of group @g: local (its processes) or hierarchical (its subtree). */
static void expected_of(const struct cgm_hier *h, const struct expect *e, int nprocs, uint32_t g,
			bool hierarchical, int64_t *sum)
{
	memset(sum, 0, sizeof(int64_t) * CGM_NR_STATS);
	for (int p = 0; p < nprocs; p++) {
		if (hierarchical ? !group_in_subtree(h, e[p].group, g) : e[p].group != g)
			continue;
		for (int s = 0; s < CGM_NR_STATS; s++)
			sum[s] += e[p].stat[s];
	}
}

/* Compare every group's statistics with what its processes did; returns mismatches. */
static int check_against_expect(const struct cgm_hier *h, const struct expect *e, int nprocs,
				char *msg, size_t len)
{
	int bad = 0;

	for (uint32_t g = 0; g < CGM_MAX_GROUPS; g++) {
		const struct cgm_group *gr = hier_group(h, g);
		int64_t local[CGM_NR_STATS], hier[CGM_NR_STATS];

		if (!gr)
			continue;
		expected_of(h, e, nprocs, g, false, local);
		expected_of(h, e, nprocs, g, true, hier);
		/*
		 * The sampled levels (anon, heap_free, mapped_anon) come from
		 * /proc when a reader finds a sample stale: not modelled here,
		 * checked for consistency by acct_check_stat_tree, and for
		 * going with their process at the end.
		 */
		for (int s = CGM_NR_SAMPLED; s < CGM_NR_STATS; s++) {
			if (gr->stat_local[s] == local[s] && gr->stat[s] == hier[s])
				continue;
			if (bad++ == 0) {
				char path[CGM_PATH_MAX], name[48];

				group_path(h, g, path, sizeof(path));
				snprintf(msg, len, "%s %s: local %" PRId64 " (want %" PRId64
					 "), hierarchical %" PRId64 " (want %" PRId64 ")", path,
					 cgm_stat_name(s, name, sizeof(name)), gr->stat_local[s],
					 local[s], gr->stat[s], hier[s]);
			}
		}
	}
	return bad;
}

/* A process that is gone holds nothing: its live bytes leave heap_live (the counts stay). */
static void exit_frees(struct expect *e)
{
	e->stat[CGM_STAT_HEAP_LIVE] = 0;
	e->live = 0;
}

START_TEST(test_flush_sums)
{
	struct cgm_acct a = { .proc = CGM_NONE, .batch_pages = CGM_CHARGE_BATCH };
	struct expect *e = acct_shared_alloc(sizeof(struct expect) * NPROCS);
	struct acct_child c[NPROCS];
	struct job jobs[NPROCS];
	uint64_t rng = seed0 * 7919;
	uint32_t idx[NGROUPS];
	char msg[512];
	static int64_t before[CGM_MAX_GROUPS][CGM_NR_STATS];

	ck_assert_ptr_nonnull(e);
	acct_tmp_open(&tmp, &a.h);
	ck_assert_int_eq(acct_random_tree(&a.h, &rng, NGROUPS, idx), 0);
	/* This process is attached and idle; its children fork from it and move. */
	ck_assert_int_eq(acct_attach(&a, "/"), 0);
	for (int p = 0; p < NPROCS; p++) {
		char path[CGM_PATH_MAX];

		jobs[p] = (struct job){ .seed = acct_rand(&rng), .ops = 20000, .out = &e[p] };
		group_path(&a.h, idx[acct_rand_below(&rng, NGROUPS)], path, sizeof(path));
		ck_assert_int_eq(acct_child_fork(&c[p], &a, path, work, &jobs[p]), 0);
	}
	for (int p = 0; p < NPROCS; p++)
		ck_assert_int_eq(acct_child_result(&c[p]), 0);

	acct_drain(&a.h);
	ck_assert_msg(acct_check_stat_tree(&a.h, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_msg(check_against_expect(&a.h, e, NPROCS, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_msg(acct_check_usage_held(&a.h, msg, sizeof(msg)) == 0, "%s", msg);

	/* memory.stat renders the flushed numbers: heap_live is the subtree's live bytes. */
	for (int i = 0; i < NGROUPS; i++) {
		char buf[4096];
		int64_t live = 0, sum[CGM_NR_STATS];

		for (int p = 0; p < NPROCS; p++)
			if (group_in_subtree(&a.h, e[p].group, idx[i]))
				live += e[p].live;
		expected_of(&a.h, e, NPROCS, idx[i], true, sum);
		ck_assert_int_gt(cgm_file_read(&a.h, idx[i], "memory.stat", buf, sizeof(buf)), 0);
		ck_assert_int_eq(acct_file_value(buf, "heap_live"), live);
		ck_assert_int_eq(acct_file_value(buf, "allocs"), sum[CGM_STAT_ALLOCS]);
		ck_assert_int_eq(acct_file_value(buf, "throttle_usec"), sum[CGM_STAT_THROTTLE_NS] / 1000);
		ck_assert_int_gt(cgm_file_read(&a.h, idx[i], "memory.stat.local", buf, sizeof(buf)), 0);
		ck_assert_int_eq(acct_file_value(buf, "frees"),
				 hier_group(&a.h, idx[i])->stat_local[CGM_STAT_FREES]);
	}

	/* A flush with nothing new changes nothing. */
	for (uint32_t g = 0; g < CGM_MAX_GROUPS; g++)
		memcpy(before[g], a.h.groups[g].stat, sizeof(before[g]));
	rstat_flush(&a.h);
	for (uint32_t g = 0; g < CGM_MAX_GROUPS; g++)
		ck_assert(memcmp(before[g], a.h.groups[g].stat, sizeof(before[g])) == 0);

	/*
	 * Processes go, detached or not: statistics are cumulative and stay,
	 * and a process that is gone has freed what it held (detach, or the
	 * reclaim of a process that died without detaching).
	 */
	/* Every process's anon sampled from /proc, as a reader does: it must go with them. */
	acct_refresh_stale(&a.h, CGM_ROOT, 0);
	for (int p = 0; p < NPROCS; p++) {
		acct_child_finish(&c[p], p & 1);
		if (p & 1)
			exit_frees(&e[p]);
	}
	rstat_flush(&a.h);
	ck_assert_msg(acct_check_stat_tree(&a.h, msg, sizeof(msg)) == 0, "after exit: %s", msg);
	ck_assert_msg(check_against_expect(&a.h, e, NPROCS, msg, sizeof(msg)) == 0, "after exit: %s", msg);
	ck_assert_int_ge(acct_reclaim_dead(&a.h), NPROCS / 2);
	for (int p = 0; p < NPROCS; p += 2)
		exit_frees(&e[p]);
	rstat_flush(&a.h);
	ck_assert_msg(acct_check_stat_tree(&a.h, msg, sizeof(msg)) == 0, "after reclaim: %s", msg);
	ck_assert_msg(check_against_expect(&a.h, e, NPROCS, msg, sizeof(msg)) == 0, "after reclaim: %s", msg);
	for (uint32_t g = 0; g < CGM_MAX_GROUPS; g++) {
		ck_assert_int_eq(a.h.groups[g].stat[CGM_STAT_HEAP_LIVE], 0);
		/* Only this process is left, at the root: no group below holds a sample. */
		if (g != CGM_ROOT)
			for (int s = 0; s < CGM_NR_SAMPLED; s++)
				ck_assert_int_eq(a.h.groups[g].stat[s], 0);
	}
	hier_close(&a.h);
}
END_TEST

/* A process moved between flushes: what it did before stays, what it does after goes to its new group. */
START_TEST(test_flush_after_move)
{
	struct cgm_acct a = { .proc = CGM_NONE, .batch_pages = CGM_CHARGE_BATCH };
	struct expect *e = acct_shared_alloc(sizeof(struct expect) * 2);
	struct acct_child c;
	struct job j = { .seed = seed0 + 99, .ops = 3000 };
	uint32_t to, from;
	char msg[512];

	acct_tmp_open(&tmp, &a.h);
	ck_assert_int_eq(acct_attach(&a, "/"), 0);
	j.out = &e[0];
	ck_assert_int_eq(acct_child_fork(&c, &a, "/src/x", work, &j), 0);
	ck_assert_int_eq(acct_child_result(&c), 0);
	rstat_flush(&a.h);
	hier_lock(&a.h.hdr->tree_lock);
	to = (uint32_t)group_mkdir(&a.h, "/dst");
	hier_unlock(&a.h.hdr->tree_lock);
	from = e[0].group;
	for (uint32_t p = 0; p < CGM_MAX_PROCS; p++)
		if (a.h.procs[p].state == CGM_SLOT_LIVE && a.h.procs[p].pid == c.pid)
			ck_assert_int_eq(acct_move(&a.h, p, to), 0);
	/* Counting after the move, by hand in its slots: it all goes to /dst. */
	for (uint32_t t = 0; t < CGM_MAX_THREADS; t++) {
		struct cgm_thread_slot *ts = &a.h.threads[t];

		if (ts->state == CGM_SLOT_LIVE && a.h.procs[ts->proc].pid == c.pid) {
			ts->throttle_ns += 1000000;
			e[1].stat[CGM_STAT_THROTTLE_NS] += 1000000;
		}
	}
	e[1].group = to;
	/* heap_live follows the process; what it counted before stays with /src/x. */
	e[1].stat[CGM_STAT_HEAP_LIVE] = e[0].stat[CGM_STAT_HEAP_LIVE];
	e[0].stat[CGM_STAT_HEAP_LIVE] = 0;
	rstat_flush(&a.h);
	ck_assert_int_eq(e[0].group, from);
	ck_assert_msg(acct_check_stat_tree(&a.h, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_msg(check_against_expect(&a.h, e, 2, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_msg(acct_check_usage_held(&a.h, msg, sizeof(msg)) == 0, "%s", msg);
	acct_child_finish(&c, true);
	hier_close(&a.h);
}
END_TEST

/*
 * heap_live is the live heap bytes of the group's processes: a moved process
 * takes its live bytes along (as fork and exit already count them), so
 * the group it left does not keep them and the one it joined does not go
 * negative when they are freed.
 */
static int alloc_40(struct cgm_acct *a, void *arg)
{
	uint32_t slot = acct_thread_register(a, (int)syscall(SYS_gettid));

	(void)arg;
	for (int i = 0; i < 40; i++)
		if (sim_malloc(a, &a->h.threads[slot], 3000, false) < 0)
			return -ENOMEM;
	return 0;
}

START_TEST(test_heap_live_follows_move)
{
	struct cgm_acct a = { .proc = CGM_NONE, .batch_pages = CGM_CHARGE_BATCH };
	struct acct_child c;
	uint32_t src, dst, proc = CGM_NONE;
	char buf[4096];
	int64_t live = 40 * sim_block_size(3000);

	acct_tmp_open(&tmp, &a.h);
	ck_assert_int_eq(acct_attach(&a, "/"), 0);
	ck_assert_int_eq(acct_child_fork(&c, &a, "/src", alloc_40, NULL), 0);
	ck_assert_int_eq(acct_child_result(&c), 0);
	src = group_lookup(&a.h, "/src");
	ck_assert_int_gt(cgm_file_read(&a.h, src, "memory.stat", buf, sizeof(buf)), 0);
	ck_assert_int_eq(acct_file_value(buf, "heap_live"), live);
	hier_lock(&a.h.hdr->tree_lock);
	dst = (uint32_t)group_mkdir(&a.h, "/dst");
	hier_unlock(&a.h.hdr->tree_lock);
	for (uint32_t p = 0; p < CGM_MAX_PROCS; p++)
		if (a.h.procs[p].state == CGM_SLOT_LIVE && a.h.procs[p].pid == c.pid)
			proc = p;
	ck_assert_int_eq(acct_move(&a.h, proc, dst), 0);
	ck_assert_int_gt(cgm_file_read(&a.h, src, "memory.stat", buf, sizeof(buf)), 0);
	ck_assert_msg(acct_file_value(buf, "heap_live") == 0,
		      "/src keeps heap_live %" PRId64 " after its only process moved out with %" PRId64,
		      acct_file_value(buf, "heap_live"), live);
	ck_assert_int_gt(cgm_file_read(&a.h, dst, "memory.stat", buf, sizeof(buf)), 0);
	ck_assert_int_eq(acct_file_value(buf, "heap_live"), live);
	acct_child_finish(&c, true);
	ck_assert_int_gt(cgm_file_read(&a.h, dst, "memory.stat", buf, sizeof(buf)), 0);
	ck_assert_msg(acct_file_value(buf, "heap_live") == 0, "/dst heap_live %" PRId64 " after its process exited",
		      acct_file_value(buf, "heap_live"));
	hier_close(&a.h);
}
END_TEST

START_TEST(test_hist_bucket)
{
	/* bucket b holds (2^(b+2), 2^(b+3)] */
	ck_assert_int_eq(rstat_hist_bucket(1), 0);
	ck_assert_int_eq(rstat_hist_bucket(8), 0);
	ck_assert_int_eq(rstat_hist_bucket(9), 1);
	ck_assert_int_eq(rstat_hist_bucket(16), 1);
	ck_assert_int_eq(rstat_hist_bucket(17), 2);
	ck_assert_int_eq(rstat_hist_bucket(4096), 9);
	ck_assert_int_eq(rstat_hist_bucket(4097), 10);
	ck_assert_int_eq(rstat_hist_bucket(UINT64_MAX), CGM_HIST_BUCKETS - 1);
	for (uint64_t s = 9; s < (1u << 20); s = s * 3 + 1) {
		unsigned int b = rstat_hist_bucket(s);

		ck_assert(s > (1ULL << (b + 2)) && s <= (1ULL << (b + 3)));
	}
}
END_TEST

static void add_tests(TCase *tc, bool regressions)
{
	if (regressions)
		return;
	tcase_add_test(tc, test_heap_live_follows_move);
	tcase_add_test(tc, test_flush_sums);
	tcase_add_test(tc, test_flush_after_move);
	tcase_add_test(tc, test_hist_bucket);
}

int main(int argc, char **argv)
{
	return acct_suite_main(argc, argv, "rstat", &seed0, setup, teardown, add_tests);
}
