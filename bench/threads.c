/*
 * threads: many threads, each churning its own objects.
 *
 * Every thread allocates and frees only its own objects, so an allocator
 * with thread-local heaps never shares a cache line between them; what
 * accounting adds (a per-thread stock, occasionally the shared counter)
 * shows up here as lost scaling.
 *
 * Usage: threads [STEPS_PER_THREAD] [THREADS]   (default 8000000, 4)
 */
#include <pthread.h>
#include <string.h>

#include "bench_common.h"

#define LIVE 2048

struct worker {
	struct bench_thread thr; /* first, for bench_threads_run() */
	unsigned long steps;
	uint64_t seed;
};

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	unsigned char *slot[LIVE] = { 0 };
	uint64_t rng = w->seed;

	for (unsigned long i = 0; i < w->steps; i++) {
		uint64_t r = bench_rand(&rng);
		unsigned k = r % LIVE;
		size_t size = 8 + (r >> 32) % 377;

		if (bench_replace(&slot[k], size, (unsigned char)i, &w->thr.sum) < 0) {
			w->thr.failed = 1;
			break;
		}
	}
	for (unsigned k = 0; k < LIVE; k++)
		free(slot[k]);
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long steps = bench_arg(argc, argv, 1, 8000000, "STEPS_PER_THREAD");
	unsigned long nthreads = bench_arg(argc, argv, 2, 4, "THREADS");
	struct worker *w = bench_calloc(argv[0], nthreads, sizeof(*w), "the thread table");
	unsigned long sum;

	for (unsigned long t = 0; t < nthreads; t++) {
		w[t].steps = steps;
		w[t].seed = 0x2545f4914f6cdd1dull * (t + 1);
	}
	sum = bench_threads_run(argv[0], w, nthreads, sizeof(*w), worker_run,
				"malloc failed in a worker");
	free(w);
	printf("threads: %lu x %lu steps, checksum %lu\n", nthreads, steps, sum);
	return 0;
}
