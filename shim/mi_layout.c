/*
 * Start-up check that the loaded mimalloc has the layout mi209_block_size()
 * reads and the page fields and free that mi209_free_block() relies on
 * (include/cgm/mi_layout.h).  Run before accounting is switched on, once
 * per mimalloc binary (by build ID) and hierarchy; allocations go
 * straight to mimalloc.  No huge block (above 16 MiB): each maps and
 * unmaps a segment of its own at every start, and their size comes from
 * mi_usable_size() anyway (block_size() in shim/accounted.c).
 */
#include <elf.h>
#include <link.h>
#include <mimalloc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cgm/mi_layout.h"
#include "cgm/size_class.h"

/*
 * A byte each (bins grow with the size: the assertion below covers every
 * size up to 1 KiB).  The cast is explicit: clang checks each arm of
 * MI209_BIN's conditional, and the arm a small size does not take is no
 * bin.
 */
#define BIN(s)	((uint8_t)MI209_BIN(s))
#define B8(s)	BIN(s), BIN((s) + 8), BIN((s) + 16), BIN((s) + 24), \
		BIN((s) + 32), BIN((s) + 40), BIN((s) + 48), BIN((s) + 56)
#define B64(s)	B8(s), B8((s) + 64), B8((s) + 128), B8((s) + 192), \
		B8((s) + 256), B8((s) + 320), B8((s) + 384), B8((s) + 448)
/* Sizes 0..1024; only the block sizes of the bins are ever looked up. */
_Static_assert(MI209_BIN(MI209_BIN_AT_SIZE_MAX) <= UINT8_MAX, "a small size's bin fits a byte");
const uint8_t mi209_bin_at_size[MI209_BIN_AT_SIZE_MAX / 8 + 1] = { B64(0), B64(512), BIN(1024) };

/* The page-entry link at @at (MI209_NEXT_AT, MI209_PREV_AT) of @page. */
static inline char **page_link(const char *page, unsigned int at)
{
	return (char **)(page + at);
}

/*
 * mimalloc's queue of blocks of @size: from tables up to 16 KiB (the
 * formula costs 24 instructions), where the medium bins are mimalloc's
 * queues in order.
 */
_Static_assert(MI209_BIN(16384) - MI209_BIN_MEDIUM0 == CGM_NR_MEDIUM_BINS - 1,
	       "the medium bins are not mimalloc's queues above 1 KiB");
static inline size_t bin_of_block_size(uint32_t size)
{
	if (size <= 1024)
		return mi209_bin_at_size[size / 8];
	if (size <= CGM_MEDIUM_MAX)
		return MI209_BIN_MEDIUM0 + cgm_medium_bin[(size - 1) >> 8];
	return MI209_BIN(size);
}

static bool free_unfull(void *p, const char *page)
{
	uint32_t size = mi209_page_block_size(page);
	char *heap, *full, *to, *prev, *next, *last;

	if (*(const uint8_t *)(page + MI209_FLAGS_AT) != MI209_IN_FULL || size > MI209_MEDIUM_OBJ_MAX)
		return false;
	heap = *(char *const *)(page + MI209_HEAP_AT);
	full = mi209_heap_queue(heap, MI209_BIN_FULL);
	to = mi209_heap_queue(heap, bin_of_block_size(size));
	last = *mi209_queue_end(to, MI209_QUEUE_LAST_AT);
	prev = *page_link(page, MI209_PREV_AT);
	next = *page_link(page, MI209_NEXT_AT);
	/*
	 * The queue is of this block size and not empty, and the page is
	 * linked where the full queue says (first, last or between two).
	 */
	if (mi209_queue_block_size(to) != size || !last ||
	    (prev ? *page_link(prev, MI209_NEXT_AT) : *mi209_queue_end(full, 0)) != page ||
	    (next ? *page_link(next, MI209_PREV_AT) : *mi209_queue_end(full, MI209_QUEUE_LAST_AT)) != page)
		return false;
	*(void **)p = *(void **)(page + MI209_LOCAL_FREE_AT);
	*(void **)(page + MI209_LOCAL_FREE_AT) = p;
	*(uint32_t *)(page + MI209_USED_AT) -= 1;
	/* Out of the full queue (whose first page the heap's direct table never names)... */
	*(prev ? page_link(prev, MI209_NEXT_AT) : mi209_queue_end(full, 0)) = next;
	*(next ? page_link(next, MI209_PREV_AT) : mi209_queue_end(full, MI209_QUEUE_LAST_AT)) = prev;
	/* ... to the end of its size's queue: its first page, the one the direct table names, stays. */
	*page_link(page, MI209_PREV_AT) = last;
	*page_link(page, MI209_NEXT_AT) = NULL;
	*page_link(last, MI209_NEXT_AT) = (char *)page;
	*mi209_queue_end(to, MI209_QUEUE_LAST_AT) = (char *)page;
	*(uint8_t *)(page + MI209_FLAGS_AT) = 0;
	return true;
}

void mi209_free_flagged(void *p, const char *page)
{
	if (!free_unfull(p, page))
		mi_free(p);
}

/*
 * What a free that empties the only page of its size leaves behind, in a
 * fresh heap of our own: the page's retire byte, blocks in use and local
 * list head, and the heap's range of retired queues.
 */
struct retired {
	uint8_t expire_byte;
	uint32_t used;
	void *local_free;
	size_t min, max;
};

/*
 * Allocate one block of @size in a fresh heap and free it, through
 * mimalloc (@ours false) or mi209_free_block(); NULL or what went wrong.
 */
static const char *retire_one(size_t size, bool ours, struct retired *r)
{
	mi_heap_t *heap = mi_heap_new();
	const char *why = NULL, *page, *h = (const char *)heap;
	void *p;

	if (!heap)
		return "mimalloc could not make a heap";
	p = mi_heap_malloc(heap, size);
	if (!p) {
		mi_heap_delete(heap);
		return "mimalloc refused a small block";
	}
	page = mi209_page(p);
	if (ours) {
		if (!mi209_free_block(p, page, mi209_page_block_size(page)))
			why = "mimalloc 2.0.9's page retirement: the page is not the only one in its queue";
	} else {
		mi_free(p);
	}
	r->expire_byte = *(const uint8_t *)(page + MI209_EXPIRE_AT);
	r->used = *(const uint32_t *)(page + MI209_USED_AT);
	r->local_free = *(void *const *)(page + MI209_LOCAL_FREE_AT);
	r->min = *(const size_t *)(h + MI209_RETIRED_MIN_AT);
	r->max = *(const size_t *)(h + MI209_RETIRED_MAX_AT);
	if (r->local_free != p)
		why = "mimalloc 2.0.9's page retirement: the block is not on the local free list";
	mi_heap_destroy(heap);
	return why;
}

/*
 * mi209_free_block()'s retirement of an emptied page against mimalloc's
 * own, and the queue every small block size maps to (the queue's
 * block_size field) in the calling thread's default heap.
 */
static const char *check_retire(void)
{
	const char *heap = (const char *)mi_heap_get_default(), *why;
	struct retired theirs, ours;

	for (unsigned int b = 0; b < CGM_NR_BINS; b++) {
		size_t size = cgm_bin_size(b);
		const char *queue = mi209_heap_queue(heap, mi209_bin_at_size[size / 8]);

		if (mi209_bin_at_size[size / 8] >= MI209_BIN_HUGE || mi209_queue_block_size(queue) != size)
			return "mimalloc's heap queues are not the ones of 2.0.9";
	}
	/*
	 * The medium bins are charged before the allocation by the block
	 * size their table gives: the first and the last request of each
	 * must go to a queue of blocks of that size.
	 */
	for (unsigned int m = 0; m < CGM_NR_MEDIUM_BINS; m++) {
		size_t last = cgm_medium_sizes[m], first = m ? cgm_medium_sizes[m - 1] + 1u : 1025u;

		for (size_t n = first; n <= last; n += last - first) {
			const char *queue = mi209_heap_queue(heap, MI209_BIN((n + 7) & ~(size_t)7));

			if (MI209_BIN((n + 7) & ~(size_t)7) >= MI209_BIN_HUGE ||
			    mi209_queue_block_size(queue) != last ||
			    cgm_medium_sizes[cgm_medium_bin[(n - 1) >> 8]] != last)
				return "mimalloc's heap queues above 1 KiB are not the ones of 2.0.9";
		}
	}
#if defined(__x86_64__) && !defined(CGM_TSAN)
	for (unsigned int i = 0; i < 3; i++) {
		static const size_t sizes[] = { 32, 8, 1024 };

		why = retire_one(sizes[i], false, &theirs);
		if (!why)
			why = retire_one(sizes[i], true, &ours);
		if (why)
			return why;
		if (theirs.expire_byte != ours.expire_byte || theirs.used != 0 || ours.used != 0 ||
		    theirs.min != ours.min || theirs.max != ours.max ||
		    theirs.min != mi209_bin_at_size[cgm_small_block_size(sizes[i]) / 8])
			return "mimalloc's page retirement is not the one of 2.0.9 (retire_expire, retired queues)";
	}
#else
	(void)theirs;
	(void)ours;
	(void)why;
#endif
	return NULL;
}

/*
 * mi209_free_block() does what mi_free() does in its common cases, so
 * check the fields it names on this mimalloc, in a heap of our own (fresh
 * pages): the segment's owner is our thread pointer, a page with no
 * aligned block has flags 0 and names its heap in the word after an empty
 * thread-free list, mi_free() of a block of ours pushes it on local_free
 * and counts one block less in use, and a page where an aligned block had
 * to be offset inside its block has flags MI209_HAS_ALIGNED exactly (a
 * free from another thread looks at that bit alone).  Returns NULL or
 * what differs.
 */
static const char *check_free_block(void)
{
	const char *why = NULL;
	mi_heap_t *heap = mi_heap_new();
	void *a, *b, *old_head, *aligned[8];
	const char *page;
	uint32_t used;
	uintptr_t self = mi209_thread_id();
	int offset = -1;

	if (!heap)
		return "mimalloc could not make a heap";
	a = mi_heap_malloc(heap, 32);
	b = mi_heap_malloc(heap, 32);
	if (!a || !b) {
		why = "mimalloc refused two 32-byte blocks";
		goto out;
	}
	page = mi209_page(b);
	used = *(const uint32_t *)(page + MI209_USED_AT);
	old_head = *(void *const *)(page + MI209_LOCAL_FREE_AT);
	/*
	 * The thread-free list is the word before the heap pointer: the page
	 * names our heap, and no other thread freed into it (tag bits aside).
	 */
	if (page != mi209_page(a) || used < 2 || *(const uint8_t *)(page + MI209_FLAGS_AT) != 0 ||
	    (self && *(const uintptr_t *)(mi209_segment(b) + MI209_SEG_THREAD_ID_AT) != self) ||
	    *(void *const *)(page + MI209_HEAP_AT) != (void *)heap ||
	    (*(const uintptr_t *)(page + MI209_THREAD_FREE_AT) & ~MI209_DELAYED_MASK) != 0) {
		why = "mimalloc's page fields are not the ones of 2.0.9 (owner, flags, blocks in use, heap)";
		goto out;
	}
	mi_free(b);
	if (*(const uint32_t *)(page + MI209_USED_AT) != used - 1 ||
	    *(void *const *)(page + MI209_LOCAL_FREE_AT) != b || *(void **)b != old_head) {
		why = "mimalloc's free is not the one of 2.0.9 (local free list or blocks in use)";
		goto out;
	}
	/* An aligned allocation mimalloc had to offset inside its block marks the page. */
	for (int i = 0; i < 8; i++) {
		aligned[i] = mi_heap_malloc_aligned(heap, 8, 64);
		if (offset < 0 && aligned[i] && mi_usable_size(aligned[i]) < mi209_block_size(aligned[i]))
			offset = *(const uint8_t *)(mi209_page(aligned[i]) + MI209_FLAGS_AT) ==
				 MI209_HAS_ALIGNED;
	}
	if (offset == 0)
		why = "mimalloc's page flags are not the ones of 2.0.9 (has_aligned)";
	else if (offset < 0)
		why = "mimalloc never offset an aligned block (has_aligned not checked)";
out:
	mi_heap_destroy(heap);
	return why;
}

/*
 * The shape of a heap's queues of 16 KiB blocks after a free into the
 * second of two full pages: each link as which page it names (1..3: the
 * pages in the order they were made, 0 none, 4 another).
 */
struct unfull_shape {
	uint8_t full_first, full_last, first, last, b_prev, b_next, c_next, b_flags;
	uint32_t b_used;
};

static uint8_t which(const char *link, const char *const pages[3])
{
	if (!link)
		return 0;
	for (uint8_t i = 0; i < 3; i++)
		if (link == pages[i])
			return i + 1;
	return 4;
}

/*
 * Fill two pages of 16 KiB blocks (four each) in a fresh heap and start
 * a third, check that the two full ones are linked in the full queue as
 * mi209_free_flagged() reads them, free a block of the second through
 * mimalloc (@ours false) or mi209_free_block(), and say where the page
 * went (*@s).  NULL or what went wrong.
 */
static const char *unfull_one(bool ours, struct unfull_shape *s)
{
	mi_heap_t *heap = mi_heap_new();
	const char *h = (const char *)heap, *pages[3], *why = NULL;
	const char *full = mi209_heap_queue(h, MI209_BIN_FULL);
	const char *queue = mi209_heap_queue(h, MI209_BIN(16384));
	void *blocks[9];

	if (!heap)
		return "mimalloc could not make a heap";
	for (int i = 0; i < 9; i++) {
		blocks[i] = mi_heap_malloc(heap, 16384);
		if (!blocks[i]) {
			why = "mimalloc refused a block of 16 KiB";
			goto out;
		}
	}
	for (int i = 0; i < 3; i++)
		pages[i] = mi209_page(blocks[4 * i]);
	if (mi209_page(blocks[3]) != pages[0] || mi209_page(blocks[7]) != pages[1] ||
	    *(const uint8_t *)(pages[0] + MI209_FLAGS_AT) != MI209_IN_FULL ||
	    *(const uint8_t *)(pages[1] + MI209_FLAGS_AT) != MI209_IN_FULL ||
	    *(const uint8_t *)(pages[2] + MI209_FLAGS_AT) != 0 ||
	    *mi209_queue_end(full, 0) != pages[0] ||
	    *mi209_queue_end(full, MI209_QUEUE_LAST_AT) != pages[1] ||
	    *page_link(pages[0], MI209_NEXT_AT) != pages[1] ||
	    *page_link(pages[1], MI209_PREV_AT) != pages[0] ||
	    *mi209_queue_end(queue, 0) != pages[2] ||
	    *mi209_queue_end(queue, MI209_QUEUE_LAST_AT) != pages[2]) {
		why = "mimalloc's full queue is not the one of 2.0.9 (pages of 16 KiB blocks, links)";
		goto out;
	}
	if (!ours)
		mi_free(blocks[5]);
	else if (!mi209_free_block(blocks[5], pages[1], 0) ||
		 *(const uint8_t *)(pages[1] + MI209_FLAGS_AT) != 0)
		why = "mi209_free_flagged() left a page of the full queue to mimalloc";
	s->full_first = which(*mi209_queue_end(full, 0), pages);
	s->full_last = which(*mi209_queue_end(full, MI209_QUEUE_LAST_AT), pages);
	s->first = which(*mi209_queue_end(queue, 0), pages);
	s->last = which(*mi209_queue_end(queue, MI209_QUEUE_LAST_AT), pages);
	s->b_prev = which(*page_link(pages[1], MI209_PREV_AT), pages);
	s->b_next = which(*page_link(pages[1], MI209_NEXT_AT), pages);
	s->c_next = which(*page_link(pages[2], MI209_NEXT_AT), pages);
	s->b_flags = *(const uint8_t *)(pages[1] + MI209_FLAGS_AT);
	s->b_used = *(const uint32_t *)(pages[1] + MI209_USED_AT);
	if (*(void *const *)(pages[1] + MI209_LOCAL_FREE_AT) != blocks[5])
		why = "mimalloc 2.0.9's unfull: the block is not on the local free list";
out:
	mi_heap_destroy(heap);
	return why;
}

/*
 * mi209_free_flagged() against mimalloc's own free into a page of the
 * full queue.  With mimalloc's decommit delay at zero meanwhile, the 288
 * KiB the probes touch go back to the system as the heaps are destroyed:
 * left to the delay, they stayed resident in a segment the program's
 * first blocks then share, charged to whatever group the first process
 * of a new hierarchy is in (check-api's memory.reclaim came up 12-16 KiB
 * short).
 */
static const char *check_unfull(void)
{
#if defined(__x86_64__) && !defined(CGM_TSAN)
	struct unfull_shape theirs = { 0 }, ours = { 0 };
	long delay = mi_option_get(mi_option_decommit_delay);
	const char *why;

	mi_option_set(mi_option_decommit_delay, 0);
	why = unfull_one(false, &theirs);
	if (!why)
		why = unfull_one(true, &ours);
	mi_option_set(mi_option_decommit_delay, delay);
	if (!why && (memcmp(&theirs, &ours, sizeof(theirs)) != 0 || theirs.b_flags != 0 || theirs.last != 2))
		why = "mimalloc's unfull is not the one of 2.0.9 (where the page goes)";
	return why;
#else
	return NULL;
#endif
}

/*
 * mi209_pop_small() and mi209_pop_queue() take the block mimalloc's own
 * allocation would take next, and mimalloc goes on from there: in a
 * fresh heap, a block of 48 bytes and one of 4 KiB through mimalloc make
 * each size's page; the page named by the direct table (48) or first in
 * the queue (4 KiB) must be that block's, our pop must return the head
 * of its free list and count one block more in use, and mimalloc's next
 * block of the size must be the new head.  And each medium bin's queue,
 * counted from the one of 1280-byte blocks, holds blocks of its size.
 */
static const char *pop_one(mi_heap_t *heap, size_t size, char *page)
{
	void *first = mi_heap_malloc(heap, size), *head, *ours, *next;
	uint32_t used;

	if (!first)
		return "mimalloc refused a block";
	if (mi209_page(first) != page)
		return "mimalloc's heap does not name the page it allocates from (direct table, queue)";
	head = *(void **)(page + MI209_PAGE_FREE_AT);
	used = *(const uint32_t *)(page + MI209_USED_AT);
	if (!head)
		return "mimalloc's page has a single block";
	ours = mi209_page_pop(page);
	next = *(void **)(page + MI209_PAGE_FREE_AT);
	if (ours != head || *(const uint32_t *)(page + MI209_USED_AT) != used + 1 ||
	    mi_usable_size(ours) != size)
		return "mimalloc's page free list is not the one of 2.0.9 (free, used)";
	if (next && mi_heap_malloc(heap, size) != next)
		return "mimalloc does not go on from the free list we popped";
	return NULL;
}

/*
 * mi209_page_take_local(): @probe's page emptied of free blocks through
 * mimalloc, @probe freed onto its local list, the take must hand @probe
 * out again with the page's lists and counts as mimalloc's collect leaves
 * them, and mimalloc must go on from there.
 */
static const char *take_local_one(mi_heap_t *heap, void *probe)
{
	char *page = (char *)mi209_page(probe);
	uint32_t used;
	void *b;

	for (int i = 0; i < 64 && *(void **)(page + MI209_PAGE_FREE_AT); i++)
		if (!mi_heap_malloc(heap, 4096))
			return "mimalloc refused a block";
	if (*(void **)(page + MI209_PAGE_FREE_AT))
		return "mimalloc's page of 4 KiB blocks does not run out";
	mi_free(probe);
	used = *(const uint32_t *)(page + MI209_USED_AT);
	b = mi209_page_take_local(page);
	if (b != probe || *(void **)(page + MI209_LOCAL_FREE_AT) != NULL ||
	    *(void **)(page + MI209_PAGE_FREE_AT) != NULL ||
	    *(const uint32_t *)(page + MI209_USED_AT) != used + 1 ||
	    (*(const uint8_t *)(page + MI209_EXPIRE_AT) & 1) != 0)
		return "mimalloc's page local free list is not the one of 2.0.9 (collect)";
	b = mi_heap_malloc(heap, 4096);
	if (!b || b == probe)
		return "mimalloc does not go on from the local frees we took";
	return NULL;
}

static const char *pop_in_fresh_heap(void)
{
	mi_heap_t *heap = mi_heap_new();
	const char *h = (const char *)heap, *why = NULL;
	void *probe;

	if (!heap)
		return "mimalloc could not make a heap";
	for (unsigned int m = 0; m < CGM_NR_MEDIUM_BINS && !why; m++)
		if (mi209_queue_block_size(mi209_heap_queue(h, MI209_BIN_MEDIUM0 + m)) != cgm_medium_sizes[m])
			why = "mimalloc's queues above 1 KiB are not the medium bins in order";
	/* A page is made by the first block of its size: look it up after one. */
	if (!why) {
		probe = mi_heap_malloc(heap, 48);
		why = probe ? pop_one(heap, 48, mi209_direct_page(h, 48)) :
			      "mimalloc refused a block";
	}
	if (!why) {
		probe = mi_heap_malloc(heap, 4096);
		why = probe ? pop_one(heap, 4096, *mi209_queue_end(mi209_heap_queue(h, MI209_BIN(4096)), 0)) :
			      "mimalloc refused a block";
	}
	if (!why)
		why = take_local_one(heap, probe);
	mi_heap_destroy(heap);
	return why;
}

/*
 * With the decommit delay at zero meanwhile, as in check_unfull(): left
 * to the delay, the probe's pages were decommitted later under the
 * program's first large block, which a fresh hierarchy's first process
 * then faulted in anew (check-large-park: 3072 faults instead of none).
 */
static const char *check_pop(void)
{
	long delay = mi_option_get(mi_option_decommit_delay);
	const char *why;

	mi_option_set(mi_option_decommit_delay, 0);
	why = pop_in_fresh_heap();
	mi_option_set(mi_option_decommit_delay, delay);
	return why;
}

int mi_layout_check(const char **why)
{
	static const size_t sizes[] = {
		/* small pages at both ends and at 2 and 16 KiB, a medium page, large pages of a span and of a segment */
		8, 24, 1000, 1024, 2000, 16384, 40000, 300000, 5 << 20,
	};
	void *blocks[sizeof(sizes) / sizeof(sizes[0])];
	int bad = 0;

	if (mi_version() != 209) {
		*why = "mimalloc is not version 2.0.9";
		return -1;
	}
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		blocks[i] = mi_malloc(sizes[i]);
		if (!blocks[i] || mi209_block_size(blocks[i]) != mi_usable_size(blocks[i]))
			bad++;
		/* Up to 16 KiB (the bins) a block's own slice names its size: its page is one slice. */
		if (sizes[i] <= CGM_MEDIUM_MAX &&
		    (mi_usable_size(blocks[i]) != cgm_small_block_size(sizes[i]) ||
		     mi209_slice_block_size(blocks[i]) != mi_usable_size(blocks[i])))
			bad++;
	}
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		mi_free(blocks[i]);
	if (bad) {
		*why = "mimalloc's page layout is not the one of 2.0.9 (block sizes disagree)";
		return -1;
	}
	*why = check_free_block();
	if (!*why)
		*why = check_retire();
	if (!*why)
		*why = check_unfull();
	if (!*why)
		*why = check_pop();
	return *why ? -1 : 0;
}

struct build_id_search {
	uintptr_t inside;	/* an address in the object looked for */
	uint64_t hash;		/* FNV-1a of its build ID, 0 if none */
	void *tls;		/* the calling thread's copy of its TLS block, NULL if none */
	size_t tls_size;
};

/* mimalloc's TLS block in the thread that started the process (mi_build_id_hash()). */
static void *mi_tls;
static size_t mi_tls_size;

/* FNV-1a of the NT_GNU_BUILD_ID descriptor among the notes in [p, end). */
static uint64_t build_id_in_notes(const char *p, const char *end)
{
	while (p + sizeof(ElfW(Nhdr)) <= end) {
		const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
		const char *name = p + sizeof(*n);
		const unsigned char *desc = (const unsigned char *)name + ((n->n_namesz + 3) & ~3u);
		const char *next = (const char *)desc + ((n->n_descsz + 3) & ~3u);

		if (next > end || next <= p)
			return 0;
		if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && n->n_descsz >= 8 &&
		    name[0] == 'G' && name[1] == 'N' && name[2] == 'U' && name[3] == '\0') {
			uint64_t h = 0xcbf29ce484222325ull;

			for (uint32_t i = 0; i < n->n_descsz; i++)
				h = (h ^ desc[i]) * 0x100000001b3ull;
			h = (h ^ MI209_CHECK_REVISION) * 0x100000001b3ull;
			return h ? h : 1;
		}
		p = next;
	}
	return 0;
}

static int find_build_id(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct build_id_search *s = arg;
	bool inside = false;

	(void)size;
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && s->inside - start < ph->p_memsz)
			inside = true;
	}
	if (!inside)
		return 0;
	for (ElfW(Half) i = 0; i < info->dlpi_phnum && !s->hash; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const char *notes = (const char *)(info->dlpi_addr + ph->p_vaddr);

		if (ph->p_type == PT_NOTE)
			s->hash = build_id_in_notes(notes, notes + ph->p_memsz);
	}
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_TLS) {
			s->tls = info->dlpi_tls_data;
			s->tls_size = info->dlpi_phdr[i].p_memsz;
		}
	return 1;
}

uint64_t mi_build_id_hash(void)
{
	struct build_id_search s = { .inside = (uintptr_t)&mi_version, .hash = 0 };

	dl_iterate_phdr(find_build_id, &s);
	mi_tls = s.tls;
	mi_tls_size = s.tls_size;
	return s.hash;
}

/*
 * A heap with no page, for when mimalloc's default heap is not found: its
 * direct table names a page with an empty free list, its queues none.
 * Among the big buffers of the bss, filled only when it is used: 2.9 KiB
 * that took the small variables of the bss, which every process writes,
 * a page further.
 */
CGM_BIG_BSS static char no_page[MI209_PAGE_SIZE];
CGM_BIG_BSS static char *no_heap[(MI209_HEAP_QUEUES_AT + (MI209_BIN_FULL + 1) * MI209_QUEUE_SIZE) /
				 sizeof(char *)];
/* Every thread's copy points at it (static TLS, as mimalloc's own). */
static __thread char **no_heap_of_thread = no_heap;
uintptr_t mi209_heap_tpoff;

/*
 * Before accounting starts, after mi_build_id_hash(): point
 * mi209_heap_tpoff at mimalloc's default-heap pointer -- the first word of
 * its TLS block, which it must hold now, on the thread that starts the
 * process -- or, when that is not found or not @allowed (alloc_pop=0),
 * at a heap of ours with no page.  libmimalloc's TLS is
 * static (initial-exec, as it is built), so the offset from the thread
 * pointer is the same in every thread, and in a forked child.
 */
bool mi209_heap_setup(bool allowed)
{
	uintptr_t tp = mi209_thread_id();

#if defined(__x86_64__) && !defined(CGM_TSAN)
	if (allowed && tp && mi_tls && mi_tls_size >= sizeof(void *) &&
	    *(void **)mi_tls == (void *)mi_heap_get_default()) {
		mi209_heap_tpoff = (uintptr_t)mi_tls - tp;
		return true;
	}
#else
	(void)allowed;
#endif
	for (unsigned int w = 0; w < MI209_DIRECT_PAGES; w++)
		no_heap[MI209_HEAP_DIRECT_AT / sizeof(char *) + w] = no_page;
	mi209_heap_tpoff = (uintptr_t)&no_heap_of_thread - tp;
	return false;
}
