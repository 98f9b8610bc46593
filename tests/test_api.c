/*
 * The in-process API of the accounting (include/cgmalloc.h, shim/api.c).
 *
 * Run by `make check-api` with CGMALLOC_CONF=hierarchy=<tmp>,group=/api/test
 * where /api is delegated; then with group=/plain, not delegated, and
 * CGM_TEST_API_PLAIN=1 (the process may not touch its own limits); then
 * with accounting=0 and CGM_TEST_API_OFF=1 (every call must then say
 * -ENODEV).  Linked with the shim, so the process is accounted exactly as
 * under LD_PRELOAD.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <unistd.h>

#include "cgmalloc.h"
#include "check_run.h"

#define MiB (1L << 20)

/* Through a volatile pointer: the compiler may not elide a malloc/free pair. */
static void *(*volatile alloc)(size_t) = malloc;
static void (*volatile release)(void *) = free;

/* A number file (memory.current, memory.max, ...) of @group; -1 for "max". */
static long read_num(const char *group, const char *file)
{
	char buf[64];
	int n = cgm_read(group, file, buf, sizeof(buf));

	ck_assert_msg(n > 0, "cgm_read(%s, %s) = %d", group ? group : "NULL", file, n);
	return strcmp(buf, "max\n") == 0 ? -1 : strtol(buf, NULL, 10);
}

/* The value of "key value" line @key of @text, -1 if absent. */
static long key_of(const char *text, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\n%s ", key);
	if (strncmp(text, pat + 1, strlen(pat + 1)) == 0)
		return strtol(text + strlen(pat + 1), NULL, 10);
	p = strstr(text, pat);
	return p ? strtol(p + strlen(pat), NULL, 10) : -1;
}

/* The value of "key value" line @key of @file. */
static long read_key(const char *group, const char *file, const char *key)
{
	char buf[4096];
	int n = cgm_read(group, file, buf, sizeof(buf));

	ck_assert_msg(n > 0, "cgm_read(%s) = %d", file, n);
	ck_assert_msg(key_of(buf, key) >= 0, "%s has no %s", file, key);
	return key_of(buf, key);
}

START_TEST(test_own_group)
{
	char buf[64];

	ck_assert_int_eq(cgm_accounting_enabled(), 1);
	ck_assert_int_eq(cgm_group(buf, sizeof(buf)), (int)strlen("/api/test"));
	ck_assert_str_eq(buf, "/api/test");
	ck_assert_int_eq(cgm_group(buf, 5), -ERANGE);
	ck_assert_uint_lt(strlen(buf), 5);
	ck_assert_int_eq(cgm_group(NULL, 10), -EINVAL);
}
END_TEST

START_TEST(test_read_errors)
{
	char buf[16];
	static const char *const bad_paths[] = { "api", "/api/../x", "/api//test", "/a b", "" };
	int wrong = 0;

	ck_assert_int_eq(cgm_read(NULL, "memory.nope", buf, sizeof(buf)), -ENOENT);
	ck_assert_int_eq(cgm_read("/no/such", "memory.max", buf, sizeof(buf)), -ENOENT);
	for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++)
		wrong += cgm_read(bad_paths[i], "memory.max", buf, sizeof(buf)) != -EINVAL;
	ck_assert_int_eq(wrong, 0);
	ck_assert_int_eq(cgm_read(NULL, NULL, buf, sizeof(buf)), -EINVAL);
	ck_assert_int_eq(cgm_read(NULL, "memory.max", NULL, 10), -EINVAL);
	ck_assert_int_eq(cgm_read(NULL, "memory.max", buf, 0), -EINVAL);
	/* Too small: -ERANGE, and what is there is a terminated prefix. */
	ck_assert_int_eq(cgm_read(NULL, "memory.stat", buf, sizeof(buf)), -ERANGE);
	ck_assert_uint_eq(strlen(buf), sizeof(buf) - 1);
	ck_assert_int_eq(strncmp(buf, "anon ", 5), 0);
}
END_TEST

START_TEST(test_bad_writes_change_nothing)
{
	/* What the kernel's memparse refuses too (hex, octal and huge values it takes). */
	static const char *const bad[] = { "abc", "-1", "12Q", "", "1M 2M", "0x", "08", "1Gx" };
	int wrong = 0;

	ck_assert_int_eq(cgm_write(NULL, "memory.max", "64M"), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		wrong += cgm_write(NULL, "memory.max", bad[i]) != -EINVAL;
		wrong += cgm_write(NULL, "memory.high", bad[i]) != -EINVAL;
	}
	ck_assert_int_eq(wrong, 0);
	ck_assert_int_eq(read_num(NULL, "memory.max"), 64 * MiB);
	ck_assert_int_eq(read_num(NULL, "memory.high"), -1);
	ck_assert_int_eq(cgm_write(NULL, "memory.max", "max"), 0);
	ck_assert_int_eq(read_num(NULL, "memory.max"), -1);

	ck_assert_int_eq(cgm_write(NULL, "memory.current", "1"), -EACCES);
	ck_assert_int_eq(cgm_write(NULL, "memory.stat", "1"), -EACCES);
	ck_assert_int_eq(cgm_write(NULL, "memory.events", "1"), -EACCES);
	ck_assert_int_eq(cgm_write(NULL, "memory.nope", "1"), -ENOENT);
	ck_assert_int_eq(cgm_write("/no/such", "memory.max", "1M"), -ENOENT);
	ck_assert_int_eq(cgm_write("no/such", "memory.max", "1M"), -EINVAL);
	ck_assert_int_eq(cgm_write(NULL, "memory.oom.group", "2"), -EINVAL);
	ck_assert_int_eq(read_num(NULL, "memory.oom.group"), 0);
	ck_assert_int_eq(cgm_write(NULL, "cgroup.procs", "abc"), -EINVAL);
	ck_assert_int_eq(cgm_write(NULL, "cgroup.procs", "999999999"), -ESRCH);
	ck_assert_int_eq(cgm_write(NULL, NULL, "1"), -EINVAL);
	ck_assert_int_eq(cgm_write(NULL, "memory.max", NULL), -EINVAL);
}
END_TEST

START_TEST(test_usage_follows_the_heap)
{
	long cur0, cur1, cur2, cur3, allocs0, bytes0, live1;
	char *p;

	cur0 = read_num(NULL, "memory.current");
	allocs0 = read_key(NULL, "memory.stat.local", "allocs");
	bytes0 = read_key(NULL, "memory.stat.local", "alloc_bytes");
	p = alloc(16 * MiB);
	ck_assert_ptr_nonnull(p);
	memset(p, 1, 16 * MiB);
	cur1 = read_num(NULL, "memory.current");
	/* Less what was precharged already (a batch of 64 pages, per thread). */
	ck_assert_int_ge(cur1, cur0 + 16 * MiB - 512 * 1024);
	ck_assert_int_ge(read_key(NULL, "memory.stat.local", "allocs"), allocs0 + 1);
	ck_assert_int_ge(read_key(NULL, "memory.stat.local", "alloc_bytes"), bytes0 + 16 * MiB);
	/* Hierarchical: the root's anon includes ours; the peak saw it. */
	ck_assert_int_ge(read_key("/", "memory.stat", "anon"), 16 * MiB);
	ck_assert_int_ge(read_num("/api", "memory.peak"), cur1);
	live1 = read_key(NULL, "memory.stat.local", "heap_live");
	release(p);
	/* Freed: no longer live at once; still charged while the allocator keeps the pages. */
	ck_assert_int_le(read_key(NULL, "memory.stat.local", "heap_live"), live1 - 16 * MiB + 256 * 1024);
	cur2 = read_num(NULL, "memory.current");
	ck_assert_int_le(cur2, cur1);
	/* memory.reclaim gives back what the allocator keeps: then it is uncharged. */
	ck_assert_int_eq(cgm_write(NULL, "memory.reclaim", "0"), 0);
	cur3 = read_num(NULL, "memory.current");
	ck_assert_int_ge(cur1 - cur3, 16 * MiB - 256 * 1024);
}
END_TEST

/* "key value" line @key of memory.stat.local text @after less that of @before. */
static long stat_delta(const char *before, const char *after, const char *key)
{
	ck_assert_msg(key_of(before, key) >= 0 && key_of(after, key) >= 0, "no %s", key);
	return key_of(after, key) - key_of(before, key);
}

/*
 * Blocks of 1..16 KiB are charged and counted by their bin's block size,
 * known before the allocation (include/cgm/size_class.h): the counts and
 * bytes of memory.stat, its size histogram and heap_live must come out
 * exactly as mimalloc sized the blocks, allocated and freed.  (No Check
 * assertion between the readings: a passing one allocates.)
 */
START_TEST(test_medium_blocks_counted)
{
	/* The first and the last request of bins, and some between. */
	static const size_t req[] = { 1025, 1280, 1281, 1600, 2048, 2049, 3000, 4096,
				      4097, 6000, 7169, 8192, 8193, 12000, 14337, 16384 };
	enum { KINDS = sizeof(req) / sizeof(req[0]), N = 200 };
	static void *blk[KINDS][N];
	static char s0[4096], s1[4096], s2[4096];
	long bytes = 0, le2048 = 0, le8192 = 0, le16384 = 0;
	int bad = 0;

	bad += cgm_flush() != 0;
	bad += cgm_read(NULL, "memory.stat.local", s0, sizeof(s0)) <= 0;
	for (int k = 0; k < KINDS; k++) {
		for (int i = 0; i < N; i++) {
			size_t usable;

			blk[k][i] = alloc(req[k]);
			if (!blk[k][i]) {
				bad++;
				continue;
			}
			memset(blk[k][i], k, req[k]);
			usable = malloc_usable_size(blk[k][i]);
			bytes += (long)usable;
			le2048 += usable <= 2048;
			le8192 += usable > 4096 && usable <= 8192;
			le16384 += usable > 8192;
		}
	}
	bad += cgm_flush() != 0;
	bad += cgm_read(NULL, "memory.stat.local", s1, sizeof(s1)) <= 0;
	for (int k = 0; k < KINDS; k++)
		for (int i = 0; i < N; i++)
			release(blk[k][i]);
	bad += cgm_flush() != 0;
	bad += cgm_read(NULL, "memory.stat.local", s2, sizeof(s2)) <= 0;
	ck_assert_int_eq(bad, 0);
	ck_assert_int_eq(stat_delta(s0, s1, "allocs"), KINDS * N);
	ck_assert_int_eq(stat_delta(s0, s1, "alloc_bytes"), bytes);
	ck_assert_int_eq(stat_delta(s0, s1, "heap_live"), bytes);
	ck_assert_int_eq(stat_delta(s0, s1, "alloc_size_le_2048"), le2048);
	ck_assert_int_eq(stat_delta(s0, s1, "alloc_size_le_8192"), le8192);
	ck_assert_int_eq(stat_delta(s0, s1, "alloc_size_le_16384"), le16384);
	ck_assert_int_eq(stat_delta(s1, s2, "frees"), KINDS * N);
	ck_assert_int_eq(stat_delta(s1, s2, "free_bytes"), bytes);
	ck_assert_int_eq(stat_delta(s0, s2, "heap_live"), 0);
}
END_TEST

/* Bytes 0..@n of @p hold the pattern of @seed? */
static int holds(const unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(seed + i * 7))
			return 0;
	return 1;
}

static void pattern(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seed + i * 7);
}

/*
 * realloc of blocks of the bins (at most 16 KiB) that must move: a new
 * block by malloc's paths, the copy, the old one freed by free's
 * (shim/accounted.c).  The bytes follow, an aligned block's included, and
 * once everything is freed heap_live is back where it was, and as many
 * frees as allocations were counted.
 */
START_TEST(test_realloc_in_bins)
{
	static char s0[4096], s1[4096];
	static void *(*volatile grow)(void *, size_t) = realloc;
	unsigned char *p, *q;
	size_t n = 24;
	int bad = 0, lost = 0;

	bad += cgm_flush() != 0;
	bad += cgm_read(NULL, "memory.stat.local", s0, sizeof(s0)) <= 0;
	p = alloc(n);
	bad += !p;
	if (p)
		pattern(p, n, 1);
	/* Up through the small and the medium bins, then past them, then down. */
	for (size_t next = 40; p && next <= 40000; next = next * 3 / 2) {
		q = grow(p, next);
		if (!q) {
			bad++;
			break;
		}
		lost += !holds(q, n, 1);
		p = q;
		n = next;
		pattern(p, n, 1);
	}
	q = p ? grow(p, 5000) : NULL;
	lost += q && !holds(q, 5000, 1);
	p = q ? grow(q, 100) : p;
	lost += p && !holds(p, 100, 1);
	release(p);
	/* An aligned block (offset in its block: has_aligned) moved by realloc. */
	p = aligned_alloc(64, 200);
	bad += !p;
	if (p) {
		pattern(p, 200, 3);
		q = grow(p, 3000);
		lost += !q || !holds(q, 200, 3);
		release(q ? q : p);
	}
	bad += cgm_flush() != 0;
	bad += cgm_read(NULL, "memory.stat.local", s1, sizeof(s1)) <= 0;
	ck_assert_int_eq(bad, 0);
	ck_assert_int_eq(lost, 0);
	ck_assert_int_eq(stat_delta(s0, s1, "heap_live"), 0);
	ck_assert_int_eq(stat_delta(s0, s1, "allocs"), stat_delta(s0, s1, "frees"));
	ck_assert_int_eq(stat_delta(s0, s1, "alloc_bytes"), stat_delta(s0, s1, "free_bytes"));
	ck_assert_int_ge(stat_delta(s0, s1, "allocs"), 10);
}
END_TEST

/*
 * realloc to a little more than an aligned block's usable size: the block
 * mimalloc offset inside a larger one for its alignment holds less than
 * that block, and realloc must not keep it in place for a size that fits
 * the block but not what follows the pointer.
 */
START_TEST(test_realloc_aligned_past_usable)
{
	static void *(*volatile grow)(void *, size_t) = realloc;

	for (int i = 0; i < 16; i++) {
		unsigned char *p = aligned_alloc(64, 40 + 8 * (size_t)i), *q;
		size_t usable;

		ck_assert_ptr_nonnull(p);
		usable = malloc_usable_size(p);
		pattern(p, usable, 5);
		q = grow(p, usable + 8);
		ck_assert_ptr_nonnull(q);
		ck_assert_uint_ge(malloc_usable_size(q), usable + 8);
		ck_assert(holds(q, usable, 5));
		release(q);
	}
}
END_TEST

/* Set our own group's memory.max to @room above its usage; returns the limit. */
static long max_above_current(long room)
{
	char val[32];
	long max = read_num(NULL, "memory.current") + room;

	snprintf(val, sizeof(val), "%ld", max);
	ck_assert_int_eq(cgm_write(NULL, "memory.max", val), 0);
	return max;
}

/*
 * charge=resident: a block is charged as it is touched; once a sample
 * finds the group over memory.max (here the read of memory.current,
 * which samples), the next allocation reclaims and then fails.
 */
START_TEST(test_limit_set_from_inside)
{
	long max0, oom0, max;
	char *p, *q;

	max0 = read_key(NULL, "memory.events", "max");
	oom0 = read_key(NULL, "memory.events", "oom");
	max = max_above_current(8 * MiB);
	/* Reserved, not touched: nothing to refuse, as in the kernel. */
	p = alloc(32 * MiB);
	ck_assert_ptr_nonnull(p);
	memset(p, 1, 32 * MiB);
	ck_assert_int_le(read_num(NULL, "memory.current"), max);
	ck_assert_int_gt(read_key(NULL, "memory.events", "max"), max0);
	errno = 0;
	q = alloc(2 * MiB);
	ck_assert_ptr_null(q);
	ck_assert_int_eq(errno, ENOMEM);
	ck_assert_int_gt(read_key(NULL, "memory.events", "oom"), oom0);
	ck_assert_int_gt(read_key("/api", "memory.events", "oom"), 0);
	release(p);
	ck_assert_int_eq(cgm_write(NULL, "memory.max", "max"), 0);
	q = alloc(2 * MiB);
	ck_assert_ptr_nonnull(q);
	release(q);
}
END_TEST

/* charge=alloc: the very next allocation that would pass memory.max fails. */
START_TEST(test_limit_charge_alloc)
{
	long oom0;
	void *p;

	oom0 = read_key(NULL, "memory.events", "oom");
	max_above_current(8 * MiB);
	errno = 0;
	p = alloc(32 * MiB);
	ck_assert_ptr_null(p);
	ck_assert_int_eq(errno, ENOMEM);
	ck_assert_int_gt(read_key(NULL, "memory.events", "oom"), oom0);
	ck_assert_int_eq(cgm_write(NULL, "memory.max", "max"), 0);
	p = alloc(32 * MiB);
	ck_assert_ptr_nonnull(p);
	release(p);
}
END_TEST

/* Within the delegated /api a process moves itself; out of it, it may not. */
START_TEST(test_move_self)
{
	char pid[16], buf[64];

	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	ck_assert_int_eq(cgm_write("/", "cgroup.procs", pid), -EPERM);
	ck_assert_int_eq(cgm_write("/api/other", "cgroup.procs", pid), 0);
	ck_assert_int_eq(cgm_group(buf, sizeof(buf)), (int)strlen("/api/other"));
	ck_assert_str_eq(buf, "/api/other");
	ck_assert_int_gt(cgm_read("/api/other", "cgroup.procs", buf, sizeof(buf)), 0);
	ck_assert_ptr_nonnull(strstr(buf, pid));
	ck_assert_int_eq(cgm_write("/api/test", "cgroup.procs", pid), 0);
	ck_assert_int_gt(cgm_group(buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/api/test");
}
END_TEST

/*
 * Cgroup delegation: below the delegated /api the process sets limits,
 * its own group's included; /api's own, and the root's (which has none),
 * it may not.
 */
START_TEST(test_delegated_limits)
{
	ck_assert_int_eq(cgm_write(NULL, "memory.high", "1G"), 0);
	ck_assert_int_eq(cgm_write(NULL, "memory.high", "max"), 0);
	ck_assert_int_eq(cgm_write("/api/other", "memory.max", "1G"), 0);
	ck_assert_int_eq(cgm_write("/api/other", "memory.max", "max"), 0);
	ck_assert_int_eq(cgm_write("/api", "memory.max", "max"), -EPERM);
	ck_assert_int_eq(cgm_write("/api", "cgroup.delegate", "0"), -EPERM);
	ck_assert_int_eq(cgm_write("/", "memory.max", "max"), -EINVAL);
	ck_assert_int_eq(read_num("/api", "cgroup.delegate"), 1);
}
END_TEST

/*
 * Not delegated (/plain): a limited process cannot lift its own limit,
 * nor move itself out from under it; a group outside its ancestry is
 * another matter (accounting is cooperative: see the README).
 */
START_TEST(test_own_limits_refused)
{
	char pid[16];

	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	ck_assert_int_eq(read_num(NULL, "memory.max"), 512 * MiB);
	ck_assert_int_eq(cgm_write(NULL, "memory.max", "max"), -EPERM);
	ck_assert_int_eq(cgm_write(NULL, "memory.high", "1G"), -EPERM);
	ck_assert_int_eq(cgm_write(NULL, "memory.oom.group", "1"), -EPERM);
	ck_assert_int_eq(cgm_write(NULL, "cgroup.delegate", "1"), -EPERM);
	ck_assert_int_eq(read_num(NULL, "memory.max"), 512 * MiB);
	ck_assert_int_eq(cgm_write("/", "cgroup.procs", pid), -EPERM);
	ck_assert_int_eq(cgm_write("/elsewhere", "cgroup.procs", pid), -EPERM);
	ck_assert_int_eq(cgm_write("/elsewhere", "memory.max", "1G"), 0);
	ck_assert_int_eq(cgm_write("/elsewhere", "memory.max", "max"), 0);
}
END_TEST

/*
 * Nothing the API does allocates: the group's allocation count stands
 * still.  (No Check assertion between the two readings: a passing
 * assertion reports its location to the parent, and that allocates.)
 */
START_TEST(test_no_allocation)
{
	char before[4096], after[4096], buf[2048];
	int bad = 0;

	bad += cgm_flush() != 0;
	bad += cgm_read(NULL, "memory.stat.local", before, sizeof(before)) <= 0;
	for (int i = 0; i < 100; i++) {
		bad += cgm_read(NULL, "memory.stat", buf, sizeof(buf)) <= 0;
		bad += cgm_read("/", "memory.events", buf, sizeof(buf)) <= 0;
		bad += cgm_read(NULL, "cgroup.procs", buf, sizeof(buf)) <= 0;
		bad += cgm_write(NULL, "memory.low", "0") != 0;
		bad += cgm_write(NULL, "memory.max", "nonsense") != -EINVAL;
		bad += cgm_group(buf, sizeof(buf)) <= 0;
		bad += cgm_flush() != 0;
	}
	bad += cgm_read(NULL, "memory.stat.local", after, sizeof(after)) <= 0;
	ck_assert_int_eq(bad, 0);
	ck_assert_int_ge(key_of(before, "allocs"), 1);
	ck_assert_int_eq(key_of(after, "allocs"), key_of(before, "allocs"));
	ck_assert_int_eq(key_of(after, "frees"), key_of(before, "frees"));
}
END_TEST

/* accounting=0: every call says so. */
START_TEST(test_accounting_off)
{
	char buf[64];

	ck_assert_int_eq(cgm_accounting_enabled(), 0);
	ck_assert_int_eq(cgm_read(NULL, "memory.current", buf, sizeof(buf)), -ENODEV);
	ck_assert_int_eq(cgm_read("/", "memory.current", buf, sizeof(buf)), -ENODEV);
	ck_assert_int_eq(cgm_write(NULL, "memory.max", "1M"), -ENODEV);
	ck_assert_int_eq(cgm_group(buf, sizeof(buf)), -ENODEV);
	ck_assert_int_eq(cgm_flush(), -ENODEV);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("api");
	TCase *tc = tcase_create("api");

	if (getenv("CGM_TEST_API_OFF")) {
		tcase_add_test(tc, test_accounting_off);
	} else if (getenv("CGM_TEST_API_PLAIN")) {
		tcase_add_test(tc, test_own_limits_refused);
	} else if (getenv("CGM_TEST_API_CHARGE_ALLOC")) {
		tcase_add_test(tc, test_limit_charge_alloc);
	} else {
		tcase_add_test(tc, test_delegated_limits);
		tcase_add_test(tc, test_own_group);
		tcase_add_test(tc, test_read_errors);
		tcase_add_test(tc, test_bad_writes_change_nothing);
		tcase_add_test(tc, test_usage_follows_the_heap);
		tcase_add_test(tc, test_medium_blocks_counted);
		tcase_add_test(tc, test_realloc_in_bins);
		tcase_add_test(tc, test_realloc_aligned_past_usable);
		tcase_add_test(tc, test_limit_set_from_inside);
		tcase_add_test(tc, test_move_self);
		tcase_add_test(tc, test_no_allocation);
	}
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	return check_run(s);
}
