/*
 * mlockall(), interposed for spill=1: locked memory is never reclaimed
 * (the kernel keeps locked pages off its reclaimable lists), so spilling
 * stops for the process before the lock is taken, and what was spilled
 * comes back.  It must come first: the pool's and the engine's tables are
 * reserved address space that is memory only where touched, and
 * MCL_CURRENT makes every page of every mapping resident
 * (shim/spiller.c, cgm_spill_stop_locked).
 *
 * And after MCL_CURRENT, with accounting on: the hierarchy file is mapped
 * whole (34.6 MB) and a process uses a few pages of it, so the others are
 * unlocked and unmapped again (hier_release_unused), as if the file were
 * not the program's memory -- it is not.
 */
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgm/accounted.h"
#include "cgm/compiler.h"
#include "cgm/hier.h"
#include "cgm/shim.h"
#include "cgm/spiller.h"
#include "cgm/static_key.h"

CGM_KEYED CGM_EXPORT int mlockall(int flags)
{
	/*
	 * Not the key, which is on only while there is an engine: none may
	 * be made after this either (before the first reclaim, or after
	 * cgm_spill_stop(), there is none).
	 */
	if (cgm_conf.spill && (flags & (MCL_CURRENT | MCL_FUTURE)))
		cgm_spill_stop_locked(flags & MCL_CURRENT ? "mlockall MCL_CURRENT" :
				      "mlockall MCL_FUTURE");
	/* syscall() returns -1 with errno set on failure, as mlockall() does. */
	if (syscall(SYS_mlockall, flags) != 0)
		return -1;
	if (static_branch_unlikely(&cgm_accounting_key) && (flags & MCL_CURRENT))
		hier_release_unused(&cgm_acct.h);
	return 0;
}
