/*
 * churn: single-thread small-object churn.
 *
 * A working set of live objects (16..512 bytes) where each step frees one
 * random object and allocates a replacement of a new random size: the
 * malloc/free fast path that accounting adds its charge and uncharge to,
 * with a working set large enough to spread over many size classes.
 *
 * Usage: churn [STEPS] [LIVE]   (default 16000000 steps, 4096 live objects)
 */
#include <string.h>

#include "bench_common.h"

int main(int argc, char **argv)
{
	unsigned long steps = bench_arg(argc, argv, 1, 16000000, "STEPS");
	unsigned long live = bench_arg(argc, argv, 2, 4096, "LIVE");
	unsigned char **slot = calloc(live, sizeof(*slot));
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	unsigned long sum = 0;

	if (!slot)
		bench_die(argv[0], "out of memory for the slot array");
	for (unsigned long i = 0; i < steps; i++) {
		uint64_t r = bench_rand(&rng);
		unsigned long k = r % live;
		size_t size = 16 + (r >> 32) % 497;

		if (slot[k])
			sum += slot[k][0];
		free(slot[k]);
		slot[k] = malloc(size);
		if (!slot[k])
			bench_die(argv[0], "malloc failed");
		/* Touch both ends, as a real object's header and tail would be. */
		slot[k][0] = (unsigned char)i;
		slot[k][size - 1] = (unsigned char)size;
	}
	for (unsigned long k = 0; k < live; k++)
		free(slot[k]);
	free(slot);
	/* Printed so that the loop cannot be optimised away. */
	printf("churn: %lu steps, checksum %lu\n", steps, sum);
	return 0;
}
