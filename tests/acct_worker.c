/*
 * A worker for the multi-process accounting test (test_accounting_mp.c),
 * run preloaded with libcgmalloc.so in a group of a private hierarchy.
 * It knows nothing of cgmalloc: it allocates with malloc/free/realloc,
 * reports what it holds on stdout, one line at a time, and waits for
 * commands on stdin.  Nothing here is allocated through stdio.
 *
 *   churn THREADS MS     threads allocate, free and pass blocks to each
 *                        other for MS ms, then hold; "started" first,
 *                        then "live BYTES USABLE BLOCKS"
 *   hog BYTES            allocate BYTES in 64 KiB blocks: "live ..."
 *   fill CHUNK MS        allocate CHUNK blocks until malloc fails, then
 *                        free and retry for MS ms: "full BYTES NULLS"
 *   fork BYTES           allocate, "ready"; on "fork": a child that
 *                        allocates its own and says "child PID"; on
 *                        "reap": the child exits, "reaped STATUS"
 *   consumer BYTES       one thread allocates, another (that never
 *                        allocates) frees: "done BYTES"
 * Commands: "free" (free everything, answer "freed"), "hog BYTES" (allocate
 * more, answer "live ..."), "live", "exit", EOF.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_BLOCKS (1 << 16)
#define BIG_BLOCK (64 * 1024)

/* The blocks held, in memory that is not itself charged. */
struct held {
	pthread_mutex_t lock;
	void **p;
	size_t *size;
	int n;
};

static struct held held;

static void say(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (write(STDOUT_FILENO, buf, (size_t)n) != n)
		_exit(7);
}

/*
 * The worker's own bookkeeping, out of the figures the tests check: not
 * malloc'd, and shared rather than private (cgmalloc charges a program's
 * private anonymous mappings, as the kernel would; shared ones it leaves
 * to the kernel's shmem accounting).  A forked child takes a copy of its
 * own (held_unshare), so that it never writes the parent's list.
 */
static void *map(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		_exit(6);
	return p;
}

static void held_init(void)
{
	pthread_mutex_init(&held.lock, NULL);
	held.p = map(MAX_BLOCKS * sizeof(void *));
	held.size = map(MAX_BLOCKS * sizeof(size_t));
}

static void held_unshare(void)
{
	void **p = map(MAX_BLOCKS * sizeof(void *));
	size_t *size = map(MAX_BLOCKS * sizeof(size_t));

	memcpy(p, held.p, held.n * sizeof(void *));
	memcpy(size, held.size, held.n * sizeof(size_t));
	munmap(held.p, MAX_BLOCKS * sizeof(void *));
	munmap(held.size, MAX_BLOCKS * sizeof(size_t));
	held.p = p;
	held.size = size;
}

static void held_add(void *p, size_t size)
{
	pthread_mutex_lock(&held.lock);
	if (held.n < MAX_BLOCKS) {
		held.p[held.n] = p;
		held.size[held.n++] = size;
		p = NULL;
	}
	pthread_mutex_unlock(&held.lock);
	free(p);
}

/* Take a random held block (any thread's): cross-thread frees. */
static void *held_take(unsigned int *seed, size_t *size)
{
	void *p = NULL;

	pthread_mutex_lock(&held.lock);
	if (held.n) {
		int k = (int)(rand_r(seed) % (unsigned int)held.n);

		p = held.p[k];
		*size = held.size[k];
		held.p[k] = held.p[--held.n];
		held.size[k] = held.size[held.n];
	}
	pthread_mutex_unlock(&held.lock);
	return p;
}

static void report_live(void)
{
	size_t bytes = 0, usable = 0;

	pthread_mutex_lock(&held.lock);
	for (int i = 0; i < held.n; i++) {
		bytes += held.size[i];
		usable += malloc_usable_size(held.p[i]);
	}
	say("live %zu %zu %d\n", bytes, usable, held.n);
	pthread_mutex_unlock(&held.lock);
}

static void free_all(void)
{
	pthread_mutex_lock(&held.lock);
	while (held.n)
		free(held.p[--held.n]);
	pthread_mutex_unlock(&held.lock);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- churn ---- */

static double churn_until;

static size_t rand_size(unsigned int *seed)
{
	unsigned int r = (unsigned int)rand_r(seed);

	switch (r % 16) {
	case 0: return 1 + r % (256 * 1024);
	case 1: case 2: case 3: return 1025 + r % 16384;
	default: return 1 + r % 1024;
	}
}

static void *churn_thread(void *arg)
{
	unsigned int seed = (unsigned int)(uintptr_t)arg * 7919u + (unsigned int)getpid();

	while (now_ms() < churn_until) {
		for (int i = 0; i < 256; i++) {
			unsigned int r = (unsigned int)rand_r(&seed) % 100;
			size_t size;
			void *p;

			if (r < 52) {
				size = rand_size(&seed);
				p = r < 45 ? malloc(size) : calloc(1, size);
				if (p) {
					memset(p, 1, size < 64 ? size : 64);
					held_add(p, size);
				}
			} else if (r < 95) {
				free(held_take(&seed, &size));
			} else {
				p = held_take(&seed, &size);
				if (p) {
					size_t n = rand_size(&seed);
					void *q = realloc(p, n);

					if (q)
						held_add(q, n);
					else
						held_add(p, size);
				}
			}
		}
		/* Keep what is held bounded, so that the test's figures stay small. */
		while (__atomic_load_n(&held.n, __ATOMIC_RELAXED) > 3000) {
			size_t size;

			free(held_take(&seed, &size));
		}
	}
	return NULL;
}

static void churn(int threads, int ms)
{
	pthread_t th[64];

	if (threads > 64)
		threads = 64;
	churn_until = now_ms() + ms;
	for (int i = 0; i < threads; i++)
		if (pthread_create(&th[i], NULL, churn_thread, (void *)(uintptr_t)i) != 0)
			_exit(5);
	say("started\n");
	/* The threads end their runs and exit: their stocks go back (thread exit). */
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	report_live();
}

/* ---- hog, fill ---- */

static size_t hog(size_t bytes)
{
	size_t got = 0;

	while (got < bytes) {
		void *p = malloc(BIG_BLOCK);

		if (!p)
			break;
		memset(p, 2, 64);
		held_add(p, BIG_BLOCK);
		got += BIG_BLOCK;
	}
	return got;
}

static void fill(size_t chunk, int ms)
{
	unsigned int seed = (unsigned int)getpid();
	double until;
	long nulls = 0;
	size_t bytes = 0;
	void *p;

	while ((p = malloc(chunk))) {
		held_add(p, chunk);
		bytes += chunk;
	}
	nulls++;
	if (errno != ENOMEM)
		say("error malloc returned NULL with errno %d\n", errno);
	/* At the limit: trade blocks with the other processes. */
	for (until = now_ms() + ms; now_ms() < until;) {
		size_t size;

		if (rand_r(&seed) % 2) {
			p = held_take(&seed, &size);
			if (p) {
				free(p);
				bytes -= size;
			}
		}
		p = malloc(chunk);
		if (p) {
			held_add(p, chunk);
			bytes += chunk;
		} else {
			nulls++;
		}
	}
	say("full %zu %ld\n", bytes, nulls);
}

/* ---- fork ---- */

static pid_t child;
static int child_pipe = -1;

static void fork_child(void)
{
	int fds[2];
	char c;

	if (pipe(fds) < 0)
		_exit(4);
	child = fork();
	if (child < 0)
		_exit(4);
	if (child == 0) {
		close(fds[1]);
		held_unshare();
		/* Its own allocations, some freed again. */
		hog(1 << 20);
		for (int i = 0; i < 8; i++) {
			size_t size;
			unsigned int seed = 1;

			free(held_take(&seed, &size));
		}
		say("child %d\n", (int)getpid());
		while (read(fds[0], &c, 1) > 0)
			;
		exit(0);	/* atexit: the shim detaches */
	}
	close(fds[0]);
	child_pipe = fds[1];
	say("forked %d\n", (int)child);
}

static void reap_child(void)
{
	int status = -1;

	close(child_pipe);
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	say("reaped %d\n", status);
}

/* ---- consumer ---- */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	void *slot;
	int done;
} handoff = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0 };

static size_t consumer_bytes;

static void *producer(void *arg)
{
	(void)arg;
	for (size_t got = 0; got < consumer_bytes; got += BIG_BLOCK) {
		void *p = malloc(BIG_BLOCK);

		pthread_mutex_lock(&handoff.lock);
		while (handoff.slot)
			pthread_cond_wait(&handoff.cond, &handoff.lock);
		handoff.slot = p;
		pthread_cond_broadcast(&handoff.cond);
		pthread_mutex_unlock(&handoff.lock);
	}
	pthread_mutex_lock(&handoff.lock);
	while (handoff.slot)
		pthread_cond_wait(&handoff.cond, &handoff.lock);
	handoff.done = 1;
	pthread_cond_broadcast(&handoff.cond);
	pthread_mutex_unlock(&handoff.lock);
	return NULL;
}

/* Frees only: this thread never calls malloc. */
static void *consumer(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&handoff.lock);
	for (;;) {
		while (!handoff.slot && !handoff.done)
			pthread_cond_wait(&handoff.cond, &handoff.lock);
		if (handoff.slot) {
			free(handoff.slot);
			handoff.slot = NULL;
			pthread_cond_broadcast(&handoff.cond);
		} else if (handoff.done) {
			break;
		}
	}
	pthread_mutex_unlock(&handoff.lock);
	return NULL;
}

static void consume(size_t bytes)
{
	pthread_t a, b;

	consumer_bytes = bytes;
	pthread_create(&b, NULL, consumer, NULL);
	pthread_create(&a, NULL, producer, NULL);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	say("done %zu\n", bytes);
}

/* ---- commands ---- */

static int read_line(char *buf, size_t len)
{
	size_t n = 0;

	while (n + 1 < len) {
		ssize_t r = read(STDIN_FILENO, buf + n, 1);

		if (r <= 0)
			return -1;
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = '\0';
	return 0;
}

int main(int argc, char **argv)
{
	char cmd[64];

	if (argc < 3) {
		say("error usage\n");
		return 2;
	}
	held_init();
	if (!strcmp(argv[1], "churn") && argc == 4) {
		churn(atoi(argv[2]), atoi(argv[3]));
	} else if (!strcmp(argv[1], "hog")) {
		hog(strtoul(argv[2], NULL, 0));
		report_live();
	} else if (!strcmp(argv[1], "fill") && argc == 4) {
		fill(strtoul(argv[2], NULL, 0), atoi(argv[3]));
	} else if (!strcmp(argv[1], "fork")) {
		hog(strtoul(argv[2], NULL, 0));
		say("ready\n");
	} else if (!strcmp(argv[1], "consumer")) {
		consume(strtoul(argv[2], NULL, 0));
	} else {
		say("error unknown mode %s\n", argv[1]);
		return 2;
	}
	while (read_line(cmd, sizeof(cmd)) == 0) {
		if (!strcmp(cmd, "free")) {
			free_all();
			say("freed\n");
		} else if (!strcmp(cmd, "fork")) {
			fork_child();
		} else if (!strcmp(cmd, "reap")) {
			reap_child();
		} else if (!strcmp(cmd, "live")) {
			report_live();
		} else if (!strncmp(cmd, "hog ", 4)) {
			hog(strtoul(cmd + 4, NULL, 0));
			report_live();
		} else if (!strcmp(cmd, "exit")) {
			break;
		}
	}
	return 0;
}
