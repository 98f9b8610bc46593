/*
 * A program that crashes with spilled pages (tests/spill/test_spill_lib.sh,
 * spill_core).
 *
 *   spill_core MB segv|abort
 *
 * Fills MB MiB of cold blocks (cold_blocks.h), which a memory.max below
 * that makes the library spill, oldest first; says where block 0 is and
 * how many of its pages are resident (mincore: a spilled page is not);
 * raises RLIMIT_CORE as far as it may go; and crashes: a write to
 * address 8 (SIGSEGV) or abort().  The test reads block 0 back from the
 * core.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "cold_blocks.h"

int main(int argc, char **argv)
{
	unsigned char vec[COLD_BLOCK / 4096], **cold;
	struct rlimit lim;
	unsigned resident = 0;
	size_t n;

	if (argc != 3 || (strcmp(argv[2], "segv") && strcmp(argv[2], "abort"))) {
		fprintf(stderr, "usage: %s MB segv|abort\n", argv[0]);
		return 2;
	}
	cold = cold_fill("spill_core", strtoul(argv[1], NULL, 10), &n);
	if (!cold || n == 0)
		return 1;
	if (mincore((void *)((uintptr_t)cold[0] & ~(uintptr_t)4095), COLD_BLOCK, vec) == 0)
		for (size_t i = 0; i < sizeof(vec); i++)
			resident += vec[i] & 1;
	getrlimit(RLIMIT_CORE, &lim);
	lim.rlim_cur = lim.rlim_max;
	printf("spill_core: block 0 at %p, %u of %zu pages resident; core limit %s\n", (void *)cold[0],
	       resident, sizeof(vec), setrlimit(RLIMIT_CORE, &lim) == 0 && lim.rlim_cur > 1 ?
	       "raised" : "0");
	fflush(stdout);
	if (argv[2][0] == 's')
		*(volatile int *)8 = 1;
	abort();
}
