/*
 * The interposed C allocation API, served by mimalloc.
 *
 * Preloaded, these definitions come first in the symbol search order, so
 * the program, libc and every library it loads call them.  Each fast path
 * is a tail call into mimalloc; the glibc semantics that mimalloc does not
 * share (realloc(p, 0) frees, memalign rounds odd alignments up, errno on
 * every failure) are handled here, off the common path.
 *
 * Alignment: like mimalloc preloaded on its own, malloc(n) for n <= 8 is
 * 8-aligned and everything larger 16-aligned -- the fundamental alignment of
 * any object that fits (C17 DR 445).  glibc gives 16 even to tiny blocks;
 * matching it would cost a compare and a move on every malloc.  Explicitly
 * aligned allocations always get at least the alignment asked for.
 *
 * errno: mimalloc does not set errno when it refuses a size.  The
 * constructor registers an error handler that turns mimalloc's ENOMEM and
 * EOVERFLOW reports into errno = ENOMEM, so malloc() itself stays a tail
 * call; the entry points that are not tail calls set errno explicitly.
 */
#include <errno.h>
#include <malloc.h>
#include <mimalloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "cgm/accounted.h"
#include "cgm/compiler.h"
#include "cgm/shim.h"

static CGM_NOINLINE void *acct_malloc_careful_entry(size_t n)
{
	return cgm_acct_malloc_careful(n, false);
}

/*
 * One site per entry point serves two keys.  Accounting is on by default,
 * so its fast path is the one that falls through the site's NOP, inline
 * (static_branch_likely_refined()): no jump between the program's call
 * and the accounted code.  Accounting off makes the site a jump to
 * mimalloc's entry, and only while this process is being moved to
 * another group, a jump to the careful path (shim/moving.c).
 */
CGM_KEYED void *cgm_malloc(size_t n)
{
	switch (static_branch_likely_refined(&cgm_accounting_key, &cgm_moving_key)) {
	case 1:
		return cgm_acct_malloc(n, false);
	case 0:
		return mi_malloc(n);
	default:
		return acct_malloc_careful_entry(n);
	}
}

/* A second site: the branch-free free, once the program mixes sizes (shim/accounted.c). */
CGM_KEYED void cgm_free(void *p)
{
	switch (static_branch_likely_refined(&cgm_accounting_key, &cgm_moving_key)) {
	case 1:
		if (static_branch_unlikely(&cgm_mixed_free_key))
			cgm_acct_free_mixed(p);
		else
			cgm_acct_free(p);
		return;
	case 0:
		mi_free(p);
		return;
	default:
		cgm_acct_free_careful(p);
		return;
	}
}

CGM_KEYED void *cgm_calloc(size_t count, size_t size)
{
	size_t n;

	if (cgm_unlikely(__builtin_mul_overflow(count, size, &n))) {
		errno = ENOMEM;
		return NULL;
	}
	switch (static_branch_likely_refined(&cgm_accounting_key, &cgm_moving_key)) {
	case 1:
		return cgm_acct_malloc(n, true);
	case 0:
		return mi_zalloc(n);
	default:
		return cgm_acct_malloc_careful(n, true);
	}
}

CGM_KEYED void *cgm_realloc(void *p, size_t n)
{
	void *q;

	/* glibc (REALLOC_ZERO_BYTES_FREES): realloc(p, 0) frees p, returns NULL. */
	if (cgm_unlikely(n == 0 && p != NULL)) {
		cgm_free(p);
		return NULL;
	}
	if (static_branch_unlikely(&cgm_accounting_key))
		return cgm_acct_realloc(p, n);
	q = mi_realloc(p, n);
	if (cgm_unlikely(q == NULL))
		errno = ENOMEM;
	return q;
}

CGM_EXPORT void *reallocarray(void *p, size_t count, size_t size)
{
	size_t n;

	if (__builtin_mul_overflow(count, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	return cgm_realloc(p, n);
}

static bool is_pow2(size_t x)
{
	return x != 0 && (x & (x - 1)) == 0;
}

/* Aligned allocation with a valid (power-of-two) alignment. */
CGM_KEYED void *cgm_aligned_alloc_checked(size_t align, size_t n)
{
	void *p;

	if (static_branch_unlikely(&cgm_accounting_key))
		return align <= sizeof(void *) ? cgm_acct_malloc(n, false) :
						 cgm_acct_alloc_slow(n, align, false);
	/* mimalloc aligns every block to 8, and blocks above 8 bytes to 16. */
	if (align <= sizeof(void *))
		p = mi_malloc(n);
	else
		p = cgm_mi_aligned(n, align);
	if (cgm_unlikely(p == NULL))
		errno = ENOMEM;
	return p;
}

/*
 * glibc's memalign: alignments up to MALLOC_ALIGNMENT are plain malloc, an
 * alignment that is not a power of two is rounded up to one, and one above
 * SIZE_MAX/2+1 (which cannot be rounded) is EINVAL.
 */
void *cgm_memalign(size_t align, size_t n)
{
	if (align > SIZE_MAX / 2 + 1) {
		errno = EINVAL;
		return NULL;
	}
	if (!is_pow2(align) && align > CGM_MALLOC_ALIGN) {
		size_t a = CGM_MALLOC_ALIGN;

		while (a < align)
			a <<= 1;
		align = a;
	}
	return cgm_aligned_alloc_checked(align, n);
}

/* C17/glibc >= 2.38: an alignment that is not a power of two is EINVAL. */
CGM_EXPORT void *aligned_alloc(size_t align, size_t n)
{
	if (!is_pow2(align)) {
		errno = EINVAL;
		return NULL;
	}
	return cgm_aligned_alloc_checked(align, n);
}

int cgm_posix_memalign(void **out, size_t align, size_t n)
{
	int saved = errno;
	void *p;

	if (!is_pow2(align) || align % sizeof(void *) != 0)
		return EINVAL;
	p = cgm_aligned_alloc_checked(align, n);
	errno = saved;		/* POSIX: the result is the return value */
	if (p == NULL)
		return ENOMEM;
	*out = p;
	return 0;
}

static size_t page_size(void)
{
	static size_t cached;

	if (cgm_unlikely(cached == 0))
		cached = (size_t)sysconf(_SC_PAGESIZE);
	return cached;
}

void *cgm_valloc(size_t n)
{
	return cgm_aligned_alloc_checked(page_size(), n);
}

void *cgm_pvalloc(size_t n)
{
	size_t ps = page_size(), rounded;

	if (__builtin_add_overflow(n, ps - 1, &rounded)) {
		errno = ENOMEM;
		return NULL;
	}
	rounded &= ~(ps - 1);
	return cgm_aligned_alloc_checked(ps, rounded ? rounded : ps);
}

CGM_EXPORT size_t malloc_usable_size(void *p)
{
	return mi_usable_size(p);
}

/* C23 (glibc 2.40): sized frees; the size is only a hint. */
CGM_EXPORT void free_sized(void *p, size_t n)
{
	(void)n;
	cgm_free(p);
}

CGM_EXPORT void free_aligned_sized(void *p, size_t align, size_t n)
{
	(void)align;
	(void)n;
	cgm_free(p);
}

/*
 * The exported names; every one is an alias of the hidden implementation
 * (the hidden names, cgm/shim.h, let calls from inside the library --
 * reallocarray, operator delete -- bind directly).
 */
CGM_EXPORT void *malloc(size_t n) __attribute__((alias("cgm_malloc")));
CGM_EXPORT void free(void *p) __attribute__((alias("cgm_free")));
CGM_EXPORT void *realloc(void *p, size_t n) __attribute__((alias("cgm_realloc")));
CGM_EXPORT void *calloc(size_t c, size_t n) __attribute__((alias("cgm_calloc")));
CGM_EXPORT void *memalign(size_t a, size_t n) __attribute__((alias("cgm_memalign")));
CGM_EXPORT int posix_memalign(void **o, size_t a, size_t n) __attribute__((alias("cgm_posix_memalign")));
CGM_EXPORT void *valloc(size_t n) __attribute__((alias("cgm_valloc")));
CGM_EXPORT void *pvalloc(size_t n) __attribute__((alias("cgm_pvalloc")));

/*
 * glibc's internal names, which a few programs and tools call directly.
 * Left to glibc they would hand out glibc memory that our free() would
 * then be given.
 */
CGM_EXPORT void *__libc_malloc(size_t n) __attribute__((alias("cgm_malloc")));
CGM_EXPORT void __libc_free(void *p) __attribute__((alias("cgm_free")));
CGM_EXPORT void *__libc_calloc(size_t c, size_t n) __attribute__((alias("cgm_calloc")));
CGM_EXPORT void *__libc_realloc(void *p, size_t n) __attribute__((alias("cgm_realloc")));
CGM_EXPORT void *__libc_memalign(size_t a, size_t n) __attribute__((alias("cgm_memalign")));
CGM_EXPORT void *__libc_valloc(size_t n) __attribute__((alias("cgm_valloc")));
CGM_EXPORT void *__libc_pvalloc(size_t n) __attribute__((alias("cgm_pvalloc")));
CGM_EXPORT int __posix_memalign(void **o, size_t a, size_t n) __attribute__((alias("cgm_posix_memalign")));
