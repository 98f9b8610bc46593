/*
 * The slow paths of accounted allocation: a thread's first charge, stock
 * refills, allocations above the small sizes, aligned and huge blocks,
 * realloc, and the thread-exit hook.  The fast paths are in
 * include/cgm/accounted.h.
 *
 * A block is charged at its mimalloc block size (what it occupies), the
 * same number free() reads back from mimalloc's page, so charge and
 * uncharge always agree.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgm/accounted.h"
#include "cgm/log.h"
#include "cgm/shim.h"
#include "cgm/size_class.h"

DEFINE_STATIC_KEY_FALSE(cgm_accounting_key);
DEFINE_STATIC_KEY_FALSE(cgm_limits_key);

struct cgm_acct cgm_acct = { .proc = CGM_NONE };

/*
 * Shared by threads that have no slot yet; never charged, never flushed.
 * Its allowances are hugely negative, so a thread's first malloc of any
 * size class takes the refill path, which gives the thread its own slot.
 */
#define NEG (INT64_MIN / 4)
#define NEG4 NEG, NEG, NEG, NEG
#define NEG16 NEG4, NEG4, NEG4, NEG4
static struct cgm_thread_slot cgm_boot_slot = {
	.allow = { NEG16, NEG4, NEG },
	.stock = NEG,
};
_Static_assert(CGM_NR_BINS == 21, "the boot slot's allowances cover every bin");

uint8_t cgm_size_bin[CGM_SMALL_MAX + 1];

CGM_TLS struct cgm_thread_slot *cgm_tslot = &cgm_boot_slot;

static pthread_key_t thread_exit_key;
static bool thread_exit_key_ok;

static void thread_exit_hook(void *arg)
{
	uint32_t slot = (uint32_t)(uintptr_t)arg - 1;

	/*
	 * The slot stays ours (frees in later destructors land in it); it
	 * is freed once the thread is gone and its counters are folded.
	 */
	acct_thread_exit(&cgm_acct, slot);
}

/* Give the calling thread a slot of its own; NULL if the table is full. */
static struct cgm_thread_slot *thread_slot(void)
{
	struct cgm_thread_slot *t = cgm_tslot;
	uint32_t idx;
	static int warned;

	if (t != &cgm_boot_slot)
		return t;
	idx = acct_thread_register(&cgm_acct, (int)syscall(SYS_gettid));
	if (idx == CGM_NONE) {
		cgm_log_once(&warned, "accounting: no free thread slot in the hierarchy; "
			     "allocations of new threads are not charged");
		return NULL;
	}
	t = hier_thread(&cgm_acct.h, idx);
	cgm_tslot = t;
	if (thread_exit_key_ok)
		pthread_setspecific(thread_exit_key, (void *)(uintptr_t)(idx + 1));
	return t;
}

/* A new thread's slot, before its own code runs (shim/thread_start.c). */
void cgm_thread_register(void)
{
	thread_slot();
}

/* The limits key says whether stocks must watch for limits. */
static inline int stock_take(struct cgm_thread_slot *t, int64_t bytes)
{
	return acct_stock_take(&cgm_acct, t, bytes, static_branch_unlikely(&cgm_limits_key));
}

/* The request size -> bin table that malloc reads, filled before accounting is on. */
static void size_bin_init(void)
{
	for (size_t n = 0; n <= CGM_SMALL_MAX; n++)
		cgm_size_bin[n] = (uint8_t)cgm_small_bin(n);
}

void *cgm_acct_refill(size_t n, bool zero)
{
	struct cgm_thread_slot *t = cgm_tslot;
	unsigned int bin = cgm_size_bin[n];

	cgm_owner_add(t->allow[bin], 1);	/* undo the fast path's take */
	t = thread_slot();
	if (!t)
		return zero ? mi_zalloc(n) : mi_malloc(n);
	if (acct_refill_bin(&cgm_acct, t, bin, static_branch_unlikely(&cgm_limits_key)) < 0) {
		errno = ENOMEM;
		return NULL;
	}
	cgm_owner_add(t->allow[bin], -1);
	return zero ? mi_zalloc(n) : mi_malloc(n);
}

/* What a block is charged: its block size, or for huge blocks the usable size. */
static int64_t block_charge(void *p)
{
	uint32_t s = mi209_block_size(p);

	return s >= MI209_HUGE_BLOCK ? (int64_t)mi_usable_size(p) : (int64_t)s;
}

/* The block size mimalloc will use for a request, before it is made. */
static int64_t block_estimate(size_t n, size_t align)
{
	size_t est;

	if (n <= CGM_SMALL_MAX && align <= 16)
		return (int64_t)cgm_small_block_size(n);
	est = mi_good_size(n);
	if (align > 16 && est < SIZE_MAX - align)
		est += align;
	return est > INT64_MAX / 2 ? INT64_MAX / 2 : (int64_t)est;
}

static void count_big(struct cgm_thread_slot *t, int64_t bytes)
{
	struct cgm_proc *p = cgm_careful_begin();

	cgm_owner_add(t->big_allocs, 1);
	cgm_owner_add(t->big_alloc_bytes, (uint64_t)bytes);
	cgm_owner_add(t->big_hist[rstat_hist_bucket((uint64_t)bytes)], 1);
	cgm_careful_end(p);
}

/* Settle the estimate charged before allocating against the real block. */
static void settle(struct cgm_thread_slot *t, int64_t estimate, int64_t actual)
{
	if (actual > estimate)
		acct_force_charge(&cgm_acct, t, actual - estimate);
	else
		cgm_owner_add(t->stock, estimate - actual);
}

void *cgm_acct_alloc_slow(size_t n, size_t align, bool zero)
{
	struct cgm_thread_slot *t = thread_slot();
	int64_t est;
	void *p;

	if (!t) {
		p = align ? cgm_mi_aligned(n, align) : zero ? mi_zalloc(n) : mi_malloc(n);
		goto out;
	}
	if (n >= (size_t)INT64_MAX / 2) {
		p = NULL;
		goto out;
	}
	est = block_estimate(n, align);
	if (stock_take(t, est) < 0) {
		errno = ENOMEM;
		return NULL;
	}
	p = align ? cgm_mi_aligned(n, align) : zero ? mi_zalloc(n) : mi_malloc(n);
	if (!p) {
		cgm_owner_add(t->stock, est);
		goto out;
	}
	{
		int64_t actual = block_charge(p);

		settle(t, est, actual);
		count_big(t, actual);
	}
out:
	if (!p)
		errno = ENOMEM;
	return p;
}

void cgm_acct_count_big_free(void *p)
{
	struct cgm_thread_slot *t = cgm_tslot;

	cgm_owner_add(t->freed_bytes, (uint64_t)block_charge(p));
	cgm_owner_add(t->frees, 1);
}

void cgm_acct_free_big(void *p)
{
	cgm_acct_count_big_free(p);
	mi_free(p);
}

void *cgm_acct_realloc(void *p, size_t n)
{
	struct cgm_thread_slot *t;
	struct cgm_proc *careful;
	int64_t old, est, charged = 0, actual;
	void *q;

	if (!p)
		return cgm_acct_malloc(n, false);
	if (n == 0) {
		cgm_acct_free(p);
		return NULL;
	}
	t = thread_slot();
	if (!t || n >= (size_t)INT64_MAX / 2) {
		q = t ? NULL : mi_realloc(p, n);
		if (!q)
			errno = ENOMEM;
		return q;
	}
	old = block_charge(p);
	est = block_estimate(n, 0);
	/* Only the growth is charged, and before the block grows. */
	if (est > old) {
		if (stock_take(t, est - old) < 0) {
			errno = ENOMEM;
			return NULL;
		}
		charged = est - old;
	}
	q = mi_realloc(p, n);
	if (!q) {
		cgm_owner_add(t->stock, charged);
		errno = ENOMEM;
		return NULL;
	}
	actual = block_charge(q);
	settle(t, charged, actual - old > 0 ? actual - old : 0);
	if (actual < old) {
		cgm_owner_add(t->stock, old - actual);
		acct_stock_trim(&cgm_acct, t);
	}
	careful = cgm_careful_begin();
	cgm_owner_add(t->reallocs, 1);
	cgm_owner_add(t->realloc_new_bytes, (uint64_t)actual);
	cgm_owner_add(t->realloc_old_bytes, (uint64_t)old);
	cgm_owner_add(t->big_hist[rstat_hist_bucket((uint64_t)actual)], 1);
	cgm_careful_end(careful);
	return q;
}

/* Set up once, in the constructor, before accounting is switched on. */
void cgm_accounted_init(void)
{
	size_bin_init();
	thread_exit_key_ok = pthread_key_create(&thread_exit_key, thread_exit_hook) == 0;
}

/* In the child of fork(): own slots, and the inherited heap charged. */
void cgm_accounted_fork_child(void)
{
	uint32_t idx;

	/* The slot we used is the parent's thread's, in shared memory: leave it. */
	cgm_tslot = &cgm_boot_slot;
	cgm_moving_fork_child();
	if (acct_fork_child(&cgm_acct, &idx) < 0 || idx == CGM_NONE)
		return;
	cgm_tslot = hier_thread(&cgm_acct.h, idx);
	if (thread_exit_key_ok)
		pthread_setspecific(thread_exit_key, (void *)(uintptr_t)(idx + 1));
}
