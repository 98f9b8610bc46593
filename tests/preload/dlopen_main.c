/*
 * A C program for the preload test, not linked with cgmalloc, that loads
 * libraries with dlopen() which allocate: tests/libdlalloc.so (path in
 * argv[1]; blocks handed across the library boundary both ways, a
 * constructor's table, dynamic TLS) and the system's zlib (compression
 * state allocated by deflateInit through malloc).  Prints what it found;
 * exits 1 if anything did not check out.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *sym(void *h, const char *name)
{
	void *p = dlsym(h, name);

	if (!p) {
		printf("missing symbol %s: %s\n", name, dlerror());
		exit(1);
	}
	return p;
}

/* Blocks made in the library freed here and the other way round. */
static int use_dlalloc(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	int (*table_ok)(void);
	void *(*alloc)(size_t, unsigned char);
	size_t (*count_bad)(const void *, size_t, unsigned char);
	void (*lib_free)(void *);
	size_t (*tls_touch)(unsigned char);
	size_t bad = 0;

	if (!h) {
		printf("dlopen %s: %s\n", path, dlerror());
		return 1;
	}
	table_ok = (int (*)(void))sym(h, "dl_table_ok");
	alloc = (void *(*)(size_t, unsigned char))sym(h, "dl_alloc");
	count_bad = (size_t (*)(const void *, size_t, unsigned char))sym(h, "dl_count_bad");
	lib_free = (void (*)(void *))sym(h, "dl_free");
	tls_touch = (size_t (*)(unsigned char))sym(h, "dl_tls_touch");

	for (int i = 0; i < 1000; i++) {
		size_t n = (size_t)i * 97 + 1;
		unsigned char *p = alloc(n, (unsigned char)i);
		unsigned char *q = malloc(n);

		if (!p || !q)
			return 1;
		memset(q, (unsigned char)~i, n);
		bad += count_bad(p, n, (unsigned char)i);
		bad += count_bad(q, n, (unsigned char)~i);
		free(p);
		lib_free(q);
	}
	bad += tls_touch(3);
	printf("libdlalloc: constructor table %s, %zu bad bytes\n",
	       table_ok() ? "intact" : "BROKEN", bad);
	if (dlclose(h) != 0)
		return 1;
	return bad != 0 || !table_ok;
}

/* zlib's compress2/uncompress through dlsym, on a megabyte of text. */
static int use_zlib(void)
{
	typedef int (*compress2_fn)(unsigned char *, unsigned long *, const unsigned char *,
				    unsigned long, int);
	typedef int (*uncompress_fn)(unsigned char *, unsigned long *, const unsigned char *,
				     unsigned long);
	typedef unsigned long (*crc32_fn)(unsigned long, const unsigned char *, unsigned);
	void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
	size_t n = 1 << 20;
	unsigned char *src, *comp, *back;
	unsigned long clen = n + n / 100 + 1024, blen = n;
	compress2_fn zcompress;
	uncompress_fn zuncompress;
	crc32_fn zcrc;
	int rc1, rc2, same;

	if (!h) {
		printf("dlopen libz.so.1: %s\n", dlerror());
		return 1;
	}
	zcompress = (compress2_fn)sym(h, "compress2");
	zuncompress = (uncompress_fn)sym(h, "uncompress");
	zcrc = (crc32_fn)sym(h, "crc32");
	src = malloc(n);
	comp = malloc(clen);
	back = malloc(n);
	if (!src || !comp || !back)
		return 1;
	for (size_t i = 0; i < n; i++)
		src[i] = (unsigned char)"the quick brown fox jumps over the lazy dog "[(i * i) % 44];
	rc1 = zcompress(comp, &clen, src, n, 9);
	rc2 = zuncompress(back, &blen, comp, clen);
	same = blen == n && memcmp(src, back, n) == 0;
	printf("zlib: compress %d, %lu -> %lu bytes, uncompress %d, crc32 %08lx, roundtrip %s\n",
	       rc1, (unsigned long)n, clen, rc2, zcrc(0, src, (unsigned)n),
	       same ? "ok" : "BROKEN");
	free(src);
	free(comp);
	free(back);
	dlclose(h);
	return rc1 != 0 || rc2 != 0 || !same;
}

int main(int argc, char **argv)
{
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: dlopen_main LIBDLALLOC\n");
		return 2;
	}
	/* Twice each: a library loaded again after dlclose allocates afresh. */
	for (int round = 0; round < 2; round++) {
		bad |= use_dlalloc(argv[1]);
		bad |= use_zlib();
	}
	return bad;
}
