/*
 * memory.min and memory.low in reclaim, as the kernel's shrink_node_memcgs
 * applies them: a group whose usage is within its effective minimum is
 * never reclaimed; one within its effective low is reclaimed only when
 * the unprotected groups did not give enough (and then a "low" event is
 * raised on it).  Effective protection is the kernel's: a group's own
 * min/low bounded by what its parent's effective protection hands down,
 * shared among siblings in proportion to their protected usage
 * (page_counter_calculate_protection).
 */
#include "internal.h"

enum acct_protection acct_reclaim_protection(struct cgm_hier *h, uint32_t root, uint32_t group)
{
	struct cgm_group *rg = hier_group(h, root), *g;
	uint32_t chain[CGM_MAX_DEPTH + 1], idx = group;
	bool below = false;
	int n = 0;
	int64_t usage;

	if (!rg || group == root)
		return ACCT_PROT_NONE;
	/* The chain from @group up to, not including, @root; not below it: none. */
	for_each_ancestor(h, idx, g) {
		if (idx == root) {
			below = true;
			break;
		}
		if (n == CGM_MAX_DEPTH + 1)
			break;
		chain[n++] = idx;
	}
	if (!below)
		return ACCT_PROT_NONE;
	/* Top down: a group's effective protection is computed from its parent's. */
	while (n-- > 0)
		page_counter_calculate_protection(&rg->memory, &hier_group(h, chain[n])->memory, false);
	g = hier_group(h, group);
	usage = page_counter_read(&g->memory);
	if (usage <= __atomic_load_n(&g->memory.emin, __ATOMIC_RELAXED))
		return ACCT_PROT_MIN;
	if (usage <= __atomic_load_n(&g->memory.elow, __ATOMIC_RELAXED))
		return ACCT_PROT_LOW;
	return ACCT_PROT_NONE;
}
