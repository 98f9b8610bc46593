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

#include "cgm/mi_layout.h"
#include "cgm/size_class.h"

/*
 * mi209_free_block() does what mi_free() does in its common cases, so
 * check the fields it names on this mimalloc, in a heap of our own (fresh
 * pages): the segment's owner is our thread pointer, a page with no
 * aligned block has flags 0 and names its heap in the word after an empty
 * thread-free list, mi_free() of a block of ours pushes it on local_free
 * and counts one block less in use, and a page where an aligned block had
 * to be offset inside its block has nonzero flags (mimalloc's
 * has_aligned).  Returns NULL or what differs.
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
			offset = *(const uint8_t *)(mi209_page(aligned[i]) + MI209_FLAGS_AT) != 0;
	}
	if (offset == 0)
		why = "mimalloc's page flags are not the ones of 2.0.9 (has_aligned)";
	else if (offset < 0)
		why = "mimalloc never offset an aligned block (has_aligned not checked)";
out:
	mi_heap_destroy(heap);
	return why;
}

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
	*why = check_free_block();
	return *why ? -1 : 0;
}

struct build_id_search {
	uintptr_t inside;	/* an address in the object looked for */
	uint64_t hash;		/* FNV-1a of its build ID, 0 if none */
};

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
	return 1;
}

uint64_t mi_build_id_hash(void)
{
	struct build_id_search s = { .inside = (uintptr_t)&mi_version, .hash = 0 };

	dl_iterate_phdr(find_build_id, &s);
	return s.hash;
}
