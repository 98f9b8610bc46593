/*
 * A library that the tests load with dlopen() and that allocates: blocks
 * made here are freed by the program and the other way round, a table is
 * allocated by its constructor and freed by its destructor (dlclose), and a
 * __thread buffer lives in dynamic TLS, which glibc allocates with malloc
 * on a thread's first access and frees when the thread exits.
 *
 * Used by tests/test_runtime.c and tests/preload/dlopen_main.c.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libdlalloc.h"

#define TABLE_N 256

static char **table;		/* made by the constructor */
static int table_ok;
static __thread unsigned char tls_buf[16384];

__attribute__((constructor)) static void dl_ctor(void)
{
	table = calloc(TABLE_N, sizeof(*table));
	if (!table)
		return;
	for (int i = 0; i < TABLE_N; i++) {
		/* asprintf: stdio allocating inside a constructor of a dlopened object */
		if (asprintf(&table[i], "entry %d of the constructor's table", i) < 0)
			return;
	}
	table_ok = 1;
}

__attribute__((destructor)) static void dl_dtor(void)
{
	if (!table)
		return;
	for (int i = 0; i < TABLE_N; i++)
		free(table[i]);
	free(table);
	table = NULL;
}

/* 1 when the constructor's table is complete and intact. */
int dl_table_ok(void)
{
	char expect[64];

	if (!table_ok || !table)
		return 0;
	for (int i = 0; i < TABLE_N; i++) {
		snprintf(expect, sizeof(expect), "entry %d of the constructor's table", i);
		if (strcmp(table[i], expect) != 0)
			return 0;
	}
	return 1;
}

/* malloc @n bytes filled with @fill; the caller frees it with free(). */
void *dl_alloc(size_t n, unsigned char fill)
{
	void *p = malloc(n);

	if (p)
		memset(p, fill, n);
	return p;
}

/* Bytes of @p[0..n) that are not @fill. */
size_t dl_count_bad(const void *p, size_t n, unsigned char fill)
{
	const unsigned char *c = p;
	size_t bad = 0;

	for (size_t i = 0; i < n; i++)
		bad += c[i] != fill;
	return bad;
}

/* Free a block that the program allocated. */
void dl_free(void *p)
{
	free(p);
}

/* Grow @p with realloc from inside the library, filling the new tail. */
void *dl_grow(void *p, size_t old, size_t n, unsigned char fill)
{
	unsigned char *q = realloc(p, n);

	if (q && n > old)
		memset(q + old, fill, n - old);
	return q;
}

/*
 * Write and read back this thread's dynamic-TLS buffer.  Returns the number
 * of bytes that did not read back.
 */
size_t dl_tls_touch(unsigned char seed)
{
	size_t bad = 0;

	for (size_t i = 0; i < sizeof(tls_buf); i++)
		tls_buf[i] = (unsigned char)(seed + i);
	for (size_t i = 0; i < sizeof(tls_buf); i++)
		bad += tls_buf[i] != (unsigned char)(seed + i);
	return bad;
}
