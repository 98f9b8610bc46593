/*
 * xmalloc: a ring of threads, each freeing what its neighbour allocated.
 *
 * After the xmalloc-test of Lever and Boreham.  THREADS threads stand in a
 * ring; each allocates small blocks (16..256 bytes), passes them in batches
 * to the next thread, and frees the batches that the previous one passed
 * to it.  Unlike prodcons, every thread both allocates and frees, and every
 * free is remote: each thread's heap gets its blocks back only from another
 * thread, and each thread's charge stock only ever uncharges memory another
 * stock charged.
 *
 * Usage: xmalloc [BLOCKS_PER_THREAD] [THREADS]   (default 2000000, 4)
 */
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "bench_common.h"
#include "bench_list.h"

#define BATCH 100
#define MAX_PENDING (64 * BATCH) /* blocks in flight to one thread */
#define MIN_SIZE 16
#define MAX_SIZE 256

struct block {
	struct bench_node link;
	unsigned char from; /* the thread that allocated it */
};

struct ring_thread {
	BENCH_ALIGNED pthread_t tid;	/* neighbours share their inboxes, not a line */
	unsigned id;
	unsigned long blocks;
	uint64_t rng;
	struct bench_list inbox;
	atomic_ulong pending; /* pushed to inbox, not yet freed */
	struct ring_thread *next, *prev;
	unsigned long sum;
};

/* Set by the thread that finds a failure; every thread then stops, since
 * its neighbour will not send what it waits for. */
static atomic_int ring_failed;

/* Allocates one batch and passes it to the next thread; returns its size. */
static unsigned long ring_send(struct ring_thread *t, unsigned long left)
{
	struct block *first = NULL, *last = NULL;
	unsigned long n = left < BATCH ? left : BATCH;

	for (unsigned long i = 0; i < n; i++) {
		size_t size = MIN_SIZE + bench_rand(&t->rng) % (MAX_SIZE - MIN_SIZE + 1);
		struct block *b = malloc(size);

		if (!b) {
			atomic_store(&ring_failed, 1);
			while (first) {
				b = first;
				first = (struct block *)first->link.next;
				free(b);
			}
			return 0;
		}
		b->from = (unsigned char)t->id;
		((unsigned char *)b)[size - 1] = (unsigned char)size;
		b->link.next = first ? &first->link : NULL;
		first = b;
		if (!last)
			last = b;
	}
	atomic_fetch_add_explicit(&t->next->pending, n, memory_order_relaxed);
	bench_list_push(&t->next->inbox, &first->link, &last->link);
	return n;
}

/* Frees what the previous thread passed; returns how many blocks. */
static unsigned long ring_receive(struct ring_thread *t)
{
	struct bench_node *n = bench_list_take(&t->inbox);
	unsigned long count = 0;

	while (n) {
		struct block *b = (struct block *)n;

		n = n->next;
		if (b->from != t->prev->id)
			atomic_store(&ring_failed, 1);
		t->sum += b->from;
		free(b);
		count++;
	}
	if (count)
		atomic_fetch_sub_explicit(&t->pending, count, memory_order_relaxed);
	return count;
}

static void *ring_run(void *arg)
{
	struct ring_thread *t = arg;
	unsigned long sent = 0, freed = 0;

	while ((sent < t->blocks || freed < t->prev->blocks) &&
	       !atomic_load_explicit(&ring_failed, memory_order_relaxed)) {
		unsigned long sent_now = 0, freed_now;

		/* A full neighbour is waited for, never overfilled, so that a
		 * descheduled thread does not let memory grow without bound. */
		if (sent < t->blocks &&
		    atomic_load_explicit(&t->next->pending, memory_order_relaxed) < MAX_PENDING) {
			sent_now = ring_send(t, t->blocks - sent);
			sent += sent_now;
		}
		freed_now = ring_receive(t);
		freed += freed_now;
		if (!sent_now && !freed_now)
			sched_yield();
	}
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long blocks = bench_arg(argc, argv, 1, 2000000, "BLOCKS_PER_THREAD");
	unsigned long n = bench_arg(argc, argv, 2, 4, "THREADS");
	struct ring_thread *t;
	unsigned long sum = 0;

	if (n < 2 || n > 255) {
		fprintf(stderr, "%s: THREADS must be 2..255, got %lu\n", argv[0], n);
		return BENCH_USAGE;
	}
	t = bench_calloc(argv[0], n, sizeof(*t), "the ring");
	for (unsigned long i = 0; i < n; i++) {
		t[i].id = (unsigned)i;
		t[i].blocks = blocks;
		t[i].rng = 0x94d049bb133111ebull * (i + 1);
		t[i].next = &t[(i + 1) % n];
		t[i].prev = &t[(i + n - 1) % n];
	}
	for (unsigned long i = 0; i < n; i++)
		if (pthread_create(&t[i].tid, NULL, ring_run, &t[i]))
			bench_die(argv[0], "pthread_create failed");
	for (unsigned long i = 0; i < n; i++) {
		pthread_join(t[i].tid, NULL);
		sum += t[i].sum;
	}
	if (ring_failed)
		bench_die(argv[0], "malloc failed or a block reached the wrong thread");
	free(t);
	printf("xmalloc: %lu threads x %lu blocks, checksum %lu\n", n, blocks, sum);
	return 0;
}
