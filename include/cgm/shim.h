/*
 * Internal interface of the shim: bootstrap state shared by its files.
 */
#ifndef CGM_SHIM_H
#define CGM_SHIM_H

#include <stdbool.h>
#include <stddef.h>

#include "cgm/config.h"

/* The effective configuration, valid once the constructor has run. */
extern struct cgm_config cgm_conf;

/* Set by the constructor when it has finished. */
extern bool cgm_initialized_flag;

/*
 * Aligned allocation from mimalloc.  Not mi_malloc_aligned(): in mimalloc
 * 2.0.9 (Debian's), its shortcut assumes that a block whose size is a power
 * of two is naturally aligned, which is false above 128 bytes (measured:
 * mi_malloc_aligned(1024, 256) returned ...180 in about 1% of calls).  The
 * _at form with offset 0 checks the address it hands out.
 */
static inline void *cgm_mi_aligned(size_t n, size_t align)
{
	extern void *mi_malloc_aligned_at(size_t, size_t, size_t);

	return mi_malloc_aligned_at(n, align, 0);
}

/* glibc's MALLOC_ALIGNMENT on 64-bit: what malloc guarantees. */
#define CGM_MALLOC_ALIGN 16

/* Hidden names of the interposed entry points, for calls from inside. */
void *cgm_malloc(size_t n);
void cgm_free(void *p);
void *cgm_realloc(void *p, size_t n);
void *cgm_calloc(size_t count, size_t size);
int cgm_posix_memalign(void **out, size_t align, size_t n);
void *cgm_valloc(size_t n);
void *cgm_pvalloc(size_t n);

/* Aligned allocation, @align a power of two (accounted when accounting is on). */
void *cgm_aligned_alloc_checked(size_t align, size_t n);

/* glibc's memalign semantics, shared by memalign and its aliases. */
void *cgm_memalign(size_t align, size_t n);

/* The C++ runtime's std::__throw_bad_alloc, found lazily; NULL if absent. */
void (*cgm_find_throw_bad_alloc(void))(void);

#endif /* CGM_SHIM_H */
