/*
 * The /proc/self files a sample reads (statm, pagemap, and numa_maps with
 * more than one node online), kept open at a high number (cgm/own_fds.h)
 * in a process that spills.
 *
 * Why: there the library has threads of its own -- the background
 * reclaim, the fault handler -- and they sample, the handler as often as
 * every batch of faults it serves over memory.high.  A file opened for
 * each read took the lowest free descriptor for a moment, and an open()
 * of the program's in another thread at that moment got the next one: a
 * program that closes stdin and opens /dev/null expecting 0 (as daemons
 * do) is handed 1.  check-spill-lib saw it in spill_prog's forked child,
 * whose handler sampled (statm, and pagemap for the pages the child
 * shares with its parent) as it served the child's first faults.
 *
 * They are opened as spilling starts (the engine is made: the pool's
 * libraries and the engine's own descriptors come then too) and kept:
 * one such moment a process, not one a sample.  Before that the library's
 * one thread, the background reclaim, samples every half second and
 * still opens them for the while.  Each is tagged with the pid that opened
 * it, because a forked child's copy reads its parent's: the child closes
 * them in its fork handler, alone then, and opens its own as its spilling
 * starts (at once where it takes over its parent's engine).  A vfork()
 * child shares the tags with its parent and opens the files for the while.
 * A program that does not spill keeps no descriptor of the library's.
 */
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgm/acct.h"
#include "cgm/own_fds.h"
#include "cgm/self_proc.h"

static const char *const paths[CGM_SELF_FILES] = {
	[CGM_SELF_STATM] = "/proc/self/statm",
	[CGM_SELF_PAGEMAP] = "/proc/self/pagemap",
	[CGM_SELF_NUMA_MAPS] = "/proc/self/numa_maps",
};

uint64_t cgm_self_kept_word[CGM_SELF_FILES];

void cgm_self_keep_open(void)
{
	uint32_t pid = (uint32_t)syscall(SYS_getpid);

	for (int f = 0; f < CGM_SELF_FILES; f++) {
		uint64_t now = __atomic_load_n(&cgm_self_kept_word[f], __ATOMIC_ACQUIRE);
		int fd, high;

		/* numa_maps is read with more than one node online only (shim/numa.c). */
		if (now || (f == CGM_SELF_NUMA_MAPS && acct_online_nodes() <= 1))
			continue;
		fd = open(paths[f], O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		high = cgm_fd_move_high(fd);
		/* Not movable (a tiny RLIMIT_NOFILE): kept, it would hold a low number for good. */
		if (high == fd) {
			close(fd);
			continue;
		}
		high = cgm_fd_keep(high);
		/* Another thread's came first (a reclaim in the program's thread and the background's). */
		if (!__atomic_compare_exchange_n(&cgm_self_kept_word[f], &now,
						 (uint64_t)pid << 32 | (uint32_t)high, false,
						 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			cgm_fd_close(high);
	}
}

void cgm_self_kept_fork_child(void)
{
	for (int f = 0; f < CGM_SELF_FILES; f++) {
		uint64_t now = __atomic_load_n(&cgm_self_kept_word[f], __ATOMIC_RELAXED);

		if (!now)
			continue;
		__atomic_store_n(&cgm_self_kept_word[f], 0, __ATOMIC_RELAXED);
		cgm_fd_close((int)(uint32_t)now);
	}
}
