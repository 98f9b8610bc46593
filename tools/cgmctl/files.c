/*
 * cgmctl cat, set, move: a group's files, read with cgm_file_read() (which
 * flushes statistics first) and written with cgm_file_write() (which
 * validates a value before applying anything).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cgm/files.h"
#include "cgmctl.h"

int ctl_check_file(struct ctl *c, const char *name)
{
	char list[512];

	if (cgm_file_find(name))
		return 0;
	ctl_err("%s: no file '%s' (files: %s)", c->cmd, name, ctl_file_list(list, sizeof(list)));
	return -1;
}

/* A value as JSON: a bare number when it is one, else a string. */
static void json_value(const char *v)
{
	if (json_is_number(v))
		fputs(v, stdout);
	else
		json_string(stdout, v);
}

/*
 * The text of a file as a JSON value: cgroup.procs a list of pids, "key
 * value" lines (memory.stat, memory.events) an object, one value a scalar.
 */
static void print_json_value(const char *file, char *text)
{
	bool procs = strcmp(file, "cgroup.procs") == 0;
	bool keyed = strchr(text, ' ') != NULL;
	int i = 0;

	if (!procs && !keyed) {
		text[strcspn(text, "\n")] = '\0';
		json_value(text);
		return;
	}
	printf(procs ? "[" : "{");
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), i++) {
		char *sp = strchr(line, ' ');

		printf("%s", i ? ", " : "");
		if (procs) {
			json_value(line);
			continue;
		}
		if (sp)
			*sp = '\0';
		json_string(stdout, line);
		printf(": ");
		json_value(sp ? sp + 1 : "");
	}
	printf(procs ? "]" : "}");
}

int ctl_render(struct ctl *c, uint32_t idx, const char *file, bool flush, char **buf,
	       size_t *cap)
{
	/* The text's length comes back whatever fitted, like snprintf's. */
	for (;;) {
		int n;

		if (*cap == 0 || !*buf) {
			char *bigger = realloc(*buf, *cap ? *cap : 4096);

			if (!bigger)
				return -ENOMEM;
			*buf = bigger;
			*cap = *cap ? *cap : 4096;
		}
		n = flush ? cgm_file_read(&c->h, idx, file, *buf, *cap) :
			    cgm_file_render(&c->h, idx, file, *buf, *cap);
		if (n < 0 || (size_t)n < *cap)
			return n;
		free(*buf);
		*buf = NULL;
		*cap = (size_t)n + 1;
	}
}

/*
 * The files named in @names (@n of them), or, if none, every file group
 * @idx has that can be read, into @out (room for cgm_nfiles, or @n).
 */
static size_t cat_files(uint32_t idx, char **names, int n, const char **out)
{
	size_t k = 0;

	for (int i = 0; i < n; i++)
		out[k++] = names[i];
	if (n)
		return k;
	for (size_t i = 0; i < cgm_nfiles; i++)
		if (cgm_files[i].show && cgm_file_exists(&cgm_files[i], idx))
			out[k++] = cgm_files[i].name;
	return k;
}

/*
 * cat GROUP [FILE]...: one file as it is (--json: an object with its
 * group, name and value); several, or all the group has, each after a
 * "==> FILE <==" line as head(1) heads them (--json: one object with the
 * group and the files by name).  A file that cannot be read is said on
 * stderr, the others are shown, and the status is 1.
 */
int cmd_cat(struct ctl *c, int argc, char **argv)
{
	const char *group, **files = NULL;
	size_t nfiles, cap = 0, shown = 0;
	int named, status = CTL_OK;
	bool headed;
	char *buf = NULL;
	uint32_t idx;

	if (ctl_getopt(c, argc, argv, "") != -1)
		return CTL_USAGE;
	if (argc - optind < 1) {
		ctl_err("cat: expected at least 1 argument (usage: cgmctl cat GROUP [FILE]...)");
		return CTL_USAGE;
	}
	group = argv[optind];
	named = argc - optind - 1;
	headed = named != 1;
	if (ctl_check_path(c, group) < 0)
		return CTL_USAGE;
	for (int i = 0; i < named; i++)
		if (ctl_check_file(c, argv[optind + 1 + i]) < 0)
			return CTL_FAIL;
	if (ctl_open(c, false) < 0)
		return CTL_FAIL;
	idx = ctl_find_group(c, group);
	files = calloc(named ? (size_t)named : cgm_nfiles, sizeof(*files));
	if (idx == CGM_NONE || !files) {
		if (files == NULL && idx != CGM_NONE)
			ctl_err("cat: out of memory");
		ctl_close(c);
		free(files);
		return CTL_FAIL;
	}
	nfiles = cat_files(idx, argv + optind + 1, named, files);
	if (c->json && headed) {
		printf("{\"group\": ");
		json_string(stdout, group);
		printf(", \"files\": {");
	}
	for (size_t i = 0; i < nfiles; i++) {
		int n = ctl_render(c, idx, files[i], true, &buf, &cap);

		if (n < 0) {
			ctl_err("cat: %s %s: %s", group, files[i],
				n == -ENOMEM ? "out of memory" : strerror(-n));
			status = CTL_FAIL;
			continue;
		}
		if (c->json && headed) {
			printf("%s\n  ", shown ? "," : "");
			json_string(stdout, files[i]);
			printf(": ");
			print_json_value(files[i], buf);
		} else if (c->json) {
			printf("{\"group\": ");
			json_string(stdout, group);
			printf(", \"file\": ");
			json_string(stdout, files[i]);
			printf(", \"value\": ");
			print_json_value(files[i], buf);
			printf("}\n");
		} else {
			if (headed)
				printf("%s==> %s <==\n", shown ? "\n" : "", files[i]);
			fputs(buf, stdout);
		}
		shown++;
	}
	if (c->json && headed)
		printf("\n}}\n");
	ctl_close(c);
	free(buf);
	free(files);
	return status;
}

/* Write @value to @file of @group: CTL_OK, or CTL_FAIL after saying why. */
int ctl_write(struct ctl *c, const char *group, const char *file, const char *value)
{
	char why[256];
	uint32_t idx;
	int err;

	idx = ctl_find_group(c, group);
	if (idx == CGM_NONE)
		return CTL_FAIL;
	err = cgm_file_write(&c->h, ctl_own_group(c), idx, file, value, why, sizeof(why));
	if (err == 0)
		return CTL_OK;
	/* cgm_file_write() leaves "failed" when the reason is only the errno. */
	if (strcmp(why, "failed") == 0)
		snprintf(why, sizeof(why), "%s", err == -ENOMEM ?
			 "refused: the destination's memory.max cannot take the process's charge" :
			 strerror(-err));
	ctl_err("%s: %s %s: %s", c->cmd, group, file, why);
	return CTL_FAIL;
}

/* set: open the hierarchy, write one file, close it. */
static int open_and_write(struct ctl *c, bool create, const char *group, const char *file,
			  const char *value)
{
	int status;

	if (ctl_check_path(c, group) < 0)
		return CTL_USAGE;
	if (ctl_check_file(c, file) < 0 || ctl_open(c, create) < 0)
		return CTL_FAIL;
	status = ctl_write(c, group, file, value);
	ctl_close(c);
	return status;
}

int cmd_set(struct ctl *c, int argc, char **argv)
{
	/* Options stop at the group: a value may start with '-'. */
	if (ctl_args(c, argc, argv, "+", 3, "set GROUP FILE VALUE") < 0)
		return CTL_USAGE;
	return open_and_write(c, true, argv[optind], argv[optind + 1], argv[optind + 2]);
}

/*
 * move PID... GROUP: each process in turn; one line for each that could
 * not be moved, and then the status is 1.
 */
int cmd_move(struct ctl *c, int argc, char **argv)
{
	const char *group;
	int status = CTL_OK;

	if (ctl_getopt(c, argc, argv, "") != -1)
		return CTL_USAGE;
	/* Fewer than two: what one PID GROUP always said. */
	if (argc - optind < 2) {
		ctl_nargs(c, argc, 2, "move PID GROUP");
		return CTL_USAGE;
	}
	group = argv[argc - 1];
	if (ctl_check_path(c, group) < 0)
		return CTL_USAGE;
	if (ctl_open(c, false) < 0)
		return CTL_FAIL;
	if (ctl_find_group(c, group) == CGM_NONE) {
		ctl_close(c);
		return CTL_FAIL;
	}
	for (int i = optind; i < argc - 1; i++)
		if (ctl_write(c, group, "cgroup.procs", argv[i]) != CTL_OK)
			status = CTL_FAIL;
	ctl_close(c);
	return status;
}
