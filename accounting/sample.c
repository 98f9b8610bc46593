/*
 * Residency samples: the anonymous memory a process has in memory becomes
 * part of its charge and of its group's sampled statistics.
 *
 * The kernel charges a page when it is first touched.  cgmalloc charges
 * small and medium blocks by their bytes when they are allocated (they
 * are touched as they are handed out) and, with charge=resident, the rest
 * by what is resident: the process's anonymous resident memory (RssAnon:
 * /proc/PID/statm) less what the byte counts already charge.  That rest
 * -- large blocks' touched pages, the program's own mappings, what the
 * allocator keeps after frees, stacks -- is p->sampled_pages.
 *
 * The process samples itself in its allocation slow paths
 * (shim/resident.c), with the split of its memory between heap and
 * mappings that only it can see.  A reader of the files refreshes the
 * anon and the charge of a process whose sample is stale -- one that
 * touches memory without allocating -- from /proc (acct_refresh_stale),
 * as the kernel's readers flush its per-CPU counts.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "cgm/mul_div.h"
#include "cgm/size.h"

int64_t acct_sample_short(const struct cgm_acct *a)
{
	const struct cgm_proc *p = hier_proc(&a->h, a->proc);

	return p ? proc_sample_short(p) : 0;
}

/* The next decimal field of @s, or -1. */
static long long statm_field(const char **s)
{
	long long v = 0;

	while (**s == ' ')
		(*s)++;
	if (**s < '0' || **s > '9')
		return -1;
	while (**s >= '0' && **s <= '9' && v < (1LL << 50))
		v = v * 10 + (*(*s)++ - '0');
	return v;
}

/* Parsed by hand: this runs inside malloc's slow paths, where scanf may not. */
int64_t acct_read_anon(int pid, int fd)
{
	char path[64], text[256];
	long long resident, shared;
	const char *s = text;
	ssize_t n;

	if (fd >= 0) {
		n = pread(fd, text, sizeof(text) - 1, 0);
	} else {
		if (pid > 0)
			snprintf(path, sizeof(path), "/proc/%d/statm", pid);
		else
			memcpy(path, "/proc/self/statm", sizeof("/proc/self/statm"));
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -1;
		n = read(fd, text, sizeof(text) - 1);
		close(fd);
	}
	if (n <= 0)
		return -1;
	text[n] = '\0';
	/* size resident shared ...: shared is the file and shmem part of resident. */
	if (statm_field(&s) < 0 || (resident = statm_field(&s)) < 0 ||
	    (shared = statm_field(&s)) < 0 || resident < shared)
		return -1;
	return (int64_t)(resident - shared) * CGM_PAGE_SIZE;
}

/*
 * Charge up to @want pages to @g and its ancestors, no counter past its
 * max: as much as there is room for.  Returns the pages charged.
 */
static int64_t charge_room(struct cgm_hier *h, struct cgm_group *g, int64_t want)
{
	for (int tries = 0; tries < 8 && want > 0; tries++) {
		uint32_t idx = hier_group_index(h, g);
		struct page_counter *fail;
		const struct cgm_group *a;
		int64_t room = want;

		for_each_ancestor(h, idx, a) {
			int64_t left = __atomic_load_n(&a->memory.max, __ATOMIC_RELAXED) -
				       page_counter_read(&a->memory);

			if (left < room)
				room = left > 0 ? left : 0;
		}
		if (room <= 0)
			return 0;
		if (page_counter_try_charge(&g->memory, room, &fail))
			return room;
		/* Another charge took the room meanwhile: look again. */
	}
	return 0;
}

/*
 * The number of NUMA nodes, from the highest one online: what each
 * sample divides the anon between (shim/numa.c) and memory.numa_stat
 * lists.  Here, not with the files: every process reads it at its first
 * sample, and the path's string lay with the files' strings, which the
 * library's link puts where only readers of those files look
 * (scripts/lib-ld-script).
 */
int acct_online_nodes(void)
{
	static int nodes;
	char text[64] = "";
	int fd, last = 0;
	ssize_t n;

	if (nodes)
		return nodes;
	fd = open("/sys/devices/system/node/online", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, text, sizeof(text) - 1);
		close(fd);
		if (n > 0) {
			text[n] = '\0';
			/* The highest node number: the last number in the list. */
			for (char *c = text; *c; c++)
				if (*c >= '0' && *c <= '9' && (c == text || c[-1] < '0' || c[-1] > '9')) {
					uint64_t node = cgm_parse_decimal(c, NULL);

					last = node < CGM_MAX_NODES ? (int)node : CGM_MAX_NODES;
				}
		}
	}
	nodes = last + 1 > CGM_MAX_NODES ? CGM_MAX_NODES : last + 1;
	return nodes;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * A reader's refresh knows the anon, not where it lies: the last split
 * between NUMA nodes keeps its shares of the new anon (all on node 0
 * when there was none).  p->lock held.
 */
static CGM_COLD void numa_rescale(struct cgm_proc *p, int64_t anon)
{
	int64_t *node = &p->sampled[CGM_STAT_NUMA_ANON0], sum = 0;

	for (int k = 0; k < CGM_MAX_NODES; k++)
		sum += node[k] > 0 ? node[k] : 0;
	for (int k = 0; k < CGM_MAX_NODES; k++) {
		int64_t v = sum > 0 ? cgm_mul_div(anon, node[k], sum) :
			    k == 0 ? anon : 0;

		__atomic_store_n(&node[k], v, __ATOMIC_RELAXED);
	}
}

/*
 * Apply a sample of process slot @proc: @anon bytes (its inherited base
 * already taken off), and the split statistics in @split (heap_free,
 * mapped_anon), or NULL to keep the last ones.  Returns the pages charged.
 */
static int64_t sample_apply(struct cgm_hier *h, uint32_t proc, int64_t anon, const int64_t *split)
{
	struct cgm_proc *p = hier_proc(h, proc);
	struct cgm_group *g;
	int64_t pages = 0, delta;

	if (!p)
		return 0;
	/* The library's bookkeeping is not the program's memory (struct cgm_proc). */
	anon -= __atomic_load_n(&p->own_anon, __ATOMIC_RELAXED);
	if (anon < 0)
		anon = 0;
	hier_lock(&p->lock);
	if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != CGM_SLOT_LIVE) {
		hier_unlock(&p->lock);
		return 0;
	}
	g = hier_group(h, p->group);
	if (p->sample_flags & CGM_SAMPLE_CHARGE)
		pages = sample_target(anon, p->held_pages,
				      __atomic_load_n(&p->spilled_pages, __ATOMIC_RELAXED));
	if (p->sampled_pages < -p->held_pages)
		p->sampled_pages = p->held_pages > 0 ? -p->held_pages : 0;
	delta = g ? pages - p->sampled_pages : 0;
	/*
	 * Memory found in use is charged as far as memory.max has room; what
	 * does not fit is the process's shortfall (struct cgm_proc), so that
	 * memory.current never passes memory.max, as the kernel's does not.
	 */
	p->sample_short = 0;
	if (delta > 0) {
		int64_t got = charge_room(h, g, delta);

		if (got < delta) {
			p->sample_short = delta - got;
			group_event(h, p->group, CGM_EV_MAX);
		}
		delta = got;
	} else if (delta < 0) {
		page_counter_uncharge(&g->memory, -delta);
	}
	__atomic_store_n(&p->sampled_pages, p->sampled_pages + delta, __ATOMIC_RELAXED);
	__atomic_store_n(&p->sampled[CGM_STAT_ANON], anon, __ATOMIC_RELAXED);
	if (split) {
		__atomic_store_n(&p->sampled[CGM_STAT_HEAP_FREE], split[0], __ATOMIC_RELAXED);
		__atomic_store_n(&p->sampled[CGM_STAT_MAPPED_ANON], split[1], __ATOMIC_RELAXED);
	} else {
		/*
		 * A reader's refresh knows the anon, not the split: the last one
		 * stays, but never more than the anon it is part of.
		 */
		int64_t hf = p->sampled[CGM_STAT_HEAP_FREE], ma = p->sampled[CGM_STAT_MAPPED_ANON];

		hf = hf < anon ? hf : anon;
		ma = ma < anon - hf ? ma : anon - hf;
		__atomic_store_n(&p->sampled[CGM_STAT_HEAP_FREE], hf, __ATOMIC_RELAXED);
		__atomic_store_n(&p->sampled[CGM_STAT_MAPPED_ANON], ma, __ATOMIC_RELAXED);
		numa_rescale(p, anon);
	}
	__atomic_store_n(&p->sampled_ns, now_ns(), __ATOMIC_RELAXED);
	hier_unlock(&p->lock);
	hier_map_set(h->hdr->sample_map, proc);
	rstat_fold_sampled(h, proc);
	return delta;
}

int64_t acct_sample_set(struct cgm_acct *a, bool charge, int64_t anon, int64_t heap_free,
			int64_t mapped)
{
	struct cgm_proc *p = hier_proc(&a->h, a->proc);
	int64_t split[2] = { heap_free, mapped };

	if (!p)
		return 0;
	if (charge)
		__atomic_or_fetch(&p->sample_flags, CGM_SAMPLE_CHARGE, __ATOMIC_RELAXED);
	else
		__atomic_and_fetch(&p->sample_flags, ~(uint32_t)CGM_SAMPLE_CHARGE, __ATOMIC_RELAXED);
	return sample_apply(&a->h, a->proc, anon - __atomic_load_n(&p->anon_base, __ATOMIC_RELAXED),
			    heap_free < 0 ? NULL : split);
}

void acct_set_anon_base(struct cgm_acct *a, int64_t base)
{
	struct cgm_proc *p = hier_proc(&a->h, a->proc);

	if (p)
		__atomic_store_n(&p->anon_base, base > 0 ? base : 0, __ATOMIC_RELAXED);
}

void acct_refresh_stale(struct cgm_hier *h, uint32_t group, int64_t max_age_ns)
{
	int64_t now = now_ns();
	struct cgm_proc *p;
	uint32_t i;

	for_each_live_proc(h, i, p) {
		int64_t anon;

		if (!group_in_subtree(h, __atomic_load_n(&p->group, __ATOMIC_RELAXED), group) ||
		    now - __atomic_load_n(&p->sampled_ns, __ATOMIC_RELAXED) < max_age_ns)
			continue;
		anon = acct_read_anon(p->pid, -1);
		/* Read first, then checked: a pid reused meanwhile is not taken for ours. */
		if (anon < 0 || acct_proc_gone(p))
			continue;
		sample_apply(h, i, anon - __atomic_load_n(&p->anon_base, __ATOMIC_RELAXED), NULL);
		/*
		 * Found over memory.max (a shortfall) or its group over
		 * memory.high: a process that is not allocating would not see
		 * it at a slow path of its own, so its background reclaim
		 * (spill=1) is woken to make the room now.  An idle python3
		 * that had filled 40 MB under memory.max=20M stayed at 51 MB
		 * resident, shown as exactly 20M, spilling nothing.
		 */
		if (__atomic_load_n(&p->sample_short, __ATOMIC_RELAXED) > 0 ||
		    group_over_high(h, __atomic_load_n(&p->group, __ATOMIC_RELAXED)))
			acct_proc_wake(p);
	}
}

void acct_numa_publish(struct cgm_acct *a, const int64_t bytes[CGM_MAX_NODES])
{
	struct cgm_proc *p = hier_proc(&a->h, a->proc);

	if (!p)
		return;
	for (int k = 0; k < CGM_MAX_NODES; k++)
		__atomic_store_n(&p->sampled[CGM_STAT_NUMA_ANON0 + k], bytes[k] > 0 ? bytes[k] : 0,
				 __ATOMIC_RELAXED);
}

void acct_spill_publish(struct cgm_acct *a, const struct acct_spill_state *st)
{
	struct cgm_proc *p = hier_proc(&a->h, a->proc);

	if (!p)
		return;
	__atomic_store_n(&p->spilled_pages, st->spilled_pages > 0 ? st->spilled_pages : 0,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&p->own_anon, st->own_anon > 0 ? st->own_anon : 0, __ATOMIC_RELAXED);
	__atomic_store_n(&p->sampled[CGM_STAT_ZSWAP], st->zswap > 0 ? st->zswap : 0,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&p->sampled[CGM_STAT_ZSWAPPED], st->zswapped > 0 ? st->zswapped : 0,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&p->sampled[CGM_STAT_SWAP_BYTES], st->swap > 0 ? st->swap : 0,
			 __ATOMIC_RELAXED);
	for (int i = 0; i < CGM_NR_SPILL_COUNTS; i++)
		__atomic_store_n(&p->spill_counts[i], st->counts[i], __ATOMIC_RELAXED);
	__atomic_store_n(&p->spill_throttle_ns, st->throttle_ns, __ATOMIC_RELAXED);
	hier_map_set(a->h.hdr->sample_map, a->proc);
}

int64_t acct_zswap_room(struct cgm_acct *a, bool swap)
{
	struct cgm_proc *p = hier_proc(&a->h, a->proc);
	const int stat = swap ? CGM_STAT_SWAP_BYTES : CGM_STAT_ZSWAP;
	const struct cgm_group *g;
	int64_t room = INT64_MAX, unfolded;
	uint32_t idx;

	if (!p)
		return room;
	/*
	 * What this process published and no flush has folded into its
	 * groups yet: its fold after each publish only tries the flush lock,
	 * and skipped while another process flushed (cgmctl waiting for a
	 * memory.reclaim it wrote), room reckoned on the groups alone let the
	 * pool pass memory.zswap.max=4M by more than a mebibyte in
	 * test_spill_lib.  Read before the groups: a fold in between counts
	 * the part twice, which errs on the side of less room.
	 */
	unfolded = __atomic_load_n(&p->sampled[stat], __ATOMIC_RELAXED) -
		   __atomic_load_n(&p->sampled_folded[stat], __ATOMIC_RELAXED);
	if (unfolded < 0)
		unfolded = 0;
	idx = __atomic_load_n(&p->group, __ATOMIC_RELAXED);
	for_each_ancestor(&a->h, idx, g) {
		int64_t max = __atomic_load_n(swap ? &g->swap_max : &g->zswap_max, __ATOMIC_RELAXED);
		int64_t left = max - unfolded - __atomic_load_n(&g->stat[stat], __ATOMIC_RELAXED);

		if (max != INT64_MAX && left < room)
			room = left > 0 ? left : 0;
	}
	return room;
}

int64_t acct_reclaim_take(struct cgm_acct *a)
{
	struct cgm_proc *p = hier_proc(&a->h, a->proc);

	return p ? __atomic_exchange_n(&p->reclaim_want, 0, __ATOMIC_RELAXED) : 0;
}

/* The lower of @g's memory.high and memory.max: where reclaim must bring it. */
static int64_t group_limit(const struct cgm_group *g)
{
	int64_t high = __atomic_load_n(&g->memory.high, __ATOMIC_RELAXED);
	int64_t max = __atomic_load_n(&g->memory.max, __ATOMIC_RELAXED);

	return high < max ? high : max;
}

/*
 * By how many pages the process's group or an ancestor is over its mark
 * (the limit less a 2^-@shift part of it), at most: negative when every
 * one is below, INT64_MIN without a group.  Inlined into both callers:
 * acct_reclaim_excess_below() lies in shim/warm-text.ld's window, the
 * signed one (a watch's, out of it) must not bring itself in.
 */
static inline __attribute__((always_inline)) int64_t reclaim_margin(struct cgm_acct *a,
								    unsigned int shift)
{
	struct cgm_proc *p = hier_proc(&a->h, a->proc);
	const struct cgm_group *g;
	int64_t most = INT64_MIN;
	uint32_t idx;

	if (!p)
		return INT64_MIN;
	idx = __atomic_load_n(&p->group, __ATOMIC_RELAXED);
	for_each_ancestor(&a->h, idx, g) {
		int64_t limit = group_limit(g);
		int64_t over = page_counter_read(&g->memory) - (limit - (shift ? limit >> shift : 0));

		if (over > most)
			most = over;
	}
	return most;
}

int64_t acct_reclaim_excess_below(struct cgm_acct *a, unsigned int shift)
{
	int64_t over = reclaim_margin(a, shift);

	return over > 0 ? over : 0;
}

int64_t acct_reclaim_margin(struct cgm_acct *a, unsigned int shift)
{
	return reclaim_margin(a, shift);
}

int64_t acct_limit_pages(struct cgm_acct *a)
{
	struct cgm_proc *p = hier_proc(&a->h, a->proc);
	const struct cgm_group *g;
	int64_t lowest = PAGE_COUNTER_MAX;
	uint32_t idx;

	if (!p)
		return lowest;
	idx = __atomic_load_n(&p->group, __ATOMIC_RELAXED);
	for_each_ancestor(&a->h, idx, g) {
		int64_t limit = group_limit(g);

		if (limit < lowest)
			lowest = limit;
	}
	return lowest;
}

int64_t acct_max_lack(struct cgm_acct *a, int64_t need, uint32_t *where)
{
	struct cgm_proc *p = hier_proc(&a->h, a->proc);
	const struct cgm_group *g;
	int64_t lack = 0;
	uint32_t idx;

	if (where)
		*where = CGM_NONE;
	if (!p || need <= 0)
		return 0;
	idx = __atomic_load_n(&p->group, __ATOMIC_RELAXED);
	for_each_ancestor(&a->h, idx, g) {
		int64_t max = __atomic_load_n(&g->memory.max, __ATOMIC_RELAXED);
		int64_t over;

		if (max == PAGE_COUNTER_MAX)
			continue;
		over = page_counter_read(&g->memory) + need - max;
		if (over > 0 && where && *where == CGM_NONE)
			*where = hier_group_index(&a->h, g);
		if (over > lack)
			lack = over;
	}
	return lack;
}

int64_t acct_reclaim_excess(struct cgm_acct *a)
{
	return acct_reclaim_excess_below(a, 0);
}
