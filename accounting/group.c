/*
 * Groups: the tree of the hierarchy file, addressed by paths like
 * "/batch/job1".  Lookups find a child by the keys of the slots in use
 * (struct cgm_group_key), else walk child lists; every index read from the
 * shared file is bounds-checked and every walk is bounded by the depth
 * limit, so a corrupt tree cannot send us out of the mapping or round a
 * cycle forever.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cgm/hier.h"

static bool name_char_ok(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' || c == '@' ||
	       c == ':' || c == '+';
}

const char group_path_rules[] = "an absolute path like /batch/job1: names of letters, "
	"digits and _-.@:+, at most 63 bytes each, at most 64 deep";

int group_path_valid(const char *path)
{
	size_t comp = 0;
	int depth = 0;

	if (!path || path[0] != '/')
		return -EINVAL;
	if (strcmp(path, "/") == 0)
		return 0;
	for (const char *p = path + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			const char *start = p - comp;

			if (comp == 0 || (comp == 1 && start[0] == '.') ||
			    (comp == 2 && start[0] == '.' && start[1] == '.'))
				return -EINVAL;
			if (++depth > CGM_MAX_DEPTH)
				return -EINVAL;
			if (*p == '\0')
				return 0;
			comp = 0;
			continue;
		}
		if (!name_char_ok(*p) || ++comp >= CGM_NAME_MAX)
			return -EINVAL;
	}
}

/* FNV-1a of a path component: struct cgm_group_key's name_hash. */
static uint32_t group_name_hash(const char *name, size_t len)
{
	uint32_t x = 0x811c9dc5u;

	for (size_t i = 0; i < len; i++)
		x = (x ^ (unsigned char)name[i]) * 0x01000193u;
	return x;
}

/* The child of @parent named @name, by the sibling list (every sibling read). */
static inline __attribute__((always_inline)) uint32_t
find_child_walk(const struct cgm_hier *h, uint32_t parent, const char *name, size_t len)
{
	const struct cgm_group *p = hier_group(h, parent);
	uint32_t i = p ? p->first_child : CGM_NONE;

	for (unsigned int guard = 0; i != CGM_NONE && guard < CGM_MAX_GROUPS; guard++) {
		const struct cgm_group *g = hier_group(h, i);

		if (!g)
			return CGM_NONE;
		if (strncmp(g->name, name, len) == 0 && g->name[len] == '\0')
			return i;
		i = g->next_sibling;
	}
	return CGM_NONE;
}

/*
 * The child of @parent named @name.  A parent of a few children has them
 * walked: they lie in pages a process maps anyway, and the keys' page
 * would be one more.  Past that, by the keys of the slots in use: only a
 * slot whose key matches is read.  The keys are trusted to say a child is
 * missing only when they count as many children of @parent as it has
 * (nr_children): a file whose keys are out of step -- a map bit lost, a
 * concurrent mkdir seen half-way -- is walked as before, so that a group
 * is never made twice.
 */
#define FEW_CHILDREN 4
static uint32_t find_child(const struct cgm_hier *h, uint32_t parent,
			   const char *name, size_t len)
{
	const struct cgm_group *p = hier_group(h, parent);
	uint32_t hash, counted = 0;

	if (!p)
		return CGM_NONE;
	if (__atomic_load_n(&p->nr_children, __ATOMIC_RELAXED) <= FEW_CHILDREN)
		return find_child_walk(h, parent, name, len);
	hash = group_name_hash(name, len);
	for (uint32_t w = 0; w < CGM_MAX_GROUPS / 64; w++) {
		uint64_t used = __atomic_load_n(&h->hdr->group_map[w], __ATOMIC_RELAXED);

		for (; used; used &= used - 1) {
			uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(used);
			const struct cgm_group_key *k = &h->keys[i];
			const struct cgm_group *g;

			/* Written before it is read: a read fault maps fifteen neighbours too. */
			hier_prefault(h, k, sizeof(*k));
			if (__atomic_load_n(&k->parent, __ATOMIC_RELAXED) != parent)
				continue;
			counted++;
			if (__atomic_load_n(&k->name_hash, __ATOMIC_RELAXED) != hash)
				continue;
			g = hier_group(h, i);
			if (g && g->parent == parent && strncmp(g->name, name, len) == 0 &&
			    g->name[len] == '\0')
				return i;
		}
	}
	if (counted == __atomic_load_n(&p->nr_children, __ATOMIC_RELAXED))
		return CGM_NONE;
	return find_child_walk(h, parent, name, len);
}

/*
 * Walk @path from the root.  Returns the deepest existing group, with
 * *rest pointing at the first component that does not exist ("" if all do).
 */
static uint32_t walk(const struct cgm_hier *h, const char *path, const char **rest)
{
	uint32_t cur = CGM_ROOT;
	const char *p = path + 1;

	while (*p) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		uint32_t next = find_child(h, cur, p, len);

		if (next == CGM_NONE)
			break;
		cur = next;
		p += len;
		if (*p == '/')
			p++;
	}
	*rest = p;
	return cur;
}

uint32_t group_lookup(const struct cgm_hier *h, const char *path)
{
	const char *rest;
	uint32_t idx;

	if (group_path_valid(path) < 0)
		return CGM_NONE;
	idx = walk(h, path, &rest);
	return *rest ? CGM_NONE : idx;
}

/*
 * A free group slot: the first that group_map says is free and whose
 * state agrees (a disagreeing bit is mended), or, when the map has none,
 * the first free state of the table.  CGM_NONE if there is none.
 */
static uint32_t find_free_group(struct cgm_hier *h)
{
	uint64_t *map = h->hdr->group_map;

	for (uint32_t w = 0; w < CGM_MAX_GROUPS / 64; w++) {
		/* Slot 0 is the root: never free. */
		uint64_t free_bits = ~(__atomic_load_n(&map[w], __ATOMIC_RELAXED) | (w ? 0 : 1));

		while (free_bits) {
			uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(free_bits);
			struct cgm_group *g = &h->groups[i];

			free_bits &= free_bits - 1;
			/* Written before it is read: a read fault maps fifteen neighbours too. */
			hier_prefault(h, &g->state, sizeof(g->state));
			if (g->state == CGM_SLOT_FREE)
				return i;
			hier_map_set(map, i);
		}
	}
	for (uint32_t i = 1; i < CGM_MAX_GROUPS; i++)
		if (h->groups[i].state == CGM_SLOT_FREE)
			return i;
	return CGM_NONE;
}

static int64_t alloc_group(struct cgm_hier *h, uint32_t parent, const char *name,
			   size_t len)
{
	struct cgm_group *p = hier_group(h, parent), *g;
	uint32_t i;

	if (!p)
		return -EINVAL;
	i = find_free_group(h);
	if (i == CGM_NONE)
		return -ENOSPC;
	g = &h->groups[i];
	memset(g, 0, sizeof(*g));
	memcpy(g->name, name, len);
	g->name[len] = '\0';
	g->parent = parent;
	g->first_child = CGM_NONE;
	g->next_sibling = p->first_child;
	g->depth = p->depth + 1;
	page_counter_init(&g->memory, &p->memory);
	g->zswap_max = g->swap_max = INT64_MAX;
	g->zswap_writeback = 1;
	psi_init(&g->psi);
	h->keys[i].name_hash = group_name_hash(name, len);
	__atomic_store_n(&h->keys[i].parent, parent, __ATOMIC_RELAXED);
	/* Publish only once complete: lookups check the state. */
	__atomic_store_n(&g->state, CGM_SLOT_LIVE, __ATOMIC_RELEASE);
	hier_map_set(h->hdr->group_map, i);
	p->first_child = i;
	p->nr_children++;
	return i;
}

int64_t group_create(struct cgm_hier *h, const char *path, uint32_t flags)
{
	const char *rest;
	uint32_t cur;

	if (group_path_valid(path) < 0)
		return -EINVAL;
	cur = walk(h, path, &rest);
	while (*rest) {
		const char *slash = strchr(rest, '/');
		size_t len = slash ? (size_t)(slash - rest) : strlen(rest);
		int64_t idx = alloc_group(h, cur, rest, len);

		if (idx < 0)
			return idx;
		cur = (uint32_t)idx;
		rest += len;
		if (*rest == '/')
			rest++;
		if (!*rest)
			h->groups[cur].flags = flags;
	}
	return cur;
}

int64_t group_mkdir(struct cgm_hier *h, const char *path)
{
	return group_create(h, path, 0);
}

/* Remove empty group @idx: -EBUSY if it has children, processes or a charge. */
static int group_remove(struct cgm_hier *h, uint32_t idx)
{
	struct cgm_group *g = hier_group(h, idx), *p;
	uint32_t *link, n = 0;

	if (!g)
		return -ENOENT;
	if (idx == CGM_ROOT)
		return -EBUSY;
	if (g->nr_children || g->nr_procs || page_counter_read(&g->memory))
		return -EBUSY;
	p = hier_group(h, g->parent);
	if (!p)
		return -EINVAL;
	for (link = &p->first_child; *link != idx; link = &hier_group(h, *link)->next_sibling)
		if (!hier_group(h, *link) || ++n > CGM_MAX_GROUPS)
			return -EINVAL;
	*link = g->next_sibling;
	p->nr_children--;
	/* Limits of a removed group no longer hold anything back. */
	if (g->memory.max != PAGE_COUNTER_MAX || g->memory.high != PAGE_COUNTER_MAX)
		h->hdr->nr_limited--;
	__atomic_store_n(&g->state, CGM_SLOT_FREE, __ATOMIC_RELEASE);
	__atomic_store_n(&h->keys[idx].parent, CGM_NONE, __ATOMIC_RELAXED);
	hier_map_clear(h->hdr->group_map, idx);
	return 0;
}

int group_rmdir(struct cgm_hier *h, const char *path)
{
	return group_remove(h, group_lookup(h, path));
}

void group_reap_transient(struct cgm_hier *h, uint32_t idx)
{
	struct cgm_group *g;

	/* A removed group keeps its parent link: the walk goes on from there. */
	for_each_ancestor(h, idx, g)
		if (!(g->flags & CGM_GROUP_TRANSIENT) || group_remove(h, idx) < 0)
			break;
}

int group_path(const struct cgm_hier *h, uint32_t idx, char *buf, size_t len)
{
	uint32_t chain[CGM_MAX_DEPTH + 1];
	const struct cgm_group *g;
	int n = 0;
	size_t off = 0;

	for_each_ancestor(h, idx, g) {
		if (idx == CGM_ROOT)
			break;
		chain[n++] = idx;
	}
	/* The walk ended before the root: a dead group or a broken link. */
	if (idx != CGM_ROOT || !g)
		return -EINVAL;
	if (n == 0)
		return snprintf(buf, len, "/") < (int)len ? 0 : -ENAMETOOLONG;
	while (n-- > 0) {
		int w = snprintf(buf + off, len - off, "/%s", h->groups[chain[n]].name);

		if (w < 0 || (size_t)w >= len - off)
			return -ENAMETOOLONG;
		off += (size_t)w;
	}
	return 0;
}

void group_event(struct cgm_hier *h, uint32_t idx, enum cgm_event ev)
{
	struct cgm_group *g = hier_group(h, idx);

	if (!g)
		return;
	__atomic_add_fetch(&g->events_local[ev], 1, __ATOMIC_RELAXED);
	/* The root's memory.events stay zero, as in cgroup v2. */
	for_each_ancestor(h, idx, g) {
		if (idx == CGM_ROOT)
			break;
		__atomic_add_fetch(&g->events[ev], 1, __ATOMIC_RELAXED);
	}
	hier_bump_epoch(h);
}

bool group_limited(const struct cgm_hier *h, uint32_t idx)
{
	const struct cgm_group *g;

	for_each_ancestor(h, idx, g)
		if (__atomic_load_n(&g->memory.max, __ATOMIC_RELAXED) != PAGE_COUNTER_MAX ||
		    __atomic_load_n(&g->memory.high, __ATOMIC_RELAXED) != PAGE_COUNTER_MAX)
			return true;
	return false;
}

bool group_over_high(const struct cgm_hier *h, uint32_t idx)
{
	const struct cgm_group *g;

	for_each_ancestor(h, idx, g)
		if (page_counter_read(&g->memory) > __atomic_load_n(&g->memory.high, __ATOMIC_RELAXED))
			return true;
	return false;
}

bool group_in_subtree(const struct cgm_hier *h, uint32_t idx, uint32_t root)
{
	const struct cgm_group *g;

	for_each_ancestor(h, idx, g)
		if (idx == root)
			return true;
	return false;
}
