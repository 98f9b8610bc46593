/*
 * prodcons: producer/consumer pairs with cross-thread frees.
 *
 * Each producer allocates messages and hands them, a batch at a time, to its
 * consumer, which checks and frees them: every free happens on a thread
 * that does not own the memory, the case where a per-thread charge stock
 * receives uncharges for memory another thread charged.  Batches keep the
 * hand-over rare, so the figure measures the allocator and not the
 * scheduler (a message-at-a-time ring on two cores is dominated by
 * sched_yield and varies tenfold from run to run).
 *
 * Batches alone did not make runs repeatable: left to the scheduler, a
 * pair's two threads shared a CPU in some runs and ran on two in others,
 * and the same configuration took 0.23 s or 0.82 s on a 2-CPU machine
 * (on two CPUs the producer finds every block's line in the consumer's
 * cache).  --pin fixes the placement, on the CPUs of the process's
 * affinity mask, taken in turn:
 *   same   both threads of pair i on the i-th CPU: a batch changes hands
 *          on one CPU, the placement of most unpinned runs;
 *   split  the producer of pair i on CPU 2i, its consumer on CPU 2i+1:
 *          every message's lines cross between CPUs.
 * With one CPU both are the same.
 *
 * It also prints the CPU time the producers and the consumers took
 * (CLOCK_THREAD_CPUTIME_ID) and how often they waited, on a full queue
 * and on an empty one: on one CPU, the wall time follows from both, and
 * the two configurations of an allocator can differ in either.
 *
 * --spin N has each producer do N dependent multiply-adds per message
 * (about 4 cycles each) before its malloc: a producer made slower by a
 * known amount under any allocator, to see how much the hand-overs
 * amplify a producer's extra cost (the consumers then wait on an empty
 * queue more often, and each wait is two context switches).
 *
 * Usage: prodcons [--pin same|split] [--spin N] [MESSAGES_PER_PAIR] [PAIRS]
 *        (default unpinned, no spin, 6000000, 2)
 */
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"

#define BATCH 512  /* messages per hand-over */
#define DEPTH 8    /* batches in flight per pair */

struct msg {
	unsigned long seq;
	unsigned char payload[];
};

struct batch {
	unsigned n;
	struct msg *m[BATCH];
};

/* A bounded queue of batches: the producer waits when DEPTH are in flight. */
struct pair {
	BENCH_ALIGNED pthread_mutex_t lock;	/* pairs do not share a line */
	pthread_cond_t changed;
	struct batch *q[DEPTH];
	unsigned head, count;
	unsigned long messages, spin;
	uint64_t seed;
	int failed;
	pthread_t producer, consumer;
	/* Each written by its own thread, read after the joins. */
	unsigned long full_waits, empty_waits;
	double producer_cpu, consumer_cpu;
};

/* Where the producers' spin ends up, so that the compiler keeps it. */
static volatile uint64_t spin_sink;

/* The calling thread's CPU time, s. */
static double thread_cpu(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return 0;
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void pair_put(struct pair *p, struct batch *b)
{
	pthread_mutex_lock(&p->lock);
	while (p->count == DEPTH) {
		p->full_waits++;
		pthread_cond_wait(&p->changed, &p->lock);
	}
	p->q[(p->head + p->count) % DEPTH] = b;
	p->count++;
	pthread_cond_broadcast(&p->changed);
	pthread_mutex_unlock(&p->lock);
}

static struct batch *pair_get(struct pair *p)
{
	struct batch *b;

	pthread_mutex_lock(&p->lock);
	while (p->count == 0) {
		p->empty_waits++;
		pthread_cond_wait(&p->changed, &p->lock);
	}
	b = p->q[p->head];
	p->head = (p->head + 1) % DEPTH;
	p->count--;
	pthread_cond_broadcast(&p->changed);
	pthread_mutex_unlock(&p->lock);
	return b;
}

static void *producer_run(void *arg)
{
	struct pair *p = arg;
	uint64_t rng = p->seed, work = p->seed;
	/* A copy: the pair's line is the queue's, which the consumer writes. */
	unsigned long seq = 0, spin = p->spin;

	while (seq < p->messages) {
		struct batch *b = malloc(sizeof(*b));

		if (!b) {
			p->failed = 1;
			break;
		}
		for (b->n = 0; b->n < BATCH && seq < p->messages; b->n++, seq++) {
			size_t size = sizeof(struct msg) + 8 + bench_rand(&rng) % 1017;
			struct msg *m;

			for (unsigned long k = 0; k < spin; k++)
				work = work * 6364136223846793005ull + 1442695040888963407ull;
			m = malloc(size);

			if (!m) {
				p->failed = 1;
				break;
			}
			m->seq = seq;
			m->payload[0] = (unsigned char)size;
			b->m[b->n] = m;
		}
		pair_put(p, b);
		if (p->failed)
			break;
	}
	pair_put(p, NULL); /* end of stream */
	spin_sink = work;
	p->producer_cpu = thread_cpu();
	return NULL;
}

static void *consumer_run(void *arg)
{
	struct pair *p = arg;
	unsigned long expect = 0;
	struct batch *b;

	while ((b = pair_get(p)) != NULL) {
		for (unsigned i = 0; i < b->n; i++) {
			if (b->m[i]->seq != expect++)
				p->failed = 1;
			free(b->m[i]);
		}
		free(b);
	}
	if (expect != p->messages)
		p->failed = 1;
	p->consumer_cpu = thread_cpu();
	return NULL;
}

enum pin { PIN_NONE, PIN_SAME, PIN_SPLIT };

/* The @k-th CPU (mod their number) of the process's affinity mask, or -1. */
static int nth_cpu(const cpu_set_t *mask, unsigned long k)
{
	int n = CPU_COUNT(mask), seen = 0;

	if (n == 0)
		return -1;
	k %= (unsigned long)n;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, mask) && (unsigned long)seen++ == k)
			return c;
	return -1;
}

/* Start @fn on CPU @cpu (-1: wherever the scheduler puts it). */
static void start_on(const char *prog, pthread_t *th, int cpu, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	cpu_set_t one;

	if (pthread_attr_init(&attr))
		bench_die(prog, "pthread_attr_init failed");
	if (cpu >= 0) {
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		if (pthread_attr_setaffinity_np(&attr, sizeof(one), &one))
			bench_die(prog, "pthread_attr_setaffinity_np failed");
	}
	if (pthread_create(th, &attr, fn, arg))
		bench_die(prog, "pthread_create failed");
	pthread_attr_destroy(&attr);
}

int main(int argc, char **argv)
{
	enum pin pin = PIN_NONE;
	unsigned long messages, npairs, spin = 0;
	cpu_set_t mask;
	struct pair *p;
	double pcpu = 0, ccpu = 0;
	unsigned long full = 0, empty = 0;
	int a = 1;

	if (argc > 2 && strcmp(argv[1], "--pin") == 0) {
		if (strcmp(argv[2], "same") == 0)
			pin = PIN_SAME;
		else if (strcmp(argv[2], "split") == 0)
			pin = PIN_SPLIT;
		else {
			fprintf(stderr, "%s: --pin takes same or split, got '%s'\n", argv[0], argv[2]);
			return BENCH_USAGE;
		}
		a += 2;
	}
	if (argc > a + 1 && strcmp(argv[a], "--spin") == 0) {
		spin = bench_arg(argc, argv, a + 1, 0, "--spin");
		a += 2;
	}
	messages = bench_arg(argc, argv, a, 6000000, "MESSAGES_PER_PAIR");
	npairs = bench_arg(argc, argv, a + 1, 2, "PAIRS");
	if (pin != PIN_NONE && sched_getaffinity(0, sizeof(mask), &mask))
		bench_die(argv[0], "sched_getaffinity failed");
	p = bench_calloc(argv[0], npairs, sizeof(*p), "the queues");
	for (unsigned long i = 0; i < npairs; i++) {
		int pcpu = -1, ccpu = -1;

		if (pin == PIN_SAME)
			pcpu = ccpu = nth_cpu(&mask, i);
		else if (pin == PIN_SPLIT) {
			pcpu = nth_cpu(&mask, 2 * i);
			ccpu = nth_cpu(&mask, 2 * i + 1);
		}
		pthread_mutex_init(&p[i].lock, NULL);
		pthread_cond_init(&p[i].changed, NULL);
		p[i].messages = messages;
		p[i].spin = spin;
		p[i].seed = 0x9e3779b97f4a7c15ull ^ (i + 1);
		start_on(argv[0], &p[i].consumer, ccpu, consumer_run, &p[i]);
		start_on(argv[0], &p[i].producer, pcpu, producer_run, &p[i]);
	}
	for (unsigned long i = 0; i < npairs; i++) {
		pthread_join(p[i].producer, NULL);
		pthread_join(p[i].consumer, NULL);
		if (p[i].failed)
			bench_die(argv[0], "a message was lost, reordered or not allocated");
		pcpu += p[i].producer_cpu;
		ccpu += p[i].consumer_cpu;
		full += p[i].full_waits;
		empty += p[i].empty_waits;
	}
	free(p);
	printf("prodcons: %lu pairs x %lu messages%s", npairs, messages,
	       pin == PIN_SAME ? ", each pair on one CPU" :
	       pin == PIN_SPLIT ? ", each thread on a CPU of its own" : "");
	if (spin)
		printf(", producers spinning %lu steps a message", spin);
	printf("\n");
	printf("prodcons: CPU producers %.3f s, consumers %.3f s; waits on a full queue %lu, "
	       "on an empty one %lu\n", pcpu, ccpu, full, empty);
	return 0;
}
