/*
 * Making mimalloc give memory back now rather than later.
 *
 * mimalloc decommits what is freed only once a delay has passed (25 ms
 * for the spans of a segment, 500 ms for a whole segment in its cache),
 * and a span freed inside a segment that still has live pages is looked
 * at again only when that segment is used: mi_collect(true) alone leaves
 * it resident for as long as the program runs.  With the delays at zero,
 * a free decommits at once and a collect takes everything that is due.
 *
 * The delays are process-wide options, so they go to zero while any
 * thread is inside such a call and back to the values read at start-up
 * (the program's MIMALLOC_ settings included) when the last one leaves:
 * whoever brings the count to zero restores, after every thread that
 * zeroed them has left, so the values never stay at zero.  A call that
 * overlaps another's restore may run with the delays on: it only
 * decommits later, as mimalloc would have anyway.
 */
#include <mimalloc.h>
#include <stdbool.h>

#include "cgm/shim.h"

static const mi_option_t delay_options[] = {
	mi_option_decommit_delay, mi_option_segment_decommit_delay,
	mi_option_decommit_extend_delay,
};
#define NR_DELAYS (sizeof(delay_options) / sizeof(delay_options[0]))

static long start_value[NR_DELAYS];
static bool ready;
static unsigned int inside;

void cgm_mi_purge_init(void)
{
	for (size_t i = 0; i < NR_DELAYS; i++)
		start_value[i] = mi_option_get(delay_options[i]);
	__atomic_store_n(&ready, true, __ATOMIC_RELEASE);
}

static bool delays_off(void)
{
	if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE))
		return false;
	if (__atomic_fetch_add(&inside, 1, __ATOMIC_ACQ_REL) == 0)
		for (size_t i = 0; i < NR_DELAYS; i++)
			mi_option_set(delay_options[i], 0);
	return true;
}

static void delays_back(bool off)
{
	if (off && __atomic_sub_fetch(&inside, 1, __ATOMIC_ACQ_REL) == 0)
		for (size_t i = 0; i < NR_DELAYS; i++)
			mi_option_set(delay_options[i], start_value[i]);
}

void cgm_mi_free_now(void *p)
{
	bool off = delays_off();

	mi_free(p);
	delays_back(off);
}

void cgm_mi_collect_now(void)
{
	bool off = delays_off();

	mi_collect(true);
	delays_back(off);
}
