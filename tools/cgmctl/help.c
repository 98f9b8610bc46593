/*
 * cgmctl help: the usage, the CGMALLOC_CONF keys straight from
 * base/config_keys.def and a group's files straight from
 * cgm_files[] (accounting/files.c) -- as tables for the terminal, or with
 * --markdown as the README's tables, which a test compares -- what
 * compare measures, what export writes and what mount serves.
 */
#include <inttypes.h>
#include <string.h>

#include "cgm/config.h"
#include "cgm/files.h"
#include "cgmctl.h"

/* The type column: what a value looks like. */
static const char *type_text(const struct cgm_conf_key *k, char *buf, size_t len)
{
	size_t n = 0;

	switch (k->type) {
	case CGM_CONF_BOOL:
		return "bool";
	case CGM_CONF_SIZE:
		return "size";
	case CGM_CONF_UINT:
		snprintf(buf, len, "%" PRIu64 "..%" PRIu64, k->min, k->max);
		return buf;
	case CGM_CONF_ENUM:
		buf[0] = '\0';
		for (const char *const *e = k->names; *e && n < len; e++)
			n += (size_t)snprintf(buf + n, len - n, "%s%s", e == k->names ? "" : "|", *e);
		return buf;
	case CGM_CONF_STRING:
		return "text";
	}
	return "?";
}

/* Markdown table cells: a '|' would end the cell, a '<' start HTML. */
static void md_cell(const char *s, bool code)
{
	fputs(code ? " `" : " ", stdout);
	for (; *s; s++) {
		if (*s == '|' || (!code && (*s == '<' || *s == '>')))
			putchar('\\');
		putchar(*s);
	}
	fputs(code ? "` |" : " |", stdout);
}

static void print_conf(bool markdown)
{
	char type[128];
	int wname = 3, wtype = 4, wdef = 7;

	for (size_t i = 0; i < cgm_conf_nkeys; i++) {
		const struct cgm_conf_key *k = &cgm_conf_keys[i];
		int lt = (int)strlen(type_text(k, type, sizeof(type)));

		if ((int)strlen(k->name) > wname)
			wname = (int)strlen(k->name);
		if (lt > wtype)
			wtype = lt;
		if ((int)strlen(k->def) > wdef)
			wdef = (int)strlen(k->def);
	}
	if (markdown)
		printf("| Key | Type | Default | Meaning |\n|---|---|---|---|\n");
	else
		printf("%-*s  %-*s  %-*s  %s\n", wname, "KEY", wtype, "TYPE", wdef, "DEFAULT",
		       "MEANING");
	for (size_t i = 0; i < cgm_conf_nkeys; i++) {
		const struct cgm_conf_key *k = &cgm_conf_keys[i];
		const char *def = k->def[0] ? k->def : "-";
		const char *t = type_text(k, type, sizeof(type));

		if (!markdown) {
			printf("%-*s  %-*s  %-*s  %s\n", wname, k->name, wtype, t, wdef, def,
			       cgm_conf_key_help(k));
			continue;
		}
		putchar('|');
		md_cell(k->name, true);
		md_cell(t, false);
		if (k->def[0])
			md_cell(k->def, true);
		else
			fputs(" |", stdout);
		md_cell(cgm_conf_key_help(k), false);
		putchar('\n');
	}
}

/* How a file may be used, and in which groups, in a few words. */
static const char *access_text(const struct cgm_file *f)
{
	static const char *const text[3][3] = {
		/* in every group, not on /, on / only */
		{ "read-only", "read-only, not on /", "read-only, / only" },
		{ "read-write", "read-write, not on /", "read-write, / only" },
		{ "write-only", "write-only, not on /", "write-only, / only" },
	};
	int how = !f->show ? 2 : f->write ? 1 : 0;
	int where = (f->flags & CGM_FILE_NOT_ON_ROOT) ? 1 : (f->flags & CGM_FILE_ONLY_ON_ROOT) ? 2 : 0;

	return text[how][where];
}

static void print_files(bool markdown)
{
	int wname = 4, wacc = 6;

	for (size_t i = 0; i < cgm_nfiles; i++) {
		if ((int)strlen(cgm_files[i].name) > wname)
			wname = (int)strlen(cgm_files[i].name);
		if ((int)strlen(access_text(&cgm_files[i])) > wacc)
			wacc = (int)strlen(access_text(&cgm_files[i]));
	}
	if (markdown)
		printf("| File | Access | Meaning |\n|---|---|---|\n");
	else
		printf("%-*s  %-*s  %s\n", wname, "FILE", wacc, "ACCESS", "MEANING");
	for (size_t i = 0; i < cgm_nfiles; i++) {
		const struct cgm_file *f = &cgm_files[i];

		if (!markdown) {
			printf("%-*s  %-*s  %s\n", wname, f->name, wacc, access_text(f), f->help);
			continue;
		}
		putchar('|');
		md_cell(f->name, true);
		md_cell(access_text(f), false);
		md_cell(f->help, false);
		putchar('\n');
	}
}

/* What cgmctl compare does, measures and writes. */
static void print_compare(void)
{
	fputs("cgmctl compare [-i MS] [-o DIR] [--limit SIZE] [--] CMD [ARGS]\n"
	      "\n"
	      "Runs CMD in a new kernel memory cgroup (cgmalloc-compare-PID, made in cgmctl's own\n"
	      "memory cgroup, else in the nearest ancestor that allows it; cgroup v2 or v1) and,\n"
	      "exactly as `cgmctl run -g /compare-PID` would, in a cgmalloc group /compare-PID.\n"
	      "The caller's CGMALLOC_CONF applies, as with run.  Both are limited to SIZE with\n"
	      "--limit, and both are removed when CMD exits or cgmctl is interrupted (the signal\n"
	      "is passed on to CMD; a second one kills it).  Processes CMD leaves running are\n"
	      "moved back to cgmctl's own kernel cgroup and keep the cgmalloc group until the\n"
	      "last of them exits.  Every MS milliseconds (default 100) until CMD exits it\n"
	      "samples:\n"
	      "\n"
	      "  kernel_anon      anonymous memory the kernel charges (v2 memory.stat anon, v1 rss)\n"
	      "  kernel_usage     all the kernel charges (v2 memory.current, v1 memory.usage_in_bytes)\n"
	      "  cgm_current      the cgmalloc group's memory.current\n"
	      "  cgm_KEY          its memory.stat anon, heap_free and mapped_anon, where this\n"
	      "                   build has them\n"
	      "\n"
	      "and then prints each series' peak and mean in MiB, cgm_current / kernel_anon at\n"
	      "their peaks, and the median of that ratio over the samples where kernel_anon is\n"
	      "at least 1 MiB (--json: the same as JSON, in bytes).  With -o DIR it also writes\n"
	      "DIR/samples.tsv (time_ms and the series, in bytes), DIR/plot.gp and, if gnuplot\n"
	      "is on PATH, DIR/plot.png.\n"
	      "\n"
	      "It needs a kernel memory cgroup it may create (usually: root); without one it says\n"
	      "why and exits 1.  Exit status: CMD's (128 + N if signal N killed it), 1 if\n"
	      "compare itself failed, 2 for a bad command line.\n", stdout);
}

/* What cgmctl export writes: the format, the file, every metric family. */
static void print_export(void)
{
	fputs("cgmctl export --prometheus [--textfile DIR] [GROUP]\n"
	      "\n"
	      "Writes every group of the hierarchy (with GROUP: GROUP and every group below it)\n"
	      "in the Prometheus text exposition format, version 0.0.4: for each metric family\n"
	      "its # HELP and # TYPE lines, then one sample per group, labelled with the group's\n"
	      "path, cgroup=\"/a/b\".  The values are what `cgmctl cat` shows, read after one\n"
	      "flush of the subtree; limits set to max are +Inf, and the root group has no\n"
	      "limits (as in cgroup v2).  memory.events is one family with the event as a\n"
	      "label (event=\"oom_kill\"); memory.stat is one family per key.\n"
	      "\n"
	      "Without --textfile it prints to stdout.  With --textfile DIR it writes\n"
	      "DIR/cgmalloc.prom for node_exporter's textfile collector\n"
	      "(--collector.textfile.directory=DIR), through a temporary file in DIR that is\n"
	      "synced and renamed over it: the collector never reads half of one.  Run it from\n"
	      "cron or a systemd timer.\n"
	      "\n"
	      "The families:\n"
	      "\n", stdout);
	export_list_families(stdout);
}

/* What cgmctl mount serves, and how it differs from cgroupfs. */
static void print_mount(void)
{
	fputs("cgmctl mount [--daemon] DIR\n"
	      "\n"
	      "Mounts the hierarchy at DIR, through FUSE, as a cgroup v2 directory tree, so that\n"
	      "a script written for /sys/fs/cgroup runs on it: a directory per group, and in it\n"
	      "the files of `cgmctl help files` that the group has (the root has no limits).\n"
	      "mkdir makes a group, rmdir removes one (EBUSY while it has processes or groups\n"
	      "below it); cat renders a file when it is read from its start, and one write is\n"
	      "one value, parsed as `cgmctl set` parses it: a bad value fails with EINVAL (the\n"
	      "reason goes to cgmctl's stderr), a read-only file opened for writing EACCES, a\n"
	      "file of a group removed meanwhile ENODEV.  rename, chmod and chown fail with\n"
	      "EOPNOTSUPP; new files, unlink and links as on cgroupfs (EACCES, EPERM).  Files\n"
	      "show size 0, as on cgroupfs.  What cgmctl and programs change shows at once.\n"
	      "\n"
	      "A user who is not root can mount (fusermount3, set-uid root, does the mount);\n"
	      "only that user sees the files.  cgmctl serves the mount until it is unmounted\n"
	      "(fusermount3 -u DIR), gets SIGTERM, SIGINT or SIGHUP, or finds the hierarchy\n"
	      "file removed or replaced (it looks every half second); then it unmounts and\n"
	      "exits 0.  If it is killed, fusermount3 unmounts.  --daemon: it detaches once\n"
	      "mounted.\n"
	      "\n"
	      "poll(), select() and epoll wait as on cgroupfs.  An open file polls\n"
	      "POLLPRI|POLLERR until it is first read; memory.events, memory.events.local and\n"
	      "cgroup.events do again whenever their text changes (a high or max count,\n"
	      "populated): read from offset 0 to see the new text, which quiets it.  cgmctl\n"
	      "looks at the polled files every 100 ms: a wakeup comes up to 100 ms late, and a\n"
	      "change undone within that time wakes nobody.  A file of a removed group polls\n"
	      "POLLPRI|POLLERR.\n"
	      "\n"
	      "memory.pressure, read-only elsewhere, takes a trigger here (mode 0644),\n"
	      "\"some|full THRESHOLD_US WINDOW_US\" with the kernel's rules (else EINVAL): one\n"
	      "per open file (a second write to it: EBUSY), disarmed when the file is closed.\n"
	      "poll() on that file says POLLPRI once each time the trigger fires (looked at\n"
	      "every window/10); without a trigger, POLLPRI|POLLERR at once, as the kernel's.\n"
	      "A read still shows the PSI figures.\n", stdout);
}

const char *ctl_file_list(char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < cgm_nfiles && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? " " : "", cgm_files[i].name);
	return buf;
}

int cmd_help(struct ctl *c, int argc, char **argv)
{
	bool markdown = false;
	int opt;

	while ((opt = ctl_getopt(c, argc, argv, "m")) != -1) {
		if (opt != 'm')
			return CTL_USAGE;
		markdown = true;
	}
	if (optind == argc && !markdown) {
		ctl_usage(stdout);
		return CTL_OK;
	}
	if (argc - optind == 1 && strcmp(argv[optind], "conf") == 0) {
		print_conf(markdown);
		return CTL_OK;
	}
	if (argc - optind == 1 && strcmp(argv[optind], "files") == 0) {
		print_files(markdown);
		return CTL_OK;
	}
	if (argc - optind == 1 && strcmp(argv[optind], "compare") == 0 && !markdown) {
		print_compare();
		return CTL_OK;
	}
	if (argc - optind == 1 && strcmp(argv[optind], "export") == 0 && !markdown) {
		print_export();
		return CTL_OK;
	}
	if (argc - optind == 1 && strcmp(argv[optind], "mount") == 0 && !markdown) {
		print_mount();
		return CTL_OK;
	}
	ctl_err("help: the topics are: conf, files, compare, export, mount "
		"(usage: cgmctl help [conf|files [--markdown]|compare|export|mount])");
	return CTL_USAGE;
}
