/*
 * C++ operator new and delete, every variant, served by mimalloc.
 *
 * Written in C under their Itanium-ABI names so that the shim does not
 * depend on libstdc++.  The throwing forms follow the standard's loop:
 * retry while a new_handler is installed, else throw std::bad_alloc.  The
 * C++ runtime is not linked in; a program that calls operator new has it
 * loaded, and the weak references below (or, for a runtime that was
 * dlopen()ed privately, a lookup by name) find it.  This file is built
 * with -fexceptions so a throw unwinds through these frames.
 */
#include <dlfcn.h>
#include <errno.h>
#include <mimalloc.h>
#include <stdlib.h>

#include "cgm/compiler.h"
#include "cgm/log.h"
#include "cgm/shim.h"

typedef void (*new_handler_fn)(void);

extern new_handler_fn _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

static void *cxx_runtime_symbol(const char *name)
{
	void *h, *sym = dlsym(RTLD_DEFAULT, name);

	if (sym)
		return sym;
	h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return NULL;
	sym = dlsym(h, name);
	dlclose(h);
	return sym;
}

static new_handler_fn current_new_handler(void)
{
	new_handler_fn (*get)(void) = _ZSt15get_new_handlerv;

	if (!get)
		get = (new_handler_fn (*)(void))cxx_runtime_symbol("_ZSt15get_new_handlerv");
	return get ? get() : NULL;
}

void (*cgm_find_throw_bad_alloc(void))(void)
{
	if (_ZSt17__throw_bad_allocv)
		return _ZSt17__throw_bad_allocv;
	return (void (*)(void))cxx_runtime_symbol("_ZSt17__throw_bad_allocv");
}

static _Noreturn void throw_bad_alloc(void)
{
	void (*thrower)(void) = cgm_find_throw_bad_alloc();

	if (thrower)
		thrower();
	cgm_log("out of memory in operator new and no C++ runtime to throw std::bad_alloc: aborting");
	abort();
}

/*
 * The slow path of every operator new: the allocation failed.  Call the
 * new_handler and retry while there is one; then throw, or return NULL for
 * the nothrow forms.
 */
static CGM_NOINLINE void *new_slow(size_t n, size_t align, bool nothrow)
{
	for (;;) {
		new_handler_fn h = current_new_handler();
		void *p;

		if (!h) {
			if (nothrow) {
				errno = ENOMEM;
				return NULL;
			}
			throw_bad_alloc();
		}
		h();
		p = align ? cgm_aligned_alloc_checked(align, n) : cgm_malloc(n);
		if (p)
			return p;
	}
}

static inline void *new_impl(size_t n, bool nothrow)
{
	void *p = cgm_malloc(n);

	if (cgm_likely(p != NULL))
		return p;
	return new_slow(n, 0, nothrow);
}

static inline void *new_aligned_impl(size_t n, size_t align, bool nothrow)
{
	void *p;

	/* The standard leaves a non-power-of-two alignment undefined; be safe. */
	if (align == 0 || (align & (align - 1)) != 0)
		return nothrow ? NULL : (throw_bad_alloc(), NULL);
	p = cgm_aligned_alloc_checked(align, n);
	if (cgm_likely(p != NULL))
		return p;
	return new_slow(n, align, nothrow);
}

/* operator new(size_t) and new[](size_t) */
CGM_EXPORT void *_Znwm(size_t n) { return new_impl(n, false); }
CGM_EXPORT void *_Znam(size_t n) { return new_impl(n, false); }
/* operator new(size_t, const std::nothrow_t&) and the array form */
CGM_EXPORT void *_ZnwmRKSt9nothrow_t(size_t n, const void *t) { (void)t; return new_impl(n, true); }
CGM_EXPORT void *_ZnamRKSt9nothrow_t(size_t n, const void *t) { (void)t; return new_impl(n, true); }
/* operator new(size_t, std::align_val_t) and the array form */
CGM_EXPORT void *_ZnwmSt11align_val_t(size_t n, size_t a) { return new_aligned_impl(n, a, false); }
CGM_EXPORT void *_ZnamSt11align_val_t(size_t n, size_t a) { return new_aligned_impl(n, a, false); }
/* operator new(size_t, std::align_val_t, const std::nothrow_t&) and [] */
CGM_EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *t) { (void)t; return new_aligned_impl(n, a, true); }
CGM_EXPORT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *t) { (void)t; return new_aligned_impl(n, a, true); }

/*
 * Every operator delete frees through free(), so that whatever free() does
 * (accounting included) is done once, in one place.
 */
CGM_EXPORT void _ZdlPv(void *p) { cgm_free(p); }
CGM_EXPORT void _ZdaPv(void *p) { cgm_free(p); }
CGM_EXPORT void _ZdlPvm(void *p, size_t n) { (void)n; cgm_free(p); }
CGM_EXPORT void _ZdaPvm(void *p, size_t n) { (void)n; cgm_free(p); }
CGM_EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const void *t) { (void)t; cgm_free(p); }
CGM_EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const void *t) { (void)t; cgm_free(p); }
CGM_EXPORT void _ZdlPvSt11align_val_t(void *p, size_t a) { (void)a; cgm_free(p); }
CGM_EXPORT void _ZdaPvSt11align_val_t(void *p, size_t a) { (void)a; cgm_free(p); }
CGM_EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a) { (void)n; (void)a; cgm_free(p); }
CGM_EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a) { (void)n; (void)a; cgm_free(p); }
CGM_EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *t) { (void)a; (void)t; cgm_free(p); }
CGM_EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *t) { (void)a; (void)t; cgm_free(p); }
