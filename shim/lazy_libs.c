/*
 * The spill pool's libraries, loaded when spilling starts.
 *
 * zpool/ compresses with liblz4 or libzstd and writes back with liburing.
 * Linked as DT_NEEDED, the three would be mapped and relocated in every
 * program the shim is preloaded into -- about 148,000 instructions for
 * /bin/true, more than half of what mimalloc itself costs -- while only
 * spill=1 uses them.  So in libcgmalloc.so each function zpool/ calls is
 * defined here as a wrapper that jumps through a pointer, and
 * cgm_lazy_libs_load() fills the pointers with dlopen and dlsym when the
 * spiller starts.  The archives, tests and benches that link zpool/
 * without the shim link the real libraries instead of this file.
 *
 * The wrappers are hidden: a program that uses liblz4 itself binds to
 * the real one, never to these.  Nothing loads lazily from a wrapper:
 * they run in malloc's slow paths and in the fault handler, where dlopen
 * (which allocates and takes the loader's lock) must not.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "cgm/compiler.h"

/*
 * The headers' own visibility knobs, so that their declarations agree with
 * the hidden definitions below (and the compiler checks each wrapper's
 * type against the library's).
 */
#define LZ4LIB_VISIBILITY	CGM_HIDDEN
#define ZSTDLIB_VISIBLE		CGM_HIDDEN
#define ZSTD_STATIC_LINKING_ONLY
#include <liburing.h>
#include <lz4.h>
#include <zstd.h>

#include "cgm/lazy_libs.h"
#include "cgm/log.h"
#include "cgm/shim.h"

enum lazy_lib { LZ4, ZSTD, URING, NR_LAZY_LIBS };

static const struct {
	const char *soname;
	const char *package;	/* Debian's, for the message that it is missing */
	const char *version;	/* of every function taken from it; NULL: unversioned */
} libs[NR_LAZY_LIBS] = {
	[LZ4] = { "liblz4.so.1", "liblz4-1", NULL },
	[ZSTD] = { "libzstd.so.1", "libzstd1", NULL },
	/* The version that linking with -luring binds (io_uring_queue_init@LIBURING_2.0). */
	[URING] = { "liburing.so.2", "liburing2", "LIBURING_2.0" },
};

/* A ZSTD_isError() code: what a zstd wrapper returns without its library. */
#define ZSTD_FAILED	((size_t)-1)

/*
 * Every function zpool/ calls: library, type, name, parameters, the
 * arguments passed on, and what the wrapper returns if it is called
 * before the load succeeded -- a bug, since no pool exists then.  FN
 * returns a value; PROC returns nothing (ISO C has no "return f();" in a
 * void function).
 */
#define LAZY_FUNCS(FN, PROC)						\
	FN(LZ4, int, LZ4_sizeofState, (void), (), 0)			\
	FN(LZ4, int, LZ4_compress_fast_extState,			\
	   (void *state, const char *src, char *dst, int src_size,	\
	    int dst_cap, int accel),					\
	   (state, src, dst, src_size, dst_cap, accel), 0)		\
	FN(LZ4, int, LZ4_decompress_safe,				\
	   (const char *src, char *dst, int src_size, int dst_cap),	\
	   (src, dst, src_size, dst_cap), -1)				\
	FN(ZSTD, unsigned, ZSTD_isError, (size_t code), (code), 1)	\
	FN(ZSTD, int, ZSTD_minCLevel, (void), (), 0)			\
	FN(ZSTD, int, ZSTD_maxCLevel, (void), (), -1)			\
	FN(ZSTD, ZSTD_compressionParameters, ZSTD_getCParams,		\
	   (int level, unsigned long long src_size, size_t dict_size),	\
	   (level, src_size, dict_size), (ZSTD_compressionParameters){ 0 })	\
	FN(ZSTD, size_t, ZSTD_estimateCCtxSize_usingCParams,		\
	   (ZSTD_compressionParameters cp), (cp), 0)			\
	FN(ZSTD, size_t, ZSTD_estimateDCtxSize, (void), (), 0)		\
	FN(ZSTD, ZSTD_CCtx *, ZSTD_initStaticCCtx, (void *ws, size_t ws_size),	\
	   (ws, ws_size), NULL)						\
	FN(ZSTD, ZSTD_DCtx *, ZSTD_initStaticDCtx, (void *ws, size_t ws_size),	\
	   (ws, ws_size), NULL)						\
	FN(ZSTD, size_t, ZSTD_compressCCtx,				\
	   (ZSTD_CCtx *cctx, void *dst, size_t dst_cap, const void *src,	\
	    size_t src_size, int level),				\
	   (cctx, dst, dst_cap, src, src_size, level), ZSTD_FAILED)	\
	FN(ZSTD, size_t, ZSTD_decompressDCtx,				\
	   (ZSTD_DCtx *dctx, void *dst, size_t dst_cap, const void *src,	\
	    size_t src_size),						\
	   (dctx, dst, dst_cap, src, src_size), ZSTD_FAILED)		\
	FN(ZSTD, size_t, ZSTD_estimateCDictSize_advanced,		\
	   (size_t dict_size, ZSTD_compressionParameters cp,		\
	    ZSTD_dictLoadMethod_e how),					\
	   (dict_size, cp, how), 0)					\
	FN(ZSTD, size_t, ZSTD_estimateDDictSize,			\
	   (size_t dict_size, ZSTD_dictLoadMethod_e how), (dict_size, how), 0)	\
	FN(ZSTD, const ZSTD_CDict *, ZSTD_initStaticCDict,		\
	   (void *ws, size_t ws_size, const void *dict, size_t dict_size,	\
	    ZSTD_dictLoadMethod_e how, ZSTD_dictContentType_e type,	\
	    ZSTD_compressionParameters cp),				\
	   (ws, ws_size, dict, dict_size, how, type, cp), NULL)		\
	FN(ZSTD, const ZSTD_DDict *, ZSTD_initStaticDDict,		\
	   (void *ws, size_t ws_size, const void *dict, size_t dict_size,	\
	    ZSTD_dictLoadMethod_e how, ZSTD_dictContentType_e type),	\
	   (ws, ws_size, dict, dict_size, how, type), NULL)		\
	FN(ZSTD, size_t, ZSTD_compress_usingCDict,			\
	   (ZSTD_CCtx *cctx, void *dst, size_t dst_cap, const void *src,	\
	    size_t src_size, const ZSTD_CDict *cdict),			\
	   (cctx, dst, dst_cap, src, src_size, cdict), ZSTD_FAILED)	\
	FN(ZSTD, size_t, ZSTD_decompress_usingDDict,			\
	   (ZSTD_DCtx *dctx, void *dst, size_t dst_cap, const void *src,	\
	    size_t src_size, const ZSTD_DDict *ddict),			\
	   (dctx, dst, dst_cap, src, src_size, ddict), ZSTD_FAILED)	\
	FN(URING, int, io_uring_queue_init,				\
	   (unsigned entries, struct io_uring *ring, unsigned flags),	\
	   (entries, ring, flags), -ENOSYS)				\
	FN(URING, int, io_uring_register_buffers,			\
	   (struct io_uring *ring, const struct iovec *iov, unsigned nr_iov),	\
	   (ring, iov, nr_iov), -ENOSYS)				\
	FN(URING, int, io_uring_submit_and_wait,			\
	   (struct io_uring *ring, unsigned wait_nr), (ring, wait_nr), -ENOSYS)	\
	FN(URING, int, __io_uring_get_cqe,				\
	   (struct io_uring *ring, struct io_uring_cqe **cqe, unsigned submit,	\
	    unsigned wait_nr, sigset_t *sigmask),			\
	   (ring, cqe, submit, wait_nr, sigmask), -ENOSYS)		\
	PROC(URING, void, io_uring_queue_exit, (struct io_uring *ring), (ring), )

#define LAZY_PTR(lib, type, name, params, args, unloaded)		\
	static __typeof__(name) *name##_ptr;
LAZY_FUNCS(LAZY_PTR, LAZY_PTR)

static CGM_COLD void not_loaded(const char *name)
{
	static int logged;

	cgm_log_once(&logged, "%s called before its library was loaded (a bug): the call fails",
		     name);
}

#define LAZY_FN(lib, type, name, params, args, unloaded)		\
	CGM_HIDDEN type name params					\
	{								\
		if (cgm_unlikely(!name##_ptr)) {			\
			not_loaded(#name);				\
			return unloaded;				\
		}							\
		return name##_ptr args;					\
	}
#define LAZY_PROC(lib, type, name, params, args, unloaded)		\
	CGM_HIDDEN type name params					\
	{								\
		if (cgm_unlikely(!name##_ptr)) {			\
			not_loaded(#name);				\
			return;						\
		}							\
		name##_ptr args;					\
	}
LAZY_FUNCS(LAZY_FN, LAZY_PROC)

static void *handles[NR_LAZY_LIBS];

/* @name in library @lib, or NULL with dlerror() saying why. */
static void *lazy_sym(enum lazy_lib lib, const char *name)
{
	if (libs[lib].version)
		return dlvsym(handles[lib], name, libs[lib].version);
	return dlsym(handles[lib], name);
}

int cgm_lazy_libs_load(void)
{
	static bool loaded;
	enum lazy_lib lib;
	const char *why;
	unsigned char was;

	if (loaded)
		return 0;
	/*
	 * A program exec'd into a group at its memory.max had the loader's
	 * allocations for these refused ("cannot allocate address lookup
	 * data") and never spilled, though spilling is what would have made
	 * room.  They are charged past the limits instead, what they take
	 * and no more: the loader of Debian 12 allocated 12,480 bytes for the
	 * three (a debugger at the end of the loads, in /bin/true and in a
	 * python3 with sqlite3, ssl and decimal loaded).  It was 64 KiB
	 * charged ahead, all of it past memory.max for a moment.
	 */
	was = cgm_charge_nofail_begin();
	for (lib = 0; lib < NR_LAZY_LIBS; lib++) {
		if (!handles[lib])
			handles[lib] = dlopen(libs[lib].soname, RTLD_NOW | RTLD_LOCAL);
		if (!handles[lib])
			break;
	}
	cgm_charge_nofail_end(was);
	if (lib < NR_LAZY_LIBS)
		goto fail;
	/*
	 * The handler thread that calls the wrappers is created after this
	 * returns: pthread_create orders these stores before its first load.
	 */
#define LAZY_LOAD(l, type, name, params, args, unloaded)		\
	lib = l;							\
	name##_ptr = (__typeof__(name) *)lazy_sym(lib, #name);		\
	if (!name##_ptr)						\
		goto fail;
	LAZY_FUNCS(LAZY_LOAD, LAZY_LOAD)
#undef LAZY_LOAD
	loaded = true;
	return 0;

fail:
	why = dlerror();
	if (!why)
		why = libs[lib].soname;
	/*
	 * The package is named only when the library is missing.  A program
	 * exec'd into a group at its memory.max finds the loader's own
	 * allocations refused ("cannot allocate address lookup data", "out
	 * of memory", even "cannot open shared object file"), and the line
	 * then sent people to install what they had.
	 */
	if (strstr(why, "No such file"))
		cgm_log("spill=1 refused: %s (package %s): spilling off", why, libs[lib].package);
	else
		cgm_log("spill=1 refused: loading %s failed: %s (a group at its memory.max refuses "
			"the loader's own allocations too): spilling off", libs[lib].soname, why);
	return -ENOENT;
}
