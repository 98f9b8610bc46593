/*
 * Lockless hierarchical page accounting and limiting, after the kernel's
 * mm/page_counter.c, on counters in a mapping shared by processes.
 *
 * All updates are atomic read-modify-writes on the usage of each counter
 * from the charged one up to the root; there is no lock.  The watermark
 * and the protected-usage sums are updated racily in the kernel's manner:
 * a watermark may miss a concurrent peak by one charge, which is within
 * the batching slack anyway.
 */
#include <errno.h>

#include "cgm/compiler.h"
#include "cgm/mul_div.h"
#include "cgm/page_counter.h"

/* Counters on a path from any counter up to the root, that counter included. */
#define PAGE_COUNTER_MAX_DEPTH (CGM_MAX_DEPTH + 1)

#define LOAD(x)		__atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v)	__atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

#define MAX_DOMAINS 8

static struct { uintptr_t lo, hi; } domains[MAX_DOMAINS];

void page_counter_add_domain(const void *base, size_t size)
{
	for (int i = 0; i < MAX_DOMAINS; i++) {
		if (domains[i].hi == 0) {
			domains[i].lo = (uintptr_t)base;
			__atomic_store_n(&domains[i].hi, (uintptr_t)base + size, __ATOMIC_RELEASE);
			return;
		}
	}
}

void page_counter_remove_domain(const void *base)
{
	for (int i = 0; i < MAX_DOMAINS; i++)
		if (domains[i].lo == (uintptr_t)base)
			__atomic_store_n(&domains[i].hi, 0, __ATOMIC_RELEASE);
}

bool page_counter_in_domain(uintptr_t addr)
{
	bool any = false;

	for (int i = 0; i < MAX_DOMAINS; i++) {
		uintptr_t hi = __atomic_load_n(&domains[i].hi, __ATOMIC_ACQUIRE);

		if (!hi)
			continue;
		any = true;
		if (addr >= domains[i].lo && addr + sizeof(struct page_counter) <= hi)
			return true;
	}
	return !any;
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/*
 * The counters live in a shared file that anything may have scribbled
 * on: arithmetic on what was read from it wraps (cgm_wrap_sub), and what
 * must be a count is clamped to one.
 */
static int64_t nonneg(int64_t v)
{
	return v < 0 ? 0 : v;
}

void page_counter_init(struct page_counter *c, struct page_counter *parent)
{
	*c = (struct page_counter){
		.parent_off = parent ? (int64_t)((char *)parent - (char *)c) : 0,
		.max = PAGE_COUNTER_MAX,
		.high = PAGE_COUNTER_MAX,
	};
}

/*
 * Keep the parent's children_min_usage/children_low_usage equal to the sum
 * of its children's protected usage: min(usage, min) and min(usage, low).
 * The exchange makes concurrent updates of one child add up exactly.
 */
static void propagate_protected_usage(struct page_counter *c, int64_t usage)
{
	struct page_counter *parent = page_counter_parent(c);
	int64_t protected, old;

	if (!parent)
		return;
	protected = min64(usage, LOAD(c->min));
	old = __atomic_exchange_n(&c->min_usage, protected, __ATOMIC_RELAXED);
	if (protected != old)
		__atomic_add_fetch(&parent->children_min_usage, cgm_wrap_sub(protected, old), __ATOMIC_RELAXED);

	protected = min64(usage, LOAD(c->low));
	old = __atomic_exchange_n(&c->low_usage, protected, __ATOMIC_RELAXED);
	if (protected != old)
		__atomic_add_fetch(&parent->children_low_usage, cgm_wrap_sub(protected, old), __ATOMIC_RELAXED);
}

/* The peak only grows; a lost race leaves it one charge low. */
static void update_watermark(struct page_counter *c, int64_t usage)
{
	int64_t old = LOAD(c->watermark);

	while (usage > old &&
	       !__atomic_compare_exchange_n(&c->watermark, &old, usage, true,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* Take @nr back from one counter, never below zero. */
static void page_counter_cancel(struct page_counter *c, int64_t nr)
{
	int64_t old = LOAD(c->usage), new;

	nr = nonneg(nr);
	do {
		/* More uncharged than charged would be a bug; clamp, not wrap. */
		new = old > nr ? old - nr : 0;
	} while (!__atomic_compare_exchange_n(&c->usage, &old, new, true,
					      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	propagate_protected_usage(c, new);
}

void page_counter_charge(struct page_counter *counter, int64_t nr)
{
	int depth = 0;

	for (struct page_counter *c = counter; c && depth++ < PAGE_COUNTER_MAX_DEPTH;
	     c = page_counter_parent(c)) {
		int64_t new = __atomic_add_fetch(&c->usage, nr, __ATOMIC_RELAXED);

		propagate_protected_usage(c, new);
		update_watermark(c, new);
	}
}

bool page_counter_try_charge(struct page_counter *counter, int64_t nr,
			     struct page_counter **fail)
{
	return page_counter_try_charge_below(counter, NULL, nr, fail);
}

bool page_counter_try_charge_below(struct page_counter *counter, struct page_counter *stop,
				   int64_t nr, struct page_counter **fail)
{
	int64_t usage_after[PAGE_COUNTER_MAX_DEPTH];
	struct page_counter *c;
	int depth = 0;

	for (c = counter; c && c != stop && depth < PAGE_COUNTER_MAX_DEPTH;
	     c = page_counter_parent(c)) {
		/*
		 * Check, then add, in one compare-and-swap: the kernel adds
		 * first and takes the pages back if that passed max, which a
		 * reader can see as usage above max for a moment.  Here usage
		 * never passes max through a charge; the price is a retry when
		 * another charge of the counter races (charges come in batches).
		 */
		int64_t old = LOAD(c->usage), new;

		do {
			new = old + nr;
			if (new > LOAD(c->max)) {
				__atomic_add_fetch(&c->failcnt, 1, __ATOMIC_RELAXED);
				*fail = c;
				goto failed;
			}
		} while (!__atomic_compare_exchange_n(&c->usage, &old, new, true,
						      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
		propagate_protected_usage(c, new);
		usage_after[depth++] = new;
	}
	/*
	 * Peaks only once the whole charge stands: a charge that an ancestor
	 * refuses leaves no trace in any watermark (the kernel lives with
	 * one; a failed try_charge here changes nothing but failcnt).  Each
	 * counter's peak is the usage this charge produced there, never a
	 * racing charge's transient overshoot of max.
	 */
	depth = 0;
	for (c = counter; c && c != stop && depth < PAGE_COUNTER_MAX_DEPTH;
	     c = page_counter_parent(c))
		update_watermark(c, usage_after[depth++]);
	return true;

failed:
	depth = 0;
	for (c = counter; c && c != *fail && depth++ < PAGE_COUNTER_MAX_DEPTH; c = page_counter_parent(c))
		page_counter_cancel(c, nr);
	return false;
}

void page_counter_uncharge(struct page_counter *counter, int64_t nr)
{
	page_counter_uncharge_below(counter, NULL, nr);
}

void page_counter_uncharge_below(struct page_counter *counter, struct page_counter *stop, int64_t nr)
{
	int depth = 0;

	for (struct page_counter *c = counter; c && c != stop && depth++ < PAGE_COUNTER_MAX_DEPTH;
	     c = page_counter_parent(c))
		page_counter_cancel(c, nr);
}

struct page_counter *page_counter_common(struct page_counter *a, struct page_counter *b)
{
	int i = 0;

	for (struct page_counter *x = a; x && i++ < PAGE_COUNTER_MAX_DEPTH; x = page_counter_parent(x)) {
		int j = 0;

		for (struct page_counter *y = b; y && j++ < PAGE_COUNTER_MAX_DEPTH;
		     y = page_counter_parent(y))
			if (x == y)
				return x;
	}
	return NULL;
}

int page_counter_set_max(struct page_counter *c, int64_t nr)
{
	for (;;) {
		int64_t usage = page_counter_read(c), old;

		if (usage > nr)
			return -EBUSY;
		old = __atomic_exchange_n(&c->max, nr, __ATOMIC_SEQ_CST);
		/*
		 * A charge that raced with the exchange may have passed the
		 * new max; if usage grew and the limit shrank, undo and retry.
		 */
		if (page_counter_read(c) <= usage || nr >= old)
			return 0;
		STORE(c->max, old);
	}
}

void page_counter_force_max(struct page_counter *c, int64_t nr)
{
	__atomic_store_n(&c->max, nr, __ATOMIC_SEQ_CST);
}

void page_counter_set_high(struct page_counter *c, int64_t nr)
{
	STORE(c->high, nr);
}

static void propagate_up(struct page_counter *c)
{
	int depth = 0;

	for (struct page_counter *p = c; p && depth++ < PAGE_COUNTER_MAX_DEPTH;
	     p = page_counter_parent(p))
		propagate_protected_usage(p, page_counter_read(p));
}

void page_counter_set_min(struct page_counter *c, int64_t nr)
{
	STORE(c->min, nr);
	propagate_up(c);
}

void page_counter_set_low(struct page_counter *c, int64_t nr)
{
	STORE(c->low, nr);
	propagate_up(c);
}

void page_counter_reset_watermark(struct page_counter *c)
{
	STORE(c->watermark, page_counter_read(c));
}

/*
 * The kernel's effective_protection(): a child's share of its parent's
 * effective protection.  If the children together claim more than the
 * parent has, each gets a share proportional to its own protected usage.
 * With recursive protection, the parent's unclaimed protection is also
 * shared in proportion to the children's unprotected usage.
 */
static int64_t effective_protection(int64_t usage, int64_t parent_usage,
				    int64_t setting, int64_t parent_effective,
				    int64_t siblings_protected,
				    bool recursive_protection)
{
	int64_t protected, ep;

	usage = nonneg(usage);
	parent_usage = nonneg(parent_usage);
	setting = nonneg(setting);
	parent_effective = nonneg(parent_effective);
	siblings_protected = nonneg(siblings_protected);
	protected = min64(usage, setting);
	if (siblings_protected > parent_effective)
		return cgm_mul_div(protected, parent_effective, siblings_protected);
	ep = protected;
	if (recursive_protection && parent_effective > siblings_protected &&
	    parent_usage > siblings_protected && usage > protected) {
		ep += cgm_mul_div(parent_effective - siblings_protected, usage - protected,
				  parent_usage - siblings_protected);
	}
	return ep;
}

void page_counter_calculate_protection(struct page_counter *root,
				       struct page_counter *c,
				       bool recursive_protection)
{
	struct page_counter *parent = page_counter_parent(c);
	int64_t usage, parent_usage;

	/* The reclaim root's own protection does not count against itself. */
	if (c == root)
		return;
	usage = page_counter_read(c);
	if (!usage)
		return;
	/*
	 * No parent counter: a scribbled file whose counter links disagree
	 * with the groups' (fuzz_hier found it; the kernel's tree cannot).
	 * The group then has its own settings, as a child of the root.
	 */
	if (parent == root || !parent) {
		STORE(c->emin, LOAD(c->min));
		STORE(c->elow, LOAD(c->low));
		return;
	}
	parent_usage = page_counter_read(parent);
	STORE(c->emin, effective_protection(usage, parent_usage, LOAD(c->min),
					    LOAD(parent->emin),
					    LOAD(parent->children_min_usage),
					    recursive_protection));
	STORE(c->elow, effective_protection(usage, parent_usage, LOAD(c->low),
					    LOAD(parent->elow),
					    LOAD(parent->children_low_usage),
					    recursive_protection));
}

int64_t page_counter_pages(uint64_t bytes)
{
	if (bytes == UINT64_MAX || bytes / CGM_PAGE_SIZE >= (uint64_t)PAGE_COUNTER_MAX)
		return PAGE_COUNTER_MAX;
	/* memory.max is rounded down to whole pages, as the kernel does. */
	return (int64_t)(bytes / CGM_PAGE_SIZE);
}

uint64_t page_counter_bytes(int64_t pages)
{
	if (pages >= PAGE_COUNTER_MAX / CGM_PAGE_SIZE)
		return UINT64_MAX;
	return (uint64_t)pages * CGM_PAGE_SIZE;
}
