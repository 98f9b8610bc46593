/*
 * A program that crashes with spilled pages (tests/spill/test_spill_lib.sh,
 * spill_core).
 *
 *   spill_core MB segv|abort|own|quit
 *
 * Fills MB MiB of cold blocks (cold_blocks.h), which a memory.max below
 * that makes the library spill, oldest first; says where block 0 is and
 * how many of its pages are resident (mincore: a spilled page is not);
 * raises RLIMIT_CORE as far as it may go; and crashes: a write to
 * address 8 (SIGSEGV) or abort().  The test reads block 0 back from the
 * core.  own: a SIGSEGV handler of the program's own, installed once
 * block 0 is spilled, takes the crash (it says "spill_core: own
 * handler" and exits 3).  quit: raise(SIGQUIT), which the test has
 * ignored (as a shell does for a background job), and say "spill_core:
 * survived SIGQUIT".
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cold_blocks.h"

static void own_handler(int sig)
{
	static const char line[] = "spill_core: own handler\n";

	(void)sig;
	if (write(1, line, sizeof(line) - 1) < 0)
		_exit(4);
	_exit(3);
}

int main(int argc, char **argv)
{
	unsigned char vec[COLD_BLOCK / 4096], **cold;
	struct rlimit lim;
	unsigned resident = 0;
	size_t n;

	if (argc != 3 || (strcmp(argv[2], "segv") && strcmp(argv[2], "abort") &&
			  strcmp(argv[2], "own") && strcmp(argv[2], "quit"))) {
		fprintf(stderr, "usage: %s MB segv|abort|own|quit\n", argv[0]);
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
	if (strcmp(argv[2], "quit") == 0) {
		raise(SIGQUIT);
		printf("spill_core: survived SIGQUIT\n");
		return 0;
	}
	if (strcmp(argv[2], "own") == 0)
		sigaction(SIGSEGV, &(struct sigaction){ .sa_handler = own_handler }, NULL);
	if (argv[2][0] == 's' || argv[2][0] == 'o')
		*(volatile int *)8 = 1;
	abort();
}
