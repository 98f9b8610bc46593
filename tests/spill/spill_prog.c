/*
 * A program whose memory gets spilled (tests/spill/test_*.sh).
 *
 *   spill_prog GO_FILE [SMALL_MB [LARGE_MB [MAPPED_MB]]]
 *
 * Fills small heap objects, a large heap block and a mapping of its own
 * with bytes computed from their position, says "spill_prog: ready", and
 * then keeps reaching the allocator's slow paths (so that it answers
 * reclaim) until GO_FILE exists.  Then, on memory the test has had
 * spilled, it checks what touching spilled pages must do: a signal
 * handler that reads them, write(2) from them and read(2) into them,
 * MADV_DONTNEED (zeros), mremap (the bytes move), four threads reading the
 * same pages, a forked child reading them, and every byte at the end.
 * Each check prints "spill_prog: ok NAME"; a wrong byte prints
 * "spill_prog: FAIL ..." and the status is 1.
 *
 * With SPILL_PROG_CLOSE_ALL=1 in the environment it first closes every
 * descriptor above stderr as a daemon does, three ways in turn (close()
 * of each number below 1024, closefrom(3), close_range(3, ~0U, 0)), so
 * that the checks after run on what is left.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096u

static unsigned char **small;
static size_t nsmall;
static unsigned char *large, *mapped;
static size_t large_len, mapped_len;
static int failed;

/* The byte at @i of object @obj: compressible but not same-filled. */
static unsigned char expect(size_t obj, size_t i)
{
	return (unsigned char)((obj * 31 + i / 16 * 7 + (i % 16 == 0 ? obj >> 3 : 0)) & 0xff);
}

static size_t small_len(size_t obj)
{
	return 200 + (obj * 37) % 800;
}

static void fill(unsigned char *p, size_t len, size_t obj)
{
	for (size_t i = 0; i < len; i++)
		p[i] = expect(obj, i);
}

/* First wrong byte of @p against object @obj's bytes from @from, or -1. */
static long check(const unsigned char *p, size_t len, size_t obj, size_t from)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != expect(obj, from + i))
			return (long)i;
	return -1;
}

static void fail(const char *what, long at)
{
	fprintf(stderr, "spill_prog: FAIL %s (byte %ld)\n", what, at);
	failed = 1;
}

static void ok(const char *what)
{
	fprintf(stderr, "spill_prog: ok %s\n", what);
}

static volatile sig_atomic_t handler_bad = -2;

static void on_usr1(int sig)
{
	(void)sig;
	/* Reads spilled heap bytes inside a signal handler. */
	handler_bad = (sig_atomic_t)check(small[nsmall / 2], small_len(nsmall / 2), nsmall / 2, 0);
}

static void *reader(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)check(large, large_len, 1000000, 0);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* The descriptor open() would return next. */
static int lowest_free_fd(void)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	if (fd >= 0)
		close(fd);
	return fd;
}

static void checks(void)
{
	unsigned char buf[4 * PAGE];
	pthread_t th[4];
	struct timespec t0, t1;
	int fds[2];
	long at;
	pid_t child;
	int st = 0, lowest;

	/* A signal handler that touches a spilled page. */
	signal(SIGUSR1, on_usr1);
	raise(SIGUSR1);
	if (handler_bad != -1)
		fail("signal handler read", handler_bad);
	else
		ok("signal");

	/* write(2) from spilled pages, and read(2) into spilled pages. */
	if (pipe(fds))
		exit(2);
	if (write(fds[1], large + 8 * PAGE, sizeof(buf)) != (ssize_t)sizeof(buf) ||
	    read(fds[0], buf, sizeof(buf)) != (ssize_t)sizeof(buf))
		fail("write from spilled pages: short", errno);
	else if ((at = check(buf, sizeof(buf), 1000000, 8 * PAGE)) >= 0)
		fail("write from spilled pages", at);
	else
		ok("write");
	fill(buf, sizeof(buf), 2000000);
	if (write(fds[1], buf, sizeof(buf)) != (ssize_t)sizeof(buf) ||
	    read(fds[0], mapped + 16 * PAGE, sizeof(buf)) != (ssize_t)sizeof(buf))
		fail("read into spilled pages: short", errno);
	else if ((at = check(mapped + 16 * PAGE, sizeof(buf), 2000000, 0)) >= 0)
		fail("read into spilled pages", at);
	else
		ok("read");
	/* The model follows: those pages hold the pipe's bytes now. */
	memcpy(mapped + 16 * PAGE, buf, sizeof(buf));
	close(fds[0]);
	close(fds[1]);

	/* Discarded spilled pages read as zeros. */
	if (madvise(mapped + 32 * PAGE, 4 * PAGE, MADV_DONTNEED))
		fail("madvise", errno);
	for (size_t i = 0; i < 4 * PAGE; i++)
		if (mapped[32 * PAGE + i]) {
			fail("MADV_DONTNEED left bytes", (long)i);
			break;
		}
	ok("dontneed");
	memset(mapped + 32 * PAGE, 0, 4 * PAGE);

	/* mremap moves spilled pages with their bytes. */
	{
		unsigned char *to = mremap(mapped, mapped_len, mapped_len, MREMAP_MAYMOVE);

		if (to == MAP_FAILED) {
			fail("mremap", errno);
		} else {
			mapped = to;
			if ((at = check(mapped + 64 * PAGE, mapped_len - 64 * PAGE, 3000000,
					64 * PAGE)) >= 0)
				fail("mremap moved", at);
			else
				ok("mremap");
		}
	}

	/* Many threads faulting the same pages. */
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, reader, NULL);
	for (int i = 0; i < 4; i++) {
		void *r;

		pthread_join(th[i], &r);
		if ((intptr_t)r != -1)
			fail("threads", (long)(intptr_t)r);
	}
	ok("threads");

	/*
	 * A forked child sees every byte (it serves itself from its copy of the pool, or, without
	 * fork events, the parent's spilled pages came back first: time it).  The fork takes
	 * no low descriptor of the program's, in the parent or in the child: the number
	 * open() would give next is the same after it (a socket of the library's once sat at 3).
	 */
	lowest = lowest_free_fd();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	child = fork();
	if (child > 0) {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		fprintf(stderr, "spill_prog: fork took %.1f ms\n",
			(double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	}
	if (child == 0) {
		int now = lowest_free_fd();

		if (now != lowest) {
			fprintf(stderr, "spill_prog: child: next descriptor %d, %d before the fork\n",
				now, lowest);
			_exit(2);
		}
		for (size_t o = 0; o < nsmall; o++)
			if (check(small[o], small_len(o), o, 0) >= 0)
				_exit(1);
		_exit(check(large, large_len, 1000000, 0) >= 0 ? 1 : 0);
	}
	if (child < 0 || waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st))
		fail(WIFEXITED(st) && WEXITSTATUS(st) == 2 ? "fork took a low descriptor in the child" :
		     "fork child saw other bytes", child);
	else if (lowest_free_fd() != lowest)
		fail("fork left a low descriptor in the parent", lowest_free_fd());
	else
		ok("fork");
}

int main(int argc, char **argv)
{
	size_t small_mb = argc > 2 ? strtoul(argv[2], NULL, 0) : 24;
	size_t large_mb = argc > 3 ? strtoul(argv[3], NULL, 0) : 16;
	size_t mapped_mb = argc > 4 ? strtoul(argv[4], NULL, 0) : 16;
	size_t bytes = 0;
	long at;

	if (argc < 2) {
		fprintf(stderr, "usage: spill_prog GO_FILE [SMALL_MB [LARGE_MB [MAPPED_MB]]]\n");
		return 2;
	}
	small = malloc(sizeof(*small) * (small_mb << 20) / 200);
	for (nsmall = 0; bytes < small_mb << 20; nsmall++) {
		small[nsmall] = malloc(small_len(nsmall));
		fill(small[nsmall], small_len(nsmall), nsmall);
		bytes += small_len(nsmall);
	}
	large_len = (large_mb << 20) + 16 * PAGE;
	large = malloc(large_len);
	fill(large, large_len, 1000000);
	mapped_len = (mapped_mb << 20) + 64 * PAGE;
	mapped = mmap(NULL, mapped_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!small || !large || mapped == MAP_FAILED)
		return 2;
	fill(mapped, mapped_len, 3000000);
	fprintf(stderr, "spill_prog: ready\n");

	while (access(argv[1], F_OK) != 0) {
		/* volatile: the compiler may not drop a malloc/free pair. */
		void *volatile p = malloc(300 << 10);

		free(p);
		sleep_ms(2);
	}
	if (getenv("SPILL_PROG_CLOSE_ALL")) {
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
		closefrom(3);
		close_range(3, ~0U, 0);
		fprintf(stderr, "spill_prog: closed every descriptor above 2\n");
	}
	checks();
	for (size_t o = 0; o < nsmall; o++)
		if ((at = check(small[o], small_len(o), o, 0)) >= 0) {
			fail("small object", at);
			break;
		}
	if ((at = check(large, large_len, 1000000, 0)) >= 0)
		fail("large block", at);
	if ((at = check(mapped + 64 * PAGE, mapped_len - 64 * PAGE, 3000000, 64 * PAGE)) >= 0)
		fail("mapping", at);
	if ((at = check(mapped + 16 * PAGE, 4 * PAGE, 2000000, 0)) >= 0)
		fail("mapping (pipe bytes)", at);
	if (!failed)
		fprintf(stderr, "spill_prog: verified\n");
	return failed;
}
