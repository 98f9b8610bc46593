/*
 * Membership: process slots and thread slots in the hierarchy.
 *
 * A process attaches to one group; all its threads charge it.  On exit it
 * uncharges what it holds and its slot becomes EXITING, to be freed once
 * the process is gone.  A process that died without detaching is
 * recognised by its pid and the boot time of its attach (a process with
 * that pid that started later is another one); its charge is returned
 * when a slot is needed, when a limit refuses a charge, and by readers
 * and cgmctl.  A thread slot outlives its thread's last malloc: it is
 * freed only once the thread is gone, so frees run by late destructors
 * still have a slot to land in; the process's next new thread frees it.
 *
 * A forked child is charged nothing for the heap it inherits (the kernel
 * charges nothing at fork: the pages are shared copy-on-write and stay
 * charged to whoever faulted them in).  It attaches to its parent's group
 * lazily, at its first allocation that needs a slot; its frees of
 * inherited blocks find nothing of its own to uncharge and are counted
 * as untracked (harvest.c), and its live bytes never go below zero
 * (rstat.c).  What the kernel would add -- the inherited pages the child
 * writes, which copy-on-write gives it -- is not seen by an allocator.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgm/acct.h"
#include "cgm/hier.h"
#include "cgm/size.h"
#include "cgm/size_class.h"

/* CLOCK_BOOTTIME in ns: the clock of /proc/<pid>/stat's start time. */
static uint64_t boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

/*
 * The state and start time (ns since boot, rounded down to a clock tick)
 * of process @pid from /proc/<pid>/stat.  -ENOENT if there is none.
 */
static int read_proc_stat(int pid, char *state, uint64_t *start_ns)
{
	char path[64], buf[1024], *p;
	uint64_t ticks;
	long hz = sysconf(_SC_CLK_TCK);
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	/* comm may contain spaces and parentheses: fields restart after the last ')'. */
	p = NULL;
	for (char *q = buf; *q; q++)
		if (*q == ')')
			p = q;
	if (!p || !p[1] || !p[2])
		return -EIO;
	*state = p[2];
	/* each step moves p to the space before field N: 3 (state) ... 22 (start time) */
	for (int field = 3; field <= 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p || hz <= 0)
		return -EIO;
	ticks = cgm_parse_decimal(p + 1, NULL);
	*start_ns = (uint64_t)ticks * (1000000000 / (uint64_t)hz);
	return 0;
}

void acct_proc_wake(struct cgm_proc *p)
{
	__atomic_add_fetch(&p->wake, 1, __ATOMIC_RELEASE);
	/* Not FUTEX_PRIVATE: the waiter is in another process, on the shared file. */
	syscall(SYS_futex, &p->wake, FUTEX_WAKE, 1, NULL, NULL, 0);
}

bool acct_proc_gone(const struct cgm_proc *p)
{
	int pid = __atomic_load_n(&p->pid, __ATOMIC_RELAXED);
	uint64_t start_ns;
	char state;
	int err;

	if (pid <= 0 || (kill(pid, 0) < 0 && errno == ESRCH))
		return true;
	err = read_proc_stat(pid, &state, &start_ns);
	if (err == -ENOENT || err == -ESRCH)
		return true;
	if (err)
		return false;		/* cannot tell: keep it */
	/* A zombie has exited: its memory is gone even if the pid remains. */
	if (state == 'Z' || state == 'X')
		return true;
	/*
	 * Our process started before it attached; a process that started
	 * after that has reused the pid.  (Only a reuse within the same clock
	 * tick as the attach could pass for ours.)
	 */
	return start_ns > __atomic_load_n(&p->attach_ns, __ATOMIC_RELAXED);
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
	hier_zero(t, offsetof(struct cgm_thread_slot, state));
	t->next = CGM_NONE;
	hier_map_clear(h->hdr->flush_map, idx);
	hier_map_clear(h->hdr->thread_map, idx);
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
	rstat_fold_exit(h, p);
	hier_lock(&p->lock);
	g = hier_group(h, p->group);
	if (g) {
		page_counter_uncharge(&g->memory, proc_charged_pages(p));
		/* A detached (EXITING) process left the count when it detached. */
		if (p->state == CGM_SLOT_LIVE && g->nr_procs)
			g->nr_procs--;
	}
	for_each_proc_thread(h, p, idx, t, ts)
		free_thread_slot(h, t);
	p->first_thread = CGM_NONE;
	p->held_pages = 0;
	p->sampled_pages = 0;
	p->free_pool = 0;
	p->pid = 0;
	__atomic_store_n(&h->hdr->proc_pid[idx], 0, __ATOMIC_RELAXED);
	__atomic_store_n(&p->state, CGM_SLOT_FREE, __ATOMIC_RELEASE);
	hier_unlock(&p->lock);
	hier_map_clear(h->hdr->exiting_map, idx);
	hier_map_clear(h->hdr->proc_map, idx);
	if (g)
		group_reap_transient(h, p->group);
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
		int64_t pages = proc_charged_pages(p);

		if (pages <= 0)
			continue;
		g = p->group;
		for_each_ancestor(h, g, grp)
			__atomic_add_fetch(&grp->memory.usage, pages, __ATOMIC_RELAXED);
	}
	for (uint32_t i = CGM_MAX_PROCS; i-- > 0;)
		hier_unlock(&h->procs[i].lock);
}

/* Is slot @p in use by some process, attached or exiting? */
static bool proc_in_use(const struct cgm_proc *p)
{
	return __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != CGM_SLOT_FREE;
}

/* Free the slots of processes that are gone.  Caller holds tree_lock. */
static int reclaim_dead_locked(struct cgm_hier *h)
{
	int n = 0;

	for (uint32_t i = 0; i < CGM_MAX_PROCS; i++) {
		struct cgm_proc *p = &h->procs[i];

		if (proc_in_use(p) && acct_proc_gone(p)) {
			psi_proc_gone(h, p);
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
	n = reclaim_dead_locked(h);
	hier_unlock(&h->hdr->tree_lock);
	return n;
}

/*
 * A free process slot: a free one, else one whose process detached and is
 * gone, else -- after the slots of every dead process are freed -- any.
 * Caller holds tree_lock.
 */
static uint32_t claim_proc_slot(struct cgm_hier *h)
{
	static uint32_t cursor;
	struct cgm_hier_header *hd = h->hdr;

	/* Both maps are written below: one write fault each, not a read and a write one. */
	hier_prefault(h, hd->exiting_map, sizeof(hd->exiting_map));
	hier_prefault(h, hd->proc_map, sizeof(hd->proc_map));
	/*
	 * Each attach also frees the slot of one process that detached and
	 * is gone, going round the table: processes that come and go (a
	 * shell's children) give their thread slots back as fast as new ones
	 * take them, for the price of a kill(pid, 0).
	 */
	for (uint32_t n = 0; n < CGM_MAX_PROCS / 64 + 1; n++) {
		uint32_t w = (cursor / 64 + n) % (CGM_MAX_PROCS / 64);
		uint64_t bits = __atomic_load_n(&hd->exiting_map[w], __ATOMIC_ACQUIRE);
		struct cgm_proc *p;
		uint32_t i;

		if (n == 0)
			bits &= ~0ULL << (cursor % 64);
		if (!bits)
			continue;
		i = w * 64 + (uint32_t)__builtin_ctzll(bits);
		cursor = i + 1;
		p = hier_proc(h, i);
		if (p->state != CGM_SLOT_EXITING)
			hier_map_clear(hd->exiting_map, i);
		else if (acct_proc_gone(p))
			release_proc(h, i);
		break;
	}
	for (int round = 0; round < 2; round++) {
		for (uint32_t w = 0; w < CGM_MAX_PROCS / 64; w++) {
			uint64_t free = ~__atomic_load_n(&hd->proc_map[w], __ATOMIC_ACQUIRE);

			for (; free; free &= free - 1) {
				uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(free);

				if (!proc_in_use(hier_proc(h, i)))
					return i;
				hier_map_set(hd->proc_map, i);	/* the map was wrong */
			}
		}
		/* Full: free what dead processes hold, and try once more. */
		if (round == 0 && reclaim_dead_locked(h) == 0)
			break;
	}
	return CGM_NONE;
}

/*
 * Slots with our own pid (@pid) are what this process left behind before an
 * exec (the old image ran no exit handlers, so the slot is attached, not
 * exiting).  Only attached slots count, and they are found by the pids
 * in the header: reading each slot would map a page of the table per
 * seven slots into every new process (160 KiB of its RSS with 280
 * exiting ones; 72 KiB with 128 attached slots that killed processes
 * left).  Caller holds tree_lock.
 */
static void release_own_stale(struct cgm_hier *h, int32_t pid)
{
	for (uint32_t w = 0; w < CGM_MAX_PROCS / 64; w++) {
		uint64_t used = __atomic_load_n(&h->hdr->proc_map[w], __ATOMIC_ACQUIRE) &
				~__atomic_load_n(&h->hdr->exiting_map[w], __ATOMIC_ACQUIRE);

		for (; used; used &= used - 1) {
			uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(used);
			const struct cgm_proc *p;

			if (__atomic_load_n(&h->hdr->proc_pid[i], __ATOMIC_RELAXED) != pid)
				continue;
			p = hier_proc(h, i);
			if (proc_in_use(p) && p->pid == pid)
				release_proc(h, i);
		}
	}
}

/* Fill slot @idx for this process (@pid) in group @group.  Caller holds tree_lock. */
static void setup_proc(struct cgm_hier *h, uint32_t idx, uint32_t group, int32_t pid)
{
	struct cgm_proc *p = &h->procs[idx];
	char comm[16] = "";

	/* The calling thread's name, which is the program's for a new process. */
	prctl(PR_GET_NAME, comm, 0, 0, 0);
	/* Made robust and shared at the slot's first claim (struct cgm_proc). */
	hier_proc_lock_ready(p);
	hier_lock_claimed(h, &p->lock, "a process slot");
	p->pid = pid;
	__atomic_store_n(&h->hdr->proc_pid[idx], p->pid, __ATOMIC_RELAXED);
	p->attach_ns = boottime_ns();
	p->group = group;
	p->first_thread = CGM_NONE;
	p->held_pages = 0;
	p->free_pool = 0;
	p->untracked_bytes = 0;
	p->live_bytes = 0;
	p->heap_live = 0;
	p->sampled_pages = 0;
	p->anon_base = 0;
	p->sample_short = 0;
	p->sample_flags = 0;
	memset(p->sampled, 0, sizeof(p->sampled));
	memset(p->sampled_folded, 0, sizeof(p->sampled_folded));
	p->sampled_ns = 0;
	p->spilled_pages = 0;
	p->reclaim_want = 0;
	p->psi_stalled = 0;
	memset(p->spill_counts, 0, sizeof(p->spill_counts));
	memset(p->spill_folded, 0, sizeof(p->spill_folded));
	p->spill_throttle_ns = p->spill_throttle_folded = 0;
	p->own_anon = 0;
	p->reclaim_asked = p->reclaim_done = p->reclaim_answering = 0;
	p->wake = 0;
	p->move_to = CGM_NONE;
	memcpy(p->comm, comm, sizeof(p->comm));
	p->comm[sizeof(p->comm) - 1] = '\0';
	__atomic_store_n(&p->state, CGM_SLOT_LIVE, __ATOMIC_RELEASE);
	hier_unlock(&p->lock);
	hier_map_set(h->hdr->proc_map, idx);
	hier_map_clear(h->hdr->exiting_map, idx);
	h->groups[group].nr_procs++;
}

/* Attach this process (@pid) to existing group @group.  Caller holds tree_lock. */
static int attach_locked(struct cgm_acct *a, uint32_t group, int32_t pid)
{
	struct cgm_hier *h = &a->h;
	uint32_t idx;

	if (!hier_group(h, group))
		return -ENOENT;
	idx = claim_proc_slot(h);
	if (idx == CGM_NONE)
		return -ENOSPC;
	setup_proc(h, idx, group, pid);
	a->proc = idx;
	a->others_quiet_until = 0;
	return 0;
}

/* Attach to the group at @path, created with @flags if missing. */
static int attach_path(struct cgm_acct *a, const char *path, uint32_t flags)
{
	struct cgm_hier *h = &a->h;
	/* One getpid() for both: no system call at start-up more than needed. */
	int32_t pid = (int32_t)getpid();
	int64_t group;
	int err;

	hier_lock(&h->hdr->tree_lock);
	release_own_stale(h, pid);
	group = group_create(h, path, flags);
	err = group < 0 ? (int)group : attach_locked(a, (uint32_t)group, pid);
	/* A scope this call made but could not enter goes again. */
	if (err && group >= 0)
		group_reap_transient(h, (uint32_t)group);
	hier_unlock(&h->hdr->tree_lock);
	return err;
}

int acct_attach(struct cgm_acct *a, const char *path)
{
	return attach_path(a, path, 0);
}

int acct_attach_scope(struct cgm_acct *a, const char *path)
{
	return attach_path(a, path, CGM_GROUP_TRANSIENT);
}

int acct_attach_group(struct cgm_acct *a, uint32_t group)
{
	int err;

	hier_lock(&a->h.hdr->tree_lock);
	err = attach_locked(a, group, (int32_t)getpid());
	hier_unlock(&a->h.hdr->tree_lock);
	return err;
}

void acct_detach(struct cgm_acct *a)
{
	struct cgm_hier *h = &a->h;
	struct cgm_proc *p = hier_proc(h, a->proc);
	struct cgm_group *g;

	if (!p)
		return;
	rstat_fold_exit(h, p);
	acct_harvest(h, a->proc);
	/*
	 * Uncharge what we hold, but keep the slots until the process is
	 * gone: threads still running during exit() may write to their
	 * slots, which must not be handed to another process meanwhile.
	 * Whatever they charge after this is returned when the slot is
	 * reclaimed as dead.
	 */
	hier_lock(&h->hdr->tree_lock);
	hier_lock(&p->lock);
	g = hier_group(h, p->group);
	if (g)
		page_counter_uncharge(&g->memory, proc_charged_pages(p));
	if (g && p->state == CGM_SLOT_LIVE && g->nr_procs)
		g->nr_procs--;
	p->held_pages = 0;
	p->sampled_pages = 0;
	p->free_pool = 0;
	__atomic_store_n(&p->state, CGM_SLOT_EXITING, __ATOMIC_RELEASE);
	hier_map_set(h->hdr->exiting_map, a->proc);
	if (g)
		group_reap_transient(h, p->group);
	/*
	 * The slot no longer belongs to a group: the group may go (a scope
	 * does, now, when this was its last process), and its index be
	 * taken by a new one, which the slot's release must not touch.
	 */
	__atomic_store_n(&p->group, CGM_NONE, __ATOMIC_RELEASE);
	hier_unlock(&p->lock);
	hier_unlock(&h->hdr->tree_lock);
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

/* Take slot @i for thread @tid if it is free. */
static bool take_thread_slot(struct cgm_hier *h, uint32_t i, int tid)
{
	struct cgm_thread_slot *t = &h->threads[i];
	uint32_t expect = CGM_SLOT_FREE;

	if (!__atomic_compare_exchange_n(&t->state, &expect, CGM_SLOT_LIVE, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return false;
	/* Counters start at zero; so do the flusher's snapshots. */
	hier_zero(t, offsetof(struct cgm_thread_slot, state));
	hier_zero(&t->snap_frees, sizeof(*t) - offsetof(struct cgm_thread_slot, snap_frees));
	/*
	 * A new slot has nothing precharged: the drains asked so far are not
	 * its to answer.  (From zero, every first refill of every thread
	 * drained in a hierarchy where some group had ever hit memory.max --
	 * the default one, shared by all of a user's programs.)
	 */
	t->drained_gen = __atomic_load_n(&h->hdr->drain_gen, __ATOMIC_ACQUIRE);
	t->tid = tid;
	/* No owner until link_thread(): a flush skips the slot till then. */
	__atomic_store_n(&t->proc, CGM_NONE, __ATOMIC_RELAXED);
	hier_map_set(h->hdr->thread_map, i);
	hier_map_set(h->hdr->flush_map, i);
	return true;
}

/* A free thread slot, found through the map of slots in use. */
static uint32_t claim_thread_slot(struct cgm_hier *h, int tid)
{
	for (uint32_t w = 0; w < CGM_MAX_THREADS / 64; w++) {
		uint64_t free = ~__atomic_load_n(&h->hdr->thread_map[w], __ATOMIC_ACQUIRE);

		for (; free; free &= free - 1) {
			uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(free);

			if (take_thread_slot(h, i, tid))
				return i;
		}
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
	/* The slots of this process's threads that are gone come back first. */
	rstat_reap_exited(h, a->proc);
	idx = claim_thread_slot(h, tid);
	if (idx == CGM_NONE) {
		/* Other processes' exited threads, and dead processes' slots. */
		rstat_flush(h);
		acct_reclaim_dead(h);
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
	/* Where the next thread's refills start (cgm_acct.first_refill). */
	for (unsigned int b = 0; b < CGM_NR_BINS; b++)
		if (t->next_refill[b])
			__atomic_store_n(&a->first_refill[b], t->next_refill[b], __ATOMIC_RELAXED);
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

/*
 * Has flush seen every free of @t that went back into the stock, not to
 * harvest (medium blocks, and small ones on the branch-free free)?
 */
static bool stocked_frees_settled(const struct cgm_thread_slot *t)
{
	for (unsigned int b = 0; b < CGM_NR_BINS; b++)
		if (t->stocked_small[b] != t->snap_stocked_small[b])
			return false;
	for (unsigned int m = 0; m < CGM_NR_MEDIUM_BINS; m++)
		if (t->medium_frees[m] != t->snap_medium_frees[m])
			return false;
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
		/* Atomic: a thread claiming a slot may try it from a stale map. */
		if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != CGM_SLOT_EXITING ||
		    thread_alive(p->pid, t->tid) ||
		    t->freed_bytes != t->harvested_freed_bytes ||
		    t->frees != t->snap_frees || !stocked_frees_settled(t)) {
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
