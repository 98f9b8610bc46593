/*
 * Helpers shared by the benchmark workloads: argument parsing, a small
 * deterministic random generator, the one-line failure report, and the
 * start and join of a table of worker threads.
 *
 * The workloads are run under every allocator configuration by
 * scripts/cgm-overhead, so each must do exactly the same work every run:
 * the generator is seeded with a constant, never with the time.
 */
#ifndef CGM_BENCH_COMMON_H
#define CGM_BENCH_COMMON_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exit status of a workload that detected a wrong result or a failed
 * allocation, so that the harness reports the run instead of timing it. */
#define BENCH_FAILED 1
#define BENCH_USAGE 2

static inline void bench_die(const char *prog, const char *what)
{
	fprintf(stderr, "%s: %s\n", prog, what);
	exit(BENCH_FAILED);
}

/*
 * A cache line.  The per-thread structs of a table start on lines of their
 * own and fill whole lines (struct bench_thread is aligned to one): a
 * thread adds to its checksum at every step, and with 40-byte structs two
 * threads' checksums shared a line, which then went from CPU to CPU at
 * every step of both (bench/threads: 18 ns a step with two threads against
 * 9 with one, under mimalloc alone).
 */
#define BENCH_LINE 64
#ifdef __cplusplus
#define BENCH_ALIGNED alignas(BENCH_LINE)
#else
#define BENCH_ALIGNED _Alignas(BENCH_LINE)
#endif

/* bench_calloc - @n zeroed elements of @size bytes starting on a cache
 * line, or the end of the program with "out of memory for @what". */
static inline void *bench_calloc(const char *prog, size_t n, size_t size, const char *what)
{
	size_t bytes;
	void *p = NULL;

	if (!__builtin_mul_overflow(n, size, &bytes) && bytes <= SIZE_MAX - BENCH_LINE) {
		bytes = bytes ? (bytes + BENCH_LINE - 1) / BENCH_LINE * BENCH_LINE : BENCH_LINE;
		p = aligned_alloc(BENCH_LINE, bytes);
	}
	if (!p) {
		fprintf(stderr, "%s: out of memory for %s\n", prog, what);
		exit(BENCH_FAILED);
	}
	return memset(p, 0, bytes);
}

/*
 * bench_arg - the positive integer argv[i], or @def when absent.
 * A malformed or zero value is a usage error: one line and exit status 2.
 */
static inline unsigned long bench_arg(int argc, char **argv, int i,
				      unsigned long def, const char *name)
{
	char *end;
	unsigned long v;

	if (i >= argc)
		return def;
	errno = 0;
	v = strtoul(argv[i], &end, 10);
	if (errno || end == argv[i] || *end || v == 0 || argv[i][0] == '-') {
		fprintf(stderr, "%s: %s must be a positive integer, got '%s'\n",
			argv[0], name, argv[i]);
		exit(BENCH_USAGE);
	}
	return v;
}

/* xorshift64: cheap, deterministic, and good enough to pick sizes. */
static inline uint64_t bench_rand(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return x;
}

/*
 * A ring of blocks kept alive for a few steps, so that the allocator cannot
 * always hand back the block it was just given: bench_keep() stores @p in
 * slot @i % @n and frees the block it replaces; bench_keep_drain() frees all.
 */
static inline void bench_keep(void **ring, size_t n, unsigned long i, void *p)
{
	free(ring[i % n]);
	ring[i % n] = p;
}

static inline void bench_keep_drain(void **ring, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(ring[i]);
		ring[i] = NULL;
	}
}

/*
 * bench_replace - free the block in *@slot (if any), adding its first byte
 * to *@sum, and put there a new block of @size bytes whose first byte is
 * @tag.  Returns 0, or -1 when malloc failed (*@slot is then NULL).
 */
static inline int bench_replace(unsigned char **slot, size_t size, unsigned char tag,
				unsigned long *sum)
{
	if (*slot)
		*sum += (*slot)[0];
	free(*slot);
	*slot = (unsigned char *)malloc(size);
	if (!*slot)
		return -1;
	(*slot)[0] = tag;
	return 0;
}

/*
 * What every worker thread of a workload shares: the first member of the
 * workload's per-thread struct, so that bench_threads_run() can walk a
 * table of those structs knowing only the size of one.
 */
struct bench_thread {
	BENCH_ALIGNED pthread_t tid;
	unsigned long sum; /* checksum of what the thread freed or read */
	int failed;        /* set by the thread on a failed allocation or check */
};

static inline struct bench_thread *bench_thread_at(void *table, size_t size, size_t i)
{
	return (struct bench_thread *)((char *)table + i * size);
}

/*
 * bench_threads_run - run @fn on each of the @n elements of @table, each
 * in a thread of its own, and wait for them all.  The elements are @size
 * bytes each, each starts with a struct bench_thread, and @fn gets the
 * element's address.  Threads are started and joined in table order; the
 * program ends (as bench_die(), naming @prog) when a thread cannot be
 * created, or with the message @failed when a thread has set its ->failed.
 * Returns the sum of the threads' ->sum.
 */
static inline unsigned long bench_threads_run(const char *prog, void *table, size_t n,
					      size_t size, void *(*fn)(void *),
					      const char *failed)
{
	unsigned long sum = 0;

	for (size_t i = 0; i < n; i++) {
		struct bench_thread *t = bench_thread_at(table, size, i);

		if (pthread_create(&t->tid, NULL, fn, t))
			bench_die(prog, "pthread_create failed");
	}
	for (size_t i = 0; i < n; i++) {
		struct bench_thread *t = bench_thread_at(table, size, i);

		pthread_join(t->tid, NULL);
		if (t->failed)
			bench_die(prog, failed);
		sum += t->sum;
	}
	return sum;
}

#endif
