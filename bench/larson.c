/*
 * larson: the server pattern, where blocks outlive the thread that made them.
 *
 * After Larson and Krishnan's benchmark.  Each of THREADS chains owns an
 * array of slots holding blocks of 16..1024 bytes.  A thread of the chain
 * replaces random slots for one round (free the old block, allocate a new
 * one), then starts its successor, hands it the array and exits: nearly
 * every block is freed by a later thread than the one that allocated it,
 * after that thread is gone.  The allocator must take back memory from the
 * heaps of dead threads, and accounting must uncharge on threads whose
 * stock never charged it and flush the stock of every thread that exits.
 *
 * With --sized, blocks are freed by free_sized(p, size), C23's free with
 * the size known, wherever the C library or a preloaded allocator
 * provides it, else by free().
 *
 * Usage: larson [--sized] [ROUNDS] [THREADS]   (default 1000 rounds, 4)
 */
#include <pthread.h>
#include <string.h>

#include "bench_common.h"

#define SLOTS 1000
#define REPLACE 5000 /* slots replaced per round */
#define MIN_SIZE 16
#define MAX_SIZE 1024

/*
 * Weak, so that the program links and runs with a C library that lacks
 * free_sized, as older glibc does: its address is then NULL unless a
 * preloaded allocator exports it.  Where <stdlib.h> declares it, this
 * agrees with that declaration.
 */
extern void free_sized(void *p, size_t size) __attribute__((weak));

struct chain {
	BENCH_ALIGNED unsigned long rounds_left;	/* chains do not share a line */
	uint64_t rng;
	unsigned long sum;
	int failed;
	unsigned char *block[SLOTS];
	size_t size[SLOTS];
};

static int use_sized;
static pthread_attr_t detached;

/* Chains still running; the last thread of each chain counts itself out. */
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static unsigned long running;

static void release(struct chain *c, unsigned k)
{
	if (!c->block[k])
		return;
	c->sum += c->block[k][0];
	if (use_sized && free_sized)
		free_sized(c->block[k], c->size[k]);
	else
		free(c->block[k]);
	c->block[k] = NULL;
}

static void chain_finish(struct chain *c)
{
	for (unsigned k = 0; k < SLOTS; k++)
		release(c, k);
	pthread_mutex_lock(&done_lock);
	running--;
	pthread_cond_signal(&done_cond);
	pthread_mutex_unlock(&done_lock);
}

static void *chain_round(void *arg)
{
	struct chain *c = arg;
	pthread_t next;

	for (unsigned long i = 0; i < REPLACE; i++) {
		uint64_t r = bench_rand(&c->rng);
		unsigned k = r % SLOTS;
		size_t size = MIN_SIZE + (r >> 32) % (MAX_SIZE - MIN_SIZE + 1);
		unsigned char *p;

		release(c, k);
		p = malloc(size);
		if (!p) {
			c->failed = 1;
			break;
		}
		p[0] = (unsigned char)i;
		p[size - 1] = (unsigned char)size;
		c->block[k] = p;
		c->size[k] = size;
	}
	/* Once the successor runs, the chain is its: do not touch it again. */
	if (!c->failed && --c->rounds_left > 0) {
		if (pthread_create(&next, &detached, chain_round, c) == 0)
			return NULL;
		c->failed = 1;
	}
	chain_finish(c);
	return NULL;
}

int main(int argc, char **argv)
{
	int a = 1;
	unsigned long rounds, nchains, sum = 0;
	struct chain *c;
	pthread_t tid;

	if (argc > 1 && strcmp(argv[1], "--sized") == 0) {
		use_sized = 1;
		a++;
	}
	rounds = bench_arg(argc, argv, a, 1000, "ROUNDS");
	nchains = bench_arg(argc, argv, a + 1, 4, "THREADS");
	c = bench_calloc(argv[0], nchains, sizeof(*c), "the chains");
	if (pthread_attr_init(&detached) ||
	    pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED))
		bench_die(argv[0], "pthread_attr_setdetachstate failed");
	running = nchains;
	for (unsigned long t = 0; t < nchains; t++) {
		c[t].rounds_left = rounds;
		c[t].rng = 0xbf58476d1ce4e5b9ull * (t + 1);
		if (pthread_create(&tid, &detached, chain_round, &c[t]))
			bench_die(argv[0], "pthread_create failed");
	}
	pthread_mutex_lock(&done_lock);
	while (running)
		pthread_cond_wait(&done_cond, &done_lock);
	pthread_mutex_unlock(&done_lock);
	for (unsigned long t = 0; t < nchains; t++) {
		if (c[t].failed)
			bench_die(argv[0], "malloc or pthread_create failed in a chain");
		sum += c[t].sum;
	}
	free(c);
	printf("larson%s: %lu chains x %lu rounds, checksum %lu\n",
	       use_sized ? " --sized" : "", nchains, rounds, sum);
	return 0;
}
