/*
 * The spiller's engine: cold pages moved out with UFFDIO_MOVE, stored in
 * the pool, and served back by a userfaultfd handler thread.
 *
 * Two locks and one counter per range order everything:
 *
 *   table lock (lock, cond changed)  the page table: page -> entry, whose
 *       state is TRANSIT (entered by spill_out, being moved and stored),
 *       STORED (in the pool) or LOADING (being brought back).  Only the
 *       spill_out call that entered a page changes TRANSIT; only the thread
 *       that set LOADING removes the entry.  Anyone who finds an entry in a
 *       state it may not touch waits on @changed.
 *   reg_lock  the range slots and UFFDIO_REGISTER/UNREGISTER.  Taken
 *       before the table lock when both are held, never after it.
 *   range live count (atomic)  entries of the range, plus one while the
 *       spill_out call that made it runs.  The thread that drops it to zero
 *       unregisters whatever part of the range no live range covers.
 *
 * A page is entered in the table before its range is registered and before
 * it is moved, and leaves it only after it is back in place, so a fault on
 * a registered page with no entry is a page that was never there (served
 * with the zero page) or one already back (EEXIST: just wake).  A range is
 * registered before any of its pages moves and unregistered only when none
 * of its pages is out, so no page is ever missing where the kernel would
 * fill it with zeros.
 *
 * Nothing here calls malloc: the engine, the tables, the staging area and
 * the bounce pages are mmap'd, and the handler uses its own stack.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "cgm/compiler.h"
#include "cgm/log.h"
#include "cgm/own_fds.h"
#include "cgm/spill.h"
#include "cgm/uffd_abi.h"
#include "cgm/zpool.h"
#include "uffd_span.h"

#define SP_PAGE		4096ul
/* Closed ranges the handler settles together (sp_range_put). */
#define SP_CLOSED_MAX	64u
/* Pages moved per UFFDIO_MOVE call: each call pays a TLB-flush IPI when
 * other threads run, so moves are batched. */
#define SP_BATCH	64u
/* Staging lanes: how many spill_out calls run side by side. */
#define SP_LANES	4u
/*
 * A lane's staging slots.  A batch moves into slots not used since the
 * lane was last cleared, and the lane is cleared (MADV_DONTNEED) once a
 * batch's worth of slots has been used, not after every batch: clearing
 * costs a TLB-flush IPI to every CPU the program runs on, whatever the
 * length, and reclaim under memory.high spills a few pages per call
 * (runs between resident pages).  Before, sqlite3's working phase under
 * bench/spill_workload.sh made 66,000 such calls of 1-15 pages, and
 * their IPIs took 12.5% of its CPU time in perf.  A lane holds at most
 * SP_BATCH - 1 stale copies (pages already in the pool), 1 MiB for all
 * lanes; spill_stage_clear() clears them when a reclaim is done.
 */
#define SP_LANE_PAGES	(2 * SP_BATCH)
/*
 * Pages a lane reads out of its staging slots per process_vm_readv()
 * (sp_read_staged): its copy buffer, 64 KiB a lane, small enough to
 * stay in the cache between the copy and the compression.
 */
#define SP_COPY_PAGES	16u
/*
 * A lone page is read in place: the copy's two system calls (getpid and
 * process_vm_readv) took as long as the trip to the host they avoid in
 * bench/spill_bench's scattered spills (one page a call, another thread
 * running): 67-69 MB/s against 80-82 read in place.
 */
#define SP_COPY_MIN	2u
#define SP_MSGS		16
/* The longest the served hook can hold the handler off (the kernel's cap on a throttle). */
#define SP_HOLD_OFF_MAX_MS	2000
/* How often a hold-off asks the holding hook whether it may end. */
#define SP_HOLD_SLICE_MS	1

enum sp_state { SP_TRANSIT = 1, SP_STORED, SP_LOADING };

struct sp_entry {
	uintptr_t page;		/* page address; 0: free slot */
	zp_entry_t zent;	/* valid from STORED on */
	uint32_t range;
	uint32_t state;
	uint32_t seq;		/* the spilled count when it left: its refault distance */
};

/*
 * Pages that refaulted soon after they left: remembered, one per slot of
 * a direct-mapped table (a collision forgets the older page), with the
 * spilled count when they came back.  A page stays hot until as many
 * pages again have been spilled since (the kernel's workingset: a
 * refault distance below the working set activates the page).
 */
#define SP_HOT_BITS	14
#define SP_HOT_SLOTS	(1u << SP_HOT_BITS)
/*
 * The slots in use grow with what was spilled: from 2^10 (16 KiB) to
 * 2^SP_HOT_BITS (256 KiB), as many as pages spilled so far.  A hot page
 * is one that was spilled, so there are never more of them than that;
 * but the hash spreads them over the whole table, and the full table
 * from the start made 200 refaults touch 48 of its 64 pages -- in each
 * process of a pipeline under memory.high, where it was the largest of
 * the engine's tables.  A growth forgets most of the pages hot then
 * (their slots move), four times at most.
 */
#define SP_HOT_MIN_BITS	10

struct sp_hot {
	atomic_uintptr_t page;
	atomic_uint seq;
	atomic_uint ms;		/* when it refaulted (CLOCK_MONOTONIC, ms, wrapping) */
};

/*
 * A hot page is left in place for at most this long: when nothing can be
 * spilled, the spilled count stops, and a distance alone would keep every
 * page that came back hot for ever.
 */
#define SP_HOT_MS	10000u

/*
 * Blocks of address space that pages came back to lately: a direct-mapped
 * table of 1024 blocks of 2 MiB (a clash forgets the older block), each
 * with when a page was last placed there.
 */
#define SP_BACK_BITS	10
#define SP_BACK_SLOTS	(1u << SP_BACK_BITS)
#define SP_BACK_SHIFT	21

struct sp_span {
	uintptr_t start, end;
};

struct sp_range {
	uintptr_t start, end;	/* end 0: free slot */
	atomic_uint live;
	uint32_t next_free;
	uint32_t bnext, bprev;	/* in its start's bucket (SP_NO_RANGE ends) */
};

/*
 * Open ranges by where they start: a bucket per 2 MiB of address space,
 * hashed into SP_BUCKETS lists, so that settling a range looks at the
 * ranges near it, not at every range.  Reclaim spills runs of a few
 * pages, one range each, and a range is settled as its last page comes
 * back -- on the handler thread, which the faulting thread waits for:
 * sqlite3 under memory.high (bench/spill_workload.sh) held 10,000 ranges
 * and more, and the scan of all of them was 5.6% of its working phase's
 * CPU time in perf.
 */
#define SP_BUCKET_SHIFT	21
#define SP_BUCKET_BITS	12
#define SP_BUCKETS	(1u << SP_BUCKET_BITS)

/*
 * Clusters remembered for readahead: a direct-mapped table of 4096 slots,
 * one 64 KiB cluster each (256 MiB of address space without a clash), and
 * how many faults ago a cluster's last one may be.
 */
#define SP_SEEN_SLOTS	4096
/* Most pages one readahead copy places: a window (SP_RA_MAX), more than a cluster (SP_CLUSTER). */
#define SP_SPAN_MAX	32
#define SP_SEEN_FAULTS	4096
/*
 * Cluster readahead waiting for the handler to have no fault to serve,
 * and how many pages it brings back at a time between looks for one.
 */
#define SP_RA_PENDING	8
#define SP_RA_STEP	8
/* Sequential walks followed at once (threads each walking its own pages). */
#define SP_STREAMS	8

/*
 * What a descriptor of the engine was opened on, to look before writing
 * to it: a program that closes every descriptor it did not open (as
 * daemons do) may have opened a file of its own under that number, and
 * the write would go into the file.
 */
struct sp_fd_id {
	dev_t dev;
	ino_t ino;
};

static void sp_fd_note(int fd, struct sp_fd_id *id)
{
	struct stat st;

	if (!fstat(fd, &st))
		*id = (struct sp_fd_id){ st.st_dev, st.st_ino };
}

static bool sp_fd_still(int fd, const struct sp_fd_id *id)
{
	struct stat st;

	return !fstat(fd, &st) && st.st_dev == id->dev && st.st_ino == id->ino;
}

/* Close @fd if it is still what was opened; if not, the number is the program's: forget it. */
static void sp_fd_drop(int fd, const struct sp_fd_id *id)
{
	if (sp_fd_still(fd, id))
		cgm_fd_close(fd);
	else
		cgm_fd_forget(fd);
}

struct spill_engine {
	struct zp_pool *pool;
	int uffd;		/* program ranges; read by the handler */
	int stage_uffd;		/* staging area; issues the moves */
	int stop_fd;
	pthread_t thread;
	atomic_bool closing;
	/* What each descriptor was opened on: looked at before it is written or closed. */
	struct sp_fd_id uffd_id, stage_id, stop_id, pagemap_id;

	pthread_mutex_t lock;
	pthread_cond_t changed;
	struct sp_entry *slots;
	size_t mask, count, max_pages;
	size_t max_slots;	/* the table grows up to this many slots */

	pthread_mutex_t reg_lock;
	struct sp_range *ranges;
	uint32_t max_ranges, ranges_hw, free_range;
	uint32_t *bucket;		/* SP_BUCKETS list heads (reg_lock) */
	uintptr_t max_span;		/* the longest range opened yet (reg_lock) */
	/*
	 * Ranges the handler closed, their registration not yet settled
	 * (reg_lock; only the handler thread adds and settles them).
	 */
	uint32_t closed[SP_CLOSED_MAX];
	uint32_t nr_closed;
	/* Write tracking (reg_lock): regions registered for WP_ASYNC. */
	bool wp_async;
	int pagemap_fd;
	struct sp_span *tracked;
	uint32_t nr_tracked;
	/* spill_catch_touches(): the tracked regions are registered MISSING whole (set under reg_lock). */
	atomic_bool catching;

	unsigned char *stage;
	pthread_mutex_t lane_lock;
	pthread_cond_t lane_free;
	unsigned lane_busy;
	unsigned lane_used[SP_LANES];	/* slots used since the lane was cleared (its holder's) */
	unsigned char *copy;		/* SP_COPY_PAGES a lane (sp_read_staged) */
	atomic_bool copy_used[SP_LANES];	/* the lane's copy pages written since sp_trim_scratch */
	atomic_bool no_copy;		/* process_vm_readv refused: staged pages are read in place */

	unsigned char *bounce;		/* the handler's */
	unsigned char *span;		/* the handler's, for a readahead run (SP_SPAN_MAX pages) */
	bool span_used;			/* written since sp_trim_scratch (the handler's) */
	unsigned char *zeros;		/* a page of zeros, never written */
	bool (*idle)(void);
	int idle_ms;
	void (*serving)(bool start);
	unsigned (*served)(uint64_t pages);
	bool (*holding)(int64_t held_ns, bool ended);
	/* Faults read while the served hook held the handler off, served next (the handler's). */
	struct uffd_msg held[SP_MSGS];
	unsigned nheld;
	/*
	 * Readahead (the handler's alone): streams of faults at consecutive
	 * pages, each with its last fault, the end of what was read ahead for
	 * it, its window, and when it last faulted (the least recent goes).
	 */
	bool ra_on;
	atomic_bool ra_paused;
	struct sp_stream {
		uintptr_t last, end;
		unsigned window;
		uint64_t fault;
	} streams[SP_STREAMS];
	/* Clusters that faulted lately (sp_cluster_readahead), and the faults so far. */
	struct sp_seen {
		uintptr_t base;
		uint64_t fault;
	} seen[SP_SEEN_SLOTS];
	uint64_t faults;
	/* Cluster readahead not done yet (sp_ra_defer), oldest first: ra_head..ra_head+ra_count. */
	struct sp_ra_span {
		uintptr_t from, to;
	} ra_pending[SP_RA_PENDING];
	unsigned ra_head, ra_count;

	struct sp_hot *hot;
	atomic_uint hot_bits;		/* 2^hot_bits slots of it in use (sp_hot_grow) */
	unsigned hot_ms;		/* a page stays hot this long at most (SP_HOT_MS) */
	atomic_uint hot_age_ms;		/* for now, at most this long (spill_set_hot_age) */
	atomic_uint hot_last_ms;	/* when a page last became hot (sp_ms_now) */
	atomic_bool hot_written;	/* since sp_trim_scratch gave the table back */
	atomic_uint hot_distance;	/* pages; 0: nothing is ever hot */
	/* Where pages came back lately (spill_came_back_within). */
	struct sp_back {
		atomic_uintptr_t block;	/* address >> SP_BACK_SHIFT, + 1; 0: empty */
		atomic_uint ms;		/* when a page was last placed there (sp_ms_now) */
	} back[SP_BACK_SLOTS];
	/* spill_mark_refaults(): the spilled count then, and refaults of pages spilled since. */
	atomic_uint mark_seq;
	atomic_uint_fast64_t refaulted_since_mark;
	atomic_bool keep_shared;	/* spill_unshare_shared(e, false) */
	atomic_bool running;		/* the handler thread got to its loop */

	/*
	 * Handing a forked child its engine (spill_fork_prepare): the uffd
	 * reports forks (UFFD_FEATURE_EVENT_FORK, which needs
	 * CAP_SYS_PTRACE); fork_state says where a fork stands; wake_fd
	 * wakes the handler to see it; fork_sock is the parent's end of the
	 * socket the child's uffd goes through (fork_lock); frozen lists the
	 * pages served while the table was frozen (their entries are left).
	 */
	bool fork_events;
	atomic_bool fork_announced;	/* a fork handler ran since the last fork report */
	int (*create_thread)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
	atomic_uint fork_state;
	int wake_fd;
	struct sp_fd_id wake_id;
	pthread_mutex_t fork_lock;
	int fork_sock[2];
	/*
	 * The parent's end of the last child's socket, whose other end the
	 * child keeps (close-on-exec): hung up once the child has exec'd or
	 * exited.  handing: this fork is handed over (spill_fork_prepare).
	 */
	int live_sock;
	struct sp_fd_id live_id;
	bool handing;
	int child_uffd;			/* the parent's copy while it serves the child */
	int64_t child_deadline;
	/* The pages the parent put in place in the child (frozen: they are stored in its copy). */
	uintptr_t *child_served;
	uint32_t nr_child_served;
	atomic_bool go;			/* the child's handler may read its uffd */
	uintptr_t *frozen;
	uint32_t nr_frozen;
	bool frozen_overflow;
	/*
	 * The entry the handler loads in the frozen window, 0 outside the
	 * load: set before zp_load counts itself in and cleared after it
	 * counts itself out, so a child whose copy was made in between
	 * finds it here (spill_fork_child) and drops the count.
	 */
	_Atomic zp_entry_t frozen_loading;

	/*
	 * The CPU latency request held in fault bursts (sp_burst_start), or
	 * -1; why there is none; and whether the handler holds it now (its
	 * own).
	 */
	int qos_fd;
	int qos_err;
	bool in_burst;
	struct sp_fd_id qos_id;

	atomic_uint_fast64_t spilled, refaulted, restored, skipped,
		store_failed, in_pool, nr_ranges, skipped_hot, refaulted_hot,
		forgotten, readahead, misreported, unshared, bursts, bursts_polled,
		read_in_place, zero_filled, held_off, held_off_ms;
};

#define SP_NO_RANGE	UINT32_MAX
#define SP_TRACK_MAX	4096u
/* Pages served in one fork's frozen window that are listed; past it, a scan. */
#define SP_FROZEN_MAX	1024u

enum sp_fork_state {
	SP_FORK_NONE,		/* no fork under way */
	SP_FORK_ASKED,		/* spill_fork_prepare asks the handler to freeze the table */
	SP_FORK_FROZEN,		/* the handler serves without changing table or pool */
	SP_FORK_CHILD,		/* ... and serves the child too, until its own handler runs */
	SP_FORK_THAW,		/* no fork event will come (fork failed): thaw */
};
/* A child whose handler is not running after this long is left to itself. */
#define SP_CHILD_WAIT_NS	(5 * 1000000000LL)

/*
 * The engine's tables: reserved, touched where used, not in core dumps;
 * zp_map()'s system calls, not the library's mmap(): the handler maps a
 * new table when idle (sp_shrink), and that mmap() could make it wait for
 * a thread that waits for it in fork().
 */
static void *sp_map(size_t bytes)
{
	return zp_map(bytes, true);
}

static void sp_unmap(void *p, size_t bytes)
{
	zp_unmap(p, bytes);
}

/*
 * @key's slot in a direct-mapped table of 2^@bits slots: the top bits of
 * its product with 2^64 / the golden ratio (Fibonacci hashing), which
 * spreads the consecutive keys of nearby addresses.
 */
static inline uint32_t sp_fib_slot(uint64_t key, unsigned bits)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

/* ---- refault distance ---- */

static struct sp_hot *sp_hot_slot(struct spill_engine *e, uintptr_t page)
{
	return &e->hot[sp_fib_slot(page / SP_PAGE, atomic_load_explicit(&e->hot_bits,
									memory_order_relaxed))];
}

/* As many slots in use as pages spilled so far (SP_HOT_MIN_BITS), before a page is entered. */
static void sp_hot_grow(struct spill_engine *e)
{
	uint64_t spilled = atomic_load_explicit(&e->spilled, memory_order_relaxed);
	unsigned want = spilled ? 64 - (unsigned)__builtin_clzll(spilled) : 0;
	unsigned bits = atomic_load_explicit(&e->hot_bits, memory_order_relaxed);

	if (want > SP_HOT_BITS)
		want = SP_HOT_BITS;
	/* Only up: a slower writer with an older count must not shrink it. */
	while (bits < want && !atomic_compare_exchange_weak_explicit(&e->hot_bits, &bits, want,
								     memory_order_relaxed,
								     memory_order_relaxed))
		;
}

static uint32_t sp_seq_now(struct spill_engine *e)
{
	return (uint32_t)atomic_load_explicit(&e->spilled, memory_order_relaxed);
}

/* A page that left at spilled count @seq came back by a fault. */
static uint32_t sp_ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint32_t)((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
}

/*
 * Did a page that left at spilled count @seq leave after spill_mark_refaults()'s
 * @mark?  (Counts wrap at 2^32 pages: 16 TiB spilled, not within one window.)
 */
static bool sp_after_mark(uint32_t seq, uint32_t mark)
{
	return (int32_t)(seq - mark) >= 0;
}

static void sp_refaulted_at(struct spill_engine *e, uintptr_t page, uint32_t seq)
{
	uint32_t window = atomic_load_explicit(&e->hot_distance, memory_order_relaxed), now;
	struct sp_hot *h;

	if (sp_after_mark(seq, atomic_load_explicit(&e->mark_seq, memory_order_relaxed)))
		atomic_fetch_add_explicit(&e->refaulted_since_mark, 1, memory_order_relaxed);
	if (sp_seq_now(e) - seq >= window)
		return;
	sp_hot_grow(e);
	h = sp_hot_slot(e, page);
	now = sp_ms_now();
	atomic_store_explicit(&h->seq, sp_seq_now(e), memory_order_relaxed);
	atomic_store_explicit(&h->ms, now, memory_order_relaxed);
	atomic_store_explicit(&h->page, page, memory_order_relaxed);
	atomic_store_explicit(&e->hot_last_ms, now, memory_order_relaxed);
	atomic_store_explicit(&e->hot_written, true, memory_order_relaxed);
	atomic_fetch_add_explicit(&e->refaulted_hot, 1, memory_order_relaxed);
}

static bool sp_is_hot(struct spill_engine *e, uintptr_t page)
{
	struct sp_hot *h = sp_hot_slot(e, page);
	uint32_t window = atomic_load_explicit(&e->hot_distance, memory_order_relaxed);

	return atomic_load_explicit(&h->page, memory_order_relaxed) == page &&
	       sp_seq_now(e) - atomic_load_explicit(&h->seq, memory_order_relaxed) < window &&
	       sp_ms_now() - atomic_load_explicit(&h->ms, memory_order_relaxed) <
		       atomic_load_explicit(&e->hot_age_ms, memory_order_relaxed);
}

void spill_mark_refaults(struct spill_engine *e)
{
	atomic_store_explicit(&e->refaulted_since_mark, 0, memory_order_relaxed);
	atomic_store_explicit(&e->mark_seq, sp_seq_now(e), memory_order_relaxed);
}

uint64_t spill_refaults_since_mark(struct spill_engine *e)
{
	return atomic_load_explicit(&e->refaulted_since_mark, memory_order_relaxed);
}

void spill_pause_readahead(struct spill_engine *e, bool paused)
{
	atomic_store_explicit(&e->ra_paused, paused, memory_order_relaxed);
}

void spill_unshare_shared(struct spill_engine *e, bool copy)
{
	atomic_store_explicit(&e->keep_shared, !copy, memory_order_relaxed);
}

void spill_set_hot_distance(struct spill_engine *e, size_t pages)
{
	atomic_store_explicit(&e->hot_distance,
			      pages > UINT32_MAX / 2 ? UINT32_MAX / 2 : (unsigned)pages,
			      memory_order_relaxed);
}

void spill_set_hot_age(struct spill_engine *e, unsigned ms)
{
	atomic_store_explicit(&e->hot_age_ms, ms && ms < e->hot_ms ? ms : e->hot_ms,
			      memory_order_relaxed);
}

uint64_t spill_skipped_hot(struct spill_engine *e)
{
	return atomic_load_explicit(&e->skipped_hot, memory_order_relaxed);
}

static struct sp_back *sp_back_slot(struct spill_engine *e, uintptr_t block)
{
	return &e->back[sp_fib_slot(block, SP_BACK_BITS)];
}

/* Pages were placed in [@from, @to) just now. */
static void sp_note_back(struct spill_engine *e, uintptr_t from, uintptr_t to)
{
	uint32_t ms = sp_ms_now();

	for (uintptr_t block = from >> SP_BACK_SHIFT; block <= (to - 1) >> SP_BACK_SHIFT; block++) {
		struct sp_back *b = sp_back_slot(e, block);

		atomic_store_explicit(&b->ms, ms, memory_order_relaxed);
		atomic_store_explicit(&b->block, block + 1, memory_order_relaxed);
	}
}

bool spill_came_back_within(struct spill_engine *e, const void *addr, size_t len, unsigned ms)
{
	uintptr_t from = (uintptr_t)addr, to = from + len;
	uint32_t now = sp_ms_now();

	if (!len)
		return false;
	for (uintptr_t block = from >> SP_BACK_SHIFT; block <= (to - 1) >> SP_BACK_SHIFT; block++) {
		struct sp_back *b = sp_back_slot(e, block);

		if (atomic_load_explicit(&b->block, memory_order_relaxed) == block + 1 &&
		    now - atomic_load_explicit(&b->ms, memory_order_relaxed) < ms)
			return true;
	}
	return false;
}

/* ---- the page table: open addressing, linear probing ---- */

/*
 * Neighbouring pages take neighbouring slots: pages are hashed by their
 * group of 64, and a group's pages lie side by side.  A spill of a run of
 * pages then writes a few pages of the table, not one table page per
 * spilled page (whose memory would eat what spilling saves).
 */
/* In a table of @mask + 1 slots (a power of two): the product's top log2 bits pick the group. */
static size_t sp_hash_in(size_t mask, uintptr_t page)
{
	uint64_t pn = (uint64_t)(page / SP_PAGE);
	unsigned shift = (unsigned)__builtin_clzll((unsigned long long)mask);

	return (size_t)((((pn >> 6) * 0x9e3779b97f4a7c15ull) >> shift << 6) | (pn & 63)) & mask;
}

static size_t sp_hash(const struct spill_engine *e, uintptr_t page)
{
	return sp_hash_in(e->mask, page);
}

static struct sp_entry *sp_lookup(struct spill_engine *e, uintptr_t page)
{
	for (size_t i = sp_hash(e, page);; i = (i + 1) & e->mask) {
		if (e->slots[i].page == page)
			return &e->slots[i];
		if (!e->slots[i].page)
			return NULL;
	}
}

/* Put @ent in a table of @mask + 1 slots (no duplicate check). */
static void sp_place_entry(struct sp_entry *slots, size_t mask, const struct sp_entry *ent)
{
	size_t i;

	for (i = sp_hash_in(mask, ent->page); slots[i].page; i = (i + 1) & mask)
		;
	slots[i] = *ent;
}

/*
 * Slots the table starts with: 24 KiB, all touched soon since the hash
 * spreads pages over them (it started with 96 KiB, 44 of it resident in
 * a small process that had spilled about a hundred pages).
 */
#define SP_TABLE_START	1024u

/*
 * The table rehashed into @n slots (a power of two, more than its
 * entries).  Lock held: every lookup is made under it and no entry
 * pointer is kept across an unlock.  False if the memory for it cannot
 * be had (the table stays as it is).
 */
static bool sp_rehash(struct spill_engine *e, size_t n)
{
	struct sp_entry *slots = sp_map(n * sizeof(*slots));

	if (!slots)
		return false;
	for (size_t i = 0; i <= e->mask; i++)
		if (e->slots[i].page)
			sp_place_entry(slots, n - 1, &e->slots[i]);
	sp_unmap(e->slots, (e->mask + 1) * sizeof(*e->slots));
	e->slots = slots;
	e->mask = n - 1;
	return true;
}

/*
 * Twice the slots: the table starts small (a process that spills a
 * little maps a little) and grows with what is out, up to two slots per
 * page of max_pages.  Lock held.
 */
static bool sp_grow(struct spill_engine *e)
{
	return sp_rehash(e, (e->mask + 1) * 2);
}

/*
 * And shrinks again once most of what was out has come back, when the
 * handler is idle (sp_trim_scratch): to four to eight slots an entry,
 * from fewer than one in sixteen used.  Not while a fork is under way
 * (the table then stays as it is for the child).  A table that grew had
 * stayed as large, all of it resident (the hash spreads entries over
 * every page), while the kernel frees a zswap entry with its page:
 * python3 that built a dict of 300,000 strings under memory.high=24M
 * (18,000 pages spilled), then read it all back and idled a second,
 * ended with 1.16 MB in the engine's tables and scratch; now 0.60.
 */
static void sp_shrink(struct spill_engine *e)
{
	size_t n;

	if (atomic_load_explicit(&e->fork_state, memory_order_acquire) != SP_FORK_NONE)
		return;
	pthread_mutex_lock(&e->lock);
	n = e->mask + 1;
	if (n > SP_TABLE_START && 16 * e->count < n) {
		while (n > SP_TABLE_START && 8 * e->count < n)
			n /= 2;
		sp_rehash(e, n);
	}
	pthread_mutex_unlock(&e->lock);
}

/* Enter @page in transit; NULL if it is there already or the table is full. */
static struct sp_entry *sp_insert(struct spill_engine *e, uintptr_t page,
				  uint32_t range)
{
	size_t i;

	if (e->count >= e->max_pages)
		return NULL;
	/* At most half full, so that probe runs stay short; 7/8 if it cannot grow. */
	if (2 * (e->count + 1) > e->mask + 1 &&
	    (e->mask + 1 >= e->max_slots || !sp_grow(e)) &&
	    8 * (e->count + 1) > 7 * (e->mask + 1))
		return NULL;
	for (i = sp_hash(e, page); e->slots[i].page; i = (i + 1) & e->mask)
		if (e->slots[i].page == page)
			return NULL;
	e->slots[i] = (struct sp_entry){ .page = page, .range = range,
					 .state = SP_TRANSIT, .seq = sp_seq_now(e) };
	e->count++;
	return &e->slots[i];
}

/* Remove @ent, shifting back the entries of its probe run (no tombstones:
 * the table stays as fast after a million spills as after one). */
static void sp_remove(struct spill_engine *e, struct sp_entry *ent)
{
	size_t i = (size_t)(ent - e->slots), j = i;

	for (;;) {
		size_t k;

		j = (j + 1) & e->mask;
		if (!e->slots[j].page)
			break;
		k = sp_hash(e, e->slots[j].page);
		/* Entry j may fill hole i unless its home lies in (i, j]. */
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		e->slots[i] = e->slots[j];
		i = j;
	}
	e->slots[i].page = 0;
	e->count--;
}

/* ---- ranges: registration follows the spilled pages ---- */

/* Is @addr in a region whose writes are tracked?  reg_lock held. */
static bool sp_tracked(const struct spill_engine *e, uintptr_t addr)
{
	for (uint32_t i = 0; i < e->nr_tracked; i++)
		if (e->tracked[i].start <= addr && addr < e->tracked[i].end)
			return true;
	return false;
}

static void sp_register(struct spill_engine *e, uintptr_t start, uintptr_t end, uint64_t mode)
{
	uffd_span(e->uffd, start, end, true, mode);
}

/* The bucket of the ranges starting in @addr's 2 MiB. */
static uint32_t sp_bucket_of(uintptr_t addr)
{
	return sp_fib_slot(addr >> SP_BUCKET_SHIFT, SP_BUCKET_BITS);
}

/*
 * A bucket holds its first range's id + 1, so that the table's untouched
 * zeros are empty buckets (SP_NO_RANGE + 1 wraps to 0): filling it with
 * SP_NO_RANGE made all 16 KiB of it resident in every process that spilled.
 */
static uint32_t sp_bucket_head(const struct spill_engine *e, uint32_t b)
{
	return e->bucket[b] - 1;
}

static void sp_bucket_set(struct spill_engine *e, uint32_t b, uint32_t id)
{
	e->bucket[b] = id + 1;
}

static void sp_bucket_add(struct spill_engine *e, uint32_t id)
{
	struct sp_range *r = &e->ranges[id];
	uint32_t b = sp_bucket_of(r->start), head = sp_bucket_head(e, b);

	r->bprev = SP_NO_RANGE;
	r->bnext = head;
	if (head != SP_NO_RANGE)
		e->ranges[head].bprev = id;
	sp_bucket_set(e, b, id);
	if (r->end - r->start > e->max_span)
		e->max_span = r->end - r->start;
}

static void sp_bucket_del(struct spill_engine *e, uint32_t id)
{
	struct sp_range *r = &e->ranges[id];

	if (r->bprev != SP_NO_RANGE)
		e->ranges[r->bprev].bnext = r->bnext;
	else
		sp_bucket_set(e, sp_bucket_of(r->start), r->bnext);
	if (r->bnext != SP_NO_RANGE)
		e->ranges[r->bnext].bprev = r->bprev;
}

/*
 * The buckets a range that meets [lo, hi) can start in: those of
 * [lo - max_span, hi), each bucket once at most (all of them, in their
 * order, where the span has as many).
 */
struct sp_buckets {
	uint64_t first, n;
	bool every;
};

static struct sp_buckets sp_buckets_near(const struct spill_engine *e, uintptr_t lo, uintptr_t hi)
{
	uintptr_t from = lo > e->max_span ? lo - e->max_span : 0;
	uint64_t first = from >> SP_BUCKET_SHIFT, last = (hi - 1) >> SP_BUCKET_SHIFT;
	bool every = last - first + 1 >= SP_BUCKETS;

	return (struct sp_buckets){ first, every ? SP_BUCKETS : last - first + 1, every };
}

/* The @k-th bucket of @w. */
static uint32_t sp_buckets_at(const struct sp_buckets *w, uint64_t k)
{
	return w->every ? (uint32_t)k : sp_bucket_of((uintptr_t)(w->first + k) << SP_BUCKET_SHIFT);
}

/*
 * Of the live ranges, what covers @cur furthest (*cover, 0 if none), and
 * the first start after @cur below @end (*next, else @end).  Only ranges
 * starting in [@cur - max_span, @end) can: their buckets are looked at,
 * every bucket once at most.  reg_lock held.
 */
static void sp_ranges_at(struct spill_engine *e, uintptr_t cur, uintptr_t end,
			 uintptr_t *cover, uintptr_t *next)
{
	struct sp_buckets w = sp_buckets_near(e, cur, end);

	*cover = 0;
	*next = end;
	for (uint64_t k = 0; k < w.n; k++) {
		uint32_t b = sp_buckets_at(&w, k);

		for (uint32_t i = sp_bucket_head(e, b); i != SP_NO_RANGE; i = e->ranges[i].bnext) {
			struct sp_range *r = &e->ranges[i];

			if (!atomic_load_explicit(&r->live, memory_order_acquire))
				continue;
			if (r->start <= cur && r->end > cur) {
				if (r->end > *cover)
					*cover = r->end;
			} else if (r->start > cur && r->start < *next) {
				*next = r->start;
			}
		}
	}
}

/*
 * The program unmapped [lo, hi): the ranges that meet it lose that part,
 * so that settling them later registers nothing the program mapped there
 * since.  Their pages there were forgotten first (spill_forget_range), so
 * what is left of a range holds every page it still counts.  A range with
 * the hole in its middle stays whole (a range is one span).  reg_lock
 * held.
 */
static void sp_ranges_clip(struct spill_engine *e, uintptr_t lo, uintptr_t hi)
{
	struct sp_buckets w = sp_buckets_near(e, lo, hi);

	for (uint64_t k = 0; k < w.n; k++) {
		for (uint32_t i = sp_bucket_head(e, sp_buckets_at(&w, k)), next; i != SP_NO_RANGE;
		     i = next) {
			struct sp_range *r = &e->ranges[i];

			next = r->bnext;
			if (r->start >= hi || r->end <= lo || (r->start < lo && r->end > hi))
				continue;
			if (r->start < lo) {
				r->end = lo;
				continue;
			}
			/* Its head (or all of it) went: it starts at hi now, in hi's bucket. */
			sp_bucket_del(e, i);
			r->start = hi < r->end ? hi : r->end;
			sp_bucket_add(e, i);
		}
	}
}

/*
 * Register [start, end) as what covers it asks: what a live range covers
 * for MISSING faults (when @covered_too), and write-protect tracking where
 * the region is tracked; what neither needs is unregistered.  MISSING is
 * never dropped from a covered page.  reg_lock held.
 *
 * UFFDIO_REGISTER only adds modes: the kernel skips a VMA that has every
 * mode asked for already, so registering WP over a range registered
 * MISSING | WP leaves MISSING there.  Where a closing range (@covered_too
 * false) of a tracked region drops MISSING, it is unregistered first and
 * registered WP again.  When this only registered, python3 reading back
 * every page of 250 MB spilled under memory.high=100M kept 281 MiB of its
 * heap registered MISSING with 153 pages out: a page there that the
 * allocator gave back and the program touched again faulted through the
 * handler, and those VMAs never merged again.  The unregistration clears
 * the write-protect bits of the range, so its pages read as written until
 * the next scan: they are pages that came back, written or refaulted
 * lately either way.
 */
static void sp_settle(struct spill_engine *e, uintptr_t start, uintptr_t end, bool covered_too)
{
	uintptr_t cur = start;

	while (cur < end) {
		uintptr_t next, cover;

		sp_ranges_at(e, cur, end, &cover, &next);
		if (cover) {
			cover = cover < end ? cover : end;
			if (covered_too)
				sp_register(e, cur, cover, UFFDIO_REGISTER_MODE_MISSING |
					    (sp_tracked(e, cur) ? UFFDIO_REGISTER_MODE_WP : 0));
			cur = cover;
			continue;
		}
		/* Where the program unmapped part of the range and mapped
		 * something there that takes no userfaultfd, uffd_span() does
		 * the rest mapping by mapping.  What stays registered faults
		 * through the handler, which serves zeros as the kernel would. */
		if (!covered_too || !sp_tracked(e, cur))
			uffd_span(e->uffd, cur, next, false, 0);
		if (sp_tracked(e, cur))
			sp_register(e, cur, next, UFFDIO_REGISTER_MODE_WP);
		cur = next;
	}
}

/*
 * Make the range of one spill_out call and register it for MISSING faults.
 * It starts with one live reference, the call's.  Returns the range or
 * SP_NO_RANGE with *err set.
 */
static uint32_t sp_range_open(struct spill_engine *e, uintptr_t start,
			      uintptr_t end, int *err)
{
	struct uffdio_register reg = {
		.range = { .start = start, .len = end - start },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	uint32_t id;

	pthread_mutex_lock(&e->reg_lock);
	/* A tracked region keeps its write tracking where pages are out. */
	if (sp_tracked(e, start))
		reg.mode |= UFFDIO_REGISTER_MODE_WP;
	if (e->free_range != SP_NO_RANGE) {
		id = e->free_range;
		e->free_range = e->ranges[id].next_free;
	} else if (e->ranges_hw < e->max_ranges) {
		id = e->ranges_hw++;
	} else {
		pthread_mutex_unlock(&e->reg_lock);
		*err = -ENOSPC;
		return SP_NO_RANGE;
	}
	if (ioctl(e->uffd, UFFDIO_REGISTER, &reg)) {
		*err = -errno;
		e->ranges[id].next_free = e->free_range;
		e->free_range = id;
		pthread_mutex_unlock(&e->reg_lock);
		return SP_NO_RANGE;
	}
	e->ranges[id].start = start;
	e->ranges[id].end = end;
	sp_bucket_add(e, id);
	atomic_store_explicit(&e->ranges[id].live, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&e->nr_ranges, 1, memory_order_relaxed);
	pthread_mutex_unlock(&e->reg_lock);
	return id;
}

static void sp_range_get(struct spill_engine *e, uint32_t id, unsigned n)
{
	atomic_fetch_add_explicit(&e->ranges[id].live, n, memory_order_relaxed);
}

/* Set on the handler thread: the ranges it closes wait to be settled together. */
static CGM_TLS bool sp_on_handler;

/* Forget closed range @id: its slot is free again.  reg_lock held. */
static void sp_range_free(struct spill_engine *e, uint32_t id)
{
	struct sp_range *r = &e->ranges[id];

	sp_bucket_del(e, id);
	r->end = 0;
	r->next_free = e->free_range;
	e->free_range = id;
	atomic_fetch_sub_explicit(&e->nr_ranges, 1, memory_order_release);
}

/*
 * Settle the registration of every range the handler closed and free
 * them: ranges that touch or overlap are settled as one span, two system
 * calls for all of them (a program reading back what was spilled closes
 * neighbours one after another).  What a live range covers keeps MISSING
 * (sp_settle), so it is safe at any time.  reg_lock held.
 */
static void sp_settle_closed(struct spill_engine *e)
{
	uint32_t n = e->nr_closed;

	/* By start address: a handful, in about the order they closed. */
	for (uint32_t i = 1; i < n; i++) {
		uint32_t id = e->closed[i], j = i;

		while (j > 0 && e->ranges[e->closed[j - 1]].start > e->ranges[id].start) {
			e->closed[j] = e->closed[j - 1];
			j--;
		}
		e->closed[j] = id;
	}
	for (uint32_t i = 0; i < n;) {
		uintptr_t start = e->ranges[e->closed[i]].start, end = e->ranges[e->closed[i]].end;

		while (++i < n && e->ranges[e->closed[i]].start <= end)
			if (e->ranges[e->closed[i]].end > end)
				end = e->ranges[e->closed[i]].end;
		sp_settle(e, start, end, false);
	}
	for (uint32_t i = 0; i < n; i++)
		sp_range_free(e, e->closed[i]);
	e->nr_closed = 0;
}

/* The handler, before it sleeps, forks or stops: what it closed is settled. */
static void sp_settle_closed_now(struct spill_engine *e)
{
	if (!e->nr_closed)
		return;	/* (the handler's own count: no lock to look) */
	pthread_mutex_lock(&e->reg_lock);
	sp_settle_closed(e);
	pthread_mutex_unlock(&e->reg_lock);
}

/*
 * Drop one live reference; the last one unregisters the range (what no
 * other range needs) and frees it.  On the handler, the range waits for
 * the handler to sleep, up to SP_CLOSED_MAX of them: settled at once,
 * each took two registration calls (sp_settle), and sqlite3 reading back
 * its whole cache (bench/spill_workload.sh) had the handler spend 1.9 s
 * in 55,000 of them against 2.8 s in its 97,792 page copies (perf trace).
 * Until then it stays registered MISSING where nothing is spilled: a
 * fault there is served zeros, as the kernel would.
 */
static void sp_range_put(struct spill_engine *e, uint32_t id)
{
	struct sp_range *r = &e->ranges[id];

	if (atomic_fetch_sub_explicit(&r->live, 1, memory_order_acq_rel) != 1)
		return;
	pthread_mutex_lock(&e->reg_lock);
	if (sp_on_handler) {
		e->closed[e->nr_closed++] = id;
		if (e->nr_closed == SP_CLOSED_MAX)
			sp_settle_closed(e);
	} else {
		sp_settle(e, r->start, r->end, false);
		sp_range_free(e, id);
	}
	pthread_mutex_unlock(&e->reg_lock);
}

/* ---- putting pages in place ---- */

static void sp_wake(struct spill_engine *e, uintptr_t page)
{
	ioctl(e->uffd, UFFDIO_WAKE,
	      &(struct uffdio_range){ .start = page, .len = SP_PAGE });
}

/*
 * UFFDIO_COPY @src to @page on the program uffd; with @wake, wake the
 * threads that wait for it, whether or not the copy succeeds.  A page
 * someone placed first (EEXIST) counts as placed.  Returns 0, or -errno
 * when the page cannot be placed at all (the program unmapped it, or the
 * range was unregistered).
 */
static int sp_place(struct spill_engine *e, uintptr_t page, const void *src,
		    bool wake)
{
	struct uffdio_copy c;
	int err;

	for (;;) {
		c = (struct uffdio_copy){
			.dst = page, .src = (uintptr_t)src, .len = SP_PAGE,
			.mode = wake ? 0 : UFFDIO_COPY_MODE_DONTWAKE,
		};
		if (!ioctl(e->uffd, UFFDIO_COPY, &c)) {
			sp_note_back(e, page, page + SP_PAGE);
			return 0;
		}
		if (errno != EAGAIN)
			break;
	}
	err = errno;
	/*
	 * A copy that fails wakes nobody, and a thread may wait for this
	 * page even where the copy cannot go: UFFDIO_UNREGISTER wakes the
	 * range before it clears it, and a fault taken under the per-VMA
	 * lock can queue in between (ENOENT here); it would sleep for ever.
	 * Woken, it faults again and the kernel fills the page.
	 */
	if (wake)
		sp_wake(e, page);
	return err == EEXIST ? 0 : -err;
}

/* Serve a fault on a page that has no entry: never there, or already back. */
static void sp_place_zero(struct spill_engine *e, uintptr_t page)
{
	/*
	 * A copy of zeros, not UFFDIO_ZEROPAGE: a page the program discarded
	 * while write-protected (MADV_DONTNEED in a tracked region) keeps a
	 * uffd-wp marker, which ZEROPAGE refuses with EEXIST as if the page
	 * were there -- the thread would fault again for ever -- and COPY
	 * replaces.  EEXIST from COPY is a page really there: just wake.
	 */
	sp_place(e, page, e->zeros, true);
	atomic_fetch_add_explicit(&e->zero_filled, 1, memory_order_relaxed);
}

/* The pool lost a page: as a failed swap-in, the process gets SIGBUS. */
static CGM_COLD void sp_lost(uintptr_t page, int err)
{
	cgm_log("spill: page %#lx cannot be loaded from the pool (%s): SIGBUS",
		(unsigned long)page, cgm_strerror(-err));
	kill(getpid(), SIGBUS);
}

/*
 * A restore's copy failed.  Where the program unmapped the page that is
 * as it should be; where the page is still mapped, its contents are lost
 * (the program will read zeros there), which must never happen: say so
 * (test_spill's test_unplaced_said makes it happen behind the engine's
 * back).
 */
static CGM_COLD void sp_unplaced(uintptr_t page, int err)
{
	unsigned char vec;

	if (mincore((void *)page, SP_PAGE, &vec) == 0)
		cgm_log("spill: page %#lx could not be put back (%s): its contents are lost",
			(unsigned long)page, cgm_strerror(-err));
}

/*
 * Lock the table and find @page's entry once it is STORED, waiting while
 * it is in transit or being loaded.  NULL (and the lock released) if the
 * page has no entry.
 */
static struct sp_entry *sp_claim(struct spill_engine *e, uintptr_t page)
{
	struct sp_entry *ent;

	pthread_mutex_lock(&e->lock);
	while ((ent = sp_lookup(e, page)) && ent->state != SP_STORED)
		pthread_cond_wait(&e->changed, &e->lock);
	if (!ent)
		pthread_mutex_unlock(&e->lock);
	return ent;
}

/* A claimed entry has left the table: its page leaves the pool. */
static void sp_release(struct spill_engine *e, zp_entry_t zent)
{
	zp_invalidate(e->pool, zent);
	/* Release: what was counted for the page before is seen with it (spill_stats). */
	atomic_fetch_sub_explicit(&e->in_pool, 1, memory_order_release);
}

/*
 * Bring @page back from the pool through @bounce and count it in @counter.
 * Waits while the page is in transit or another thread brings it back.
 * The waiters are woken by the copy itself, before the bookkeeping: the
 * faulting thread can see the page as soon as it is placed anyway (it
 * need not have slept), so delaying the wake would only add latency.
 * Returns 1 if this call placed it, 0 if it had no entry (or a concurrent
 * bringer placed it), -1 if the pool lost it (SIGBUS raised; nothing
 * placed, not even zeros).
 */
static int sp_restore(struct spill_engine *e, uintptr_t page, void *bounce,
		      atomic_uint_fast64_t *counter)
{
	struct sp_entry *ent = sp_claim(e, page);
	zp_entry_t zent;
	uint32_t range, seq;
	int err;

	if (!ent)
		return 0;
	ent->state = SP_LOADING;
	zent = ent->zent;
	range = ent->range;
	seq = ent->seq;
	pthread_mutex_unlock(&e->lock);

	err = zp_load(e->pool, zent, bounce);
	if (err) {
		sp_lost(page, err);
		return -1;
	}
	/* A page the program unmapped meanwhile cannot be placed: its entry
	 * goes all the same. */
	err = sp_place(e, page, bounce, true);
	if (err)
		sp_unplaced(page, err);

	pthread_mutex_lock(&e->lock);
	sp_remove(e, sp_lookup(e, page));
	pthread_cond_broadcast(&e->changed);
	pthread_mutex_unlock(&e->lock);
	/* Counted before it leaves the pool: a reader that sees it gone sees it counted. */
	atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
	if (counter == &e->refaulted)
		sp_refaulted_at(e, page, seq);
	sp_release(e, zent);
	sp_range_put(e, range);
	return 1;
}

/*
 * Drop @page's entry without putting the page back: the program discarded
 * it (MADV_DONTNEED, munmap), so a later touch reads zeros, as it would
 * have.  Waits for a page in transit or being loaded.  Returns 1 if an
 * entry went.
 */
static int sp_forget(struct spill_engine *e, uintptr_t page)
{
	struct sp_entry *ent = sp_claim(e, page);
	zp_entry_t zent;
	uint32_t range;

	if (!ent)
		return 0;
	zent = ent->zent;
	range = ent->range;
	sp_remove(e, ent);
	pthread_cond_broadcast(&e->changed);
	pthread_mutex_unlock(&e->lock);
	atomic_fetch_add_explicit(&e->forgotten, 1, memory_order_relaxed);
	sp_release(e, zent);
	sp_range_put(e, range);
	return 1;
}

/*
 * Serve a fault at @page: bring it back, or, if it has no entry (never
 * spilled, or already back), fill it with zeros -- under the table lock,
 * so that no spill_out() can enter and move the page out between the look
 * and the fill (the fill would then hide the stored copy behind zeros).
 */
static void sp_serve(struct spill_engine *e, uintptr_t page)
{
	for (;;) {
		if (sp_restore(e, page, e->bounce, &e->refaulted))
			return;
		pthread_mutex_lock(&e->lock);
		if (!sp_lookup(e, page)) {
			sp_place_zero(e, page);
			pthread_mutex_unlock(&e->lock);
			return;
		}
		/* Spilled again meanwhile: bring that back. */
		pthread_mutex_unlock(&e->lock);
	}
}

/* ---- readahead ---- */

/*
 * Most pages read ahead after a fault: 128 KiB, the most the kernel's
 * readahead of swap by address reads (with vm.page-cluster 5; 8 pages at
 * its default 3).  A walk through spilled pages faults once per window,
 * and a fault costs the walker a round trip to the handler (25 us here,
 * against a few for a page read ahead); the pages of a window go with
 * one copy (sp_read_span).
 */
#define SP_RA_MAX	32

/* A readahead page claimed for its run: what its bookkeeping needs once placed. */
struct sp_claimed {
	zp_entry_t zent;
	uint32_t range;
};

/*
 * Claim the stored pages from @page on, below @to, as long as they follow
 * each other (at most SP_SPAN_MAX): they are SP_LOADING when this returns
 * how many.  A page in transit or being loaded ends the run; readahead
 * does not wait for it.
 */
static unsigned sp_claim_run(struct spill_engine *e, uintptr_t page, uintptr_t to,
			     struct sp_claimed *run)
{
	uint32_t mark = atomic_load_explicit(&e->mark_seq, memory_order_relaxed);
	unsigned n = 0, since_mark = 0;

	pthread_mutex_lock(&e->lock);
	for (; page < to && n < SP_SPAN_MAX; page += SP_PAGE, n++) {
		struct sp_entry *ent = sp_lookup(e, page);

		if (!ent || ent->state != SP_STORED)
			break;
		ent->state = SP_LOADING;
		run[n].zent = ent->zent;
		run[n].range = ent->range;
		since_mark += sp_after_mark(ent->seq, mark);
	}
	pthread_mutex_unlock(&e->lock);
	/* Read ahead, these come back as surely as by a fault (spill_refaults_since_mark). */
	if (since_mark)
		atomic_fetch_add_explicit(&e->refaulted_since_mark, since_mark, memory_order_relaxed);
	return n;
}

/*
 * Place @n pages from @src at @page on with one copy.  Where that stops
 * short -- a page of the run there already, the run crossing into another
 * mapping (a copy stays within one), a mapping changing meanwhile -- the
 * rest goes a page at a time, each with what a single page's copy does
 * about it.  Whoever waits on one of them is woken.
 */
static void sp_place_run(struct spill_engine *e, uintptr_t page, const unsigned char *src,
			 unsigned n)
{
	struct uffdio_copy c = { .dst = page, .src = (uintptr_t)src, .len = (uint64_t)n * SP_PAGE };
	unsigned done;

	if (n == 0)
		return;
	if (!ioctl(e->uffd, UFFDIO_COPY, &c)) {
		sp_note_back(e, page, page + (uintptr_t)n * SP_PAGE);
		return;
	}
	done = c.copy > 0 ? (unsigned)((uint64_t)c.copy / SP_PAGE) : 0;
	if (done)
		sp_note_back(e, page, page + (uintptr_t)done * SP_PAGE);
	for (unsigned i = done; i < n; i++) {
		int err = sp_place(e, page + (uintptr_t)i * SP_PAGE, src + (size_t)i * SP_PAGE, true);

		if (err)
			sp_unplaced(page + (uintptr_t)i * SP_PAGE, err);
	}
}

/*
 * Bring back the spilled and stored pages of [@from, @to): each run of
 * pages that follow each other with one copy (a copy costs the handler a
 * system call, the mmap lock and a look-up of the mapping, whatever its
 * length).
 */
static void sp_read_span(struct spill_engine *e, uintptr_t from, uintptr_t to)
{
	struct sp_claimed run[SP_SPAN_MAX];

	while (from < to) {
		unsigned n = sp_claim_run(e, from, to, run), loaded = 0;

		if (!n) {
			from += SP_PAGE;
			continue;
		}
		for (; loaded < n; loaded++) {
			int err = zp_load(e->pool, run[loaded].zent, e->span + (size_t)loaded * SP_PAGE);

			if (err) {
				/* As sp_restore(): the lost page stays claimed; SIGBUS is on its way. */
				sp_lost(from + (uintptr_t)loaded * SP_PAGE, err);
				break;
			}
		}
		e->span_used = true;
		sp_place_run(e, from, e->span, loaded);
		pthread_mutex_lock(&e->lock);
		for (unsigned i = 0; i < n; i++) {
			struct sp_entry *ent = sp_lookup(e, from + (uintptr_t)i * SP_PAGE);

			if (i < loaded)
				sp_remove(e, ent);
			else if (i > loaded)
				ent->state = SP_STORED;	/* not tried: after a lost page */
		}
		pthread_cond_broadcast(&e->changed);
		pthread_mutex_unlock(&e->lock);
		atomic_fetch_add_explicit(&e->readahead, loaded, memory_order_relaxed);
		for (unsigned i = 0; i < loaded; i++) {
			sp_release(e, run[i].zent);
			sp_range_put(e, run[i].range);
		}
		if (loaded < n)
			return;
		from += (uintptr_t)n * SP_PAGE;
	}
}

/*
 * A fault at @page brings back the other spilled pages of its aligned
 * cluster of SP_CLUSTER, as the kernel's swap readahead brings back a
 * page's cluster (page-cluster) -- when they are likely to be wanted:
 *  - the fault is a refault within the working set (the page came back
 *    soon after it left): the pages around it are likely as hot, a
 *    program's hot data lying together more often than not;
 *  - or another page of the cluster faulted within the last
 *    SP_SEEN_FAULTS faults: the program is working through the cluster
 *    (python3 walking its hot records in random order, whose first
 *    faults after a long time are not refaults within the working set).
 * A cluster's first fault after long reads nothing ahead, so a program
 * that touches one cold page here and there brings back that page alone;
 * the kernel adapts its window by readahead hits, which needs the
 * accessed bit this engine cannot see.
 * bench/spill_workload.sh (one run each, working phase under memory.high
 * at half the peak, against no limit): python3 dict 2.57x -> 1.79x with
 * clusters of 8 for refaults within the working set, 1.85x with 16;
 * sqlite3 2.55x -> 2.16x, 1.92x; the faults within the working set
 * 17,272 -> 3,701 -> 1,883 (python3).
 */
#define SP_CLUSTER	16
_Static_assert(SP_RA_MAX <= SP_SPAN_MAX && SP_CLUSTER <= SP_SPAN_MAX,
	       "a window or a cluster goes back with one copy");

static bool sp_cluster_seen(struct spill_engine *e, uintptr_t base)
{
	struct sp_seen *s = &e->seen[(base / (SP_CLUSTER * SP_PAGE)) % SP_SEEN_SLOTS];
	bool seen = s->base == base && e->faults - s->fault <= SP_SEEN_FAULTS;

	s->base = base;
	s->fault = e->faults;
	return seen;
}

/*
 * A cluster's readahead waits until no fault is there to serve, and then
 * goes SP_RA_STEP pages at a time, a look for a fault between steps: the
 * faulting thread is already running again, and its next fault, likely
 * elsewhere (a program going through its records in random order), is
 * served first rather than after the cluster.  A cluster of pages that
 * idled into zstd takes the handler 16 decompressions (about 100 us); its
 * next fault waited for them.  The oldest pending cluster goes when a
 * ninth comes.
 */
static void sp_ra_defer(struct spill_engine *e, uintptr_t from, uintptr_t to)
{
	if (e->ra_count == SP_RA_PENDING) {
		e->ra_head = (e->ra_head + 1) % SP_RA_PENDING;
		e->ra_count--;
	}
	e->ra_pending[(e->ra_head + e->ra_count) % SP_RA_PENDING] =
		(struct sp_ra_span){ .from = from, .to = to };
	e->ra_count++;
}

/* One step of the oldest pending cluster readahead. */
static void sp_ra_step(struct spill_engine *e)
{
	struct sp_ra_span *r = &e->ra_pending[e->ra_head];
	uintptr_t to = r->to - r->from > SP_RA_STEP * SP_PAGE ? r->from + SP_RA_STEP * SP_PAGE : r->to;

	sp_read_span(e, r->from, to);
	r->from = to;
	if (r->from >= r->to) {
		e->ra_head = (e->ra_head + 1) % SP_RA_PENDING;
		e->ra_count--;
	}
}

static void sp_cluster_readahead(struct spill_engine *e, uintptr_t page)
{
	uintptr_t base = page & ~(uintptr_t)(SP_CLUSTER * SP_PAGE - 1);
	bool seen = sp_cluster_seen(e, base);

	/* (@page itself is back: not stored, so the span skips it.) */
	if (seen || sp_is_hot(e, page))
		sp_ra_defer(e, base, base + SP_CLUSTER * SP_PAGE);
}

/*
 * After serving a fault at @page: a program walking its spilled pages in
 * order faults at the next page, or just past what was read ahead for it;
 * then the window doubles (2, 4, ... 32) and the pages after @page that are
 * spilled come back before they are touched, as the kernel's swap
 * readahead does.  Walks are followed as streams, eight at once: threads
 * walking their own pages fault in turn, and each keeps its window (with
 * one, every fault broke the other's: bench/spill_bench's four walking
 * threads faulted three times as often once cluster readahead no longer
 * covered for it).  A fault that continues no stream starts one, in
 * place of the stream that faulted least recently, and reads its cluster.
 */
static void sp_readahead(struct spill_engine *e, uintptr_t page)
{
	struct sp_stream *s = NULL, *old = &e->streams[0];
	uintptr_t from, to;

	e->faults++;
	for (unsigned i = 0; i < SP_STREAMS && !s; i++) {
		struct sp_stream *c = &e->streams[i];

		if (c->fault && (page == c->last + SP_PAGE || (c->end && page == c->end)))
			s = c;
		else if (c->fault < old->fault)
			old = c;
	}
	if (s) {
		s->window = s->window ? 2 * s->window : 2;
		if (s->window > SP_RA_MAX)
			s->window = SP_RA_MAX;
	} else {
		s = old;
		s->window = 0;
		s->end = 0;
	}
	s->last = page;
	s->fault = e->faults;
	if (!s->window) {
		sp_cluster_readahead(e, page);
		return;
	}
	from = page + SP_PAGE > s->end ? page + SP_PAGE : s->end;
	to = page + (s->window + 1) * SP_PAGE;
	sp_read_span(e, from, to);
	s->end = to;
}

/* ---- the handler thread ---- */

/*
 * How long the handler keeps looking for the next fault before it sleeps:
 * SP_SPIN_NS after a lone fault; SP_SPIN_BURST_NS when the fault came
 * within that long of the one before.  A program that faults every
 * 50-200 us (python3 bringing its working set back, between faults its
 * own work and its reclaim) then finds the handler awake for most faults
 * instead of paying its wake-up each time: the working phase of
 * bench/spill_workload.sh's python3 (memory.high at half its peak) went
 * from 7.2 to 4.9 s (medians of 4 interleaved pairs), its CPU time within
 * a few percent.
 */
#define SP_SPIN_NS		(50 * 1000)
#define SP_SPIN_BURST_NS	(200 * 1000)

static int64_t sp_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * A burst of faults: from a fault that finds the handler asleep until it
 * sleeps again (its spin after the last fault included).  The thread that
 * faulted sleeps meanwhile, and its CPU, idle, halts; waking it again is
 * most of a refault on a KVM guest whose idle vCPUs halt at once
 * (guest_halt_poll_ns 0 here: 10-15 us of bench/spill_bench's 21-26 us
 * lz4 p50).  A CPU latency request of 0 for the burst makes idle CPUs
 * poll instead (the request is machine-wide), and the woken thread runs
 * at once: lz4 p50 11-12 us, zstd 19-21 against 46-48, the refault walk
 * 343-355 MB/s against 131 (spill_bench 3 rounds of 2048 pages, two
 * interleaved pairs).  python3's working phase of bench/spill_workload.sh
 * shows no difference above the noise: medians 3.11 s against 3.19 over
 * 12 interleaved pairs, shorter in 6.  Each change of the request costs a
 * write and wakes the idle CPUs once, off the faulting thread's path.
 */
#define SP_QOS_POLL	0
#define SP_QOS_NONE	2000000000	/* the kernel's default: no constraint */

/* Not the device any more (sp_fd_still): the engine leaves the descriptor alone. */
static void sp_qos_set(struct spill_engine *e, int32_t us)
{
	if (!sp_fd_still(e->qos_fd, &e->qos_id)) {
		__atomic_store_n(&e->qos_err, EBADF, __ATOMIC_RELAXED);
		cgm_fd_forget(e->qos_fd);
		e->qos_fd = -1;		/* not ours any more: not closed */
		return;
	}
	if (write(e->qos_fd, &us, sizeof(us)) != (ssize_t)sizeof(us)) {
		/* Refused now (it never is once open): ask no more. */
		__atomic_store_n(&e->qos_err, errno ? errno : EIO, __ATOMIC_RELAXED);
		cgm_fd_close(e->qos_fd);
		e->qos_fd = -1;
	}
}

static void sp_burst_start(struct spill_engine *e)
{
	if (e->in_burst)
		return;
	e->in_burst = true;
	atomic_fetch_add_explicit(&e->bursts, 1, memory_order_relaxed);
	if (e->qos_fd < 0)
		return;
	sp_qos_set(e, SP_QOS_POLL);
	if (e->qos_fd >= 0)
		atomic_fetch_add_explicit(&e->bursts_polled, 1, memory_order_relaxed);
}

static void sp_burst_end(struct spill_engine *e)
{
	if (!e->in_burst)
		return;
	e->in_burst = false;
	if (e->qos_fd >= 0)
		sp_qos_set(e, SP_QOS_NONE);
}

static void sp_fork_event(struct spill_engine *e, int ufd);

/*
 * While held off: read what the uffd reports, keeping the faults for
 * later (e->held) and dealing with a fork's report at once -- the forking
 * thread waits in fork() until it is read, and a hold-off must not hold
 * it.  False once a fork was reported (the hold-off ends: what the fork
 * asks of the handler is its loop's) or nothing more can be kept.
 */
static bool sp_hold_read(struct spill_engine *e)
{
	struct uffd_msg msg[SP_MSGS];
	ssize_t n = read(e->uffd, msg, (SP_MSGS - e->nheld) * sizeof(msg[0]));
	bool forked = false;

	for (size_t i = 0; n > 0 && i < (size_t)n / sizeof(msg[0]); i++) {
		if (msg[i].event == UFFD_EVENT_FORK) {
			sp_fork_event(e, (int)msg[i].arg.fork.ufd);
			forked = true;
		} else if (msg[i].event == UFFD_EVENT_PAGEFAULT) {
			e->held[e->nheld++] = msg[i];
		}
	}
	return !forked && e->nheld < SP_MSGS;
}

/*
 * Tell the served hook that @back pages came back, and hold off for as
 * long as it asks (memory.high's throttle of the threads that fault pages
 * back): faults wait meanwhile.  A fork asked for (wake_fd) or the
 * engine's stop ends the wait early, leaving its descriptor readable for
 * the handler's loop, and so does a fork reported (sp_hold_read).  The
 * burst ends first: no CPU latency request is held while nothing is
 * served.  Not while a fork is under way (the table frozen).
 */
static void sp_served(struct spill_engine *e, uint64_t back)
{
	struct pollfd p[3] = {
		{ .fd = e->stop_fd, .events = POLLIN },
		{ .fd = e->wake_fd, .events = POLLIN },
		{ .fd = e->uffd, .events = POLLIN },
	};
	int64_t start, until;
	unsigned ms;

	if (!e->served || !back)
		return;
	ms = e->served(back);
	if (!ms || atomic_load_explicit(&e->fork_state, memory_order_acquire) != SP_FORK_NONE)
		return;
	sp_burst_end(e);
	/* The threads that fault meanwhile wait: a stall, as while faults are served. */
	if (e->serving)
		e->serving(true);
	start = sp_now_ns();
	until = start + (int64_t)(ms > SP_HOLD_OFF_MAX_MS ? SP_HOLD_OFF_MAX_MS : ms) * 1000000;
	for (int64_t left; (left = until - sp_now_ns()) > 0;) {
		int slice = (int)((left + 999999) / 1000000), n;

		if (e->holding && slice > SP_HOLD_SLICE_MS)
			slice = SP_HOLD_SLICE_MS;
		n = poll(p, 3, slice);
		if (n < 0 || p[0].revents || p[1].revents ||
		    (p[2].revents & (POLLERR | POLLHUP | POLLNVAL)))
			break;
		if ((p[2].revents & POLLIN) && !sp_hold_read(e))
			break;
		if (e->holding && e->holding(sp_now_ns() - start, false))
			break;
	}
	if (e->holding)
		e->holding(sp_now_ns() - start, true);
	if (e->serving)
		e->serving(false);
	atomic_fetch_add_explicit(&e->held_off, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&e->held_off_ms, (uint64_t)(sp_now_ns() - start) / 1000000,
				  memory_order_relaxed);
}

/* The faults read while held off, or what the uffd holds now. */
static ssize_t sp_read_msgs(struct spill_engine *e, struct uffd_msg *msg)
{
	ssize_t n = (ssize_t)(e->nheld * sizeof(*msg));

	if (!e->nheld)
		return read(e->uffd, msg, SP_MSGS * sizeof(*msg));
	memcpy(msg, e->held, (size_t)n);
	e->nheld = 0;
	return n;
}

/*
 * A readahead step with no fault waiting: what it brings back is told to
 * the served hook, as after a fault; not to the serving one (no thread
 * waits for these pages: no stall).
 */
static void sp_ra_served(struct spill_engine *e)
{
	uint64_t back = atomic_load_explicit(&e->readahead, memory_order_relaxed);

	sp_ra_step(e);
	sp_served(e, atomic_load_explicit(&e->readahead, memory_order_relaxed) - back);
}

/* ---- fork: the table frozen while the kernel copies the address space ---- */

/*
 * Drop @page's entry, its page being in place (put back in the fork
 * window, or found resident by a forked child), and count it in @counter
 * if there is one.
 */
static void sp_drop_entry(struct spill_engine *e, uintptr_t page, atomic_uint_fast64_t *counter)
{
	struct sp_entry *ent = sp_claim(e, page);
	zp_entry_t zent;
	uint32_t range, seq;

	if (!ent)
		return;
	zent = ent->zent;
	range = ent->range;
	seq = ent->seq;
	sp_remove(e, ent);
	pthread_cond_broadcast(&e->changed);
	pthread_mutex_unlock(&e->lock);
	if (counter) {
		atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
		sp_refaulted_at(e, page, seq);
	}
	sp_release(e, zent);
	sp_range_put(e, range);
}

static bool sp_resident(uintptr_t page)
{
	unsigned char vec;

	return !mincore((void *)page, SP_PAGE, &vec) && (vec & 1);
}

/* Every entry whose page is resident goes (a cursor, as sp_restore_all). */
static void sp_drop_resident(struct spill_engine *e, atomic_uint_fast64_t *counter)
{
	pthread_mutex_lock(&e->lock);
	for (size_t cur = 0; cur <= e->mask; cur++) {
		struct sp_entry *ent = &e->slots[cur];
		uintptr_t page = ent->page;

		if (!page || ent->state != SP_STORED || !sp_resident(page))
			continue;
		pthread_mutex_unlock(&e->lock);
		sp_drop_entry(e, page, counter);
		pthread_mutex_lock(&e->lock);
	}
	pthread_mutex_unlock(&e->lock);
}

/*
 * Serve a fault while a fork copies the address space.  The child gets a
 * copy of the table and of the pool, so neither may change: the page is
 * put back but its entry stays, listed in frozen, and goes at the thaw.
 * Listed before it is placed, so a child that has the page has it listed.
 * zp_load counts itself in on the entry while it reads, and a copy made
 * during that read would keep the count (the object could then never be
 * written back, nor its zspage compacted or freed): frozen_loading tells
 * the child.  A copy sees a prefix of this thread's stores (a store to a
 * page already copied waits for the fork to end), so a child that has
 * the count has frozen_loading too.
 */
static void sp_serve_frozen(struct spill_engine *e, uintptr_t page)
{
	struct sp_entry *ent;
	zp_entry_t zent;
	int err;

	pthread_mutex_lock(&e->lock);
	/* Nothing is in transit or loading: the forking thread keeps spill_out out. */
	ent = sp_lookup(e, page);
	if (!ent || ent->state != SP_STORED) {
		if (!ent)
			sp_place_zero(e, page);
		pthread_mutex_unlock(&e->lock);
		return;
	}
	zent = ent->zent;
	if (e->nr_frozen < SP_FROZEN_MAX)
		e->frozen[e->nr_frozen++] = page;
	else
		e->frozen_overflow = true;
	pthread_mutex_unlock(&e->lock);
	atomic_store_explicit(&e->frozen_loading, zent, memory_order_seq_cst);
	err = zp_load(e->pool, zent, e->bounce);
	atomic_store_explicit(&e->frozen_loading, 0, memory_order_release);
	if (err) {
		sp_lost(page, err);
		return;
	}
	err = sp_place(e, page, e->bounce, true);
	if (err)
		sp_unplaced(page, err);
}

/*
 * After the copy: the entries of pages put back in the fork window go.
 * In the parent (@counter: refaulted) every listed page was put back; in
 * the child (@counter NULL) only those put back before the copy are there.
 */
static void sp_thaw(struct spill_engine *e, atomic_uint_fast64_t *counter)
{
	for (uint32_t i = 0; i < e->nr_frozen; i++)
		if (counter || sp_resident(e->frozen[i]))
			sp_drop_entry(e, e->frozen[i], counter);
	if (e->frozen_overflow)
		sp_drop_resident(e, counter);
	e->nr_frozen = 0;
	e->frozen_overflow = false;
}

/* One byte and room for one descriptor (SCM_RIGHTS), for the fork socket. */
struct sp_fd_msg {
	char byte;
	struct iovec iov;
	struct msghdr m;
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} c;	/* last: its size is not a constant to clang */
};

static void sp_fd_msg_init(struct sp_fd_msg *x)
{
	memset(x, 0, sizeof(*x));
	x->byte = 'u';
	x->iov = (struct iovec){ &x->byte, 1 };
	x->m = (struct msghdr){ .msg_iov = &x->iov, .msg_iovlen = 1,
				.msg_control = x->c.buf, .msg_controllen = sizeof(x->c.buf) };
}

/* SCM_RIGHTS: @fd through the socket @sock. */
static int sp_send_fd(int sock, int fd)
{
	struct sp_fd_msg x;
	struct cmsghdr *h;

	sp_fd_msg_init(&x);
	h = CMSG_FIRSTHDR(&x.m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof(int));
	return sendmsg(sock, &x.m, MSG_NOSIGNAL | MSG_DONTWAIT) == 1 ? 0 : -errno;
}

/* The descriptor that came through @sock, or -1 (the parent sent none). */
static int sp_recv_fd(int sock)
{
	struct sp_fd_msg x;
	struct cmsghdr *h;
	ssize_t n;
	int fd = -1;

	sp_fd_msg_init(&x);
	do
		n = recvmsg(sock, &x.m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	h = n == 1 && !(x.m.msg_flags & MSG_CTRUNC) ? CMSG_FIRSTHDR(&x.m) : NULL;
	if (h && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS &&
	    h->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(h), sizeof(int));
	return fd;
}

/*
 * The kernel made the child's uffd (UFFD_EVENT_FORK: the child's ranges
 * are registered on it and the forking thread waits until this message is
 * read).  A fork spill_fork_prepare() announced gets it through the socket
 * and the table thaws; any other fork (a raw clone() or _Fork(), which run
 * no fork handler) cannot be served from here.
 */
static void sp_fork_event(struct spill_engine *e, int ufd)
{
	unsigned st = atomic_load_explicit(&e->fork_state, memory_order_acquire);
	int err = -EPIPE;

	pthread_mutex_lock(&e->fork_lock);
	if (st == SP_FORK_FROZEN && e->fork_sock[0] >= 0)
		err = sp_send_fd(e->fork_sock[0], ufd);
	pthread_mutex_unlock(&e->fork_lock);
	if (!err) {
		atomic_store_explicit(&e->fork_announced, false, memory_order_release);
		/*
		 * The child's copy of the table and the pool is this one, as
		 * long as it stays frozen: its faults are served from here
		 * until its own handler runs (that thread's start, its main
		 * thread's fork handlers may touch spilled pages).
		 */
		e->child_uffd = ufd;
		e->nr_child_served = 0;
		e->child_deadline = sp_now_ns() + SP_CHILD_WAIT_NS;
		atomic_store_explicit(&e->fork_state, SP_FORK_CHILD, memory_order_release);
		return;
	}
	close(ufd);
	/*
	 * Announced but not handed over: every spilled page came back before
	 * it.  (The flag goes with the report it announced, not in the fork
	 * handler: the handler may take the message in hand only after fork()
	 * has returned.  A fork with nothing registered is not reported: the
	 * next unannounced one then goes unsaid.)  An unseen fork is said
	 * only while pages are spilled: a fork the handlers saw restored them
	 * all first (the forking thread holds the shim's spill lock until
	 * fork() returns, so none left since), and its child reads what it
	 * should, whatever the flag says.  The flag alone gave the warning on
	 * ordinary forks: 3 runs of 9 of a perl forking readers under
	 * memory.max with spill_fork_lazy=0.
	 */
	if (st != SP_FORK_FROZEN && st != SP_FORK_THAW &&
	    !atomic_exchange_explicit(&e->fork_announced, false, memory_order_acq_rel) &&
	    atomic_load_explicit(&e->nr_ranges, memory_order_acquire))
		cgm_log("spill: a fork the library's fork handlers did not see (a raw clone() or "
			"_Fork()): the child reads zeros where pages were spilled");
	else if (err != -EPIPE)
		cgm_log("spill: cannot hand the forked child its userfaultfd (%s): it puts its "
			"spilled pages back itself", cgm_strerror(-err));
	if (st == SP_FORK_FROZEN || st == SP_FORK_THAW) {
		sp_thaw(e, &e->refaulted);
		atomic_store_explicit(&e->fork_state, SP_FORK_NONE, memory_order_release);
	}
}

/* A fault of the child's, served from the frozen table (the child's is the same). */
static void sp_serve_child(struct spill_engine *e, uintptr_t page)
{
	const void *src = e->zeros;
	struct sp_entry *ent;
	zp_entry_t zent = 0;
	bool stored;

	pthread_mutex_lock(&e->lock);
	ent = sp_lookup(e, page);
	stored = ent && ent->state == SP_STORED;
	if (stored)
		zent = ent->zent;
	pthread_mutex_unlock(&e->lock);
	if (stored) {
		if (zp_load(e->pool, zent, e->bounce))
			return;	/* the child's own handler will find it lost too */
		src = e->bounce;
		/* Its entry goes in the child (listed after the count; past the bound, it looks at all). */
		if (e->nr_child_served < SP_FROZEN_MAX)
			e->child_served[++e->nr_child_served] = page;
	}
	for (;;) {
		struct uffdio_copy c = { .dst = page, .src = (uintptr_t)src, .len = SP_PAGE };

		if (!ioctl(e->child_uffd, UFFDIO_COPY, &c) || errno != EAGAIN)
			break;
	}
	ioctl(e->child_uffd, UFFDIO_WAKE, &(struct uffdio_range){ .start = page, .len = SP_PAGE });
}

/*
 * Serve what the child asked; once its handler runs (it says so on the
 * socket, or hangs up), or it took too long, let it go and thaw.
 */
static void sp_child_service(struct spill_engine *e)
{
	struct uffd_msg msg[SP_MSGS];
	struct pollfd p = { .fd = e->fork_sock[0], .events = POLLIN };
	ssize_t n;

	while ((n = read(e->child_uffd, msg, sizeof(msg))) > 0)
		for (size_t i = 0; i < (size_t)n / sizeof(msg[0]); i++)
			if (msg[i].event == UFFD_EVENT_PAGEFAULT)
				sp_serve_child(e, (uintptr_t)msg[i].arg.pagefault.address &
							  ~(SP_PAGE - 1));
	if (poll(&p, 1, 0) == 0 && sp_now_ns() < e->child_deadline)
		return;
	if (!p.revents)
		cgm_log("spill: the forked child's handler did not start in 5 s: it is left to "
			"itself");
	close(e->child_uffd);
	e->child_uffd = -1;
	/* Which pages it got from here, for its table (all at once; none past the bound). */
	e->child_served[0] = e->nr_child_served;
	if (e->nr_child_served == SP_FROZEN_MAX)
		e->child_served[0] = UINTPTR_MAX;	/* some not listed */
	if (send(e->fork_sock[0], e->child_served,
		 (1 + (e->nr_child_served < SP_FROZEN_MAX ? e->nr_child_served : 0)) *
		 sizeof(uintptr_t), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* The child is gone. */
	}
	e->nr_child_served = 0;
	sp_thaw(e, &e->refaulted);
	atomic_store_explicit(&e->fork_state, SP_FORK_NONE, memory_order_release);
}

static void sp_trim_scratch(struct spill_engine *e);

/*
 * One thread serves every fault.  A second one was tried (2026-12-07): a
 * helper that also read the uffd, woken when the handler read two faults
 * at once and asleep again after 2 ms without one; it served a fault as
 * sp_serve() does, with its own bounce page, and stepped aside before a
 * fork froze the table.  In bench/spill_bench (6 rounds of 4096 lz4
 * pages, with and without it in one process, 5 runs) it left 1 and 2
 * faulting threads where they were (one thread's p50 14.7-17.0 us
 * without it, 15.2-16.5 with it; two threads' 22.6-24.2 without,
 * 22.5-27.2 with) and took 4 threads' p50 from 42.6-52.1 us to
 * 34.9-41.6, but their p99.9 from 0.15-0.21 ms to 1.5-2.3 ms: on 2
 * CPUs, a faulting thread, the spinning handler and the helper contend
 * for the CPUs, and a helper preempted holding a fault holds it for a
 * scheduler slice.  Woken whenever a fault had waited for
 * the handler, it made one thread's p50 2.5-3 us worse.  The bare round
 * trip with two servers (RESULTS-spill.md) gains more than the engine
 * did, having less to do for each fault on the contended CPUs.
 */
/*
 * Pages the handler put in place so far: brought back, read ahead, or
 * zeros where nothing was spilled (a first touch, while the regions are
 * caught: a page charged as much as one brought back).
 */
static uint64_t sp_back_count(struct spill_engine *e)
{
	return atomic_load_explicit(&e->refaulted, memory_order_relaxed) +
	       atomic_load_explicit(&e->readahead, memory_order_relaxed) +
	       atomic_load_explicit(&e->zero_filled, memory_order_relaxed);
}

static void *sp_handler(void *arg)
{
	struct spill_engine *e = arg;
	struct pollfd pfd[3] = {
		{ .fd = e->uffd, .events = POLLIN },
		{ .fd = e->stop_fd, .events = POLLIN },
		{ .fd = e->wake_fd, .events = POLLIN },
	};
	struct uffd_msg msg[SP_MSGS];
	int64_t spin_until = 0, last_fault = 0;
	/*
	 * The idle work is not done: look again at once.  A fault ends it:
	 * idle work waits for idle_ms without faults again, so a program that
	 * faults often never has a fault wait behind it.
	 */
	bool more = false;

	sp_on_handler = true;
	/* Past the thread's start (spill_open waits for this). */
	atomic_store_explicit(&e->running, true, memory_order_release);
	/* In a forked child: until the parent no longer serves it (spill_fork_child). */
	while (!atomic_load_explicit(&e->go, memory_order_acquire)) {
		struct timespec ts = { 0, 10000 };

		nanosleep(&ts, NULL);
	}
	for (;;) {
		uint64_t back;
		unsigned fs = atomic_load_explicit(&e->fork_state, memory_order_acquire);
		bool frozen;
		ssize_t n;

		/* A fork asks for the table frozen; one that failed, thawed. */
		if (fs == SP_FORK_ASKED)
			sp_settle_closed_now(e);
		if (fs == SP_FORK_ASKED &&
		    atomic_compare_exchange_strong(&e->fork_state, &fs, SP_FORK_FROZEN))
			fs = SP_FORK_FROZEN;
		if (fs == SP_FORK_THAW) {
			sp_thaw(e, &e->refaulted);
			atomic_store_explicit(&e->fork_state, SP_FORK_NONE, memory_order_release);
			fs = SP_FORK_NONE;
		}
		if (fs == SP_FORK_CHILD) {
			sp_child_service(e);
			fs = atomic_load_explicit(&e->fork_state, memory_order_acquire);
		}
		frozen = fs == SP_FORK_FROZEN || fs == SP_FORK_CHILD;

		/*
		 * Faults come in bursts (a program walking what was spilled):
		 * for a moment after serving one, look for the next without
		 * sleeping.  Waking a handler blocked in poll() on the other
		 * CPU is most of a refault's cost (ARCHITECTURE.md: 48-50 us
		 * blocking, 16.6 us busy-polling).  Bounded, so an idle engine
		 * costs nothing.
		 */
		n = sp_read_msgs(e, msg);
		if (n <= 0 && frozen) {
			/* Nothing that changes the table or the pool: only faults and the fork. */
			struct pollfd fp[5] = { pfd[0], pfd[1], pfd[2],
						{ .fd = e->child_uffd, .events = POLLIN },
						{ .fd = e->fork_sock[0], .events = POLLIN } };
			bool child = fs == SP_FORK_CHILD;

			poll(fp, child ? 5 : 3, child ? 10 : -1);
			if (fp[2].revents)
				eventfd_read(e->wake_fd, &(eventfd_t){ 0 });
			continue;
		}
		if (n <= 0 && e->ra_count) {
			/* Paused: what was pending is dropped, not kept for later. */
			if (atomic_load_explicit(&e->ra_paused, memory_order_relaxed))
				e->ra_count = 0;
			else
				sp_ra_served(e);
			continue;
		}
		if (n <= 0) {
			if (sp_now_ns() < spin_until) {
				cgm_cpu_relax();
				continue;
			}
			/* Going to sleep: what the refaults freed in the pool goes now. */
			zp_release_freed(e->pool);
			sp_settle_closed_now(e);
			sp_burst_end(e);
			n = poll(pfd, 3, !e->idle ? -1 : more ? 0 : e->idle_ms);
			if (n < 0)
				continue;	/* EINTR cannot happen (signals blocked) */
			if (pfd[1].revents)
				break;
			if (pfd[2].revents) {
				eventfd_read(e->wake_fd, &(eventfd_t){ 0 });
				continue;
			}
			if (pfd[0].revents & POLLNVAL) {
				/*
				 * The program closed the userfaultfd (closing every
				 * descriptor it did not open): its registrations are
				 * gone, and the pages spilled read as zeros (README).
				 * Nothing is left to serve; the handler spun here.
				 * Only a raw close_range() gets past shim/fd_guard.c.
				 */
				cgm_fd_forget(e->uffd);	/* the guards leave a reused number alone */
				cgm_log("spill: the program closed the engine's userfaultfd: the pages "
					"it had spilled read as zeros; the handler stops");
				break;
			}
			if (n == 0) {
				more = e->idle();
				if (!more)
					sp_trim_scratch(e);
			}
			continue;
		}
		sp_burst_start(e);
		{
			int64_t now = sp_now_ns();

			spin_until = now + (now - last_fault < SP_SPIN_BURST_NS ? SP_SPIN_BURST_NS :
					    SP_SPIN_NS);
			last_fault = now;
		}
		more = false;
		back = sp_back_count(e);
		if (e->serving)
			e->serving(true);
		for (size_t i = 0; i < (size_t)n / sizeof(msg[0]); i++) {
			uintptr_t page;

			if (msg[i].event == UFFD_EVENT_FORK) {
				sp_fork_event(e, (int)msg[i].arg.fork.ufd);
				continue;
			}
			if (msg[i].event != UFFD_EVENT_PAGEFAULT)
				continue;
			page = (uintptr_t)msg[i].arg.pagefault.address & ~(SP_PAGE - 1);
			if (frozen) {
				sp_serve_frozen(e, page);
				continue;
			}
			sp_serve(e, page);
			if (e->ra_on && !atomic_load_explicit(&e->ra_paused, memory_order_relaxed))
				sp_readahead(e, page);
		}
		if (e->serving)
			e->serving(false);
		sp_served(e, sp_back_count(e) - back);
	}
	sp_settle_closed_now(e);
	atomic_store_explicit(&e->running, false, memory_order_release);
	return NULL;
}

/* ---- opening ---- */

/* A number from /proc or /sys (a decimal at the start of the file), or @dflt. */
static long sp_read_long(const char *path, long dflt)
{
	char buf[32];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return dflt;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return dflt;
	buf[n] = '\0';
	return buf[0] >= '0' && buf[0] <= '9' ? strtol(buf, NULL, 10) : dflt;
}

/* The mappings this process has now (the lines of /proc/self/maps), or 0. */
static long sp_count_maps(void)
{
	char buf[8192];
	long lines = 0;
	ssize_t n;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			lines += buf[i] == '\n';
	close(fd);
	return lines;
}

/*
 * The most ranges the engine keeps open.  Each is a mapping of its own
 * in the kernel (its registration splits the program's mapping around
 * it): up to two more towards the process's vm.max_map_count (65530 by
 * default).  A process at that count can no longer mmap, mprotect or
 * munmap in the middle of a mapping, and malloc returns NULL: spilling
 * every other page of 800 MB, one page a call, made 32,741 ranges and
 * 65,531 mappings, after which malloc(64 MiB) failed.  So the ranges stay
 * within what leaves the program a quarter of the count on top of the
 * mappings it has at the start, less SP_OWN_MAPS for the engine's own:
 * its tables and its thread's stack, mapped after the count is taken
 * (test_range_budget under TSan came one mapping past its bound of 16
 * without them); past that, spill_out() says -ENOSPC until ranges close.
 */
#define SP_OWN_MAPS	32

static uint32_t sp_range_budget(void)
{
	long max = sp_read_long("/proc/sys/vm/max_map_count", 65530);
	long room = max - sp_count_maps() - max / 4 - SP_OWN_MAPS;

	return room < 2 ? 1 : room / 2 > UINT32_MAX ? UINT32_MAX : (uint32_t)(room / 2);
}

/*
 * A uffd that serves system calls too, with @features; -errno on failure,
 * said in one line that begins with @lead (spill_probe: "spill=1 refused:
 * ", which scripts look for) and ends with @tail.
 */
/* Why there is no userfaultfd (@err), in one line: what sp_uffd_new_said returns then. */
static CGM_COLD int sp_uffd_refused(int err, const char *lead, const char *tail)
{
	if (err == EPERM)
		cgm_log("%suserfaultfd refused (without user-mode-only, "
			"which system calls need): run as root, or grant "
			"CAP_SYS_PTRACE, sysctl vm.unprivileged_userfaultfd=1, "
			"or read-write access to /dev/userfaultfd%s", lead, tail);
	else if (err == ENOSYS)
		cgm_log("%sthis kernel has no userfaultfd%s", lead, tail);
	else
		cgm_log("%suserfaultfd: %s%s", lead, cgm_strerror(err), tail);
	return err == ENOSYS ? -EOPNOTSUPP : -err;
}

/*
 * (Its messages are out of it: spill=1's start-up runs it, and its code
 * lies with the library's hot code, where there is little room:
 * shim/warm-text.ld.)
 */
static int sp_uffd_new_said(uint64_t features, const char *lead, const char *tail)
{
	struct uffdio_api api = { .api = UFFD_API, .features = features };
	int fd, dev;

	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 && errno == EPERM) {
		dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
		if (dev < 0) {
			errno = EPERM;
		} else {
			fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
			close(dev);
		}
	}
	if (fd < 0)
		return sp_uffd_refused(errno, lead, tail);
	if (ioctl(fd, UFFDIO_API, &api) || (api.features & features) != features) {
		cgm_log("%sthis kernel's userfaultfd lacks UFFDIO_MOVE "
			"(Linux 6.8 or later is needed)%s", lead, tail);
		close(fd);
		return -EOPNOTSUPP;
	}
	return fd;
}

static int sp_uffd_new(uint64_t features)
{
	return sp_uffd_new_said(features, "spill: ", "");
}

/* A uffd with @features if the kernel has them, else -1, without a word. */
static int sp_uffd_quiet(uint64_t features)
{
	struct uffdio_api api = { .api = UFFD_API, .features = features };
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd < 0) {
		int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);

		if (dev < 0)
			return -1;
		fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
		close(dev);
		if (fd < 0)
			return -1;
	}
	if (ioctl(fd, UFFDIO_API, &api) || (api.features & features) != features) {
		close(fd);
		return -1;
	}
	return fd;
}

int spill_probe(void)
{
	int fd = sp_uffd_new_said(UFFD_FEATURE_MOVE, "spill=1 refused: ", ": spilling off");

	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

static size_t sp_table_slots(size_t max_pages)
{
	size_t n = 64;

	while (n < 2 * max_pages)
		n *= 2;
	return n;
}

static size_t sp_stage_bytes(void)
{
	return (size_t)SP_LANES * SP_LANE_PAGES * SP_PAGE;
}

static void sp_free(struct spill_engine *e)
{
	/* One closed behind our back may be a file of the program's by now. */
	sp_fd_drop(e->uffd, &e->uffd_id);
	sp_fd_drop(e->stage_uffd, &e->stage_id);
	sp_fd_drop(e->stop_fd, &e->stop_id);
	sp_fd_drop(e->wake_fd, &e->wake_id);
	sp_fd_drop(e->qos_fd, &e->qos_id);	/* the request goes with it */
	if (e->live_sock >= 0 && sp_fd_still(e->live_sock, &e->live_id))
		close(e->live_sock);
	for (int i = 0; i < 2; i++)
		if (e->fork_sock[i] >= 0)
			close(e->fork_sock[i]);
	sp_unmap(e->slots, (e->mask + 1) * sizeof(*e->slots));
	sp_unmap(e->ranges, (size_t)e->max_ranges * sizeof(*e->ranges));
	sp_unmap(e->bucket, SP_BUCKETS * sizeof(*e->bucket));
	sp_unmap(e->stage, sp_stage_bytes());
	sp_unmap(e->copy, (size_t)SP_LANES * SP_COPY_PAGES * SP_PAGE);
	sp_unmap(e->bounce, SP_PAGE);
	sp_unmap(e->span, SP_SPAN_MAX * SP_PAGE);
	sp_unmap(e->zeros, SP_PAGE);
	sp_unmap(e->hot, SP_HOT_SLOTS * sizeof(*e->hot));
	sp_unmap(e->tracked, SP_TRACK_MAX * sizeof(*e->tracked));
	sp_unmap(e->frozen, SP_FROZEN_MAX * sizeof(*e->frozen));
	sp_unmap(e->child_served, (SP_FROZEN_MAX + 1) * sizeof(*e->child_served));
	sp_fd_drop(e->pagemap_fd, &e->pagemap_id);
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->changed);
	pthread_mutex_destroy(&e->reg_lock);
	pthread_mutex_destroy(&e->lane_lock);
	pthread_cond_destroy(&e->lane_free);
	pthread_mutex_destroy(&e->fork_lock);
	sp_unmap(e, sizeof(*e));
}

int spill_open(const struct spill_options *opt, struct spill_engine **enginep)
{
	struct spill_engine *e;
	struct uffdio_register reg;
	sigset_t all, old;
	size_t nslots;
	uint32_t budget;
	int err;

	if (!opt || !opt->pool || !enginep)
		return -EINVAL;
	e = sp_map(sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->pool = opt->pool;
	e->idle = opt->idle_ms ? opt->idle : NULL;
	e->serving = opt->serving;
	e->served = opt->served;
	e->holding = opt->holding;
	e->ra_on = opt->readahead;
	e->idle_ms = opt->idle_ms > 60000 ? 60000 : (int)opt->idle_ms;
	e->hot_ms = opt->hot_ms ? opt->hot_ms : SP_HOT_MS;
	atomic_store(&e->hot_age_ms, e->hot_ms);
	e->uffd = e->stage_uffd = e->stop_fd = e->pagemap_fd = e->qos_fd = e->wake_fd = -1;
	e->fork_sock[0] = e->fork_sock[1] = e->child_uffd = e->live_sock = -1;
	atomic_store(&e->go, true);
	e->create_thread = opt->create_thread ? opt->create_thread : pthread_create;
	pthread_mutex_init(&e->fork_lock, NULL);
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->changed, NULL);
	pthread_mutex_init(&e->reg_lock, NULL);
	pthread_mutex_init(&e->lane_lock, NULL);
	pthread_cond_init(&e->lane_free, NULL);

	e->max_pages = opt->max_pages ? opt->max_pages : (size_t)1 << 20;
	e->max_slots = sp_table_slots(e->max_pages);
	nslots = e->max_slots < SP_TABLE_START ? e->max_slots : SP_TABLE_START;
	e->mask = nslots - 1;
	e->max_ranges = opt->max_ranges ? (uint32_t)opt->max_ranges : 1u << 16;
	budget = sp_range_budget();
	if (e->max_ranges > budget)
		e->max_ranges = budget;
	e->free_range = SP_NO_RANGE;
	e->slots = sp_map(nslots * sizeof(*e->slots));
	e->ranges = sp_map((size_t)e->max_ranges * sizeof(*e->ranges));
	e->bucket = sp_map(SP_BUCKETS * sizeof(*e->bucket));	/* all empty (sp_bucket_head) */
	e->stage = sp_map(sp_stage_bytes());
	e->copy = sp_map((size_t)SP_LANES * SP_COPY_PAGES * SP_PAGE);
	e->bounce = sp_map(SP_PAGE);
	e->span = sp_map(SP_SPAN_MAX * SP_PAGE);
	e->zeros = sp_map(SP_PAGE);
	e->hot = sp_map(SP_HOT_SLOTS * sizeof(*e->hot));
	atomic_store_explicit(&e->hot_bits, SP_HOT_MIN_BITS, memory_order_relaxed);
	e->tracked = sp_map(SP_TRACK_MAX * sizeof(*e->tracked));
	e->frozen = sp_map(SP_FROZEN_MAX * sizeof(*e->frozen));
	e->child_served = sp_map((SP_FROZEN_MAX + 1) * sizeof(*e->child_served));
	err = -ENOMEM;
	if (!e->slots || !e->ranges || !e->bucket || !e->stage || !e->copy || !e->bounce || !e->span || !e->zeros ||
	    !e->hot || !e->tracked || !e->frozen || !e->child_served)
		goto fail;
	madvise(e->stage, sp_stage_bytes(), MADV_NOHUGEPAGE);

	/* Write tracking where the kernel has it (6.7); spilling works without. */
	e->pagemap_fd = -1;
	/* Each descriptor kept (cgm/own_fds.h): a program closing all of its own must not take them. */
	/*
	 * And fork events where the kernel lets this process have them
	 * (CAP_SYS_PTRACE): a forked child then gets its copy of the engine
	 * (spill_fork_prepare); without them every page comes back first.
	 */
	e->fork_events = true;
	e->uffd = sp_uffd_quiet(UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_EVENT_FORK);
	if (e->uffd < 0) {
		e->fork_events = false;
		e->uffd = sp_uffd_quiet(UFFD_FEATURE_WP_ASYNC);
	}
	e->uffd = cgm_fd_keep(e->uffd);
	if (e->uffd >= 0) {
		e->pagemap_fd = cgm_fd_keep(open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
		e->wp_async = e->pagemap_fd >= 0;
		sp_fd_note(e->pagemap_fd, &e->pagemap_id);
	} else {
		e->fork_events = true;
		e->uffd = sp_uffd_quiet(UFFD_FEATURE_EVENT_FORK);
		if (e->uffd < 0) {
			e->fork_events = false;
			e->uffd = sp_uffd_new(0);
		}
		e->uffd = cgm_fd_keep(e->uffd);
	}
	err = e->uffd;
	if (err < 0)
		goto fail;
	sp_fd_note(e->uffd, &e->uffd_id);
	err = e->stage_uffd = cgm_fd_keep(sp_uffd_new(UFFD_FEATURE_MOVE));
	if (err < 0)
		goto fail;
	sp_fd_note(e->stage_uffd, &e->stage_id);
	reg = (struct uffdio_register){
		.range = { .start = (uintptr_t)e->stage, .len = sp_stage_bytes() },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	if (ioctl(e->stage_uffd, UFFDIO_REGISTER, &reg)) {
		err = -errno;
		cgm_log("spill: cannot register the staging area: %s",
			cgm_strerror(errno));
		goto fail;
	}
	e->stop_fd = cgm_fd_keep(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
	if (e->stop_fd < 0) {
		err = -errno;
		goto fail;
	}
	sp_fd_note(e->stop_fd, &e->stop_id);
	e->wake_fd = cgm_fd_keep(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
	if (e->wake_fd < 0) {
		err = -errno;
		goto fail;
	}
	sp_fd_note(e->wake_fd, &e->wake_id);
	/* Opened, the request asks nothing yet (the default: no constraint). */
	if (opt->cpu_latency) {
		e->qos_fd = open("/dev/cpu_dma_latency", O_WRONLY | O_CLOEXEC);
		e->qos_err = e->qos_fd < 0 ? errno : 0;
		e->qos_fd = cgm_fd_keep(e->qos_fd);
		if (e->qos_fd >= 0)
			sp_fd_note(e->qos_fd, &e->qos_id);
	}

	/* The handler starts with every signal blocked: a signal handler
	 * that touched a spilled page there would wait for itself. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = -e->create_thread(&e->thread, NULL, sp_handler, e);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		goto fail;
	/*
	 * Nothing is spilled before the handler runs: a new thread reads the
	 * program's memory before its start function (glibc's start_thread
	 * reads the locale's ctype tables, which setlocale() put in the
	 * heap), and a page of it spilled meanwhile would fault to the
	 * handler itself.  sort, whose engine was made at its first reclaim
	 * (under a group over memory.max) and spilled at once, hung there
	 * with its main thread, in 1 of 4 runs of ten sorts from perl.
	 */
	for (int i = 0; i < 20000 && !atomic_load_explicit(&e->running, memory_order_acquire); i++) {
		struct timespec ts = { 0, 10000 };

		nanosleep(&ts, NULL);
	}
	*enginep = e;
	return 0;
fail:
	sp_free(e);
	return err;
}

/* ---- spilling ---- */

static unsigned sp_lane_get(struct spill_engine *e)
{
	unsigned lane;

	pthread_mutex_lock(&e->lane_lock);
	while (e->lane_busy == (1u << SP_LANES) - 1)
		pthread_cond_wait(&e->lane_free, &e->lane_lock);
	lane = (unsigned)__builtin_ctz(~e->lane_busy);
	e->lane_busy |= 1u << lane;
	pthread_mutex_unlock(&e->lane_lock);
	return lane;
}

static unsigned char *sp_lane_base(struct spill_engine *e, unsigned lane)
{
	return e->stage + (size_t)lane * SP_LANE_PAGES * SP_PAGE;
}

/* Clear the used slots of @lane, which the caller holds. */
static void sp_lane_clear(struct spill_engine *e, unsigned lane)
{
	/* The staging area is on a uffd without EVENT_REMOVE: no one waits. */
	if (e->lane_used[lane])
		madvise(sp_lane_base(e, lane), e->lane_used[lane] * SP_PAGE, MADV_DONTNEED);
	/* (Read by spill_stats() without the lane.) */
	__atomic_store_n(&e->lane_used[lane], 0, __ATOMIC_RELAXED);
}

/* @n empty slots of @lane for the next batch (the lane cleared first if it has not as many). */
static unsigned char *sp_lane_slots(struct spill_engine *e, unsigned lane, unsigned n)
{
	if (e->lane_used[lane] + n > SP_LANE_PAGES)
		sp_lane_clear(e, lane);
	return sp_lane_base(e, lane) + (size_t)e->lane_used[lane] * SP_PAGE;
}

/* The batch just spilled left copies in @n slots of @lane: clear once a batch's worth are used. */
static void sp_lane_used(struct spill_engine *e, unsigned lane, unsigned n)
{
	__atomic_store_n(&e->lane_used[lane], e->lane_used[lane] + n, __ATOMIC_RELAXED);
	if (e->lane_used[lane] >= SP_BATCH)
		sp_lane_clear(e, lane);
}

/* Take @lane if no one holds it (the lanes' idle upkeep, which never waits for one). */
static bool sp_lane_take(struct spill_engine *e, unsigned lane)
{
	bool mine;

	pthread_mutex_lock(&e->lane_lock);
	mine = !(e->lane_busy & (1u << lane));
	if (mine)
		e->lane_busy |= 1u << lane;
	pthread_mutex_unlock(&e->lane_lock);
	return mine;
}

static void sp_lane_put(struct spill_engine *e, unsigned lane)
{
	pthread_mutex_lock(&e->lane_lock);
	e->lane_busy &= ~(1u << lane);
	pthread_cond_signal(&e->lane_free);
	pthread_mutex_unlock(&e->lane_lock);
}

/*
 * Every page of the hot-page table has expired (none became hot within
 * hot_ms): the table goes back to the kernel too, and reads as zeros --
 * no page -- until a refault writes it again.  Hash-spread, its slots
 * touched every page of it: after python3 read back a dict of 300,000
 * strings, 256 KiB stayed resident for good.  A page that becomes hot
 * while it goes may be forgotten, as when its slot is reused (the hot
 * flag is advice).
 */
static void sp_trim_hot(struct spill_engine *e)
{
	if (!atomic_load_explicit(&e->hot_written, memory_order_relaxed) ||
	    sp_ms_now() - atomic_load_explicit(&e->hot_last_ms, memory_order_relaxed) < e->hot_ms)
		return;
	/* Cleared first: a page that becomes hot meanwhile sets it again. */
	atomic_store_explicit(&e->hot_written, false, memory_order_relaxed);
	madvise(e->hot, SP_HOT_SLOTS * sizeof(*e->hot), MADV_DONTNEED);
}

/*
 * The handler idle (no fault for idle_ms, and its idle work done): the
 * scratch pages written since the last time go back to the kernel --
 * the lanes' copy pages, the readahead span, the pool's compression
 * contexts -- and are faulted in again at their next use.  Written once,
 * they stayed resident for good, charged to the group as anon that
 * nothing can spill: up to 256 + 128 KiB here and 128 KiB a context in
 * the pool, in each process.  A pipeline of seven small processes under
 * memory.high=6M (check-spill-programs) held 0.6-1 MB of anon in each
 * (tee: 850 KiB, against 320 with spill=0 and 116 without the library).
 * Lanes and contexts in use are left for the next time.  While reclaim
 * spills without a fault, this runs every idle_ms: a lane's 16 copy
 * pages faulted in again per 100 ms.
 */
static void sp_trim_scratch(struct spill_engine *e)
{
	/* (What a reclaim's end clears already: staging copies a spill_out() left.) */
	spill_stage_clear(e);
	sp_shrink(e);
	if (e->span_used) {
		madvise(e->span, SP_SPAN_MAX * SP_PAGE, MADV_DONTNEED);
		e->span_used = false;
	}
	for (unsigned lane = 0; lane < SP_LANES; lane++) {
		if (!atomic_load_explicit(&e->copy_used[lane], memory_order_relaxed) ||
		    !sp_lane_take(e, lane))
			continue;
		madvise(e->copy + (size_t)lane * SP_COPY_PAGES * SP_PAGE, SP_COPY_PAGES * SP_PAGE,
			MADV_DONTNEED);
		atomic_store_explicit(&e->copy_used[lane], false, memory_order_relaxed);
		sp_lane_put(e, lane);
	}
	sp_trim_hot(e);
	zp_trim(e->pool);
}

/* Drop the entries of the pages of a batch marked in @in (left in place). */
static void sp_drop(struct spill_engine *e, uintptr_t addr, const bool *in,
		    unsigned n, uint32_t range)
{
	unsigned dropped = 0;

	pthread_mutex_lock(&e->lock);
	for (unsigned i = 0; i < n; i++) {
		if (!in[i])
			continue;
		sp_remove(e, sp_lookup(e, addr + i * SP_PAGE));
		dropped++;
	}
	pthread_cond_broadcast(&e->changed);
	pthread_mutex_unlock(&e->lock);
	for (unsigned i = 0; i < dropped; i++)
		sp_range_put(e, range);
}

/*
 * Move the entered pages of a batch into @stage.  Sets moved[i] for each
 * page that left; a page whose move fails is left where it was (EBUSY: a
 * folio shared since fork, and busy[i] is set; ENOENT: not present).
 */
static void sp_move(struct spill_engine *e, uintptr_t addr, unsigned char *stage,
		    const bool *in, bool *moved, bool *busy, unsigned n)
{
	for (unsigned i = 0; i < n;) {
		unsigned j = i, tries = 0;

		if (!in[i]) {
			i++;
			continue;
		}
		while (j < n && in[j])
			j++;
		while (i < j) {
			struct uffdio_move m = {
				.dst = (uintptr_t)stage + i * SP_PAGE,
				.src = addr + i * SP_PAGE,
				.len = (j - i) * SP_PAGE,
				.mode = UFFDIO_MOVE_MODE_DONTWAKE,
			};
			unsigned done;
			int err = 0;

			if (ioctl(e->stage_uffd, UFFDIO_MOVE, &m))
				err = errno;
			done = err ? (m.move > 0 ? (unsigned)(m.move / SP_PAGE) : 0) : j - i;
			for (unsigned k = 0; k < done; k++)
				moved[i + k] = true;
			i += done;
			if (!err)
				break;
			/* EAGAIN: a THP split or an mm change raced; try again. */
			if (err == EAGAIN && ++tries < 4)
				continue;
			busy[i] = err == EBUSY;
			i++;	/* the page at i stays */
			tries = 0;
		}
	}
}

/*
 * A page whose move was reported failed must still be in the program and
 * its staging slot empty -- but the kernel does not always say what it
 * moved.  Linux 6.18's move_pages() keeps the -EAGAIN of an internal retry
 * (a PTE that changed under it: a write resolving a write-protect fault
 * of the tracking, an accessed bit) for the rest of the call, so the batch
 * it moves after the retry is neither counted nor stepped over: the next
 * step finds its own page in the staging slot and the call fails with
 * EEXIST, having moved up to a page table's worth of pages it reports as
 * not moved.  Measured here with two threads writing 64 write-tracked
 * pages: 15 moves in 20,000 said 0 pages and EEXIST and had moved all 64
 * (test_spill's test_move_misreport makes it happen through the engine,
 * `make kernel-uffd-move` without it).  Dropping the entries of such pages lost them: the staging area
 * was cleared, and the program read zeros there (the rare crash of
 * tests/spill/test_spill_programs.sh).  So a page reported not moved whose
 * staging slot holds a page has moved: it is stored like the others.
 * Costs a mincore only when a move failed.
 */
static void sp_check_left(struct spill_engine *e, unsigned char *stage, const bool *in,
			  bool *moved, unsigned n)
{
	unsigned char vec[SP_BATCH];
	unsigned found = 0;
	bool any = false;

	for (unsigned i = 0; i < n; i++)
		any |= in[i] && !moved[i];
	if (!any || mincore(stage, n * SP_PAGE, vec) != 0)
		return;
	for (unsigned i = 0; i < n; i++)
		if (in[i] && !moved[i] && (vec[i] & 1)) {
			moved[i] = true;
			found++;
		}
	if (found)
		atomic_fetch_add_explicit(&e->misreported, found, memory_order_relaxed);
}

/*
 * Enter the pages @want[] of the batch at @addr in the table and move them
 * to @stage: moved[i] is set for each that left.  The others leave the
 * table again; busy[i] is set for those refused as shared since a fork.
 */
static void sp_take(struct spill_engine *e, uintptr_t addr, unsigned n, unsigned char *stage,
		    uint32_t range, const bool *want, bool *moved, bool *busy)
{
	bool in[SP_BATCH] = { false }, left[SP_BATCH];
	unsigned entered = 0;

	pthread_mutex_lock(&e->lock);
	for (unsigned i = 0; i < n; i++)
		if (want[i] && sp_insert(e, addr + i * SP_PAGE, range)) {
			in[i] = true;
			entered++;
		}
	pthread_mutex_unlock(&e->lock);
	sp_range_get(e, range, entered);
	sp_move(e, addr, stage, in, moved, busy, n);
	sp_check_left(e, stage, in, moved, n);
	for (unsigned i = 0; i < n; i++) {
		left[i] = in[i] && !moved[i];
		/* Moved after all (sp_check_left): in transit, never to be written to. */
		busy[i] = busy[i] && left[i];
	}
	sp_drop(e, addr, left, n, range);
}

/* /proc/self/pagemap: the page is mapped by this process alone (mapcount 1). */
#define SP_PM_EXCLUSIVE	(1ULL << 56)
#define SP_PM_PRESENT	(1ULL << 63)

/*
 * Make the pages busy[] of the batch at @addr the process's own again, so
 * that a move takes them; returns how many were.  A page present at a
 * fork stays marked copy-on-write shared -- the kernel clears its
 * anon-exclusive mark -- until the program writes it, even once the child
 * is gone, and UFFDIO_MOVE refuses it with EBUSY: after one fork (a child
 * that exits) every page the program does not write again could never be
 * spilled, and each cost a failed move at every lap (python3 holding
 * 87 MB under memory.max=48M, three forks: 24 s, 27 s of it in the
 * kernel, every child dead in its first allocation).  An atomic add of 0
 * through FUTEX_WAKE_OP (nobody woken) writes each without changing a
 * byte, whatever other threads write meanwhile, and the kernel, finding
 * the page mapped once, takes it back as the process's own without a
 * copy; an address unmapped meanwhile is EFAULT, not a signal.
 *
 * A page another process still maps (pagemap's exclusive bit is clear)
 * is copied by that write, and the copy spilled: the other keeps the
 * original.  The parent at its limit thereby makes room while its child
 * runs -- python3's children, refused their first allocation since the
 * parent's restore took the group over memory.max, died in 3 of 3 forks
 * when only pages mapped once were taken -- and the child, which charges
 * only what it does not share, is charged for the original from its next
 * sample.  In a forked child it would be a loss (spill_unshare_shared):
 * the child is not charged for the page, and would hold a compressed copy
 * of it besides.  Never on the handler thread: a page the program dropped
 * meanwhile would fault to the handler itself.
 */
static unsigned sp_unshare(struct spill_engine *e, uintptr_t addr, const bool *busy, unsigned n)
{
	bool keep_shared = atomic_load_explicit(&e->keep_shared, memory_order_relaxed);
	uint64_t pm[SP_BATCH];
	unsigned done = 0;
	ssize_t got;

	if (pthread_equal(pthread_self(), e->thread))
		return 0;
	if (keep_shared) {
		if (e->pagemap_fd < 0)
			return 0;
		got = pread(e->pagemap_fd, pm, n * sizeof(pm[0]),
			    (off_t)(addr / SP_PAGE * sizeof(pm[0])));
		if (got != (ssize_t)(n * sizeof(pm[0])))
			return 0;
	}
	for (unsigned i = 0; i < n; i++) {
		uint32_t *word = (uint32_t *)(addr + i * SP_PAGE);

		if (!busy[i] || (keep_shared && (pm[i] & (SP_PM_PRESENT | SP_PM_EXCLUSIVE)) !=
						(SP_PM_PRESENT | SP_PM_EXCLUSIVE)) ||
		    syscall(SYS_futex, word, FUTEX_WAKE_OP | FUTEX_PRIVATE_FLAG, 0, (void *)0, word,
			    FUTEX_OP(FUTEX_OP_ADD, 0, FUTEX_OP_CMP_EQ, 0)) < 0)
			continue;
		done++;
	}
	if (done)
		atomic_fetch_add_explicit(&e->unshared, done, memory_order_relaxed);
	return done;
}

/*
 * Copy the moved pages among slots [@from, @from + @n) of @stage into
 * @copy (slot i at page i - @from) through the kernel; false when it did
 * not copy them all, and the caller reads them in place.
 *
 * A moved page sits at a new address, and on this VM (PVM: the host keeps
 * shadow page tables) the first touch of an address whose page-table
 * entry is new costs a trip to the host: 5-7 us a page, against 1 us for
 * the move and 4-5 us for lz4's compression of it.  The kernel reads the
 * page through its own mapping, with no new entry to fault in: 0.6-0.9 us
 * a page in 64-page calls, copy included, 2.8 us in 2-page ones; fewer
 * than SP_COPY_MIN pages are read in place.  On other machines the read
 * is a memcpy the compression then finds in the cache.
 * bench/spill_bench's spill_out with lz4: 219-224 MB/s read in place,
 * 294-313 MB/s from the copy (2026-12-05).  A process whose seccomp
 * filter refuses the call reads in place from then on.  read_in_place in
 * spill_stats counts the pages read in place, either way.
 */
static bool sp_read_staged(struct spill_engine *e, const unsigned char *stage, const bool *moved,
			   unsigned from, unsigned n, unsigned char *copy)
{
	struct iovec local[SP_COPY_PAGES], remote[SP_COPY_PAGES];
	unsigned runs = 0;
	size_t bytes = 0;
	ssize_t got;

	if (atomic_load_explicit(&e->no_copy, memory_order_relaxed))
		return false;
	for (unsigned i = from; i < from + n; i++) {
		if (!moved[i])
			continue;
		if (i > from && moved[i - 1]) {
			local[runs - 1].iov_len += SP_PAGE;
			remote[runs - 1].iov_len += SP_PAGE;
		} else {
			local[runs] = (struct iovec){ copy + (size_t)(i - from) * SP_PAGE, SP_PAGE };
			remote[runs] = (struct iovec){ (void *)(stage + (size_t)i * SP_PAGE), SP_PAGE };
			runs++;
		}
		bytes += SP_PAGE;
	}
	if (!runs)
		return true;
	if (bytes < SP_COPY_MIN * SP_PAGE)
		return false;
	got = process_vm_readv(getpid(), local, runs, remote, runs, 0);
	if (got == (ssize_t)bytes)
		return true;
	if (got < 0 && (errno == ENOSYS || errno == EPERM)) {
		atomic_store_explicit(&e->no_copy, true, memory_order_relaxed);
		cgm_log("spill: process_vm_readv refused (%s): spilled pages are read in place, "
			"5 us a page slower on a VM with shadow page tables", cgm_strerror(errno));
	}
	return false;
}

/*
 * Spill one batch of up to SP_BATCH pages at @addr through the empty
 * staging slots @stage; returns pages spilled.  *@staged: whether any
 * page reached its slot (the slots then hold copies until cleared).
 * @copy: the lane's SP_COPY_PAGES pages the moved ones are read into.
 * @dense: stored with zp_store_dense().
 */
static unsigned sp_spill_batch(struct spill_engine *e, uintptr_t addr, unsigned n,
			       unsigned char *stage, unsigned char *copy, uint32_t range,
			       bool dense, bool *staged)
{
	bool want[SP_BATCH] = { false }, moved[SP_BATCH] = { false }, busy[SP_BATCH] = { false };
	bool left[SP_BATCH], copied = false;
	unsigned spilled = 0, skipped = 0, failed = 0, hot = 0, out = 0;

	pthread_mutex_lock(&e->lock);
	for (unsigned i = 0; i < n; i++) {
		want[i] = !sp_is_hot(e, addr + i * SP_PAGE);
		hot += !want[i];
	}
	pthread_mutex_unlock(&e->lock);
	atomic_fetch_add_explicit(&e->skipped_hot, hot, memory_order_relaxed);

	sp_take(e, addr, n, stage, range, want, moved, busy);
	/* Refused as shared since a fork: made the process's own, and moved again. */
	if (sp_unshare(e, addr, busy, n)) {
		memcpy(want, busy, sizeof(want));
		memset(busy, 0, sizeof(busy));
		sp_take(e, addr, n, stage, range, want, moved, busy);
	}
	for (unsigned i = 0; i < n; i++)
		out += moved[i];
	*staged = out > 0;
	skipped = n - hot - out;

	for (unsigned i = 0; i < n; i++) {
		uintptr_t page = addr + i * SP_PAGE;
		unsigned char *src = stage + i * SP_PAGE;
		zp_entry_t zent;
		int err;

		if (i % SP_COPY_PAGES == 0)
			copied = sp_read_staged(e, stage, moved, i,
						n - i < SP_COPY_PAGES ? n - i : SP_COPY_PAGES, copy);
		if (!moved[i])
			continue;
		if (copied)
			src = copy + (size_t)(i % SP_COPY_PAGES) * SP_PAGE;
		else
			atomic_fetch_add_explicit(&e->read_in_place, 1, memory_order_relaxed);
		err = dense ? zp_store_dense(e->pool, src, &zent) : zp_store(e->pool, src, &zent);
		if (err) {
			/* The pool refused: the page goes back where it was.
			 * Faults on it wait meanwhile (TRANSIT). */
			if (sp_place(e, page, src, true))
				cgm_log("spill: page %#lx: pool refused it and it "
					"cannot be put back", (unsigned long)page);
			memset(left, 0, sizeof(left));
			left[i] = true;
			sp_drop(e, addr, left, n, range);
			failed++;
			continue;
		}
		pthread_mutex_lock(&e->lock);
		sp_lookup(e, page)->zent = zent;
		sp_lookup(e, page)->state = SP_STORED;
		/* Its refault distance counts from its own place in the batch. */
		sp_lookup(e, page)->seq = sp_seq_now(e) + spilled;
		pthread_cond_broadcast(&e->changed);
		pthread_mutex_unlock(&e->lock);
		atomic_fetch_add_explicit(&e->in_pool, 1, memory_order_relaxed);
		spilled++;
	}
	atomic_fetch_add_explicit(&e->spilled, spilled, memory_order_relaxed);
	atomic_fetch_add_explicit(&e->skipped, skipped, memory_order_relaxed);
	atomic_fetch_add_explicit(&e->store_failed, failed, memory_order_relaxed);
	return spilled;
}

/*
 * Leave the hot pages at either end of [*start, *end) out of the run
 * (counted as skipped hot, as a batch counts those it keeps); false when
 * every page is hot.  Done before the run's range is registered: each
 * registration, and the unregistration when its range closes, takes the
 * mmap lock for writing and splits or merges the mapping, stalling the
 * program's page faults meanwhile.  A group whose working set does not
 * fit under its limit has reclaim meet mostly pages that came back
 * lately: python3 of bench/spill_dict.py under memory.high=159M with an
 * lz4-only pool (spill_recompress=0) skipped 19.7 million hot pages in a
 * working phase, and userfaultfd_register and _unregister took 23% of its
 * profile (perf, 6 s of it), mostly for runs that spilled nothing.
 */
static bool sp_cut_hot_ends(struct spill_engine *e, uintptr_t *start, uintptr_t *end)
{
	uintptr_t lo = *start, hi = *end;

	if (!atomic_load_explicit(&e->hot_distance, memory_order_relaxed))
		return true;
	pthread_mutex_lock(&e->lock);
	while (lo < hi && sp_is_hot(e, lo))
		lo += SP_PAGE;
	while (hi > lo && sp_is_hot(e, hi - SP_PAGE))
		hi -= SP_PAGE;
	pthread_mutex_unlock(&e->lock);
	if (lo != *start || hi != *end)
		atomic_fetch_add_explicit(&e->skipped_hot, (*end - *start - (hi - lo)) / SP_PAGE,
					  memory_order_relaxed);
	*start = lo;
	*end = hi;
	return lo < hi;
}

static long sp_out(struct spill_engine *e, void *addr, size_t npages, bool dense)
{
	uintptr_t start = (uintptr_t)addr, end = start + npages * SP_PAGE;
	uintptr_t stage = (uintptr_t)e->stage;
	unsigned lane;
	uint32_t range;
	long total = 0;
	int err;

	if (atomic_load_explicit(&e->closing, memory_order_relaxed))
		return -ESHUTDOWN;
	if (!npages)
		return 0;
	if (start % SP_PAGE || npages > (UINTPTR_MAX - start) / SP_PAGE ||
	    (start < stage + sp_stage_bytes() && end > stage))
		return -EINVAL;
	if (!sp_cut_hot_ends(e, &start, &end))
		return 0;
	npages = (end - start) / SP_PAGE;

	range = sp_range_open(e, start, end, &err);
	if (range == SP_NO_RANGE)
		return err;
	lane = sp_lane_get(e);
	for (size_t off = 0; off < npages; off += SP_BATCH) {
		unsigned n = npages - off < SP_BATCH ? (unsigned)(npages - off) : SP_BATCH;
		bool staged;

		total += sp_spill_batch(e, start + off * SP_PAGE, n, sp_lane_slots(e, lane, n),
					e->copy + (size_t)lane * SP_COPY_PAGES * SP_PAGE, range, dense,
					&staged);
		if (staged)
			atomic_store_explicit(&e->copy_used[lane], true, memory_order_relaxed);
		if (staged)
			sp_lane_used(e, lane, n);
	}
	sp_lane_put(e, lane);
	sp_range_put(e, range);
	return total;
}

long spill_out(struct spill_engine *e, void *addr, size_t npages)
{
	return sp_out(e, addr, npages, false);
}

long spill_out_dense(struct spill_engine *e, void *addr, size_t npages)
{
	return sp_out(e, addr, npages, true);
}

void spill_stage_clear(struct spill_engine *e)
{
	zp_release_freed(e->pool);
	for (unsigned lane = 0; lane < SP_LANES; lane++) {
		if (!__atomic_load_n(&e->lane_used[lane], __ATOMIC_RELAXED) || !sp_lane_take(e, lane))
			continue;
		sp_lane_clear(e, lane);
		sp_lane_put(e, lane);
	}
}

/* ---- the program changes what is spilled ---- */

/*
 * Restore (or forget) every spilled page in [lo, hi), range by range: a
 * page can be out only inside a live range, and a range spans one
 * spill_out() call, so the walk costs the ranges, not the table.
 */
static long sp_walk(struct spill_engine *e, uintptr_t lo, uintptr_t hi, bool restore,
		    bool whole, void *bounce)
{
	long n = 0;

	for (uint32_t i = 0;; i++) {
		uintptr_t start, end;

		pthread_mutex_lock(&e->reg_lock);
		if (i >= e->ranges_hw) {
			pthread_mutex_unlock(&e->reg_lock);
			break;
		}
		start = e->ranges[i].start;
		end = e->ranges[i].end;
		pthread_mutex_unlock(&e->reg_lock);
		if (!end || end <= lo || start >= hi)
			continue;
		/* A range that meets [lo, hi) is restored whole for spill_release_range(). */
		if (!whole) {
			start = start > lo ? start : lo;
			end = end < hi ? end : hi;
		}
		for (uintptr_t page = start; page < end; page += SP_PAGE)
			n += restore ? sp_restore(e, page, bounce, &e->restored) > 0 :
				       sp_forget(e, page);
	}
	return n;
}

static bool sp_span(const void *addr, size_t len, uintptr_t *lo, uintptr_t *hi)
{
	if (!len)
		return false;
	*lo = (uintptr_t)addr & ~(SP_PAGE - 1);
	*hi = len > UINTPTR_MAX - (uintptr_t)addr - SP_PAGE ? UINTPTR_MAX & ~(SP_PAGE - 1) :
	      ((uintptr_t)addr + len + SP_PAGE - 1) & ~(SP_PAGE - 1);
	return *hi > *lo;
}

long spill_restore_range(struct spill_engine *e, const void *addr, size_t len)
{
	_Alignas(4096) unsigned char bounce[SP_PAGE];
	uintptr_t lo, hi;

	if (!atomic_load_explicit(&e->in_pool, memory_order_relaxed) || !sp_span(addr, len, &lo, &hi))
		return 0;
	return sp_walk(e, lo, hi, true, false, bounce);
}

long spill_release_range(struct spill_engine *e, const void *addr, size_t len)
{
	_Alignas(4096) unsigned char bounce[SP_PAGE];
	uintptr_t lo, hi;

	if (!atomic_load_explicit(&e->in_pool, memory_order_relaxed) || !sp_span(addr, len, &lo, &hi))
		return 0;
	return sp_walk(e, lo, hi, true, true, bounce);
}

long spill_forget_range(struct spill_engine *e, const void *addr, size_t len)
{
	uintptr_t lo, hi;

	if (!atomic_load_explicit(&e->in_pool, memory_order_relaxed) || !sp_span(addr, len, &lo, &hi))
		return 0;
	return sp_walk(e, lo, hi, false, false, NULL);
}

/* ---- write tracking ---- */

int spill_track(struct spill_engine *e, const void *addr, size_t len)
{
	uintptr_t start = (uintptr_t)addr, end = start + len;
	uint32_t slot = SP_TRACK_MAX;

	if (!e->wp_async)
		return -EOPNOTSUPP;
	if (start % SP_PAGE || len % SP_PAGE || !len || end < start)
		return -EINVAL;
	pthread_mutex_lock(&e->reg_lock);
	for (uint32_t i = 0; i < e->nr_tracked; i++) {
		if (e->tracked[i].start == start && e->tracked[i].end == end) {
			pthread_mutex_unlock(&e->reg_lock);
			return 0;
		}
		/* One the program unmapped and mapped again differently: replaced. */
		if (e->tracked[i].start < end && start < e->tracked[i].end && slot == SP_TRACK_MAX)
			slot = i;
	}
	if (slot == SP_TRACK_MAX) {
		if (e->nr_tracked == SP_TRACK_MAX) {
			pthread_mutex_unlock(&e->reg_lock);
			return -ENOSPC;
		}
		slot = e->nr_tracked++;
	}
	e->tracked[slot] = (struct sp_span){ start, end };
	sp_settle(e, start, end, true);
	pthread_mutex_unlock(&e->reg_lock);
	return 0;
}

/*
 * Catching registers the tracked regions MISSING whole, over what the
 * spills' ranges cover already: those keep their MISSING when it ends
 * (sp_settle with @covered_too false leaves what a live range covers).
 * A region tracked while catching, or a part a closing range settles
 * meanwhile, is not caught: its touches escape until the next catch.
 */
int spill_catch_touches(struct spill_engine *e, bool on)
{
	int n = 0;

	if (!e->wp_async)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&e->reg_lock);
	if (atomic_load_explicit(&e->catching, memory_order_relaxed) != on) {
		for (uint32_t i = 0; i < e->nr_tracked; i++, n++) {
			if (on)
				sp_register(e, e->tracked[i].start, e->tracked[i].end,
					    UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP);
			else
				sp_settle(e, e->tracked[i].start, e->tracked[i].end, false);
		}
		atomic_store_explicit(&e->catching, on, memory_order_relaxed);
	}
	pthread_mutex_unlock(&e->reg_lock);
	return n;
}

bool spill_catching(struct spill_engine *e)
{
	return atomic_load_explicit(&e->catching, memory_order_relaxed);
}

void spill_untrack(struct spill_engine *e, const void *addr, size_t len)
{
	uintptr_t lo, hi, start, end;

	if (!e->wp_async || !sp_span(addr, len, &lo, &hi))
		return;
	start = lo;
	end = hi;
	pthread_mutex_lock(&e->reg_lock);
	for (uint32_t i = 0; i < e->nr_tracked;) {
		if (e->tracked[i].start < hi && lo < e->tracked[i].end) {
			/* Its registration goes below; the whole region is met again later. */
			if (e->tracked[i].start < start)
				start = e->tracked[i].start;
			if (e->tracked[i].end > end)
				end = e->tracked[i].end;
			e->tracked[i] = e->tracked[--e->nr_tracked];
			continue;
		}
		i++;
	}
	/*
	 * What no spilled page needs any more is unregistered: the mapping is
	 * one VMA again.  The asked range apart from the rest of its regions:
	 * one unregistration fails whole where any mapping in it cannot take
	 * a userfaultfd, and the regions' rest is the less sure part.
	 */
	sp_settle(e, lo, hi, true);
	if (start < lo)
		sp_settle(e, start, lo, true);
	if (end > hi)
		sp_settle(e, hi, end, true);
	pthread_mutex_unlock(&e->reg_lock);
}

void spill_unmapped(struct spill_engine *e, const void *addr, size_t len)
{
	uintptr_t lo, hi;

	spill_forget_range(e, addr, len);
	if (!sp_span(addr, len, &lo, &hi))
		return;
	pthread_mutex_lock(&e->reg_lock);
	sp_ranges_clip(e, lo, hi);
	for (uint32_t i = 0; i < e->nr_tracked;) {
		struct sp_span *t = &e->tracked[i];

		if (t->start >= hi || lo >= t->end) {
			i++;
			continue;
		}
		if (t->start < lo && t->end > hi) {
			/* A hole in the middle: the part after it takes a slot of its own
			 * (with none left, it goes untracked until the next lap meets it). */
			if (e->nr_tracked < SP_TRACK_MAX)
				e->tracked[e->nr_tracked++] = (struct sp_span){ hi, t->end };
			t->end = lo;
		} else if (t->start < lo) {
			t->end = lo;
		} else if (t->end > hi) {
			t->start = hi;
		} else {
			*t = e->tracked[--e->nr_tracked];
			continue;
		}
		i++;
	}
	pthread_mutex_unlock(&e->reg_lock);
}

long spill_written(struct spill_engine *e, const void *addr, size_t len,
		   struct spill_run *runs, size_t max, bool protect)
{
	struct page_region v[64];
	struct pm_scan_arg arg = {
		.size = sizeof(arg),
		.flags = (protect ? PM_SCAN_WP_MATCHING : 0) | PM_SCAN_CHECK_WPASYNC,
		.start = (uintptr_t)addr,
		.end = (uintptr_t)addr + len,
		.vec = (uintptr_t)v,
		.vec_len = max < 64 ? max : 64,
		.category_mask = PAGE_IS_WRITTEN,
		.return_mask = PAGE_IS_WRITTEN,
	};
	long n;

	if (!e->wp_async)
		return -EOPNOTSUPP;
	n = ioctl(e->pagemap_fd, PAGEMAP_SCAN, &arg);
	if (n < 0)
		return -errno;
	for (long i = 0; i < n; i++)
		runs[i] = (struct spill_run){ (void *)(uintptr_t)v[i].start,
					      (size_t)((v[i].end - v[i].start) / SP_PAGE) };
	return n;
}

/* ---- statistics and closing ---- */

/*
 * -EBUSY without @wait if another thread holds the engine's lock (for the
 * slots' size).  Read through the engine's pagemap, kept open; where it
 * has none (no UFFD_FEATURE_WP_ASYNC) or the program put a file of its own
 * under its number, through one opened for the while.
 */
static int sp_footprint(struct spill_engine *e, struct spill_footprint *fp, bool wait)
{
	int pm = e->pagemap_fd;
	size_t slots;

	if (wait)
		pthread_mutex_lock(&e->lock);
	else if (pthread_mutex_trylock(&e->lock))
		return -EBUSY;
	if (pm < 0 || !sp_fd_still(pm, &e->pagemap_id))
		pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	slots = zp_resident_bytes(pm, e->slots, (e->mask + 1) * sizeof(*e->slots));
	pthread_mutex_unlock(&e->lock);
	fp->hot = zp_resident_bytes(pm, e->hot, SP_HOT_SLOTS * sizeof(*e->hot));
	fp->tables = slots + fp->hot + zp_resident_bytes(pm, e, sizeof(*e)) +
		     zp_resident_bytes(pm, e->ranges, (size_t)e->max_ranges * sizeof(*e->ranges)) +
		     zp_resident_bytes(pm, e->bucket, SP_BUCKETS * sizeof(*e->bucket)) +
		     zp_resident_bytes(pm, e->tracked, SP_TRACK_MAX * sizeof(*e->tracked)) +
		     zp_resident_bytes(pm, e->frozen, SP_FROZEN_MAX * sizeof(*e->frozen)) +
		     zp_resident_bytes(pm, e->child_served,
				       (SP_FROZEN_MAX + 1) * sizeof(*e->child_served));
	fp->scratch = zp_resident_bytes(pm, e->stage, sp_stage_bytes()) +
		      zp_resident_bytes(pm, e->copy, (size_t)SP_LANES * SP_COPY_PAGES * SP_PAGE) +
		      zp_resident_bytes(pm, e->bounce, SP_PAGE) +
		      zp_resident_bytes(pm, e->span, SP_SPAN_MAX * SP_PAGE) +
		      zp_resident_bytes(pm, e->zeros, SP_PAGE) + zp_scratch_resident(e->pool, pm);
	if (pm >= 0 && pm != e->pagemap_fd)
		close(pm);
	return 0;
}

void spill_footprint(struct spill_engine *e, struct spill_footprint *fp)
{
	(void)sp_footprint(e, fp, true);
}

int spill_footprint_try(struct spill_engine *e, struct spill_footprint *fp)
{
	return sp_footprint(e, fp, false);
}

void spill_stats(struct spill_engine *e, struct spill_stats *st)
{
	/*
	 * The ranges and the pages in the pool first, with acquire: a page
	 * that left the pool, and a range that went, were counted before
	 * (refaulted, restored, readahead, forgotten), so a reader that sees
	 * them gone sees those counts too.  Read after the counts, they could
	 * show a page gone whose count was read before it was made.
	 */
	st->ranges = atomic_load_explicit(&e->nr_ranges, memory_order_acquire);
	st->in_pool = atomic_load_explicit(&e->in_pool, memory_order_acquire);
	st->spilled = atomic_load_explicit(&e->spilled, memory_order_relaxed);
	st->refaulted = atomic_load_explicit(&e->refaulted, memory_order_relaxed);
	st->restored = atomic_load_explicit(&e->restored, memory_order_relaxed);
	st->skipped = atomic_load_explicit(&e->skipped, memory_order_relaxed);
	st->store_failed = atomic_load_explicit(&e->store_failed, memory_order_relaxed);
	st->stored_bytes = st->spilled * SP_PAGE;
	st->skipped_hot = atomic_load_explicit(&e->skipped_hot, memory_order_relaxed);
	st->refaulted_hot = atomic_load_explicit(&e->refaulted_hot, memory_order_relaxed);
	st->forgotten = atomic_load_explicit(&e->forgotten, memory_order_relaxed);
	st->readahead = atomic_load_explicit(&e->readahead, memory_order_relaxed);
	st->misreported = atomic_load_explicit(&e->misreported, memory_order_relaxed);
	st->zero_filled = atomic_load_explicit(&e->zero_filled, memory_order_relaxed);
	st->unshared = atomic_load_explicit(&e->unshared, memory_order_relaxed);
	st->read_in_place = atomic_load_explicit(&e->read_in_place, memory_order_relaxed);
	st->staged = 0;
	for (unsigned lane = 0; lane < SP_LANES; lane++)
		st->staged += __atomic_load_n(&e->lane_used[lane], __ATOMIC_RELAXED);
	st->bursts = atomic_load_explicit(&e->bursts, memory_order_relaxed);
	st->bursts_polled = atomic_load_explicit(&e->bursts_polled, memory_order_relaxed);
	st->held_off = atomic_load_explicit(&e->held_off, memory_order_relaxed);
	st->held_off_ms = atomic_load_explicit(&e->held_off_ms, memory_order_relaxed);
	st->cpu_latency_err = __atomic_load_n(&e->qos_err, __ATOMIC_RELAXED);
}

/*
 * Bring back every page, walking the table with a cursor: removals shift
 * entries backwards, so an entry may be passed over once and is met on the
 * next lap.  Entries the handler is loading are waited for.
 */
static void sp_restore_all(struct spill_engine *e, void *bounce)
{
	size_t cur = 0, seen = 0;

	pthread_mutex_lock(&e->lock);
	while (e->count) {
		struct sp_entry *ent = &e->slots[cur];

		cur = (cur + 1) & e->mask;
		if (ent->page && ent->state == SP_STORED) {
			uintptr_t page = ent->page;

			pthread_mutex_unlock(&e->lock);
			sp_restore(e, page, bounce, &e->restored);
			pthread_mutex_lock(&e->lock);
			seen = 0;
		} else if (++seen > e->mask) {
			/* A full lap found only pages being loaded. */
			pthread_cond_wait(&e->changed, &e->lock);
			seen = 0;
		}
	}
	pthread_mutex_unlock(&e->lock);
}

void spill_close(struct spill_engine *e)
{
	void *bounce = sp_map(SP_PAGE);

	atomic_store(&e->closing, true);
	/* Without a page of our own, the handler's bounce serves both once
	 * the handler has stopped; until then it must serve the program. */
	if (bounce)
		sp_restore_all(e, bounce);
	/*
	 * The program closed its copy of stop_fd (and may have opened
	 * something else under its number): the handler cannot be told to
	 * stop.  It is left waiting, and its memory with it (it serves what
	 * could not be brought back), rather than a file of the program
	 * written to.
	 */
	if (!sp_fd_still(e->stop_fd, &e->stop_id)) {
		cgm_log("spill: the engine's stop descriptor was closed by the program: "
			"its handler thread is left waiting");
		sp_unmap(bounce, SP_PAGE);
		return;
	}
	eventfd_write(e->stop_fd, 1);
	pthread_join(e->thread, NULL);
	if (!bounce)
		sp_restore_all(e, e->bounce);
	sp_unmap(bounce, SP_PAGE);
	sp_free(e);
}

void spill_abandon(struct spill_engine *e)
{
	/*
	 * The handler thread is the parent's: not here, nothing to join.
	 * This process's end of its fork socket stays open (close-on-exec):
	 * the parent's sign that it runs.
	 */
	e->fork_sock[1] = -1;
	sp_free(e);
}

/* ---- fork: the child gets its own copy of the engine ---- */

/*
 * Is the child of the last fork still running the program it was forked
 * with (no exec, no exit)?  Its socket is let go of either way.
 */
static bool sp_last_child_runs(struct spill_engine *e)
{
	struct pollfd p = { .fd = e->live_sock, .events = POLLIN };
	bool runs;

	if (e->live_sock < 0)
		return false;
	if (!sp_fd_still(e->live_sock, &e->live_id)) {
		e->live_sock = -1;	/* the program closed it: its number is not ours */
		return false;
	}
	runs = poll(&p, 1, 0) >= 0 && !(p.revents & (POLLHUP | POLLERR | POLLNVAL));
	close(e->live_sock);
	e->live_sock = -1;
	return runs;
}

bool spill_fork_prepare(struct spill_engine *e, bool lazy)
{
	unsigned asked = SP_FORK_ASKED;
	bool sibling_runs = sp_last_child_runs(e);

	atomic_store_explicit(&e->fork_announced, true, memory_order_release);
	e->handing = false;
	/* Made for every fork: the child keeps its end, so the next fork can tell whether it runs. */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, e->fork_sock)) {
		e->fork_sock[0] = e->fork_sock[1] = -1;
		return false;
	}
	/* Out of the program's way: the parent keeps one end until the next fork, the child the other. */
	e->fork_sock[0] = cgm_fd_move_high(e->fork_sock[0]);
	e->fork_sock[1] = cgm_fd_move_high(e->fork_sock[1]);
	/*
	 * A child still running the program when its sibling is forked is a
	 * worker (a pool, a pre-forked server), which reads what the parent
	 * holds: each would bring back its own copy of every spilled page
	 * (the kernel shares a swapped-in page through its swap cache; a
	 * private page here cannot be shared), so they share the parent's,
	 * brought back before the fork.  A child that exec'd or exited by
	 * then ran a command (system(), popen()): lazy.
	 */
	if (!lazy || sibling_runs)
		return false;

	/*
	 * The kernel reports a fork only where a range is registered: with
	 * none, the child inherits no registration and needs nothing.
	 */
	pthread_mutex_lock(&e->reg_lock);
	bool registered = atomic_load(&e->nr_ranges) || e->nr_tracked;
	pthread_mutex_unlock(&e->reg_lock);
	if (!registered || !e->fork_events ||
	    !atomic_load_explicit(&e->running, memory_order_acquire) ||
	    !sp_fd_still(e->wake_fd, &e->wake_id))
		return false;
	atomic_store_explicit(&e->fork_state, SP_FORK_ASKED, memory_order_release);
	eventfd_write(e->wake_fd, 1);
	/* The handler answers between two faults (2 s: it is stuck, not slow). */
	for (int i = 0; i < 100000; i++) {
		struct timespec ts = { 0, 20000 };

		if (atomic_load_explicit(&e->fork_state, memory_order_acquire) == SP_FORK_FROZEN)
			return e->handing = true;
		nanosleep(&ts, NULL);
	}
	if (!atomic_compare_exchange_strong(&e->fork_state, &asked, SP_FORK_NONE))
		return e->handing = true;	/* it answered just now */
	cgm_log("spill: the handler thread did not answer before fork: every spilled page "
		"comes back instead");
	return false;
}

/*
 * Wait (100 ms at most: a fork that failed is not reported) until the
 * handler has dealt with the kernel's report of the fork that just
 * returned, when one is due.  The kernel lets fork() return once the
 * handler has read the report; the handler then closes the child's
 * userfaultfd (or hands it on), which drops the child's registrations.
 * A thread that forked again before that close gave the new child a copy
 * of the old child's descriptor: the old child's registrations then
 * outlived the close, and its next fault in one (mimalloc reusing a page
 * it had purged) waited for ever -- python3's fork-based multiprocessing
 * pool with a backing file hung in 1 run of 3.
 */
static void sp_fork_report_wait(struct spill_engine *e)
{
	bool due;

	pthread_mutex_lock(&e->reg_lock);
	due = e->fork_events && atomic_load_explicit(&e->running, memory_order_acquire) &&
	      (atomic_load(&e->nr_ranges) || e->nr_tracked);
	pthread_mutex_unlock(&e->reg_lock);
	for (int i = 0; due && i < 10000 &&
	     atomic_load_explicit(&e->fork_announced, memory_order_acquire); i++) {
		struct timespec ts = { 0, 10000 };

		nanosleep(&ts, NULL);
	}
}

void spill_fork_parent(struct spill_engine *e)
{
	sp_fork_report_wait(e);
	/*
	 * A fork that was not handed over: the kernel's report (if any: the
	 * handler read it before fork() returned) is the announced one.
	 */
	if (e->fork_sock[0] < 0)
		return;
	/* The child has its copy of this end: once that is gone too, the parent's sees a hang-up. */
	close(e->fork_sock[1]);
	for (int i = 0; e->handing; i++) {
		struct pollfd p = { .fd = e->fork_sock[0], .events = POLLIN };
		struct timespec ts = { 0, 10000 };
		unsigned frozen = SP_FORK_FROZEN;

		if (atomic_load_explicit(&e->fork_state, memory_order_acquire) == SP_FORK_NONE)
			break;
		/*
		 * No child holds the other end: fork failed (no event will
		 * come), or the child is gone already; either way the table
		 * thaws.  A fork that succeeded was reported before fork()
		 * returned here (the kernel waits until the handler has read
		 * the message), so the handler is about to hand it on: after
		 * 2 s without that, it never will (the child then puts its
		 * pages back itself).
		 */
		if (((poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR))) || i == 200000) &&
		    atomic_compare_exchange_strong(&e->fork_state, &frozen, SP_FORK_THAW)) {
			if (i == 200000)
				cgm_log("spill: no fork event in 2 s: the child puts its spilled "
					"pages back itself");
			eventfd_write(e->wake_fd, 1);
		}
		nanosleep(&ts, NULL);
	}
	pthread_mutex_lock(&e->fork_lock);
	e->live_sock = e->fork_sock[0];
	sp_fd_note(e->live_sock, &e->live_id);
	e->fork_sock[0] = e->fork_sock[1] = -1;
	e->handing = false;
	pthread_mutex_unlock(&e->fork_lock);
}

/*
 * No uffd came (the parent could not send it, or died): the child's
 * ranges are no longer registered (the uffd's last descriptor closed), so
 * each spilled page is written back in place from the child's copy of the
 * pool, as plain memory.  Pages already there (put back in the fork
 * window before the copy) are left as they are.
 */
static void sp_fork_restore_plain(struct spill_engine *e)
{
	for (size_t cur = 0; cur <= e->mask; cur++) {
		struct sp_entry *ent = &e->slots[cur];
		int err;

		if (!ent->page || ent->state != SP_STORED || sp_resident(ent->page))
			continue;
		err = zp_load(e->pool, ent->zent, e->bounce);
		if (err) {
			sp_lost(ent->page, err);
			continue;
		}
		memcpy((void *)ent->page, e->bounce, SP_PAGE);
	}
}

/* The child's own descriptors in place of its copies of the parent's; -errno. */
static int sp_fork_fds(struct spill_engine *e, int ufd)
{
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)e->stage, .len = sp_stage_bytes() },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	bool qos = e->qos_fd >= 0;

	sp_fd_drop(e->uffd, &e->uffd_id);
	sp_fd_drop(e->stage_uffd, &e->stage_id);
	sp_fd_drop(e->stop_fd, &e->stop_id);
	sp_fd_drop(e->wake_fd, &e->wake_id);
	sp_fd_drop(e->qos_fd, &e->qos_id);	/* the parent's request stays the parent's */
	sp_fd_drop(e->pagemap_fd, &e->pagemap_id);	/* it reads the parent's address space */
	e->stage_uffd = e->stop_fd = e->wake_fd = e->qos_fd = e->pagemap_fd = -1;
	e->uffd = cgm_fd_keep(ufd);
	sp_fd_note(e->uffd, &e->uffd_id);
	if (e->wp_async) {
		e->pagemap_fd = cgm_fd_keep(open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
		e->wp_async = e->pagemap_fd >= 0;
		sp_fd_note(e->pagemap_fd, &e->pagemap_id);
	}
	/* The staging area's registration is not inherited; it was emptied before the fork. */
	madvise(e->stage, sp_stage_bytes(), MADV_DONTNEED);
	memset(e->lane_used, 0, sizeof(e->lane_used));
	e->lane_busy = 0;
	e->stage_uffd = cgm_fd_keep(sp_uffd_new(UFFD_FEATURE_MOVE));
	if (e->stage_uffd < 0)
		return e->stage_uffd;
	sp_fd_note(e->stage_uffd, &e->stage_id);
	if (ioctl(e->stage_uffd, UFFDIO_REGISTER, &reg))
		return -errno;
	e->stop_fd = cgm_fd_keep(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
	e->wake_fd = cgm_fd_keep(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
	if (e->stop_fd < 0 || e->wake_fd < 0)
		return -EMFILE;
	sp_fd_note(e->stop_fd, &e->stop_id);
	sp_fd_note(e->wake_fd, &e->wake_id);
	if (qos) {
		e->qos_fd = open("/dev/cpu_dma_latency", O_WRONLY | O_CLOEXEC);
		e->qos_err = e->qos_fd < 0 ? errno : 0;
		e->qos_fd = cgm_fd_keep(e->qos_fd);
		if (e->qos_fd >= 0)
			sp_fd_note(e->qos_fd, &e->qos_id);
	}
	return 0;
}

/*
 * The child's handler thread.  Until it reaches its loop, this (the only)
 * thread serves: the new thread reads program memory before its start
 * function (spill_open), and some of it may be spilled here already.
 */
static int sp_fork_start(struct spill_engine *e)
{
	sigset_t all, old;
	int err;

	atomic_store(&e->running, false);
	atomic_store(&e->go, false);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = e->create_thread(&e->thread, NULL, sp_handler, e);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return -err;
	for (int i = 0; i < 500000 && !atomic_load_explicit(&e->running, memory_order_acquire); i++) {
		struct timespec ts = { 0, 10000 };

		nanosleep(&ts, NULL);
	}
	return 0;
}

int spill_fork_child(struct spill_engine *e)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t fresh_cond = PTHREAD_COND_INITIALIZER;
	zp_entry_t loading;
	int ufd, err;

	/* The parent's threads are gone: no lock is held, whatever the copy says. */
	e->lock = e->reg_lock = e->lane_lock = e->fork_lock = fresh;
	e->changed = e->lane_free = fresh_cond;
	zp_pool_forked(e->pool);
	loading = atomic_load_explicit(&e->frozen_loading, memory_order_relaxed);
	if (loading) {
		zp_load_forked(e->pool, loading);
		atomic_store_explicit(&e->frozen_loading, 0, memory_order_relaxed);
	}
	close(e->fork_sock[0]);
	e->fork_sock[0] = -1;
	if (e->live_sock >= 0)
		close(e->live_sock);	/* a sibling's, the parent's to watch */
	e->live_sock = -1;
	ufd = sp_recv_fd(e->fork_sock[1]);
	atomic_store(&e->fork_state, SP_FORK_NONE);
	atomic_store(&e->fork_announced, false);
	e->child_uffd = -1;
	/* The handler's own state: readahead, bursts, the parent's faults read while held off. */
	e->ra_count = 0;
	e->in_burst = false;
	e->nheld = 0;
	memset(e->streams, 0, sizeof(e->streams));
	memset(e->seen, 0, sizeof(e->seen));
	if (ufd < 0) {
		e->fork_sock[1] = -1;	/* kept open: the parent's sign that this child runs */
		sp_fork_restore_plain(e);
		return -EPIPE;
	}
	err = sp_fork_fds(e, ufd);
	if (!err) {
		/* Put back before the copy, in the fork window: this copy has them. */
		sp_thaw(e, NULL);
		err = sp_fork_start(e);
	}
	/*
	 * The parent serves this process's faults until told; then it says
	 * which pages it put in place here, whose entries go (the parent
	 * gone, no list: a look at every entry).  Only then does this
	 * process's handler read the uffd: the two never serve side by side.
	 */
	if (write(e->fork_sock[1], "r", 1) == 1) {
		ssize_t n;

		do
			n = recv(e->fork_sock[1], e->child_served,
				 (SP_FROZEN_MAX + 1) * sizeof(uintptr_t), 0);
		while (n < 0 && errno == EINTR);
		for (ssize_t i = 1; i < n / (ssize_t)sizeof(uintptr_t); i++)
			if (sp_resident(e->child_served[i]))
				sp_drop_entry(e, e->child_served[i], &e->refaulted);
		if (n < (ssize_t)sizeof(uintptr_t) || e->child_served[0] == UINTPTR_MAX)
			sp_drop_resident(e, &e->refaulted);
	}
	/* Kept open (close-on-exec): the parent's sign that this child runs. */
	e->fork_sock[1] = -1;
	atomic_store_explicit(&e->go, true, memory_order_release);
	if (err) {
		cgm_log("spill: the forked child cannot run its engine (%s): its spilled pages "
			"are put back", cgm_strerror(-err));
		e->nr_frozen = 0;
		sp_restore_all(e, e->bounce);
		return err;
	}
	return 0;
}
