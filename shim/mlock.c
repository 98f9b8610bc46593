/*
 * mlockall(), interposed for spill=1: locked memory is never reclaimed
 * (the kernel keeps locked pages off its reclaimable lists), so spilling
 * stops for the process before the lock is taken, and what was spilled
 * comes back.  It must come first: the pool's and the engine's tables are
 * reserved address space that is memory only where touched, and
 * MCL_CURRENT makes every page of every mapping resident
 * (shim/spiller.c, cgm_spill_stop_locked).  With spilling off, this is
 * mlockall() itself.
 */
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgm/compiler.h"
#include "cgm/spiller.h"
#include "cgm/static_key.h"

CGM_KEYED CGM_EXPORT int mlockall(int flags)
{
	if (static_branch_unlikely(&cgm_spill_key) && (flags & (MCL_CURRENT | MCL_FUTURE)))
		cgm_spill_stop_locked(flags & MCL_CURRENT ? "mlockall MCL_CURRENT" :
				      "mlockall MCL_FUTURE");
	/* syscall() returns -1 with errno set on failure, as mlockall() does. */
	return (int)syscall(SYS_mlockall, flags);
}
