/*
 * Membership: process slots and thread slots in the hierarchy.
 *
 * A process attaches to one group; all its threads charge it.  On exit it
 * uncharges what it holds.  A process that died without detaching is
 * recognised by its pid and start time and its charge is returned by the
 * next process that attaches, or by cgmctl.  A thread slot outlives its
 * thread's last malloc: it is freed only once the thread is gone, so
 * frees run by late destructors still have a slot to land in.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgm/acct.h"
#include "cgm/hier.h"
#include "cgm/size_class.h"

uint64_t acct_proc_start_time(int pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* comm may contain spaces and parentheses: fields restart after the last ')'. */
	p = strrchr(buf, ')');
	if (!p)
		return 0;
	/* each step moves p to the space before field N: 3 (state) ... 22 (start time) */
	for (int field = 3; field <= 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (p)
		start = strtoull(p + 1, NULL, 10);
	/* A zombie has exited: its memory is gone even if the pid remains. */
	if (strstr(buf, ") Z ") || strstr(buf, ") X "))
		return 0;
	return start;
}

static bool thread_alive(int pid, int tid)
{
	return syscall(SYS_tgkill, pid, tid, 0) == 0 || errno == EPERM;
}

static void free_thread_slot(struct cgm_hier *h, uint32_t idx)
{
	struct cgm_thread_slot *t = hier_thread(h, idx);

	if (!t)
		return;
	memset(t, 0, offsetof(struct cgm_thread_slot, state));
	t->next = CGM_NONE;
	__atomic_fetch_and(&h->hdr->thread_map[idx / 64], ~(1ULL << (idx % 64)), __ATOMIC_RELEASE);
	__atomic_store_n(&t->state, CGM_SLOT_FREE, __ATOMIC_RELEASE);
}

/*
 * Return everything a process slot holds: fold its threads' statistics,
 * uncharge its pages, free its slots.  Caller holds tree_lock.
 */
static void release_proc(struct cgm_hier *h, uint32_t idx)
{
	struct cgm_proc *p = hier_proc(h, idx);
	struct cgm_thread_slot *ts;
	struct cgm_group *g;
	uint32_t t;

	if (!p || p->state == CGM_SLOT_FREE)
		return;
	rstat_flush(h);
	rstat_fold_exit(h, p);
	hier_lock(&p->lock);
	g = hier_group(h, p->group);
	if (g) {
		if (p->held_pages > 0)
			page_counter_uncharge(&g->memory, p->held_pages);
		if (g->nr_procs)
			g->nr_procs--;
	}
	for_each_proc_thread(h, p, idx, t, ts)
		free_thread_slot(h, t);
	p->first_thread = CGM_NONE;
	p->held_pages = 0;
	p->free_pool = 0;
	p->pid = 0;
	__atomic_store_n(&p->state, CGM_SLOT_FREE, __ATOMIC_RELEASE);
	hier_unlock(&p->lock);
	hier_bump_epoch(h);
}

/*
 * A process killed between a page counter update and its held_pages
 * leaves the two apart.  Once dead processes are gone, make every group's
 * usage the sum of what its subtree's processes hold.  Every charge and
 * uncharge happens under its process's lock (or the tree lock), so with
 * all of them held the sums are exact.  Caller holds tree_lock.
 */
static void resync_usage(struct cgm_hier *h)
{
	uint32_t g = CGM_ROOT, steps = 0, i;
	struct cgm_group *grp;
	struct cgm_proc *p;

	for (uint32_t i = 0; i < CGM_MAX_PROCS; i++)
		hier_lock(&h->procs[i].lock);
	/*
	 * Zero the live groups, walking the tree (first child, next sibling,
	 * back up): only live groups are touched, not the whole table, and
	 * a corrupt link cannot make the walk run for ever.
	 */
	while (g != CGM_NONE && steps++ < 3 * CGM_MAX_GROUPS) {
		grp = hier_group(h, g);
		if (!grp)
			break;
		__atomic_store_n(&grp->memory.usage, 0, __ATOMIC_RELAXED);
		if (hier_group(h, grp->first_child)) {
			g = grp->first_child;
			continue;
		}
		while (g != CGM_ROOT && grp && !hier_group(h, grp->next_sibling) &&
		       steps++ < 3 * CGM_MAX_GROUPS) {
			g = grp->parent;
			grp = hier_group(h, g);
		}
		g = (g == CGM_ROOT || !grp) ? CGM_NONE : grp->next_sibling;
	}
	/* Then each live process adds what it holds to its group and ancestors. */
	for_each_live_proc(h, i, p) {
		if (p->held_pages <= 0)
			continue;
		g = p->group;
		for_each_ancestor(h, g, grp)
			__atomic_add_fetch(&grp->memory.usage, p->held_pages, __ATOMIC_RELAXED);
	}
	for (uint32_t i = CGM_MAX_PROCS; i-- > 0;)
		hier_unlock(&h->procs[i].lock);
}

/* Caller holds tree_lock.  @self_pid: a slot with this pid is a stale one of ours (exec). */
static int reclaim_dead_locked(struct cgm_hier *h, int self_pid)
{
	struct cgm_proc *p;
	uint32_t i;
	int n = 0;

	for_each_live_proc(h, i, p) {
		uint64_t start;

		if (p->pid == self_pid) {
			release_proc(h, i);
			n++;
			continue;
		}
		start = acct_proc_start_time(p->pid);
		if (start == 0 || start != p->start_time) {
			release_proc(h, i);
			n++;
		}
	}
	if (n)
		resync_usage(h);
	return n;
}

int acct_reclaim_dead(struct cgm_hier *h)
{
	int n;

	hier_lock(&h->hdr->tree_lock);
	n = reclaim_dead_locked(h, -1);
	hier_unlock(&h->hdr->tree_lock);
	return n;
}

static uint32_t claim_proc_slot(struct cgm_hier *h)
{
	for (uint32_t i = 0; i < CGM_MAX_PROCS; i++)
		if (h->procs[i].state == CGM_SLOT_FREE)
			return i;
	return CGM_NONE;
}

static void read_comm(char *buf, size_t len)
{
	int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n < 0)
		n = 0;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

/* Fill slot @idx for this process in group @group.  Caller holds tree_lock. */
static void setup_proc(struct cgm_hier *h, uint32_t idx, uint32_t group, int64_t held)
{
	struct cgm_proc *p = &h->procs[idx];

	hier_lock(&p->lock);
	p->pid = (int32_t)getpid();
	p->start_time = acct_proc_start_time(p->pid);
	p->group = group;
	p->first_thread = CGM_NONE;
	p->held_pages = held;
	p->free_pool = 0;
	p->untracked_bytes = 0;
	p->live_bytes = 0;
	p->live_objects = 0;
	p->move_to = CGM_NONE;
	read_comm(p->comm, sizeof(p->comm));
	__atomic_store_n(&p->state, CGM_SLOT_LIVE, __ATOMIC_RELEASE);
	hier_unlock(&p->lock);
	h->groups[group].nr_procs++;
}

int acct_attach(struct cgm_acct *a, const char *path)
{
	struct cgm_hier *h = &a->h;
	int64_t group;
	uint32_t idx;

	hier_lock(&h->hdr->tree_lock);
	/* A slot with our own pid is what we left behind before an exec. */
	reclaim_dead_locked(h, (int)getpid());
	group = group_mkdir(h, path);
	if (group < 0) {
		hier_unlock(&h->hdr->tree_lock);
		return (int)group;
	}
	idx = claim_proc_slot(h);
	if (idx == CGM_NONE) {
		hier_unlock(&h->hdr->tree_lock);
		return -ENOSPC;
	}
	setup_proc(h, idx, (uint32_t)group, 0);
	a->proc = idx;
	hier_unlock(&h->hdr->tree_lock);
	return 0;
}

void acct_detach(struct cgm_acct *a)
{
	struct cgm_hier *h = &a->h;
	struct cgm_proc *p = hier_proc(h, a->proc);
	struct cgm_group *g;

	if (!p)
		return;
	rstat_flush(h);
	rstat_fold_exit(h, p);
	acct_harvest(h, a->proc);
	/*
	 * Uncharge what we hold, but keep the slots until the process is
	 * gone: threads still running during exit() may write to their
	 * slots, which must not be handed to another process meanwhile.
	 * Whatever they charge after this is returned when the slot is
	 * reclaimed as dead.
	 */
	hier_lock(&p->lock);
	g = hier_group(h, p->group);
	if (g && p->held_pages > 0)
		page_counter_uncharge(&g->memory, p->held_pages);
	p->held_pages = 0;
	p->free_pool = 0;
	hier_unlock(&p->lock);
	a->proc = CGM_NONE;
	hier_bump_epoch(h);
}

/* Link thread slot @idx into process @proc's list.  Caller holds the proc lock. */
static void link_thread(struct cgm_hier *h, struct cgm_proc *p, uint32_t proc, uint32_t idx)
{
	struct cgm_thread_slot *t = &h->threads[idx];

	t->next = p->first_thread;
	/* A flusher may already see the slot (its bit is set): publish the owner last. */
	__atomic_store_n(&t->proc, proc, __ATOMIC_RELEASE);
	p->first_thread = idx;
}

static uint32_t claim_thread_slot(struct cgm_hier *h, int tid)
{
	for (uint32_t i = 0; i < CGM_MAX_THREADS; i++) {
		struct cgm_thread_slot *t = &h->threads[i];
		uint32_t expect = CGM_SLOT_FREE;

		if (__atomic_load_n(&t->state, __ATOMIC_RELAXED) != CGM_SLOT_FREE)
			continue;
		if (!__atomic_compare_exchange_n(&t->state, &expect, CGM_SLOT_LIVE, false,
						 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			continue;
		/* Counters start at zero; so do the flusher's snapshots. */
		memset(t, 0, offsetof(struct cgm_thread_slot, state));
		memset(&t->snap_frees, 0, sizeof(*t) - offsetof(struct cgm_thread_slot, snap_frees));
		t->tid = tid;
		/* No owner until link_thread(): a flush skips the slot till then. */
		__atomic_store_n(&t->proc, CGM_NONE, __ATOMIC_RELAXED);
		__atomic_fetch_or(&h->hdr->thread_map[i / 64], 1ULL << (i % 64), __ATOMIC_RELEASE);
		return i;
	}
	return CGM_NONE;
}

uint32_t acct_thread_register(struct cgm_acct *a, int tid)
{
	struct cgm_hier *h = &a->h;
	struct cgm_proc *p = hier_proc(h, a->proc);
	uint32_t idx;

	if (!p)
		return CGM_NONE;
	idx = claim_thread_slot(h, tid);
	if (idx == CGM_NONE) {
		/* Slots of exited threads may be waiting for reclaim. */
		acct_harvest(h, a->proc);
		idx = claim_thread_slot(h, tid);
		if (idx == CGM_NONE)
			return CGM_NONE;
	}
	hier_lock(&p->lock);
	link_thread(h, p, a->proc, idx);
	hier_unlock(&p->lock);
	return idx;
}

void acct_thread_exit(struct cgm_acct *a, uint32_t slot)
{
	struct cgm_hier *h = &a->h;
	struct cgm_thread_slot *t = hier_thread(h, slot);
	struct cgm_proc *p = hier_proc(h, a->proc);

	if (!t || !p)
		return;
	hier_lock(&p->lock);
	/* The unused precharge goes back with the next harvest. */
	acct_slot_unprecharge(t);
	if (t->stock > 0) {
		p->free_pool += t->stock;
		t->stock = 0;
	}
	__atomic_store_n(&t->state, CGM_SLOT_EXITING, __ATOMIC_RELEASE);
	hier_unlock(&p->lock);
	acct_harvest(h, a->proc);
}

/* Have harvest and flush both seen every small free of @t? */
static bool small_frees_settled(const struct cgm_thread_slot *t)
{
	for (unsigned int b = 0; b < CGM_NR_BINS; b++) {
		uint64_t n = t->freed_small[cgm_bin_step[b]];

		if (n != t->harvested_small[b] || n != t->snap_freed_small[b])
			return false;
	}
	return true;
}

/*
 * Unlink and free the slots of threads that have exited, after their last
 * frees were harvested and their statistics flushed.  Caller holds the
 * flush lock and the proc lock.
 */
void acct_reap_threads(struct cgm_hier *h, uint32_t proc)
{
	struct cgm_proc *p = hier_proc(h, proc);
	struct cgm_thread_slot *t;
	uint32_t idx, prev = CGM_NONE;

	if (!p)
		return;
	for_each_proc_thread(h, p, proc, idx, t) {
		if (t->state != CGM_SLOT_EXITING || thread_alive(p->pid, t->tid) ||
		    t->freed_bytes != t->harvested_freed_bytes ||
		    t->frees != t->snap_frees || !small_frees_settled(t)) {
			prev = idx;
			continue;
		}
		/* Charged by mallocs after the exit hook ran: give it back. */
		acct_slot_unprecharge(t);
		if (t->stock > 0)
			p->free_pool += t->stock;
		if (prev == CGM_NONE)
			p->first_thread = t->next;
		else
			h->threads[prev].next = t->next;
		free_thread_slot(h, idx);
	}
}

int acct_fork_child(struct cgm_acct *a, uint32_t *thread_slot)
{
	struct cgm_hier *h = &a->h;
	struct cgm_proc *parent = hier_proc(h, a->proc);
	struct cgm_thread_slot *ts;
	struct cgm_group *g;
	int64_t held, others = 0, inherited_bytes, inherited_objects;
	uint32_t idx, group, t;

	if (!parent)
		return -EINVAL;
	/* The parent's live bytes as of now: the child's statistics start there. */
	rstat_flush(h);
	inherited_bytes = parent->live_bytes;
	inherited_objects = parent->live_objects;
	hier_lock(&h->hdr->tree_lock);
	group = parent->group;
	g = hier_group(h, group);
	/*
	 * The child inherits a copy of the parent's heap: charge what the
	 * parent holds, less what the parent's threads had precharged (their
	 * slots stay the parent's; the child's thread starts with none).
	 */
	for_each_proc_thread(h, parent, a->proc, t, ts)
		others += acct_slot_precharge(ts);
	held = parent->held_pages - others / CGM_PAGE_SIZE;
	if (held < 0)
		held = 0;
	idx = claim_proc_slot(h);
	if (idx == CGM_NONE || !g) {
		hier_unlock(&h->hdr->tree_lock);
		return -ENOSPC;
	}
	if (held)
		page_counter_charge(&g->memory, held);
	setup_proc(h, idx, group, held);
	a->proc = idx;
	hier_unlock(&h->hdr->tree_lock);

	*thread_slot = acct_thread_register(a, (int)syscall(SYS_gettid));
	/* The inherited heap is the child's live heap from the start. */
	if (inherited_bytes > 0)
		rstat_inherit(h, &h->procs[idx], inherited_bytes,
			      inherited_objects > 0 ? inherited_objects : 0);
	return 0;
}
