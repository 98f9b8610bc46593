/*
 * A library whose constructor allocates before libcgmalloc.so's runs.
 *
 * glibc initialises the preloaded objects in reverse order, so with
 * LD_PRELOAD=libcgmalloc.so:libearly.so this constructor runs first: every
 * call below reaches the shim before its configuration is read.  The blocks
 * stay allocated and are described in a report that the test program checks
 * (and frees) once main() runs.  Nothing is printed here: stdio may not be
 * ready and the report carries the findings.
 */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libearly.h"

static struct early_report report;

/*
 * Called through a volatile pointer where the result is not kept: clang
 * elides a malloc whose block is only freed, and (clang 14) assumes that
 * malloc leaves errno alone, folding `errno = 0; malloc(huge); errno` to 0.
 */
static void *(*volatile opaque_malloc)(size_t) = malloc;

const struct early_report *cgm_test_early_report(void)
{
	return &report;
}

static void error(const char *what)
{
	if (report.errors++ == 0)
		snprintf(report.first_error, sizeof(report.first_error), "%s", what);
}

static void keep(const char *how, void *p, size_t size, size_t align,
		 unsigned char fill)
{
	struct early_block *b;

	if (!p) {
		error(how);
		return;
	}
	if (report.nblocks == EARLY_MAX_BLOCKS) {
		error("too many blocks for the report");
		return;
	}
	b = &report.blocks[report.nblocks++];
	b->how = how;
	b->ptr = p;
	b->size = size;
	b->align = align;
	b->fill = fill;
	memset(p, fill, size);
}

static size_t count_not(const unsigned char *p, size_t n, unsigned char v)
{
	size_t bad = 0;

	for (size_t i = 0; i < n; i++)
		bad += p[i] != v;
	return bad;
}

/* A realloc chain through growth and shrinkage, content checked each step. */
static void *realloc_chain(void)
{
	static const size_t sizes[] = { 10, 1000, 200000, 3000000, 50, 70000 };
	unsigned char *p = malloc(sizes[0]);
	size_t have = sizes[0];

	if (!p)
		return NULL;
	memset(p, 0x5a, have);
	for (size_t i = 1; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t keep_n = have < sizes[i] ? have : sizes[i];
		unsigned char *q = realloc(p, sizes[i]);

		if (!q) {
			error("realloc returned NULL");
			free(p);
			return NULL;
		}
		if (count_not(q, keep_n, 0x5a))
			error("realloc lost content");
		memset(q, 0x5a, sizes[i]);
		p = q;
		have = sizes[i];
	}
	return p;
}

static void *thread_body(void *arg)
{
	void *blocks[64];

	(void)arg;
	for (int i = 0; i < 64; i++) {
		blocks[i] = malloc((size_t)(i + 1) * 40);
		if (!blocks[i])
			return NULL;
		memset(blocks[i], i, (size_t)(i + 1) * 40);
	}
	for (int i = 0; i < 64; i++)
		free(blocks[i]);
	return (void *)1;
}

__attribute__((constructor)) static void early_ctor(void)
{
	int (*initialized)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "cgm_initialized");
	unsigned char *z;
	pthread_t t;
	void *p = NULL, *ret = NULL;

	report.initialized = initialized ? initialized() : -1;

	keep("malloc(24)", malloc(24), 24, 0, 0xa1);
	keep("malloc(1)", malloc(1), 1, 0, 0xa2);
	keep("malloc(0)", malloc(0), 0, 0, 0);
	keep("malloc(5 MiB)", malloc(5 << 20), 5 << 20, 0, 0xa3);

	z = calloc(1000, 10);
	if (z && count_not(z, 10000, 0))
		error("calloc memory not zero");
	keep("calloc(1000, 10)", z, 10000, 0, 0xa4);

	keep("realloc chain", realloc_chain(), 70000, 0, 0x5a);
	keep("realloc(NULL, 300)", realloc(NULL, 300), 300, 0, 0xa5);

	if (posix_memalign(&p, 4096, 5000) != 0)
		p = NULL;
	keep("posix_memalign(4096, 5000)", p, 5000, 4096, 0xa6);
	keep("aligned_alloc(64, 640)", aligned_alloc(64, 640), 640, 64, 0xa7);
	keep("memalign(256, 100)", memalign(256, 100), 100, 256, 0xa8);
	keep("valloc(100)", valloc(100), 100, 4096, 0xa9);
	keep("strdup", strdup("allocated before cgmalloc's constructor"), 10, 0, 0xaa);

	/* Blocks freed at once: the freeing side must work early too. */
	for (int i = 0; i < 1000; i++)
		free(opaque_malloc((size_t)i * 13 + 1));
	free(NULL);
	p = malloc(100);
	if (realloc(p, 0) != NULL)
		error("realloc(p, 0) did not return NULL");

	errno = 0;
	p = opaque_malloc(SIZE_MAX / 2);
	report.huge_malloc_errno = p ? -1 : errno;
	free(p);

	/* A thread started (and finished) before the shim's constructor. */
	if (pthread_create(&t, NULL, thread_body, NULL) == 0 &&
	    pthread_join(t, &ret) == 0)
		report.thread_ok = ret == (void *)1;
}
