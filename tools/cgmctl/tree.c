/*
 * cgmctl ls, mkdir, rmdir: the shape of the group tree, and the one walk
 * of it (ctl_collect) that ls, rmdir -r and export share.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cgm/config.h"
#include "cgm/files.h"
#include "cgmctl.h"

/* What ls shows of a group. */
struct ls_row {
	char path[CGM_PATH_MAX];
	struct ctl_sizes s;
	uint32_t nr_procs, nr_children;
};

void ctl_group_sizes(const struct cgm_group *g, struct ctl_sizes *s)
{
	s->current = page_counter_bytes(page_counter_read(&g->memory));
	s->peak = page_counter_bytes(__atomic_load_n(&g->memory.watermark, __ATOMIC_RELAXED));
	s->max = page_counter_bytes(__atomic_load_n(&g->memory.max, __ATOMIC_RELAXED));
	s->high = page_counter_bytes(__atomic_load_n(&g->memory.high, __ATOMIC_RELAXED));
}

static const struct cgm_hier *sort_h;

/* Children in name order, whatever order they were created in. */
static int by_name_desc(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;

	return strcmp(sort_h->groups[*y].name, sort_h->groups[*x].name);
}

/*
 * The caller's tree lock keeps links from changing under the walk; every
 * index is still bounds-checked (hier_group) and the walk bounded by the
 * table size, against a corrupt file.
 */
size_t ctl_collect(const struct cgm_hier *h, uint32_t top, bool recursive, uint32_t *out)
{
	static uint32_t stack[CGM_MAX_GROUPS];
	size_t n = 0, sp = 0;

	sort_h = h;
	stack[sp++] = top;
	while (sp && n < CGM_MAX_GROUPS) {
		uint32_t idx = stack[--sp], child;
		const struct cgm_group *g = hier_group(h, idx);
		size_t first = sp;

		if (!g)
			continue;
		out[n++] = idx;
		if (idx != top && !recursive)
			continue;
		for (child = g->first_child; child != CGM_NONE && sp < CGM_MAX_GROUPS;) {
			const struct cgm_group *cg = hier_group(h, child);

			if (!cg)
				break;
			stack[sp++] = child;
			child = cg->next_sibling;
		}
		qsort(stack + first, sp - first, sizeof(stack[0]), by_name_desc);
	}
	return n;
}

static void print_size_json(const char *name, uint64_t v, bool last)
{
	if (v == CGM_SIZE_MAX)
		printf("\"%s\": \"max\"%s", name, last ? "" : ", ");
	else
		printf("\"%s\": %" PRIu64 "%s", name, v, last ? "" : ", ");
}

static void print_rows(struct ctl *c, const struct ls_row *rows, size_t n)
{
	char max[32], high[32];
	int width = 5;

	if (c->json) {
		printf("{\"hierarchy\": ");
		json_string(stdout, c->path);
		printf(", \"groups\": [");
		for (size_t i = 0; i < n; i++) {
			printf("%s\n  {\"path\": ", i ? "," : "");
			json_string(stdout, rows[i].path);
			printf(", ");
			print_size_json("current", rows[i].s.current, false);
			print_size_json("peak", rows[i].s.peak, false);
			print_size_json("max", rows[i].s.max, false);
			print_size_json("high", rows[i].s.high, false);
			printf("\"procs\": %u, \"children\": %u}", rows[i].nr_procs,
			       rows[i].nr_children);
		}
		printf("\n]}\n");
		return;
	}
	for (size_t i = 0; i < n; i++)
		if ((int)strlen(rows[i].path) > width)
			width = (int)strlen(rows[i].path);
	printf("%-*s %12s %12s %12s %12s %5s\n", width, "GROUP", "CURRENT", "PEAK", "MAX",
	       "HIGH", "PROCS");
	for (size_t i = 0; i < n; i++)
		printf("%-*s %12" PRIu64 " %12" PRIu64 " %12s %12s %5u\n", width, rows[i].path,
		       rows[i].s.current, rows[i].s.peak,
		       cgm_format_size(rows[i].s.max, max, sizeof(max)),
		       cgm_format_size(rows[i].s.high, high, sizeof(high)), rows[i].nr_procs);
}

int cmd_ls(struct ctl *c, int argc, char **argv)
{
	static uint32_t idx[CGM_MAX_GROUPS];
	const char *path = "/";
	bool recursive = false;
	struct ls_row *rows;
	uint32_t top;
	size_t n, shown = 0;
	int opt, err;

	while ((opt = ctl_getopt(c, argc, argv, "r")) != -1) {
		if (opt != 'r')
			return CTL_USAGE;
		recursive = true;
	}
	if (argc - optind > 1) {
		ctl_err("ls: expected at most 1 argument (usage: cgmctl ls [-r] [GROUP])");
		return CTL_USAGE;
	}
	if (optind < argc)
		path = argv[optind];
	err = ctl_open_group(c, path, &top);
	if (err != CTL_OK)
		return err;
	hier_lock(&c->h.hdr->tree_lock);
	n = ctl_collect(&c->h, top, recursive, idx);
	hier_unlock(&c->h.hdr->tree_lock);

	/*
	 * One flush of the subtree makes every usage below current; reading
	 * each group's counters after it is O(1), where a cgm_file_read() of
	 * memory.current per group would flush once per group.
	 */
	cgm_files_flush(&c->h, top);
	rows = calloc(n, sizeof(*rows));
	if (!rows) {
		ctl_err("ls: out of memory");
		ctl_close(c);
		return CTL_FAIL;
	}
	for (size_t i = 0; i < n; i++) {
		const struct cgm_group *g = hier_group(&c->h, idx[i]);
		struct ls_row *r = &rows[shown];

		/* A group removed since the walk is left out. */
		if (!g || group_path(&c->h, idx[i], r->path, sizeof(r->path)) < 0)
			continue;
		ctl_group_sizes(g, &r->s);
		r->nr_procs = g->nr_procs;
		r->nr_children = g->nr_children;
		shown++;
	}
	print_rows(c, rows, shown);
	free(rows);
	ctl_close(c);
	return CTL_OK;
}

/*
 * The one operand of mkdir/rmdir, checked; rmdir's -r sets *@recursive
 * (NULL: no options).
 */
static const char *one_group(struct ctl *c, int argc, char **argv, bool *recursive)
{
	char usage[32];
	int opt;

	while ((opt = ctl_getopt(c, argc, argv, recursive ? "r" : "")) != -1) {
		if (opt != 'r')
			return NULL;
		*recursive = true;
	}
	snprintf(usage, sizeof(usage), "%s GROUP", c->cmd);
	if (ctl_nargs(c, argc, 1, usage) < 0 || ctl_check_path(c, argv[optind]) < 0)
		return NULL;
	return argv[optind];
}

int cmd_mkdir(struct ctl *c, int argc, char **argv)
{
	const char *path = one_group(c, argc, argv, NULL);
	int64_t idx;

	if (!path)
		return CTL_USAGE;
	if (ctl_open(c, true) < 0)
		return CTL_FAIL;
	hier_lock(&c->h.hdr->tree_lock);
	idx = group_lookup(&c->h, path) != CGM_NONE ? -EEXIST : group_mkdir(&c->h, path);
	hier_unlock(&c->h.hdr->tree_lock);
	ctl_close(c);
	if (idx == -EEXIST)
		ctl_err("mkdir: %s exists", path);
	else if (idx == -ENOSPC)
		ctl_err("mkdir: %s: the hierarchy is full (%d groups)", path, CGM_MAX_GROUPS);
	else if (idx < 0)
		ctl_err("mkdir: %s: %s", path, strerror((int)-idx));
	return idx < 0 ? CTL_FAIL : CTL_OK;
}

/*
 * Remove the group at @path and every group below it, deepest first, or
 * nothing: a group with processes (or, having none, still a charge)
 * refuses the whole removal, with why in @why.  Caller holds the tree
 * lock, which processes take to attach: none joins between the check and
 * the removal.  0 or a negative errno.
 */
static int rmdir_subtree(struct ctl *c, const char *path, char *why, size_t whylen)
{
	static uint32_t idx[CGM_MAX_GROUPS];
	uint32_t top = group_lookup(&c->h, path);
	char p[CGM_PATH_MAX];
	size_t n;

	if (top == CGM_NONE)
		return -ENOENT;
	if (top == CGM_ROOT)
		return -EPERM;
	n = ctl_collect(&c->h, top, true, idx);
	for (size_t i = 0; i < n; i++) {
		const struct cgm_group *g = hier_group(&c->h, idx[i]);

		if (!g || !g->nr_procs)
			continue;
		if (group_path(&c->h, idx[i], p, sizeof(p)) < 0)
			snprintf(p, sizeof(p), "a group below it");
		snprintf(why, whylen, "%s has %u attached process%s; nothing was removed", p,
			 g->nr_procs, g->nr_procs == 1 ? "" : "es");
		return -EBUSY;
	}
	/* A charge without processes: name the deepest group holding it (usage is hierarchical). */
	for (size_t i = n; i-- > 0;) {
		const struct cgm_group *g = hier_group(&c->h, idx[i]);
		uint64_t charged = g ? page_counter_bytes(page_counter_read(&g->memory)) : 0;

		if (!charged)
			continue;
		if (group_path(&c->h, idx[i], p, sizeof(p)) < 0)
			snprintf(p, sizeof(p), "a group below it");
		snprintf(why, whylen, "%s still has %" PRIu64 " bytes charged; nothing was removed",
			 p, charged);
		return -EBUSY;
	}
	/* ctl_collect() lists each group before those below it. */
	for (size_t i = n; i-- > 0;) {
		int err;

		if (group_path(&c->h, idx[i], p, sizeof(p)) < 0)
			return -EINVAL;
		err = group_rmdir(&c->h, p);
		if (err) {
			snprintf(why, whylen, "%s: %s (part of the subtree is removed)", p,
				 strerror(-err));
			return err;
		}
	}
	return 0;
}

int cmd_rmdir(struct ctl *c, int argc, char **argv)
{
	bool recursive = false;
	const char *path = one_group(c, argc, argv, &recursive);
	char why[CGM_PATH_MAX + 160] = "";
	struct cgm_group *g;
	uint32_t idx;
	int err;

	if (!path)
		return CTL_USAGE;
	if (ctl_open(c, false) < 0)
		return CTL_FAIL;
	hier_lock(&c->h.hdr->tree_lock);
	if (recursive) {
		err = rmdir_subtree(c, path, why, sizeof(why));
	} else {
		idx = group_lookup(&c->h, path);
		g = hier_group(&c->h, idx);
		if (g && (g->nr_children || g->nr_procs || page_counter_read(&g->memory)))
			snprintf(why, sizeof(why), "not empty (%u child groups, %u processes, %"
				 PRIu64 " bytes charged)", g->nr_children, g->nr_procs,
				 page_counter_bytes(page_counter_read(&g->memory)));
		err = idx == CGM_ROOT ? -EPERM : group_rmdir(&c->h, path);
	}
	hier_unlock(&c->h.hdr->tree_lock);
	ctl_close(c);
	if (err == -ENOENT)
		ctl_err("rmdir: no group %s in %s", path, c->path);
	else if (err == -EPERM)
		ctl_err("rmdir: the root group cannot be removed");
	else if (err == -EBUSY || (err && why[0]))
		ctl_err("rmdir: %s: %s", path, why);
	else if (err)
		ctl_err("rmdir: %s: %s", path, strerror(-err));
	return err ? CTL_FAIL : CTL_OK;
}
