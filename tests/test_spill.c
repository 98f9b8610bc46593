/*
 * Tests of zpool/spill.c: pages spilled into the pool come back
 * byte-identical on a plain load, through system calls, to several threads
 * at once, and under a writer racing the spiller; moves that cannot happen
 * leave the page in place; registration follows the spilled pages; close
 * brings everything back and leaves no thread; an unprivileged process is
 * told what to grant.  Skips (77) where the kernel gives no uffd.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgm/spill.h"
#include "cgm/zpool.h"
#include "check_run.h"

#define PG 4096ul

static struct zp_pool *pool;
static struct spill_engine *eng;

static void setup(void)
{
	ck_assert_int_eq(zp_create_pool(NULL, &pool), 0);
	ck_assert_int_eq(spill_open(&(struct spill_options){ .pool = pool }, &eng), 0);
}

static void teardown(void)
{
	if (eng)
		spill_close(eng);
	eng = NULL;
	zp_destroy_pool(pool);
}

static unsigned char *map_pages(size_t n)
{
	void *p = mmap(NULL, n * PG, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(p, MAP_FAILED);
	madvise(p, n * PG, MADV_NOHUGEPAGE);
	return p;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Random pages, with a zero page every 17th and a same-filled every 13th
 * (the pool stores those as one word). */
static void fill_pages(unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t *w = (uint64_t *)(p + i * PG);

		for (size_t k = 0; k < PG / 8; k++)
			w[k] = i % 17 == 0 ? 0 : i % 13 == 0 ? 0x5a5a5a5a5a5a5a5aull :
			       (k < PG / 16 ? next_rand() : k * 0x0101 + i);
	}
}

/* Userfaultfd-registered VMAs ("um" in VmFlags) overlapping [p, p+len). */
static int registered_vmas(const void *p, size_t len)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	uintptr_t lo = 0, hi = 0, a = (uintptr_t)p, b = a + len;
	int n = 0;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e;

		if (sscanf(line, "%lx-%lx ", &s, &e) == 2) {
			lo = s;
			hi = e;
		} else if (!strncmp(line, "VmFlags:", 8) && lo < b && hi > a &&
			   strstr(line, " um")) {
			n++;
		}
	}
	fclose(f);
	return n;
}

static int count_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/*
 * Read the counters once the handler has finished its bookkeeping of the
 * faults already returned (it wakes the faulting thread first): wait, up
 * to 2 s, for @in_pool pages to be left in the pool and, when none is,
 * for every range to be gone.
 */
static void settle(struct spill_stats *st, uint64_t in_pool)
{
	for (int i = 0; i < 2000; i++) {
		spill_stats(eng, st);
		if (st->in_pool == in_pool && (in_pool || !st->ranges))
			return;
		usleep(1000);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

START_TEST(test_roundtrip)
{
	enum { N = 2048 };
	unsigned char *p = map_pages(N), *ref = malloc(N * PG);
	static double lat[N];
	struct spill_stats st;
	size_t bad = 0;

	setup();
	fill_pages(p, N);
	memcpy(ref, p, N * PG);
	ck_assert_int_eq(spill_out(eng, p, N), N);
	spill_stats(eng, &st);
	ck_assert_uint_eq(st.spilled, N);
	ck_assert_uint_eq(st.in_pool, N);
	ck_assert_uint_eq(st.skipped, 0);
	ck_assert_uint_eq(st.stored_bytes, (uint64_t)N * PG);
	ck_assert_int_gt(registered_vmas(p, N * PG), 0);

	/* Each page's first touch is a refault: time it, then compare. */
	for (size_t i = 0; i < N; i++) {
		double t0 = now_us();

		(void)*(volatile unsigned char *)(p + i * PG + 100);
		lat[i] = now_us() - t0;
		bad += memcmp(p + i * PG, ref + i * PG, PG) != 0;
	}
	ck_assert_uint_eq(bad, 0);
	settle(&st, 0);
	ck_assert_uint_eq(st.refaulted, N);
	ck_assert_uint_eq(st.in_pool, 0);
	ck_assert_uint_eq(st.ranges, 0);
	/* Every page is back: nothing of the range stays registered. */
	ck_assert_int_eq(registered_vmas(p, N * PG), 0);

	qsort(lat, N, sizeof(lat[0]), cmp_double);
	fprintf(stderr, "test_spill: refault seen by the faulting thread, %d pages: "
		"p50 %.1f us, p99 %.1f us\n", N, lat[N / 2], lat[N * 99 / 100]);

	/* A second round over the same memory, written in between. */
	fill_pages(p, N);
	memcpy(ref, p, N * PG);
	ck_assert_int_eq(spill_out(eng, p, N), N);
	ck_assert_int_eq(memcmp(p, ref, N * PG), 0);
	free(ref);
}
END_TEST

START_TEST(test_syscalls)
{
	unsigned char *p = map_pages(2), ref[PG], buf[PG];
	int fds[2];

	setup();
	ck_assert_int_eq(pipe(fds), 0);
	fill_pages(p, 2);
	memcpy(ref, p + PG, PG);
	ck_assert_int_eq(spill_out(eng, p, 2), 2);

	/* read(2) into a spilled page: the kernel's copy faults, the handler
	 * serves it, the read completes (no EFAULT). */
	memset(buf, 0xc3, PG);
	ck_assert_int_eq(write(fds[1], buf, PG), PG);
	ck_assert_int_eq(read(fds[0], p, PG), PG);
	ck_assert_int_eq(memcmp(p, buf, PG), 0);

	/* write(2) from a spilled page. */
	ck_assert_int_eq(write(fds[1], p + PG, PG), PG);
	ck_assert_int_eq(read(fds[0], buf, PG), PG);
	ck_assert_int_eq(memcmp(buf, ref, PG), 0);
	close(fds[0]);
	close(fds[1]);
}
END_TEST

enum { SHARED_PAGES = 256, READERS = 4, ROUNDS = 10 };
static unsigned char *shared, *shared_ref;
static pthread_barrier_t barrier;
static atomic_ulong mismatches;

static void *reader(void *arg)
{
	size_t id = (size_t)arg;

	for (int r = 0; r < ROUNDS; r++) {
		pthread_barrier_wait(&barrier);	/* spilled */
		for (size_t k = 0; k < SHARED_PAGES; k++) {
			size_t i = (k + id * 7) % SHARED_PAGES;

			if (memcmp(shared + i * PG, shared_ref + i * PG, PG))
				atomic_fetch_add(&mismatches, 1);
		}
		pthread_barrier_wait(&barrier);	/* all read */
	}
	return NULL;
}

START_TEST(test_threads_same_pages)
{
	pthread_t t[READERS];
	struct spill_stats st;

	setup();
	shared = map_pages(SHARED_PAGES);
	shared_ref = malloc(SHARED_PAGES * PG);
	fill_pages(shared, SHARED_PAGES);
	memcpy(shared_ref, shared, SHARED_PAGES * PG);
	pthread_barrier_init(&barrier, NULL, READERS + 1);
	for (size_t i = 0; i < READERS; i++)
		pthread_create(&t[i], NULL, reader, (void *)i);
	for (int r = 0; r < ROUNDS; r++) {
		/* A page whose entry the handler has yet to drop is skipped. */
		settle(&st, 0);
		ck_assert_int_eq(spill_out(eng, shared, SHARED_PAGES), SHARED_PAGES);
		pthread_barrier_wait(&barrier);
		pthread_barrier_wait(&barrier);
	}
	for (size_t i = 0; i < READERS; i++)
		pthread_join(t[i], NULL);
	ck_assert_uint_eq(atomic_load(&mismatches), 0);
	settle(&st, 0);
	ck_assert_uint_eq(st.spilled, SHARED_PAGES * ROUNDS);
	ck_assert_uint_eq(st.refaulted, SHARED_PAGES * ROUNDS);
	ck_assert_uint_eq(st.ranges, 0);
	free(shared_ref);
}
END_TEST

/*
 * A writer bumps a counter in every page and stamps one word per write
 * while two spillers move overlapping halves out again and again: every
 * write must survive, whether it lands before a move, during a store, or
 * after a refault.
 */
enum { WPAGES = 64, WORDS = PG / 8 };
static uint64_t *wregion, *wmirror;
static atomic_bool writer_done;

static void *writer(void *arg)
{
	double end = now_us() + *(double *)arg;

	for (uint64_t i = 1;; i++) {
		size_t pg = i % WPAGES, w = pg * WORDS;

		wregion[w]++;
		wmirror[w]++;
		wregion[w + 1 + (i / WPAGES) % (WORDS - 1)] = i;
		wmirror[w + 1 + (i / WPAGES) % (WORDS - 1)] = i;
		if (i % 4096 == 0 && now_us() > end)
			break;
	}
	atomic_store(&writer_done, true);
	return NULL;
}

static void *spiller(void *arg)
{
	size_t first = (size_t)arg;

	while (!atomic_load(&writer_done)) {
		ck_assert_int_ge(spill_out(eng, wregion + first * WORDS, WPAGES * 3 / 4), 0);
		usleep(200);
	}
	return NULL;
}

START_TEST(test_writer_vs_spillers)
{
	pthread_t w, s1, s2;
	struct spill_stats st;
	double run_us = 1.5e6;

	setup();
	wregion = (uint64_t *)map_pages(WPAGES);
	wmirror = calloc(WPAGES, PG);
	memset(wregion, 0, WPAGES * PG);
	pthread_create(&w, NULL, writer, &run_us);
	pthread_create(&s1, NULL, spiller, (void *)0);
	pthread_create(&s2, NULL, spiller, (void *)(WPAGES / 4));
	pthread_join(w, NULL);
	pthread_join(s1, NULL);
	pthread_join(s2, NULL);

	spill_stats(eng, &st);
	fprintf(stderr, "test_spill: writer vs 2 spillers: %llu spilled, "
		"%llu refaulted, %llu skipped, %llu left spilled\n",
		(unsigned long long)st.spilled, (unsigned long long)st.refaulted,
		(unsigned long long)st.skipped, (unsigned long long)st.in_pool);
	/* The race was run, not dodged. */
	ck_assert_uint_gt(st.spilled, 100);
	ck_assert_uint_gt(st.refaulted, 100);
	for (size_t i = 0; i < WPAGES * WORDS; i++)
		if (wregion[i] != wmirror[i])
			ck_abort_msg("word %zu (page %zu): %llu, expected %llu", i, i / WORDS,
				     (unsigned long long)wregion[i],
				     (unsigned long long)wmirror[i]);
	settle(&st, 0);
	ck_assert_uint_eq(st.in_pool, 0);
	ck_assert_uint_eq(st.ranges, 0);
	ck_assert_int_eq(registered_vmas(wregion, WPAGES * PG), 0);
	free(wmirror);
}
END_TEST

/* Pages that cannot move stay where they are, counted as skipped. */
START_TEST(test_skips)
{
	unsigned char *p = map_pages(3), ref[PG];
	struct spill_stats st;
	int go[2];
	pid_t child;

	setup();
	memset(p, 0x11, PG);
	memset(p + 2 * PG, 0x22, PG);
	ck_assert_int_eq(pipe(go), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		char c;

		close(go[1]);
		_exit(read(go[0], &c, 1) < 0);
	}
	/* Page 0 is written after the fork (its own again), page 1 was never
	 * touched, page 2 is still shared with the child: EBUSY. */
	memset(p, 0x33, PG);
	memcpy(ref, p, PG);
	ck_assert_int_eq(spill_out(eng, p, 3), 1);
	spill_stats(eng, &st);
	ck_assert_uint_eq(st.spilled, 1);
	ck_assert_uint_eq(st.skipped, 2);
	/* Already spilled: skipped, not stored twice. */
	ck_assert_int_eq(spill_out(eng, p, 1), 0);
	spill_stats(eng, &st);
	ck_assert_uint_eq(st.skipped, 3);
	ck_assert_uint_eq(st.in_pool, 1);

	ck_assert_int_eq(memcmp(p, ref, PG), 0);
	for (size_t i = 0; i < PG; i++) {
		ck_assert_uint_eq(p[PG + i], 0);
		ck_assert_uint_eq(p[2 * PG + i], 0x22);
	}
	close(go[1]);
	ck_assert_int_eq(waitpid(child, NULL, 0), child);
	close(go[0]);
}
END_TEST

START_TEST(test_bad_args)
{
	unsigned char *p = map_pages(2);

	setup();
	p[0] = 1;
	ck_assert_int_eq(spill_out(eng, p + 1, 1), -EINVAL);
	ck_assert_int_eq(spill_out(eng, p, 0), 0);
	/* A read-only mapping cannot be registered for moves' sake: nothing
	 * spilled, the page stays readable. */
	ck_assert_int_eq(mprotect(p, PG, PROT_READ), 0);
	ck_assert_int_le(spill_out(eng, p, 1), 0);
	ck_assert_uint_eq(p[0], 1);
	ck_assert_int_eq(spill_open(NULL, &eng) , -EINVAL);
}
END_TEST

/* Close brings back what is still out, unregisters, leaves no thread. */
START_TEST(test_close_restores)
{
	enum { N = 512 };
	unsigned char *p = map_pages(N), *ref = malloc(N * PG);
	int threads0 = count_dir("/proc/self/task"), fds0 = count_dir("/proc/self/fd");
	struct spill_stats st;

	setup();
	ck_assert_int_eq(count_dir("/proc/self/task"), threads0 + 1);
	fill_pages(p, N);
	memcpy(ref, p, N * PG);
	ck_assert_int_eq(spill_out(eng, p, N), N);
	for (size_t i = 0; i < N; i += 5)
		ck_assert_int_eq(memcmp(p + i * PG, ref + i * PG, PG), 0);
	settle(&st, N - (N + 4) / 5);
	ck_assert_uint_eq(st.in_pool, N - (N + 4) / 5);
	ck_assert_uint_eq(st.refaulted, (N + 4) / 5);
	spill_close(eng);
	eng = NULL;
	ck_assert_int_eq(memcmp(p, ref, N * PG), 0);
	ck_assert_int_eq(registered_vmas(p, N * PG), 0);
	ck_assert_int_eq(count_dir("/proc/self/task"), threads0);
	ck_assert_int_eq(count_dir("/proc/self/fd"), fds0);
	teardown();
	free(ref);
}
END_TEST

/* A process without the privilege gets -EPERM and one line saying what to
 * grant.  Needs root to become nobody, and the sysctl at 0. */
START_TEST(test_unprivileged)
{
	int err[2], status;
	char msg[1024] = "";
	FILE *f = fopen("/proc/sys/vm/unprivileged_userfaultfd", "r");
	int sysctl = -1;
	pid_t child;
	ssize_t n;

	if (f) {
		if (fscanf(f, "%d", &sysctl) != 1)
			sysctl = -1;
		fclose(f);
	}
	if (geteuid() != 0 || sysctl != 0) {
		fprintf(stderr, "test_spill: test_unprivileged skipped: needs root "
			"and vm.unprivileged_userfaultfd=0\n");
		return;
	}
	ck_assert_int_eq(zp_create_pool(NULL, &pool), 0);
	ck_assert_int_eq(pipe(err), 0);
	child = fork();
	if (child == 0) {
		struct spill_engine *e = NULL;

		dup2(err[1], 2);
		if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
		    setresuid(65534, 65534, 65534))
			_exit(2);
		_exit(spill_open(&(struct spill_options){ .pool = pool }, &e) == -EPERM ? 0 : 1);
	}
	close(err[1]);
	n = read(err[0], msg, sizeof(msg) - 1);
	msg[n > 0 ? n : 0] = '\0';
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "status %#x, stderr: %s", status, msg);
	ck_assert_msg(strncmp(msg, "cgmalloc: spill: ", 17) == 0, "%s", msg);
	ck_assert_ptr_nonnull(strstr(msg, "root"));
	ck_assert_ptr_nonnull(strstr(msg, "CAP_SYS_PTRACE"));
	ck_assert_ptr_nonnull(strstr(msg, "vm.unprivileged_userfaultfd=1"));
	ck_assert_ptr_nonnull(strstr(msg, "/dev/userfaultfd"));
	ck_assert_ptr_eq(strchr(msg, '\n'), msg + strlen(msg) - 1);
	close(err[0]);
	zp_destroy_pool(pool);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("spill");
	TCase *tc = tcase_create("core");
	struct zp_pool *p;
	struct spill_engine *e;
	int err;

	/* The engine needs a uffd that serves system calls. */
	if (zp_create_pool(NULL, &p))
		return EXIT_FAILURE;
	err = spill_open(&(struct spill_options){ .pool = p }, &e);
	if (err == -EPERM || err == -EOPNOTSUPP) {
		fprintf(stderr, "test_spill: skipped: %s\n", strerror(-err));
		return 77;
	}
	if (err)
		return EXIT_FAILURE;
	spill_close(e);
	zp_destroy_pool(p);

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_syscalls);
	tcase_add_test(tc, test_threads_same_pages);
	tcase_add_test(tc, test_writer_vs_spillers);
	tcase_add_test(tc, test_skips);
	tcase_add_test(tc, test_bad_args);
	tcase_add_test(tc, test_close_restores);
	tcase_add_test(tc, test_unprivileged);
	suite_add_tcase(s, tc);
	return check_run(s);
}
