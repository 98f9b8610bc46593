/*
 * The accounted allocation paths of the shim: what malloc and free run
 * when cgm_accounting_key is on.  The fast paths are inline, so that the
 * "yes" side of the static-key site in malloc()/free() is this code
 * itself; everything rare is an out-of-line slow path in shim/accounted.c.
 *
 * Per thread, the fast paths touch only the thread's own slot in the
 * hierarchy file (reached through one initial-exec TLS pointer):
 *	malloc: allow[bin]--		(negative: refill that bin)
 *	free:	frees++, freed_bytes += block size	(harvested later)
 * and free, having found the block's page for its size, frees the block
 * there itself in mi_free()'s common cases (mi209_free_block, mi_layout.h).
 * Both counters are also the statistics: allocations per size class and
 * frees per block size, folded into bytes and counts by the flusher.
 *
 * CGM_ACCT_COUNT_ONLY (a measuring build, bench/insn.mk; never the
 * library itself) cuts malloc, calloc, realloc and free down to one
 * addition to a counter of the thread's slot and mimalloc's own call:
 * the least any accounting that sees each call can cost, interposition
 * included.  Nothing is charged and no statistic is right in it; `make
 * bench` puts it beside accounting on as the floor that per-call
 * accounting cannot go below.
 */
#ifndef CGM_ACCOUNTED_H
#define CGM_ACCOUNTED_H

#include <mimalloc.h>
#include <stddef.h>
#include <stdint.h>

#include "cgm/acct.h"
#include "cgm/compiler.h"
#include "cgm/mi_layout.h"
#include "cgm/shim.h"
#include "cgm/static_key.h"

DECLARE_STATIC_KEY_FALSE(cgm_accounting_key);
DECLARE_STATIC_KEY_FALSE(cgm_limits_key);
/* On while some group of the hierarchy has a vmpressure listener (shim/epoch.c). */
DECLARE_STATIC_KEY_FALSE(cgm_vmpressure_key);
/* On only while this process is being moved to another group (shim/moving.c). */
DECLARE_STATIC_KEY_FALSE(cgm_moving_key);
/* On once the process frees small and medium blocks in a mix (free_path=, shim/accounted.c). */
DECLARE_STATIC_KEY_FALSE(cgm_mixed_free_key);

/*
 * charge=resident: blocks above this (mimalloc's medium objects end here)
 * are charged by their resident pages, sampled, not by their bytes.
 */
#define CGM_SAMPLED_MIN (128 * 1024)

/* This process's accounting state. */
extern struct cgm_acct cgm_acct;

/*
 * The calling thread's slot.  Until the thread has one of its own it
 * points at a shared boot slot whose bin allowances and stock are hugely
 * negative, so that its first malloc of any size takes a slow path, which
 * gives the thread its slot.  Threads started through pthread_create get
 * theirs before they run (shim/thread_start.c); the main thread and
 * threads started some other way get theirs at their first allocation.
 */
extern CGM_TLS struct cgm_thread_slot *cgm_tslot;

/*
 * mimalloc's bin (size_class.h) of each small request's word size
 * (n + 7) / 8, 0..128: malloc computes that index anyway for mimalloc's
 * direct page table, so the bin costs the instructions a table by
 * request size did, in three cache lines instead of 17 (bench/threads'
 * random sizes read six of those).  Filled once, before accounting is on.
 */
extern uint8_t cgm_wsize_bin[CGM_NR_WSIZES] __attribute__((visibility("hidden")));

/* The bin of a small request of @n bytes, n <= CGM_SMALL_MAX. */
static inline __attribute__((always_inline)) unsigned int cgm_bin_of(size_t n)
{
	return cgm_wsize_bin[(n + 7) >> 3];
}

/*
 * For the branch-free free (cgm_acct_free_mixed), one entry per block
 * size 0..16 KiB, at byte offset size (8 bytes a size, so that the block
 * size indexes it without a shift): the byte offset in a thread slot of
 * the counter of the block's bin that the free adds one to
 * (stocked_small[] for a small block, medium_frees[] for a medium one).
 */
extern uint64_t cgm_free_entry[CGM_MEDIUM_MAX / 8 + 1] __attribute__((visibility("hidden")));
/* Above this a thread's stock is trimmed: acct_stock_over()'s two charge batches, in bytes. */
extern int64_t cgm_stock_max __attribute__((visibility("hidden")));

/* The fast path's allowance ran out: refill (finds the bin again from @n). */
void *cgm_acct_refill(size_t n, bool zero);
/*
 * A request above 1 KiB: up to 16 KiB taken from the stock by its medium
 * bin's block size (size_class.h), above that cgm_acct_alloc_slow().
 * Out of line, so that malloc's small path stays as short as it is.
 */
void *cgm_acct_alloc_medium(size_t n, bool zero);
void *cgm_acct_alloc_slow(size_t n, size_t align, bool zero);
/* A block above 16 KiB (or in a longer page): @slice is mi209_slice(p), already found. */
void cgm_acct_free_big(void *p, const char *slice);
/* A free put the stock of @t above two batches: trim it, then free @p. */
void cgm_acct_free_trim(void *p, struct cgm_thread_slot *t);
void cgm_acct_count_big_free(void *p);

/* The careful paths taken while a move is in progress (shim/moving.c). */
void *cgm_acct_malloc_careful(size_t n, bool zero);
void cgm_acct_free_careful(void *p);
/* Move this process to group @to with the moving key on; 0 or -errno. */
int cgm_move_self(uint32_t to);
struct cgm_proc *cgm_careful_lock(void);
void cgm_careful_unlock(struct cgm_proc *p);

/*
 * Around a slow path's counter updates (realloc, aligned and large
 * allocations, which have no refined site): the process lock while a
 * move is in progress, else one NOP and nothing.
 */
static inline struct cgm_proc *cgm_careful_begin(void)
{
	if (static_branch_unlikely(&cgm_moving_key))
		return cgm_careful_lock();
	return NULL;
}

static inline void cgm_careful_end(struct cgm_proc *p)
{
	if (p)
		cgm_careful_unlock(p);
}
void cgm_moving_fork_child(void);

/* In a slow path: has another process changed something of ours? */
static inline void cgm_epoch_check(void)
{
	if (cgm_unlikely(__atomic_load_n(&cgm_acct.h.hdr->epoch, __ATOMIC_RELAXED) !=
			 __atomic_load_n(&cgm_seen_epoch, __ATOMIC_RELAXED)))
		cgm_epoch_changed();
}
void *cgm_acct_realloc(void *p, size_t n);

static inline __attribute__((always_inline)) void *cgm_acct_malloc(size_t n, bool zero)
{
	struct cgm_thread_slot *t;
	unsigned int bin;
	void *p;

#ifdef CGM_ACCT_COUNT_ONLY
	cgm_owner_add(cgm_tslot->big_allocs, 1);
	return zero ? mi_zalloc(n) : mi_malloc(n);
#endif
	if (cgm_unlikely(n > CGM_SMALL_MAX))
		return cgm_acct_alloc_medium(n, zero);
	bin = cgm_bin_of(n);
	t = cgm_tslot;
	if (cgm_unlikely(cgm_owner_add(t->allow[bin], -1) < 0))
		return cgm_acct_refill(n, zero);
	/*
	 * Off the page mimalloc's heap names for the size (its local frees
	 * taken when its free list ran out), else through mimalloc's small
	 * entry (its own n <= 1024 test is the one made above).  calloc
	 * keeps mimalloc's, which skips clearing a block of a fresh page.
	 */
	if (zero)
		return mi_zalloc_small(n);
	p = mi209_pop_small(n);
	return cgm_likely(p != NULL) ? p : mi_malloc_small(n);
}

/*
 * Count a free of a small block of @size bytes (8..1024) for harvest, as
 * a free of a block above 16 KiB is: a count and bytes in the one line of
 * the slot that harvest reads.
 */
static inline __attribute__((always_inline)) void cgm_count_small_free(uint32_t size)
{
	struct cgm_thread_slot *t = cgm_tslot;

	cgm_owner_add(t->frees, 1);
	/*
	 * Two scalar adds: without this, gcc 12 merged the neighbouring
	 * counters' adds into one of SSE (7 instructions for 2).
	 */
	__asm__("" : "+m"(t->frees));
	cgm_owner_add(t->freed_bytes, size);
}

/*
 * Free a block of a medium bin (1..16 KiB, @size): such a block lives in a
 * one-slice page, as every block up to 16 KiB does, so @slice is its page.
 * Its bytes go back into the freeing thread's stock (the kernel's
 * obj_stock takes freed bytes back so), its count to its bin.  On a slot
 * shared by threads without one of their own they go, as a small free's
 * count does, where nothing reads them: the boot slot's stock stays
 * hugely negative, the unaccounted slot's hugely positive (every such
 * free asks for a trim and gets none).
 */
static inline __attribute__((always_inline)) void cgm_acct_free_medium(void *p, const char *slice,
									uint32_t size)
{
	struct cgm_thread_slot *t = cgm_tslot;

	cgm_owner_add(t->medium_frees[cgm_medium_bin[(size - 1) >> 8]], 1);
	cgm_owner_add(t->stock, (int64_t)size);
	if (cgm_unlikely(acct_stock_over(&cgm_acct, t))) {
		cgm_acct_free_trim(p, t);
		return;
	}
	if (cgm_likely(mi209_free_block(p, slice, 0)))
		return;
	mi_free(p);
}

/*
 * The accounted free.  @by_table, a constant at each caller, says how it
 * tells a block of the small bins from a medium one:
 *  - false (cgm_acct_free): by a branch, the cheapest way while one kind
 *    dominates or each comes in runs;
 *  - true (cgm_acct_free_mixed): without one, for a program that frees
 *    both in a random mix (glibc's bench-malloc-thread draws sizes up to
 *    32 KiB), where that branch is mispredicted on a third of the frees.
 *    Both kinds then run the same instructions, picked out of
 *    cgm_free_entry[], and a small block's bytes go back into the
 *    stock as a medium one's do: 7 instructions more a small free
 *    (callgrind, bench/RESULTS-insn.md), a fifth less time for the mixed
 *    program (make bench, gbench-thread).
 * Either way a block above 16 KiB goes out of line, and the statistics
 * count the same.
 */
static inline __attribute__((always_inline)) void cgm_acct_free_as(void *p, bool by_table)
{
	const char *slice;
	uint32_t size;

#ifdef CGM_ACCT_COUNT_ONLY
	cgm_owner_add(cgm_tslot->frees, 1);
	mi_free(p);
	return;
#endif
	if (cgm_unlikely(p == NULL))
		return;
	slice = mi209_slice(p);
	size = mi209_page_block_size(slice);
	if (!by_table) {
		/*
		 * Blocks above 1 KiB: up to 16 KiB inline too; larger ones, and
		 * pointers into later slices of longer pages (whose slice names a
		 * block size of 1), out of line.
		 */
		if (cgm_unlikely(size - 8 > CGM_SMALL_MAX - 8)) {
			if (cgm_likely(size - (CGM_SMALL_MAX + 1) < CGM_MEDIUM_MAX - CGM_SMALL_MAX))
				cgm_acct_free_medium(p, slice, size);
			else
				cgm_acct_free_big(p, slice);
			return;
		}
		cgm_count_small_free(size);
	} else {
		struct cgm_thread_slot *t;
		uint64_t e;

		if (cgm_unlikely(size - 8 > CGM_MEDIUM_MAX - 8)) {
			cgm_acct_free_big(p, slice);
			return;
		}
		/*
		 * Small blocks too go back into the stock, as medium ones
		 * do (cgm_acct_free_medium), counted per bin for the
		 * statistics only: what a small block adds to harvest's
		 * counters a medium one must not.
		 */
		t = cgm_tslot;
		e = *(const uint64_t *)((const char *)cgm_free_entry + size);
		cgm_owner_add(*(uint64_t *)((char *)t + e), 1);
		cgm_owner_add(t->stock, (int64_t)size);
		/* acct_stock_over(), as one load. */
		if (cgm_unlikely(t->stock > cgm_stock_max)) {
			cgm_acct_free_trim(p, t);
			return;
		}
	}
	/* A medium block's size makes the last-block case fall back to mi_free(). */
	if (cgm_likely(mi209_free_block(p, slice, size)))
		return;
	mi_free(p);
}

static inline __attribute__((always_inline)) void cgm_acct_free(void *p)
{
	cgm_acct_free_as(p, false);
}

static inline __attribute__((always_inline)) void cgm_acct_free_mixed(void *p)
{
	cgm_acct_free_as(p, true);
}

#endif /* CGM_ACCOUNTED_H */
