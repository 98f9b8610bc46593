/*
 * Static keys where no site can be patched (an architecture without an
 * implementation, or a build with CGM_STATIC_KEYS_GENERIC): the sites are
 * plain reads of their keys and static_keys_init() reports fallback mode.
 */
#if !(defined(__x86_64__) || defined(__aarch64__)) || defined(CGM_STATIC_KEYS_GENERIC)

#include <errno.h>

#include "cgm/sk_arch.h"

const unsigned int sk_arch_insn_size = 0;

int sk_arch_init(const char **reason)
{
	*reason = "no site patching on this architecture";
	return -ENOTSUP;
}

void sk_arch_make_insn(uintptr_t code, uintptr_t target, bool jump,
		       struct sk_poke *poke)
{
	(void)code;
	(void)target;
	(void)jump;
	(void)poke;
}

void sk_arch_poke(struct sk_poke *pokes, unsigned int n)
{
	(void)pokes;
	(void)n;
}

void sk_arch_sync_cores(void)
{
}

void sk_arch_after_fork(void)
{
}

#endif
