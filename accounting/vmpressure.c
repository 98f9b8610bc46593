/*
 * vmpressure: the reclaim-efficiency levels of cgroup v1's
 * memory.pressure_level (the second seed thread), for listeners that
 * register through the C API.
 *
 * Reclaim reports the pages it looked at and those it got back; once a
 * group's window holds 512 pages looked at (the kernel's vmpressure_win,
 * SWAP_CLUSTER_MAX * 16), the share not reclaimed is the pressure: 95% or
 * more is critical, 60% or more medium, else low.  Reclaim that found
 * nothing at all to look at while the group is at its limit is critical
 * at once (the kernel's vmpressure_prio at the lowest priority).  The
 * event counts of a level go up in the group and in every ancestor with
 * listeners (the kernel's default mode: an event also reaches the
 * ancestors); a listener of a level is told of events of that level and
 * above.  Computing any of it is work only listeners need: the shim does
 * it only while the hierarchy has listeners (its vmpressure static key).
 */
#include <string.h>

#include "internal.h"

#define VMP_WINDOW	512	/* pages looked at per level decision */

int vmpressure_level(int64_t scanned, int64_t reclaimed)
{
	int64_t scale, pressure;

	if (scanned <= 0)
		return CGM_VMP_CRITICAL;
	if (reclaimed > scanned)
		reclaimed = scanned;
	/* The kernel's vmpressure_calc_level(), with its rounding. */
	scale = scanned + reclaimed;
	pressure = (scale - reclaimed * scale / scanned) * 100 / scale;
	return pressure >= 95 ? CGM_VMP_CRITICAL : pressure >= 60 ? CGM_VMP_MEDIUM : CGM_VMP_LOW;
}

void vmpressure_account(struct cgm_hier *h, uint32_t group, int64_t scanned, int64_t reclaimed)
{
	struct cgm_group *g;

	for_each_ancestor(h, group, g) {
		int level = -1;

		if (!__atomic_load_n(&g->vmp_listeners, __ATOMIC_RELAXED))
			continue;
		shared_spin_lock(&g->vmp_lock);
		if (scanned <= 0) {
			/* Nothing left to look at, at the limit: critical now. */
			level = CGM_VMP_CRITICAL;
		} else {
			g->vmp_scanned += scanned;
			g->vmp_reclaimed += reclaimed;
			if (g->vmp_scanned >= VMP_WINDOW) {
				level = vmpressure_level(g->vmp_scanned, g->vmp_reclaimed);
				g->vmp_scanned = g->vmp_reclaimed = 0;
			}
		}
		shared_spin_unlock(&g->vmp_lock);
		if (level >= 0)
			__atomic_add_fetch(&g->vmp_events[level], 1, __ATOMIC_RELEASE);
	}
}

int vmpressure_parse_level(const char *s)
{
	static const char *const names[CGM_VMP_LEVELS] = { "low", "medium", "critical" };

	for (int i = 0; i < CGM_VMP_LEVELS; i++)
		if (s && !strcmp(s, names[i]))
			return i;
	return -1;
}

void vmpressure_listen(struct cgm_hier *h, uint32_t group, bool on)
{
	struct cgm_group *g = hier_group(h, group);

	if (!g)
		return;
	if (on) {
		__atomic_add_fetch(&g->vmp_listeners, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&h->hdr->vmp_listeners, 1, __ATOMIC_RELAXED);
	} else {
		if (__atomic_load_n(&g->vmp_listeners, __ATOMIC_RELAXED))
			__atomic_sub_fetch(&g->vmp_listeners, 1, __ATOMIC_RELAXED);
		if (__atomic_load_n(&h->hdr->vmp_listeners, __ATOMIC_RELAXED))
			__atomic_sub_fetch(&h->hdr->vmp_listeners, 1, __ATOMIC_RELAXED);
	}
	/* The processes turn their computing on or off at their next slow path. */
	hier_bump_epoch(h);
}

uint64_t vmpressure_events(struct cgm_hier *h, uint32_t group, int level)
{
	struct cgm_group *g = hier_group(h, group);
	uint64_t n = 0;

	if (!g)
		return 0;
	for (int i = level; i < CGM_VMP_LEVELS; i++)
		n += __atomic_load_n(&g->vmp_events[i], __ATOMIC_ACQUIRE);
	return n;
}
