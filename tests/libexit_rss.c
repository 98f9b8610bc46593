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
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "smaps_rss.h"

static void measure_at_exit(void)
{
	long kib = smaps_rss_kib(smaps_library_code, NULL);

	fprintf(stderr, "libexit_rss: %ld KiB of the library's code resident after its exit path (limit %d)\n",
		kib, SMAPS_LIBRARY_CODE_LIMIT_KIB);
	if (kib < 0 || kib > SMAPS_LIBRARY_CODE_LIMIT_KIB)
		_exit(3);
}

__attribute__((constructor)) static void register_measure(void)
{
	atexit(measure_at_exit);
}
