/*
 * A thread started through the pthread_create wrapper runs its function
 * here, so that a large block it parked (shim/large_park.c) is purged
 * while its heap is still its own.  In the thread-exit destructors it
 * would be too late: mimalloc's runs before ours (its key is older) and
 * gives the heap up, and a free after that only queues the block for
 * whichever thread takes the heap over -- the block stayed resident.
 *
 * The cleanup handler runs at a return, pthread_exit() and cancellation
 * alike.  Its four imports (setjmp and glibc's cancellation buffers) are
 * bound lazily, at the first thread's start: this file is not in the
 * Makefile's BIND_AT_LOAD, and bound at load they cost every process
 * about 5,900 instructions of symbol lookups (bench/RESULTS-startup.md,
 * 411,292 -> 417,212).
 */
#include <pthread.h>

#include "cgm/shim.h"

static void purge_parked(void *unused)
{
	(void)unused;
	cgm_park_purge();
}

void *cgm_thread_run(void *(*fn)(void *), void *arg)
{
	void *ret;

	pthread_cleanup_push(purge_parked, NULL);
	ret = fn(arg);
	pthread_cleanup_pop(1);
	return ret;
}
