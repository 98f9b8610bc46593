/*
 * memory.pressure: pressure stall information, as the kernel's PSI keeps
 * it for a memory cgroup, from the time the group's threads spend stalled
 * on memory in the allocator -- reclaim and spilling done by allocating
 * threads, memory.high throttling sleeps, waits for spilled pages to come
 * back.
 *
 * A stall is counted in the group of the stalled thread and in each
 * ancestor.  "some" is the time during which at least one thread of the
 * subtree was stalled, "full" the time during which all of its threads
 * were (a thread blocked elsewhere -- in read(2), say -- counts as
 * running: unlike the kernel, cgmalloc cannot see who is idle).  Each
 * group keeps both totals; the averages over 10, 60 and 300 s are the
 * kernel's: every 2 s period, avg = avg * e^(-2/W) + share * (1 - e^(-2/W)).
 * They are brought up to date by whoever reads the file: periods that
 * passed unread share the stall time that accumulated over them evenly.
 */
#include <string.h>

#include "cgm/clock.h"
#include "internal.h"

#define PSI_PERIOD_NS	(2 * 1000000000LL)

/* e^(-2/W) for the windows W = 10, 60 and 300 s: what an average keeps of itself each period. */
static const double psi_decay[CGM_PSI_AVGS] = { 0.8187307531, 0.9672161005, 0.9933555063 };

/* @c to the power @n (n >= 0), without libm; past 4096 periods any average is gone. */
static double decay_pow(double c, int64_t n)
{
	double r = 1;

	if (n > 4096)
		return 0;
	for (; n; n >>= 1, c *= c)
		if (n & 1)
			r *= c;
	return r;
}

static int64_t psi_now(void)
{
	return cgm_now_ns();
}

/* Threads of the processes attached in the subtree of @group. */
static uint32_t subtree_threads(struct cgm_hier *h, uint32_t group)
{
	uint32_t n = 0, t;
	struct cgm_thread_slot *ts;

	/* The slots in use, from their bitmap: a few words, not every slot. */
	for (uint32_t w = 0; w < CGM_MAX_PROCS / 64; w++) {
		for (uint64_t bits = __atomic_load_n(&h->hdr->proc_map[w], __ATOMIC_ACQUIRE); bits;
		     bits &= bits - 1) {
			uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(bits);
			struct cgm_proc *p = hier_proc(h, i);

			if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != CGM_SLOT_LIVE ||
			    !group_in_subtree(h, __atomic_load_n(&p->group, __ATOMIC_RELAXED), group))
				continue;
			for_each_proc_thread(h, p, i, t, ts)
				n++;
		}
	}
	return n;
}

void psi_memstall_enter(struct cgm_hier *h, uint32_t proc)
{
	struct cgm_proc *p = hier_proc(h, proc);
	int64_t now = psi_now();
	struct cgm_group *g;
	uint32_t idx;

	if (!p)
		return;
	__atomic_add_fetch(&p->psi_stalled, 1, __ATOMIC_RELAXED);
	idx = __atomic_load_n(&p->group, __ATOMIC_RELAXED);
	for_each_ancestor(h, idx, g) {
		struct cgm_psi *s = &g->psi;
		uint32_t threads = subtree_threads(h, idx);

		shared_spin_lock(&s->lock);
		if (s->stalled++ == 0)
			s->start[CGM_PSI_SOME] = now;
		if (!s->full_on && s->stalled >= threads) {
			s->full_on = 1;
			s->start[CGM_PSI_FULL] = now;
		}
		shared_spin_unlock(&s->lock);
	}
}

/* Leave one stall of a process in group @group (the process's group, or a dead one's). */
static void leave_group(struct cgm_hier *h, uint32_t group)
{
	int64_t now = psi_now();
	struct cgm_group *g;

	for_each_ancestor(h, group, g) {
		struct cgm_psi *s = &g->psi;

		shared_spin_lock(&s->lock);
		if (s->full_on) {
			s->total[CGM_PSI_FULL] += now - s->start[CGM_PSI_FULL];
			s->full_on = 0;
		}
		if (s->stalled && --s->stalled == 0)
			s->total[CGM_PSI_SOME] += now - s->start[CGM_PSI_SOME];
		shared_spin_unlock(&s->lock);
	}
}

void psi_memstall_leave(struct cgm_hier *h, uint32_t proc)
{
	struct cgm_proc *p = hier_proc(h, proc);

	if (!p || !__atomic_load_n(&p->psi_stalled, __ATOMIC_RELAXED))
		return;
	__atomic_sub_fetch(&p->psi_stalled, 1, __ATOMIC_RELAXED);
	leave_group(h, __atomic_load_n(&p->group, __ATOMIC_RELAXED));
}

void psi_proc_gone(struct cgm_hier *h, struct cgm_proc *p)
{
	uint32_t n = __atomic_exchange_n(&p->psi_stalled, 0, __ATOMIC_RELAXED);

	while (n-- > 0)
		leave_group(h, p->group);
}

/* The totals of @s as of @now, the stalls in progress included. */
static void psi_totals(struct cgm_psi *s, int64_t now, int64_t total[CGM_PSI_KINDS])
{
	shared_spin_lock(&s->lock);
	total[CGM_PSI_SOME] = s->total[CGM_PSI_SOME] + (s->stalled ? now - s->start[CGM_PSI_SOME] : 0);
	total[CGM_PSI_FULL] = s->total[CGM_PSI_FULL] + (s->full_on ? now - s->start[CGM_PSI_FULL] : 0);
	shared_spin_unlock(&s->lock);
}

/* Fold the whole periods since the last update into the averages.  Flush lock held. */
static void psi_update_avgs(struct cgm_psi *s, int64_t now, const int64_t total[CGM_PSI_KINDS])
{
	int64_t periods, span;

	/* Averaged from the group's creation (psi_init); a corrupt time starts again. */
	if (!s->avg_ns || now < s->avg_ns) {
		s->avg_ns = now;
		for (int k = 0; k < CGM_PSI_KINDS; k++)
			s->avg_total[k] = total[k];
		return;
	}
	periods = (now - s->avg_ns) / PSI_PERIOD_NS;
	if (periods <= 0)
		return;
	span = periods * PSI_PERIOD_NS;
	for (int k = 0; k < CGM_PSI_KINDS; k++) {
		/* The stall of those periods: their share of what accumulated since. */
		double grown = (double)(total[k] - s->avg_total[k]) * (double)span /
			       (double)(now - s->avg_ns);
		double share = grown / (double)span;

		share = share < 0 ? 0 : share > 1 ? 1 : share;
		for (int w = 0; w < CGM_PSI_AVGS; w++) {
			double keep = decay_pow(psi_decay[w], periods);

			s->avg[k][w] = s->avg[k][w] * keep + share * 100.0 * (1 - keep);
		}
		s->avg_total[k] += (int64_t)grown;
	}
	s->avg_ns += span;
}

void psi_read(struct cgm_hier *h, uint32_t group, struct cgm_psi_view *v)
{
	struct cgm_group *g = hier_group(h, group);
	int64_t now = psi_now();

	if (!g)
		return;
	psi_totals(&g->psi, now, v->total);
	hier_lock(&h->hdr->flush_lock);
	psi_update_avgs(&g->psi, now, v->total);
	for (int k = 0; k < CGM_PSI_KINDS; k++)
		for (int w = 0; w < CGM_PSI_AVGS; w++)
			v->avg[k][w] = g->psi.avg[k][w];
	hier_unlock(&h->hdr->flush_lock);
}

void psi_totals_now(struct cgm_hier *h, uint32_t group, int64_t now, struct cgm_psi_view *v)
{
	struct cgm_group *g = hier_group(h, group);

	memset(v, 0, sizeof(*v));
	if (g)
		psi_totals(&g->psi, now, v->total);
}
