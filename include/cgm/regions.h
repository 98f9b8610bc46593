/*
 * The private anonymous memory of the process, as mapped through mmap,
 * mremap, munmap and brk/sbrk (shim/regions.c interposes them): each
 * region, whose it is -- mimalloc's heap, or the program's own (python's
 * arenas, a program's big buffers) -- and how much of it is resident.
 *
 * Shared and file-backed mappings are not tracked: the kernel memory
 * cgroup charges them as page cache and shmem, which cgmalloc does not
 * model.  Mappings made inside the C library itself (thread stacks, the
 * loader) do not pass through the interposed names and are not seen.
 */
#ifndef CGM_REGIONS_H
#define CGM_REGIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cgm_region_owner {
	CGM_REGION_HEAP,	/* mimalloc's segments */
	CGM_REGION_PROGRAM,	/* the program's and its libraries' mappings */
	CGM_NR_REGION_OWNERS
};

struct cgm_regions_usage {
	uint64_t reserved[CGM_NR_REGION_OWNERS];	/* bytes mapped */
	uint64_t resident[CGM_NR_REGION_OWNERS];	/* bytes in memory (mincore) */
};

/*
 * Sum the regions up, their residency read with mincore (a system call
 * per 64 MiB of mapping): callers bound how often.  @exclusive counts
 * only the pages mapped by this process alone, read from
 * /proc/self/pagemap: in a forked child, the pages it still shares with
 * its parent are the parent's, as the kernel charges them.  Returns 0, or
 * -1 when pagemap cannot be read (then nothing is counted).
 */
int cgm_regions_usage(struct cgm_regions_usage *u, bool exclusive);
/* The bytes of regions the last cgm_regions_usage() summed up (read without the lock). */
extern uint64_t cgm_regions_reserved;
/*
 * A process with this much of regions or more is large: a walk of them
 * costs it 0.2 ms and more, so sparse regions are counted with
 * PAGEMAP_SCAN (shim/regions.c) and reclaim's samples keep the split
 * between walks (shim/resident.c).  Below it neither code runs, and it
 * stays out of the pages an ordinary small process has resident.
 */
#define CGM_REGIONS_LARGE	(256ULL << 20)

/*
 * Called by the mapping functions for the program's own private
 * anonymous mappings: 0 to go on, or -ENOMEM to fail the call.  With
 * charge=alloc the mapping is charged in full when it is made; with
 * charge=resident a mapping is refused only while the group is over its
 * memory.max after reclaim (shim/resident.c).
 */
int cgm_map_charge(int64_t bytes);
void cgm_map_uncharge(int64_t bytes);
/* A mapping of 1 MiB or more is about to go: what was touched in it reaches memory.peak. */
void cgm_map_unmapping(void);

/* A region of the heap or of the program's own private anonymous mappings. */
struct cgm_region_span {
	uintptr_t start, end;
};

/*
 * Copy up to @max regions, heap and program (in address order), into
 * @out: what spilling may take pages from.  Returns how many.
 */
size_t cgm_regions_spans(struct cgm_region_span *out, size_t max);

/*
 * mremap(@old, @old_len, @new_len, @flags, @want) done a VMA at a time,
 * for a private anonymous mapping that spilling's registrations left in
 * pieces the kernel will not merge (it refuses such a range with EFAULT).
 * What mremap returns, errno kept (shim/remap_pieces.c).
 */
void *cgm_mremap_pieces(void *old, size_t old_len, size_t new_len, int flags, void *want);

/* In the constructor: the table's fork handlers. */
void cgm_regions_init(void);

#endif /* CGM_REGIONS_H */
