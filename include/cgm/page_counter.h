/*
 * page_counter: lockless hierarchical page accounting and limiting, after
 * the kernel's mm/page_counter.c, for counters that live in a mapping
 * shared by several processes.
 *
 * A counter's parent is named by a byte offset from the counter itself
 * (0: no parent), so a tree of counters works at any address the mapping
 * lands on.  Whoever builds the tree guarantees that every parent offset
 * stays inside the mapping (accounting/hier.c checks it on open).
 * Units are pages; the caller converts bytes.
 */
#ifndef CGM_PAGE_COUNTER_H
#define CGM_PAGE_COUNTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PAGE_COUNTER_MAX INT64_MAX

/*
 * The deepest a counter may sit below the root of its tree (a group's
 * depth: the components of its path).  Every walk up a tree stops after
 * CGM_MAX_DEPTH + 1 counters: a longer chain is a corrupt parent link
 * going round a cycle.
 */
#define CGM_MAX_DEPTH 64

struct page_counter {
	int64_t usage;			/* atomic */
	int64_t parent_off;		/* byte offset to the parent; 0 = root */

	/* effective protection, see page_counter_calculate_protection() */
	int64_t emin;
	int64_t elow;

	/* protected usage propagated to the parent */
	int64_t min_usage;
	int64_t low_usage;
	int64_t children_min_usage;
	int64_t children_low_usage;

	int64_t watermark;		/* peak usage, never decreases */
	int64_t failcnt;		/* try_charge refused at max */

	int64_t min;
	int64_t low;
	int64_t high;
	int64_t max;
};

/*
 * The mappings counters may live in (registered by whoever maps them): a
 * parent offset that leads outside all of them is corruption, and the
 * walk stops there instead of touching memory it does not own.  With
 * none registered, offsets are trusted.
 */
bool page_counter_in_domain(uintptr_t addr);
void page_counter_add_domain(const void *base, size_t size);
void page_counter_remove_domain(const void *base);

static inline struct page_counter *page_counter_parent(const struct page_counter *c)
{
	uintptr_t p;

	if (!c->parent_off)
		return NULL;
	p = (uintptr_t)c + (uintptr_t)c->parent_off;
	if ((p & 7) || !page_counter_in_domain(p))
		return NULL;
	return (struct page_counter *)p;
}

static inline int64_t page_counter_read(const struct page_counter *c)
{
	return __atomic_load_n(&c->usage, __ATOMIC_RELAXED);
}

/* A fresh counter: no usage, no protection, no limit. */
void page_counter_init(struct page_counter *c, struct page_counter *parent);

/* Charge @nr pages up the tree, ignoring max (e.g. memory inherited at fork). */
void page_counter_charge(struct page_counter *c, int64_t nr);

/*
 * Charge @nr pages up the tree unless a counter would pass its max.
 * Returns true, or false with *fail set to the counter that refused and
 * every counter below it restored (rollback): a failed try_charge leaves
 * no counter changed except the refusing one's failcnt.
 */
bool page_counter_try_charge(struct page_counter *c, int64_t nr,
			     struct page_counter **fail);

/* Uncharge @nr pages up the tree.  Usage never goes below zero. */
void page_counter_uncharge(struct page_counter *c, int64_t nr);

/*
 * The same, from @c up to @stop, which is left alone (NULL: up to the
 * root): moving a charge between two counters changes nothing at or above
 * their common ancestor (page_counter_common()).
 */
bool page_counter_try_charge_below(struct page_counter *c, struct page_counter *stop,
				   int64_t nr, struct page_counter **fail);
void page_counter_uncharge_below(struct page_counter *c, struct page_counter *stop, int64_t nr);

/* The lowest counter that is @a or an ancestor of it and @b or an ancestor of it (NULL: none). */
struct page_counter *page_counter_common(struct page_counter *a, struct page_counter *b);

/*
 * Limits.  set_max refuses (-EBUSY) when usage already passes the new max;
 * memory.max writers that want the kernel's behaviour use
 * page_counter_force_max() and then reclaim.
 */
int page_counter_set_max(struct page_counter *c, int64_t nr);
void page_counter_force_max(struct page_counter *c, int64_t nr);
void page_counter_set_high(struct page_counter *c, int64_t nr);
void page_counter_set_min(struct page_counter *c, int64_t nr);
void page_counter_set_low(struct page_counter *c, int64_t nr);

/* Forget the peak: the watermark restarts at the current usage. */
void page_counter_reset_watermark(struct page_counter *c);

/*
 * Compute emin/elow of @c as seen from reclaim at @root (the counter at
 * its limit): the kernel's effective_protection(), distributing a parent's
 * protection among children in proportion to their protected usage.
 */
void page_counter_calculate_protection(struct page_counter *root,
				       struct page_counter *c,
				       bool recursive_protection);

/* Convert a byte limit (UINT64_MAX, "max" = none) to pages, and back. */
int64_t page_counter_pages(uint64_t bytes);
uint64_t page_counter_bytes(int64_t pages);

#define CGM_PAGE_SIZE 4096
#define CGM_PAGE_SHIFT 12

#endif /* CGM_PAGE_COUNTER_H */
