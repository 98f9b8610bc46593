/*
 * Compiler helpers shared by every cgmalloc module.
 *
 * The library is built with -fvisibility=hidden, so only what is marked
 * CGM_EXPORT is visible to the program it is preloaded into.
 */
#ifndef CGM_COMPILER_H
#define CGM_COMPILER_H

#define CGM_EXPORT	__attribute__((visibility("default")))
#define CGM_HIDDEN	__attribute__((visibility("hidden")))
#define CGM_NOINLINE	__attribute__((noinline))
#define CGM_COLD	__attribute__((cold, noinline))
#define CGM_UNUSED	__attribute__((unused))
#define CGM_PRINTF(f, a) __attribute__((format(printf, f, a)))

/*
 * Thread-local data of the shim uses the initial-exec model: the shim is
 * loaded at start-up (LD_PRELOAD or DT_NEEDED), so its TLS block is part of
 * the static TLS area and an access is one %fs-relative load, never a call
 * to __tls_get_addr (which may itself allocate).
 */
#define CGM_TLS		__thread __attribute__((tls_model("initial-exec")))

#define cgm_likely(x)	__builtin_expect(!!(x), 1)
#define cgm_unlikely(x)	__builtin_expect(!!(x), 0)

#define CGM_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif /* CGM_COMPILER_H */
