/*
 * A hand-over list for the benchmark workloads: blocks passed from the
 * threads that allocated them to a thread that frees them, linked through
 * their own first word, with no lock and no allocation of its own.
 *
 * Any thread may push; a taker empties the whole list with one exchange and
 * never unlinks a single node.  A pusher only links its chain to the head
 * it read and installs it if the head is still that pointer, so a recycled
 * address (ABA) cannot make the compare-and-swap lose a node: whatever the
 * head points to, the pushed chain ends in it.
 */
#ifndef CGM_BENCH_LIST_H
#define CGM_BENCH_LIST_H

#include <stdatomic.h>
#include <stddef.h>

struct bench_node {
	struct bench_node *next;
};

struct bench_list {
	_Atomic(struct bench_node *) head;
};

/*
 * bench_list_push - put the chain @first..@last (linked by ->next) on @l.
 * Release ordering: the taker sees the blocks' contents as they were
 * written before the push.
 */
static inline void bench_list_push(struct bench_list *l, struct bench_node *first,
				   struct bench_node *last)
{
	struct bench_node *head = atomic_load_explicit(&l->head, memory_order_relaxed);

	do
		last->next = head;
	while (!atomic_compare_exchange_weak_explicit(&l->head, &head, first,
						      memory_order_release,
						      memory_order_relaxed));
}

/* bench_list_take - empty @l; returns what it held (NULL if nothing), the
 * chain pushed last first. */
static inline struct bench_node *bench_list_take(struct bench_list *l)
{
	return atomic_exchange_explicit(&l->head, NULL, memory_order_acquire);
}

#endif
