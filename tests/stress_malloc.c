/*
 * Multithreaded stress of the allocator behind libcgmalloc.so.
 *
 * Eight worker threads share one array of slots.  Each operation puts a new
 * block into a random slot with an atomic exchange and frees whatever it
 * took out -- usually a block that another thread allocated, so most frees
 * cross threads.  Other operations take a block out and walk it through a
 * chain of reallocs, or churn short-lived and aligned blocks locally.
 * Sizes run from 1 byte to 64 MiB, heavily biased to small ones; a budget
 * on the bytes held in big blocks keeps the resident size bounded.
 *
 * Every block describes itself (see the encoding below): its size and a
 * seed are stored in the block and every other byte is a pattern derived
 * from the seed, so a block is verified before every free and after every
 * realloc by whichever thread holds it, with nothing kept beside it.
 *
 * While the workers run, the main thread forks.  The child (one thread,
 * whatever the other threads were doing) verifies every block, frees and
 * allocates, starts threads of its own and exits 0; the parent's workers
 * carry on and the main thread verifies everything at the end.  A child
 * is taken for deadlocked when it does no operation for a minute, not
 * when it runs long: with the parent's eight workers beside it, a child
 * of the long run took 200 s on a machine where a page fault costs 10 us.
 *
 * Usage: stress_malloc [OPS_PER_THREAD [FORKS [SEED]]]
 * Exits 0 when every check passed; prints what failed and aborts otherwise.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
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

#ifndef STRESS_NO_SHIM
#include <mimalloc.h>
#include "cgmalloc.h"
#endif

#define NTHREADS	8
#define NSLOTS		4096
#define NLOCAL		32		/* per-thread short-lived blocks */
#define BIG		(1u << 20)	/* blocks from here on count against the budget */
#define SIZE_LIMIT	(64u << 20)
/* Bytes held in big blocks by all threads (and a child) together. */
#define BIG_BUDGET	(768ull << 20)
/* A child that does no operation for this long is taken for deadlocked. */
#define CHILD_STALL_S	60

static _Atomic(unsigned char *) slots[NSLOTS];
static _Atomic uint64_t big_bytes;
static _Atomic uint64_t ops_done;
static _Atomic uint64_t stat_frees, stat_reallocs, stat_cross;
static uint64_t ops_per_thread;
static const char *who = "parent";
/* Operations of the running child, in memory it shares with the parent. */
static _Atomic uint64_t *child_ops;
static bool in_child;

/* In the child, one more operation done: the parent's sign it is not stuck. */
static inline void child_progress(void)
{
	if (in_child)
		atomic_fetch_add_explicit(child_ops, 1, memory_order_relaxed);
}
static char seed_text[32] = "?";		/* printed with a failure, to rerun it */

static _Noreturn void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static _Noreturn void fail(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(buf))
		n = sizeof(buf) - 1;
	/* No stdio: the failing thread may be a forked child. */
	if (write(STDERR_FILENO, "stress_malloc: FAIL (", 21) < 0 ||
	    write(STDERR_FILENO, who, strlen(who)) < 0 ||
	    write(STDERR_FILENO, ", seed ", 7) < 0 ||
	    write(STDERR_FILENO, seed_text, strlen(seed_text)) < 0 ||
	    write(STDERR_FILENO, "): ", 3) < 0 ||
	    write(STDERR_FILENO, buf, (size_t)n) < 0 ||
	    write(STDERR_FILENO, "\n", 1) < 0)
		abort();
	abort();
}

/* xorshift64*: per-thread, reproducible from the seed. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1Dull;
}

/* splitmix64's finaliser: independent seeds from one. */
static uint64_t mix_seed(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static uint64_t rnd_range(uint64_t *s, uint64_t lo, uint64_t hi)
{
	return lo + rnd(s) % (hi - lo + 1);
}

/*
 * Block encoding.
 *   size < 16:  byte 0 = size, byte 1 = an 8-bit seed, byte i>=2 = tiny_byte()
 *   size >= 16: bytes 0..7 = size << 8 (so byte 0 is 0), bytes 8..15 = the
 *               64-bit seed, byte i>=16 = byte i%8 of pattern_word(seed, i/8)
 * The pattern of a big block depends only on the seed and the offset, so a
 * realloc that grows it only fills the new tail.
 */
#define HDR 16

static unsigned char tiny_byte(unsigned seed8, size_t i)
{
	return (unsigned char)(seed8 * 37u + i * 101u + 7u);
}

/* One multiply: cheap enough to fill 64 MiB, and a word moved is a mismatch. */
static inline uint64_t pattern_word(uint64_t seed, uint64_t k)
{
	return (seed + k) * 0x9E3779B97F4A7C15ull;
}

static unsigned char pattern_byte(uint64_t seed, size_t i)
{
	return (unsigned char)(pattern_word(seed, i / 8) >> (8 * (i % 8)));
}

static void fill_pattern(unsigned char *p, uint64_t seed, size_t from, size_t to)
{
	size_t i = from;

	for (; i < to && i % 8 != 0; i++)
		p[i] = pattern_byte(seed, i);
	for (; i + 8 <= to; i += 8) {
		uint64_t w = pattern_word(seed, i / 8);

		memcpy(p + i, &w, 8);
	}
	for (; i < to; i++)
		p[i] = pattern_byte(seed, i);
}

/* Offset of the first byte in [from, to) that differs, or SIZE_MAX. */
static size_t check_pattern(const unsigned char *p, uint64_t seed, size_t from,
			    size_t to)
{
	size_t i = from;

	for (; i < to && i % 8 != 0; i++)
		if (p[i] != pattern_byte(seed, i))
			return i;
	for (; i + 8 <= to; i += 8) {
		uint64_t w = pattern_word(seed, i / 8), v;

		memcpy(&v, p + i, 8);
		if (v != w)
			break;
	}
	for (; i < to; i++)
		if (p[i] != pattern_byte(seed, i))
			return i;
	return SIZE_MAX;
}

static void write_header(unsigned char *p, size_t n, uint64_t seed)
{
	uint64_t h = (uint64_t)n << 8;

	memcpy(p, &h, 8);
	memcpy(p + 8, &seed, 8);
}

/* Encode a whole block of @n bytes from @seed. */
static void encode(unsigned char *p, size_t n, uint64_t seed)
{
	if (n < HDR) {
		p[0] = (unsigned char)n;
		if (n > 1)
			p[1] = (unsigned char)seed;
		for (size_t i = 2; i < n; i++)
			p[i] = tiny_byte((unsigned char)seed, i);
		return;
	}
	write_header(p, n, seed);
	fill_pattern(p, seed, HDR, n);
}

struct blockinfo {
	size_t size;
	uint64_t seed;
};

/* Read a block's self-description; fails on a header that cannot be right. */
static struct blockinfo decode(const unsigned char *p)
{
	struct blockinfo b;
	size_t usable = malloc_usable_size((void *)p);
	uint64_t h;

	if (p[0] != 0) {
		b.size = p[0];
		b.seed = b.size > 1 ? p[1] : 0;
		if (b.size >= HDR)
			fail("block %p: tiny size byte %zu out of range", (void *)p, b.size);
	} else {
		memcpy(&h, p, 8);
		memcpy(&b.seed, p + 8, 8);
		b.size = (size_t)(h >> 8);
		if ((h & 0xff) != 0 || b.size < HDR || b.size > SIZE_LIMIT)
			fail("block %p: corrupt header %#" PRIx64, (void *)p, h);
	}
	if (usable < b.size)
		fail("block %p: malloc_usable_size %zu < size %zu", (void *)p, usable, b.size);
	return b;
}

/* Offset of the first byte of [0, upto) that differs from the encoding of @b. */
static size_t first_mismatch(const unsigned char *p, struct blockinfo b, size_t upto)
{
	if (b.size < HDR) {
		if (upto > 0 && p[0] != b.size)
			return 0;
		if (upto > 1 && p[1] != (unsigned char)b.seed)
			return 1;
		for (size_t i = 2; i < upto; i++)
			if (p[i] != tiny_byte((unsigned char)b.seed, i))
				return i;
		return SIZE_MAX;
	}
	if (upto >= HDR) {
		unsigned char hdr[HDR];

		write_header(hdr, b.size, b.seed);
		for (size_t i = 0; i < HDR; i++)
			if (p[i] != hdr[i])
				return i;
		return check_pattern(p, b.seed, HDR, upto);
	}
	{
		unsigned char hdr[HDR];

		write_header(hdr, b.size, b.seed);
		for (size_t i = 0; i < upto; i++)
			if (p[i] != hdr[i])
				return i;
	}
	return SIZE_MAX;
}

static struct blockinfo verify(const unsigned char *p, const char *when)
{
	struct blockinfo b = decode(p);
	size_t bad = first_mismatch(p, b, b.size);

	if (bad != SIZE_MAX)
		fail("block %p (%zu bytes, seed %#" PRIx64 ") %s: byte %zu is %#x",
		     (void *)p, b.size, b.seed, when, bad, p[bad]);
	return b;
}

/* The big-block budget: reserve @n bytes if @n is big and the budget allows. */
static int big_reserve(size_t n)
{
	uint64_t cur;

	if (n < BIG)
		return 1;
	cur = atomic_load_explicit(&big_bytes, memory_order_relaxed);
	do {
		if (cur + n > BIG_BUDGET)
			return 0;
	} while (!atomic_compare_exchange_weak(&big_bytes, &cur, cur + n));
	return 1;
}

static void big_release(size_t n)
{
	if (n >= BIG)
		atomic_fetch_sub(&big_bytes, n);
}

/* A random size: 1 B .. 64 MiB, mostly tiny; big ones only within budget. */
static size_t pick_size(uint64_t *rs)
{
	uint64_t r = rnd(rs) % 100000;
	size_t n;

	if (r < 60000)
		n = rnd_range(rs, 1, 128);
	else if (r < 85000)
		n = rnd_range(rs, 129, 1024);
	else if (r < 96000)
		n = rnd_range(rs, 1025, 32 << 10);
	else if (r < 99500)
		n = rnd_range(rs, (32 << 10) + 1, BIG - 1);
	else if (r < 99950)
		n = rnd_range(rs, BIG, 8u << 20);
	else
		n = rnd_range(rs, (8u << 20) + 1, SIZE_LIMIT);
	if (!big_reserve(n))
		n = rnd_range(rs, 1, 4096);
	return n;
}

static unsigned char *new_block(uint64_t *rs)
{
	size_t n = pick_size(rs);
	unsigned char *p = malloc(n);

	if (!p)
		fail("malloc(%zu) returned NULL (errno %d)", n, errno);
	if (((uintptr_t)p & (n > 8 ? 15 : 7)) != 0)
		fail("malloc(%zu) returned %p: misaligned", n, (void *)p);
	encode(p, n, rnd(rs));
	return p;
}

static void free_block(unsigned char *p, const char *when)
{
	struct blockinfo b = verify(p, when);

	big_release(b.size);
	free(p);
	atomic_fetch_add_explicit(&stat_frees, 1, memory_order_relaxed);
}

/*
 * Resize @p to a random size, verify what realloc kept and re-encode.
 * Returns the new block.
 */
static unsigned char *realloc_step(unsigned char *p, uint64_t *rs)
{
	struct blockinfo b = verify(p, "before realloc");
	size_t n, keep, bad;
	unsigned char *q;
	uintptr_t old;

	switch (rnd(rs) % 4) {
	case 0:		/* grow a little: often in place */
		n = b.size + (size_t)rnd_range(rs, 1, 64);
		break;
	case 1:		/* shrink */
		n = b.size > 1 ? (size_t)rnd_range(rs, 1, b.size) : 1;
		break;
	case 2:		/* double */
		n = b.size * 2;
		break;
	default:	/* anything */
		n = pick_size(rs);
		big_release(n);	/* reserved again below, with the old size released */
		break;
	}
	if (n > SIZE_LIMIT)
		n = SIZE_LIMIT;
	big_release(b.size);
	if (!big_reserve(n))
		n = b.size < BIG ? b.size : 4096;	/* needs no reservation */
	old = (uintptr_t)p;	/* only printed: p is gone after realloc */
	q = realloc(p, n);
	if (!q)
		fail("realloc(%#" PRIxPTR ", %zu) returned NULL (errno %d)", old, n, errno);
	keep = b.size < n ? b.size : n;
	bad = first_mismatch(q, b, keep);
	if (bad != SIZE_MAX)
		fail("realloc %zu -> %zu moved %#" PRIxPTR " -> %p: byte %zu is %#x",
		     b.size, n, old, (void *)q, bad, q[bad]);
	if (malloc_usable_size(q) < n)
		fail("realloc to %zu: usable size %zu", n, malloc_usable_size(q));
	if (b.size >= HDR && n >= HDR) {
		write_header(q, n, b.seed);
		if (n > b.size)
			fill_pattern(q, b.seed, b.size, n);
	} else {
		encode(q, n, rnd(rs));
	}
	atomic_fetch_add_explicit(&stat_reallocs, 1, memory_order_relaxed);
	return q;
}

/* Put @p into a random slot and free what was there (usually another thread's). */
static void publish(unsigned char *p, uint64_t *rs)
{
	unsigned char *old = atomic_exchange(&slots[rnd(rs) % NSLOTS], p);

	if (old) {
		free_block(old, "before a cross-thread free");
		atomic_fetch_add_explicit(&stat_cross, 1, memory_order_relaxed);
	}
}

/* Short-lived blocks of this thread: calloc, aligned forms, free in place. */
static void local_churn(unsigned char **local, uint64_t *rs)
{
	size_t i = rnd(rs) % NLOCAL, n = (size_t)rnd_range(rs, 1, 8192);
	unsigned char *p = NULL;

	if (local[i])
		free_block(local[i], "before a local free");
	local[i] = NULL;
	switch (rnd(rs) % 4) {
	case 0: {
		size_t nz = 0;

		p = calloc(1, n);
		if (!p)
			fail("calloc(1, %zu) returned NULL", n);
		for (size_t j = 0; j < n; j++)
			nz += p[j] != 0;
		if (nz)
			fail("calloc(1, %zu): %zu bytes not zero", n, nz);
		break;
	}
	case 1: {
		size_t align = (size_t)8 << (rnd(rs) % 14);	/* 8 .. 64 KiB */
		void *v = NULL;
		int err = posix_memalign(&v, align, n);

		if (err || ((uintptr_t)v & (align - 1)))
			fail("posix_memalign(%zu, %zu): %d, %p", align, n, err, v);
		p = v;
		break;
	}
	case 2: {
		size_t align = (size_t)16 << (rnd(rs) % 10);

		n = (n + align - 1) & ~(align - 1);	/* C11's rule for the size */
		p = aligned_alloc(align, n);
		if (!p || ((uintptr_t)p & (align - 1)))
			fail("aligned_alloc(%zu, %zu) returned %p", align, n, (void *)p);
		break;
	}
	default:
		p = malloc(n);
		if (!p)
			fail("malloc(%zu) returned NULL", n);
		break;
	}
	encode(p, n, rnd(rs));
	local[i] = p;
}

/* One operation of the mix; shared by the workers, the child and its threads. */
static void one_op(unsigned char **local, uint64_t *rs)
{
	unsigned r = (unsigned)(rnd(rs) % 100);
	unsigned char *p;

	if (r < 55) {
		publish(new_block(rs), rs);
	} else if (r < 70) {
		/* A realloc chain on a block taken out of the shared array. */
		p = atomic_exchange(&slots[rnd(rs) % NSLOTS], NULL);
		if (!p)
			p = new_block(rs);
		for (unsigned k = (unsigned)rnd_range(rs, 1, 6); k; k--)
			p = realloc_step(p, rs);
		verify(p, "after a realloc chain");
		publish(p, rs);
	} else if (r < 75) {
		p = atomic_exchange(&slots[rnd(rs) % NSLOTS], NULL);
		if (p)
			free_block(p, "before free");
	} else {
		local_churn(local, rs);
	}
	child_progress();
}

static void free_locals(unsigned char **local)
{
	for (size_t i = 0; i < NLOCAL; i++)
		if (local[i]) {
			free_block(local[i], "before a local free");
			local[i] = NULL;
		}
}

struct worker_arg {
	uint64_t seed;
	uint64_t ops;
};

static void *worker(void *argp)
{
	struct worker_arg *a = argp;
	unsigned char *local[NLOCAL] = { 0 };
	uint64_t rs = a->seed;

	for (uint64_t i = 0; i < a->ops; i++) {
		one_op(local, &rs);
		atomic_fetch_add_explicit(&ops_done, 1, memory_order_relaxed);
	}
	free_locals(local);
	return NULL;
}

static void verify_all(const char *when)
{
	for (size_t i = 0; i < NSLOTS; i++) {
		unsigned char *p = atomic_load(&slots[i]);

		if (p)
			verify(p, when);
		child_progress();
	}
}

static void free_all(void)
{
	for (size_t i = 0; i < NSLOTS; i++) {
		unsigned char *p = atomic_exchange(&slots[i], NULL);

		if (p)
			free_block(p, "before the final free");
	}
}

/*
 * The forked child: it has one thread; the parent's workers vanished in the
 * middle of whatever they were doing.  Every published block is complete
 * (a block enters a slot only once encoded), so all of them must verify.
 */
static _Noreturn void child_main(uint64_t seed)
{
	uint64_t ops = ops_per_thread / 20 + 100, rs = seed | 1;
	struct worker_arg a[2] = { { seed * 3 | 1, ops }, { seed * 5 | 1, ops } };
	unsigned char *local[NLOCAL] = { 0 };
	pthread_t t[2];

	who = "child";
	in_child = true;
	verify_all("in the child, after fork");
	/* Free half of the parent's blocks, then allocate and resize. */
	for (size_t i = 0; i < NSLOTS; i += 2) {
		unsigned char *p = atomic_exchange(&slots[i], NULL);

		if (p)
			free_block(p, "in the child, before free");
	}
	for (uint64_t i = 0; i < ops; i++)
		one_op(local, &rs);
	/* Threads started in the child get heaps of their own. */
	for (int i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, worker, &a[i]))
			fail("pthread_create in the child");
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	free_locals(local);
	verify_all("in the child, at the end");
	free_all();
	_exit(0);
}

static void wait_child(pid_t pid)
{
	struct timespec nap = { 0, 10 * 1000 * 1000 };
	uint64_t seen = atomic_load(child_ops);
	int status, still = 0;	/* naps of 10 ms since the child's count last moved */

	while (still < CHILD_STALL_S * 100) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		uint64_t now = atomic_load(child_ops);

		if (r == pid) {
			if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
				return;
			if (WIFSIGNALED(status))
				fail("forked child %d killed by signal %d", (int)pid,
				     WTERMSIG(status));
			fail("forked child %d exited with status %d", (int)pid,
			     WEXITSTATUS(status));
		}
		if (r < 0)
			fail("waitpid(%d): errno %d", (int)pid, errno);
		if (now != seen) {
			seen = now;
			still = 0;
		} else {
			still++;
		}
		nanosleep(&nap, NULL);
	}
	kill(pid, SIGKILL);
	fail("forked child %d did no operation in %d s (deadlock after fork?)",
	     (int)pid, CHILD_STALL_S);
}

static void check_shim_active(void)
{
#ifndef STRESS_NO_SHIM
	void *(*volatile mallocp)(size_t) = malloc;
	void *p = mallocp(24);
	Dl_info info;

	if (cgm_initialized() != 1)
		fail("cgm_initialized() is %d: the shim is not active", cgm_initialized());
	/* The malloc this program calls is the shim's, not libc's or mimalloc's. */
	if (!dladdr((void *)mallocp, &info) || !info.dli_fname ||
	    !strstr(info.dli_fname, "libcgmalloc"))
		fail("malloc is bound to %s, not libcgmalloc.so",
		     info.dli_fname ? info.dli_fname : "?");
	if (!mi_is_in_heap_region(p))
		fail("malloc() does not return mimalloc memory");
	free(p);
#endif
}

int main(int argc, char **argv)
{
	struct worker_arg args[NTHREADS];
	pthread_t tids[NTHREADS];
	uint64_t seed = 1, forks = 4, total;
	unsigned char *local[NLOCAL] = { 0 };
	struct timespec t0, t1;

	if (argc > 1)
		ops_per_thread = strtoull(argv[1], NULL, 0);
	if (argc > 2)
		forks = strtoull(argv[2], NULL, 0);
	if (argc > 3)
		seed = strtoull(argv[3], NULL, 0);
	if (ops_per_thread == 0)
		ops_per_thread = 100000;
	snprintf(seed_text, sizeof(seed_text), "%" PRIu64, seed);
	child_ops = mmap(NULL, sizeof(*child_ops), PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (child_ops == MAP_FAILED)
		fail("mmap of the child's counter: errno %d", errno);
	check_shim_active();
	clock_gettime(CLOCK_MONOTONIC, &t0);

	for (int i = 0; i < NTHREADS; i++) {
		args[i].seed = mix_seed(seed + (uint64_t)i + 1) | 1;
		args[i].ops = ops_per_thread;
		if (pthread_create(&tids[i], NULL, worker, &args[i]))
			fail("pthread_create");
	}

	/* Fork at evenly spaced points of the run, while the workers run. */
	total = ops_per_thread * NTHREADS;
	for (uint64_t f = 0; f < forks; f++) {
		uint64_t at = total * (f + 1) / (forks + 2);
		struct timespec nap = { 0, 1000 * 1000 };
		uint64_t rs = seed + f;
		pid_t pid;

		while (atomic_load(&ops_done) < at)
			nanosleep(&nap, NULL);
		pid = fork();
		if (pid < 0)
			fail("fork: errno %d", errno);
		if (pid == 0)
			child_main(mix_seed(seed + 1000 + f) | 1);
		/* The parent side allocates and verifies while the child runs. */
		for (int k = 0; k < 200; k++)
			one_op(local, &rs);
		wait_child(pid);
	}

	for (int i = 0; i < NTHREADS; i++)
		pthread_join(tids[i], NULL);
	free_locals(local);
	verify_all("at the end");
	free_all();
	if (atomic_load(&big_bytes) != 0)
		fail("budget bookkeeping: %" PRIu64 " big bytes left", atomic_load(&big_bytes));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("stress_malloc: seed %s, %d threads x %" PRIu64 " ops, %" PRIu64 " forks, %" PRIu64
	       " frees (%" PRIu64 " cross-thread), %" PRIu64 " reallocs, %.1f s: ok\n",
	       seed_text, NTHREADS, ops_per_thread, forks, atomic_load(&stat_frees),
	       atomic_load(&stat_cross), atomic_load(&stat_reallocs),
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}
