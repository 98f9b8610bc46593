/*
 * The OOM policy at memory.max, once reclaim has failed: fail the
 * allocation (oom=enomem), or kill the largest process of the group at
 * its limit -- or, with memory.oom.group, every process of the highest
 * such group (the kernel's mem_cgroup_get_oom_group) -- and retry once
 * their charge is back.
 */
#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgm/log.h"
#include "internal.h"

/* The largest live process in the subtree of @group (OOM victim). */
static uint32_t largest_proc(struct cgm_hier *h, uint32_t group)
{
	uint32_t best = CGM_NONE, i;
	int64_t best_held = -1;
	struct cgm_proc *p;

	for_each_live_proc(h, i, p) {
		if (group_in_subtree(h, p->group, group) && proc_charged_pages(p) > best_held) {
			best_held = proc_charged_pages(p);
			best = i;
		}
	}
	return best;
}

/*
 * The highest ancestor of @victim_group, up to @oom_domain, that has
 * memory.oom.group set: the whole of it goes.
 */
static uint32_t oom_group_of(struct cgm_hier *h, uint32_t victim_group, uint32_t oom_domain)
{
	uint32_t found = CGM_NONE, idx = victim_group;
	struct cgm_group *g;

	for_each_ancestor(h, idx, g) {
		if (g->oom_group)
			found = idx;
		if (idx == oom_domain)
			break;
	}
	return found;
}

/*
 * SIGKILL the process of slot @idx -- only if it is still the process that
 * attached: a slot whose process is gone is never signalled, and a pid
 * reused by another process is not ours to kill.  The signal goes through
 * a pidfd opened before the check, so it reaches the process checked and
 * no other.  Returns true if it was sent.
 */
static bool kill_proc(struct cgm_hier *h, uint32_t idx)
{
	struct cgm_proc *p = hier_proc(h, idx);
	int fd;
	bool sent;

	if (!p || __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != CGM_SLOT_LIVE || p->pid <= 0)
		return false;
	fd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	if (fd < 0 && errno != ENOSYS)
		return false;
	if (acct_proc_gone(p)) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	cgm_log("memory.max of a group reached: OOM-killing pid %d (%s), %lld pages",
		p->pid, p->comm, (long long)proc_charged_pages(p));
	group_event(h, p->group, CGM_EV_OOM_KILL);
	/* Without pidfds (kernels before 5.3), the pid as checked. */
	if (fd < 0)
		return kill(p->pid, SIGKILL) == 0;
	sent = syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0) == 0;
	close(fd);
	return sent;
}

/*
 * Kill the largest process of the group at its limit, or every process of
 * its oom.group.  Returns true if something other than us was killed (its
 * charge comes back once it is gone).
 */
static bool oom_kill(struct cgm_acct *a, uint32_t over)
{
	struct cgm_hier *h = &a->h;
	uint32_t victim = largest_proc(h, over), og, i;
	struct cgm_proc *vp = hier_proc(h, victim), *p;
	bool others = false;

	if (!vp)
		return false;
	og = oom_group_of(h, vp->group, over);
	if (og == CGM_NONE)
		return kill_proc(h, victim) && victim != a->proc;
	group_event(h, og, CGM_EV_OOM_GROUP_KILL);
	for_each_live_proc(h, i, p)
		if (group_in_subtree(h, p->group, og) && i != a->proc && kill_proc(h, i))
			others = true;
	p = hier_proc(h, a->proc);
	if (p && group_in_subtree(h, p->group, og))
		kill_proc(h, a->proc);
	return others;
}

/* Wait briefly for killed processes to go, then return their charges. */
static void reap_killed(struct cgm_hier *h)
{
	for (int i = 0; i < 100; i++) {
		struct timespec ts = { 0, 2000000 };

		if (acct_reclaim_dead(h) > 0)
			return;
		nanosleep(&ts, NULL);
	}
}

bool acct_out_of_memory(struct cgm_acct *a, uint32_t over)
{
	/* The charges of processes that died without detaching come back first. */
	if (acct_reclaim_dead(&a->h) > 0)
		return true;
	if (a->oom_policy != ACCT_OOM_KILL || !oom_kill(a, over))
		return false;
	reap_killed(&a->h);
	return true;
}
