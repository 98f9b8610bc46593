/*
 * The slow paths of accounted allocation: a thread's first charge, stock
 * refills, allocations above the small sizes, aligned and huge blocks,
 * realloc, and the thread-exit hook.  The fast paths are in
 * include/cgm/accounted.h.
 *
 * A block is charged at its mimalloc block size (what it occupies), the
 * same number free() reads back from mimalloc's page, so charge and
 * uncharge always agree.  With charge=resident (the default), blocks
 * above CGM_SAMPLED_MIN are not charged by their bytes: a residency sample
 * charges the pages of them that are touched (shim/resident.c), as the
 * kernel charges a page at its first touch.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgm/accounted.h"
#include "cgm/log.h"
#include "cgm/regions.h"
#include "cgm/shim.h"
#include "cgm/size_class.h"

DEFINE_STATIC_KEY_FALSE(cgm_accounting_key);
DEFINE_STATIC_KEY_FALSE(cgm_limits_key);
DEFINE_STATIC_KEY_FALSE(cgm_mixed_free_key);

struct cgm_acct cgm_acct = { .proc = CGM_NONE };

/*
 * Shared by threads that have no slot yet; never charged, never flushed.
 * Its allowances are hugely negative, so a thread's first malloc of any
 * size class takes the refill path, which gives the thread its own slot.
 */
#define NEG (INT64_MIN / 4)
#define NEG4 NEG, NEG, NEG, NEG
#define NEG16 NEG4, NEG4, NEG4, NEG4
static struct cgm_thread_slot cgm_boot_slot = {
	.allow = { NEG16, NEG4, NEG },
	.stock = NEG,
};
_Static_assert(CGM_NR_BINS == 21, "the boot slot's allowances cover every bin");

/*
 * For the threads of a process that runs unaccounted (a forked child that
 * could not join its parent's group): allowances and stock that never run
 * out (unaccounted_slot_fill), so that its mallocs stay on the fast path.
 * Nothing is charged, and nothing ever reads its counts.  Filled when the
 * first thread turns to it, in pages of its own: with its values in .data
 * it took the library's data 3 KiB past two pages, and every process had
 * a third page of it resident (private, written: the boot slot, cgm_acct
 * and the static keys after it), where hardly any process ever uses it.
 */
#define POS (INT64_MAX / 4)
CGM_BIG_BSS static struct cgm_thread_slot cgm_unaccounted_slot;
static pthread_once_t unaccounted_slot_once = PTHREAD_ONCE_INIT;

static void unaccounted_slot_fill(void)
{
	for (unsigned int b = 0; b < CGM_NR_BINS; b++)
		cgm_unaccounted_slot.allow[b] = POS;
	cgm_unaccounted_slot.stock = POS;
}

uint8_t cgm_wsize_bin[CGM_NR_WSIZES];
/* Pages of their own: filled only by a process that switches, they share none with hot variables. */
CGM_BIG_BSS uint64_t cgm_free_entry[CGM_MEDIUM_MAX / 8 + 1];
int64_t cgm_stock_max = INT64_MAX;

CGM_TLS struct cgm_thread_slot *cgm_tslot = &cgm_boot_slot;

static pthread_key_t thread_exit_key;
static bool thread_exit_key_ok;

static void thread_exit_hook(void *arg)
{
	uint32_t slot = (uint32_t)(uintptr_t)arg - 1;

	/* A thread not started by pthread_create (shim/thread_run.c purged the others'). */
	cgm_park_purge();
	/*
	 * The slot stays ours (frees in later destructors land in it); it
	 * is freed once the thread is gone and its counters are folded.
	 */
	acct_thread_exit(&cgm_acct, slot);
}

/*
 * A forked child joins its parent's group at its first allocation that
 * needs a slot (nothing is charged for what it inherits; a child that
 * execs first never joins).  CGM_NONE: nothing to join.
 */
static uint32_t join_group = CGM_NONE;
static pthread_mutex_t join_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Join the parent's group if that is pending.  True once attached; false
 * with *@never set when this process will not be (then it runs
 * unaccounted), false alone when another thread is joining right now.
 */
static CGM_NOINLINE bool join_parent_group(bool *never)
{
	static int warned;
	int err;

	*never = false;
	/* Another thread is joining, or a signal handler interrupted us doing it. */
	if (pthread_mutex_trylock(&join_lock) != 0)
		return false;
	if (cgm_acct.proc == CGM_NONE && join_group != CGM_NONE) {
		err = acct_attach_group(&cgm_acct, join_group);
		if (err)
			cgm_log_once(&warned, "accounting off in pid %d: cannot join its parent's group: %s",
				     (int)getpid(), err == -ENOSPC ? "the hierarchy is full" :
				     "the group is gone");
		join_group = CGM_NONE;
		if (!err)
			cgm_resident_joined();
	}
	*never = cgm_acct.proc == CGM_NONE;
	pthread_mutex_unlock(&join_lock);
	return !*never;
}

/*
 * The calling thread's slot, after a look at what other processes
 * changed; a thread without one gets one.  NULL if the process is not
 * attached or the table is full.
 */
static struct cgm_thread_slot *thread_slot(void)
{
	struct cgm_thread_slot *t = cgm_tslot;
	uint32_t idx;
	static int warned;

	if (t == &cgm_unaccounted_slot)
		return NULL;
	if (t != &cgm_boot_slot) {
		cgm_epoch_check();
		return t;
	}
	if (cgm_acct.proc == CGM_NONE) {
		bool never;

		if (!join_parent_group(&never)) {
			if (never) {
				pthread_once(&unaccounted_slot_once, unaccounted_slot_fill);
				cgm_tslot = &cgm_unaccounted_slot;
			}
			return NULL;
		}
	}
	idx = acct_thread_register(&cgm_acct, (int)syscall(SYS_gettid));
	if (idx == CGM_NONE) {
		cgm_log_once(&warned, "accounting: no free thread slot in the hierarchy; "
			     "allocations of new threads are not charged");
		return NULL;
	}
	t = hier_thread(&cgm_acct.h, idx);
	cgm_tslot = t;
	if (thread_exit_key_ok)
		pthread_setspecific(thread_exit_key, (void *)(uintptr_t)(idx + 1));
	return t;
}

/* A new thread's slot, before its own code runs (shim/thread_start.c). */
void cgm_thread_register(void)
{
	thread_slot();
}

unsigned char cgm_charge_nofail_begin(void)
{
	unsigned char was = acct_exempt;

	acct_exempt = was | ACCT_EXEMPT_HIGH | ACCT_EXEMPT_MAX;
	return was;
}

void cgm_charge_nofail_end(unsigned char was)
{
	struct cgm_thread_slot *t = thread_slot();

	acct_exempt = was;
	/* All of it: a trim would leave two batches precharged, maybe past the limit. */
	if (t)
		acct_stock_drain(&cgm_acct, t);
}

/* The limits key says whether stocks must watch for limits. */
static inline int stock_take(struct cgm_thread_slot *t, int64_t bytes)
{
	return acct_stock_take(&cgm_acct, t, bytes, static_branch_unlikely(&cgm_limits_key));
}

/* The word size -> bin table that malloc reads, filled before accounting is on. */
static void size_bin_init(void)
{
	cgm_fill_wsize_bins(cgm_wsize_bin);
}

/*
 * free_path=auto: switch to the branch-free free when the split free's
 * branch would be mispredicted often enough to cost more than the 9
 * instructions the branch-free one adds to every free -- about 2 cycles
 * against 15 or so for a misprediction.  A free mispredicts about twice
 * for each medium block that comes between small ones, so the switch
 * wants 2 * m * a >= 0.15, where m is the medium blocks' share of the
 * allocations and a how often a small allocation came between two medium
 * ones.  (Allocations stand for frees: they are what the slot counts, and
 * a program frees in about the order and the mix it allocates.)
 *  - m: every MIX_REFILLS small refills a thread looks at its slot's
 *    counts since its last look (at least MIX_MIN allocations), once it
 *    has MIX_PAIRS_MIN samples of a.
 *  - a: every MIX_EVERY-th medium allocation of a bin reads the sum of
 *    the thread's small bins' allowances, and the bin's next one reads it
 *    again: if it moved, small blocks came between.  (Between two blocks
 *    of one bin rather than any two medium ones: the bin's count is at
 *    hand, so the test costs the allocation two instructions.)
 * A program that allocates runs of one size (glibc's bench-malloc-simple)
 * has a near 0 and keeps the split free, which its branch predicts; one
 * that draws sizes at random (bench-malloc-thread) switches.  A switch is
 * for the rest of the process: it rewrites code, and mixes seldom change.
 */
#define MIX_REFILLS 64
#define MIX_MIN 4096
#define MIX_EVERY 256	/* a power of two */
#define MIX_PAIRS_MIN 64

static CGM_TLS uint32_t mix_refills, mix_pairs, mix_between;
static CGM_TLS uint64_t mix_small, mix_medium;	/* the counts at the thread's last look */
/* Per medium bin: the allowances' sum at its sampled allocation, valid while its bit is armed. */
static CGM_TLS int64_t mix_allowed[CGM_NR_MEDIUM_BINS];
static CGM_TLS uint32_t mix_armed;

/* Switch to the branch-free free.  Returns whether this call did. */
static bool mixed_free_enable(void)
{
	static bool claimed;

	/*
	 * One thread fills the table, only now: a process that never
	 * switches keeps its 16 KiB untouched.  Others may free by it as soon
	 * as the key is on.
	 */
	if (__atomic_exchange_n(&claimed, true, __ATOMIC_ACQ_REL))
		return false;
	for (uint64_t size = 8; size <= CGM_MEDIUM_MAX; size += 8)
		cgm_free_entry[size / 8] = size <= CGM_SMALL_MAX
			? offsetof(struct cgm_thread_slot, stocked_small) +
				  sizeof(uint64_t) * cgm_bin_of(size)
			: offsetof(struct cgm_thread_slot, medium_frees) +
				  sizeof(uint64_t) * cgm_medium_bin[(size - 1) >> 8];
	static_branch_enable(&cgm_mixed_free_key);
	return true;
}

static int64_t small_allowances(const struct cgm_thread_slot *t)
{
	int64_t sum = 0;

	for (unsigned int b = 0; b < CGM_NR_BINS; b++)
		sum += t->allow[b];
	return sum;
}

/* At the first two of every MIX_EVERY medium allocations of a bin: did small ones come between? */
static CGM_NOINLINE void mixed_free_sample(const struct cgm_thread_slot *t, size_t n, uint32_t phase)
{
	unsigned int m = cgm_medium_bin[(n - 1) >> 8];

	if (cgm_conf.free_path != CGM_FREE_PATH_AUTO || static_key_enabled(&cgm_mixed_free_key))
		return;
	if (phase == 0) {
		mix_allowed[m] = small_allowances(t);
		mix_armed |= 1u << m;
		return;
	}
	if (!(mix_armed & 1u << m))
		return;
	mix_armed &= ~(1u << m);
	mix_pairs++;
	mix_between += small_allowances(t) != mix_allowed[m];
}

static CGM_NOINLINE void mixed_free_look(const struct cgm_thread_slot *t)
{
	uint64_t small = 0, medium = 0, ds, dm, pairs = mix_pairs, between = mix_between;

	/* Too few pairs yet: the next look sees these allocations too. */
	if (pairs < MIX_PAIRS_MIN)
		return;
	for (unsigned int b = 0; b < CGM_NR_BINS; b++)
		small += t->refilled[b] - (uint64_t)t->allow[b];
	for (unsigned int m = 0; m < CGM_NR_MEDIUM_BINS; m++)
		medium += t->medium_allocs[m];
	ds = small - mix_small;
	dm = medium - mix_medium;
	mix_small = small;
	mix_medium = medium;
	mix_pairs = mix_between = 0;
	/* 2 * m * a >= 0.15, m = dm / (ds + dm), a = between / pairs */
	if (ds + dm < MIX_MIN || 200 * dm * between < 15 * (ds + dm) * pairs ||
	    static_key_enabled(&cgm_mixed_free_key))
		return;
	if (mixed_free_enable() && cgm_conf.verbose)
		cgm_log("accounting: small and medium blocks in a mix (%llu and %llu, small ones between "
			"medium ones %llu times in %llu): frees take the branch-free path",
			(unsigned long long)ds, (unsigned long long)dm, (unsigned long long)between,
			(unsigned long long)pairs);
}

static inline void mixed_free_tick(const struct cgm_thread_slot *t)
{
	if (cgm_conf.free_path == CGM_FREE_PATH_AUTO && ++mix_refills % MIX_REFILLS == 0)
		mixed_free_look(t);
}

CGM_KEYED void *cgm_acct_refill(size_t n, bool zero)
{
	struct cgm_thread_slot *t = cgm_tslot;
	unsigned int bin = cgm_bin_of(n);

	cgm_owner_add(t->allow[bin], 1);	/* undo the fast path's take */
	t = thread_slot();
	cgm_resident_tick(false);
	if (!t)
		return zero ? mi_zalloc(n) : mi_malloc(n);
	if (acct_refill_bin(&cgm_acct, t, bin, static_branch_unlikely(&cgm_limits_key)) < 0) {
		errno = ENOMEM;
		return NULL;
	}
	cgm_owner_add(t->allow[bin], -1);
	mixed_free_tick(t);
	return zero ? mi_zalloc(n) : mi_malloc(n);
}

/* The size of block @p whose page entry is @page: its block size, or for huge blocks the usable size. */
static int64_t page_block_size(void *p, const char *page)
{
	uint32_t s = mi209_page_block_size(page);

	return s >= MI209_HUGE_BLOCK ? (int64_t)mi_usable_size(p) : (int64_t)s;
}

static int64_t block_size(void *p)
{
	return page_block_size(p, mi209_page(p));
}

/* The boot slot and the unaccounted one are shared by threads: no stock of theirs is touched. */
static inline bool slot_is_shared(const struct cgm_thread_slot *t)
{
	return t == &cgm_boot_slot || t == &cgm_unaccounted_slot;
}

/* What a block of @size bytes is charged by its bytes: all of it, or nothing (sampled). */
static int64_t byte_charge(int64_t size)
{
	return cgm_conf.charge == CGM_CHARGE_RESIDENT && size > CGM_SAMPLED_MIN ? 0 : size;
}

/* Blocks this large make a slow path look at residency at once. */
#define LARGE_BLOCK (1 << 20)

/* An allocation above the small sizes, of @bytes, in @t's counts. */
static inline __attribute__((always_inline)) void count_big_plain(struct cgm_thread_slot *t,
								    int64_t bytes)
{
	/* In this order gcc adds the last two with two instructions; the other way, with SSE. */
	cgm_owner_add(t->big_hist[rstat_hist_bucket((uint64_t)bytes)], 1);
	cgm_owner_add(t->big_allocs, 1);
	cgm_owner_add(t->big_alloc_bytes, (uint64_t)bytes);
}

/* The same under the process lock while a move is in progress. */
static inline __attribute__((always_inline)) void count_big(struct cgm_thread_slot *t, int64_t bytes)
{
	struct cgm_proc *p = cgm_careful_begin();

	count_big_plain(t, bytes);
	cgm_careful_end(p);
}

/* Give @bytes of charge back to @t's stock (a block shrank or went uncharged). */
static void stock_refund(struct cgm_thread_slot *t, int64_t bytes)
{
	cgm_owner_add(t->stock, bytes);
	acct_stock_trim(&cgm_acct, t);
}

/*
 * A block of 1..128 KiB, charged by its bytes, that the thread's stock
 * covers twice over (mimalloc's block is at most a quarter above the
 * request; cgm_acct_alloc_slow() looked): taken from the stock with no
 * lock, no clock and no look at other processes, as the small path takes
 * from its allowance -- the stock is precharged, and its refills do those.
 * The counts without cgm_careful_begin()'s site: a move in progress takes
 * stocked_alloc_careful() instead, chosen before the call.
 */
static inline __attribute__((always_inline)) void *stocked_alloc(size_t n, bool zero, bool careful)
{
	struct cgm_thread_slot *t;
	int64_t actual;
	void *p;

	p = zero ? mi_zalloc(n) : mi_malloc(n);
	if (cgm_unlikely(!p)) {
		errno = ENOMEM;
		return NULL;
	}
	/*
	 * The slot is read after the call (the same as before it: the thread
	 * has its own, or its stock would not have covered the block), so
	 * that it need not live across the call in a saved register.
	 */
	t = cgm_tslot;
	/* at most 128 KiB: never a huge block, whose size the page does not hold */
	actual = mi209_block_size(p);
	cgm_owner_add(t->stock, -actual);
	if (careful)
		count_big(t, actual);
	else
		count_big_plain(t, actual);
	return p;
}

/* stocked_alloc() while a move is in progress: its counts under the process lock. */
static CGM_KEYED CGM_NOINLINE void *stocked_alloc_careful(size_t n, bool zero)
{
	return stocked_alloc(n, zero, true);
}

/* Some group of ours is within @bytes of a limit (never, while none has one). */
static inline __attribute__((always_inline)) bool limit_near(int64_t bytes)
{
	return static_branch_unlikely(&cgm_limits_key) &&
	       acct_limit_near(&cgm_acct, bytes / CGM_PAGE_SIZE);
}

/*
 * Above the small sizes the block is allocated first and then charged
 * exactly: mimalloc rounds large requests up in ways mi_good_size() does
 * not tell (a 528 KB request takes a 1 MiB block), and an estimate that
 * fell short would charge past memory.max.  A refused charge frees the
 * block again.  A block charged by residency is refused instead while
 * the group is over its memory.max after reclaim.
 */
static CGM_KEYED CGM_NOINLINE void *alloc_charged(size_t n, size_t align, bool zero)
{
	struct cgm_thread_slot *t = thread_slot();
	int64_t actual;
	void *p;

	if (n >= (size_t)INT64_MAX / 2) {
		errno = ENOMEM;
		return NULL;
	}
	if (t) {
		/*
		 * A large block the thread freed a moment ago is mimalloc's
		 * again, to reuse; near a limit it leaves memory first (a
		 * larger request would not fit in it).
		 */
		if (n >= LARGE_BLOCK) {
			if (limit_near((int64_t)n))
				cgm_park_purge();
			else
				cgm_park_release();
		}
		cgm_resident_tick(n >= LARGE_BLOCK);
		if (byte_charge((int64_t)n) == 0 && cgm_resident_refuse((int64_t)n)) {
			errno = ENOMEM;
			return NULL;
		}
	}
	p = align ? cgm_mi_aligned(n, align) : zero ? mi_zalloc(n) : mi_malloc(n);
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	if (!t)
		return p;
	actual = block_size(p);
	if (stock_take(t, byte_charge(actual)) < 0) {
		mi_free(p);
		errno = ENOMEM;
		return NULL;
	}
	count_big(t, actual);
	return p;
}

/*
 * Take @blocks blocks for a request of 1025..@n..16384 bytes from @t's
 * stock and count them in their bin (-1: give one back).
 */
static inline __attribute__((always_inline)) uint64_t medium_take(struct cgm_thread_slot *t, size_t n,
								    int64_t blocks)
{
	unsigned int m = cgm_medium_bin[(n - 1) >> 8];

	cgm_owner_add(t->stock, -blocks * (int64_t)cgm_medium_sizes[m]);
	return cgm_owner_add(t->medium_allocs[m], (uint64_t)blocks);
}

/* mimalloc failed a medium block: give its charge and its count back. */
static CGM_NOINLINE void *medium_refused(size_t n)
{
	medium_take(cgm_tslot, n, -1);
	errno = ENOMEM;
	return NULL;
}

/* A medium allocation that samples for free_path=auto, out of line: the common one keeps no register across its call. */
static CGM_NOINLINE void *medium_sampled(struct cgm_thread_slot *t, size_t n, bool zero, uint32_t phase)
{
	void *p;

	mixed_free_sample(t, n, phase);
	p = zero ? mi_zalloc(n) : mi_malloc(n);
	return p ? p : medium_refused(n);
}

/*
 * 1025..16384 bytes: the block size is known before the allocation (its
 * bin's, one load), so the block is taken from the stock and counted in
 * its bin first, and only a refusal from mimalloc (out of memory) has
 * anything to do after the call; the flusher makes the size histogram
 * and the byte counts of the bins' counts.  stocked_alloc() reads the
 * block size back from the page and finds the histogram's bucket at
 * every allocation: 45 instructions a block, against about 20 here.  A
 * stock that may not cover the block (and the boot slot's, hugely
 * negative) takes the slow path, as does a move in progress.
 */
CGM_KEYED void *cgm_acct_alloc_medium(size_t n, bool zero)
{
	struct cgm_thread_slot *t = cgm_tslot;
	uint64_t allocs;
	void *p;

	if (cgm_unlikely(n > CGM_MEDIUM_MAX || t->stock < CGM_MEDIUM_MAX) ||
	    static_branch_unlikely(&cgm_moving_key))
		return cgm_acct_alloc_slow(n, 0, zero);
	/* The bin's count, as it is in a register: two instructions a call. */
	allocs = medium_take(t, n, 1);
	if (cgm_unlikely((allocs & (MIX_EVERY - 2)) == 0))
		return medium_sampled(t, n, zero, allocs & 1);
	if (!zero && (p = mi209_pop_queue(MI209_BIN_MEDIUM0 + cgm_medium_bin[(n - 1) >> 8])) != NULL)
		return p;
	p = zero ? mi_zalloc(n) : mi_malloc(n);
	if (cgm_unlikely(!p))
		return medium_refused(n);
	return p;
}

/* (The boot slot's stock is hugely negative: a thread without a slot goes on.) */
CGM_KEYED void *cgm_acct_alloc_slow(size_t n, size_t align, bool zero)
{
	if (n <= CGM_SAMPLED_MIN && !align && cgm_tslot->stock >= 2 * (int64_t)n) {
		if (static_branch_unlikely(&cgm_moving_key))
			return stocked_alloc_careful(n, zero);
		return stocked_alloc(n, zero, false);
	}
	return alloc_charged(n, align, zero);
}

/*
 * A freed block's bytes go back into the freeing thread's own stock, as
 * the kernel's obj_stock takes freed bytes back: a thread that allocates
 * and frees blocks of a few KiB in turn then refills its stock (a lock
 * and a harvest of every thread's counters) once in a long while, not
 * every few blocks.  Past two batches the stock is trimmed into the
 * process's pool, whose whole pages are uncharged (acct_stock_trim): the
 * bound on what a thread precharges stays what it was.  Not on a slot
 * shared by threads that have none of their own.
 */
/* Give @size freed bytes back to @t's stock; true when the stock now wants a trim. */
static inline __attribute__((always_inline)) bool stock_add_back(struct cgm_thread_slot *t, int64_t size)
{
	/* The stock is inside the pages the process holds: a move carries it as it is. */
	cgm_owner_add(t->freed_unpooled_bytes, (uint64_t)size);
	cgm_owner_add(t->stock, size);
	return cgm_unlikely(acct_stock_over(&cgm_acct, t));
}

static inline __attribute__((always_inline)) void stock_back(struct cgm_thread_slot *t, int64_t size)
{
	if (stock_add_back(t, size))
		acct_stock_trim_excess(&cgm_acct, t);
}

static bool restock(struct cgm_thread_slot *t, int64_t size)
{
	if (slot_is_shared(t))
		return false;
	stock_back(t, size);
	return true;
}

/*
 * Count the free of a block of @size bytes on the calling thread's slot;
 * into its stock when @may_restock (not under the process lock: a trim
 * takes it).
 */
static void count_big_free(int64_t size, bool may_restock)
{
	struct cgm_thread_slot *t = cgm_tslot;

	if (!byte_charge(size))
		cgm_owner_add(t->freed_unpooled_bytes, (uint64_t)size);
	else if (!may_restock || !restock(t, size))
		cgm_owner_add(t->freed_bytes, (uint64_t)size);
	cgm_owner_add(t->frees, 1);
}

/* The careful path's count, which holds the process lock (shim/moving.c). */
void cgm_acct_count_big_free(void *p)
{
	count_big_free(block_size(p), false);
}

/*
 * charge=resident: does a large block leave memory as it is freed, or
 * stay with mimalloc for its purge delay?  glibc's rule for its mmapped
 * chunks: a block larger than any freed so far goes (glibc unmaps it),
 * and raises the bar to its size, up to 32 MiB (glibc's dynamic mmap
 * threshold), so that a program that frees and allocates blocks of one
 * size in turn keeps them and does not fault every page of each in anew
 * (mstress-style: 7x its time).  Such a block goes a moment later, unless
 * the thread allocates a large block meanwhile (shim/large_park.c); near
 * a limit every large block goes at once: the room is needed now.
 */
#define PURGE_BAR_MAX (32LL << 20)
static int64_t purge_bar = LARGE_BLOCK - 1;
/*
 * The largest block mimalloc keeps in a shared segment (its
 * MI_LARGE_OBJ_SIZE_MAX, half a 32 MiB segment).  A larger block has a
 * segment of its own, which leaves the address space as the block goes:
 * parked, it would keep the address space a program may count on
 * getting back (test_new's handler test under RLIMIT_AS frees a 192 MiB
 * reserve and retries), and no later allocation could take its pages
 * without mapping them anew anyway.  It goes at once, as before.
 */
#define PARK_MAX (16LL << 20)

static bool purge_bar_passed(int64_t size)
{
	int64_t bar = __atomic_load_n(&purge_bar, __ATOMIC_RELAXED);

	if (size <= bar)
		return false;
	if (bar < PURGE_BAR_MAX)
		__atomic_store_n(&purge_bar, size < PURGE_BAR_MAX ? size : PURGE_BAR_MAX,
				 __ATOMIC_RELAXED);
	return true;
}

/* A block above 128 KiB, or any block of a thread with no slot of its own. */
static CGM_KEYED CGM_NOINLINE void free_big_slow(void *p, int64_t size)
{
	bool large = size >= LARGE_BLOCK;
	bool own = large && thread_slot();

	/* What was touched in a large block reaches the charge (and memory.peak) before it goes. */
	if (own)
		cgm_resident_tick(true);
	count_big_free(size, true);
	if (!large || cgm_conf.charge != CGM_CHARGE_RESIDENT) {
		mi_free(p);
	} else if (limit_near(size)) {
		cgm_park_purge();
		cgm_mi_free_now(p);
	} else if (purge_bar_passed(size)) {
		/* Parked only by a thread whose end purges it (thread_run.c, thread_exit_hook). */
		if (own && size <= PARK_MAX)
			cgm_park_large(p);
		else
			cgm_mi_free_now(p);
	} else {
		mi_free(p);
	}
}

/* (The unaccounted slot's stock is always above two batches: nothing to trim.) */
void cgm_acct_free_trim(void *p, struct cgm_thread_slot *t)
{
	if (!slot_is_shared(t))
		acct_stock_trim_excess(&cgm_acct, t);
	mi_free(p);
}

/*
 * A block above 16 KiB (cgm_acct_free() took the bins' blocks): up to
 * 128 KiB, always charged by its bytes, it goes back to the freeing
 * thread's stock as count_big_free() does, without a call; larger ones,
 * and any block of a thread with no slot of its own, take free_big_slow().
 */
void cgm_acct_free_big(void *p, const char *slice)
{
	const char *page = mi209_slice_page(slice);
	uint32_t size = mi209_page_block_size(page);
	struct cgm_thread_slot *t = cgm_tslot;

	if (cgm_unlikely(size > CGM_SAMPLED_MIN || slot_is_shared(t))) {
		free_big_slow(p, page_block_size(p, page));
		return;
	}
	cgm_owner_add(t->frees, 1);
	/*
	 * The trim (rare) out of line, with the free after it: the common
	 * path then ends in the free itself and keeps nothing across a call.
	 */
	if (stock_add_back(t, size)) {
		cgm_acct_free_trim(p, t);
		return;
	}
	if (cgm_likely(mi209_free_block(p, page, 0)))
		return;
	mi_free(p);
}

/* A realloc's counts on @t's slot, without cgm_careful_begin()'s site: no move is in progress. */
static inline __attribute__((always_inline)) void count_realloc_plain(struct cgm_thread_slot *t,
									int64_t actual, int64_t old)
{
	cgm_owner_add(t->reallocs, 1);
	cgm_owner_add(t->realloc_new_bytes, (uint64_t)actual);
	cgm_owner_add(t->realloc_old_bytes, (uint64_t)old);
	cgm_owner_add(t->big_hist[rstat_hist_bucket((uint64_t)actual)], 1);
}

static inline __attribute__((always_inline)) void count_realloc(struct cgm_thread_slot *t,
								  int64_t actual, int64_t old)
{
	struct cgm_proc *careful = cgm_careful_begin();

	count_realloc_plain(t, actual, old);
	cgm_careful_end(careful);
}

/*
 * A block of the bins (at most 16 KiB) that must move to another block
 * of the bins, as mimalloc's realloc moves it: the new block from
 * malloc's own paths (a bin's allowance or the stock), @keep bytes
 * copied, the old block freed by free's.  That counts one allocation and
 * one free with their bytes, as a realloc counts; the slow path below
 * took 70 instructions more (bench/replay).  A refusal leaves @p as it
 * was.
 */
static CGM_NOINLINE void *realloc_in_bins(void *p, size_t n, size_t keep)
{
	void *q = cgm_acct_malloc(n, false);

	if (cgm_unlikely(!q)) {
		errno = ENOMEM;
		return NULL;
	}
	memcpy(q, p, n < keep ? n : keep);
	cgm_acct_free(p);
	return q;
}

/*
 * mimalloc keeps a block that the new size still fills at least half of,
 * as it is: nothing changes but the statistics (a large block goes on,
 * for its residency tick).  Charged and counted by its block size (@old);
 * what the program may use of it (@usable) is less when an alignment
 * offset @p in its block (has_aligned).
 */
static inline __attribute__((always_inline)) bool realloc_stays(size_t n, size_t usable,
								 int64_t old)
{
	struct cgm_thread_slot *t;

	if (!(n <= usable && n >= usable / 2 && old < LARGE_BLOCK))
		return false;
	t = cgm_tslot;
	/* While a move is in progress, the out-of-line path counts it under the process lock. */
	if (cgm_unlikely(slot_is_shared(t)) || static_branch_unlikely(&cgm_moving_key))
		return false;
	count_realloc_plain(t, old, old);
	return true;
}

/*
 * A block that must grow moves to a new one, allocated and charged first
 * (so a refusal leaves the old block as it was, as realloc must); one
 * that fits stays or shrinks in mimalloc's hands, and what it gives up
 * goes back to the stock.  Each side is charged by its bytes or by
 * residency as its size says.
 */
static CGM_KEYED CGM_NOINLINE void *realloc_moving(void *p, size_t n, int64_t old, size_t usable)
{
	struct cgm_thread_slot *t;
	int64_t actual, delta;
	void *q;

	if (n <= CGM_MEDIUM_MAX && old <= CGM_MEDIUM_MAX && !static_branch_unlikely(&cgm_moving_key))
		return realloc_in_bins(p, n, usable);
	t = thread_slot();
	if (!t || n >= (size_t)INT64_MAX / 2) {
		q = t ? NULL : mi_realloc(p, n);
		if (!q)
			errno = ENOMEM;
		return q;
	}
	cgm_resident_tick(n >= LARGE_BLOCK || old >= LARGE_BLOCK);
	if (n > usable) {
		if (byte_charge((int64_t)n) == 0 && cgm_resident_refuse((int64_t)n)) {
			errno = ENOMEM;
			return NULL;
		}
		q = mi_malloc(n);
		if (!q) {
			errno = ENOMEM;
			return NULL;
		}
		actual = block_size(q);
		delta = byte_charge(actual) - byte_charge(old);
		if (delta > 0 && stock_take(t, delta) < 0) {
			mi_free(q);
			errno = ENOMEM;
			return NULL;
		}
		if (delta < 0)
			stock_refund(t, -delta);
		memcpy(q, p, usable);
		mi_free(p);
	} else {
		q = mi_realloc(p, n);
		if (!q) {
			errno = ENOMEM;
			return NULL;
		}
		actual = block_size(q);
		delta = byte_charge(actual) - byte_charge(old);
		/* A smaller block never rounds above the old one; charged if it did. */
		if (delta > 0)
			acct_force_charge(&cgm_acct, t, delta);
		else if (delta < 0)
			stock_refund(t, -delta);
	}
	count_realloc(t, actual, old);
	return q;
}

/*
 * A huge block (its size not in its page) or one at an alignment offset
 * (what the program may use of it is less than its block): mimalloc says.
 */
static CGM_KEYED CGM_NOINLINE void *realloc_looked_up(void *p, size_t n, const char *page)
{
	int64_t old = page_block_size(p, page);
	size_t usable = *(const uint8_t *)(page + MI209_FLAGS_AT) & MI209_HAS_ALIGNED ?
			mi_usable_size(p) : (size_t)old;

	if (realloc_stays(n, usable, old))
		return p;
	return realloc_moving(p, n, old, usable);
}

/* realloc(p, 0) frees (glibc's behaviour, which programs rely on). */
static CGM_KEYED CGM_NOINLINE void *realloc_to_zero(void *p)
{
	cgm_acct_free(p);
	return NULL;
}

/*
 * The common case -- the block stays -- with no call and nothing saved
 * across one: the rest is out of line.  In one function, every
 * realloc that stayed paid the whole function's register saves, 17
 * instructions (bench/realloc under callgrind).
 */
CGM_KEYED void *cgm_acct_realloc(void *p, size_t n)
{
	const char *page;
	uint32_t size;

#ifdef CGM_ACCT_COUNT_ONLY
	void *q;

	cgm_owner_add(cgm_tslot->reallocs, 1);
	q = mi_realloc(p, n);
	if (!q)
		errno = ENOMEM;
	return q;
#endif
	if (!p)
		return cgm_acct_malloc(n, false);
	if (n == 0)
		return realloc_to_zero(p);
	page = mi209_page(p);
	size = mi209_page_block_size(page);
	if (cgm_unlikely(size >= MI209_HUGE_BLOCK ||
			 (*(const uint8_t *)(page + MI209_FLAGS_AT) & MI209_HAS_ALIGNED)))
		return realloc_looked_up(p, n, page);
	if (realloc_stays(n, size, size))
		return p;
	return realloc_moving(p, n, size, size);
}

/*
 * The program's own private anonymous mappings (shim/regions.c).  With
 * charge=alloc a mapping is charged in full through the stock, and
 * refused at memory.max like a malloc; with charge=resident it is
 * sampled, and refused only while the group is over its memory.max.
 * Returns 1 when charged, 0 when not, -ENOMEM to refuse.
 */
CGM_KEYED int cgm_map_charge(int64_t bytes)
{
	struct cgm_thread_slot *t;

	if (!static_branch_unlikely(&cgm_accounting_key) || !(t = thread_slot()))
		return 0;
	cgm_resident_tick(true);
	if (cgm_conf.charge == CGM_CHARGE_RESIDENT)
		return cgm_resident_refuse(bytes) ? -ENOMEM : 0;
	return stock_take(t, bytes) < 0 ? -ENOMEM : 1;
}

CGM_KEYED void cgm_map_unmapping(void)
{
	if (static_branch_unlikely(&cgm_accounting_key) && !slot_is_shared(cgm_tslot))
		cgm_resident_tick(true);
}

CGM_KEYED void cgm_map_uncharge(int64_t bytes)
{
	struct cgm_thread_slot *t;

	if (bytes <= 0 || !static_branch_unlikely(&cgm_accounting_key) || !(t = thread_slot()))
		return;
	stock_refund(t, bytes);
}

/* Set up once, in the constructor, before accounting is switched on. */
void cgm_accounted_init(void)
{
	size_bin_init();
	/* batch_pages is set by now, and never changes after. */
	cgm_stock_max = 2 * cgm_acct.batch_pages * CGM_PAGE_SIZE;
	if (cgm_conf.free_path == CGM_FREE_PATH_MIXED)
		(void)mixed_free_enable();
	thread_exit_key_ok = pthread_key_create(&thread_exit_key, thread_exit_hook) == 0;
}

void cgm_accounted_fork_child(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	struct cgm_proc *p = hier_proc(&cgm_acct.h, cgm_acct.proc);

	/* The slot we used is the parent's thread's, in shared memory: leave it. */
	cgm_tslot = &cgm_boot_slot;
	/* The child maps none of the file yet: its first touches write again. */
	hier_prefault_forget(&cgm_acct.h);
	if (thread_exit_key_ok)
		pthread_setspecific(thread_exit_key, NULL);
	join_lock = fresh;
	cgm_epoch_fork_child();
	cgm_resident_fork_child();
	cgm_moving_fork_child();
	if (p) {
		/* Written before it is read: one fault, not a read and a write one (hier_lock()). */
		hier_prefault(&cgm_acct.h, p, sizeof(*p));
		join_group = __atomic_load_n(&p->group, __ATOMIC_RELAXED);
		cgm_acct.proc = CGM_NONE;
	}
	/*
	 * fork() from a signal handler that interrupted this thread inside
	 * the hierarchy: the shared locks it held are still held by the
	 * parent's thread, and the child must not wait for them.  It runs
	 * unaccounted (an exec starts afresh).
	 */
	if (hier_locks_held() > 0)
		join_group = CGM_NONE;
}
