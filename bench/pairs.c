/*
 * The fixed malloc/free workload whose instructions callgrind counts:
 * N pairs of malloc(SIZE) + free, nothing else in the loop.
 *
 *   pairs [N [SIZE [KEEP]]]   (default 1000000 pairs of 32 bytes, KEEP 0)
 *
 * KEEP blocks of SIZE stay allocated through the loop, so that the pair's
 * block shares its page with live blocks, as in a program that holds
 * memory: with KEEP 0 every free empties the page, and mimalloc retires it.
 *
 * The calls go through volatile function pointers so that no compiler
 * folds the pair away (clang drops free(malloc(n))).  callgrind is run with
 * --toggle-collect=run_pairs, so only the loop and what it calls count,
 * after 100,000 warm-up pairs.
 */
#include <stdio.h>
#include <stdlib.h>

static void *(*volatile do_malloc)(size_t) = malloc;
static void (*volatile do_free)(void *) = free;

static __attribute__((noinline)) void run_pairs(unsigned long n, size_t size)
{
	for (unsigned long i = 0; i < n; i++)
		do_free(do_malloc(size));
}

int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000;
	size_t size = argc > 2 ? strtoul(argv[2], NULL, 10) : 32;
	unsigned long keep = argc > 3 ? strtoul(argv[3], NULL, 10) : 0;

	for (unsigned long i = 0; i < keep; i++)
		if (!do_malloc(size))
			return 1;

	/*
	 * Warm up outside the measured loop: first-use set-up (a thread's
	 * slot, the growing size-class refills) is not the steady state.
	 */
	for (unsigned long i = 0; i < 100000; i++)
		do_free(do_malloc(size));
	run_pairs(n, size);
	return 0;
}
