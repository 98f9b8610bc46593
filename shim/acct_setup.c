/*
 * Switching accounting on for this process, and off at exit.
 *
 * At start-up: check that mimalloc is the version whose block sizes the
 * fast paths read, open the hierarchy, pick the group (group=, else the
 * path of the process's kernel memory cgroup as libcgroup reports it,
 * else /), attach, apply max=/high= from the configuration, and turn the
 * accounting key on.  Any failure is one line on stderr and the program
 * runs on without accounting.
 */
#include <errno.h>
#include <libcgroup.h>
#include <mimalloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgm/accounted.h"
#include "cgm/config.h"
#include "cgm/log.h"
#include "cgm/shim.h"

static void reclaim_heap(void)
{
	mi_collect(true);
}

/* libcgroup must not print into the program's output. */
static void silent_logger(void *userdata, int level, const char *fmt, va_list ap)
{
	(void)userdata;
	(void)level;
	(void)fmt;
	(void)ap;
}

/* The process's memory cgroup path from libcgroup ("/" on any failure). */
static void kernel_memcg_path(char *buf, size_t len)
{
	char *path = NULL;

	snprintf(buf, len, "/");
	cgroup_set_logger(silent_logger, -1, NULL);
	if (cgroup_init() != 0)
		return;
	if (cgroup_get_current_controller_path(getpid(), "memory", &path) == 0 && path) {
		if (group_path_valid(path) == 0)
			snprintf(buf, len, "%s", path);
		free(path);
	}
}

static void fork_child(void)
{
	if (cgm_acct.proc == CGM_NONE)
		return;
	cgm_accounted_fork_child();
	if (cgm_acct.proc != CGM_NONE)
		cgm_watcher_start();
}

static void accounting_stop(void)
{
	if (!static_key_enabled(&cgm_accounting_key))
		return;
	cgm_watcher_stop();
	static_branch_disable(&cgm_accounting_key);
	if (cgm_conf.stats == CGM_STATS_EXIT)
		cgm_exit_report();
	acct_detach(&cgm_acct);
}

static void apply_limit(uint32_t group, enum acct_limit which, uint64_t bytes, const char *name)
{
	int err;

	if (bytes == CGM_SIZE_MAX)
		return;
	err = acct_set_limit(&cgm_acct.h, group, which, bytes);
	if (err)
		cgm_log("accounting: cannot set memory.%s: %s", name, strerror(-err));
}

const char *cgm_accounting_start(void)
{
	static char status[CGM_PATH_MAX * 2 + 64];
	char path[CGM_PATH_MAX], group[CGM_PATH_MAX], why[512];
	const char *reason;
	struct cgm_proc *p;
	int err;

	if (!cgm_conf.accounting)
		return "off (accounting=0)";
	if (mi_layout_check(&reason) < 0) {
		cgm_log("accounting off: %s", reason);
		return "off (unsupported mimalloc)";
	}
	if (cgm_conf.hierarchy[0])
		snprintf(path, sizeof(path), "%s", cgm_conf.hierarchy);
	else
		hier_default_path(path, sizeof(path));
	err = hier_open(&cgm_acct.h, path, true, why, sizeof(why));
	if (err) {
		cgm_log("accounting off: hierarchy %s", why);
		return "off (hierarchy refused)";
	}
	if (cgm_conf.group[0]) {
		snprintf(group, sizeof(group), "%s", cgm_conf.group);
		if (group_path_valid(group) < 0) {
			cgm_log("CGMALLOC_CONF: bad value '%s' for 'group' (expected a path like /batch/job1); using /",
				group);
			snprintf(group, sizeof(group), "/");
		}
	} else {
		kernel_memcg_path(group, sizeof(group));
	}
	cgm_acct.batch_pages = (int64_t)cgm_conf.charge_batch;
	cgm_acct.oom_policy = cgm_conf.oom == CGM_OOM_KILL ? ACCT_OOM_KILL : ACCT_OOM_ENOMEM;
	cgm_acct.reclaim = reclaim_heap;
	err = acct_attach(&cgm_acct, group);
	if (err) {
		cgm_log("accounting off: cannot attach to group %s: %s", group,
			err == -ENOSPC ? "the hierarchy is full" : strerror(-err));
		hier_close(&cgm_acct.h);
		return "off (cannot attach)";
	}
	p = hier_proc(&cgm_acct.h, cgm_acct.proc);
	apply_limit(p->group, CGM_LIMIT_MAX, cgm_conf.max, "max");
	apply_limit(p->group, CGM_LIMIT_HIGH, cgm_conf.high, "high");
	cgm_accounted_init();
	cgm_thread_start_init();
	atexit(accounting_stop);
	pthread_atfork(NULL, NULL, fork_child);
	cgm_watch_limits();
	static_branch_enable(&cgm_accounting_key);
	cgm_watcher_start();
	snprintf(status, sizeof(status), "on (group %s, hierarchy %s)", group, path);
	return status;
}
