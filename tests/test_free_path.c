/*
 * The two accounted frees (free_path=, shim/accounted.c) count the same.
 *
 * A working set of SLOTS blocks is churned: each step frees a random
 * block, after checking that it still holds its pattern, and allocates
 * another of a random size -- in "mixed" mode half of them up to 1 KiB
 * and half up to 16 KiB, in "small" mode all up to 1 KiB.  Two threads
 * do so at once, each with its own blocks, and every sixteenth free is
 * of a block the other thread made.  Then everything is freed, and the
 * process's memory.stat.local must show exactly the allocations made,
 * as many frees, and no live heap bytes left.
 *
 * Whether the process switched to the branch-free free is what
 * tests/test_free_path.sh reads from the verbose log.
 *
 * Usage: test_free_path mixed|small|runs   (accounting on)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgmalloc.h"

enum { SLOTS = 1024, STEPS = 200000, THREADS = 2, RUN = 512 };

static int mixed, runs;
static void *shared[THREADS][SLOTS];	/* a thread's blocks; another may free some */
static size_t shared_len[THREADS][SLOTS];
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static long allocs[THREADS], frees[THREADS], bad[THREADS];
/*
 * The threads churn between the readings of memory.stat.local, but are
 * made before them and exit after: what the C library allocates for a
 * thread stays out of the counts.
 */
static pthread_barrier_t start, done, readings_taken;

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static size_t pick_size(uint64_t *s)
{
	uint64_t r = next_rand(s);

	if (mixed && (r & 1))
		return 1025 + (r >> 8) % (16384 - 1024);
	return 1 + (r >> 8) % 1024;
}

/* Free block @k of thread @owner's set, as thread @me, after checking its pattern. */
static void drop(int me, int owner, int k)
{
	unsigned char *p = shared[owner][k];
	size_t n = shared_len[owner][k];

	if (!p)
		return;
	if (p[0] != (unsigned char)(k + owner) || p[n - 1] != (unsigned char)(k + owner))
		bad[me]++;
	free(p);
	frees[me]++;
	shared[owner][k] = NULL;
}

/* Runs of one kind, each allocated in full, then freed in full. */
static void run_kinds(int me, uint64_t *s)
{
	for (int i = 0; i < STEPS / RUN; i++) {
		for (int k = 0; k < RUN; k++) {
			uint64_t r = next_rand(s);
			size_t n = i & 1 ? 1025 + (r >> 8) % (16384 - 1024) : 1 + (r >> 8) % 1024;
			unsigned char *p = malloc(n);

			if (!p) {
				bad[me]++;
				continue;
			}
			allocs[me]++;
			memset(p, k + me, n);
			shared[me][k] = p;
			shared_len[me][k] = n;
		}
		pthread_mutex_lock(&shared_lock);
		for (int k = 0; k < RUN; k++)
			drop(me, me, k);
		pthread_mutex_unlock(&shared_lock);
	}
}

static void *churn(void *arg)
{
	int me = (int)(intptr_t)arg, other = (me + 1) % THREADS;
	uint64_t s = 0x9e3779b97f4a7c15ULL * (uint64_t)(me + 1);

	pthread_barrier_wait(&start);
	if (runs)
		run_kinds(me, &s);
	for (int i = 0; i < STEPS && !runs; i++) {
		int k = (int)(next_rand(&s) % SLOTS);
		size_t n = pick_size(&s);
		unsigned char *p;

		pthread_mutex_lock(&shared_lock);
		drop(me, (i & 15) == 0 ? other : me, k);
		pthread_mutex_unlock(&shared_lock);
		p = malloc(n);
		if (!p) {
			bad[me]++;
			continue;
		}
		allocs[me]++;
		memset(p, k + me, n);
		pthread_mutex_lock(&shared_lock);
		drop(me, me, k);
		shared[me][k] = p;
		shared_len[me][k] = n;
		pthread_mutex_unlock(&shared_lock);
	}
	pthread_barrier_wait(&done);
	pthread_barrier_wait(&readings_taken);
	return NULL;
}

static long stat_of(const char *text, const char *key)
{
	size_t len = strlen(key);

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (strncmp(l, key, len) == 0 && l[len] == ' ')
			return strtol(l + len + 1, NULL, 10);
	return -1;
}

int main(int argc, char **argv)
{
	static char before[8192], after[8192];
	pthread_t th[THREADS];
	long a = 0, f = 0, b = 0, d_allocs, d_frees, d_live;

	if (argc != 2 || (strcmp(argv[1], "mixed") && strcmp(argv[1], "small") && strcmp(argv[1], "runs"))) {
		fprintf(stderr, "usage: test_free_path mixed|small|runs\n");
		return 2;
	}
	mixed = strcmp(argv[1], "mixed") == 0;
	runs = strcmp(argv[1], "runs") == 0;
	pthread_barrier_init(&start, NULL, THREADS + 1);
	pthread_barrier_init(&done, NULL, THREADS + 1);
	pthread_barrier_init(&readings_taken, NULL, THREADS + 1);
	for (int i = 0; i < THREADS; i++)
		if (pthread_create(&th[i], NULL, churn, (void *)(intptr_t)i) != 0)
			return 1;
	if (cgm_flush() != 0 || cgm_read(NULL, "memory.stat.local", before, sizeof(before)) <= 0) {
		fprintf(stderr, "test_free_path: accounting is not on\n");
		return 1;
	}
	pthread_barrier_wait(&start);
	pthread_barrier_wait(&done);
	for (int t = 0; t < THREADS; t++)
		for (int k = 0; k < SLOTS; k++)
			drop(0, t, k);
	for (int t = 0; t < THREADS; t++) {
		a += allocs[t];
		f += frees[t];
		b += bad[t];
	}
	if (cgm_flush() != 0 || cgm_read(NULL, "memory.stat.local", after, sizeof(after)) <= 0) {
		fprintf(stderr, "test_free_path: memory.stat.local cannot be read\n");
		return 1;
	}
	pthread_barrier_wait(&readings_taken);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	d_allocs = stat_of(after, "allocs") - stat_of(before, "allocs");
	d_frees = stat_of(after, "frees") - stat_of(before, "frees");
	d_live = stat_of(after, "heap_live") - stat_of(before, "heap_live");
	printf("%s: %ld allocations, %ld frees, %ld bad blocks; memory.stat.local: "
	       "allocs +%ld, frees +%ld, heap_live %+ld\n",
	       argv[1], a, f, b, d_allocs, d_frees, d_live);
	if (b || a != f || d_allocs != a || d_frees != f || d_live != 0) {
		fprintf(stderr, "test_free_path: the counts do not agree\n");
		return 1;
	}
	return 0;
}
