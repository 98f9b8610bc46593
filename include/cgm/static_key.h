/*
 * Static keys: kernel-style jump labels for a userspace shared library.
 *
 *	DEFINE_STATIC_KEY_FALSE(cgm_accounting_key);
 *	...
 *	if (static_branch_unlikely(&cgm_accounting_key))
 *		return cgm_acct_malloc(n, false);
 *
 * Each test is a "site": one 5-byte instruction on x86-64 (4 bytes on
 * aarch64) that is patched at run time into a NOP (fall through) or a JMP
 * to the other side, so a disabled feature costs one NOP and no load.
 * Sites are recorded in the section __cgm_jump_table of the image that
 * contains them; static_key_slow_inc()/dec() and static_branch_enable()/
 * disable() rewrite every site of the key.
 *
 * Unlike the kernel's, a site as compiled is a jump to a few out-of-line
 * instructions that read the key.  That image is correct before anything
 * has been patched (malloc runs before any constructor) and is what every
 * site keeps when patching is impossible or switched off (fallback mode):
 * always right, a compare and a branch slower.  static_keys_init() patches
 * every site to its NOP/JMP form when it can.
 *
 * Keys are hidden symbols of the image that defines them; a key and its
 * sites must live in the same shared object or executable.
 */
#ifndef CGM_STATIC_KEY_H
#define CGM_STATIC_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct static_key {
	/*
	 * > 0: the key is true.  static_key_slow_inc()/dec() count
	 * references; the sites are rewritten only on 0 <-> 1.  The fallback
	 * code of a site compares this int with 0, so it stays first.
	 */
	int enabled;
	const char *name;	/* for reports: the name it was defined with */
};

struct static_key_true {
	struct static_key key;
};

struct static_key_false {
	struct static_key key;
};

#define DEFINE_STATIC_KEY_TRUE(var) \
	struct static_key_true var = { .key = { .enabled = 1, .name = #var } }
#define DEFINE_STATIC_KEY_FALSE(var) \
	struct static_key_false var = { .key = { .enabled = 0, .name = #var } }
#define DECLARE_STATIC_KEY_TRUE(var) \
	extern struct static_key_true var __attribute__((visibility("hidden")))
#define DECLARE_STATIC_KEY_FALSE(var) \
	extern struct static_key_false var __attribute__((visibility("hidden")))

/*
 * One entry per site, all offsets relative to the field that holds them so
 * that the table needs no dynamic relocation: the image finds its own
 * sites at any load address.
 */
struct jump_entry {
	int32_t code;		/* the patched instruction */
	int32_t target;		/* where the "yes" side starts */
	int32_t fallback;	/* the out-of-line code that reads the key */
	int32_t refines;	/* 1: refines the entry before it (same site) */
	int64_t key;		/* the key; bit 0 = branch (see below) */
};

/*
 * A site "jumps" (takes the yes side) when key->enabled != branch, i.e.
 * branch 0: jump when the key is true; branch 1: jump when it is false.
 * static_branch_unlikely uses branch 0 (the fall-through side is the
 * false one), static_branch_likely uses branch 1 and negates the result.
 */

/*
 * One entry of the table, in the asm of a site: label 1 is the site,
 * label 3 its fallback; @target, @refines and @key are asm operand texts.
 */
#define SK_TABLE_ENTRY(target, refines, key)				\
	".pushsection __cgm_jump_table, \"aR\"\n\t"			\
	".balign 8\n\t"							\
	".long 1b - .\n\t"						\
	".long " target " - .\n\t"					\
	".long 3b - .\n\t"						\
	".long " refines "\n\t"						\
	".quad " key " - .\n\t"						\
	".popsection\n\t"

#if defined(__x86_64__) && !defined(CGM_STATIC_KEYS_GENERIC)
#define CGM_STATIC_KEYS_ARCH 1

static inline __attribute__((always_inline)) bool
arch_static_branch(struct static_key *key, bool branch)
{
	/*
	 * 1: jmp 3f  -- the compiled form; patched to a NOP or jmp l_yes
	 * 3: the fallback: compare the key, jump to l_yes or back to 2.
	 */
	__asm__ goto(
		"1:	.byte 0xe9\n\t"
		"	.long 3f - 2f\n"
		"2:\n\t"
		".pushsection .text.cgm_static_key, \"ax\"\n"
		"3:	cmpl $0, %c0(%%rip)\n\t"
		"	.if %c1\n\t"
		"	je %l[l_yes]\n\t"
		"	.else\n\t"
		"	jne %l[l_yes]\n\t"
		"	.endif\n\t"
		"	jmp 2b\n\t"
		".popsection\n\t"
		SK_TABLE_ENTRY("%l[l_yes]", "0", "%c0 + %c1")
		: : "i"(key), "i"(branch) : "cc" : l_yes);
	return false;
l_yes:
	return true;
}

/*
 * A site governed by two false keys (static_branch_*_refined()).  Two
 * table entries share the site; the second says it refines the first and
 * applies while @outer is on.  The fallback tests outer, then inner.
 *  - @likely false: NOP while @outer is off, JMP l_other (the "1" side)
 *    while only @outer is on, JMP l_refined while both are.
 *  - @likely true: the "1" side falls through: JMP l_other (the "0" side)
 *    while @outer is off, NOP while only @outer is on, JMP l_refined
 *    while both are.  The base entry has branch 1: it jumps while @outer
 *    is false.
 */
static inline __attribute__((always_inline)) int
arch_static_branch_refined(struct static_key *outer, struct static_key *inner, bool likely)
{
	__asm__ goto(
		"1:	.byte 0xe9\n\t"
		"	.long 3f - 2f\n"
		"2:\n\t"
		".pushsection .text.cgm_static_key, \"ax\"\n"
		"3:	cmpl $0, %c0(%%rip)\n\t"
		"	.if %c2\n\t"
		"	je %l[l_other]\n\t"
		"	.else\n\t"
		"	je 2b\n\t"
		"	.endif\n\t"
		"	cmpl $0, %c1(%%rip)\n\t"
		"	jne %l[l_refined]\n\t"
		"	.if %c2\n\t"
		"	jmp 2b\n\t"
		"	.else\n\t"
		"	jmp %l[l_other]\n\t"
		"	.endif\n\t"
		".popsection\n\t"
		SK_TABLE_ENTRY("%l[l_other]", "0", "%c0 + %c2")
		SK_TABLE_ENTRY("%l[l_refined]", "1", "%c1")
		: : "i"(outer), "i"(inner), "i"(likely) : "cc" : l_other, l_refined);
	return likely ? 1 : 0;
l_other:
	return likely ? 0 : 1;
l_refined:
	return 2;
}

#elif defined(__aarch64__) && !defined(CGM_STATIC_KEYS_GENERIC)
#define CGM_STATIC_KEYS_ARCH 1

static inline __attribute__((always_inline)) bool
arch_static_branch(struct static_key *key, bool branch)
{
	/*
	 * 1: b 3f -- patched to NOP or b l_yes.  The fallback needs a scratch
	 * register; x16 (IP0) is declared clobbered.  "S": a symbolic address,
	 * which position-independent aarch64 code accepts where "i" is not.
	 */
	__asm__ goto(
		"1:	b 3f\n"
		"2:\n\t"
		".pushsection .text.cgm_static_key, \"ax\"\n"
		"3:	adrp x16, %c0\n\t"
		"	ldr w16, [x16, #:lo12:%c0]\n\t"
		"	cmp w16, #0\n\t"
		"	.if %c1\n\t"
		"	b.eq 4f\n\t"
		"	.else\n\t"
		"	b.ne 4f\n\t"
		"	.endif\n\t"
		"	b 2b\n"
		"4:	b %l[l_yes]\n\t"
		".popsection\n\t"
		SK_TABLE_ENTRY("%l[l_yes]", "0", "%c0 + %c1")
		: : "S"(key), "i"(branch) : "cc", "x16" : l_yes);
	return false;
l_yes:
	return true;
}

/* Two keys on one site: see the x86-64 version. */
static inline __attribute__((always_inline)) int
arch_static_branch_refined(struct static_key *outer, struct static_key *inner, bool likely)
{
	__asm__ goto(
		"1:	b 3f\n"
		"2:\n\t"
		".pushsection .text.cgm_static_key, \"ax\"\n"
		"3:	adrp x16, %c0\n\t"
		"	ldr w16, [x16, #:lo12:%c0]\n\t"
		"	cmp w16, #0\n\t"
		"	.if %c2\n\t"
		"	b.eq 6f\n\t"
		"	.else\n\t"
		"	b.ne 4f\n\t"
		"	b 2b\n\t"
		"	.endif\n"
		"4:	adrp x16, %c1\n\t"
		"	ldr w16, [x16, #:lo12:%c1]\n\t"
		"	cmp w16, #0\n\t"
		"	b.ne 5f\n\t"
		"	.if %c2\n\t"
		"	b 2b\n\t"
		"	.else\n\t"
		"	b %l[l_other]\n\t"
		"	.endif\n"
		"5:	b %l[l_refined]\n"
		"6:	b %l[l_other]\n\t"
		".popsection\n\t"
		SK_TABLE_ENTRY("%l[l_other]", "0", "%c0 + %c2")
		SK_TABLE_ENTRY("%l[l_refined]", "1", "%c1")
		: : "S"(outer), "S"(inner), "i"(likely) : "cc", "x16" : l_other, l_refined);
	return likely ? 1 : 0;
l_other:
	return likely ? 0 : 1;
l_refined:
	return 2;
}

#else
/* Unknown architecture: every site reads its key (fallback mode). */
static inline __attribute__((always_inline)) bool
arch_static_branch(struct static_key *key, bool branch)
{
	return (__atomic_load_n(&key->enabled, __ATOMIC_RELAXED) > 0) != branch;
}

static inline __attribute__((always_inline)) int
arch_static_branch_refined(struct static_key *outer, struct static_key *inner, bool likely)
{
	(void)likely;
	if (__atomic_load_n(&outer->enabled, __ATOMIC_RELAXED) <= 0)
		return 0;
	return __atomic_load_n(&inner->enabled, __ATOMIC_RELAXED) > 0 ? 2 : 1;
}
#endif

/* Only the key types are accepted, as in the kernel. */
#define STATIC_KEY_CHECK_TYPE(x)					\
	_Static_assert(__builtin_types_compatible_p(__typeof__(*(x)),	\
						    struct static_key_true) || \
		       __builtin_types_compatible_p(__typeof__(*(x)),	\
						    struct static_key_false), \
		       "static_branch_*() needs a static_key_true/false")

#ifdef CGM_STATIC_KEYS_COMPILED_OUT
/*
 * Benchmark-only build: no site at all, the feature compiled out.  The
 * difference to a patched build is what the sites cost (one NOP each).
 */
#define static_branch_likely(x) (sizeof((x)->key) ? 1 : 1)
#define static_branch_unlikely(x) (sizeof((x)->key) ? 0 : 0)
#define static_branch_unlikely_refined(x, y) (sizeof((x)->key) + sizeof((y)->key) ? 0 : 0)
#define static_branch_likely_refined(x, y) (sizeof((x)->key) + sizeof((y)->key) ? 0 : 0)
#else
#define static_branch_likely(x) __extension__ ({			\
	STATIC_KEY_CHECK_TYPE(x);					\
	__builtin_expect(!arch_static_branch(&(x)->key, true), 1);	\
})

#define static_branch_unlikely(x) __extension__ ({			\
	STATIC_KEY_CHECK_TYPE(x);					\
	__builtin_expect(arch_static_branch(&(x)->key, false), 0);	\
})

/*
 * One site, two false keys, no cost beyond one site: 0 while @x is off,
 * 1 while @x is on and @y off, 2 while both are on.  The site is a NOP, a
 * jump to the "1" side or a jump to the "2" side: a second mode of a
 * feature (accounting while a move is in progress) costs nothing while it
 * is off, not even the NOP a nested static_branch_unlikely() would add.
 */
#define STATIC_KEY_CHECK_FALSE(x)					\
	_Static_assert(__builtin_types_compatible_p(__typeof__(*(x)),	\
						    struct static_key_false), \
		       "static_branch_*_refined() needs static_key_false keys")
#define static_branch_unlikely_refined(x, y) __extension__ ({		\
	STATIC_KEY_CHECK_FALSE(x);					\
	STATIC_KEY_CHECK_FALSE(y);					\
	arch_static_branch_refined(&(x)->key, &(y)->key, false);	\
})

/*
 * The same values, with the "1" side the one that falls through: a NOP
 * while @x is on and @y off, a jump to the "0" side while @x is off.  For
 * a feature that is on by default (accounting): its code is inline after
 * the site, not one jump away, and turning it off costs the jump.
 */
#define static_branch_likely_refined(x, y) __extension__ ({		\
	STATIC_KEY_CHECK_FALSE(x);					\
	STATIC_KEY_CHECK_FALSE(y);					\
	arch_static_branch_refined(&(x)->key, &(y)->key, true);	\
})
#endif

/* Reference-counted: the sites are rewritten only on 0 <-> 1. */
void static_key_slow_inc(struct static_key *key);
void static_key_slow_dec(struct static_key *key);

/* Set semantics: true/false whatever the count was (kernel: WARN if > 1). */
void static_key_enable(struct static_key *key);
void static_key_disable(struct static_key *key);

#define static_branch_inc(x)		static_key_slow_inc(&(x)->key)
#define static_branch_dec(x)		static_key_slow_dec(&(x)->key)
#define static_branch_enable(x)		static_key_enable(&(x)->key)
#define static_branch_disable(x)	static_key_disable(&(x)->key)

static inline int static_key_count(const struct static_key *key)
{
	return __atomic_load_n(&key->enabled, __ATOMIC_ACQUIRE);
}

/* Accepts struct static_key, static_key_true or static_key_false. */
#define static_key_enabled(x) (static_key_count((const struct static_key *)(x)) > 0)

enum static_keys_mode {
	STATIC_KEYS_FALLBACK,	/* every site reads its key */
	STATIC_KEYS_PATCHED,	/* sites are NOP/JMP, rewritten on change */
};

/*
 * Patch every site of this image to its NOP/JMP form, or settle on the
 * fallback when @want_patching is false or patching is impossible.  Call
 * once, early (the shim's constructor); before it, sites read their keys.
 * Returns the mode in force.
 */
enum static_keys_mode static_keys_init(bool want_patching);

/*
 * The constructor is done with its keys.  Until then, a process that glibc
 * says never started a thread (__libc_single_threaded) is taken to have
 * only the caller, without reading /proc/self/task; after, threads made
 * by raw clone(), which glibc does not see, could exist.
 */
void static_keys_startup_done(void);

/* The mode in force and, through @reason (may be NULL), why. */
enum static_keys_mode static_keys_mode(const char **reason);

/* For tests and `verbose=1`: the table of this image. */
const struct jump_entry *static_keys_table(unsigned int *count);
uintptr_t jump_entry_code(const struct jump_entry *e);
uintptr_t jump_entry_target(const struct jump_entry *e);
uintptr_t jump_entry_fallback(const struct jump_entry *e);
struct static_key *jump_entry_key(const struct jump_entry *e);
bool jump_entry_branch(const struct jump_entry *e);

/* Text report of the mode and every site (see shim/static_key.c). */
size_t static_keys_report(char *buf, size_t len);

/* The instruction size of a site on this architecture (0: none). */
unsigned int static_keys_site_size(void);

#endif /* CGM_STATIC_KEY_H */
