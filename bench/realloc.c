/*
 * realloc: growth chains.
 *
 * Buffers that grow by small steps from a few bytes to tens of kilobytes,
 * the way a string builder or a vector without reserve() grows: every step
 * is a realloc that may move the block to a larger size class, so each
 * step uncharges the old size and charges the new one.  A ring of chains
 * stays alive so that reallocs cannot always extend in place.
 *
 * Usage: realloc [CHAINS] [MAX_BYTES]   (default 12000 chains, 65536 bytes)
 */
#include <string.h>

#include "bench_common.h"

#define ALIVE 64

int main(int argc, char **argv)
{
	unsigned long chains = bench_arg(argc, argv, 1, 12000, "CHAINS");
	unsigned long max = bench_arg(argc, argv, 2, 65536, "MAX_BYTES");
	void *alive[ALIVE] = { 0 };
	uint64_t rng = 0x853c49e6748fea9bull;
	unsigned long sum = 0;

	for (unsigned long c = 0; c < chains; c++) {
		unsigned char *buf = NULL;
		size_t size = 0;

		while (size < max) {
			size_t grown = size + 8 + bench_rand(&rng) % 249;
			unsigned char *nb = realloc(buf, grown);

			if (!nb)
				bench_die(argv[0], "realloc failed");
			/* realloc must have kept the old contents. */
			if (size && nb[size - 1] != (unsigned char)(size - 1))
				bench_die(argv[0], "realloc lost the contents");
			nb[grown - 1] = (unsigned char)(grown - 1);
			buf = nb;
			size = grown;
		}
		sum += buf[0];
		bench_keep(alive, ALIVE, c, buf);
	}
	bench_keep_drain(alive, ALIVE);
	printf("realloc: %lu chains to %lu bytes, checksum %lu\n", chains, max, sum);
	return 0;
}
