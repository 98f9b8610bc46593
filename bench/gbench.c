/*
 * gbench: the two workloads of glibc's malloc benchmarks, in our own words.
 *
 * thread: THREADS threads, each replacing random blocks of a working set of
 *   2000 with blocks of a new random size from 4 bytes to 32 KiB, of
 *   density proportional to 1/size (as bench-malloc-thread draws them): the fast path over nearly every size class, and the medium sizes
 *   that the small-object workloads never reach.
 * simple: one thread allocating a run of blocks of one size and then
 *   freeing them in the same order, for every size from 16 bytes to 4 KiB
 *   and runs of 25 to 1600 blocks (as bench-malloc-simple does): the
 *   fastest pattern there is, where any cost added per call shows most.
 *
 * Usage: gbench thread [ITERATIONS_PER_THREAD] [THREADS]  (default 8000000, 4)
 *        gbench simple [ROUNDS]                           (default 3000)
 */
#include <pthread.h>
#include <string.h>

#include "bench_common.h"

#define WORKING_SET 2000
#define MIN_SIZE 4
#define SIZE_DOUBLINGS 13 /* 4..8 bytes up to 16..32 KiB */

struct worker {
	struct bench_thread thr; /* first, for bench_threads_run() */
	unsigned long iterations;
	uint64_t rng;
};

/* 4..32767 bytes: each doubling equally likely, the size within it
 * uniform, which approximates a density of 1/size. */
static size_t skewed_size(uint64_t r)
{
	size_t lo = (size_t)MIN_SIZE << ((r & 0xffff) % SIZE_DOUBLINGS);

	return lo + (r >> 32) % lo;
}

static void *thread_run(void *arg)
{
	struct worker *w = arg;
	unsigned char **set = calloc(WORKING_SET, sizeof(*set));

	if (!set) {
		w->thr.failed = 1;
		return NULL;
	}
	for (unsigned long i = 0; i < w->iterations; i++) {
		uint64_t r = bench_rand(&w->rng);
		unsigned k = (r >> 16) % WORKING_SET;
		size_t size = skewed_size(bench_rand(&w->rng));

		if (bench_replace(&set[k], size, (unsigned char)i, &w->thr.sum) < 0) {
			w->thr.failed = 1;
			break;
		}
	}
	for (unsigned k = 0; k < WORKING_SET; k++)
		free(set[k]);
	free(set);
	return NULL;
}

static void gbench_thread(int argc, char **argv)
{
	unsigned long iterations = bench_arg(argc, argv, 2, 8000000, "ITERATIONS_PER_THREAD");
	unsigned long nthreads = bench_arg(argc, argv, 3, 4, "THREADS");
	struct worker *w = bench_calloc(argv[0], nthreads, sizeof(*w), "the threads");
	unsigned long sum;

	for (unsigned long t = 0; t < nthreads; t++) {
		w[t].iterations = iterations;
		w[t].rng = 0xa0761d6478bd642full * (t + 1);
	}
	sum = bench_threads_run(argv[0], w, nthreads, sizeof(*w), thread_run,
				"malloc failed in a thread");
	free(w);
	printf("gbench thread: %lu threads x %lu iterations, checksum %lu\n",
	       nthreads, iterations, sum);
}

static void gbench_simple(int argc, char **argv)
{
	static const unsigned runs[] = { 25, 100, 400, 1600 };
	enum { MAX_RUN = 1600 };
	unsigned long rounds = bench_arg(argc, argv, 2, 3000, "ROUNDS");
	unsigned char *block[MAX_RUN];
	unsigned long sum = 0;

	for (unsigned long i = 0; i < rounds; i++) {
		for (size_t size = 16; size <= 4096; size *= 2) {
			for (unsigned r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
				for (unsigned j = 0; j < runs[r]; j++) {
					block[j] = malloc(size);
					if (!block[j])
						bench_die(argv[0], "malloc failed");
					block[j][0] = (unsigned char)j;
				}
				for (unsigned j = 0; j < runs[r]; j++) {
					sum += block[j][0];
					free(block[j]);
				}
			}
		}
	}
	printf("gbench simple: %lu rounds, checksum %lu\n", rounds, sum);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "thread") == 0) {
		gbench_thread(argc, argv);
	} else if (argc > 1 && strcmp(argv[1], "simple") == 0) {
		gbench_simple(argc, argv);
	} else {
		fprintf(stderr, "usage: %s thread [ITERATIONS_PER_THREAD] [THREADS]\n"
			"       %s simple [ROUNDS]\n", argv[0], argv[0]);
		return BENCH_USAGE;
	}
	return 0;
}
