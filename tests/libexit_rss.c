/*
 * The library's code resident once its own exit path has run.
 *
 * tests/test_text_rss.c measures in main(), before exit: code that only
 * the exit path runs escapes it (the spiller's publish at detach mapped a
 * second 64 KiB window of the library's code in every process until it
 * was made conditional).  Preloaded after libcgmalloc.so
 * (LD_PRELOAD=libcgmalloc.so:libexit_rss.so), this library's constructor
 * runs first, so the atexit handler it registers runs after the one the
 * library registers at start-up: it reads the library's executable
 * mappings from /proc/self/smaps and, over test_text_rss's bound
 * (SMAPS_LIBRARY_CODE_LIMIT_KIB), says so and makes the exit status 3.
 *
 * Before it reads, it allocates as a program's later exit handlers and
 * destructors do: more small blocks than a thread's stock holds, so that
 * a stock refill (an allocation slow path) runs after the library has
 * detached.  With limits, that refill found the scope's removal (the
 * epoch moved) and rewrote the limits key's sites, whose patching code
 * lies among the cold code: python3 had 128 KiB resident instead of 64
 * whenever its stock happened to run dry there -- CI's run of
 * check-text-rss, and a SyntaxError here.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "smaps_rss.h"

/* 1 MiB in 256-byte blocks: past any stock (accounting/charge.c refills by batches). */
#define LATE_BLOCKS 4096
#define LATE_BLOCK_SIZE 256

static void allocate_late(void)
{
	static void *blocks[LATE_BLOCKS];

	for (int i = 0; i < LATE_BLOCKS; i++) {
		blocks[i] = malloc(LATE_BLOCK_SIZE);
		/* Written, so that the compiler cannot pair the malloc with its free away. */
		if (blocks[i])
			memset(blocks[i], i, LATE_BLOCK_SIZE);
	}
	for (int i = 0; i < LATE_BLOCKS; i++)
		free(blocks[i]);
}

static void measure_at_exit(void)
{
	long kib;

	allocate_late();
	kib = smaps_rss_kib(smaps_library_code, NULL);

	fprintf(stderr, "libexit_rss: %ld KiB of the library's code resident after its exit path (limit %d)\n",
		kib, SMAPS_LIBRARY_CODE_LIMIT_KIB);
	if (kib < 0 || kib > SMAPS_LIBRARY_CODE_LIMIT_KIB)
		_exit(3);
}

__attribute__((constructor)) static void register_measure(void)
{
	atexit(measure_at_exit);
}
