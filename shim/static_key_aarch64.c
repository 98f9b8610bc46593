/*
 * Static keys on aarch64: a site is one 4-byte instruction,
 *	NOP	d503201f
 *	B	000101 imm26 (to the yes side)
 * and, as compiled, B to the fallback.  The architecture allows one core
 * to replace a B or NOP with another B or NOP while others execute it
 * (ARM ARM, "concurrent modification and execution of instructions"), so
 * one aligned 32-bit store is enough; then the data cache is cleaned and
 * the instruction cache invalidated to the point of unification for that
 * line (__builtin___clear_cache: DC CVAU, DSB ISH, IC IVAU, DSB ISH, ISB),
 * and every core is made to resynchronise its instruction stream with
 * membarrier(PRIVATE_EXPEDITED_SYNC_CORE).
 */
#if defined(__aarch64__) && !defined(CGM_STATIC_KEYS_GENERIC)

#include <errno.h>
#include <linux/membarrier.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgm/log.h"
#include "cgm/sk_arch.h"

#define INSN_SIZE 4
#define AARCH64_NOP 0xd503201fu
#define AARCH64_B 0x14000000u

const unsigned int sk_arch_insn_size = INSN_SIZE;

int sk_arch_init(const char **reason)
{
	if (sk_sync_register(reason) < 0)
		return -ENOSYS;
	return 0;
}

void sk_arch_make_insn(uintptr_t code, uintptr_t target, bool jump,
		       struct sk_poke *poke)
{
	uint32_t insn = AARCH64_NOP;

	poke->addr = (uint8_t *)code;
	poke->jump = jump;
	poke->target = target;
	if (jump) {
		/* B has a +-128 MiB reach; a library is far smaller. */
		int64_t off = ((int64_t)poke->target - (int64_t)code) / 4;

		insn = AARCH64_B | ((uint32_t)off & 0x03ffffffu);
	}
	memcpy(poke->insn, &insn, INSN_SIZE);
}

void sk_arch_poke(struct sk_poke *pokes, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		uint32_t insn;

		memcpy(&insn, pokes[i].insn, INSN_SIZE);
		__atomic_store_n((uint32_t *)pokes[i].addr, insn, __ATOMIC_RELAXED);
		__builtin___clear_cache((char *)pokes[i].addr,
					(char *)pokes[i].addr + INSN_SIZE);
	}
	if (n)
		sk_arch_sync_cores();
	for (unsigned int i = 0; i < n; i++)
		if (memcmp(pokes[i].addr, pokes[i].insn, INSN_SIZE) != 0)
			cgm_log("static keys: site %p did not take its new bytes",
				(void *)pokes[i].addr);
}

#endif /* __aarch64__ */
