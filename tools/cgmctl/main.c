/*
 * cgmctl: look at and change a cgmalloc hierarchy from the shell, the way
 * one would with the files of a cgroup v2 directory.
 *
 * Global options come before or after the subcommand; each subcommand
 * takes its own options and arguments (cgmctl help).
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cgm/config.h"
#include "cgm/log.h"
#include "cgmalloc.h"
#include "cgmctl.h"

void ctl_usage(FILE *f)
{
	char files[512];

	fputs("usage: cgmctl [--hierarchy PATH] [--json] COMMAND [ARGS]\n"
	      "\n"
	      "  ls [-r] [GROUP]              GROUP (default /) and its child groups (-r: all below)\n"
	      "  cat GROUP [FILE]...          print files of GROUP, e.g. memory.stat (none named: all\n"
	      "                               it has); several are each headed \"==> FILE <==\"\n"
	      "  set GROUP FILE VALUE         write a file of GROUP, e.g. memory.max 512M\n"
	      "  mkdir GROUP                  create GROUP and its missing parents\n"
	      "  rmdir [-r] GROUP             remove an empty GROUP (-r: and every group below it,\n"
	      "                               deepest first; refused if any has processes)\n"
	      "  move PID... GROUP            move attached processes and their charges to GROUP\n"
	      "  mount [--daemon] DIR         the groups at DIR as a cgroup v2 directory tree (FUSE),\n"
	      "                               until unmounted, SIGTERM, or the hierarchy file is gone\n"
	      "                               (cgmctl help mount)\n"
	      "  run [-g GROUP] [-s FILE=VALUE]... [--] CMD [ARGS]\n"
	      "                               run CMD under libcgmalloc.so in GROUP (default: a scope\n"
	      "                               /run-PID, removed when its last process is gone),\n"
	      "                               after setting the files given with -s\n"
	      "  compare [-i MS] [-o DIR] [--limit SIZE] [--] CMD [ARGS]\n"
	      "                               run CMD in a kernel memory cgroup and a cgmalloc group\n"
	      "                               at once and report both charges (cgmctl help compare)\n"
	      "  export --prometheus [--textfile DIR] [GROUP]\n"
	      "                               every group (or GROUP and those below it) as Prometheus\n"
	      "                               metrics; --textfile: replace DIR/cgmalloc.prom\n"
	      "                               atomically (cgmctl help export)\n"
	      "  pressure GROUP [SPEC] [-n N] [-t SECS]\n"
	      "                               memory.pressure; with SPEC (\"some 150000 1000000\"),\n"
	      "                               a line each time that trigger fires (-n: stop after N,\n"
	      "                               default 1; -t: give up after SECS, exit 1)\n"
	      "  top [-d SECS] [-n N] [GROUP] the groups below GROUP by usage, with peak, what the\n"
	      "                               allocators keep, limits and limit events, redrawn\n"
	      "                               every SECS (2); -n: stop after N frames\n"
	      "  help [conf|files [--markdown]|compare|export|mount]\n"
	      "                               this text; the CGMALLOC_CONF keys; a group's files;\n"
	      "                               what compare measures; the metrics export writes;\n"
	      "                               what mount serves\n"
	      "\n"
	      "  --hierarchy PATH   the hierarchy file (default: hierarchy= of CGMALLOC_CONF,\n"
	      "                     else /dev/shm/cgmalloc-UID/hierarchy)\n"
	      "  --json             ls, cat and compare print JSON\n"
	      "\n", f);
	fprintf(f, "Files: %s.\nExit status: 0 done, 1 failed, 2 bad command line.\n",
		ctl_file_list(files, sizeof(files)));
}

void ctl_err(const char *fmt, ...)
{
	char raw[1024], line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	/* One line, whatever a value quoted in it contained. */
	cgm_escape_line(raw, line, sizeof(line));
	fprintf(stderr, "cgmctl: %s\n", line);
}

int ctl_getopt(struct ctl *c, int argc, char **argv, const char *own)
{
	static const struct option longopts[] = {
		{ "hierarchy", required_argument, NULL, 'H' },
		{ "json", no_argument, NULL, 'j' },
		{ "markdown", no_argument, NULL, 'm' },
		{ "limit", required_argument, NULL, 'L' },
		{ "prometheus", no_argument, NULL, 'P' },
		{ "textfile", required_argument, NULL, 'T' },
		{ "daemon", no_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	static char **cur;
	/* Messages name the subcommand; the top level is cgmctl itself. */
	char who[32] = "";
	char opts[32];
	int opt;

	if (c->cmd)
		snprintf(who, sizeof(who), "%s: ", c->cmd);
	/* A new command line: getopt starts again (glibc: optind = 0). */
	if (argv != cur) {
		cur = argv;
		optind = 0;
	}
	snprintf(opts, sizeof(opts), "%s:%s", own[0] == '+' ? "+" : "", own + (own[0] == '+'));
	opterr = 0;
	for (;;) {
		opt = getopt_long(argc, argv, opts, longopts, NULL);
		switch (opt) {
		case 'H':
			if (strlen(optarg) >= sizeof(c->path) || !optarg[0]) {
				ctl_err("%s--hierarchy: bad path '%s'", who, optarg);
				return '?';
			}
			snprintf(c->path, sizeof(c->path), "%s", optarg);
			continue;
		case 'j':
			c->json = true;
			continue;
		case ':':
			ctl_err("%soption '%s' needs a value", who, argv[optind - 1]);
			return '?';
		case '?':
			if (strncmp(argv[optind - 1], "--", 2) == 0 || !optopt)
				ctl_err("%sbad option '%s' (cgmctl help)", who, argv[optind - 1]);
			else
				ctl_err("%sunknown option '-%c' (cgmctl help)", who, optopt);
			return '?';
		case -1:
			return opt;
		default:
			/* Long options that only some commands take. */
			if (!strchr(own, opt)) {
				ctl_err("%sbad option '%s' (cgmctl help)", who, argv[optind - 1]);
				return '?';
			}
			return opt;
		}
	}
}

int ctl_nargs(struct ctl *c, int argc, int n, const char *usage)
{
	if (argc - optind == n)
		return 0;
	ctl_err("%s: expected %d argument%s (usage: cgmctl %s)", c->cmd, n, n == 1 ? "" : "s",
		usage);
	return -1;
}

int ctl_args(struct ctl *c, int argc, char **argv, const char *own, int n,
	     const char *usage)
{
	if (ctl_getopt(c, argc, argv, own) != -1)
		return -1;
	return ctl_nargs(c, argc, n, usage);
}

/*
 * The hierarchy= of CGMALLOC_CONF, so that cgmctl sees what the programs
 * see, else the default; why the default cannot be used is kept for
 * ctl_open() to say (--hierarchy may name another file meanwhile).
 */
static void default_path(struct ctl *c)
{
	static struct cgm_config conf;

	cgm_conf_defaults(&conf);
	cgm_conf_parse(&conf, getenv("CGMALLOC_CONF"), true);
	if (conf.hierarchy[0])
		snprintf(c->path, sizeof(c->path), "%s", conf.hierarchy);
	else if (hier_default_path(c->path, sizeof(c->path), c->path_error,
				   sizeof(c->path_error)) < 0)
		c->path[0] = '\0';
}

static const struct {
	const char *name;
	int (*fn)(struct ctl *c, int argc, char **argv);
} commands[] = {
	{ "ls", cmd_ls }, { "cat", cmd_cat }, { "set", cmd_set },
	{ "mkdir", cmd_mkdir }, { "rmdir", cmd_rmdir }, { "move", cmd_move },
	{ "mount", cmd_mount },
	{ "run", cmd_run }, { "compare", cmd_compare }, { "export", cmd_export },
	{ "top", cmd_top },
	{ "pressure", cmd_pressure },
	{ "help", cmd_help },
};

/* The names of commands[], each after a space. */
static const char *command_list(char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < CGM_ARRAY_SIZE(commands) && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, " %s", commands[i].name);
	return buf;
}

int main(int argc, char **argv)
{
	static struct ctl c;
	char names[128];

	default_path(&c);
	switch (ctl_getopt(&c, argc, argv, "+hV")) {
	case -1:
		break;
	case 'h':
		ctl_usage(stdout);
		return CTL_OK;
	case 'V':
		printf("cgmctl %s\n", CGMALLOC_VERSION);
		return CTL_OK;
	default:
		return CTL_USAGE;
	}
	if (optind >= argc) {
		ctl_usage(stderr);
		return CTL_USAGE;
	}
	for (size_t i = 0; i < CGM_ARRAY_SIZE(commands); i++) {
		if (strcmp(argv[optind], commands[i].name) == 0) {
			int status;

			c.cmd = commands[i].name;
			status = commands[i].fn(&c, argc - optind, argv + optind);
			if (fflush(stdout) != 0 || ferror(stdout)) {
				ctl_err("%s: cannot write the output", c.cmd);
				return CTL_FAIL;
			}
			return status;
		}
	}
	ctl_err("unknown command '%s' (commands:%s)", argv[optind], command_list(names, sizeof(names)));
	return CTL_USAGE;
}
