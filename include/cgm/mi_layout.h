/*
 * The size of a mimalloc 2.0.9 block, read from mimalloc's own page
 * metadata in a few instructions (mi_usable_size() costs 28).
 *
 * mimalloc 2.0.9 on 64-bit: memory comes in 32 MiB-aligned segments cut
 * into 64 KiB slices; the segment header holds one 80-byte mi_page_t per
 * slice from offset 264 on; a slice inside a multi-slice page points back
 * to its page's entry by a byte offset (+4); the page's xblock_size (+28)
 * is the block size, capped at 2 GiB for huge blocks.  These facts were
 * measured on Debian's libmimalloc2.0 2.0.9+ds-2 (see tests) and are
 * checked against mi_usable_size() at start-up (shim/mi_layout.c), which
 * leaves accounting off when they do not hold.
 */
#ifndef CGM_MI_LAYOUT_H
#define CGM_MI_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#include "cgm/compiler.h"

#define MI209_SEGMENT_MASK	((uintptr_t)(32u << 20) - 1)
#define MI209_SLICE_SHIFT	16
#define MI209_SLICES_OFFSET	264
#define MI209_PAGE_SIZE		80
#define MI209_SLICE_OFFSET_AT	4
#define MI209_XBLOCK_SIZE_AT	28
#define MI209_HUGE_BLOCK	0x80000000u	/* blocks of 2 GiB and more */
/* What mimalloc's own free reads and writes of a local block (mi209_free_block). */
#define MI209_SEG_THREAD_ID_AT	0x100	/* segment: the owning thread's thread pointer */
#define MI209_FLAGS_AT		14	/* page: nonzero when in the full queue or has aligned blocks */
#define MI209_IN_FULL		1	/* flags: the page is in its heap's full queue */
#define MI209_HAS_ALIGNED	2	/* flags: some block of the page was offset for its alignment */
#define MI209_USED_AT		24	/* page: blocks in use */
#define MI209_LOCAL_FREE_AT	32	/* page: the owning thread's list of freed blocks */
#define MI209_THREAD_FREE_AT	40	/* page: other threads' freed blocks; 2 low bits: delayed-free state */
#define MI209_HEAP_AT		48	/* page: the heap that owns it */
#define MI209_NEXT_AT		56	/* page: the next page in its heap's queue */
#define MI209_PREV_AT		64	/* page: the previous page in its heap's queue */
#define MI209_DELAYED_MASK	((uintptr_t)3)
#define MI209_USE_DELAYED_FREE	0	/* a free must tell the page's heap (the page is full) */

/*
 * The segment of non-NULL block @p.  Of @p - 1, as mi_free() does: a
 * block aligned to 32 MiB or more (aligned_alloc) starts exactly where
 * its segment ends -- mimalloc puts the header a whole segment before it
 * -- and @p itself would find user data where the header should be.
 * Every other block is inside its segment, past the header.
 */
static inline const char *mi209_segment(const void *p)
{
	return (const char *)(((uintptr_t)p - 1) & ~MI209_SEGMENT_MASK);
}

/*
 * The segment header's mi_page_t entry of the slice that holds @p (for a
 * block at a segment's end, its first slice, which holds the block's page).
 */
static inline const char *mi209_slice(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	const char *seg = mi209_segment(p);

	/* slice index * 80 = ((a >> 12) & (511 << 4)) * 5: three instructions */
	return seg + MI209_SLICES_OFFSET +
	       ((a >> (MI209_SLICE_SHIFT - 4)) & ((MI209_SEGMENT_MASK >> MI209_SLICE_SHIFT) << 4)) *
	       (MI209_PAGE_SIZE / 16);
}

/* The mi_page_t entry of the page that slice entry @slice belongs to. */
static inline const char *mi209_slice_page(const char *slice)
{
	return slice - *(const uint32_t *)(slice + MI209_SLICE_OFFSET_AT);
}

/* The mi_page_t entry of the page that holds non-NULL pointer @p. */
static inline const char *mi209_page(const void *p)
{
	return mi209_slice_page(mi209_slice(p));
}

/* The block size a page (or a slice) entry records (MI209_HUGE_BLOCK: look it up). */
static inline uint32_t mi209_page_block_size(const char *page)
{
	return *(const uint32_t *)(page + MI209_XBLOCK_SIZE_AT);
}

/* The block size of non-NULL pointer @p (MI209_HUGE_BLOCK: look it up). */
static inline uint32_t mi209_block_size(const void *p)
{
	return mi209_page_block_size(mi209_page(p));
}

/* mimalloc's thread id: the thread pointer, %fs:0 on x86-64 (0 elsewhere: not known here). */
static inline uintptr_t mi209_thread_id(void)
{
	uintptr_t self = 0;

#if defined(__x86_64__)
	/* volatile: not read before the tests that precede it in mi209_free_block() */
	__asm__ volatile("mov %%fs:0, %0" : "=r"(self));
#endif
	return self;
}

/*
 * The block size as the pointer's own slice entry records it, without
 * following the slice to the first slice of its page.  Blocks of at most
 * 1 KiB live in single-slice (64 KiB) pages, so for them this is the
 * block size; for a pointer into a later slice of a longer page mimalloc
 * records 1 there (and larger blocks are not small anyway).  So a result
 * in [8, 1024] is exact, anything else needs mi209_block_size().
 */
static inline uint32_t mi209_slice_block_size(const void *p)
{
	return mi209_page_block_size(mi209_slice(p));
}

/*
 * What mimalloc's free does when it empties a page of its own thread
 * (_mi_page_retire): if the page is the only one in its heap's queue for
 * its block size, it stays there, marked retired for a number of the
 * heap's slow-path visits (the 7-bit retire_expire above bit 0 of byte
 * 15), and the heap widens the range of queues [page_retired_min,
 * page_retired_max] it later looks at for retired pages; otherwise the
 * page is freed (not done here).
 */
#define MI209_HEAP_QUEUES_AT	1040	/* heap: mi_page_queue_t pages[75] (first, last, block_size) */
#define MI209_QUEUE_SIZE	24
#define MI209_QUEUE_LAST_AT	8	/* queue: its last page (its first at 0) */
#define MI209_QUEUE_BLOCK_AT	16	/* queue: the block size of its pages */
#define MI209_BIN_HUGE		73	/* queues 0..72 are of block sizes; 73 huge, 74 full */
#define MI209_BIN_FULL		74
#define MI209_MEDIUM_OBJ_MAX	(128u << 10)	/* larger blocks have pages of their own (one block) */
#define MI209_RETIRED_MIN_AT	3032	/* heap: page_retired_min */
#define MI209_RETIRED_MAX_AT	3040	/* heap: page_retired_max */
#define MI209_EXPIRE_AT		15	/* page: is_zero (bit 0), retire_expire (bits 1-7) */
#define MI209_RETIRE_EXPIRE	9	/* 1 + MI_RETIRE_CYCLES, for blocks of at most 16 KiB */

/* The queue of bin @bin in heap @heap. */
static inline char *mi209_heap_queue(const char *heap, size_t bin)
{
	return (char *)heap + MI209_HEAP_QUEUES_AT + bin * MI209_QUEUE_SIZE;
}

/* The first (@at 0) or last (MI209_QUEUE_LAST_AT) page of @queue. */
static inline char **mi209_queue_end(const char *queue, unsigned int at)
{
	return (char **)(queue + at);
}

/* The block size of @queue's pages. */
static inline size_t mi209_queue_block_size(const char *queue)
{
	return *(const size_t *)(queue + MI209_QUEUE_BLOCK_AT);
}

/*
 * mimalloc's bin (its queue in a heap) of small block size @s, a multiple
 * of 8 (_mi_bin): a constant expression, for the table below.  (The & 31
 * keeps the shift of the arm not taken for small sizes a valid one.)
 */
#define MI209_W(s)	((unsigned int)(s) / 8u)
#define MI209_LOG2(x)	(31 - __builtin_clz((x) | 1u))
#define MI209_BIN(s)							\
	(MI209_W(s) <= 1 ? 1u :						\
	 MI209_W(s) <= 8 ? ((MI209_W(s) + 1) & ~1u) :			\
	 (unsigned int)((MI209_LOG2(MI209_W(s) - 1) << 2) +		\
			(((MI209_W(s) - 1) >> ((MI209_LOG2(MI209_W(s) - 1) - 2) & 31)) & 3) - 3))

/*
 * mimalloc's bin of each small block size, at index size / 8; 129
 * entries, sizes 0..1024 (shim/mi_layout.c).  A byte each: with 8 (the
 * free's block size indexing it without a shift) it was 903 bytes more of
 * the read-only data every process maps, for a shift in the free that
 * empties a page.
 */
/* mimalloc's queue of 1280-byte blocks: the first of the medium bins, which are its queues in order. */
#define MI209_BIN_MEDIUM0	MI209_BIN(1280)

#define MI209_BIN_AT_SIZE_MAX 1024
extern const uint8_t mi209_bin_at_size[MI209_BIN_AT_SIZE_MAX / 8 + 1] __attribute__((visibility("hidden")));

/*
 * Allocation from the calling thread's default heap, as mimalloc's own
 * fast paths take a block: the page its heap names for the size (the
 * direct table of pages by word size up to 1 KiB, or the first page of
 * the size's queue), the first block of that page's free list, one more
 * block in use.  mi_malloc_small() does that in 13 instructions after
 * our call into it; a medium size goes through _mi_malloc_generic(),
 * about 160 instructions before it pops the same block (callgrind,
 * malloc(4096)).  When the page has no free block -- its local and
 * remote frees not collected yet, no page at all, the heap not made yet
 * -- the caller calls mimalloc, which does all of that and goes on.
 *
 * The heap is mimalloc's own thread-local default heap (_mi_heap_default,
 * the first word of libmimalloc's static TLS block), read at its offset
 * from the thread pointer, found at start-up (mi209_heap_setup()): so a
 * thread that mimalloc has not set up yet, or has finished, reads the
 * empty heap mimalloc itself would use.  Where it is not found, or with
 * alloc_pop=0 (and under ThreadSanitizer, and off x86-64), the offset
 * names a heap of ours with no page, and every allocation calls mimalloc.
 */
#define MI209_PAGE_FREE_AT	16	/* page: the free list allocation pops */
#define MI209_HEAP_DIRECT_AT	8	/* heap: mi_page_t *pages_free_direct[129], by word size */
#define MI209_DIRECT_PAGES	129

extern uintptr_t mi209_heap_tpoff __attribute__((visibility("hidden")));

/* Find mimalloc's default-heap pointer in its TLS block (the tpoff above), if @allowed; true if found. */
bool mi209_heap_setup(bool allowed) __attribute__((visibility("hidden")));

#if defined(__x86_64__)
/* The calling thread's default heap: one load at the offset from the thread pointer. */
static inline __attribute__((always_inline)) char *mi209_default_heap(void)
{
	char *heap;

	__asm__ volatile("mov %%fs:(%1), %0" : "=r"(heap) : "r"(mi209_heap_tpoff));
	return heap;
}
#endif

/* Pop the first free block of @page (mimalloc's _mi_page_malloc); NULL if it has none. */
static inline __attribute__((always_inline)) void *mi209_page_pop(char *page)
{
	void **list = (void **)(page + MI209_PAGE_FREE_AT);
	void *b = *list;

	if (cgm_unlikely(!b))
		return NULL;
	*list = *(void **)b;
	*(uint32_t *)(page + MI209_USED_AT) += 1;
	return b;
}

/*
 * @page's free list is empty: take its local frees as its free list and
 * pop the first, as mimalloc's collect (_mi_page_free_collect) does first
 * in its generic path -- only when no other thread has freed into the
 * page (their list is mimalloc's to take), and the page's is_zero bit
 * (bit 0 of byte 15) cleared, as there: freed blocks are not zeroed.
 * NULL if there is nothing to take.
 */
static inline __attribute__((always_inline)) void *mi209_page_take_local(char *page)
{
	void **local = (void **)(page + MI209_LOCAL_FREE_AT);
	void *b = *local;

	if (!b || (__atomic_load_n((const uintptr_t *)(page + MI209_THREAD_FREE_AT), __ATOMIC_RELAXED) &
		   ~MI209_DELAYED_MASK))
		return NULL;
	*local = NULL;
	*(uint8_t *)(page + MI209_EXPIRE_AT) &= (uint8_t)~1u;
	*(void **)(page + MI209_PAGE_FREE_AT) = b;
	return mi209_page_pop(page);
}

/* The page @heap's direct table names for @n bytes, 0..1024 (by word size, as mimalloc's). */
static inline __attribute__((always_inline)) char *mi209_direct_page(const char *heap, size_t n)
{
	return *(char *const *)(heap + MI209_HEAP_DIRECT_AT + ((n + 7) >> 3) * sizeof(char *));
}

/*
 * A block of @n bytes, 0..1024, from the heap's direct table, its page's
 * local frees taken when its free list ran out (as mi209_pop_queue does);
 * NULL to call mimalloc.  (The direct table's page for a size without one
 * is mimalloc's empty page, with no local frees: nothing is written.)
 */
static inline __attribute__((always_inline)) void *mi209_pop_small(size_t n)
{
#if defined(__x86_64__) && !defined(CGM_TSAN)
	char *page = mi209_direct_page(mi209_default_heap(), n);
	void *b = mi209_page_pop(page);

	return cgm_likely(b != NULL) ? b : mi209_page_take_local(page);
#else
	(void)n;
	return NULL;
#endif
}

/*
 * A block from the first page of queue @bin (a block size above 1 KiB);
 * NULL to call mimalloc.  A medium page's free list is extended 4 blocks
 * at a time, so a thread that frees and allocates a block of the size in
 * turn empties it every few calls: the page's own local frees are taken
 * here (a malloc(4096)+free pair: 157 instructions when each empty list
 * went to mimalloc's generic path).
 */
static inline __attribute__((always_inline)) void *mi209_pop_queue(size_t bin)
{
#if defined(__x86_64__) && !defined(CGM_TSAN)
	char *page = *mi209_queue_end(mi209_heap_queue(mi209_default_heap(), bin), 0);
	void *b;

	if (cgm_unlikely(page == NULL))
		return NULL;
	b = mi209_page_pop(page);
	return cgm_likely(b != NULL) ? b : mi209_page_take_local(page);
#else
	(void)bin;
	return NULL;
#endif
}

/*
 * The calling thread frees block @p of its own page @page whose flags
 * are not 0, and not its last block.  mi_free() does that in
 * _mi_free_block() and, when the page is in its heap's full queue,
 * _mi_page_unfull() moves it back to the end of its size's queue, where
 * allocation finds it again.  Done here for such a page of blocks up to
 * 128 KiB whose size's queue holds other pages (an empty queue would
 * need the heap's direct page table updated), the page's links checked
 * first; any other case (aligned blocks too) goes to mi_free().  Out of
 * line, and frees the block either way, so that the inline free calls it
 * last, as a jump, and keeps no frame for it: a page fills only so often
 * (gbench-thread, whose pages of 1..16 KiB hold 4 to 64 blocks: one free
 * in 16, each 137 instructions in mi_free() after our own lookup).
 */
void mi209_free_flagged(void *p, const char *page) __attribute__((visibility("hidden")));

/*
 * Free block @p (@page its page entry: mi209_page(), or for a block of at
 * most 16 KiB, which lives in a one-slice page, mi209_slice()) the way
 * mi_free() does, for its common cases.  The accounted free has already
 * found the page to read the block size, and mi_free() would find it
 * again (26 instructions before it even knows whose page it is).
 *  - A block of the calling thread's own page goes on the page's local
 *    free list, and the page counts one block less in use.
 *  - When that was the page's last block and the page is the only one of
 *    its size in its heap (a program that frees what it just allocated
 *    empties its page each time), the page is also retired as
 *    _mi_page_retire() would, for a block of at most 1 KiB: @small_size
 *    (its block size, or 0: never retire) names its queue.
 *  - A block of another thread's page (or of an abandoned segment's) is
 *    pushed on the page's thread-free list with one compare-and-swap
 *    (release: the link is written first), keeping the list's two tag
 *    bits, the page's delayed-free state; the owner collects it later.
 *    Whether the page is in its heap's full queue does not matter there
 *    (mimalloc's _mi_free_block_mt does not look): a producer's pages
 *    are full when its consumer frees their blocks, and every such free
 *    went to mi_free() while this asked for flags 0 (bench/prodcons).
 *  - A block of our own page with flags (in the full queue, or with
 *    aligned blocks) is freed by mi209_free_flagged().
 * Returns false, having done nothing, for every other case -- another
 * thread's page with aligned blocks (mimalloc adjusts them), a page whose
 * delayed-free state says its heap must hear of the free (0: mimalloc's
 * USE_DELAYED_FREE, which the first free from another thread into a full
 * page meets), a page that empties and must be freed, the last block of
 * another thread's page -- and the caller calls mi_free().  Not for huge
 * blocks (a segment of their own, which mimalloc frees apart).
 * mi_layout_check() checks these facts against the loaded mimalloc at
 * start-up.
 *
 * Under ThreadSanitizer, never: TSan does not see the atomics by which
 * mimalloc hands pages between threads (it is not instrumented), so it
 * would report the new owner's writes as races with the old owner's.
 */
static inline __attribute__((always_inline)) bool mi209_free_block(void *p, const char *page,
								   uint32_t small_size)
{
#if defined(__x86_64__) && !defined(CGM_TSAN)
	const char *seg = mi209_segment(p);
	uint32_t *used = (uint32_t *)(page + MI209_USED_AT);
	void **local_free = (void **)(page + MI209_LOCAL_FREE_AT);
	uintptr_t *thread_free = (uintptr_t *)(page + MI209_THREAD_FREE_AT), old;

	/* The last block first: the rarer case, out of the common path's way. */
	if (cgm_unlikely(*used <= 1)) {
		char *heap = *(char *const *)(page + MI209_HEAP_AT), *queue;
		size_t bin;

		/*
		 * Only the last block of a page of this thread's own (on
		 * another thread's page the count may be stale), of a queue we
		 * know.  (The count read again, atomically: reusing the first
		 * read would cost the common path a register load.)
		 */
		if (small_size - 1 >= MI209_BIN_AT_SIZE_MAX || __atomic_load_n(used, __ATOMIC_RELAXED) != 1 ||
		    *(const uint8_t *)(page + MI209_FLAGS_AT) != 0 ||
		    __atomic_load_n((const uintptr_t *)(seg + MI209_SEG_THREAD_ID_AT), __ATOMIC_RELAXED) !=
			    mi209_thread_id())
			return false;
		/*
		 * The size read again from the page (atomically, so that
		 * the compiler does not reuse small_size: keeping it live
		 * until here cost the common path a register copy).
		 */
		bin = mi209_bin_at_size[__atomic_load_n((const uint32_t *)(page + MI209_XBLOCK_SIZE_AT),
							__ATOMIC_RELAXED) / 8];
		queue = mi209_heap_queue(heap, bin);
		if (*mi209_queue_end(queue, 0) != page || *mi209_queue_end(queue, MI209_QUEUE_LAST_AT) != page)
			return false;
		*(void **)p = *local_free;
		*local_free = p;
		*used = 0;
		*(uint8_t *)(page + MI209_EXPIRE_AT) =
			(uint8_t)((*(const uint8_t *)(page + MI209_EXPIRE_AT) & 1) | (MI209_RETIRE_EXPIRE << 1));
		if (bin < *(size_t *)(heap + MI209_RETIRED_MIN_AT))
			*(size_t *)(heap + MI209_RETIRED_MIN_AT) = bin;
		if (bin > *(size_t *)(heap + MI209_RETIRED_MAX_AT))
			*(size_t *)(heap + MI209_RETIRED_MAX_AT) = bin;
		return true;
	}
	/* The flags read in each branch, as the test's memory operand: no register for them. */
	if (cgm_likely(__atomic_load_n((const uintptr_t *)(seg + MI209_SEG_THREAD_ID_AT),
				       __ATOMIC_RELAXED) == mi209_thread_id())) {
		if (cgm_unlikely(*(const uint8_t *)(page + MI209_FLAGS_AT) != 0)) {
			mi209_free_flagged(p, page);
			return true;
		}
		*(void **)p = *local_free;
		*local_free = p;
		*used -= 1;
		return true;
	}
	if (*(const uint8_t *)(page + MI209_FLAGS_AT) & MI209_HAS_ALIGNED)
		return false;
	old = __atomic_load_n(thread_free, __ATOMIC_RELAXED);
	do {
		if ((old & MI209_DELAYED_MASK) == MI209_USE_DELAYED_FREE)
			return false;
		*(uintptr_t *)p = old & ~MI209_DELAYED_MASK;
	} while (!__atomic_compare_exchange_n(thread_free, &old, (uintptr_t)p | (old & MI209_DELAYED_MASK),
					      true, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
	return true;
#else
	(void)p;
	(void)page;
	(void)small_size;
	return false;
#endif
}

/*
 * Check the layout against the loaded mimalloc: every kind of block
 * (small, medium, large, huge, aligned) must report the block size
 * mi_usable_size() implies.  Returns 0 or -1 with a reason.
 */
int mi_layout_check(const char **why);

/*
 * A hash (FNV-1a) of the loaded mimalloc's GNU build ID and of
 * MI209_CHECK_REVISION, never 0; 0 when mimalloc has no build ID.  The
 * same build ID is the same binary, so a passed mi_layout_check() holds
 * for it: the hierarchy keeps the hash of the last one that passed and
 * later processes skip the check -- until the check itself checks more
 * (a new revision), which a hierarchy made by an older library has not
 * seen pass.
 */
#define MI209_CHECK_REVISION 7	/* 2: page retirement; 3: medium queues, has_aligned alone; 4: slices up to 16 KiB; 5: unfull; 6: allocation pops; 7: local frees taken */
uint64_t mi_build_id_hash(void);

#endif /* CGM_MI_LAYOUT_H */
