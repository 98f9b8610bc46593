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
	pthread_t tid;
	unsigned long steps;
	uint64_t seed;
	unsigned long sum;
	int failed;
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

		if (slot[k])
			w->sum += slot[k][0];
		free(slot[k]);
		slot[k] = malloc(size);
		if (!slot[k]) {
			w->failed = 1;
			break;
		}
		slot[k][0] = (unsigned char)i;
	}
	for (unsigned k = 0; k < LIVE; k++)
		free(slot[k]);
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long steps = bench_arg(argc, argv, 1, 8000000, "STEPS_PER_THREAD");
	unsigned long nthreads = bench_arg(argc, argv, 2, 4, "THREADS");
	struct worker *w = calloc(nthreads, sizeof(*w));
	unsigned long sum = 0;

	if (!w)
		bench_die(argv[0], "out of memory for the thread table");
	for (unsigned long t = 0; t < nthreads; t++) {
		w[t].steps = steps;
		w[t].seed = 0x2545f4914f6cdd1dull * (t + 1);
		if (pthread_create(&w[t].tid, NULL, worker_run, &w[t]))
			bench_die(argv[0], "pthread_create failed");
	}
	for (unsigned long t = 0; t < nthreads; t++) {
		pthread_join(w[t].tid, NULL);
		if (w[t].failed)
			bench_die(argv[0], "malloc failed in a worker");
		sum += w[t].sum;
	}
	free(w);
	printf("threads: %lu x %lu steps, checksum %lu\n", nthreads, steps, sum);
	return 0;
}
