/*
 * Start-up check that the loaded mimalloc has the layout mi209_block_size()
 * reads (include/cgm/mi_layout.h).  Run once, before accounting is
 * switched on; allocations go straight to mimalloc.  No huge block (above
 * 16 MiB): each maps and unmaps a segment of its own at every start, and
 * their size comes from mi_usable_size() anyway (block_size() in
 * shim/accounted.c).
 */
#include <mimalloc.h>
#include <stddef.h>

#include "cgm/mi_layout.h"
#include "cgm/size_class.h"

int mi_layout_check(const char **why)
{
	static const size_t sizes[] = {
		/* small pages at both ends, a medium page, large pages of a span and of a segment */
		8, 24, 1000, 1024, 2000, 40000, 300000, 5 << 20,
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
		if (sizes[i] <= 1024 && (mi_usable_size(blocks[i]) != cgm_small_block_size(sizes[i]) ||
					 mi209_slice_block_size(blocks[i]) != mi_usable_size(blocks[i])))
			bad++;
	}
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		mi_free(blocks[i]);
	if (bad) {
		*why = "mimalloc's page layout is not the one of 2.0.9 (block sizes disagree)";
		return -1;
	}
	return 0;
}
