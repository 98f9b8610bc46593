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

#define COLD_BLOCK	(64u << 10)
#define HOT_BLOCK	(32u << 10)
#define HOT_RUN		64		/* 2 MiB a run */

static unsigned long rounds;
static int failed;

/* Half of each 64 bytes scrambled, half plain: about 2:1 with lz4, so spilling takes some time. */
static unsigned char pattern(size_t block, size_t i)
{
	uint64_t x = (block << 20 | i) * 0x9e3779b97f4a7c15ull;

	return (unsigned char)(i % 64 < 32 ? x >> 56 : (block * 13 + i / 64) & 0xff);
}

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
	unsigned long cold_mb, nthreads;
	unsigned char **cold;
	pthread_t *tid;
	size_t ncold, bad = 0;

	if (argc != 4) {
		fprintf(stderr, "usage: %s COLD_MB THREADS ROUNDS\n", argv[0]);
		return 2;
	}
	cold_mb = strtoul(argv[1], NULL, 10);
	nthreads = strtoul(argv[2], NULL, 10);
	rounds = strtoul(argv[3], NULL, 10);
	ncold = cold_mb * (1u << 20) / COLD_BLOCK;
	cold = calloc(ncold, sizeof(*cold));
	tid = calloc(nthreads, sizeof(*tid));
	if (!cold || !tid) {
		fprintf(stderr, "spill_threads_max: FAIL: no memory for the tables\n");
		return 1;
	}
	for (size_t b = 0; b < ncold; b++) {
		cold[b] = malloc(COLD_BLOCK);
		if (!cold[b]) {
			fprintf(stderr, "spill_threads_max: FAIL: cold block %zu: malloc returned NULL\n", b);
			return 1;
		}
		for (size_t i = 0; i < COLD_BLOCK; i++)
			cold[b][i] = pattern(b, i);
	}
	for (unsigned long t = 0; t < nthreads; t++)
		if (pthread_create(&tid[t], NULL, worker, (void *)(uintptr_t)t) != 0) {
			fprintf(stderr, "spill_threads_max: FAIL: pthread_create\n");
			return 1;
		}
	for (unsigned long t = 0; t < nthreads; t++)
		pthread_join(tid[t], NULL);
	for (size_t b = 0; b < ncold; b++) {
		for (size_t i = 0; i < COLD_BLOCK; i++)
			bad += cold[b][i] != pattern(b, i);
		free(cold[b]);
	}
	if (bad) {
		fprintf(stderr, "spill_threads_max: FAIL: %zu cold bytes differ\n", bad);
		return 1;
	}
	if (failed)
		return 1;
	printf("spill_threads_max: ok\n");
	return 0;
}
