/*
 * Charging (accounting/charge.c, attach.c, move.c, limits.c) driven the
 * way the shim drives it, through sim_malloc()/sim_free() on thread
 * slots of this process: usage always equals what the processes hold,
 * every byte is accounted for (live + stocks + free pool), alloc then
 * free restores every ancestor exactly, stocks stay bounded and go back
 * at thread exit, limits hold and refuse without side effects, moves and
 * fork carry their charge.
 *
 * usage: test_charge [regressions] [seed]
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acct_fixture.h"
#include "cgm/files.h"
#include "cgm/size_class.h"

#define PAGE CGM_PAGE_SIZE
#define BATCH CGM_CHARGE_BATCH

static uint64_t seed0 = 1;
static struct acct_tmp tmp;
static struct cgm_acct ac;

static void setup(void)
{
	ck_assert_int_eq(acct_tmp_create(&tmp), 0);
	memset(&ac, 0, sizeof(ac));
	ac.proc = CGM_NONE;
	ac.batch_pages = BATCH;
	ac.oom_policy = ACCT_OOM_ENOMEM;
	acct_tmp_open(&tmp, &ac.h);
}

static void teardown(void)
{
	hier_close(&ac.h);
	acct_tmp_remove(&tmp);
}

static int gettid_(void)
{
	return (int)syscall(SYS_gettid);
}

static struct cgm_proc *me(void)
{
	return hier_proc(&ac.h, ac.proc);
}

static int64_t usage_of(const char *path)
{
	return acct_group_usage(&ac.h, path);
}

static struct cgm_group *group_at(const char *path)
{
	uint32_t g = group_lookup(&ac.h, path);

	ck_assert_msg(g != CGM_NONE, "no group %s", path);
	return &ac.h.groups[g];
}

/* Sum of the stocks of the process's thread slots. */
static int64_t proc_stocks(void)
{
	int64_t sum = 0;

	for (uint32_t i = 0; i < CGM_MAX_THREADS; i++)
		if (ac.h.threads[i].state != CGM_SLOT_FREE && ac.h.threads[i].proc == ac.proc)
			sum += ac.h.threads[i].stock;
	return sum;
}

/*
 * After a harvest, every byte this process charged is live, in a stock,
 * or in the free pool (less than a page).
 */
static void check_bytes_accounted(int64_t live, const char *when)
{
	struct cgm_proc *p = me();

	acct_harvest(&ac.h, ac.proc);
	ck_assert_msg(p->free_pool >= 0 && p->free_pool < PAGE, "%s: free pool %" PRId64, when,
		      p->free_pool);
	ck_assert_msg(p->held_pages * PAGE == live + proc_stocks() + p->free_pool,
		      "%s: held %" PRId64 " pages = %" PRId64 " bytes, but live %" PRId64
		      " + stocks %" PRId64 " + free pool %" PRId64, when, p->held_pages,
		      p->held_pages * PAGE, live, proc_stocks(), p->free_pool);
}

static void check_usage_held(const char *when)
{
	char msg[256];

	ck_assert_msg(acct_check_usage_held(&ac.h, msg, sizeof(msg)) == 0, "%s: %s", when, msg);
}

/* A random request size: mostly small, some of a few pages, now and then large. */
static size_t rand_size(uint64_t *rng)
{
	switch (acct_rand_below(rng, 8)) {
	case 0: return 1 + acct_rand_below(rng, 64 * 1024);
	case 1: case 2: return 1025 + acct_rand_below(rng, 3 * PAGE);
	default: return 1 + acct_rand_below(rng, 1024);
	}
}

static int hold_17_pages(struct cgm_acct *a, void *arg)
{
	uint32_t slot = acct_thread_register(a, gettid_());

	(void)arg;
	if (slot == CGM_NONE)
		return -ENOSPC;
	return sim_malloc(a, &a->h.threads[slot], 17 * PAGE, false) == 17 * PAGE ? 0 : -ENOMEM;
}

/* The bin malloc is given is mimalloc's rule, request size by size. */
START_TEST(test_small_bin)
{
	uint8_t table[CGM_NR_WSIZES];

	memset(table, 0xff, sizeof(table));
	cgm_fill_wsize_bins(table);
	for (size_t n = 0; n <= CGM_SMALL_MAX; n++) {
		unsigned int b = cgm_small_bin(n);

		ck_assert_uint_lt(b, CGM_NR_BINS);
		/* The start-up table (the one malloc reads) says the same. */
		ck_assert_uint_eq(table[(n + 7) >> 3], b);
		ck_assert_msg(cgm_bin_size(b) == cgm_small_block_size(n),
			      "request %zu: bin %u of %zu bytes, rule %zu", n, b,
			      cgm_bin_size(b), cgm_small_block_size(n));
	}
}
END_TEST

/* The bins are exactly the block sizes there are, in increasing order. */
START_TEST(test_bins_are_the_block_sizes)
{
	bool is_size[CGM_SMALL_MAX / 8 + 1] = { false };
	int n = 0;

	for (size_t r = 0; r <= CGM_SMALL_MAX; r++)
		is_size[cgm_small_block_size(r) / 8] = true;
	for (size_t s = 0; s <= CGM_SMALL_MAX / 8; s++)
		n += is_size[s];
	ck_assert_int_eq(n, CGM_NR_BINS);
	for (int b = 0; b < CGM_NR_BINS; b++) {
		ck_assert_msg(is_size[cgm_bin_step[b]], "bin %d: %u bytes is no block size",
			      b, cgm_bin_step[b] * 8);
		if (b)
			ck_assert_uint_gt(cgm_bin_step[b], cgm_bin_step[b - 1]);
	}
}
END_TEST

/*
 * Above 1 KiB: every request up to 16 KiB finds mimalloc's block size
 * (the same rule) and its medium bin in the tables malloc and free read,
 * and the bins are those block sizes, in order, each its own bin.
 */
START_TEST(test_medium_bins)
{
	for (size_t n = CGM_SMALL_MAX + 1; n <= CGM_MEDIUM_MAX; n++) {
		size_t block = cgm_small_block_size(n);
		unsigned int m = cgm_medium_bin[(n - 1) >> 8];

		ck_assert_uint_lt(m, CGM_NR_MEDIUM_BINS);
		ck_assert_msg(cgm_medium_sizes[m] == block, "request %zu: table %u, rule %zu",
			      n, cgm_medium_sizes[m], block);
		/* A free finds the bin from the block size the same way. */
		ck_assert_uint_eq(cgm_medium_bin[(block - 1) >> 8], m);
	}
	ck_assert_uint_eq(cgm_medium_sizes[0], cgm_small_block_size(CGM_SMALL_MAX + 1));
	ck_assert_uint_eq(cgm_medium_sizes[CGM_NR_MEDIUM_BINS - 1], CGM_MEDIUM_MAX);
	for (unsigned int m = 1; m < CGM_NR_MEDIUM_BINS; m++)
		ck_assert_uint_eq(cgm_medium_sizes[m],
				  cgm_small_block_size(cgm_medium_sizes[m - 1] + 1u));
}
END_TEST

START_TEST(test_alloc_free_restores_ancestors)
{
	static int64_t live_size[4096];
	uint64_t rng = seed0 + 7;
	struct cgm_thread_slot *t;
	uint32_t slot;
	int nlive = 0, bad_stock = 0;
	int64_t live = 0;
	const char *const path[] = { "/", "/a", "/a/b", "/a/b/c" };

	ck_assert_int_eq(acct_attach(&ac, "/a/b/c"), 0);
	slot = acct_thread_register(&ac, gettid_());
	ck_assert_int_ne(slot, CGM_NONE);
	t = &ac.h.threads[slot];
	for (int round = 0; round < 3; round++) {
		int64_t before[4];

		for (int i = 0; i < 4; i++)
			before[i] = usage_of(path[i]);
		for (int op = 0; op < 20000; op++) {
			if (nlive < 4096 && (nlive == 0 || acct_rand_below(&rng, 100) < 55)) {
				int64_t sz = sim_malloc(&ac, t, rand_size(&rng), false);

				ck_assert_int_gt(sz, 0);
				live_size[nlive++] = sz;
				live += sz;
				/* A refill leaves less than a batch (or less than a page past it). */
				bad_stock += t->stock < 0 || t->stock >= BATCH * PAGE + PAGE;
			} else {
				int k = (int)acct_rand_below(&rng, (uint64_t)nlive);

				sim_free(t, live_size[k]);
				live -= live_size[k];
				live_size[k] = live_size[--nlive];
			}
			if (op % 997 == 0) {
				check_bytes_accounted(live, "during the round");
				check_usage_held("during the round");
			}
		}
		while (nlive)
			sim_free(t, live_size[--nlive]);
		live = 0;
		check_bytes_accounted(0, "all freed, stock kept");
		/* The stock goes back; then every ancestor is exactly where it was. */
		acct_thread_exit(&ac, slot);
		ck_assert_int_eq(t->stock, 0);
		acct_harvest(&ac.h, ac.proc);
		for (int i = 0; i < 4; i++)
			ck_assert_msg(usage_of(path[i]) == before[i], "round %d: %s at %" PRId64
				      " pages, %" PRId64 " before", round, path[i], usage_of(path[i]),
				      before[i]);
		ck_assert_int_eq(me()->held_pages, 0);
		ck_assert_int_eq(me()->free_pool, 0);
		t->state = CGM_SLOT_LIVE;	/* the thread goes on (a test shortcut) */
	}
	ck_assert_msg(bad_stock == 0, "%d refills left a stock out of bounds", bad_stock);
}
END_TEST

/* ---- several threads, cross-thread frees, concurrent harvests ---- */

#define NTHREADS 4
#define QLEN 256

static struct {
	pthread_mutex_t lock;
	int64_t q[QLEN];		/* blocks handed to another thread to free */
	int qn;
	int64_t live[NTHREADS];
	int failed;
} xt = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void *xthread(void *arg)
{
	int me_ = (int)(intptr_t)arg;
	uint64_t rng = seed0 * 977 + (uint64_t)me_;
	uint32_t slot = acct_thread_register(&ac, gettid_());
	struct cgm_thread_slot *t;
	int64_t mine[512];
	int n = 0;

	if (slot == CGM_NONE) {
		xt.failed = 1;
		return NULL;
	}
	t = &ac.h.threads[slot];
	for (int op = 0; op < 30000; op++) {
		unsigned r = (unsigned)acct_rand_below(&rng, 100);

		if (r < 50 && n < 512) {
			int64_t sz = sim_malloc(&ac, t, rand_size(&rng), false);

			if (sz < 0) {
				xt.failed = 2;
				break;
			}
			mine[n++] = sz;
			if (t->stock < 0 || t->stock >= BATCH * PAGE + PAGE)
				xt.failed = 3;
		} else if (r < 80 && n) {
			sim_free(t, mine[--n]);
		} else if (r < 95 && n) {
			/* Hand a block to another thread: it frees it into its own slot. */
			pthread_mutex_lock(&xt.lock);
			if (xt.qn < QLEN)
				xt.q[xt.qn++] = mine[--n];
			pthread_mutex_unlock(&xt.lock);
		} else if (r < 99) {
			pthread_mutex_lock(&xt.lock);
			while (xt.qn)
				sim_free(t, xt.q[--xt.qn]);
			pthread_mutex_unlock(&xt.lock);
		} else if (me_ == 0) {
			/* As readers and other processes do, concurrently. */
			if (op & 1)
				rstat_flush(&ac.h);
			else
				acct_harvest(&ac.h, ac.proc);
		}
	}
	xt.live[me_] = 0;
	for (int i = 0; i < n; i++)
		xt.live[me_] += mine[i];
	/*
	 * Odd threads leave through the exit hook: their stock goes back.
	 * The slot is not theirs any more once the hook returns (a flush may
	 * reap it), so the stock is checked by the hook's caller's lock.
	 */
	if (me_ & 1) {
		struct cgm_proc *p = hier_proc(&ac.h, ac.proc);

		acct_thread_exit(&ac, slot);
		hier_lock(&p->lock);
		if (t->proc == ac.proc && t->state == CGM_SLOT_EXITING && t->stock != 0)
			xt.failed = 4;
		hier_unlock(&p->lock);
	}
	return NULL;
}

START_TEST(test_threads_cross_frees)
{
	pthread_t th[NTHREADS];
	uint32_t main_slot;
	int64_t live = 0;
	int exiting = 0;

	ck_assert_int_eq(acct_attach(&ac, "/x/t"), 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, xthread, (void *)(intptr_t)i);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	ck_assert_msg(xt.failed == 0, "a thread failed (%d)", xt.failed);
	main_slot = acct_thread_register(&ac, gettid_());
	while (xt.qn)
		sim_free(&ac.h.threads[main_slot], xt.q[--xt.qn]);
	for (int i = 0; i < NTHREADS; i++)
		live += xt.live[i];
	check_bytes_accounted(live, "after the threads");
	check_usage_held("after the threads");
	ck_assert_int_eq(usage_of("/x"), me()->held_pages);
	ck_assert_int_eq(usage_of("/"), me()->held_pages);
	/* The exited threads' slots are reaped by the next flush. */
	rstat_flush(&ac.h);
	for (uint32_t i = 0; i < CGM_MAX_THREADS; i++)
		exiting += ac.h.threads[i].state == CGM_SLOT_EXITING;
	ck_assert_int_eq(exiting, 0);
	/* Detach returns everything, live blocks and stocks included. */
	acct_detach(&ac);
	ck_assert_int_eq(usage_of("/x/t"), 0);
	ck_assert_int_eq(usage_of("/x"), 0);
	ck_assert_int_eq(usage_of("/"), 0);
}
END_TEST

/*
 * A detached process's thread slots stay in use until the process is
 * gone (its threads may still write them), but no flush visits them
 * again: in thread_map, out of flush_map.  One map served both, and a
 * new thread of another process, finding the bit clear, tried each such
 * slot as if free -- a failed compare-and-swap, and a page of the file
 * mapped, per slot (test_hier_rss, under load: 14 slots, 48-80 KiB of
 * the file against 20-24).  Here a new registration must take another
 * slot without touching the detached one.
 */
static bool map_has(const uint64_t *map, uint32_t i)
{
	return __atomic_load_n(&map[i / 64], __ATOMIC_RELAXED) & (1ULL << (i % 64));
}

START_TEST(test_detached_slots_stay_in_use)
{
	struct cgm_hier_header *hd;
	uint32_t slot, other;

	ck_assert_int_eq(acct_attach(&ac, "/x/d"), 0);
	slot = acct_thread_register(&ac, gettid_());
	ck_assert_uint_ne(slot, CGM_NONE);
	hd = ac.h.hdr;
	ck_assert(map_has(hd->thread_map, slot) && map_has(hd->flush_map, slot));
	acct_detach(&ac);
	/* The process still runs: its slot is in use, and a flush has nothing to take from it. */
	ck_assert_msg(map_has(hd->thread_map, slot), "a detached process's thread slot is off the map of slots in use");
	ck_assert(!map_has(hd->flush_map, slot));
	ck_assert_uint_ne(ac.h.threads[slot].state, CGM_SLOT_FREE);
	/* Another attach (this process again, as after an exec) takes another slot. */
	ck_assert_int_eq(acct_attach(&ac, "/x/d2"), 0);
	other = acct_thread_register(&ac, gettid_());
	ck_assert_uint_ne(other, CGM_NONE);
	ck_assert_uint_ne(other, slot);
	acct_detach(&ac);
}
END_TEST

START_TEST(test_stock_trim_and_exit)
{
	uint32_t slot;
	struct cgm_thread_slot *t;
	int64_t held;

	ck_assert_int_eq(acct_attach(&ac, "/s"), 0);
	slot = acct_thread_register(&ac, gettid_());
	t = &ac.h.threads[slot];
	ck_assert_int_eq(sim_malloc(&ac, t, 16, false), 16);
	ck_assert_int_eq(t->stock, BATCH * PAGE - 16);
	ck_assert_int_eq(me()->held_pages, BATCH);
	/* A realloc shrink can leave a big stock: trimming keeps one batch. */
	t->stock += 3 * BATCH * PAGE;
	me()->held_pages += 3 * BATCH;
	page_counter_charge(&group_at("/s")->memory, 3 * BATCH);
	acct_stock_trim(&ac, t);
	ck_assert_int_eq(t->stock, BATCH * PAGE);
	check_bytes_accounted(16, "after the trim");
	/* Under two batches nothing is trimmed. */
	t->stock += PAGE;
	me()->held_pages += 1;
	page_counter_charge(&group_at("/s")->memory, 1);
	acct_stock_trim(&ac, t);
	ck_assert_int_eq(t->stock, BATCH * PAGE + PAGE);
	/* Thread exit: the stock goes back to the process and is uncharged. */
	held = me()->held_pages;
	acct_thread_exit(&ac, slot);
	ck_assert_int_eq(t->stock, 0);
	ck_assert_int_eq(t->state, CGM_SLOT_EXITING);
	ck_assert_int_eq(me()->held_pages, held - (BATCH * PAGE + PAGE) / PAGE);
	check_bytes_accounted(16, "after the exit");
	check_usage_held("after the exit");
}
END_TEST

/*
 * A stock refilled from the process's frees covers the whole request,
 * even one larger than a charge batch: a refill that took only a batch
 * left the stock short, the block uncharged, and its free later found no
 * pages to uncharge (memory.current below what the process holds).
 */
START_TEST(test_refill_from_frees_covers_request)
{
	const int64_t big = 4 * BATCH * PAGE;
	uint32_t slot, other;
	struct cgm_thread_slot *t, *o;

	ck_assert_int_eq(acct_attach(&ac, "/r"), 0);
	slot = acct_thread_register(&ac, gettid_());
	other = acct_thread_register(&ac, gettid_());
	t = &ac.h.threads[slot];
	o = &ac.h.threads[other];
	/* Another slot frees what this one allocated: the frees wait in the pool. */
	ck_assert_int_eq(sim_malloc(&ac, t, (size_t)(2 * big), false), 2 * big);
	sim_free(o, 2 * big);
	/* The request is more than a batch and less than the frees. */
	ck_assert_int_eq(sim_malloc(&ac, t, (size_t)big, false), big);
	ck_assert_int_ge(t->stock, 0);
	check_bytes_accounted(big, "after a refill from frees larger than a batch");
	sim_free(t, big);
	check_bytes_accounted(0, "after its free");
	ck_assert_int_eq(me()->untracked_bytes, 0);
	check_usage_held("at the end");
}
END_TEST

/*
 * A refill takes the thread's own frees first, and reads the other
 * threads' counters (whose cache lines that takes from them) only when
 * its own fall short; nothing new is charged while frees cover it.
 */
START_TEST(test_refill_own_frees_first)
{
	const int64_t chunk = 2 * BATCH * PAGE;
	struct cgm_thread_slot *t, *o;
	int64_t usage;

	ck_assert_int_eq(acct_attach(&ac, "/own"), 0);
	t = &ac.h.threads[acct_thread_register(&ac, gettid_())];
	o = &ac.h.threads[acct_thread_register(&ac, gettid_())];
	ck_assert_int_eq(sim_malloc(&ac, t, (size_t)chunk, false), chunk);
	ck_assert_int_eq(sim_malloc(&ac, o, (size_t)chunk, false), chunk);
	sim_free(o, chunk);
	sim_free(t, chunk);
	usage = usage_of("/own");
	/* A page more than t's stock: a refill, which t's own frees cover. */
	ck_assert_int_eq(sim_malloc(&ac, t, (size_t)(t->stock + PAGE), false) > 0, 1);
	ck_assert_int_ge(t->stock, 0);
	ck_assert_uint_eq(t->harvested_freed_bytes, t->freed_bytes);
	ck_assert_uint_eq(o->harvested_freed_bytes, 0);
	ck_assert_int_le(usage_of("/own"), usage);
	/* More than what is left of t's frees: o's are taken too, before any charge. */
	ck_assert_int_eq(sim_malloc(&ac, t, (size_t)chunk, false), chunk);
	ck_assert_uint_eq(o->harvested_freed_bytes, o->freed_bytes);
	ck_assert_int_le(usage_of("/own"), usage);
	check_usage_held("at the end");
}
END_TEST

START_TEST(test_untracked_frees_never_negative)
{
	uint32_t slot;
	struct cgm_thread_slot *t;

	ck_assert_int_eq(acct_attach(&ac, "/u"), 0);
	slot = acct_thread_register(&ac, gettid_());
	t = &ac.h.threads[slot];
	ck_assert_int_eq(sim_malloc(&ac, t, 4096, false), 4096);
	/* Memory allocated before attach, freed now: 1 MiB never charged to us. */
	sim_free(t, 1 << 20);
	acct_harvest(&ac.h, ac.proc);
	ck_assert_int_eq(me()->held_pages, 0);
	ck_assert_int_ge(me()->free_pool, 0);
	ck_assert_int_eq(usage_of("/u"), 0);
	ck_assert_int_eq(usage_of("/"), 0);
	ck_assert_int_ge(me()->untracked_bytes, (1 << 20) - BATCH * PAGE);
	/* Charging works normally afterwards. */
	ck_assert_int_eq(sim_malloc(&ac, t, 64 * PAGE, false), 64 * PAGE);
	check_usage_held("after untracked frees");
	ck_assert_int_ge(usage_of("/u"), 64);
}
END_TEST

/* ---- limits ---- */

static void set_limit(const char *path, const char *file, const char *value)
{
	acct_group_write(&ac.h, path, file, value);
}

static int64_t event_of(const char *path, const char *file, const char *ev)
{
	return acct_group_value(&ac.h, path, file, ev);
}

START_TEST(test_limit_holds_and_refuses_cleanly)
{
	static const char *const path[] = { "/", "/l", "/l/m", "/l/m/n" };
	uint32_t slot;
	struct cgm_thread_slot *t;
	int64_t live = 0, max_pages = 300, sz, usage[4], stock, held;

	ck_assert_int_eq(acct_attach(&ac, "/l/m/n"), 0);
	group_mkdir(&ac.h, "/l/sibling");
	set_limit("/l/m", "memory.max", "1200K");	/* 300 pages */
	slot = acct_thread_register(&ac, gettid_());
	t = &ac.h.threads[slot];
	for (;;) {
		sz = sim_malloc(&ac, t, 5000, true);
		if (sz < 0)
			break;
		live += sz;
		ck_assert_int_le(usage_of("/l/m"), max_pages);
	}
	ck_assert_int_eq(sz, -ENOMEM);
	/* Refused neither late nor early: the block did not fit in what is left. */
	ck_assert_int_le(live, max_pages * PAGE);
	ck_assert_msg(live > max_pages * PAGE - sim_block_size(5000) - PAGE,
		      "refused at %" PRId64 " live bytes, max %" PRId64, live, max_pages * PAGE);
	ck_assert_int_le(group_at("/l/m")->memory.watermark, max_pages);

	/* Another refusal changes no usage, no stock, no held pages. */
	for (int i = 0; i < 4; i++)
		usage[i] = usage_of(path[i]);
	stock = t->stock;
	held = me()->held_pages;
	ck_assert_int_eq(sim_malloc(&ac, t, 5000, true), -ENOMEM);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(usage_of(path[i]), usage[i]);
	ck_assert_int_eq(t->stock, stock);
	ck_assert_int_eq(me()->held_pages, held);

	/* Events: max and oom on the limited group and above it (not the root), not below. */
	ck_assert_int_gt(event_of("/l/m", "memory.events.local", "max"), 0);
	ck_assert_int_eq(event_of("/l/m", "memory.events.local", "oom"), 2);
	ck_assert_int_eq(event_of("/l", "memory.events", "oom"), 2);
	ck_assert_int_eq(event_of("/l", "memory.events.local", "oom"), 0);
	ck_assert_int_eq(event_of("/l/m/n", "memory.events", "max"), 0);
	ck_assert_int_eq(event_of("/l/sibling", "memory.events", "max"), 0);
	ck_assert_int_eq(ac.h.groups[CGM_ROOT].events[CGM_EV_OOM], 0);
	ck_assert_int_gt(group_at("/l/m")->memory.failcnt, 0);

	/* Frees come back through the harvest that the refill runs first. */
	sim_free(t, 100 * 5008);
	live -= 100 * 5008;
	ck_assert_int_gt(sim_malloc(&ac, t, 5000, true), 0);
	live += sim_block_size(5000);
	check_bytes_accounted(live, "after the limit");
	check_usage_held("after the limit");

	/*
	 * memory.max below usage: accepted, and nothing more is charged until
	 * usage drops.  What is already charged still serves: the stock, and
	 * freed bytes the process holds (less than a page after a harvest).
	 */
	set_limit("/l/m", "memory.max", "400K");
	ck_assert_int_eq(sim_malloc(&ac, t, 64 * 1024, true), -ENOMEM);
	stock = t->stock;
	held = me()->held_pages;
	usage[0] = usage_of("/l/m");
	ck_assert_int_lt(me()->free_pool, PAGE);
	ck_assert_int_eq(sim_malloc(&ac, t, 1, true) > 0, stock >= 8 || me()->free_pool >= 8 - stock);
	ck_assert_int_eq(usage_of("/l/m"), usage[0]);
	ck_assert_int_eq(me()->held_pages, held);
	set_limit("/l/m", "memory.max", "max");
	ck_assert_int_gt(sim_malloc(&ac, t, 64 * 1024, true), 0);
}
END_TEST

/*
 * At memory.max the allocating thread's own precharge comes back before
 * the allocation is refused (drain_all_stock), and every other thread is
 * told to give back its own (drain_gen moves).
 */
START_TEST(test_max_drains_precharge)
{
	uint32_t slot;
	struct cgm_thread_slot *t;
	int64_t sz, held, usage, hoard = 100 * 1024;
	uint32_t gen;
	const unsigned int bin = CGM_NR_BINS - 1;	/* 1 KiB blocks */

	ck_assert_int_eq(acct_attach(&ac, "/dr"), 0);
	set_limit("/dr", "memory.max", "1M");
	slot = acct_thread_register(&ac, gettid_());
	t = &ac.h.threads[slot];
	/* Fill to the limit, then hoard 100 KiB of the stock as 1 KiB allowances. */
	ck_assert_int_gt(sim_malloc(&ac, t, 1, true), 0);
	ck_assert_int_ge(t->stock, hoard);
	t->allow[bin] += hoard / 1024;
	t->refilled[bin] += hoard / 1024;
	t->stock -= hoard;
	while ((sz = sim_malloc(&ac, t, 8000, true)) > 0)
		;
	ck_assert_int_eq(sz, -ENOMEM);
	/* That refusal already drained the allowances into the stock. */
	ck_assert_int_eq(t->allow[bin], 0);
	ck_assert_int_ge(t->stock, 0);
	held = me()->held_pages;
	usage = usage_of("/dr");
	ck_assert_int_le(usage, 256);
	gen = ac.h.hdr->drain_gen;
	ck_assert_uint_gt(gen, 0);
	/* Own precharge again, refused again: drained again, generation moves on. */
	t->allow[bin] += 4;
	t->refilled[bin] += 4;
	t->stock -= 4 * 1024;
	ck_assert_int_gt(sim_malloc(&ac, t, 1000, true), 0);	/* from the drained allowances */
	ck_assert_int_eq(usage_of("/dr"), usage);
	ck_assert_int_eq(me()->held_pages, held);
	while (sim_malloc(&ac, t, 8000, true) > 0)
		;
	ck_assert_uint_gt(ac.h.hdr->drain_gen, gen);
	check_usage_held("after the drains");
	/* A thread that comes after the drains has nothing to give back: it starts answered. */
	slot = acct_thread_register(&ac, gettid_() + 1);
	ck_assert_uint_ne(slot, CGM_NONE);
	ck_assert_uint_eq(ac.h.threads[slot].drained_gen, ac.h.hdr->drain_gen);
}
END_TEST

/*
 * A charge that must not fail (ACCT_EXEMPT_MAX, the shim's
 * cgm_charge_nofail_begin) is charged past memory.max: the pages it lacks
 * and no more, a max event and no oom; once the exemption ends, memory.max
 * refuses again.
 */
START_TEST(test_nofail_charges_past_max)
{
	uint32_t slot;
	struct cgm_thread_slot *t;
	int64_t sz, usage, max_pages = 256, oom;
	int64_t max_events;

	ck_assert_int_eq(acct_attach(&ac, "/nf"), 0);
	set_limit("/nf", "memory.max", "1M");
	slot = acct_thread_register(&ac, gettid_());
	t = &ac.h.threads[slot];
	while ((sz = sim_malloc(&ac, t, 5000, true)) > 0)
		;
	ck_assert_int_eq(sz, -ENOMEM);
	usage = usage_of("/nf");
	ck_assert_int_le(usage, max_pages);
	max_events = event_of("/nf", "memory.events", "max");
	oom = event_of("/nf", "memory.events", "oom");

	acct_exempt = ACCT_EXEMPT_MAX | ACCT_EXEMPT_HIGH;
	for (int i = 1; i <= 3; i++) {
		ck_assert_int_eq(sim_malloc(&ac, t, 5000, true), sim_block_size(5000));
		/* Past the limit by what the blocks take, rounded up to pages, no batch. */
		ck_assert_int_gt(usage_of("/nf"), max_pages);
		ck_assert_int_le(usage_of("/nf"),
				 usage + (i * sim_block_size(5000) + PAGE - 1) / PAGE);
	}
	acct_exempt = 0;
	ck_assert_int_gt(event_of("/nf", "memory.events", "max"), max_events);
	ck_assert_int_eq(event_of("/nf", "memory.events", "oom"), oom);
	ck_assert_int_gt(group_at("/nf")->memory.watermark, max_pages);
	check_usage_held("after charges past the limit");

	/* The exemption over: refused again, usage where it was. */
	usage = usage_of("/nf");
	ck_assert_int_eq(sim_malloc(&ac, t, 5000, true), -ENOMEM);
	ck_assert_int_eq(usage_of("/nf"), usage);
}
END_TEST

/*
 * A thread's first refill of a bin starts where the last thread to exit
 * left that bin (cgm_acct.first_refill), not at 8 blocks; a bin that
 * thread never used starts at 8, and so does a bin whose refills were
 * reset (precharge given back).
 */
START_TEST(test_first_refill_learned)
{
	const unsigned int used = 3, unused = 5;
	struct cgm_thread_slot *t;
	uint32_t slot;
	int64_t last;

	ck_assert_int_eq(acct_attach(&ac, "/r"), 0);
	slot = acct_thread_register(&ac, gettid_());
	t = &ac.h.threads[slot];
	/* Five refills, each allowance used up before the next: 8, 16, ... 128. */
	for (int i = 0; i < 5; i++) {
		t->allow[used] = 0;
		ck_assert_int_eq(acct_refill_bin(&ac, t, used, false), 0);
	}
	last = t->next_refill[used];
	ck_assert_int_eq(last, 128);
	ck_assert_int_eq(t->allow[used], last);
	acct_thread_exit(&ac, slot);

	slot = acct_thread_register(&ac, gettid_() + 1);
	ck_assert_uint_ne(slot, CGM_NONE);
	t = &ac.h.threads[slot];
	ck_assert_int_eq(acct_refill_bin(&ac, t, used, false), 0);
	ck_assert_int_eq(t->allow[used], last);
	ck_assert_int_eq(acct_refill_bin(&ac, t, unused, false), 0);
	ck_assert_int_eq(t->allow[unused], 8);
	/* One block taken, the rest given back: the next refill starts at 8. */
	t->allow[used]--;
	acct_slot_unprecharge(t);
	ck_assert_int_eq(t->allow[used], 0);
	ck_assert_int_eq(acct_refill_bin(&ac, t, used, false), 0);
	ck_assert_int_eq(t->allow[used], 8);
	check_usage_held("after the refills");
}
END_TEST

/* Several threads at a shared limit: usage never passes max, the peak neither. */
static struct {
	int64_t live[NTHREADS];
	int64_t refused[NTHREADS];
	int bad;
	int stop;
	int64_t worst;
} lim;

static void *limit_thread(void *arg)
{
	int me_ = (int)(intptr_t)arg;
	uint64_t rng = seed0 * 131 + (uint64_t)me_;
	uint32_t slot = acct_thread_register(&ac, gettid_());
	struct cgm_thread_slot *t = hier_thread(&ac.h, slot);
	int64_t mine[2048];
	int n = 0;

	if (!t) {
		lim.bad = 1;
		return NULL;
	}
	for (int op = 0; op < 20000; op++) {
		if (n < 2048 && acct_rand_below(&rng, 100) < 60) {
			int64_t sz = sim_malloc(&ac, t, rand_size(&rng), true);

			if (sz < 0)
				lim.refused[me_]++;
			else
				mine[n++] = sz;
		} else if (n) {
			int k = (int)acct_rand_below(&rng, (uint64_t)n);

			sim_free(t, mine[k]);
			mine[k] = mine[--n];
		}
	}
	for (int i = 0; i < n; i++)
		lim.live[me_] += mine[i];
	return NULL;
}

static void *limit_sampler(void *arg)
{
	struct page_counter *c = arg;

	while (!__atomic_load_n(&lim.stop, __ATOMIC_RELAXED)) {
		int64_t u = page_counter_read(c);

		if (u > lim.worst)
			lim.worst = u;
	}
	return NULL;
}

START_TEST(test_limit_threads)
{
	pthread_t th[NTHREADS], sampler;
	struct page_counter *c;
	int64_t live = 0, refused = 0, max_pages = 256;

	ck_assert_int_eq(acct_attach(&ac, "/lt/a"), 0);
	set_limit("/lt", "memory.max", "1M");
	c = &group_at("/lt")->memory;
	pthread_create(&sampler, NULL, limit_sampler, c);
	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, limit_thread, (void *)(intptr_t)i);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	__atomic_store_n(&lim.stop, 1, __ATOMIC_RELAXED);
	pthread_join(sampler, NULL);
	ck_assert_int_eq(lim.bad, 0);
	for (int i = 0; i < NTHREADS; i++) {
		live += lim.live[i];
		refused += lim.refused[i];
	}
	ck_assert_msg(refused > 0, "the limit was never reached");
	ck_assert_int_le(c->watermark, max_pages);
	/* A charge checks and adds in one step: no reader ever sees usage above max. */
	ck_assert_msg(lim.worst <= max_pages,
		      "usage seen at %" PRId64 " pages, max %" PRId64, lim.worst, max_pages);
	ck_assert_int_le(page_counter_read(c), max_pages);
	check_bytes_accounted(live, "after the threads");
	check_usage_held("after the threads");
}
END_TEST

/* ---- moves and fork ---- */

START_TEST(test_move_carries_charge)
{
	uint32_t slot, b, n;
	struct cgm_thread_slot *t;
	int64_t held;

	ck_assert_int_eq(acct_attach(&ac, "/m/a"), 0);
	b = (uint32_t)group_mkdir(&ac.h, "/m/b");
	n = (uint32_t)group_mkdir(&ac.h, "/n");
	slot = acct_thread_register(&ac, gettid_());
	t = &ac.h.threads[slot];
	for (int i = 0; i < 50; i++)
		ck_assert_int_gt(sim_malloc(&ac, t, 10000, false), 0);
	held = me()->held_pages;
	/*
	 * Their parent's memory.max takes the process once, not twice: a
	 * move between siblings changes nothing at the parent, and once was
	 * refused there (charged to /m/b before /m/a was uncharged).
	 */
	{
		char max[32];
		int64_t failcnt = group_at("/m")->memory.failcnt;

		snprintf(max, sizeof(max), "%" PRId64, (held + held / 2) * 4096);
		set_limit("/m", "memory.max", max);
		ck_assert_int_eq(acct_move(&ac.h, ac.proc, b), 0);
		ck_assert_int_eq(group_at("/m")->memory.failcnt, failcnt);
		set_limit("/m", "memory.max", "max");
	}
	ck_assert_int_eq(usage_of("/m/a"), 0);
	ck_assert_int_eq(usage_of("/m/b"), held);
	ck_assert_int_eq(usage_of("/m"), held);
	ck_assert_int_eq(usage_of("/"), held);
	ck_assert_int_eq(group_at("/m/a")->nr_procs, 0);
	ck_assert_int_eq(group_at("/m/b")->nr_procs, 1);
	/* New charges land where the process is now. */
	for (int i = 0; i < 50; i++)
		ck_assert_int_gt(sim_malloc(&ac, t, 10000, false), 0);
	ck_assert_int_eq(usage_of("/m/a"), 0);
	check_usage_held("after the move");
	/* A destination too small refuses the move, and nothing changes. */
	set_limit("/n", "memory.max", "64K");
	held = me()->held_pages;
	ck_assert_int_eq(acct_move(&ac.h, ac.proc, n), -ENOMEM);
	ck_assert_int_eq(usage_of("/n"), 0);
	ck_assert_int_eq(usage_of("/m/b"), held);
	ck_assert_int_eq(usage_of("/"), held);
	ck_assert_int_eq(me()->group, b);
	check_usage_held("after a refused move");
	/* Through cgroup.procs (nobody here answers: the writer moves the charge after a second). */
	{
		char why[256], pid[16];

		snprintf(pid, sizeof(pid), "%d", (int)getpid());
		ck_assert_int_eq(cgm_file_write(&ac.h, CGM_NONE, group_lookup(&ac.h, "/m/a"), "cgroup.procs",
						pid, why, sizeof(why)), 0);
		ck_assert_int_eq(usage_of("/m/a"), held);
		ck_assert_int_eq(usage_of("/m/b"), 0);
	}
}
END_TEST

/*
 * A forked child joins its parent's group charged nothing for what it
 * inherited (the kernel charges nothing at fork); its frees of inherited
 * blocks uncharge nothing of the parent's and take neither its charge nor
 * the group's heap_live below what the processes hold; its own allocations are
 * charged to it.
 */
START_TEST(test_fork_child_slot)
{
	uint32_t slot, group;
	struct cgm_thread_slot *t;
	int64_t parent_held, group_before, live_before, own;
	int up[2], down[2], status;
	pid_t pid;
	char go;

	ck_assert_int_eq(acct_attach(&ac, "/f"), 0);
	group = me()->group;
	slot = acct_thread_register(&ac, gettid_());
	t = &ac.h.threads[slot];
	for (int i = 0; i < 40; i++)
		ck_assert_int_gt(sim_malloc(&ac, t, 7000, false), 0);
	acct_drain(&ac.h);
	parent_held = me()->held_pages;
	group_before = usage_of("/f");
	live_before = ac.h.groups[group].stat[CGM_STAT_HEAP_LIVE];
	ck_assert_int_eq(live_before, 40 * sim_block_size(7000));
	ck_assert_int_eq(pipe(up), 0);
	ck_assert_int_eq(pipe(down), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		uint32_t parent_proc = ac.proc, cslot;
		char r = 0;

		ac.proc = CGM_NONE;
		if (acct_attach_group(&ac, group) != 0 || ac.proc == parent_proc ||
		    me()->held_pages != 0)
			r = 1;
		cslot = r ? CGM_NONE : acct_thread_register(&ac, gettid_());
		if (cslot == CGM_NONE)
			r = r ? r : 2;
		/* It frees everything it inherited, then charges a block of its own. */
		for (int i = 0; !r && i < 40; i++)
			sim_free(&ac.h.threads[cslot], sim_block_size(7000));
		acct_harvest(&ac.h, ac.proc);
		if (!r && me()->held_pages != 0)
			r = 3;
		if (!r && sim_malloc(&ac, &ac.h.threads[cslot], 100000, false) < 0)
			r = 4;
		acct_drain(&ac.h);
		if (write(up[1], &r, 1) != 1 || read(down[0], &go, 1) != 1)
			_exit(5);
		acct_detach(&ac);
		_exit(r);
	}
	{
		char r = 9;
		int64_t child_held = 0, child_untracked = 0;
		int nslots = 0;

		ck_assert_int_eq(read(up[0], &r, 1), 1);
		ck_assert_int_eq(r, 0);
		for (uint32_t i = 0; i < CGM_MAX_PROCS; i++) {
			struct cgm_proc *p = &ac.h.procs[i];

			if (p->state == CGM_SLOT_LIVE && p->pid == pid) {
				nslots++;
				child_held = p->held_pages;
				child_untracked = p->untracked_bytes;
				ck_assert_int_eq(p->group, group);
			}
		}
		ck_assert_int_eq(nslots, 1);
		/* Its own block, and its frees of the inherited ones uncharged nothing. */
		own = sim_block_size(100000);
		ck_assert_int_ge(child_held * PAGE, own);
		ck_assert_int_ge(child_untracked, 40 * sim_block_size(7000) - PAGE);
		ck_assert_int_eq(usage_of("/f"), parent_held + child_held);
		ck_assert_int_eq(me()->held_pages, parent_held);
		/* anon: the parent's live bytes and the child's own block, once each. */
		ck_assert_int_eq(ac.h.groups[group].stat[CGM_STAT_HEAP_LIVE], live_before + own);
		check_usage_held("with the child");
		ck_assert_int_eq(write(down[1], "g", 1), 1);
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	ck_assert_int_eq(usage_of("/f"), group_before);
	ck_assert_int_eq(ac.h.groups[group].stat[CGM_STAT_HEAP_LIVE], live_before);
	ck_assert_int_eq(me()->held_pages, parent_held);
	check_usage_held("after the child");
}
END_TEST

/*
 * A scope goes with its last process; the slot that process leaves is
 * freed later, when another attaches -- and by then the scope's index may
 * name a new scope, which freeing the old slot must leave alone.
 */
START_TEST(test_scope_gone_with_its_process)
{
	uint32_t first, second;
	pid_t pid;
	int status;

	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct cgm_acct c = { .proc = CGM_NONE, .batch_pages = BATCH };
		char why[256];

		if (hier_open(&c.h, tmp.path, false, why, sizeof(why)) || acct_attach_scope(&c, "/a"))
			_exit(1);
		acct_detach(&c);
		_exit(group_lookup(&c.h, "/a") == CGM_NONE ? 0 : 2);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* The next scope takes the free index: the old slot still names it. */
	first = (uint32_t)group_mkdir(&ac.h, "/probe");
	ck_assert_int_eq(group_rmdir(&ac.h, "/probe"), 0);
	ck_assert_int_eq(acct_attach_scope(&ac, "/b"), 0);
	second = group_lookup(&ac.h, "/b");
	ck_assert_int_eq(second, first);
	ck_assert_int_eq(me()->group, second);
	ck_assert_int_eq(ac.h.groups[second].nr_procs, 1);
	ck_assert(ac.h.groups[second].flags & CGM_GROUP_TRANSIENT);
	acct_detach(&ac);
	ck_assert_int_eq(group_lookup(&ac.h, "/b"), CGM_NONE);
}
END_TEST

/* /proc/<pid>/stat field 22 (clock ticks since boot), read on its own here. */
static uint64_t stat_starttime(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
	fclose(f);
	p = strrchr(buf, ')');
	ck_assert_ptr_nonnull(p);
	/* fields 3..21 skipped, 22 read */
	ck_assert_int_eq(sscanf(p + 2, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s"
				" %*s %*s %*s %*s %*s %llu", &v), 1);
	return v;
}

/*
 * Which slot's process is gone: none of a live process that attached
 * after it started; all of one whose pid now names a process that started
 * after the attach (a reused pid), of a zombie, and of a pid with no
 * process.
 */
START_TEST(test_proc_gone)
{
	uint64_t ns_per_tick = 1000000000ULL / (uint64_t)sysconf(_SC_CLK_TCK);
	struct cgm_proc slot = { .state = CGM_SLOT_LIVE };
	uint64_t start;
	pid_t child;
	int status;

	ck_assert_int_eq(acct_attach(&ac, "/g"), 0);
	ck_assert(!acct_proc_gone(me()));
	start = stat_starttime(getpid()) * ns_per_tick;
	slot.pid = getpid();
	slot.attach_ns = start;
	ck_assert(!acct_proc_gone(&slot));
	/* Attached a tick before this process started: the pid was reused. */
	slot.attach_ns = start - ns_per_tick;
	ck_assert(acct_proc_gone(&slot));
	/* A zombie, then no process at all. */
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0)
		_exit(0);
	slot.pid = child;
	slot.attach_ns = UINT64_MAX;
	for (int i = 0; i < 500 && !acct_proc_gone(&slot); i++)
		usleep(2000);
	ck_assert(acct_proc_gone(&slot));
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert(acct_proc_gone(&slot));
	slot.pid = 0;
	ck_assert(acct_proc_gone(&slot));
}
END_TEST

/*
 * A live process's charge survives other processes attaching and
 * acct_reclaim_dead(); only a process that is gone loses its slot.
 */
START_TEST(test_live_process_survives_reclaim)
{
	struct acct_child other;
	int64_t other_usage;
	uint32_t slot;

	ck_assert_int_eq(acct_child_start(&other, tmp.path, "/p/a", hold_17_pages, NULL), 0);
	ck_assert_int_eq(acct_child_result(&other), 0);
	other_usage = usage_of("/p/a");
	ck_assert_int_ge(other_usage, 17);
	/* We attach: the other process is alive, its charge stays. */
	ck_assert_int_eq(acct_attach(&ac, "/p/b"), 0);
	ck_assert_msg(usage_of("/p/a") == other_usage,
		      "a live process's %" PRId64 " pages went when another process attached",
		      other_usage);
	slot = acct_thread_register(&ac, gettid_());
	ck_assert_int_gt(sim_malloc(&ac, &ac.h.threads[slot], 10 * PAGE, false), 0);
	ck_assert_int_eq(acct_reclaim_dead(&ac.h), 0);
	ck_assert_int_eq(usage_of("/p/a"), other_usage);
	ck_assert_int_eq(me()->state, CGM_SLOT_LIVE);
	ck_assert_int_eq(usage_of("/p/b"), me()->held_pages);
	/* It dies without detaching: now its charge comes back, and only its. */
	acct_child_finish(&other, false);
	ck_assert_int_eq(acct_reclaim_dead(&ac.h), 1);
	ck_assert_int_eq(usage_of("/p/a"), 0);
	ck_assert_int_eq(usage_of("/p/b"), me()->held_pages);
	ck_assert_int_gt(me()->held_pages, 0);
	check_usage_held("after the reclaim");
}
END_TEST

static void add_tests(TCase *tc, bool regressions)
{
	if (regressions)
		return;
	tcase_add_test(tc, test_live_process_survives_reclaim);
	tcase_add_test(tc, test_small_bin);
	tcase_add_test(tc, test_bins_are_the_block_sizes);
	tcase_add_test(tc, test_medium_bins);
	tcase_add_test(tc, test_alloc_free_restores_ancestors);
	tcase_add_test(tc, test_threads_cross_frees);
	tcase_add_test(tc, test_stock_trim_and_exit);
	tcase_add_test(tc, test_refill_from_frees_covers_request);
	tcase_add_test(tc, test_refill_own_frees_first);
	tcase_add_test(tc, test_untracked_frees_never_negative);
	tcase_add_test(tc, test_limit_holds_and_refuses_cleanly);
	tcase_add_test(tc, test_max_drains_precharge);
	tcase_add_test(tc, test_nofail_charges_past_max);
	tcase_add_test(tc, test_limit_threads);
	tcase_add_test(tc, test_move_carries_charge);
	tcase_add_test(tc, test_fork_child_slot);
	tcase_add_test(tc, test_proc_gone);
	tcase_add_test(tc, test_scope_gone_with_its_process);
	tcase_add_test(tc, test_detached_slots_stay_in_use);
	tcase_add_test(tc, test_first_refill_learned);
}

int main(int argc, char **argv)
{
	return acct_suite_main(argc, argv, "charge", &seed0, setup, teardown, add_tests);
}
