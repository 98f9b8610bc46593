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
 * Usage: prodcons [MESSAGES_PER_PAIR] [PAIRS]   (default 6000000, 2)
 */
#include <pthread.h>
#include <string.h>

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
	pthread_mutex_t lock;
	pthread_cond_t changed;
	struct batch *q[DEPTH];
	unsigned head, count;
	unsigned long messages;
	uint64_t seed;
	int failed;
	pthread_t producer, consumer;
};

static void pair_put(struct pair *p, struct batch *b)
{
	pthread_mutex_lock(&p->lock);
	while (p->count == DEPTH)
		pthread_cond_wait(&p->changed, &p->lock);
	p->q[(p->head + p->count) % DEPTH] = b;
	p->count++;
	pthread_cond_broadcast(&p->changed);
	pthread_mutex_unlock(&p->lock);
}

static struct batch *pair_get(struct pair *p)
{
	struct batch *b;

	pthread_mutex_lock(&p->lock);
	while (p->count == 0)
		pthread_cond_wait(&p->changed, &p->lock);
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
	uint64_t rng = p->seed;
	unsigned long seq = 0;

	while (seq < p->messages) {
		struct batch *b = malloc(sizeof(*b));

		if (!b) {
			p->failed = 1;
			break;
		}
		for (b->n = 0; b->n < BATCH && seq < p->messages; b->n++, seq++) {
			size_t size = sizeof(struct msg) + 8 + bench_rand(&rng) % 1017;
			struct msg *m = malloc(size);

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
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long messages = bench_arg(argc, argv, 1, 6000000, "MESSAGES_PER_PAIR");
	unsigned long npairs = bench_arg(argc, argv, 2, 2, "PAIRS");
	struct pair *p = calloc(npairs, sizeof(*p));

	if (!p)
		bench_die(argv[0], "out of memory for the queues");
	for (unsigned long i = 0; i < npairs; i++) {
		pthread_mutex_init(&p[i].lock, NULL);
		pthread_cond_init(&p[i].changed, NULL);
		p[i].messages = messages;
		p[i].seed = 0x9e3779b97f4a7c15ull ^ (i + 1);
		if (pthread_create(&p[i].consumer, NULL, consumer_run, &p[i]) ||
		    pthread_create(&p[i].producer, NULL, producer_run, &p[i]))
			bench_die(argv[0], "pthread_create failed");
	}
	for (unsigned long i = 0; i < npairs; i++) {
		pthread_join(p[i].producer, NULL);
		pthread_join(p[i].consumer, NULL);
		if (p[i].failed)
			bench_die(argv[0], "a message was lost, reordered or not allocated");
	}
	free(p);
	printf("prodcons: %lu pairs x %lu messages\n", npairs, messages);
	return 0;
}
