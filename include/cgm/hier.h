/*
 * The hierarchy file: one mapping shared by every attached process that
 * holds the group tree, the page counters, statistics, events, one slot
 * per attached process and one per thread.
 *
 * The layout is position independent (indices and offsets, no pointers),
 * starts with a magic, a layout version and its own size, and every index
 * read from it is bounds-checked before use: a foreign, truncated or
 * corrupt file is refused (accounting/hier.c).
 *
 *	header | groups[max_groups] | procs[max_procs] | threads[max_threads]
 *
 * Concurrency: tree changes (mkdir, rmdir, attach, detach, move, limits)
 * take the header's robust process-shared mutex; charging is lockless
 * (page_counter); a thread's slot is written only by its thread on the
 * fast path and read by flushers, which serialise on the flush mutex.
 */
#ifndef CGM_HIER_H
#define CGM_HIER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgm/clock.h"
#include "cgm/compiler.h"
#include "cgm/page_counter.h"
#include "cgm/size_class.h"

#define CGM_HIER_MAGIC		0x3152454948474d43ULL	/* "CGMHIER1" */
#define CGM_HIER_VERSION	24
#define CGM_NONE		UINT32_MAX
#define CGM_ROOT		0
#define CGM_NAME_MAX		64		/* a path component, NUL included */
#define CGM_PATH_MAX		1024

#define CGM_MAX_GROUPS		16384
#define CGM_MAX_PROCS		1024
#define CGM_MAX_THREADS		4096

/* memory.events, in the kernel's order. */
enum cgm_event {
	CGM_EV_LOW,
	CGM_EV_HIGH,
	CGM_EV_MAX,
	CGM_EV_OOM,
	CGM_EV_OOM_KILL,
	CGM_EV_OOM_GROUP_KILL,
	CGM_EV_SOCK_THROTTLED,	/* the kernel's: socket memory, which cgmalloc does not charge (0) */
	CGM_NR_EVENTS
};

/* NUMA nodes whose anon memory.numa_stat shows (nodes past it count in the last). */
#define CGM_MAX_NODES		8

/* Size histogram: bucket b counts blocks of (2^(b+2), 2^(b+3)] bytes. */
#define CGM_HIST_BUCKETS	30

/*
 * memory.stat counters kept per group.
 *
 * The first CGM_NR_SAMPLED are levels that each process samples from its
 * own mappings (shim/resident.c) and publishes in its slot; a flush folds
 * the change into its group:
 *	anon		resident private anonymous memory, as the kernel counts
 *			it: the heap's resident pages and the program's own
 *			mappings' (thread stacks and data segments excepted)
 *	heap_free	resident heap pages beyond the live bytes: what the
 *			allocator keeps after frees (reclaimable)
 *	mapped_anon	resident pages of the program's own private anonymous
 *			mmap/mremap/brk mappings
 *	zswap		bytes of the process's compressed pool (spill=1), which
 *			the kernel charges to the memcg as zswap
 *	zswapped	bytes of the pages spilled into it
 *	swap		bytes of them written back to its backing file
 *	numa_anon	anon, per NUMA node (memory.numa_stat)
 * heap_live is the live heap bytes of the group's processes: allocations
 * less frees as they are flushed, plus what a forked child inherits, less
 * what a leaving process still held; it moves with a process that moves.
 * The rest are cgmalloc's own counts.
 */
enum cgm_stat {
	CGM_STAT_ANON,
	CGM_STAT_HEAP_FREE,
	CGM_STAT_MAPPED_ANON,
	CGM_STAT_ZSWAP,
	CGM_STAT_ZSWAPPED,
	CGM_STAT_SWAP_BYTES,	/* "swap": bytes written back to the backing file */
	/* anon per NUMA node (memory.numa_stat, not memory.stat) */
	CGM_STAT_NUMA_ANON0,
	CGM_NR_SAMPLED = CGM_STAT_NUMA_ANON0 + CGM_MAX_NODES,
	CGM_STAT_HEAP_LIVE = CGM_NR_SAMPLED,
	CGM_STAT_ALLOCS,
	CGM_STAT_FREES,
	CGM_STAT_ALLOC_BYTES,
	CGM_STAT_FREE_BYTES,
	CGM_STAT_THROTTLE_NS,
	/*
	 * The spiller's event counts, in the kernel's names; each process
	 * publishes its totals (cgm_proc.spill_counts) and a flush folds what
	 * is new into its group, where they stay when it exits or moves.
	 */
	CGM_STAT_SPILL0,
	CGM_STAT_ZSWPOUT = CGM_STAT_SPILL0,	/* pages spilled into the pool */
	CGM_STAT_ZSWPIN,		/* pages brought back from it */
	CGM_STAT_ZSWPWB,		/* pages written back to the backing file */
	CGM_STAT_PSWPIN,		/* pages read back from the backing file */
	CGM_STAT_PSWPOUT,		/* = zswpwb: the backing file is the swap device */
	CGM_STAT_WORKINGSET_REFAULT_ANON,	/* refaults within the working set (hot) */
	CGM_STAT_PGSCAN,		/* pages looked at by reclaim */
	CGM_STAT_PGSTEAL,		/* pages reclaimed: spilled or purged */
	/*
	 * The same by whose thread: the library's own (the background
	 * reclaim, the handler answering a memory.reclaim), as the kernel's
	 * kswapd; the program's (at an allocation, a limit write), as its
	 * direct reclaim.
	 */
	CGM_STAT_PGSCAN_KSWAPD,
	CGM_STAT_PGSCAN_DIRECT,
	CGM_STAT_PGSTEAL_KSWAPD,
	CGM_STAT_PGSTEAL_DIRECT,
	CGM_STAT_HIST0,
	CGM_NR_SPILL_COUNTS = CGM_STAT_HIST0 - CGM_STAT_SPILL0,
	CGM_NR_STATS = CGM_STAT_HIST0 + CGM_HIST_BUCKETS,
};

/* Small allocations: up to 1 KiB, counted per bin (size_class.h). */
#define CGM_SMALL_MAX		1024

/*
 * A slot's state.  EXITING: a thread whose exit hook ran, or a process
 * that detached; the slot is freed once the thread or process is gone
 * (until then late frees may still land in it).
 */
enum cgm_slot_state { CGM_SLOT_FREE, CGM_SLOT_LIVE, CGM_SLOT_EXITING };

/* Group flags (cgm_group.flags). */
enum cgm_group_flags {
	/*
	 * Made for one invocation's CGMALLOC_CONF limits (no group= named):
	 * removed when its last process is gone.
	 */
	CGM_GROUP_TRANSIENT = 1u << 0,
	/* Delegated: its processes may manage the groups below it. */
	CGM_GROUP_DELEGATED = 1u << 1,
};

/* memory.pressure: stall time of a group's subtree (accounting/psi.c). */
enum { CGM_PSI_SOME, CGM_PSI_FULL, CGM_PSI_KINDS };
#define CGM_PSI_AVGS	3		/* avg10, avg60, avg300 */

struct cgm_psi {
	uint32_t lock;			/* spin flag over the transitions */
	uint32_t stalled;		/* threads of the subtree stalled now */
	uint32_t full_on;		/* all of them are */
	uint32_t pad;
	int64_t start[CGM_PSI_KINDS];	/* CLOCK_MONOTONIC ns the state began */
	int64_t total[CGM_PSI_KINDS];	/* ns, the states that ended */
	/* The averages, percent, and where they stand (flush lock). */
	double avg[CGM_PSI_KINDS][CGM_PSI_AVGS];
	int64_t avg_ns;
	int64_t avg_total[CGM_PSI_KINDS];
};

/* vmpressure levels, as cgroup v1 names them. */
enum { CGM_VMP_LOW, CGM_VMP_MEDIUM, CGM_VMP_CRITICAL, CGM_VMP_LEVELS };

/* A new group's pressure averages start now. */
static inline void psi_init(struct cgm_psi *s)
{
	s->avg_ns = cgm_now_ns();
}

struct cgm_group {
	uint32_t state;			/* enum cgm_slot_state */
	uint32_t parent;
	uint32_t first_child;
	uint32_t next_sibling;
	uint32_t nr_children;
	uint32_t nr_procs;		/* attached processes, this group only */
	uint32_t depth;
	uint32_t oom_group;		/* memory.oom.group */
	uint32_t flags;			/* enum cgm_group_flags */
	char name[CGM_NAME_MAX];
	struct page_counter memory;
	int64_t events[CGM_NR_EVENTS];		/* hierarchical */
	int64_t events_local[CGM_NR_EVENTS];
	int64_t stat[CGM_NR_STATS];		/* hierarchical, as of the last flush */
	int64_t stat_local[CGM_NR_STATS];
	int64_t throttle_until_ns;	/* high breach: penalty in progress */
	/* memory.zswap.max and memory.swap.max, bytes (INT64_MAX: max). */
	int64_t zswap_max, swap_max;
	uint32_t zswap_writeback;	/* memory.zswap.writeback */
	uint32_t pad;
	struct cgm_psi psi;
	/*
	 * vmpressure (cgroup v1's memory.pressure_level): listeners of the
	 * group, the reclaim window (pages looked at and reclaimed) and the
	 * events raised per level, which listeners poll.
	 */
	uint32_t vmp_listeners;
	uint32_t vmp_lock;
	int64_t vmp_scanned, vmp_reclaimed;
	uint64_t vmp_events[CGM_VMP_LEVELS];
} __attribute__((aligned(64)));

struct cgm_proc {
	uint32_t state;			/* enum cgm_slot_state */
	int32_t pid;
	uint64_t attach_ns;		/* CLOCK_BOOTTIME at attach: pid reuse guard */
	uint32_t group;
	uint32_t first_thread;		/* list of thread slots */
	int64_t held_pages;		/* charged to the group by this process's stocks */
	/*
	 * Charged to the group for the anonymous memory a residency sample
	 * found beyond the byte counts (charge=resident): pages of large
	 * blocks, of the program's own mappings, of what the allocator keeps,
	 * of stacks.  Set under the lock by the process's samples, and by
	 * readers that refresh a stale one (accounting/sample.c).
	 */
	int64_t sampled_pages;
	int64_t anon_base;		/* anon it inherited at fork: not its own (bytes) */
	/*
	 * Pages the last sample found in use that memory.max had no room for:
	 * the group is at its limit and this process over it, so its next
	 * allocation reclaims, then fails or applies the OOM policy.
	 */
	int64_t sample_short;
	uint32_t sample_flags;		/* enum cgm_sample_flags */
	uint32_t pad2;
	int64_t free_pool;		/* harvested freed bytes not yet uncharged */
	int64_t untracked_bytes;	/* frees of memory it was never charged (before attach, or inherited) */
	int64_t live_bytes;		/* allocated - freed by this process, as of the last flush */
	/*
	 * What the process adds to its group's anon: live_bytes plus the frees
	 * that found nothing of its own to uncharge (memory it inherited at
	 * fork or had before it attached), never below zero -- heap_live
	 * counts what the process's charge counts.  Written under the flush
	 * lock.
	 */
	int64_t heap_live;
	/* The last sample of the sampled statistics, bytes (written under the lock). */
	int64_t sampled[CGM_NR_SAMPLED];
	/* What its group's statistics hold of them (flush lock). */
	int64_t sampled_folded[CGM_NR_SAMPLED];
	int64_t sampled_ns;		/* CLOCK_MONOTONIC of the last sample */
	/*
	 * memory.reclaim: a writer bumps reclaim_asked (and the epoch); the
	 * process reclaims at its next slow path and sets reclaim_done to
	 * what it answered.
	 */
	uint32_t reclaim_asked, reclaim_done;
	uint32_t move_to;		/* CGM_NONE, or the group a move asked for */
	/*
	 * A futex word (shared: other processes wake it): bumped when the
	 * process's background reclaim should look (a memory.reclaim or a
	 * limit written for it, a sample near the limit).  Was padding: a
	 * library without the background reclaim leaves it alone.
	 */
	uint32_t wake;
	/*
	 * spill=1: pages of the process now in its compressed pool.  They
	 * leave its charge (the pool's own pages are in its anon): the
	 * bytes charged as allocated count that many pages fewer (sample.c).
	 */
	int64_t spilled_pages;
	/* Pages the last memory.reclaim or limit write asked of this process. */
	int64_t reclaim_want;
	uint32_t psi_stalled;		/* its threads stalled now (left for it if it dies) */
	/*
	 * The reclaim_asked it is answering (set as its answer starts): a
	 * writer waits longer for a process spilling for it than for one
	 * that has not looked yet.  Was padding: a library without it leaves
	 * it 0, and is waited for as before.
	 */
	uint32_t reclaim_answering;
	uint64_t spill_counts[CGM_NR_SPILL_COUNTS];	/* totals, CGM_STAT_SPILL0 on */
	uint64_t spill_folded[CGM_NR_SPILL_COUNTS];	/* what its group has of them (flush lock) */
	/*
	 * ns its spill handler held off serving faults for memory.high
	 * (layout 23): a total, folded into throttle_usec as the counts are.
	 */
	uint64_t spill_throttle_ns;
	uint64_t spill_throttle_folded;
	/*
	 * Bytes of its anon that are the library's own bookkeeping, left out
	 * of its charge and of memory.stat's anon (layout 24): the spill
	 * engine's tables and scratch and the pool's tables, which the
	 * kernel keeps in memory it does not charge (zswap's entries and
	 * tree, zsmalloc's handles).  The pool's pages stay charged, as
	 * zswap's are.
	 */
	int64_t own_anon;
	pthread_mutex_t lock;		/* robust, shared: harvest and move */
	char comm[16];
	/*
	 * CGM_LOCK_READY once @lock was made robust and shared, at the slot's
	 * first claim (layout 21): making all 1,024 when the file is made
	 * wrote the whole table through the creator's mapping, 640 KiB of
	 * its RSS at that moment (its max RSS 370 KiB over a later process's
	 * in bench/bignum).  Before then @lock is zero, a plain mutex that
	 * only the tree lock's holder takes (claims, resync_usage()).
	 */
	uint32_t lock_ready;
} __attribute__((aligned(64)));

#define CGM_LOCK_READY	0x4c4f434bu	/* "LOCK" */

/*
 * A thread's counters.  The first part is written only by the owning
 * thread, with plain stores; most of it on the malloc/free fast path.
 * Flushers and harvesters read it; the parts below are theirs.
 *
 * Small allocations (<= 1 KiB) are precharged per mimalloc bin: allow[b]
 * is how many more blocks of bin b (size_class.h) the thread may take
 * without charging; malloc does allow[b]--, and a negative value sends
 * it to the refill path, which charges another batch of that bin from
 * the byte stock.  Allocations from bin b so far = refilled[b] - allow[b].
 * Small frees add to frees and freed_bytes, which harvest collects into
 * the process's pool.  Blocks of 1..16 KiB (size_class.h's medium bins)
 * are taken from the stock and given back to it by their block size, and
 * counted per bin; so are small blocks on the branch-free free
 * (stocked_small[]).
 */
struct cgm_thread_slot {
	int64_t allow[CGM_NR_BINS];
	/*
	 * All that harvest reads of another thread's slot, in a line of its
	 * own: each line it reads, the owner must take back at its next free.
	 * Small frees were counted per block size, over 17 lines, and a
	 * producer's refill read 13 lines of each consumer (bench/prodcons).
	 */
	uint64_t frees __attribute__((aligned(64)));	/* frees for the pool: small blocks, and above 16 KiB */
	uint64_t freed_bytes;		/* their bytes (harvested: uncharged) */
	int64_t stock __attribute__((aligned(64)));	/* precharged bytes not given to a bin */
	uint64_t medium_allocs[CGM_NR_MEDIUM_BINS];
	uint64_t medium_frees[CGM_NR_MEDIUM_BINS];	/* back into the stock, never harvested */
	uint64_t stocked_small[CGM_NR_BINS];	/* small frees back into the stock (branch-free free) */
	uint64_t refilled[CGM_NR_BINS];
	uint32_t refill_seq;		/* odd while allow[]/refilled[] change together */
	uint32_t drained_gen;		/* owner: the hdr->drain_gen it last answered */
	uint64_t freed_unpooled_bytes;	/* bytes of freed blocks not for the pool: never byte-charged, or back in the stock */
	uint64_t big_allocs;
	uint64_t big_alloc_bytes;
	uint64_t throttle_ns;
	uint64_t reallocs;		/* each counts as one alloc and one free */
	uint64_t realloc_new_bytes;
	uint64_t realloc_old_bytes;
	uint64_t big_hist[CGM_HIST_BUCKETS];
	uint16_t next_refill[CGM_NR_BINS];	/* owner: growing refill size */
	uint16_t refills_unflushed;	/* owner: stock refills since it folded its statistics */

	uint32_t state;			/* enum cgm_slot_state */
	uint32_t proc;
	uint32_t next;			/* in the process's list */
	int32_t tid;

	/* flusher-owned (flush lock) */
	uint64_t snap_frees, snap_freed_bytes, snap_big_allocs, snap_big_alloc_bytes;
	uint64_t snap_freed_unpooled_bytes;
	uint64_t snap_throttle_ns;
	uint64_t snap_reallocs, snap_realloc_new_bytes, snap_realloc_old_bytes;
	uint64_t snap_allocs_small[CGM_NR_BINS];
	uint64_t snap_stocked_small[CGM_NR_BINS];
	uint64_t snap_big_hist[CGM_HIST_BUCKETS];
	uint64_t snap_medium_allocs[CGM_NR_MEDIUM_BINS], snap_medium_frees[CGM_NR_MEDIUM_BINS];
	/* harvester-owned (process lock) */
	uint64_t harvested_freed_bytes;
} __attribute__((aligned(64)));

struct cgm_hier_header {
	uint64_t magic;
	uint32_t version;
	uint32_t header_size;
	uint64_t file_size;
	uint32_t max_groups, max_procs, max_threads;
	uint32_t group_size, proc_size, thread_size;
	/* The group keys follow at CGM_HIER_KEYS_OFF, which these fields decide. */
	uint64_t groups_off, procs_off, threads_off;
	uint32_t uid;
	uint32_t nr_limited;		/* groups with a finite max or high */
	uint32_t epoch;			/* bumped on every change processes must see (their slow paths look) */
	uint32_t flush_seq;
	uint32_t drain_gen;		/* bumped at memory.max: threads give back their precharge */
	uint32_t vmp_listeners;		/* vmpressure listeners of every group */
	/*
	 * Which thread slots are in use, one bit each: an attach finds a
	 * free slot in 512 bytes instead of touching slots in use.  Set
	 * when a slot is taken, cleared when it is free again.
	 */
	uint64_t thread_map[CGM_MAX_THREADS / 64];
	/*
	 * The slots in use that a flush visits: the same, less those of
	 * processes that detached (rstat_fold_exit folded them for good;
	 * they stay in use until the process is gone).  One map served
	 * both, and a new thread tried each such slot as if free (a failed
	 * compare-and-swap, a write fault per page): test_hier_rss, under
	 * load, saw a process map 14 slots of exited processes that way.
	 */
	uint64_t flush_map[CGM_MAX_THREADS / 64];
	/*
	 * The same for process slots in use (attached or exiting), and for
	 * those exiting: an attach finds a free slot, and one to free, in 256
	 * bytes instead of reading the table (which a forked child would fault
	 * in page by page).  Changed under tree_lock.
	 */
	uint64_t proc_map[CGM_MAX_PROCS / 64];
	uint64_t exiting_map[CGM_MAX_PROCS / 64];
	/* Processes with a residency sample that no flush has folded yet. */
	uint64_t sample_map[CGM_MAX_PROCS / 64];
	/*
	 * The pid of each process slot in use, 0 in a free one (set and
	 * cleared with the slot's own, under tree_lock): an attach finds the
	 * slots its pid left before an exec in 4 KiB, instead of reading a
	 * page of the table per seven attached slots (18 pages of a
	 * hierarchy that killed processes had left 128 slots in).
	 */
	int32_t proc_pid[CGM_MAX_PROCS];
	/*
	 * The group slots not free, one bit each (set when a group is made,
	 * cleared when it is removed; changed under tree_lock): a new group
	 * finds a free slot in 2 KiB of the header.  It read the state of
	 * every slot before the first free one, and a hierarchy that many
	 * scopes had passed through (their slots freed only once a later
	 * process saw them gone) cost each program started with a limit a
	 * write fault and a page of RSS per 2.7 slots (8 pages in the
	 * default hierarchy of make bench's limits runs).  Only a hint: the
	 * slot's state decides, and a map that says full is checked slot
	 * by slot (a process killed between the two writes leaves them
	 * apart).
	 */
	uint64_t group_map[CGM_MAX_GROUPS / 64];
	pthread_mutex_t tree_lock;	/* robust, shared */
	pthread_mutex_t flush_lock;	/* robust, shared */
	uint64_t checksum;		/* of the fields above tree_lock */
	/*
	 * A hash of the build ID of the last mimalloc that passed the layout
	 * check (shim/mi_layout.c), 0 for none: processes that load the same
	 * mimalloc skip the check.  It lives in what was the header's padding,
	 * so files without it read 0 and the version did not change.
	 */
	uint64_t mi_layout_ok;
} __attribute__((aligned(64)));

/*
 * Each group slot's parent and name hash (layout 21), in a table of their
 * own: a child is found among the slots in use (the header's group_map)
 * without reading its siblings.  Walking them, a new group under a parent
 * of 100-200 children (a harness's run-by-run groups, the default
 * hierarchy's) read every sibling, 1.5 KiB each, at start-up: 76 KiB of
 * the file resident in bench/bignum with 40 siblings, 400 KiB in make
 * bench.  A free slot's key is not read (its parent may be anything).
 */
struct cgm_group_key {
	uint32_t parent;
	uint32_t name_hash;	/* group_name_hash() */
};

/*
 * The header, then the group, process and thread tables and the group
 * keys, each from a page boundary (layout 21): a program's first process
 * and thread slots then lie in one page each.  Packed after the
 * 7,744-byte header, each straddled two (bench/bignum had 32 KiB of the
 * file resident, 24 now).
 */
#define CGM_HIER_PAGE_UP(x)	(((uint64_t)(x) + 4095) & ~(uint64_t)4095)
#define CGM_HIER_GROUPS_OFF	CGM_HIER_PAGE_UP(sizeof(struct cgm_hier_header))
#define CGM_HIER_PROCS_OFF							\
	CGM_HIER_PAGE_UP(CGM_HIER_GROUPS_OFF + (uint64_t)CGM_MAX_GROUPS * sizeof(struct cgm_group))
#define CGM_HIER_THREADS_OFF							\
	CGM_HIER_PAGE_UP(CGM_HIER_PROCS_OFF + (uint64_t)CGM_MAX_PROCS * sizeof(struct cgm_proc))
#define CGM_HIER_KEYS_OFF							\
	CGM_HIER_PAGE_UP(CGM_HIER_THREADS_OFF +					\
			 (uint64_t)CGM_MAX_THREADS * sizeof(struct cgm_thread_slot))
/* The file's size. */
#define CGM_HIER_FILE_BYTES							\
	(CGM_HIER_KEYS_OFF + (uint64_t)CGM_MAX_GROUPS * sizeof(struct cgm_group_key))
/* hier_prefault() works in 4 KiB units, whatever the page size. */
#define CGM_HIER_UNIT_SHIFT	12
#define CGM_HIER_UNITS		((CGM_HIER_FILE_BYTES >> CGM_HIER_UNIT_SHIFT) + 1)

/* An open hierarchy: the mapping and the bounds every index is checked against. */
struct cgm_hier {
	struct cgm_hier_header *hdr;
	struct cgm_group *groups;
	struct cgm_proc *procs;
	struct cgm_thread_slot *threads;
	struct cgm_group_key *keys;
	size_t size;
	char path[CGM_PATH_MAX];
	/* 4 KiB units of the file this process has written once (hier_prefault). */
	uint64_t prefaulted[(CGM_HIER_UNITS + 63) / 64];
};

/*
 * The directory for this user's hierarchy under @base, @base/cgmalloc-<uid>:
 * created (mode 0700) if missing, and refused unless it is a directory of
 * this user that nobody else can enter.  0, or a negative errno with a
 * one-line reason in @why.
 */
int hier_user_dir(const char *base, char *buf, size_t len, char *why, size_t whylen);

/* The default hierarchy: /dev/shm/cgmalloc-<uid>/hierarchy (hier_user_dir). */
int hier_default_path(char *buf, size_t len, char *why, size_t whylen);

/*
 * Open (creating it if missing, mode 0600) and map the hierarchy at
 * @path.  Refuses with a negative errno and a one-line reason in @why a
 * file of another user, a foreign or wrong-version file, a truncated one,
 * or one whose layout fails validation.
 */
int hier_open(struct cgm_hier *h, const char *path, bool create,
	      char *why, size_t whylen);
void hier_close(struct cgm_hier *h);

/*
 * After the program's mlockall(MCL_CURRENT), which maps and locks every
 * page of every mapping: the pages of the file this process has not
 * written (hier_prefault) and that are not the header's are unlocked and
 * unmapped again.
 */
void hier_release_unused(struct cgm_hier *h);
/* FNV-1a over the header's fields before uid: what hdr->checksum must hold. */
uint64_t hier_header_checksum(const struct cgm_hier_header *hd);

/*
 * Bounds-checked accessors: NULL for an index out of range, and
 * hier_group() also for a group that is not live.  A process or thread
 * slot may be free: its state says so.
 */
struct cgm_group *hier_group(const struct cgm_hier *h, uint32_t idx);
struct cgm_proc *hier_proc(const struct cgm_hier *h, uint32_t idx);
struct cgm_thread_slot *hier_thread(const struct cgm_hier *h, uint32_t idx);
uint32_t hier_group_index(const struct cgm_hier *h, const struct cgm_group *g);
/* The index of @t, or CGM_NONE for a slot not in the table (the boot slot). */
uint32_t hier_thread_index(const struct cgm_hier *h, const struct cgm_thread_slot *t);

uint32_t hier_proc_index(const struct cgm_hier *h, const struct cgm_proc *p);

/*
 * Walks of the shared file.  Every link they follow may be garbage: each
 * index is checked by the accessors above, and each walk is bounded, so a
 * corrupt link can neither leave the mapping nor go round a cycle.
 */

/*
 * for_each_ancestor - @g is group @idx, then each ancestor, the root last.
 * @idx is a uint32_t variable of the caller's, advanced by the walk: it is
 * the index of @g in the body.  Stops at a link that names no live group
 * and after CGM_MAX_DEPTH + 1 groups.
 */
#define for_each_ancestor(h, idx, g)						\
	for (unsigned int cgm_level_ = 0;					\
	     cgm_level_ <= CGM_MAX_DEPTH && ((g) = hier_group((h), (idx))) != NULL; \
	     cgm_level_++, (idx) = (idx) == CGM_ROOT ? CGM_NONE : (g)->parent)

/*
 * for_each_proc_thread - @t is each thread slot of process slot @owner
 * (@p), @idx (a uint32_t of the caller's) its index.  The next link is
 * read before the body runs, so the body may free @t.  Stops at a slot
 * that names another owner and after CGM_MAX_THREADS slots.
 */
#define for_each_proc_thread(h, p, owner, idx, t)				\
	for (uint32_t cgm_next_ = (p)->first_thread, cgm_n_ = 0;		\
	     cgm_n_ < CGM_MAX_THREADS &&					\
	     ((idx) = cgm_next_, (t) = hier_thread((h), (idx))) != NULL &&	\
	     __atomic_load_n(&(t)->proc, __ATOMIC_ACQUIRE) == (owner) &&	\
	     (cgm_next_ = (t)->next, 1);					\
	     cgm_n_++)

/*
 * for_each_live_proc - @p is each attached process slot, @i (a uint32_t
 * of the caller's) its index.
 */
#define for_each_live_proc(h, i, p)						\
	for ((i) = 0; (i) < CGM_MAX_PROCS; (i)++)				\
		if (((p) = &(h)->procs[(i)]),					\
		    __atomic_load_n(&(p)->state, __ATOMIC_ACQUIRE) != CGM_SLOT_LIVE) \
			continue;						\
		else

/*
 * Every page of the file exists (hier_open reserves them all), and it is
 * mapped shared: a read fault maps the page and up to fifteen neighbours
 * the page cache holds (fault-around, which MADV_RANDOM does not stop), a
 * write fault maps one.  A process reads a few scattered slots (its own,
 * a free one it claims, those of its threads): before the first read of
 * one, hier_prefault() writes each of its pages once -- an atomic add of
 * zero, which changes no byte whoever else writes the word -- so the
 * process maps the pages it uses, not 64 KiB around each (a one-thread
 * program mapped 124 KiB of the file, most of its RSS over mimalloc's).
 * A loop that reads a whole table keeps its read faults: fault-around
 * then maps what it needs with fewer faults.  After fork the child has
 * none of the parent's mappings of the file: hier_prefault_forget().
 */
static inline void hier_write_touch(void *page)
{
#ifdef CGM_TSAN
	/*
	 * Not under ThreadSanitizer: the page's first word is whatever field
	 * a page boundary falls on (thread slots of 2,176 bytes put one on
	 * every 128-byte offset), and against the plain accesses of its users
	 * the add is a data race in C11's model that changes nothing.  The
	 * next access maps the page anyway.
	 */
	(void)page;
#else
	__atomic_fetch_add((uint64_t *)page, 0, __ATOMIC_RELAXED);
#endif
}

/*
 * Zero [@p, @p + @len) of the hierarchy with relaxed atomic stores, not
 * memset: another thread of the process may write-touch a word of it at
 * the same moment (a slot that shares a page with one it reads), and an
 * atomic add of zero against a plain store is a data race in C11's model,
 * harmless as it is on the machines we run on (ThreadSanitizer saw it in
 * check-tsan-accounting's cross-thread frees).
 */
static inline void hier_zero(void *p, size_t len)
{
	unsigned char *b = p;
	size_t i = 0;

	for (; i < len && ((uintptr_t)(b + i) & 7); i++)
		__atomic_store_n(b + i, 0, __ATOMIC_RELAXED);
	for (; i + 8 <= len; i += 8)
		__atomic_store_n((uint64_t *)(void *)(b + i), 0, __ATOMIC_RELAXED);
	for (; i < len; i++)
		__atomic_store_n(b + i, 0, __ATOMIC_RELAXED);
}

static inline void hier_prefault(const struct cgm_hier *h, const void *ptr, size_t len)
{
	uintptr_t base = (uintptr_t)h->hdr, at = (uintptr_t)ptr;
	/* Not const: the bitmap is the process's own record, not the hierarchy. */
	uint64_t *done = (uint64_t *)h->prefaulted;

	if (at < base || len == 0 || at - base + len > h->size)
		return;
	for (uintptr_t u = (at - base) >> CGM_HIER_UNIT_SHIFT;
	     u <= (at - base + len - 1) >> CGM_HIER_UNIT_SHIFT && u < CGM_HIER_UNITS; u++) {
		uint64_t bit = 1ULL << (u % 64);

		if (__atomic_load_n(&done[u / 64], __ATOMIC_RELAXED) & bit)
			continue;
		hier_write_touch((void *)(base + (u << CGM_HIER_UNIT_SHIFT)));
		__atomic_fetch_or(&done[u / 64], bit, __ATOMIC_RELAXED);
	}
}

static inline void hier_prefault_forget(struct cgm_hier *h)
{
	for (size_t i = 0; i < sizeof(h->prefaulted) / sizeof(h->prefaulted[0]); i++)
		__atomic_store_n(&h->prefaulted[i], 0, __ATOMIC_RELAXED);
}

/* Bit @i of a slot map (thread_map, flush_map, proc_map, exiting_map). */
static inline void hier_map_set(uint64_t *map, uint32_t i)
{
	__atomic_fetch_or(&map[i / 64], 1ULL << (i % 64), __ATOMIC_RELEASE);
}

static inline void hier_map_clear(uint64_t *map, uint32_t i)
{
	__atomic_fetch_and(&map[i / 64], ~(1ULL << (i % 64)), __ATOMIC_RELEASE);
}

/* cgm_proc.sample_flags */
enum cgm_sample_flags {
	CGM_SAMPLE_CHARGE = 1u << 0,	/* charge=resident: samples are charged */
};

/*
 * What process slot @p had in use at its last sample beyond what its
 * group's memory.max had room for, in pages: never below 0, and never
 * past 2^40 (4 PiB), so that a corrupt count in the shared file cannot
 * make a sum with it overflow.
 */
static inline int64_t proc_sample_short(const struct cgm_proc *p)
{
	int64_t pages = __atomic_load_n(&p->sample_short, __ATOMIC_RELAXED);

	return pages <= 0 ? 0 : pages < (1LL << 40) ? pages : 1LL << 40;
}

/* Everything process slot @p has charged to its group, in pages. */
static inline int64_t proc_charged_pages(const struct cgm_proc *p)
{
	int64_t held = __atomic_load_n(&p->held_pages, __ATOMIC_RELAXED);
	int64_t sampled = __atomic_load_n(&p->sampled_pages, __ATOMIC_RELAXED);

	held = held > 0 ? held : 0;
	/* Below zero by the spilled pages the held bytes count (sample.c), never below -held. */
	sampled = sampled > -held ? sampled : -held;
	/* Saturating: corrupt counts in a shared file must not overflow. */
	return sampled > INT64_MAX - held ? INT64_MAX : held + sampled;
}

/* The robust shared mutexes: a lock left by a dead owner is recovered. */
void hier_lock(pthread_mutex_t *m);
void hier_unlock(pthread_mutex_t *m);
/* The lock if it is free (true), else false at once. */
bool hier_trylock(pthread_mutex_t *m);
/*
 * The lock of slot @what that was free when the caller claimed it (under
 * tree_lock): nobody holds that but its releaser, for a moment.  Still
 * held after a second, its lock word is corrupt (a scribbled file names
 * an owner that never unlocks): it is made afresh, with one line on
 * stderr, rather than wait for ever.
 */
void hier_lock_claimed(const struct cgm_hier *h, pthread_mutex_t *m, const char *what);

/* A lock of the file: robust (its holder may die) and shared between processes. */
static inline void hier_init_shared_mutex(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
}

/*
 * Make process slot @p's lock robust and shared if it is not yet: at the
 * slot's first claim (struct cgm_proc's lock_ready), under tree_lock.
 * Inline: every attach runs it, and the library's hot text is a list of
 * names (shim/hot-text.ld).
 */
static inline void hier_proc_lock_ready(struct cgm_proc *p)
{
	if (__atomic_load_n(&p->lock_ready, __ATOMIC_ACQUIRE) == CGM_LOCK_READY)
		return;
	hier_init_shared_mutex(&p->lock);
	__atomic_store_n(&p->lock_ready, CGM_LOCK_READY, __ATOMIC_RELEASE);
}
/* How many of them the calling thread holds. */
unsigned int hier_locks_held(void);

/* Tell every process that something changed (limits, moves): the epoch moves. */
void hier_bump_epoch(struct cgm_hier *h);

/* ---- groups (accounting/group.c); callers hold tree_lock unless noted ---- */

/* Find a group by path ("/", "/a/b").  Returns its index or CGM_NONE. */
uint32_t group_lookup(const struct cgm_hier *h, const char *path);

/*
 * Create the group at @path and any missing parents.  Returns its index,
 * or a negative errno (-EINVAL bad name, -ENOSPC table full).
 */
int64_t group_mkdir(struct cgm_hier *h, const char *path);

/*
 * group_mkdir() giving the group at @path, if this call creates it,
 * @flags (enum cgm_group_flags); the parents it creates get none.
 */
int64_t group_create(struct cgm_hier *h, const char *path, uint32_t flags);

/* Remove an empty group: -EBUSY if it has children or processes. */
int group_rmdir(struct cgm_hier *h, const char *path);

/* Write the path of group @idx into @buf. */
int group_path(const struct cgm_hier *h, uint32_t idx, char *buf, size_t len);

/* Check a path's syntax without touching the hierarchy. */
int group_path_valid(const char *path);
/* What a valid path is, in words, for messages. */
extern const char group_path_rules[];

/* Count an event on a group: local always, hierarchical up to but excluding root. */
void group_event(struct cgm_hier *h, uint32_t idx, enum cgm_event ev);

/* Is @idx or one of its ancestors limited (finite max or high)? */
bool group_limited(const struct cgm_hier *h, uint32_t idx);

/* Is @idx or one of its ancestors over its memory.high? */
bool group_over_high(const struct cgm_hier *h, uint32_t idx);

/*
 * Remove group @idx if it is transient and empty (no child, no process,
 * nothing charged), then its transient ancestors that this leaves empty.
 * Caller holds tree_lock.
 */
void group_reap_transient(struct cgm_hier *h, uint32_t idx);

/* Is group @idx @root or below it? */
bool group_in_subtree(const struct cgm_hier *h, uint32_t idx, uint32_t root);

#endif /* CGM_HIER_H */
