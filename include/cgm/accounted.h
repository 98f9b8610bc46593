/*
 * The accounted allocation paths of the shim: what malloc and free run
 * when cgm_accounting_key is on.  The fast paths are inline, so that the
 * "yes" side of the static-key site in malloc()/free() is this code
 * itself; everything rare is an out-of-line slow path in shim/accounted.c.
 *
 * Per thread, the fast paths touch only the thread's own slot in the
 * hierarchy file (reached through one initial-exec TLS pointer):
 *	malloc: stock -= block size; small[step]++	(stock < 0: refill)
 *	free:	freed_bytes += block size; frees++	(harvested later)
 */
#ifndef CGM_ACCOUNTED_H
#define CGM_ACCOUNTED_H

#include <mimalloc.h>
#include <stddef.h>
#include <stdint.h>

#include "cgm/acct.h"
#include "cgm/compiler.h"
#include "cgm/mi_layout.h"
#include "cgm/static_key.h"

DECLARE_STATIC_KEY_FALSE(cgm_accounting_key);
DECLARE_STATIC_KEY_FALSE(cgm_limits_key);
DECLARE_STATIC_KEY_FALSE(cgm_moving_key);

/* This process's accounting state. */
extern struct cgm_acct cgm_acct;

/*
 * The calling thread's slot.  Until the thread's first charge it points at
 * a shared boot slot whose stock is hugely negative, so the first malloc
 * takes the slow path, which gives the thread a slot of its own.
 */
extern CGM_TLS struct cgm_thread_slot *cgm_tslot;

/* Block size per 8-byte step of a small request, in TLS: one load. */
extern CGM_TLS uint16_t cgm_step_size[CGM_SMALL_STEPS];

void *cgm_acct_refill(size_t n, size_t step, int64_t size, bool zero);
void *cgm_acct_alloc_slow(size_t n, size_t align, bool zero);
void cgm_acct_free_huge(void *p);
void *cgm_acct_realloc(void *p, size_t n);

static inline __attribute__((always_inline)) void *cgm_acct_malloc(size_t n, bool zero)
{
	struct cgm_thread_slot *t;
	size_t step;
	int64_t size;

	if (cgm_unlikely(n > CGM_SMALL_MAX))
		return cgm_acct_alloc_slow(n, 0, zero);
	step = (n + 7) >> 3;
	size = cgm_step_size[step];
	t = cgm_tslot;
	t->stock -= size;
	if (cgm_unlikely(t->stock < 0))
		return cgm_acct_refill(n, step, size, zero);
	t->small[step]++;
	return zero ? mi_zalloc(n) : mi_malloc(n);
}

static inline __attribute__((always_inline)) void cgm_acct_free(void *p)
{
	struct cgm_thread_slot *t;
	uint32_t size;

	if (cgm_unlikely(p == NULL))
		return;
	size = mi209_block_size(p);
	if (cgm_unlikely(size >= MI209_HUGE_BLOCK)) {
		cgm_acct_free_huge(p);
		return;
	}
	t = cgm_tslot;
	t->freed_bytes += size;
	t->frees++;
	mi_free(p);
}

#endif /* CGM_ACCOUNTED_H */
