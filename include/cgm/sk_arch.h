/*
 * What shim/static_key.c needs from an architecture to rewrite sites.
 * One implementation per architecture: static_key_x86_64.c,
 * static_key_aarch64.c, static_key_none.c.
 */
#ifndef CGM_SK_ARCH_H
#define CGM_SK_ARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "cgm/static_key.h"

#define SK_INSN_MAX 8

/* One site to rewrite, and what it becomes. */
struct sk_poke {
	uint8_t *addr;
	unsigned char insn[SK_INSN_MAX];
	bool jump;			/* new form: JMP to target (else NOP) */
	uintptr_t target;
};

/* Until static_keys_startup_done(): the constructor is still patching. */
extern bool sk_at_startup;

/* Bytes of a site; 0 where sites cannot be patched. */
extern const unsigned int sk_arch_insn_size;

/*
 * One-time set-up (signal handler, core serialisation).  Returns 0, or a
 * negative errno with *reason set to why patching is impossible.
 */
int sk_arch_init(const char **reason);

/* The instruction at @code: a NOP (jump == false) or a JMP to @target. */
void sk_arch_make_insn(uintptr_t code, uintptr_t target, bool jump,
		       struct sk_poke *poke);

/*
 * Write @n sites whose pages are already writable (and still executable),
 * safely against threads running them; serialise every core afterwards.
 * Caller holds the patch lock.
 */
void sk_arch_poke(struct sk_poke *pokes, unsigned int n);

/* Make every core refetch its instruction stream. */
void sk_arch_sync_cores(void);

/* In the child of fork(): redo what the address space does not inherit. */
void sk_arch_after_fork(void);

/* Register for core serialisation (shim/static_key_sync.c); 0 or -ENOSYS. */
int sk_sync_register(const char **reason);

#endif /* CGM_SK_ARCH_H */
