/*
 * The accounted free retires a page itself when a free empties the only
 * page of its size (mi209_free_block in include/cgm/mi_layout.h), as
 * mimalloc's _mi_page_retire does: the page stays in its queue, marked
 * for a few of the heap's collections, and the heap notes the queue.
 * Check what that must lead to, through mimalloc's own code only:
 *  - the retired page is reused by the next allocations of its size (a
 *    malloc/free pair keeps getting blocks of the same 64 KiB page);
 *  - mimalloc's collections later free the retired page (a page left
 *    unmarked, or a queue left out of the heap's retired range, would
 *    stay forever: the heap walk would still find its area);
 *  - mimalloc's heap walk agrees with the pages' counts throughout.
 * Run with accounting on (the retirement under test) and off (mimalloc's
 * own, which the test must describe as well).
 *
 * Usage: test_page_retire on|off
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mimalloc.h>

#include "cgmalloc.h"

/* Block sizes of bins nothing else in this program uses. */
static const size_t sizes[] = { 640, 768, 896 };

/* 1 KiB blocks that make mimalloc take fresh pages. */
static void *filler[3 * 64 * 64];
static size_t nfill;

struct walk {
	size_t areas;		/* areas (pages) of the block size looked for */
	size_t used;		/* their blocks in use */
	size_t blocks;		/* their blocks found by the walk */
	size_t size;		/* the block size looked for */
};

static bool visit(const mi_heap_t *heap, const mi_heap_area_t *area, void *block, size_t size,
		  void *arg)
{
	struct walk *w = arg;

	(void)heap;
	(void)size;
	if (area->block_size != w->size)
		return true;
	if (block) {
		w->blocks++;
	} else {
		w->areas++;
		w->used += area->used;
	}
	return true;
}

static struct walk walk(size_t size)
{
	struct walk w = { 0, 0, 0, size };

	mi_heap_visit_blocks(mi_heap_get_default(), true, visit, &w);
	return w;
}

static int fail(const char *what, size_t size, size_t got, size_t want)
{
	fprintf(stderr, "test_page_retire: blocks of %zu: %s: %zu, expected %zu\n", size, what, got,
		want);
	return 1;
}

int main(int argc, char **argv)
{
	bool want_on = argc > 1 && strcmp(argv[1], "on") == 0;

	if (cgm_accounting_enabled() != want_on) {
		fprintf(stderr, "test_page_retire: accounting is %s, the test was asked for %s\n",
			cgm_accounting_enabled() ? "on" : "off", argv[1] ? argv[1] : "(nothing)");
		return 1;
	}
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t size = sizes[i];
		void *first = malloc(size), *p;
		uintptr_t page = (uintptr_t)first >> 16;
		struct walk w;
		int fresh;

		if (!first)
			return fail("malloc returned NULL", size, 0, 1);
		memset(first, 0x5a, size);
		w = walk(size);
		if (w.areas != 1 || w.used != 1 || w.blocks != 1)
			return fail("pages of the size after one malloc (a bin in use elsewhere?)", size,
				    w.areas * 100 + w.used * 10 + w.blocks, 111);
		free(first);	/* empties the only page of the size: retired */
		for (int k = 0; k < 1000; k++) {
			p = malloc(size);
			if (!p || (uintptr_t)p >> 16 != page)
				return fail("pair after the retirement did not reuse the page", size,
					    (size_t)k, 1000);
			memset(p, k & 0xff, size);
			free(p);
		}
		w = walk(size);
		if (w.areas != 1 || w.used != 0 || w.blocks != 0)
			return fail("pages of the size after the pairs (areas*100+used*10+blocks)", size,
				    w.areas * 100 + w.used * 10 + w.blocks, 100);
		/*
		 * mimalloc looks at its retired pages whenever a queue needs a
		 * fresh page, and frees one that was looked at often enough:
		 * make it need fresh pages of 1 KiB blocks (64 to a page).
		 */
		for (fresh = 0; fresh < 64 && walk(size).areas; fresh++)
			for (int k = 0; k < 64; k++)
				if (nfill < sizeof(filler) / sizeof(filler[0]))
					filler[nfill++] = malloc(1024);
		if (walk(size).areas != 0)
			return fail("retired pages left after 64 fresh pages of another size", size,
				    walk(size).areas, 0);
		if (fresh < 2)
			return fail("fresh pages before the retired page went (it was not retired, but freed?)",
				    size, (size_t)fresh, 2);
		printf("blocks of %zu: retired page freed after %d fresh pages\n", size, fresh);
	}
	for (size_t i = 0; i < nfill; i++)
		free(filler[i]);
	return 0;
}
