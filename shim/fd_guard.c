/*
 * close(), close_range(), closefrom(), dup2() and dup3() of the program,
 * leaving alone the descriptors the library keeps (cgm/own_fds.h).
 *
 * A daemon that closes everything above stderr, or a child that tidies up
 * before it goes on without exec, would otherwise take the spill engine's
 * userfaultfd away: the kernel drops its registrations with it, and every
 * spilled page then reads as zeros.  Such a close of one of ours succeeds
 * without closing it (the program meant "none of mine stays open", and
 * none does), said once on stderr.  A dup2() onto one of ours is refused
 * with EBUSY instead: the program would then write to a userfaultfd.
 *
 * Raw system calls (syscall(SYS_close_range, ...)) do not come through
 * here; the engine then sees its descriptor gone, says so and stops
 * (zpool/spill.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgm/compiler.h"
#include "cgm/log.h"
#include "cgm/own_fds.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* glibc's own close, a cancellation point as close() is. */
extern int __close(int fd);
extern int __dup2(int oldfd, int newfd);

static int warned_close, warned_dup;

static void said_kept(int fd)
{
	cgm_log_once(&warned_close, "the program closed descriptor %d, which cgmalloc keeps "
		     "for spilled memory: left open (further ones are not reported)", fd);
}

CGM_EXPORT int close(int fd)
{
	if (cgm_unlikely(cgm_fd_kept(fd))) {
		said_kept(fd);
		return 0;
	}
	return __close(fd);
}

static int range_syscall(unsigned int first, unsigned int last, unsigned int flags)
{
	return (int)syscall(SYS_close_range, first, last, flags);
}

/* Close [first, last] but for our descriptors, in the pieces between them. */
CGM_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	unsigned int lo = first;

	/* Setting close-on-exec closes nothing (ours have it already). */
	if (!cgm_fd_kept_count() || ((unsigned int)flags & CLOSE_RANGE_CLOEXEC) || first > last)
		return range_syscall(first, last, (unsigned int)flags);
	for (;;) {
		int k = cgm_fd_kept_from(lo);

		if (k < 0 || (unsigned int)k > last)
			return range_syscall(lo, last, (unsigned int)flags);
		said_kept(k);
		if ((unsigned int)k > lo && range_syscall(lo, (unsigned int)k - 1, (unsigned int)flags) < 0)
			return -1;
		if ((unsigned int)k == last)
			return 0;
		lo = (unsigned int)k + 1;
	}
}

CGM_EXPORT void closefrom(int lowfd)
{
	int saved = errno;

	if (lowfd < 0)
		lowfd = 0;
	if (close_range((unsigned int)lowfd, UINT_MAX, 0) < 0) {
		/* A kernel before 5.9: one by one, as far as the table can reach. */
		long max = sysconf(_SC_OPEN_MAX);

		if (max < 0 || max > 65536)
			max = 65536;
		for (long fd = lowfd; fd < max; fd++)
			close((int)fd);
	}
	errno = saved;
}

static bool onto_kept(int oldfd, int newfd)
{
	if (oldfd == newfd || !cgm_unlikely(cgm_fd_kept(newfd)))
		return false;
	cgm_log_once(&warned_dup, "the program asked for descriptor %d, which cgmalloc keeps "
		     "for spilled memory: dup2 refused with EBUSY", newfd);
	errno = EBUSY;
	return true;
}

CGM_EXPORT int dup2(int oldfd, int newfd)
{
	if (onto_kept(oldfd, newfd))
		return -1;
	return __dup2(oldfd, newfd);
}

CGM_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	if (onto_kept(oldfd, newfd))
		return -1;
	return (int)syscall(SYS_dup3, oldfd, newfd, flags);
}
