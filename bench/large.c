/*
 * large: allocations of 1 MiB and more.
 *
 * Blocks of 1..16 MiB, each touched once per page and freed a few steps
 * later: the path where the allocator goes to the kernel (mmap, munmap,
 * madvise) and where accounting charges many pages at once, which is where
 * a limit is checked and memory.high could throttle.
 *
 * Usage: large [ALLOCATIONS] [MAX_MIB]   (default 500, 16)
 */
#include <string.h>
#include <unistd.h>

#include "bench_common.h"

#define ALIVE 4
#define MIB (1024ul * 1024ul)

int main(int argc, char **argv)
{
	unsigned long count = bench_arg(argc, argv, 1, 500, "ALLOCATIONS");
	unsigned long max_mib = bench_arg(argc, argv, 2, 16, "MAX_MIB");
	void *alive[ALIVE] = { 0 };
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uint64_t rng = 0xda942042e4dd58b5ull;
	unsigned long sum = 0;

	for (unsigned long i = 0; i < count; i++) {
		/* 1 MiB up to MAX_MIB, not page-aligned: a real buffer's size. */
		size_t size = MIB + bench_rand(&rng) % ((max_mib - 1) * MIB + 1);
		unsigned char *p = malloc(size);

		if (!p)
			bench_die(argv[0], "malloc failed");
		for (size_t off = 0; off < size; off += page)
			p[off] = (unsigned char)(off / page);
		p[size - 1] = 1;
		sum += p[size / 2 / page * page];
		bench_keep(alive, ALIVE, i, p);
	}
	bench_keep_drain(alive, ALIVE);
	printf("large: %lu allocations up to %lu MiB, checksum %lu\n", count, max_mib, sum);
	return 0;
}
