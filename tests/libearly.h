/*
 * What tests/libearly.so saw in its constructor, which glibc runs before
 * libcgmalloc.so's when the library is preloaded after it.  The test
 * program (tests/test_runtime.c) reads it with dlsym() and checks that
 * every block from that time is still valid.
 */
#ifndef CGM_TEST_LIBEARLY_H
#define CGM_TEST_LIBEARLY_H

#include <stddef.h>

#define EARLY_MAX_BLOCKS 16

struct early_block {
	const char *how;	/* the call that made it */
	void *ptr;
	size_t size;		/* bytes written with fill */
	size_t align;		/* alignment asked for (0: malloc's own) */
	unsigned char fill;
};

struct early_report {
	int initialized;	/* cgm_initialized() then; -1: not found */
	int errors;		/* checks that failed inside the constructor */
	char first_error[160];
	int huge_malloc_errno;	/* errno after malloc of an impossible size */
	int thread_ok;		/* a thread started there allocated and freed */
	int nblocks;
	struct early_block blocks[EARLY_MAX_BLOCKS];
};

/* Exported by libearly.so; looked up by name. */
const struct early_report *cgm_test_early_report(void);

#endif /* CGM_TEST_LIBEARLY_H */
