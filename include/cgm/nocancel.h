/*
 * Holding off thread cancellation inside the library.
 *
 * malloc, free and the calls the library interposes are not cancellation
 * points, but their slow paths make system calls that are (read of
 * /proc for a sample, pread of pagemap, nanosleep when throttled,
 * recvmsg), often with a lock held or a memory stall counted.  A thread
 * cancelled there (deferred cancellation acts at the next such call)
 * would unwind out of malloc and leave the lock held for ever -- the next
 * sample, reclaim or munmap of the process hung -- or the stall counted.
 * So those paths run with cancellation disabled, and a cancel that came
 * meanwhile acts at the thread's next cancellation point of its own.
 */
#ifndef CGM_NOCANCEL_H
#define CGM_NOCANCEL_H

#include <pthread.h>

/* Disable cancellation; the state to restore. */
static inline int cgm_nocancel_begin(void)
{
	int old = PTHREAD_CANCEL_ENABLE;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	return old;
}

static inline void cgm_nocancel_end(int old)
{
	if (old != PTHREAD_CANCEL_DISABLE)
		pthread_setcancelstate(old, NULL);
}

#endif /* CGM_NOCANCEL_H */
