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
 * The text of a file as JSON: cgroup.procs a list of pids, "key value"
 * lines (memory.stat, memory.events) an object, one value a scalar.
 */
static void print_json(const char *group, const char *file, char *text)
{
	bool procs = strcmp(file, "cgroup.procs") == 0;
	bool keyed = strchr(text, ' ') != NULL;
	int i = 0;

	printf("{\"group\": ");
	json_string(stdout, group);
	printf(", \"file\": ");
	json_string(stdout, file);
	printf(", \"value\": ");
	if (!procs && !keyed) {
		text[strcspn(text, "\n")] = '\0';
		json_value(text);
		printf("}\n");
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
	printf(procs ? "]}\n" : "}}\n");
}

int cmd_cat(struct ctl *c, int argc, char **argv)
{
	const char *group, *file;
	size_t len = 65536;
	char *buf = NULL;
	uint32_t idx;
	int n;

	if (ctl_args(c, argc, argv, "", 2, "cat GROUP FILE") < 0)
		return CTL_USAGE;
	group = argv[optind];
	file = argv[optind + 1];
	if (ctl_check_path(c, group) < 0)
		return CTL_USAGE;
	if (ctl_check_file(c, file) < 0)
		return CTL_FAIL;
	if (ctl_open(c, false) < 0)
		return CTL_FAIL;
	idx = ctl_find_group(c, group);
	/* cgm_file_read() says how long the whole text is, like snprintf. */
	for (n = 0; idx != CGM_NONE;) {
		char *bigger = realloc(buf, len);

		if (!bigger) {
			ctl_err("cat: out of memory");
			n = -ENOMEM;
			break;
		}
		buf = bigger;
		n = cgm_file_read(&c->h, idx, file, buf, len);
		if (n < 0 || (size_t)n < len)
			break;
		len = (size_t)n + 1;
	}
	ctl_close(c);
	if (idx == CGM_NONE || n < 0) {
		if (n < 0 && n != -ENOMEM)
			ctl_err("cat: %s %s: %s", group, file, strerror(-n));
		free(buf);
		return CTL_FAIL;
	}
	if (c->json)
		print_json(group, file, buf);
	else
		fputs(buf, stdout);
	free(buf);
	return CTL_OK;
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

/* set and move: open the hierarchy, write one file, close it. */
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

int cmd_move(struct ctl *c, int argc, char **argv)
{
	if (ctl_args(c, argc, argv, "", 2, "move PID GROUP") < 0)
		return CTL_USAGE;
	return open_and_write(c, false, argv[optind + 1], "cgroup.procs", argv[optind]);
}
