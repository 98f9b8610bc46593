/*
 * cgmctl export: the groups of a hierarchy (or of a subtree) as metrics,
 * in the Prometheus text exposition format, version 0.0.4 -- on stdout
 * for a scraper or a pipe, or as DIR/cgmalloc.prom for node_exporter's
 * textfile collector, replaced atomically.
 *
 * Every value is read from the text `cat` shows of a file
 * (cgm_file_render(), after one flush of the subtree, as ls does), so
 * the metrics say what the files say.  One metric family per file, and
 * per memory.stat key; the group is the label cgroup="/a/b".
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cgm/files.h"
#include "cgmctl.h"

#define PREFIX "cgmalloc_"

/* How a family's samples come out of a file's text. */
enum source {
	FROM_VALUE,	/* one value; "max" is +Inf */
	FROM_LINES,	/* the number of lines (cgroup.procs: processes) */
	FROM_STAT,	/* one "key value" line of memory.stat */
	FROM_EVENTS,	/* every "event count" line, the event a label */
};

/*
 * The files exported, in the order of their families.  @name is the
 * family's (memory.stat: the prefix of one per key, see stat_family()).
 */
static const struct {
	const char *file;
	const char *name;
	const char *type;
	enum source src;
	const char *help;	/* NULL: the file's own, from cgm_files[] */
	const char *note;	/* after the file's name, in the help */
} files[] = {
	{ "memory.current", PREFIX "memory_current_bytes", "gauge", FROM_VALUE, NULL, "" },
	{ "memory.peak", PREFIX "memory_peak_bytes", "gauge", FROM_VALUE, NULL, "" },
	{ "memory.max", PREFIX "memory_max_bytes", "gauge", FROM_VALUE, NULL, "; +Inf: max" },
	{ "memory.high", PREFIX "memory_high_bytes", "gauge", FROM_VALUE, NULL, "; +Inf: max" },
	{ "memory.low", PREFIX "memory_low_bytes", "gauge", FROM_VALUE, NULL, "; +Inf: max" },
	{ "memory.min", PREFIX "memory_min_bytes", "gauge", FROM_VALUE, NULL, "; +Inf: max" },
	{ "cgroup.procs", PREFIX "cgroup_procs", "gauge", FROM_LINES,
	  "processes attached to the group itself", ": its lines" },
	{ "memory.stat", PREFIX "memory_stat_", NULL, FROM_STAT, NULL, "" },
	{ "memory.events", PREFIX "memory_events_total", "counter", FROM_EVENTS, NULL,
	  "; the event is a label" },
};

#define NR_FILES CGM_ARRAY_SIZE(files)

struct family {
	char name[96];
	const char *type;
	char help[256];
	size_t file;		/* in files[] */
	char key[48];		/* FROM_STAT: the memory.stat key */
	bool micro;		/* the text counts millionths of the unit (usec: seconds) */
};

/* What a group's files say, as of the snapshot. */
struct snap {
	char *path;
	char *text[NR_FILES];	/* NULL: the group has no such file (limits of /) */
};

/*
 * The kind of each memory.stat key before the histogram: the levels are
 * gauges in bytes, cgmalloc's counts are counters, in the units Prometheus
 * names them in (base units: bytes, seconds).  The table must reach the
 * histogram (the assertion); a key left out of it is exported untyped.
 */
static const struct {
	const char *type, *unit, *what;
} stat_kinds[] = {
	[CGM_STAT_ANON] = { "gauge", "_bytes",
			    "resident private anonymous memory, as the kernel counts it" },
	[CGM_STAT_HEAP_FREE] = { "gauge", "_bytes",
				 "resident heap pages beyond the live bytes: what the allocator keeps" },
	[CGM_STAT_MAPPED_ANON] = { "gauge", "_bytes",
				   "resident pages of the program's own private anonymous mappings" },
	[CGM_STAT_ZSWAP] = { "gauge", "_bytes", "compressed pool memory holding spilled pages" },
	[CGM_STAT_ZSWAPPED] = { "gauge", "_bytes", "bytes of the pages spilled into the pool" },
	[CGM_STAT_SWAP_BYTES] = { "gauge", "_bytes",
				  "bytes of spilled pages written back to the backing file" },
	[CGM_STAT_NUMA_ANON0 ... CGM_STAT_NUMA_ANON0 + CGM_MAX_NODES - 1] = { NULL, NULL, NULL },
	[CGM_STAT_HEAP_LIVE] = { "gauge", "_bytes", "bytes allocated and not yet freed" },
	[CGM_STAT_ALLOCS] = { "counter", "_total", "allocations" },
	[CGM_STAT_FREES] = { "counter", "_total", "frees" },
	[CGM_STAT_ALLOC_BYTES] = { "counter", "_total", "bytes allocated" },
	[CGM_STAT_FREE_BYTES] = { "counter", "_total", "bytes freed" },
	[CGM_STAT_THROTTLE_NS] = { "counter", "_seconds_total",
				   "time allocating threads slept above memory.high" },
	[CGM_STAT_ZSWPOUT] = { "counter", "_total", "pages spilled into the compressed pool" },
	[CGM_STAT_ZSWPIN] = { "counter", "_total", "pages brought back from the compressed pool" },
	[CGM_STAT_ZSWPWB] = { "counter", "_total", "pages written back from the pool to its file" },
	[CGM_STAT_PSWPIN] = { "counter", "_total", "pages read back from the backing file" },
	[CGM_STAT_PSWPOUT] = { "counter", "_total", "pages written to the backing file" },
	[CGM_STAT_WORKINGSET_REFAULT_ANON] = { "counter", "_total",
					       "spilled pages that refaulted within the working set" },
	[CGM_STAT_PGSCAN] = { "counter", "_total", "pages looked at by reclaim" },
	[CGM_STAT_PGSTEAL] = { "counter", "_total", "pages reclaimed" },
	[CGM_STAT_PGSCAN_KSWAPD] = { "counter", "_total",
				     "pages looked at by the library's reclaim threads" },
	[CGM_STAT_PGSCAN_DIRECT] = { "counter", "_total",
				     "pages looked at by reclaim in the program's threads" },
	[CGM_STAT_PGSTEAL_KSWAPD] = { "counter", "_total",
				      "pages reclaimed by the library's reclaim threads" },
	[CGM_STAT_PGSTEAL_DIRECT] = { "counter", "_total",
				      "pages reclaimed in the program's threads" },
};
_Static_assert(sizeof(stat_kinds) / sizeof(stat_kinds[0]) == CGM_STAT_HIST0,
	       "every memory.stat key before the histogram has a kind");

/* The family of memory.stat key @i (see stat_kinds; the histogram's buckets are counters). */
static void stat_family(int i, struct family *fam)
{
	const char *type = "untyped", *unit = "", *what = "";
	char key[48], range[96];
	unsigned long long bound;
	size_t keep;

	snprintf(fam->key, sizeof(fam->key), "%s", cgm_stat_name(i, key, sizeof(key)));
	keep = strlen(fam->key);
	fam->micro = false;
	if (i < CGM_STAT_HIST0 && stat_kinds[i].type) {
		type = stat_kinds[i].type;
		unit = stat_kinds[i].unit;
		what = stat_kinds[i].what;
	}
	if (i == CGM_STAT_THROTTLE_NS) {
		/* The file counts microseconds: the name says seconds, as Prometheus does. */
		if (keep > 5 && strcmp(fam->key + keep - 5, "_usec") == 0) {
			keep -= 5;
			fam->micro = true;
		}
	} else if (i >= CGM_STAT_HIST0) {
		/* The bucket's upper bound is the key's number; the last takes all above too. */
		type = "counter", unit = "_total";
		bound = strtoull(fam->key + strcspn(fam->key, "0123456789"), NULL, 10);
		if (i == CGM_STAT_HIST0)
			snprintf(range, sizeof(range), "allocations of at most %llu bytes", bound);
		else if (i == CGM_NR_STATS - 1)
			snprintf(range, sizeof(range), "allocations of more than %llu bytes", bound / 2);
		else
			snprintf(range, sizeof(range), "allocations of %llu to %llu bytes",
				 bound / 2 + 1, bound);
		what = range;
	}
	fam->type = type;
	snprintf(fam->name, sizeof(fam->name), "%s%.*s%s", files[fam->file].name, (int)keep,
		 fam->key, unit);
	snprintf(fam->help, sizeof(fam->help), "%s%s(memory.stat %s)", what, what[0] ? " " : "",
		 fam->key);
}

/*
 * Every family, in the order written, into *@out (to be freed); returns
 * how many, or 0 when out of memory.
 */
static size_t families(struct family **out)
{
	size_t n = 0;
	struct family *fam = calloc(NR_FILES + CGM_NR_STATS, sizeof(*fam));

	*out = fam;
	if (!fam)
		return 0;
	for (size_t i = 0; i < NR_FILES; i++) {
		const struct cgm_file *f = cgm_file_find(files[i].file);

		if (files[i].src == FROM_STAT) {
			for (int k = 0; k < CGM_NR_STATS; k++) {
				/* memory.numa_stat's keys are not memory.stat's. */
				if (cgm_stat_is_numa(k))
					continue;
				fam[n].file = i;
				stat_family(k, &fam[n++]);
			}
			continue;
		}
		fam[n].file = i;
		fam[n].type = files[i].type;
		snprintf(fam[n].name, sizeof(fam[n].name), "%s", files[i].name);
		snprintf(fam[n].help, sizeof(fam[n].help), "%s (%s%s)",
			 files[i].help ? files[i].help : f ? f->help : "", files[i].file,
			 files[i].note);
		n++;
	}
	return n;
}

void export_list_families(FILE *f)
{
	struct family *fam;
	size_t n = families(&fam);
	int w = 0;

	for (size_t i = 0; i < n; i++)
		if ((int)strlen(fam[i].name) > w)
			w = (int)strlen(fam[i].name);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%-*s  %-7s  %s\n", w, fam[i].name, fam[i].type, fam[i].help);
	free(fam);
}

/* A HELP text: backslash and newline escaped. */
static void put_help(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\\\", f);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

/* A label value, quotes included: backslash, double quote and newline escaped. */
static void put_label(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

/*
 * Value text @v (up to @len bytes) as a sample value into @out: an
 * integer as it is, "max" as +Inf, millionths (@micro) as a decimal.
 * False when it is none of these: the sample is left out.
 */
static bool sample_value(const char *v, size_t len, bool micro, char *out, size_t outlen)
{
	char num[32];
	char *end;
	long long x;

	if (len == 3 && strncmp(v, "max", 3) == 0) {
		snprintf(out, outlen, "+Inf");
		return true;
	}
	if (len == 0 || len >= sizeof(num))
		return false;
	memcpy(num, v, len);
	num[len] = '\0';
	errno = 0;
	x = strtoll(num, &end, 10);
	if (*end || errno)
		return false;
	if (!micro)
		snprintf(out, outlen, "%lld", x);
	else
		snprintf(out, outlen, "%s%lld.%06lld", x < 0 ? "-" : "", llabs(x / 1000000),
			 llabs(x % 1000000));
	return true;
}

/* The value of line "@key VALUE" of @text, its length in *@len; NULL if none. */
static const char *keyed(const char *text, const char *key, size_t *len)
{
	size_t kl = strlen(key);

	for (const char *line = text; *line;) {
		size_t ll = strcspn(line, "\n");

		if (ll > kl && strncmp(line, key, kl) == 0 && line[kl] == ' ') {
			*len = ll - kl - 1;
			return line + kl + 1;
		}
		line += ll + (line[ll] != '\0');
	}
	return NULL;
}

static void put_sample(FILE *f, const struct family *fam, const struct snap *g,
		       const char *event, const char *value)
{
	fputs(fam->name, f);
	fputs("{cgroup=", f);
	put_label(f, g->path);
	if (event) {
		fputs(",event=", f);
		put_label(f, event);
	}
	fprintf(f, "} %s\n", value);
}

/* One family: its HELP and TYPE, then a sample for each group that has one. */
static void put_family(FILE *f, const struct family *fam, const struct snap *groups, size_t n)
{
	enum source src = files[fam->file].src;
	char value[48];

	fprintf(f, "# HELP %s ", fam->name);
	put_help(f, fam->help);
	fprintf(f, "\n# TYPE %s %s\n", fam->name, fam->type);
	for (size_t i = 0; i < n; i++) {
		const char *text = groups[i].text[fam->file], *v;
		size_t len, lines = 0;

		if (!text)
			continue;
		switch (src) {
		case FROM_VALUE:
			if (sample_value(text, strcspn(text, "\n"), false, value, sizeof(value)))
				put_sample(f, fam, &groups[i], NULL, value);
			break;
		case FROM_LINES:
			for (const char *p = text; *p; p++)
				lines += *p == '\n';
			snprintf(value, sizeof(value), "%zu", lines);
			put_sample(f, fam, &groups[i], NULL, value);
			break;
		case FROM_STAT:
			v = keyed(text, fam->key, &len);
			if (v && sample_value(v, len, fam->micro, value, sizeof(value)))
				put_sample(f, fam, &groups[i], NULL, value);
			break;
		case FROM_EVENTS:
			for (const char *line = text; *line;) {
				size_t ll = strcspn(line, "\n"), kl = strcspn(line, " \n");
				char event[48];

				if (kl < ll && kl < sizeof(event) &&
				    sample_value(line + kl + 1, ll - kl - 1, false, value,
						 sizeof(value))) {
					snprintf(event, sizeof(event), "%.*s", (int)kl, line);
					put_sample(f, fam, &groups[i], event, value);
				}
				line += ll + (line[ll] != '\0');
			}
			break;
		}
	}
}

/* The whole exposition of @groups to @f. */
static void put_all(FILE *f, struct ctl *c, const struct family *fam, size_t nfam,
		    const struct snap *groups, size_t n)
{
	fputs("# HELP " PREFIX "hierarchy_info the hierarchy file the groups are in\n"
	      "# TYPE " PREFIX "hierarchy_info gauge\n" PREFIX "hierarchy_info{hierarchy=", f);
	put_label(f, c->path);
	fputs("} 1\n", f);
	for (size_t i = 0; i < nfam; i++)
		put_family(f, &fam[i], groups, n);
}

static void free_snaps(struct snap *groups, size_t n)
{
	for (size_t i = 0; groups && i < n; i++) {
		free(groups[i].path);
		for (size_t k = 0; k < NR_FILES; k++)
			free(groups[i].text[k]);
	}
	free(groups);
}

/*
 * The texts of the files of @top and every group below it, into *@out;
 * returns how many groups, or -ENOMEM.
 * One flush of the subtree makes them all current; each group is then
 * rendered without another, as ls reads its counters.  A group removed
 * since the walk is left out.
 */
static long snapshot(struct ctl *c, uint32_t top, struct snap **out)
{
	static uint32_t idx[CGM_MAX_GROUPS];
	struct snap *groups;
	char path[CGM_PATH_MAX];
	char *buf = NULL;
	size_t n, shown = 0, cap = 0;

	hier_lock(&c->h.hdr->tree_lock);
	n = ctl_collect(&c->h, top, true, idx);
	hier_unlock(&c->h.hdr->tree_lock);
	cgm_files_flush(&c->h, top);
	*out = groups = calloc(n, sizeof(*groups));
	if (!groups)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct snap *g = &groups[shown];

		if (group_path(&c->h, idx[i], path, sizeof(path)) < 0)
			continue;
		g->path = strdup(path);
		if (!g->path)
			goto nomem;
		for (size_t k = 0; k < NR_FILES; k++) {
			int len = ctl_render(c, idx[i], files[k].file, false, &buf, &cap);

			if (len == -ENOMEM)
				goto nomem;
			if (len >= 0 && !(g->text[k] = strdup(buf)))
				goto nomem;
		}
		shown++;
	}
	free(buf);
	return (long)shown;
nomem:
	free(buf);
	free_snaps(groups, shown + 1);
	*out = NULL;
	return -ENOMEM;
}

/*
 * Write the exposition to DIR/cgmalloc.prom so that a reader sees the old
 * file or the new one, never a part: into a temporary file in DIR (a name
 * the collector skips: it reads *.prom), synced, then renamed over it.
 */
static int write_textfile(struct ctl *c, const char *dir, const struct family *fam,
			  size_t nfam, const struct snap *groups, size_t n)
{
	char tmp[PATH_MAX], dst[PATH_MAX];
	mode_t mask;
	FILE *f;
	int fd, dfd, err = 0;

	if (snprintf(dst, sizeof(dst), "%s/cgmalloc.prom", dir) >= (int)sizeof(dst) ||
	    snprintf(tmp, sizeof(tmp), "%s/.cgmalloc.prom.XXXXXX", dir) >= (int)sizeof(tmp)) {
		ctl_err("export: --textfile: directory name too long");
		return CTL_FAIL;
	}
	fd = mkstemp(tmp);
	if (fd < 0) {
		ctl_err("export: cannot create a file in %s: %s", dir, strerror(errno));
		return CTL_FAIL;
	}
	/* The collector runs as another user: the mode a new file gets, not mkstemp's 0600. */
	mask = umask(0);
	umask(mask);
	f = fdopen(fd, "w");
	if (!f || fchmod(fd, 0666 & ~mask) < 0) {
		err = errno;
		if (!f)
			close(fd);
		goto fail;
	}
	put_all(f, c, fam, nfam, groups, n);
	errno = 0;
	if (fflush(f) != 0 || ferror(f) || fsync(fd) < 0)
		err = errno ? errno : EIO;
	if (fclose(f) != 0 && !err)
		err = errno;
	f = NULL;
	if (!err && rename(tmp, dst) < 0)
		err = errno;
	if (err)
		goto fail;
	/* The rename itself lasts once the directory is synced. */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return CTL_OK;
fail:
	if (f)
		fclose(f);
	unlink(tmp);
	ctl_err("export: cannot write %s: %s", dst, strerror(err));
	return CTL_FAIL;
}

int cmd_export(struct ctl *c, int argc, char **argv)
{
	const char *top_path = "/", *dir = NULL;
	bool prometheus = false;
	struct family *fam = NULL;
	struct snap *groups = NULL;
	size_t nfam;
	long n;
	uint32_t top;
	int opt, status;

	while ((opt = ctl_getopt(c, argc, argv, "PT:")) != -1) {
		if (opt == 'P')
			prometheus = true;
		else if (opt == 'T')
			dir = optarg;
		else
			return CTL_USAGE;
	}
	if (argc - optind > 1) {
		ctl_err("export: expected at most 1 argument "
			"(usage: cgmctl export --prometheus [--textfile DIR] [GROUP])");
		return CTL_USAGE;
	}
	if (!prometheus || c->json) {
		ctl_err("export: %s (usage: cgmctl export --prometheus [--textfile DIR] [GROUP])",
			c->json ? "--json is no export format" : "which format? --prometheus is the one");
		return CTL_USAGE;
	}
	if (optind < argc)
		top_path = argv[optind];
	if (ctl_check_path(c, top_path) < 0)
		return CTL_USAGE;
	if (dir && !dir[0]) {
		ctl_err("export: --textfile: empty directory name");
		return CTL_USAGE;
	}
	opt = ctl_open_group(c, top_path, &top);
	if (opt != CTL_OK)
		return opt;
	nfam = families(&fam);
	n = nfam ? snapshot(c, top, &groups) : -ENOMEM;
	ctl_close(c);
	if (n < 0) {
		ctl_err("export: out of memory");
		free(fam);
		return CTL_FAIL;
	}
	status = CTL_OK;
	if (dir)
		status = write_textfile(c, dir, fam, nfam, groups, (size_t)n);
	else
		put_all(stdout, c, fam, nfam, groups, (size_t)n);
	free_snaps(groups, (size_t)n);
	free(fam);
	return status;
}
