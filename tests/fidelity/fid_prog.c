/*
 * Workloads for the fidelity checks (tests/fidelity, cgmctl compare):
 * each allocates in one of the ways the kernel and cgmalloc might count
 * differently, holds its peak for a moment (so that a sampler sees it),
 * frees, and holds again.
 *
 *	fid_prog bigtouch SIZE PCT	malloc SIZE, touch PCT% of it
 *	fid_prog mmap SIZE		mmap SIZE private anonymous, touch it all
 *	fid_prog mremap SIZE		mmap SIZE/2, touch it, mremap it to SIZE (it may
 *					move), touch the rest, shrink it back to SIZE/4
 *	fid_prog brk SIZE		sbrk SIZE, touch it all, give it back
 *	fid_prog shared SIZE		mmap SIZE shared anonymous, touch it all
 *	fid_prog sparse SIZE STEP	mmap SIZE private anonymous, touch a page in every
 *					STEP ("peak"), then a page in every STEP/8 ("more")
 *	fid_prog small SIZE		objects of 16..512 bytes, SIZE in all
 *	fid_prog mixed SIZE TOUCHED	blocks of 4 KiB..8 MiB, SIZE in all, TOUCHED of it touched
 *	fid_prog threads SIZE N		N threads of small objects, SIZE in all
 *	fid_prog freeall SIZE		small and large blocks, SIZE in all, then all freed
 *
 * Options after the mode's arguments: hold=MS (default 300); late=MS
 * (bigtouch: wait MS between the malloc and the touch, printing "made");
 * keep (bigtouch: exit with the block, not freed: what was touched is
 * seen only by a sample at exit); base=SIZE (bigtouch: first malloc SIZE
 * more and write it all, held to the end: a group that sits near its
 * limit before the block is filled);
 * busy (while holding, map and unmap 64 KiB every millisecond, so that
 * the program keeps reaching the library's slow path, where it answers
 * requests from other processes); and, for freeall, reclaim (write
 * 32M to memory.reclaim through the C API after the free).
 * It prints "peak" and "end" lines to stderr when it reaches each phase
 * (and, with busy, how many of those allocations failed).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <dlfcn.h>

static long hold_ms = 300;
static long late_ms;
static size_t base_bytes;
static int busy;
static int keep;
static long busy_failed;	/* busy allocations that returned NULL */

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	switch (*end) {
	case 'G': case 'g': v *= 1024;	/* fall through */
	case 'M': case 'm': v *= 1024;	/* fall through */
	case 'K': case 'k': v *= 1024;	break;
	default: break;
	}
	return (size_t)v;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void hold(const char *phase)
{
	struct timespec ms = { 0, 1000000 };
	double end = now_ms() + (double)hold_ms;

	fprintf(stderr, "fid_prog: %s\n", phase);
	while (now_ms() < end) {
		if (busy) {
			/*
			 * A mapping rather than malloc: it reaches the library's
			 * slow path without making mimalloc purge what it keeps
			 * (any allocation lets it decommit freed pages whose delay
			 * has passed), so that what reclaim finds is reclaim's.
			 */
			char *p = mmap(NULL, 64 << 10, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			if (p != MAP_FAILED) {
				p[0] = 1;
				munmap(p, 64 << 10);
			} else {
				busy_failed++;
			}
		}
		nanosleep(&ms, NULL);
	}
}

/* Touch one byte per page of [p, p + n). */
static void touch(char *p, size_t n)
{
	for (size_t i = 0; i < n; i += 4096)
		p[i] = (char)i;
}

static unsigned long rng = 88172645463325252UL;

static unsigned long next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

struct list {
	void **v;
	size_t n, cap;
};

static void push(struct list *l, void *p)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 1024;
		l->v = realloc(l->v, l->cap * sizeof(void *));
		if (!l->v)
			abort();
	}
	l->v[l->n++] = p;
}

static void free_all(struct list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	l->n = 0;
}

/* Small objects, @total bytes of them, written (as a program writes what it allocates). */
static void small_objects(struct list *l, size_t total)
{
	for (size_t got = 0; got < total;) {
		size_t n = 16 + next_rand() % 497;
		char *p = malloc(n);

		if (!p)
			abort();
		memset(p, 1, n);
		push(l, p);
		got += n;
	}
}

struct thread_arg {
	size_t bytes;
	struct list l;
};

static void *thread_main(void *arg)
{
	struct thread_arg *a = arg;

	small_objects(&a->l, a->bytes);
	return NULL;
}

/* mmap @n bytes, private or shared anonymous, touch them all, hold, unmap. */
static int map_touch_hold(size_t n, int shared)
{
	char *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
		       (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("fid_prog: mmap");
		return -1;
	}
	touch(p, n);
	hold("peak");
	munmap(p, n);
	return 0;
}

/* The C API, if the library is preloaded: write memory.reclaim of our own group. */
static void reclaim(void)
{
	int (*w)(const char *, const char *, const char *) =
		(int (*)(const char *, const char *, const char *))dlsym(RTLD_DEFAULT, "cgm_write");
	int err = w ? w(NULL, "memory.reclaim", "32M") : 0;

	fprintf(stderr, "fid_prog: reclaim %d\n", err);
}

int main(int argc, char **argv)
{
	struct list l = { 0 };
	const char *mode = argc > 1 ? argv[1] : "";
	int nargs = 0;
	int do_reclaim = 0;

	if (!strcmp(mode, "bigtouch") || !strcmp(mode, "mixed") || !strcmp(mode, "threads") ||
	    !strcmp(mode, "sparse"))
		nargs = 2;
	else if (!strcmp(mode, "mmap") || !strcmp(mode, "small") || !strcmp(mode, "freeall") ||
		 !strcmp(mode, "mremap") || !strcmp(mode, "brk") || !strcmp(mode, "shared"))
		nargs = 1;
	else {
		fprintf(stderr, "usage: fid_prog bigtouch|mmap|mremap|brk|shared|sparse|small|mixed|"
			"threads|freeall ARGS "
			"[hold=MS] [late=MS] [keep] [base=SIZE] [busy] [reclaim]\n");
		return 2;
	}
	if (argc < 2 + nargs)
		return 2;
	for (int i = 2 + nargs; i < argc; i++) {
		if (!strncmp(argv[i], "hold=", 5))
			hold_ms = atol(argv[i] + 5);
		else if (!strncmp(argv[i], "late=", 5))
			late_ms = atol(argv[i] + 5);
		else if (!strcmp(argv[i], "reclaim"))
			do_reclaim = 1;
		else if (!strcmp(argv[i], "busy"))
			busy = 1;
		else if (!strcmp(argv[i], "keep"))
			keep = 1;
		else if (!strncmp(argv[i], "base=", 5))
			base_bytes = parse_size(argv[i] + 5);
	}
	if (!strcmp(mode, "bigtouch")) {
		size_t n = parse_size(argv[2]);
		char *base = base_bytes ? malloc(base_bytes) : NULL;
		char *p = malloc(n);

		if (base_bytes && !base) {
			perror("fid_prog: malloc of base=");
			return 1;
		}
		if (base)
			touch(base, base_bytes);
		if (!p) {
			perror("fid_prog: malloc");
			return 1;
		}
		if (late_ms) {
			struct timespec ts = { late_ms / 1000, late_ms % 1000 * 1000000L };

			fprintf(stderr, "fid_prog: made\n");
			nanosleep(&ts, NULL);
		}
		touch(p, n / 100 * (size_t)atoi(argv[3]));
		hold("peak");
		if (!keep)
			free(p);
		free(base);
	} else if (!strcmp(mode, "mmap") || !strcmp(mode, "shared")) {
		if (map_touch_hold(parse_size(argv[2]), !strcmp(mode, "shared")) < 0)
			return 1;
	} else if (!strcmp(mode, "sparse")) {
		size_t n = parse_size(argv[2]), step = (size_t)atol(argv[3]) * 4096;
		char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (step < 8 * 4096) {
			fprintf(stderr, "fid_prog: sparse: STEP must be 8 pages or more\n");
			return 2;
		}
		if (p == MAP_FAILED) {
			perror("fid_prog: mmap");
			return 1;
		}
		for (size_t i = 0; i < n; i += step)
			p[i] = 1;
		hold("peak");
		for (size_t i = 0; i < n; i += step / 8)
			p[i] = 1;
		hold("more");
		munmap(p, n);
	} else if (!strcmp(mode, "mremap")) {
		size_t n = parse_size(argv[2]);
		char *p = mmap(NULL, n / 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			perror("fid_prog: mmap");
			return 1;
		}
		touch(p, n / 2);
		p = mremap(p, n / 2, n, MREMAP_MAYMOVE);
		if (p == MAP_FAILED) {
			perror("fid_prog: mremap");
			return 1;
		}
		touch(p + n / 2, n / 2);
		hold("peak");
		if (mremap(p, n, n / 4, 0) != p) {
			perror("fid_prog: mremap (shrink)");
			return 1;
		}
		hold("shrunk");
		munmap(p, n / 4);
	} else if (!strcmp(mode, "brk")) {
		size_t n = parse_size(argv[2]);
		char *p = sbrk((intptr_t)n);

		if (p == (void *)-1) {
			perror("fid_prog: sbrk");
			return 1;
		}
		touch(p, n);
		hold("peak");
		if (sbrk(-(intptr_t)n) == (void *)-1) {
			perror("fid_prog: sbrk (give back)");
			return 1;
		}
	} else if (!strcmp(mode, "small")) {
		small_objects(&l, parse_size(argv[2]));
		hold("peak");
		free_all(&l);
	} else if (!strcmp(mode, "mixed")) {
		size_t total = parse_size(argv[2]), touched = parse_size(argv[3]), got = 0;
		double share = (double)touched / (double)total;

		/* An allocator benchmark's pattern: blocks of many sizes, each touched in part. */
		while (got < total) {
			size_t n = (size_t)4096 << (next_rand() % 12);
			char *p = malloc(n);

			if (!p) {
				perror("fid_prog: malloc");
				return 1;
			}
			touch(p, (size_t)((double)n * share));
			push(&l, p);
			got += n;
		}
		hold("peak");
		free_all(&l);
	} else if (!strcmp(mode, "threads")) {
		int nt = atoi(argv[3]);
		pthread_t tid[64];
		struct thread_arg a[64];

		if (nt < 1 || nt > 64)
			return 2;
		for (int i = 0; i < nt; i++) {
			a[i] = (struct thread_arg){ .bytes = parse_size(argv[2]) / (size_t)nt };
			pthread_create(&tid[i], NULL, thread_main, &a[i]);
		}
		for (int i = 0; i < nt; i++)
			pthread_join(tid[i], NULL);
		hold("peak");
		for (int i = 0; i < nt; i++)
			free_all(&a[i].l);
	} else {
		size_t total = parse_size(argv[2]);

		small_objects(&l, total / 2);
		for (size_t got = 0; got < total / 2; got += 1 << 20) {
			char *p = malloc(1 << 20);

			if (!p)
				abort();
			touch(p, 1 << 20);
			push(&l, p);
		}
		hold("peak");
		free_all(&l);
		if (do_reclaim)
			reclaim();
	}
	free(l.v);
	hold("end");
	if (busy)
		fprintf(stderr, "fid_prog: busy failed %ld\n", busy_failed);
	return 0;
}
