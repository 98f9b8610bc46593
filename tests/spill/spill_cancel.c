/*
 * Threads cancelled while they allocate under a limit that spills
 * (tests/spill/test_spill_lib.sh).
 *
 *   spill_cancel COLD_MB ROUNDS
 *
 * The main thread fills COLD_MB of blocks and leaves them alone.  Then,
 * ROUNDS times, it starts a thread that allocates, writes and frees
 * blocks of 256 KiB to 1 MiB in a loop -- reaching the library's samples,
 * reclaim, spilling and throttling -- with a pthread_testcancel() after
 * each block, and cancels it a few milliseconds later.  malloc is not a
 * cancellation point: a thread may be cancelled in its own loop only,
 * never inside the library, which would leave a lock held (the next
 * reclaim or munmap would hang) or its stall counted for ever.  After the
 * rounds the main thread allocates and frees again, maps and unmaps, and
 * checks its cold blocks.  Prints "spill_cancel: ok"; the test's timeout
 * catches a hang.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "cold_blocks.h"

static void *churn(void *arg)
{
	uint64_t r = (uintptr_t)arg * 0x2545f4914f6cdd1dull + 1;

	for (;;) {
		size_t len;
		unsigned char *p;

		r ^= r << 13;
		r ^= r >> 7;
		r ^= r << 17;
		len = (256u << 10) + (size_t)(r % (768u << 10));
		p = malloc(len);
		if (p) {
			memset(p, (int)(r & 0xff), len);
			free(p);
		}
		pthread_testcancel();
	}
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long arg[2], rounds;	/* COLD_MB ROUNDS */
	unsigned char **cold;
	size_t ncold;

	if (!spill_args(argc, argv, 2, "COLD_MB ROUNDS", arg))
		return 2;
	rounds = arg[1];
	cold = cold_fill("spill_cancel", arg[0], &ncold);
	if (!cold)
		return 1;
	for (unsigned long k = 0; k < rounds; k++) {
		pthread_t t;
		struct timespec ts = { 0, (long)(1 + k % 7) * 1000000L };

		if (pthread_create(&t, NULL, churn, (void *)(uintptr_t)(k + 1)) != 0) {
			fprintf(stderr, "spill_cancel: FAIL: pthread_create\n");
			return 1;
		}
		nanosleep(&ts, NULL);
		pthread_cancel(t);
		pthread_join(t, NULL);
	}
	/* What a cancelled thread left locked would hang one of these. */
	for (int k = 0; k < 64; k++) {
		void *p = malloc(1u << 20);
		void *m = mmap(NULL, 1u << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (!p || m == MAP_FAILED) {
			fprintf(stderr, "spill_cancel: FAIL: allocation after the cancels\n");
			return 1;
		}
		memset(p, 1, 1u << 20);
		memset(m, 2, 1u << 20);
		free(p);
		munmap(m, 1u << 20);
	}
	if (cold_check("spill_cancel", cold, ncold))
		return 1;
	printf("spill_cancel: ok\n");
	return 0;
}
