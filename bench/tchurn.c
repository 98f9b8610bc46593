/*
 * tchurn: thousands of short-lived threads.
 *
 * After mimalloc-bench's mleak.  Threads run in batches of BATCH at a time;
 * each makes a few hundred small allocations and frees, then leaves a few
 * blocks behind for the thread in its place in the next batch to free.
 * What is measured is a thread's first and last allocation: the allocator
 * sets up and abandons a heap per thread, and accounting sets up a charge
 * stock on the first malloc and hands it back at exit, thousands of times;
 * the blocks left behind are freed after their owner is gone.
 *
 * Usage: tchurn [THREADS] [BATCH]   (default 5000, 8)
 */
#include <pthread.h>
#include <string.h>

#include "bench_common.h"

#define OPS 400    /* allocations per thread */
#define LIVE 32    /* blocks a thread holds at a time */
#define LEFT 4     /* blocks it leaves to its successor */
#define MIN_SIZE 16
#define MAX_SIZE 512

/* ->thr.sum adds up over the batches: bench_threads_run()'s sum is not used. */
struct place {
	struct bench_thread thr; /* first, for bench_threads_run() */
	unsigned long index; /* of the thread running in this place */
	unsigned char *left[LEFT];
};

static void *short_life(void *arg)
{
	struct place *pl = arg;
	unsigned char *live[LIVE] = { 0 };
	uint64_t rng = 0xd1b54a32d192ed03ull * (pl->index + 1);

	for (unsigned i = 0; i < LEFT; i++) {
		if (pl->left[i])
			pl->thr.sum += pl->left[i][0];
		free(pl->left[i]);
		pl->left[i] = NULL;
	}
	for (unsigned long i = 0; i < OPS; i++) {
		uint64_t r = bench_rand(&rng);
		unsigned k = r % LIVE;
		size_t size = MIN_SIZE + (r >> 32) % (MAX_SIZE - MIN_SIZE + 1);

		free(live[k]);
		live[k] = malloc(size);
		if (!live[k]) {
			pl->thr.failed = 1;
			break;
		}
		live[k][0] = (unsigned char)i;
	}
	for (unsigned k = 0; k < LIVE; k++) {
		if (k < LEFT)
			pl->left[k] = live[k];
		else
			free(live[k]);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long nthreads = bench_arg(argc, argv, 1, 5000, "THREADS");
	unsigned long batch = bench_arg(argc, argv, 2, 8, "BATCH");
	struct place *pl = bench_calloc(argv[0], batch, sizeof(*pl), "the batch");
	unsigned long started = 0, sum = 0;

	while (started < nthreads) {
		unsigned long n = nthreads - started < batch ? nthreads - started : batch;

		for (unsigned long j = 0; j < n; j++)
			pl[j].index = started + j;
		bench_threads_run(argv[0], pl, n, sizeof(*pl), short_life,
				  "malloc failed in a thread");
		started += n;
	}
	for (unsigned long j = 0; j < batch; j++) {
		for (unsigned i = 0; i < LEFT; i++)
			free(pl[j].left[i]);
		sum += pl[j].thr.sum;
	}
	free(pl);
	printf("tchurn: %lu threads, %lu at a time, checksum %lu\n", nthreads, batch, sum);
	return 0;
}
