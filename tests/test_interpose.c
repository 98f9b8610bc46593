/*
 * Unit tests of the interposed C allocation API (shim/interpose.c,
 * shim/glibc_extras.c): every exported function, every error path.
 *
 * The binary is linked against libcgmalloc.so, which therefore comes before
 * libc in the search order, exactly as under LD_PRELOAD.
 */
#include <check.h>
#include <errno.h>
#include <malloc.h>
#include <mimalloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgmalloc.h"
#include "check_run.h"

/* Keep the compiler from folding away calls with constant arguments. */
static volatile size_t vsize;
static size_t opaque(size_t n)
{
	vsize = n;
	return vsize;
}

static void *(*volatile malloc_fn)(size_t) = malloc;

static int aligned_to(const void *p, size_t a)
{
	return ((uintptr_t)p & (a - 1)) == 0;
}

/*
 * The alignment malloc(n) guarantees: 16 (max_align_t) for blocks above 8
 * bytes, 8 for the smallest (any object that fits is aligned; see
 * shim/interpose.c).
 */
static size_t malloc_align(size_t n)
{
	return n > 8 ? 16 : 8;
}

/* The pointer came from mimalloc, not from glibc. */
static void ck_from_mimalloc(const void *p)
{
	ck_assert_msg(mi_is_in_heap_region(p), "%p is not mimalloc memory", p);
}

/*
 * Content checks count mismatches in a plain loop and assert once: every
 * Check assertion records a mark point, which per byte is far too slow.
 */
static void fill_pattern(unsigned char *p, size_t n)
{
	for (size_t j = 0; j < n; j++)
		p[j] = (unsigned char)(j * 7);
}

static size_t pattern_mismatches(const unsigned char *p, size_t n)
{
	size_t bad = 0;

	for (size_t j = 0; j < n; j++)
		bad += p[j] != (unsigned char)(j * 7);
	return bad;
}

static const size_t sizes[] = {
	0, 1, 2, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 48, 63, 64, 65, 100,
	127, 128, 129, 255, 256, 257, 511, 512, 1000, 1024, 1025, 4095, 4096,
	4097, 8191, 8192, 65535, 65536, 65537, 262144, 1 << 20, (1 << 20) + 1,
	4 << 20, 32 << 20, 64 << 20,
};

START_TEST(test_library_is_active)
{
	ck_assert_int_eq(cgm_initialized(), 1);
	ck_assert_str_eq(cgm_version(), CGMALLOC_VERSION);
}
END_TEST

START_TEST(test_malloc_sizes)
{
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = opaque(sizes[i]);
		unsigned char *p = malloc_fn(n);

		ck_assert_ptr_nonnull(p);
		ck_from_mimalloc(p);
		ck_assert_msg(aligned_to(p, malloc_align(n)), "malloc(%zu) = %p misaligned", n, (void *)p);
		ck_assert_uint_ge(malloc_usable_size(p), n);
		memset(p, 0xa5, malloc_usable_size(p));
		free(p);
	}
}
END_TEST

START_TEST(test_malloc_zero_is_unique)
{
	void *a = malloc(opaque(0)), *b = malloc(opaque(0));

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	ck_assert_ptr_ne(a, b);
	free(a);
	free(b);
}
END_TEST

START_TEST(test_free_null)
{
	errno = 77;
	free(NULL);
	ck_assert_int_eq(errno, 77);
	ck_assert_uint_eq(malloc_usable_size(NULL), 0);
}
END_TEST

START_TEST(test_errno_kept_on_success)
{
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		void *p;

		errno = 1234;
		p = malloc(opaque(sizes[i]));
		ck_assert_int_eq(errno, 1234);
		free(p);
		ck_assert_int_eq(errno, 1234);
	}
}
END_TEST

START_TEST(test_malloc_enomem)
{
	size_t huge[] = { SIZE_MAX, SIZE_MAX - 4096, PTRDIFF_MAX, (size_t)1 << 62 };

	for (size_t i = 0; i < 4; i++) {
		errno = 0;
		ck_assert_ptr_null(malloc(opaque(huge[i])));
		ck_assert_int_eq(errno, ENOMEM);
	}
}
END_TEST

START_TEST(test_calloc)
{
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = opaque(sizes[i]);
		unsigned char *p = malloc(n + 1);
		size_t nonzero = 0;

		/* Dirty memory first, so a non-zeroing calloc shows. */
		memset(p, 0xff, n + 1);
		free(p);
		p = calloc(1, n);
		ck_assert_ptr_nonnull(p);
		ck_assert(aligned_to(p, malloc_align(n)));
		for (size_t j = 0; j < n; j++)
			nonzero += p[j] != 0;
		ck_assert_msg(nonzero == 0, "calloc(1, %zu): %zu bytes not zero", n, nonzero);
		free(p);
	}
	ck_assert_ptr_nonnull(calloc(0, opaque(0)));
}
END_TEST

START_TEST(test_calloc_overflow)
{
	errno = 0;
	ck_assert_ptr_null(calloc(opaque(SIZE_MAX / 2), 3));
	ck_assert_int_eq(errno, ENOMEM);
	errno = 0;
	ck_assert_ptr_null(calloc(opaque((size_t)1 << 32), (size_t)1 << 32));
	ck_assert_int_eq(errno, ENOMEM);
	errno = 0;
	ck_assert_ptr_null(calloc(1, opaque(SIZE_MAX)));
	ck_assert_int_eq(errno, ENOMEM);
}
END_TEST

START_TEST(test_realloc_keeps_content)
{
	unsigned char *p = NULL;
	size_t old = 0;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = opaque(sizes[i]) + 1;

		p = realloc(p, n);
		ck_assert_ptr_nonnull(p);
		ck_assert(aligned_to(p, malloc_align(n)));
		ck_assert_msg(pattern_mismatches(p, old < n ? old : n) == 0,
			      "realloc to %zu lost content", n);
		fill_pattern(p, n);
		old = n;
	}
	/* Shrinking keeps the prefix. */
	p = realloc(p, 100);
	ck_assert_uint_eq(pattern_mismatches(p, 100), 0);
	free(p);
}
END_TEST

START_TEST(test_realloc_zero_and_null)
{
	void *p = malloc(100);

	/* glibc: realloc(p, 0) frees p and returns NULL. */
	errno = 55;
	ck_assert_ptr_null(realloc(p, opaque(0)));
	ck_assert_int_eq(errno, 55);
	/* realloc(NULL, n) is malloc(n), n = 0 included. */
	p = realloc(NULL, opaque(0));
	ck_assert_ptr_nonnull(p);
	free(p);
	p = realloc(NULL, opaque(40));
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_ge(malloc_usable_size(p), 40);
	free(p);
}
END_TEST

START_TEST(test_realloc_enomem_keeps_block)
{
	char *p = malloc(64), *q;

	strcpy(p, "still here");
	errno = 0;
	q = realloc(p, opaque(SIZE_MAX - 16));
	ck_assert_ptr_null(q);
	ck_assert_int_eq(errno, ENOMEM);
	ck_assert_str_eq(p, "still here");
	free(p);
}
END_TEST

START_TEST(test_reallocarray)
{
	char *p = reallocarray(NULL, 10, opaque(10)), *q;

	ck_assert_ptr_nonnull(p);
	memset(p, 'x', 100);
	errno = 0;
	q = reallocarray(p, opaque(SIZE_MAX / 2), 3);
	ck_assert_ptr_null(q);
	ck_assert_int_eq(errno, ENOMEM);
	ck_assert_int_eq(p[99], 'x');
	p = reallocarray(p, 20, opaque(20));
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(p[99], 'x');
	ck_assert_ptr_null(reallocarray(p, 0, opaque(20)));	/* frees */
}
END_TEST

START_TEST(test_posix_memalign)
{
	for (size_t a = sizeof(void *); a <= (1 << 22); a <<= 1) {
		for (size_t i = 0; i < 12; i++) {
			void *p = NULL;
			size_t n = opaque(sizes[i * 3]);

			ck_assert_int_eq(posix_memalign(&p, a, n), 0);
			ck_assert_msg(aligned_to(p, a), "posix_memalign(%zu, %zu) = %p", a, n, p);
			ck_assert_uint_ge(malloc_usable_size(p), n);
			ck_from_mimalloc(p);
			free(p);
		}
	}
}
END_TEST

/*
 * Power-of-two sizes with a smaller power-of-two alignment, many times over:
 * the case where mimalloc 2.0.9's mi_malloc_aligned() shortcut misaligns.
 */
START_TEST(test_aligned_power_of_two_sizes)
{
	void *keep[256] = { 0 };
	unsigned seed = 1;

	size_t misaligned = 0;

	for (int i = 0; i < 100000; i++) {
		size_t n = (size_t)1 << (4 + rand_r(&seed) % 9);
		size_t a = (size_t)1 << (4 + rand_r(&seed) % 9);
		int k = rand_r(&seed) % 256;
		void *p = NULL;

		free(keep[k]);
		keep[k] = NULL;
		if (posix_memalign(&p, a, opaque(n)) != 0)
			ck_abort_msg("posix_memalign(%zu, %zu) failed", a, n);
		misaligned += !aligned_to(p, a);
		keep[k] = p;
	}
	ck_assert_uint_eq(misaligned, 0);
	for (int k = 0; k < 256; k++)
		free(keep[k]);
}
END_TEST

START_TEST(test_posix_memalign_errors)
{
	void *p = (void *)0x1234;
	size_t bad[] = { 0, 1, 2, 4, 3, 24, 48, 100, SIZE_MAX };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 99;
		ck_assert_int_eq(posix_memalign(&p, opaque(bad[i]), 16), EINVAL);
		ck_assert_ptr_eq(p, (void *)0x1234);	/* untouched */
		ck_assert_int_eq(errno, 99);
	}
	ck_assert_int_eq(posix_memalign(&p, 64, opaque(SIZE_MAX - 100)), ENOMEM);
	ck_assert_ptr_eq(p, (void *)0x1234);
}
END_TEST

START_TEST(test_aligned_alloc)
{
	for (size_t a = 1; a <= (1 << 22); a <<= 1) {
		void *p = aligned_alloc(a, opaque(a * 3));

		ck_assert_ptr_nonnull(p);
		ck_assert(aligned_to(p, a));
		ck_assert_uint_ge(malloc_usable_size(p), a * 3);
		free(p);
	}
	errno = 0;
	ck_assert_ptr_null(aligned_alloc(opaque(3), 30));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(aligned_alloc(opaque(0), 30));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(aligned_alloc(64, opaque(SIZE_MAX - 10)));
	ck_assert_int_eq(errno, ENOMEM);
}
END_TEST

START_TEST(test_memalign)
{
	/* glibc rounds an alignment that is not a power of two up to one. */
	struct { size_t asked, got; } cases[] = {
		{ 0, 16 }, { 1, 16 }, { 3, 16 }, { 24, 32 }, { 48, 64 },
		{ 100, 128 }, { 4096, 4096 }, { 5000, 8192 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		void *p = memalign(opaque(cases[i].asked), 77);

		ck_assert_ptr_nonnull(p);
		ck_assert_msg(aligned_to(p, cases[i].got), "memalign(%zu) = %p",
			      cases[i].asked, p);
		free(p);
	}
	errno = 0;
	ck_assert_ptr_null(memalign(opaque(SIZE_MAX / 2 + 2), 10));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(memalign(64, opaque(SIZE_MAX - 10)));
	ck_assert_int_eq(errno, ENOMEM);
}
END_TEST

START_TEST(test_valloc_pvalloc)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	void *p = valloc(opaque(10));

	ck_assert_ptr_nonnull(p);
	ck_assert(aligned_to(p, ps));
	free(p);
	p = pvalloc(opaque(10));
	ck_assert_ptr_nonnull(p);
	ck_assert(aligned_to(p, ps));
	ck_assert_uint_ge(malloc_usable_size(p), ps);
	free(p);
	p = pvalloc(opaque(ps + 1));
	ck_assert_uint_ge(malloc_usable_size(p), 2 * ps);
	free(p);
	p = pvalloc(opaque(0));
	ck_assert_ptr_nonnull(p);
	free(p);
	errno = 0;
	ck_assert_ptr_null(pvalloc(opaque(SIZE_MAX - 10)));
	ck_assert_int_eq(errno, ENOMEM);
	errno = 0;
	ck_assert_ptr_null(valloc(opaque(SIZE_MAX - 10)));
	ck_assert_int_eq(errno, ENOMEM);
}
END_TEST

START_TEST(test_glibc_extras)
{
	void *keep = malloc(1 << 20);
	struct mallinfo2 m2;
	struct mallinfo m;
	char buf[4096] = { 0 };
	FILE *f;

	memset(keep, 1, 1 << 20);
	m2 = mallinfo2();
	ck_assert_uint_ge(m2.arena, 1 << 20);
	ck_assert_uint_ge(m2.uordblks, 1 << 20);
	ck_assert_uint_ge(m2.arena, m2.uordblks);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	m = mallinfo();
#pragma GCC diagnostic pop
	ck_assert_int_ge(m.arena, 1 << 20);
	ck_assert_int_eq(mallopt(M_TRIM_THRESHOLD, 1 << 20), 1);
	ck_assert_int_eq(mallopt(M_ARENA_MAX, 2), 1);
	ck_assert_int_eq(malloc_trim(0), 1);

	f = tmpfile();
	ck_assert_int_eq(malloc_info(0, f), 0);
	rewind(f);
	ck_assert_uint_gt(fread(buf, 1, sizeof(buf) - 1, f), 0);
	ck_assert_ptr_nonnull(strstr(buf, "<malloc version=\"1\">"));
	errno = 0;
	ck_assert_int_eq(malloc_info(1, f), -1);
	ck_assert_int_eq(errno, EINVAL);
	fclose(f);
	free(keep);
}
END_TEST

START_TEST(test_malloc_stats_goes_to_stderr)
{
	char path[] = "/tmp/cgm-test-stats-XXXXXX", buf[4096] = { 0 };
	int fd = mkstemp(path), saved = dup(2);

	ck_assert_int_ge(fd, 0);
	dup2(fd, 2);
	malloc_stats();
	dup2(saved, 2);
	close(saved);
	ck_assert_int_gt(pread(fd, buf, sizeof(buf) - 1, 0), 0);
	ck_assert_ptr_nonnull(strstr(buf, "in use bytes"));
	close(fd);
	unlink(path);
}
END_TEST

START_TEST(test_libc_internal_names)
{
	extern void *__libc_malloc(size_t);
	extern void __libc_free(void *);
	extern void *__libc_memalign(size_t, size_t);
	void *p = __libc_malloc(100), *q = __libc_memalign(256, 10);

	ck_from_mimalloc(p);
	ck_from_mimalloc(q);
	ck_assert(aligned_to(q, 256));
	free(p);
	__libc_free(q);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("interpose");
	TCase *tc = tcase_create("api");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_library_is_active);
	tcase_add_test(tc, test_malloc_sizes);
	tcase_add_test(tc, test_malloc_zero_is_unique);
	tcase_add_test(tc, test_free_null);
	tcase_add_test(tc, test_errno_kept_on_success);
	tcase_add_test(tc, test_malloc_enomem);
	tcase_add_test(tc, test_calloc);
	tcase_add_test(tc, test_calloc_overflow);
	tcase_add_test(tc, test_realloc_keeps_content);
	tcase_add_test(tc, test_realloc_zero_and_null);
	tcase_add_test(tc, test_realloc_enomem_keeps_block);
	tcase_add_test(tc, test_reallocarray);
	tcase_add_test(tc, test_posix_memalign);
	tcase_add_test(tc, test_aligned_power_of_two_sizes);
	tcase_add_test(tc, test_posix_memalign_errors);
	tcase_add_test(tc, test_aligned_alloc);
	tcase_add_test(tc, test_memalign);
	tcase_add_test(tc, test_valloc_pvalloc);
	tcase_add_test(tc, test_glibc_extras);
	tcase_add_test(tc, test_malloc_stats_goes_to_stderr);
	tcase_add_test(tc, test_libc_internal_names);
	suite_add_tcase(s, tc);
	return check_run(s);
}
