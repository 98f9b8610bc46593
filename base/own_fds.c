/*
 * The table of descriptors the library keeps for itself (cgm/own_fds.h).
 * Slots hold fd + 1 (0 is a free slot), read and written atomically: a
 * close() in another thread or in a signal handler may look at any time.
 */
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgm/own_fds.h"

static int kept[CGM_OWN_FDS_MAX];
static unsigned int nkept;
/*
 * The process that registered them.  A vfork() child -- python3's
 * subprocess, posix_spawn() -- shares this table with its parent but has
 * a descriptor table of its own, and closes every descriptor it does not
 * pass on before its exec: its copies are not the library's, so the
 * guards let them go, silently, and the table is left as the parent's.
 */
static int keeper;

/* In the process that registered them, not in a vfork() child of it. */
static bool keeper_here(void)
{
	return __atomic_load_n(&keeper, __ATOMIC_RELAXED) == (int)syscall(SYS_getpid);
}

/*
 * Where moved descriptors go: high, but below the soft RLIMIT_NOFILE and
 * below FD_SETSIZE (1024), so that the kernel's table does not grow for
 * them and a program's select() is never handed a number it cannot hold.
 */
static int high_floor(void)
{
	struct rlimit rl;
	rlim_t lim = 1024;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < lim)
		lim = rl.rlim_cur;
	/* 1024 -> 960; a small limit (64) -> 32. */
	return lim >= 128 ? (int)lim - 64 : (int)lim / 2;
}

static void real_close(int fd)
{
	syscall(SYS_close, fd);
}

static bool add(int fd)
{
	for (unsigned int i = 0; i < CGM_OWN_FDS_MAX; i++) {
		int free_slot = 0;

		if (__atomic_compare_exchange_n(&kept[i], &free_slot, fd + 1, false,
						__ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
			__atomic_add_fetch(&nkept, 1, __ATOMIC_SEQ_CST);
			return true;
		}
	}
	return false;
}

int cgm_fd_move_high(int fd)
{
	int floor = high_floor(), moved;

	if (fd < 0 || fd >= floor)
		return fd;
	moved = fcntl(fd, F_DUPFD_CLOEXEC, floor);
	if (moved < 0)
		return fd;
	real_close(fd);
	return moved;
}

int cgm_fd_keep(int fd)
{
	fd = cgm_fd_move_high(fd);
	if (fd < 0)
		return fd;
	__atomic_store_n(&keeper, (int)syscall(SYS_getpid), __ATOMIC_RELAXED);
	add(fd);
	return fd;
}

void cgm_fd_forget(int fd)
{
	if (fd < 0)
		return;
	for (unsigned int i = 0; i < CGM_OWN_FDS_MAX; i++) {
		int want = fd + 1;

		if (__atomic_compare_exchange_n(&kept[i], &want, 0, false,
						__ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
			__atomic_sub_fetch(&nkept, 1, __ATOMIC_SEQ_CST);
			return;
		}
	}
}

void cgm_fd_close(int fd)
{
	if (fd < 0)
		return;
	cgm_fd_forget(fd);
	real_close(fd);
}

bool cgm_fd_kept(int fd)
{
	if (fd < 0 || !__atomic_load_n(&nkept, __ATOMIC_SEQ_CST))
		return false;
	for (unsigned int i = 0; i < CGM_OWN_FDS_MAX; i++)
		if (__atomic_load_n(&kept[i], __ATOMIC_SEQ_CST) == fd + 1)
			return keeper_here();
	return false;
}

int cgm_fd_kept_from(unsigned int from)
{
	long best = -1;

	if (!keeper_here())
		return -1;
	for (unsigned int i = 0; i < CGM_OWN_FDS_MAX; i++) {
		long fd = (long)__atomic_load_n(&kept[i], __ATOMIC_SEQ_CST) - 1;

		if (fd >= (long)from && (best < 0 || fd < best))
			best = fd;
	}
	return (int)best;
}

unsigned int cgm_fd_kept_count(void)
{
	unsigned int n = __atomic_load_n(&nkept, __ATOMIC_SEQ_CST);

	return n && keeper_here() ? n : 0;
}
