/*
 * Making every core see rewritten code: membarrier's
 * PRIVATE_EXPEDITED_SYNC_CORE, shared by the architectures that patch
 * sites (x86-64 and aarch64).  It has to be registered once per address
 * space, so again in the child of fork().
 */
#if (defined(__x86_64__) || defined(__aarch64__)) && !defined(CGM_STATIC_KEYS_GENERIC)

#include <errno.h>
#include <stdbool.h>
#include <linux/membarrier.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgm/log.h"
#include "cgm/sk_arch.h"

static int membarrier(int cmd)
{
	return (int)syscall(__NR_membarrier, cmd, 0, 0);
}

/*
 * Registered in this address space?  A forked child registers at its
 * first rewrite rather than in fork(): most children never rewrite a site,
 * and fork-heavy programs should not pay a system call per fork.
 */
static bool registered = true;

void sk_arch_sync_cores(void)
{
	if (!registered) {
		membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE);
		registered = true;
	}
	membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE);
}

void sk_arch_after_fork(void)
{
	registered = false;
}

int sk_sync_register(const char **reason)
{
	static char buf[128];

	if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE) < 0) {
		snprintf(buf, sizeof(buf), "membarrier(SYNC_CORE) unavailable: %s",
			 cgm_strerror(errno));
		*reason = buf;
		return -ENOSYS;
	}
	return 0;
}

#endif
