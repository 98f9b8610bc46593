/*
 * cgmctl top: the groups of a subtree, sorted by usage, redrawn in place
 * every few seconds -- usage, peak, what the allocators keep, the limits,
 * the pool of spilled pages, memory.pressure (some avg10), the events
 * that say a limit was met, and the processes.  On a terminal
 * each frame replaces the last; otherwise frames follow one another (for
 * logs and tests), each after a blank line.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cgm/acct.h"
#include "cgm/config.h"
#include "cgm/files.h"
#include "cgmctl.h"

struct top_row {
	char path[CGM_PATH_MAX];
	struct ctl_sizes s;
	uint64_t heap_free, zswap;
	double some10;			/* memory.pressure some avg10 */
	int64_t ev_high, ev_max, ev_oom_kill;
	uint32_t nr_procs;
};

/* Largest usage first; the path breaks ties, so frames do not shuffle. */
static int by_current_desc(const void *a, const void *b)
{
	const struct top_row *x = a, *y = b;

	if (x->s.current != y->s.current)
		return x->s.current < y->s.current ? 1 : -1;
	return strcmp(x->path, y->path);
}

/* "1.5G"-style, or "max"; into @buf. */
static const char *human(uint64_t v, char *buf, size_t len)
{
	static const char units[] = "KMGTPE";
	double d = (double)v;
	int u = -1;

	if (v == CGM_SIZE_MAX)
		return "max";
	while (d >= 1024 && u < 5) {
		d /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%" PRIu64, v);
	else
		snprintf(buf, len, "%.*f%c", d < 10 ? 1 : 0, d, units[u]);
	return buf;
}

/* One frame of the subtree of @top: the rows, sorted; their number. */
static size_t take_rows(struct ctl *c, uint32_t top, struct top_row *rows, uint32_t *idx)
{
	size_t n, shown = 0;

	hier_lock(&c->h.hdr->tree_lock);
	n = ctl_collect(&c->h, top, true, idx);
	hier_unlock(&c->h.hdr->tree_lock);
	/* One flush makes every group's figures current (as ls does). */
	cgm_files_flush(&c->h, top);
	for (size_t i = 0; i < n; i++) {
		const struct cgm_group *g = hier_group(&c->h, idx[i]);
		struct top_row *r = &rows[shown];
		struct cgm_psi_view psi;

		/* A group removed since the walk is left out. */
		if (!g || group_path(&c->h, idx[i], r->path, sizeof(r->path)) < 0)
			continue;
		ctl_group_sizes(g, &r->s);
		r->heap_free = (uint64_t)__atomic_load_n(&g->stat[CGM_STAT_HEAP_FREE], __ATOMIC_RELAXED);
		r->zswap = (uint64_t)__atomic_load_n(&g->stat[CGM_STAT_ZSWAP], __ATOMIC_RELAXED);
		psi_read(&c->h, idx[i], &psi);
		r->some10 = psi.avg[CGM_PSI_SOME][0];
		r->ev_high = __atomic_load_n(&g->events[CGM_EV_HIGH], __ATOMIC_RELAXED);
		r->ev_max = __atomic_load_n(&g->events[CGM_EV_MAX], __ATOMIC_RELAXED);
		r->ev_oom_kill = __atomic_load_n(&g->events[CGM_EV_OOM_KILL], __ATOMIC_RELAXED);
		r->nr_procs = g->nr_procs;
		shown++;
	}
	qsort(rows, shown, sizeof(rows[0]), by_current_desc);
	return shown;
}

static void print_frame(struct ctl *c, const struct top_row *rows, size_t n, bool tty)
{
	char a[24], b[24], d[24], e[24], f[24], z[24];
	time_t now = time(NULL);
	struct tm tm;
	int width = 5;

	localtime_r(&now, &tm);
	strftime(f, sizeof(f), "%H:%M:%S", &tm);
	if (tty)
		fputs("\033[H\033[2J", stdout);
	printf("cgmctl top - %s - %s - %zu groups\n", f, c->path, n);
	for (size_t i = 0; i < n; i++)
		if ((int)strlen(rows[i].path) > width)
			width = (int)strlen(rows[i].path);
	printf("%-*s %8s %8s %8s %8s %8s %8s %7s %7s %7s %7s %5s\n", width, "GROUP", "CURRENT",
	       "PEAK", "HEAPFREE", "ZSWAP", "HIGH", "MAX", "SOME10", "EV_HIGH", "EV_MAX", "OOMKILL",
	       "PROCS");
	for (size_t i = 0; i < n; i++)
		printf("%-*s %8s %8s %8s %8s %8s %8s %7.2f %7" PRId64 " %7" PRId64 " %7" PRId64
		       " %5u\n",
		       width, rows[i].path, human(rows[i].s.current, a, sizeof(a)),
		       human(rows[i].s.peak, b, sizeof(b)), human(rows[i].heap_free, d, sizeof(d)),
		       human(rows[i].zswap, z, sizeof(z)), human(rows[i].s.high, e, sizeof(e)),
		       human(rows[i].s.max, f, sizeof(f)), rows[i].some10, rows[i].ev_high,
		       rows[i].ev_max, rows[i].ev_oom_kill, rows[i].nr_procs);
	fflush(stdout);
}

/* SECS (a decimal, 0.05 to 3600) into nanoseconds; -1 if bad. */
static int64_t parse_delay(const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end != '\0' || !(v >= 0.05 && v <= 3600))
		return -1;
	return (int64_t)(v * 1e9);
}

int cmd_top(struct ctl *c, int argc, char **argv)
{
	static uint32_t idx[CGM_MAX_GROUPS];
	const char *path = "/";
	int64_t delay = 2000000000;
	long frames = -1;
	bool tty = isatty(STDOUT_FILENO);
	struct top_row *rows;
	uint32_t top;
	int opt;

	while ((opt = ctl_getopt(c, argc, argv, "d:n:")) != -1) {
		char *end;

		if (opt == 'd') {
			delay = parse_delay(optarg);
			if (delay < 0) {
				ctl_err("top: bad value '%s' for -d (expected seconds, 0.05 to 3600)", optarg);
				return CTL_USAGE;
			}
		} else if (opt == 'n') {
			errno = 0;
			frames = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end != '\0' || frames < 1) {
				ctl_err("top: bad value '%s' for -n (expected a number of frames, 1 or more)",
					optarg);
				return CTL_USAGE;
			}
		} else {
			return CTL_USAGE;
		}
	}
	if (argc - optind > 1) {
		ctl_err("top: expected at most 1 argument (usage: cgmctl top [-d SECS] [-n N] [GROUP])");
		return CTL_USAGE;
	}
	if (optind < argc)
		path = argv[optind];
	opt = ctl_open_group(c, path, &top);
	if (opt != CTL_OK)
		return opt;
	rows = calloc(CGM_MAX_GROUPS, sizeof(*rows));
	if (!rows) {
		ctl_err("top: out of memory");
		ctl_close(c);
		return CTL_FAIL;
	}
	for (long i = 0; frames < 0 || i < frames; i++) {
		struct timespec ts = { (time_t)(delay / 1000000000), (long)(delay % 1000000000) };

		if (i > 0) {
			nanosleep(&ts, NULL);
			if (!tty)
				putchar('\n');
		}
		/* The group itself gone (rmdir): say so and stop. */
		if (!hier_group(&c->h, top)) {
			ctl_err("top: group %s is gone", path);
			free(rows);
			ctl_close(c);
			return CTL_FAIL;
		}
		print_frame(c, rows, take_rows(c, top, rows, idx), tty);
	}
	free(rows);
	ctl_close(c);
	return CTL_OK;
}
