/*
 * Fault injection for writeback: a backing file on a full filesystem (a
 * 256 KiB tmpfs in a private mount namespace, or, where mounting is not
 * allowed, a 256 KiB RLIMIT_FSIZE with SIGXFSZ ignored), injected I/O
 * errors through the test hook, a pool limit over a failing disk (stores
 * refused at once while writeback backs off), and a backing file
 * truncated or corrupted behind the pool's back.  No entry may be lost:
 * every load stays byte-identical or fails with -EIO, never returns other
 * bytes; failures are counted and reported once on stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


#include "cgm/zpool.h"
#include "seccomp_refuse.h"
#include "zpool_pages.h"

#define N 600

static unsigned long checks, failures;

#define CHECK(cond, ...) do {						\
	checks++;							\
	if (!(cond)) {							\
		failures++;						\
		fprintf(stdout, "FAIL %s:%d: ", __FILE__, __LINE__);	\
		fprintf(stdout, __VA_ARGS__);				\
		fputc('\n', stdout);					\
	}								\
} while (0)

static unsigned char (*pages)[ZPT_PAGE];
static zp_entry_t e[N];
static unsigned char *heap;
static long nheap;

/* stderr into a memfd while @on; returns what was written. */
static int err_fd = -1, saved_err = -1;

static void capture(bool on, char *out, size_t len)
{
	if (on) {
		err_fd = memfd_create("zpool-fault-err", 0);
		saved_err = dup(2);
		dup2(err_fd, 2);
		return;
	}
	dup2(saved_err, 2);
	close(saved_err);
	ssize_t n = pread(err_fd, out, len - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(err_fd);
}

static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void make_pages(uint64_t seed)
{
	uint64_t rng = seed;

	for (int i = 0; i < N; i++) {
		if (i % 2)
			memcpy(pages[i], heap + (size_t)(i % nheap) * ZPT_PAGE, ZPT_PAGE);
		else
			zpt_page_mixed(&rng, pages[i]);
	}
}

static unsigned verify_all(struct zp_pool *pool)
{
	unsigned char out[ZPT_PAGE];
	unsigned bad = 0;

	for (int i = 0; i < N; i++)
		bad += zp_load(pool, e[i], out) != 0 ||
		       memcmp(out, pages[i], ZPT_PAGE) != 0;
	return bad;
}

static void store_all(struct zp_pool *pool)
{
	unsigned bad = 0;

	for (int i = 0; i < N; i++)
		bad += zp_store(pool, pages[i], &e[i]) != 0;
	CHECK(bad == 0, "%u stores failed", bad);
}

static void release_all(struct zp_pool *pool)
{
	struct zp_stats st;
	unsigned bad = 0;

	for (int i = 0; i < N; i++)
		bad += zp_invalidate(pool, e[i]) != 0;
	CHECK(bad == 0, "%u invalidations failed", bad);
	zp_pool_stats(pool, &st);
	CHECK(st.stored_pages == 0 && st.backing_bytes == 0 &&
	      st.mem_used_total == 0, "pool not empty at the end");
}

/* A directory whose filesystem holds 256 KiB; returns how, or NULL. */
static const char *full_fs(char *dir)
{
	struct rlimit rl = { 256 << 10, 256 << 10 };

	strcpy(dir, "/tmp/zpool-full-XXXXXX");
	if (!mkdtemp(dir))
		return NULL;
	/* ZPT_NO_TMPFS=1 tries the fallback where mounting works too. */
	if (!getenv("ZPT_NO_TMPFS") && unshare(CLONE_NEWNS) == 0 &&
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
	    mount("tmpfs", dir, "tmpfs", 0, "size=256k") == 0)
		return "256 KiB tmpfs";
	signal(SIGXFSZ, SIG_IGN);
	if (setrlimit(RLIMIT_FSIZE, &rl) == 0)
		return "RLIMIT_FSIZE 256 KiB";
	return NULL;
}

static void test_full_disk(void)
{
	char dir[64], path[96], err[4096];
	struct zp_options o = { .wb_batch = 16 };
	struct zp_pool *pool;
	const char *how = full_fs(dir);
	struct zp_stats st;
	long w1, w2, w3;

	if (!how) {
		printf("SKIP full disk: neither tmpfs nor RLIMIT_FSIZE available\n");
		return;
	}
	snprintf(path, sizeof(path), "%s/backing", dir);
	o.backing = path;
	CHECK(zp_create_pool(&o, &pool) == 0, "create pool on %s", how);
	make_pages(1);
	store_all(pool);
	capture(true, NULL, 0);
	w1 = zp_writeback(pool, N);
	w2 = zp_writeback(pool, N);
	capture(false, err, sizeof(err));
	zp_pool_stats(pool, &st);
	CHECK(w1 > 0 && w1 < N, "%s: first writeback wrote %ld of %d", how, w1, N);
	CHECK(w2 == -ENOSPC, "%s: second writeback on a full disk returned %ld, "
	      "expected -ENOSPC", how, w2);
	CHECK(st.wb_io_errors >= 2, "%s: %lu io errors counted", how,
	      (unsigned long)st.wb_io_errors);
	CHECK(count(err, "cgmalloc: zpool: writeback to") == 1 &&
	      count(err, "entries stay in memory") == 1,
	      "%s: expected one line on stderr, got: %s", how, err);
	CHECK(st.wb_pages_on_disk == (uint64_t)w1, "on disk %lu",
	      (unsigned long)st.wb_pages_on_disk);
	CHECK(verify_all(pool) == 0, "%s: loads differ after a full disk", how);

	/* Free the written-back entries: their file space is reused. */
	for (int i = 0; i < N; i++) {
		if (zp_invalidate(pool, e[i]) == 0 &&
		    zp_store(pool, pages[i], &e[i]) != 0)
			CHECK(false, "re-store %d", i);
	}
	capture(true, NULL, 0);
	w3 = zp_writeback(pool, N);
	capture(false, err, sizeof(err));
	CHECK(w3 > w1 / 2, "%s: after invalidation wrote %ld (first %ld)", how,
	      w3, w1);
	CHECK(verify_all(pool) == 0, "%s: loads differ after reuse", how);
	release_all(pool);
	zp_destroy_pool(pool);
	printf("full disk (%s): wrote %ld, then %ld, then %ld after invalidation; "
	       "%lu io errors\n", how, w1, w2, w3, (unsigned long)st.wb_io_errors);
	unlink(path);
	if (strstr(how, "tmpfs"))
		umount(dir);
	else {
		struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };

		setrlimit(RLIMIT_FSIZE, &rl);
	}
	rmdir(dir);
}

static void test_injected_errors(void)
{
	char path[] = "/tmp/zpool-fault-XXXXXX", err[4096];
	struct zp_options o = { .wb_batch = 32 };
	struct zp_pool *pool;
	struct zp_stats st;
	unsigned char out[ZPT_PAGE];
	long w1, w2;
	int fd = mkstemp(path), ret;

	close(fd);
	o.backing = path;
	CHECK(zp_create_pool(&o, &pool) == 0, "create pool");
	make_pages(2);
	store_all(pool);
	zp_test_fail_writes(pool, 5, EIO);
	capture(true, NULL, 0);
	w1 = zp_writeback(pool, N);
	w2 = zp_writeback(pool, N);
	capture(false, err, sizeof(err));
	zp_pool_stats(pool, &st);
	CHECK(w1 == 32 - 5, "first batch wrote %ld, expected 27", w1);
	CHECK(st.wb_io_errors == 5, "%lu io errors, expected 5",
	      (unsigned long)st.wb_io_errors);
	CHECK(w1 + w2 == N, "wrote %ld + %ld of %d", w1, w2, N);
	CHECK(count(err, "Input/output error; entries stay in memory") == 1,
	      "stderr: %s", err);
	CHECK(verify_all(pool) == 0, "loads differ after injected errors");

	/* The file loses its contents: loads fail cleanly, entries stay. */
	CHECK(truncate(path, 0) == 0, "truncate");
	capture(true, NULL, 0);
	ret = zp_load(pool, e[1], out);
	capture(false, err, sizeof(err));
	zp_pool_stats(pool, &st);
	CHECK(ret == -EIO, "load from a truncated file returned %d", ret);
	CHECK(st.wb_read_errors == 1, "read errors %lu",
	      (unsigned long)st.wb_read_errors);
	CHECK(count(err, "cgmalloc: zpool: reading back from") == 1, "stderr: %s", err);
	release_all(pool);
	zp_destroy_pool(pool);
	unlink(path);
	printf("injected errors: wrote %ld then %ld, 5 io errors, truncated file "
	       "-> -EIO\n", w1, w2);
}

static void test_limit_over_failing_disk(void)
{
	char path[] = "/tmp/zpool-fault-XXXXXX", err[4096];
	struct zp_options o = { .max_bytes = 64 * ZPT_PAGE };
	struct zp_pool *pool;
	struct zp_stats st;
	unsigned char out[ZPT_PAGE];
	int fd = mkstemp(path), stored = 0, refused = 0, other = 0, bad = 0;

	close(fd);
	o.backing = path;
	CHECK(zp_create_pool(&o, &pool) == 0, "create pool");
	make_pages(3);
	zp_test_fail_writes(pool, 1u << 30, ENOSPC);
	capture(true, NULL, 0);
	for (int i = 0; i < N; i++) {
		int ret = zp_store(pool, pages[i], &e[i]);

		if (ret == 0)
			stored++;
		else if (ret == -ENOSPC)
			refused++, e[i] = 0;
		else
			other++, e[i] = 0;
	}
	capture(false, err, sizeof(err));
	zp_pool_stats(pool, &st);
	CHECK(refused > 0 && other == 0, "stored %d refused %d other %d", stored,
	      refused, other);
	CHECK(st.mem_used_total <= 64 * ZPT_PAGE, "pool grew to %lu pages",
	      (unsigned long)(st.mem_used_total / ZPT_PAGE));
	for (int i = 0; i < N; i++)
		if (e[i])
			bad += zp_load(pool, e[i], out) != 0 ||
			       memcmp(out, pages[i], ZPT_PAGE) != 0;
	CHECK(bad == 0, "%d loads differ", bad);
	for (int i = 0; i < N; i++)
		if (e[i])
			zp_invalidate(pool, e[i]);
	zp_destroy_pool(pool);
	unlink(path);
	printf("limit over a failing disk: %d stored, %d refused with -ENOSPC, "
	       "none lost\n", stored, refused);
}

/* A writeback in which every write fails returns the error, not 0. */
static void test_writeback_all_failed(void)
{
	char path[] = "/tmp/zpool-fault-XXXXXX", err[4096];
	struct zp_options o = { .wb_batch = 32 };
	struct zp_pool *pool;
	struct zp_stats st;
	long w1, w2, w3, w4;
	int fd = mkstemp(path);

	close(fd);
	o.backing = path;
	CHECK(zp_create_pool(&o, &pool) == 0, "create pool");
	make_pages(5);
	store_all(pool);
	zp_test_fail_writes(pool, 1u << 30, EIO);
	capture(true, NULL, 0);
	w1 = zp_writeback(pool, N);
	w2 = zp_writeback(pool, 1);
	zp_test_fail_writes(pool, 0, 0);
	w3 = zp_writeback(pool, N);
	w4 = zp_writeback(pool, N);
	capture(false, err, sizeof(err));
	zp_pool_stats(pool, &st);
	CHECK(w1 == -EIO, "writeback with every write failing returned %ld", w1);
	CHECK(w2 == -EIO, "second writeback with every write failing returned %ld", w2);
	CHECK(w3 == N, "after the fault: wrote %ld of %d", w3, N);
	CHECK(w4 == 0, "nothing left in memory: returned %ld", w4);
	/* The first call tries a batch; later ones probe with one write. */
	CHECK(st.wb_io_errors == 32 + 1, "%lu io errors, expected 33",
	      (unsigned long)st.wb_io_errors);
	CHECK(verify_all(pool) == 0, "loads differ after failed writebacks");
	release_all(pool);
	zp_destroy_pool(pool);
	unlink(path);
	printf("every write failing: zp_writeback returned %ld, %ld; then %ld, %ld\n",
	       w1, w2, w3, w4);
}

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * A pool at its limit over a device that refuses writes: the first store
 * that meets the limit tries writeback and fails; the ones after it back
 * off, are refused at once and add no io errors, until file space is
 * freed (ENOSPC) or the backoff runs out (EIO), after which stores are
 * accepted again.
 */
static void test_refused_store_backs_off(int fault)
{
	char path[] = "/tmp/zpool-fault-XXXXXX", err[4096];
	struct zp_options o = { .max_bytes = 64 * ZPT_PAGE };
	enum { TRIES = 5000 };
	struct zp_pool *pool;
	struct zp_stats st;
	uint64_t errors0;
	unsigned char page[ZPT_PAGE];
	uint64_t rng = 77;
	int fd = mkstemp(path), n = 0, ret = 0, refused = 0, accepted = 0, other = 0;
	double t0, per_store, waited = 0;
	static zp_entry_t kept[TRIES];
	zp_entry_t extra;

	close(fd);
	o.backing = path;
	CHECK(zp_create_pool(&o, &pool) == 0, "create pool");
	make_pages(6);
	/* Some entries on disk, whose file space can be freed later. */
	for (n = 0; n < 32; n++)
		CHECK(zp_store(pool, pages[n], &e[n]) == 0, "store %d", n);
	CHECK(zp_writeback(pool, 32) == 32, "first writeback");
	zp_test_fail_writes(pool, 1u << 30, fault);
	capture(true, NULL, 0);
	while (n < N && (ret = zp_store(pool, pages[n], &e[n])) == 0)
		n++;
	CHECK(ret == -ENOSPC && n < N, "store %d at the limit returned %d", n, ret);
	zp_pool_stats(pool, &st);
	errors0 = st.wb_io_errors;
	CHECK(errors0 > 0 && errors0 <= 32, "%lu io errors at the first refusal",
	      (unsigned long)errors0);
	zpt_page_mixed(&rng, page);
	t0 = now_sec();
	for (int i = 0; i < TRIES; i++) {
		ret = zp_store(pool, page, &kept[accepted]);
		if (ret == 0)
			accepted++;	/* the compaction after a probe made room */
		else if (ret == -ENOSPC)
			refused++;
		else
			other++;
	}
	per_store = (now_sec() - t0) / TRIES;
	zp_pool_stats(pool, &st);
	CHECK(other == 0 && refused >= TRIES - 100, "%d of %d stores refused, "
	      "%d accepted, %d failed otherwise", refused, TRIES, accepted, other);
	/* A probe of one write each time the backoff runs out (1 ms, 2 ms,
	 * ... ): a handful, where every store used to add a batch. */
	CHECK(st.wb_io_errors - errors0 <= 12, "%d refused stores added %lu io errors",
	      TRIES, (unsigned long)(st.wb_io_errors - errors0));
	CHECK(st.mem_used_total <= 64 * ZPT_PAGE, "pool grew to %lu pages",
	      (unsigned long)(st.mem_used_total / ZPT_PAGE));

	/* The device recovers. */
	zp_test_fail_writes(pool, 0, 0);
	if (fault == ENOSPC) {
		/* Freed file space ends the backoff at once. */
		CHECK(zp_invalidate(pool, e[0]) == 0, "invalidate");
		e[0] = 0;
		ret = zp_store(pool, page, &extra);
		CHECK(ret == 0, "store after freeing file space returned %d", ret);
	} else {
		/* The backoff is bounded: stores come back within a second. */
		t0 = now_sec();
		while ((ret = zp_store(pool, page, &extra)) == -ENOSPC &&
		       now_sec() - t0 < 3)
			usleep(1000);
		waited = now_sec() - t0;
		CHECK(ret == 0 && waited < 1.5, "store after the fault returned %d "
		      "after %.3f s", ret, waited);
	}
	capture(false, err, sizeof(err));
	if (ret == 0)
		zp_invalidate(pool, extra);
	for (int i = 0; i < accepted; i++)
		zp_invalidate(pool, kept[i]);
	for (int i = 0; i < n; i++)
		if (e[i])
			zp_invalidate(pool, e[i]);
	zp_pool_stats(pool, &st);
	zp_destroy_pool(pool);
	unlink(path);
	printf("refused store at the limit, device failing with %s: %.2f us each, "
	       "%lu io errors in all over %d refusals; accepted again %s%.3f s\n",
	       fault == ENOSPC ? "ENOSPC" : "EIO", per_store * 1e6,
	       (unsigned long)st.wb_io_errors, TRIES,
	       fault == ENOSPC ? "once file space was freed, " : "after ", waited);
}

/*
 * The backing file is corrupted behind the pool's back: a load must fail
 * with -EIO and leave @dst alone, never return the wrong bytes, for a
 * page kept raw as for a compressed one (one whose corruption still
 * decompresses: the last byte of an lz4 block is always a literal).
 */
static void test_corrupt_backing(void)
{
	char path[] = "/tmp/zpool-fault-XXXXXX", err[4096];
	struct zp_options o = { 0 };
	struct zp_pool *pool;
	struct zp_stats st;
	unsigned char raw[ZPT_PAGE], text[ZPT_PAGE], out[ZPT_PAGE], fill[ZPT_PAGE];
	unsigned char byte;
	uint64_t rng = 12;
	zp_entry_t er, et;
	struct stat sb;
	off_t at[2];
	int fd = mkstemp(path), r1, r2;

	o.backing = path;
	CHECK(zp_create_pool(&o, &pool) == 0, "create pool");
	zpt_page_random(&rng, raw);
	zpt_page_text(&rng, text);
	CHECK(zp_store(pool, raw, &er) == 0 && zp_store(pool, text, &et) == 0,
	      "store");
	CHECK(zp_writeback(pool, 2) == 2, "writeback");
	/* The raw page went first, at 0; the text page ends the file. */
	CHECK(fstat(fd, &sb) == 0 && sb.st_size > ZPT_PAGE, "backing size");
	at[0] = 100;
	at[1] = sb.st_size - 1;
	for (int i = 0; i < 2; i++) {
		CHECK(pread(fd, &byte, 1, at[i]) == 1, "read back");
		byte ^= 0x20;
		CHECK(pwrite(fd, &byte, 1, at[i]) == 1, "corrupt");
	}
	memset(fill, 0xa5, sizeof(fill));
	memcpy(out, fill, sizeof(out));
	capture(true, NULL, 0);
	r1 = zp_load(pool, er, out);
	CHECK(r1 == -EIO, "load of a corrupted raw page returned %d (%s)", r1,
	      memcmp(out, raw, ZPT_PAGE) ? "wrong bytes" : "right bytes");
	CHECK(memcmp(out, fill, ZPT_PAGE) == 0, "failed load wrote into dst");
	r2 = zp_load(pool, et, out);
	CHECK(r2 == -EIO, "load of a corrupted compressed page returned %d (%s)", r2,
	      memcmp(out, text, ZPT_PAGE) ? "wrong bytes" : "right bytes");
	CHECK(memcmp(out, fill, ZPT_PAGE) == 0, "failed load wrote into dst");
	capture(false, err, sizeof(err));
	zp_pool_stats(pool, &st);
	CHECK(st.wb_read_errors == 2, "read errors %lu", (unsigned long)st.wb_read_errors);
	CHECK(count(err, "cgmalloc: zpool: ") >= 1 && strstr(err, "checksum"),
	      "stderr: %s", err);
	/* The entries stay: repaired, the file loads again. */
	for (int i = 0; i < 2; i++) {
		CHECK(pread(fd, &byte, 1, at[i]) == 1, "read back");
		byte ^= 0x20;
		CHECK(pwrite(fd, &byte, 1, at[i]) == 1, "repair");
	}
	CHECK(zp_load(pool, er, out) == 0 && memcmp(out, raw, ZPT_PAGE) == 0,
	      "raw page after repair");
	CHECK(zp_load(pool, et, out) == 0 && memcmp(out, text, ZPT_PAGE) == 0,
	      "text page after repair");
	CHECK(zp_invalidate(pool, er) == 0 && zp_invalidate(pool, et) == 0,
	      "invalidate");
	zp_destroy_pool(pool);
	close(fd);
	unlink(path);
	printf("corrupted backing file: loads returned %d (raw), %d (lz4), "
	       "dst untouched\n", r1, r2);
}

/* Without io_uring, writeback and loads fall back to pwrite/pread. */
static void test_without_io_uring(void)
{
	char path[] = "/tmp/zpool-fault-XXXXXX", err[4096];
	int fd = mkstemp(path), status = 0;
	pid_t pid;

	close(fd);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		struct zp_options o = { .backing = path };
		struct zp_pool *pool;
		long w;
		int bad;

		/* io_uring_setup fails with ENOSYS from here on. */
		if (seccomp_refuse(__NR_io_uring_setup, ENOSYS)) {
			printf("SKIP without io_uring: seccomp unavailable\n");
			_exit(0);
		}
		capture(true, NULL, 0);
		if (zp_create_pool(&o, &pool))
			_exit(3);
		make_pages(4);
		store_all(pool);
		w = zp_writeback(pool, N);
		bad = (int)verify_all(pool);
		release_all(pool);
		zp_destroy_pool(pool);
		capture(false, err, sizeof(err));
		if (w != N || bad || failures ||
		    !strstr(err, "io_uring unavailable (Function not implemented)")) {
			printf("FAIL: without io_uring wrote %ld, %d loads differ; "
			       "stderr: %s\n", w, bad, err);
			fflush(stdout);
			_exit(1);
		}
		printf("without io_uring: wrote %ld with pwrite, all loads identical\n", w);
		fflush(stdout);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "child without io_uring failed (status %d)", status);
	unlink(path);
}

int main(void)
{
	const char *source;

	pages = malloc(sizeof(*pages) * N);
	nheap = zpt_heap_pages(256, &heap, &source);
	if (!pages || nheap <= 0) {
		fprintf(stderr, "setup failed\n");
		return 2;
	}
	test_injected_errors();
	test_writeback_all_failed();
	test_refused_store_backs_off(ENOSPC);
	test_refused_store_backs_off(EIO);
	test_corrupt_backing();
	test_without_io_uring();
	test_limit_over_failing_disk();
	test_full_disk();	/* last: it may leave RLIMIT_FSIZE behind */
	printf("%lu passed, %lu failed\n", checks - failures, failures);
	return failures ? 1 : 0;
}
