/*
 * mstress: threads that come and go, objects that outlive them and change
 * hands, and the occasional large block.
 *
 * After mimalloc-bench's mstress.  Each round starts THREADS threads; each
 * replaces random objects of its working set with new ones of a mixed size
 * (mostly 16 to 256 bytes, some up to 8 KiB, one in 4000 of 256 KiB to
 * 4 MiB with every page written), and now and then swaps an object with a
 * shared exchange table, so that objects move to other threads.  At the end
 * of its round a thread leaves a random part of its working set to the
 * thread in its place in the next round, which frees half of it and keeps
 * the rest: objects live for several rounds and are freed by threads that
 * did not allocate them, long after those have exited.
 *
 * Usage: mstress [ROUNDS] [THREADS]   (default 60, 4)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "bench_common.h"

#define WORKING_SET 2000
#define STEPS 60000     /* replacements per thread and round */
#define EXCHANGES 512   /* slots of the shared exchange table */
#define LEAVE 500       /* objects a thread leaves to the next round */
#define LARGE_ONE_IN 4000
#define PAGE 4096

/* An object carries its size at both ends, so that whichever thread frees
 * it can check that it is whole. */
struct object {
	size_t size;
};

/* ->thr.sum adds up over the rounds: bench_threads_run()'s sum is not used. */
struct place {
	struct bench_thread thr; /* first, for bench_threads_run() */
	unsigned long index; /* of the thread running in this place */
	struct object *left[LEAVE];
};

static _Atomic(struct object *) exchange[EXCHANGES];

static size_t mixed_size(uint64_t r)
{
	unsigned pick = r % LARGE_ONE_IN;
	size_t x = r >> 32;

	if (pick == 0)
		return (256 << 10) + x % ((4 << 20) - (256 << 10));
	if (pick < LARGE_ONE_IN / 5)
		return 257 + x % (8192 - 256);
	return 16 + x % 241;
}

static struct object *object_new(size_t size)
{
	struct object *o = malloc(size);
	unsigned char *p = (unsigned char *)o;

	if (!o)
		return NULL;
	o->size = size;
	/* A large block is written through, as a real buffer would be. */
	for (size_t i = PAGE; i < size; i += PAGE)
		p[i] = 1;
	p[size - 1] = (unsigned char)size;
	return o;
}

/* Frees @o after checking it; returns 0, or -1 if it was overwritten. */
static int object_free(struct place *pl, struct object *o)
{
	if (!o)
		return 0;
	if (((unsigned char *)o)[o->size - 1] != (unsigned char)o->size)
		return -1;
	pl->thr.sum += o->size;
	free(o);
	return 0;
}

static void *round_run(void *arg)
{
	struct place *pl = arg;
	struct object **set = calloc(WORKING_SET, sizeof(*set));
	uint64_t rng = 0xe7037ed1a0b428dbull * (pl->index + 1);
	int bad = 0;

	if (!set) {
		pl->thr.failed = 1;
		return NULL;
	}
	/* Of what the previous thread in this place left, free half, keep half. */
	for (unsigned i = 0; i < LEAVE; i++) {
		if (bench_rand(&rng) & 1)
			bad |= object_free(pl, pl->left[i]);
		else
			set[i] = pl->left[i];
		pl->left[i] = NULL;
	}
	for (unsigned long i = 0; i < STEPS && !bad; i++) {
		uint64_t r = bench_rand(&rng);
		unsigned k = r % WORKING_SET;

		if ((r >> 20) % 64 == 0) {
			set[k] = atomic_exchange(&exchange[(r >> 32) % EXCHANGES], set[k]);
			continue;
		}
		bad |= object_free(pl, set[k]);
		set[k] = object_new(mixed_size(bench_rand(&rng)));
		if (!set[k])
			bad = 1;
	}
	for (unsigned k = 0; k < WORKING_SET; k++) {
		if (k < LEAVE)
			pl->left[k] = set[k];
		else
			bad |= object_free(pl, set[k]);
	}
	free(set);
	pl->thr.failed = bad != 0;
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long rounds = bench_arg(argc, argv, 1, 60, "ROUNDS");
	unsigned long nthreads = bench_arg(argc, argv, 2, 4, "THREADS");
	struct place *pl = bench_calloc(argv[0], nthreads, sizeof(*pl), "the places");
	unsigned long sum = 0;
	int bad = 0;

	for (unsigned long round = 0; round < rounds; round++) {
		for (unsigned long t = 0; t < nthreads; t++)
			pl[t].index = round * nthreads + t;
		bench_threads_run(argv[0], pl, nthreads, sizeof(*pl), round_run,
				  "malloc failed or an object was overwritten");
	}
	for (unsigned i = 0; i < EXCHANGES; i++)
		bad |= object_free(&pl[0], exchange[i]);
	for (unsigned long t = 0; t < nthreads; t++) {
		for (unsigned i = 0; i < LEAVE; i++)
			bad |= object_free(&pl[t], pl[t].left[i]);
		sum += pl[t].thr.sum;
	}
	if (bad)
		bench_die(argv[0], "an object was overwritten");
	free(pl);
	printf("mstress: %lu rounds x %lu threads, checksum %lu\n", rounds, nthreads, sum);
	return 0;
}
