/*
 * The accounted free does mimalloc's two common frees itself
 * (mi209_free_block in include/cgm/mi_layout.h): a block of the thread's
 * own page goes on the page's local free list and the page counts one
 * block less in use; a block of another thread's page is pushed on that
 * page's thread-free list.  Check that mimalloc's heap stays consistent
 * through both: after random mallocs and frees, a sixteenth of the frees
 * made by another thread, mimalloc's own walk of the heap
 * (mi_heap_visit_blocks, after mi_heap_collect has taken the thread-free
 * lists in; it takes every block off the page's free lists and counts
 * what is left) finds exactly the blocks still live -- small ones, and a
 * sixteenth of medium ones, up to 48 KiB, in one-slice and in longer
 * pages -- and a page's "used" count agrees with the blocks found in it;
 * every live block still holds its pattern; freed blocks are handed out
 * again.
 *
 * And a block aligned to 64 MiB, which starts where its segment ends:
 * the free must find the page in the segment before it, not read the
 * block's own first bytes as a segment header -- here they are made to
 * look like a small page of this thread, which a free that read them
 * would take the block for, keep it and leak it (found by this test).
 *
 * And a producer's full pages emptied by another thread (bench/prodcons):
 * pages in their heap's full queue take frees from other threads on
 * their thread-free list too, as mimalloc's own free does; the heap walk
 * finds none of those blocks live.
 *
 * And frees by the owning thread into its own full pages: the page goes
 * back to its size's queue (mi209_free_flagged) and its freed blocks are
 * handed out again before any new page.
 *
 * Usage: test_local_free [ROUNDS]   (accounting must be on)
 */
#include <pthread.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mimalloc.h>

#include "cgm/mi_layout.h"
#include "cgmalloc.h"

#define NBLOCKS 20000

struct walk {
	size_t blocks;		/* blocks visited */
	size_t used;		/* sum of the areas' used counts */
};

static bool visit(const mi_heap_t *heap, const mi_heap_area_t *area, void *block, size_t size,
		  void *arg)
{
	struct walk *w = arg;

	(void)heap;
	(void)size;
	if (block)
		w->blocks++;
	else
		w->used += area->used;
	return true;
}

static struct walk walk_heap(void)
{
	struct walk w = { 0, 0 };

	/* Blocks other threads freed wait on their page's thread-free list, still "used": collect them. */
	mi_heap_collect(mi_heap_get_default(), false);
	mi_heap_visit_blocks(mi_heap_get_default(), true, visit, &w);
	return w;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Mostly small blocks (the accounted free's inline path), a sixteenth medium. */
static size_t random_size(void)
{
	uint64_t r = next_rand();

	return r % 16 ? 1 + (r >> 8) % 1024 : 1025 + (r >> 8) % (48 * 1024);
}

static unsigned char *block[NBLOCKS];
static size_t block_size[NBLOCKS];

static void fill(size_t i)
{
	memset(block[i], (int)(i * 7 + block_size[i]) & 0xff, block_size[i]);
}

static int intact(size_t i)
{
	unsigned char want = (unsigned char)((i * 7 + block_size[i]) & 0xff);

	for (size_t k = 0; k < block_size[i]; k++)
		if (block[i][k] != want)
			return 0;
	return 1;
}

static void *free_some(void *arg)
{
	size_t *from = arg;

	for (size_t i = *from; i < NBLOCKS; i += 16) {
		free(block[i]);
		block[i] = NULL;
	}
	return NULL;
}

/* Resident pages of the process. */
static long resident_pages(void)
{
	long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &size, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return resident;
}

/* 20 blocks of 8 MiB aligned to 64 MiB, each touched, disguised and freed: resident growth in KiB. */
static long huge_aligned_frees(void)
{
	long before = resident_pages();

	for (int i = 0; i < 20; i++) {
		unsigned char *volatile p = aligned_alloc(64u << 20, 8u << 20);

		if (!p)
			return -1;
		for (size_t k = 0; k < (8u << 20); k += 4096)
			p[k] = 1;
		/* Where a segment header would be if the block were a segment: a small page of ours. */
		*(volatile uint32_t *)(p + 264 + 4) = 0;	/* slice offset */
		*(volatile uint8_t *)(p + 264 + 14) = 0;	/* flags */
		*(volatile uint32_t *)(p + 264 + 24) = 5;	/* blocks in use */
		*(volatile uint32_t *)(p + 264 + 28) = 32;	/* block size */
		*(volatile uintptr_t *)(p + 0x100) = (uintptr_t)pthread_self();	/* owner */
		free(p);
	}
	return (resident_pages() - before) * (sysconf(_SC_PAGESIZE) / 1024);
}

#define HANDED 6000
static void *handed[HANDED];

static void *free_handed(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < HANDED; i++)
		free(handed[i]);
	return NULL;
}

/*
 * Blocks of 48 bytes allocated here and freed by another thread, most of
 * them from pages in the full queue (counted in *@full): the heap walk
 * (after mi_heap_collect has taken in the thread-free lists and the
 * heap's delayed frees) must find none of them live, and the pages' used
 * counts must agree with it.  0, or what went wrong in *@what.
 */
static int remote_frees_of_full_pages(size_t *full, const char **what, size_t *got, size_t *want)
{
	struct walk before = walk_heap(), w;
	pthread_t other;

	*full = 0;
	for (size_t i = 0; i < HANDED; i++) {
		handed[i] = malloc(48);
		if (!handed[i]) {
			*what = "malloc(48) returned NULL, block";
			*got = i;
			*want = 0;
			return -1;
		}
	}
	for (size_t i = 0; i < HANDED; i++)
		*full += *(const uint8_t *)(mi209_page(handed[i]) + MI209_FLAGS_AT) == MI209_IN_FULL;
	w = walk_heap();
	if (w.blocks != before.blocks + HANDED || w.used != w.blocks) {
		*what = "blocks found with the 48-byte blocks live";
		*got = w.blocks;
		*want = before.blocks + HANDED;
		return -1;
	}
	if (pthread_create(&other, NULL, free_handed, NULL) || pthread_join(other, NULL)) {
		*what = "cannot run a thread";
		*got = *want = 0;
		return -1;
	}
	w = walk_heap();
	if (w.blocks != before.blocks || w.used != w.blocks) {
		*what = "blocks found after another thread freed the 48-byte blocks";
		*got = w.blocks;
		*want = before.blocks;
		return -1;
	}
	return 0;
}

#define OWN 4000
#define OWN_SIZE 2048	/* 32 blocks a page */
static void *own[OWN];

static bool in_pages(const void *p, const char *const *pages, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (mi209_page(p) == pages[i])
			return true;
	return false;
}

/*
 * Blocks of 2 KiB freed by the thread that allocated them from pages in
 * the full queue (*@full of them): the free puts such a page back at the
 * end of its size's queue (mi209_free_flagged), where the next
 * allocations find the freed blocks -- a free that left the page in the
 * full queue would have them taken from new pages -- and the heap walk
 * stays exact.  0, or what went wrong.
 */
static int own_frees_of_full_pages(size_t *full, const char **what, size_t *got, size_t *want)
{
	struct walk before = walk_heap(), w;
	static const char *pages[OWN / 8];
	size_t npages = 0, found = 0;

	*full = 0;
	for (size_t i = 0; i < OWN; i++) {
		own[i] = malloc(OWN_SIZE);
		if (!own[i]) {
			*what = "malloc(2048) returned NULL, block";
			*got = i;
			*want = 0;
			return -1;
		}
	}
	for (size_t i = 0; i < OWN; i += 8) {
		const char *page = mi209_page(own[i]);

		if (*(const uint8_t *)(page + MI209_FLAGS_AT) == MI209_IN_FULL &&
		    (!npages || pages[npages - 1] != page))
			pages[npages++] = page;
	}
	/* One block in 8 of each full page freed here: four frees a page, the first takes it out. */
	for (size_t i = 0; i < OWN; i += 8) {
		const char *page = mi209_page(own[i]);

		if (!in_pages(own[i], pages, npages))
			continue;
		++*full;
		free(own[i]);
		own[i] = NULL;
		if (*(const uint8_t *)(page + MI209_FLAGS_AT) != 0) {
			*what = "flags of a full page after a free of ours into it";
			*got = *(const uint8_t *)(page + MI209_FLAGS_AT);
			*want = 0;
			return -1;
		}
	}
	w = walk_heap();
	if (w.blocks != before.blocks + OWN - *full || w.used != w.blocks) {
		*what = "blocks found after freeing 2 KiB blocks of full pages";
		*got = w.blocks;
		*want = before.blocks + OWN - *full;
		return -1;
	}
	/* The freed blocks come back before any new page (the last page's room aside: 32 blocks). */
	for (size_t i = 0; i < OWN; i += 8) {
		if (own[i])
			continue;
		own[i] = malloc(OWN_SIZE);
		found += own[i] && in_pages(own[i], pages, npages);
	}
	for (size_t i = 0; i < OWN; i++)
		free(own[i]);
	w = walk_heap();
	if (found + 32 < *full) {
		*what = "2 KiB blocks handed out again from the pages freed into";
		*got = found;
		*want = *full;
		return -1;
	}
	if (w.blocks != before.blocks || w.used != w.blocks) {
		*what = "blocks found after freeing the 2 KiB blocks";
		*got = w.blocks;
		*want = before.blocks;
		return -1;
	}
	return 0;
}

static int fail(const char *what, size_t a, size_t b)
{
	fprintf(stderr, "test_local_free: %s: %zu, expected %zu\n", what, a, b);
	return 1;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 4;
	struct walk base, w;
	size_t live = 0, reused = 0;
	long grown;

	if (!cgm_accounting_enabled()) {
		fprintf(stderr, "test_local_free: accounting is off: nothing to test\n");
		return 1;
	}
	grown = huge_aligned_frees();
	if (grown < 0 || grown > 32 * 1024)
		return fail("KiB resident after freeing 20 blocks of 8 MiB aligned to 64 MiB (-1: refused)",
			    (size_t)grown, 0);
	/* A first thread: what glibc and the shim allocate for one, live from then on. */
	{
		pthread_t first;
		size_t none = NBLOCKS;

		if (pthread_create(&first, NULL, free_some, &none) || pthread_join(first, NULL))
			return fail("cannot run a thread", 0, 0);
	}
	{
		size_t full, got, want;
		const char *what;

		if (remote_frees_of_full_pages(&full, &what, &got, &want) < 0)
			return fail(what, got, want);
		/* All but the last page or two were full when the other thread freed them. */
		if (full < HANDED * 3 / 4)
			return fail("blocks in full pages when another thread freed them", full,
				    HANDED * 3 / 4);
	}
	{
		size_t full, got, want;
		const char *what;

		if (own_frees_of_full_pages(&full, &what, &got, &want) < 0)
			return fail(what, got, want);
		if (full < OWN / 8 * 3 / 4)
			return fail("2 KiB blocks freed from full pages", full, OWN / 8 * 3 / 4);
	}
	base = walk_heap();
	if (base.blocks != base.used)
		return fail("blocks found before the test against the pages' used counts", base.blocks,
			    base.used);
	for (int r = 0; r < rounds; r++) {
		pthread_t other;
		size_t from = (size_t)r % 16;

		for (size_t i = 0; i < NBLOCKS; i++) {
			if (block[i])
				continue;
			block_size[i] = random_size();
			block[i] = malloc(block_size[i]);
			if (!block[i])
				return fail("malloc returned NULL for size", block_size[i], 0);
			fill(i);
		}
		/* A sixteenth freed by another thread: mimalloc's thread-free list, not ours. */
		if (pthread_create(&other, NULL, free_some, &from) || pthread_join(other, NULL))
			return fail("cannot run the other thread", 0, 0);
		/* Two thirds of the rest freed here, in random order. */
		for (size_t k = 0; k < NBLOCKS; k++) {
			size_t i = next_rand() % NBLOCKS;

			if (block[i] && next_rand() % 3) {
				if (!intact(i))
					return fail("a live block lost its pattern, block", i, 0);
				free(block[i]);
				block[i] = NULL;
			}
		}
		live = 0;
		for (size_t i = 0; i < NBLOCKS; i++)
			live += block[i] != NULL;
		w = walk_heap();
		if (w.blocks != w.used)
			return fail("blocks found against the pages' used counts", w.blocks, w.used);
		if (w.blocks != base.blocks + live)
			return fail("blocks found in the heap", w.blocks, base.blocks + live);
	}
	/* What was freed locally is handed out again: allocate into the holes. */
	for (size_t i = 0; i < NBLOCKS; i++) {
		if (block[i]) {
			if (!intact(i))
				return fail("a live block lost its pattern at the end, block", i, 0);
			continue;
		}
		block_size[i] = random_size();
		block[i] = malloc(block_size[i]);
		if (!block[i])
			return fail("malloc returned NULL for size", block_size[i], 0);
		reused++;
	}
	w = walk_heap();
	if (w.blocks != base.blocks + NBLOCKS)
		return fail("blocks found after refilling", w.blocks, base.blocks + NBLOCKS);
	for (size_t i = 0; i < NBLOCKS; i++)
		free(block[i]);
	w = walk_heap();
	if (w.blocks != base.blocks || w.used != base.used)
		return fail("blocks found after freeing everything", w.blocks, base.blocks);
	printf("test_local_free: %d rounds, %zu live at the last, %zu refilled: heap consistent\n", rounds,
	       live, reused);
	return 0;
}
