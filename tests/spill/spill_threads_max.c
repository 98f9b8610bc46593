/*
 * Several threads meeting memory.max at once, with plenty of cold memory
 * to spill (tests/spill/test_spill_lib.sh).
 *
 *   spill_threads_max COLD_MB THREADS ROUNDS
 *
 * The main thread fills COLD_MB of 64 KiB blocks (compressible about 2:1)
 * and leaves them alone;
 * then THREADS threads each allocate, write and free runs of 32 KiB
 * blocks (charged by their bytes, through the thread's stock) ROUNDS
 * times.  Under a memory.max below the total, every refused charge must
 * find room by spilling the cold blocks -- also while another thread of
 * the process is spilling for its own charge.  A thread whose malloc
 * returns NULL prints "spill_threads_max: FAIL ..." and the status is 1;
 * the cold blocks are checked byte for byte at the end.  Prints
 * "spill_threads_max: ok" when all went well.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cold_blocks.h"

#define HOT_BLOCK	(32u << 10)
#define HOT_RUN		64		/* 2 MiB a run */

static unsigned long rounds;
static int failed;

static void *worker(void *arg)
{
	unsigned char *run[HOT_RUN];
	unsigned long id = (unsigned long)(uintptr_t)arg;

	for (unsigned long r = 0; r < rounds && !__atomic_load_n(&failed, __ATOMIC_RELAXED); r++) {
		for (int k = 0; k < HOT_RUN; k++) {
			run[k] = malloc(HOT_BLOCK);
			if (!run[k]) {
				fprintf(stderr, "spill_threads_max: FAIL thread %lu round %lu: malloc(%u) "
					"returned NULL\n", id, r, HOT_BLOCK);
				__atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
				while (k--)
					free(run[k]);
				return NULL;
			}
			memset(run[k], (int)(id + r + (unsigned long)k), HOT_BLOCK);
		}
		for (int k = 0; k < HOT_RUN; k++)
			free(run[k]);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long arg[3], nthreads;	/* COLD_MB THREADS ROUNDS */
	unsigned char **cold;
	pthread_t *tid;
	size_t ncold;

	if (!spill_args(argc, argv, 3, "COLD_MB THREADS ROUNDS", arg))
		return 2;
	nthreads = arg[1];
	rounds = arg[2];
	tid = calloc(nthreads ? nthreads : 1, sizeof(*tid));
	if (!tid) {
		fprintf(stderr, "spill_threads_max: FAIL: no memory for the thread table\n");
		return 1;
	}
	cold = cold_fill("spill_threads_max", arg[0], &ncold);
	if (!cold)
		return 1;
	for (unsigned long t = 0; t < nthreads; t++)
		if (pthread_create(&tid[t], NULL, worker, (void *)(uintptr_t)t) != 0) {
			fprintf(stderr, "spill_threads_max: FAIL: pthread_create\n");
			return 1;
		}
	for (unsigned long t = 0; t < nthreads; t++)
		pthread_join(tid[t], NULL);
	if (cold_check("spill_threads_max", cold, ncold))
		return 1;
	if (failed)
		return 1;
	printf("spill_threads_max: ok\n");
	return 0;
}
