/*
 * Compiler helpers shared by every cgmalloc module.
 *
 * The library is built with -fvisibility=hidden, so only what is marked
 * CGM_EXPORT is visible to the program it is preloaded into.
 */
#ifndef CGM_COMPILER_H
#define CGM_COMPILER_H

#include <stdint.h>

#define CGM_EXPORT	__attribute__((visibility("default")))
#define CGM_HIDDEN	__attribute__((visibility("hidden")))
#define CGM_NOINLINE	__attribute__((noinline))
#define CGM_COLD	__attribute__((cold, noinline))
/*
 * A function with static-key sites.  They all go to one output section:
 * turning a key on copies (copy-on-write) the pages of the library's code
 * it patches, a page or two when the sites sit together, six (24 KiB of
 * private memory per process, measured) when they were spread out.
 */
#define CGM_KEYED	__attribute__((section(".text.hot.cgm_keyed")))
/*
 * A zero-initialised buffer of a page or more that few processes write
 * (the exit report's text, a mincore vector).  Each starts a page of its
 * own, and the library's linker script (scripts/lib-ld-script) puts them
 * all at the start of .bss, before the small variables: among them they
 * had the small variables every process writes spread over nine pages of
 * the library's bss, each page resident in every process.
 */
#define CGM_BIG_BSS	__attribute__((section(".bss.cgm_big"), aligned(4096)))
#define CGM_UNUSED	__attribute__((unused))
#define CGM_PRINTF(f, a) __attribute__((format(printf, f, a)))

/*
 * Thread-local data of the shim uses the initial-exec model: the shim is
 * loaded at start-up (LD_PRELOAD or DT_NEEDED), so its TLS block is part of
 * the static TLS area and an access is one %fs-relative load, never a call
 * to __tls_get_addr (which may itself allocate).
 */
#define CGM_TLS		__thread __attribute__((tls_model("initial-exec")))

/* A spin-wait hint where the CPU has one (a busy lock, a page in transit). */
static inline void cgm_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("pause");
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

#define cgm_likely(x)	__builtin_expect(!!(x), 1)
#define cgm_unlikely(x)	__builtin_expect(!!(x), 0)

/*
 * A counter in a thread slot has one writer, the thread that owns the
 * slot, and readers elsewhere (flush, harvest) that load it with relaxed
 * atomics and tolerate a value one update old: the kernel's this_cpu_add()
 * read with READ_ONCE().  The owner adds with a plain read-modify-write,
 * which is one instruction on the malloc path (a relaxed atomic load and
 * store would be three).  ThreadSanitizer cannot know there is one writer,
 * so under it the owner's add is a relaxed atomic load and store: a TSan
 * build checks every other access of the slot and reports no false race.
 * Both forms give the new value.
 */
#if defined(__SANITIZE_THREAD__)
#define CGM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CGM_TSAN 1
#endif
#endif
#ifdef CGM_TSAN
#define cgm_owner_add(x, v) __extension__ ({				\
		__typeof__(x) cgm_new_ = __atomic_load_n(&(x), __ATOMIC_RELAXED) + (v); \
		__atomic_store_n(&(x), cgm_new_, __ATOMIC_RELAXED);		\
		cgm_new_;						\
	})
#else
#define cgm_owner_add(x, v) ((x) += (v))
#endif

/*
 * Arithmetic on values read from the shared hierarchy file, which anything
 * may have scribbled on: it wraps like the unsigned sum instead of being a
 * signed overflow.
 */
static inline int64_t cgm_wrap_add(int64_t a, uint64_t b)
{
	return (int64_t)((uint64_t)a + b);
}

static inline int64_t cgm_wrap_sub(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a - (uint64_t)b);
}

#define CGM_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif /* CGM_COMPILER_H */
