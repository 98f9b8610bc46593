/*
 * Helpers shared by the benchmark workloads: argument parsing, a small
 * deterministic random generator, and the one-line failure report.
 *
 * The workloads are run under every allocator configuration by
 * scripts/cgm-overhead, so each must do exactly the same work every run:
 * the generator is seeded with a constant, never with the time.
 */
#ifndef CGM_BENCH_COMMON_H
#define CGM_BENCH_COMMON_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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

#endif
