/*
 * Switching accounting on for this process, and off at exit.
 *
 * At start-up: check that mimalloc is the version whose block sizes the
 * fast paths read, open the hierarchy, pick the group (group=, else the
 * path of the process's kernel memory cgroup as /proc/self/cgroup says,
 * else /), attach, apply max=/high= from the configuration, and turn the
 * accounting key on.  Any failure is one line on stderr and the program
 * runs on without accounting.
 */
#include <errno.h>
#include <fcntl.h>
#include <mimalloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgm/accounted.h"
#include "cgm/clock.h"
#include "cgm/config.h"
#include "cgm/files.h"
#include "cgm/log.h"
#include "cgm/mi_layout.h"
#include "cgm/shim.h"
#include "cgm/spiller.h"
#include "cgm/strbuf.h"

/* memory.reclaim written by this process: at once, whatever was collected just before. */
static void reclaim_heap_now(void)
{
	cgm_reclaim_self_wait();
}

/* Does the comma-separated controller list @list (of length @len) name "memory"? */
static bool lists_memory(const char *list, size_t len)
{
	for (size_t i = 0; i + 6 <= len; i++)
		if (!memcmp(list + i, "memory", 6) && (i == 0 || list[i - 1] == ',') &&
		    (i + 6 == len || list[i + 6] == ','))
			return true;
	return false;
}

/*
 * The process's kernel memory cgroup path, from /proc/self/cgroup: the
 * cgroup v1 memory controller's line, else the v2 one ("0::/path").
 * "/" on any failure, or when the path is not a valid group path.  Read
 * with plain system calls: cheap enough for every exec of a busy script.
 */
static void kernel_memcg_path(char *buf, size_t len)
{
	char text[4096], found[CGM_PATH_MAX] = "/";
	bool v1 = false;
	ssize_t n;
	int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);

	cgm_str_copy(buf, len, "/");
	if (fd < 0)
		return;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return;
	text[n] = '\0';
	for (char *line = text, *next; line && *line; line = next) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (!c2)
			continue;
		if (lists_memory(c1 + 1, (size_t)(c2 - c1 - 1))) {
			cgm_str_copy(found, sizeof(found), c2 + 1);
			v1 = true;
		} else if (!v1 && c2 == c1 + 1 && !strncmp(line, "0:", 2)) {
			cgm_str_copy(found, sizeof(found), c2 + 1);
		}
	}
	if (group_path_valid(found) == 0)
		cgm_str_copy(buf, len, found);
}

/*
 * At exit: the report, and everything this process holds goes back.  The
 * accounting key stays on (rewriting code costs more than an exit needs):
 * what the exit path still allocates charges nothing once detached.
 */
static void accounting_stop(void)
{
	int64_t next;

	if (cgm_acct.proc == CGM_NONE)
		return;
	/*
	 * What was touched since a sample a second old reaches memory.peak: a
	 * program that allocates its buffers as it starts and then works in
	 * them (xz -T2 -6: 117 MiB resident at its end) left it at its last
	 * sample (31 MB), unless a reader looked meanwhile.  A sample, not a
	 * reclaim or a throttle: the process is going.  Not in a forked child
	 * that never sampled (a shell's $(...) reads no statm), nor in a
	 * process sampled lately (spill=1's background reclaim looks every
	 * half second).
	 */
	next = __atomic_load_n(&cgm_next_sample_ns, __ATOMIC_RELAXED);
	if (next && cgm_now_ns() > next + CGM_EXIT_RESAMPLE_NS)
		cgm_resident_sample(false);
	if (cgm_conf.stats == CGM_STATS_EXIT)
		cgm_exit_report();
	/*
	 * spill=1: what came back or left since the last sample goes into the
	 * group's counts, which keep a dead process's last published ones
	 * (a program that read back 8,000 spilled pages after its last
	 * sample left zswpin short by all of them).  Tested here, not in the
	 * call: without spilling, the spiller's code is never touched, and a
	 * small program keeps one 64 KiB window of our text out of its RSS.
	 */
	if (static_key_enabled(&cgm_spill_key))
		cgm_spill_publish();
	acct_detach(&cgm_acct);
}

/* Set a limit asked for in CGMALLOC_CONF; false (after a line) if refused. */
static bool apply_limit(uint32_t group, enum acct_limit which, uint64_t bytes, const char *name)
{
	int err;

	if (bytes == CGM_SIZE_MAX)
		return true;
	err = group == CGM_ROOT ? -EINVAL : acct_set_limit(&cgm_acct.h, group, which, bytes);
	if (err)
		cgm_log("accounting: cannot set memory.%s of the group: %s", name,
			group == CGM_ROOT ? "the root group has no limits (as in cgroup v2)" :
			cgm_strerror(-err));
	return err == 0;
}

/*
 * Accounting cannot start, for the reason @why.  When a limit applies --
 * max= or high= was asked for, or a group named whose limits cannot be
 * checked -- and enforce=1, the program does not run unlimited: it exits
 * before main.  Otherwise it runs unaccounted.
 */
static const char *refuse(bool limit_applies, const char *status, const char *fmt, ...)
	CGM_PRINTF(3, 4);
static const char *refuse(bool limit_applies, const char *status, const char *fmt, ...)
{
	char why[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (limit_applies && cgm_conf.enforce) {
		cgm_log("accounting cannot start (%s) and a limit applies: exiting "
			"(enforce=0 runs the program unaccounted)", why);
		_exit(2);
	}
	cgm_log("accounting off: %s", why);
	return status;
}

/* Where this process attaches, and whether the group is a scope of this run. */
static void pick_group(char *group, size_t len, bool *scope, bool limits_asked)
{
	*scope = false;
	/* Both named: said, since one of them is dropped (it was, silently). */
	if (cgm_conf.scope[0] && cgm_conf.group[0])
		cgm_log("CGMALLOC_CONF: both group=%s and scope=%s: the scope is used",
			cgm_conf.group, cgm_conf.scope);
	if (cgm_conf.scope[0] || cgm_conf.group[0]) {
		const char *named = cgm_conf.scope[0] ? cgm_conf.scope : cgm_conf.group;

		if (strlen(named) < len && group_path_valid(named) == 0) {
			cgm_str_copy(group, len, named);
			*scope = cgm_conf.scope[0] != '\0';
			return;
		}
		cgm_log("CGMALLOC_CONF: bad value '%s' for '%s' (expected %s); ignored", named,
			cgm_conf.scope[0] ? "scope" : "group", group_path_rules);
	}
	kernel_memcg_path(group, len);
	/*
	 * Limits without a named group: a scope of this run's own below the
	 * usual group, so that they do not outlive it; programs it execs join
	 * it through the environment, forked children through their parent.
	 */
	if (limits_asked) {
		size_t n = strlen(group);

		snprintf(group + n, len - n, "%srun-%d", n > 1 ? "/" : "", (int)getpid());
		*scope = true;
	}
}

/* Programs this one execs find the scope in CGMALLOC_CONF (later keys win). */
static void export_scope(const char *group)
{
	CGM_BIG_BSS static char conf[CGM_CONF_ENV_MAX];
	const char *old = getenv("CGMALLOC_CONF");
	int n = snprintf(conf, sizeof(conf), "%s%sscope=%s", old ? old : "",
			 old && old[0] ? "," : "", group);

	if (n > 0 && (size_t)n < sizeof(conf))
		setenv("CGMALLOC_CONF", conf, 1);
}

/*
 * mi_layout_check(), unless a process of this hierarchy already passed it
 * with the same mimalloc binary: the check allocates a block of each kind,
 * 18k instructions at every start of a program that may never allocate.
 */
static int check_mimalloc(struct cgm_hier *h, const char **why)
{
	uint64_t id = mi_build_id_hash();

	/* Where the accounted malloc finds mimalloc's heap: every process, though the check below is cached. */
	if (!mi209_heap_setup(cgm_conf.alloc_pop) && cgm_conf.alloc_pop && cgm_conf.verbose)
		cgm_log("mimalloc's default heap not found in its thread-local storage: "
			"every accounted allocation calls into mimalloc");
	if (id && __atomic_load_n(&h->hdr->mi_layout_ok, __ATOMIC_RELAXED) == id)
		return 0;
	if (mi_layout_check(why) < 0)
		return -1;
	if (id)
		__atomic_store_n(&h->hdr->mi_layout_ok, id, __ATOMIC_RELAXED);
	return 0;
}

const char *cgm_accounting_start(void)
{
	/* Only verbose=1 prints it: among the big buffers, untouched otherwise. */
	CGM_BIG_BSS static char status[CGM_PATH_MAX * 2 + 64];
	char path[CGM_PATH_MAX], group[CGM_PATH_MAX], why[512];
	bool limits_asked = cgm_conf.max != CGM_SIZE_MAX || cgm_conf.high != CGM_SIZE_MAX;
	bool named = cgm_conf.group[0] || cgm_conf.scope[0], scope;
	const char *reason;
	struct cgm_proc *p;
	size_t at;
	int err;

	if (!cgm_conf.accounting)
		return "off (accounting=0)";
	if (cgm_conf.hierarchy[0])
		cgm_str_copy(path, sizeof(path), cgm_conf.hierarchy);
	else if (hier_default_path(path, sizeof(path), why, sizeof(why)) < 0)
		return refuse(limits_asked || named, "off (hierarchy refused)", "hierarchy %s", why);
	err = hier_open(&cgm_acct.h, path, true, why, sizeof(why));
	if (err)
		return refuse(limits_asked || named, "off (hierarchy refused)", "hierarchy %s", why);
	if (check_mimalloc(&cgm_acct.h, &reason) < 0) {
		hier_close(&cgm_acct.h);
		return refuse(limits_asked || named, "off (unsupported mimalloc)", "%s", reason);
	}
	pick_group(group, sizeof(group), &scope, limits_asked);
	cgm_acct.batch_pages = (int64_t)cgm_conf.charge_batch;
	cgm_acct.oom_policy = cgm_conf.oom == CGM_OOM_KILL ? ACCT_OOM_KILL : ACCT_OOM_ENOMEM;
	cgm_mi_purge_init();
	/*
	 * Reclaim at a limit: what mimalloc keeps goes back, and the charge
	 * follows; with spill=1, cold pages too, as many as a refused charge
	 * needs.
	 */
	cgm_acct.reclaim = cgm_reclaim_for;
	cgm_files_reclaim_self = reclaim_heap_now;
	err = scope ? acct_attach_scope(&cgm_acct, group) : acct_attach(&cgm_acct, group);
	if (err) {
		uint32_t idx;
		bool limited;

		hier_lock(&cgm_acct.h.hdr->tree_lock);
		idx = group_lookup(&cgm_acct.h, group);
		limited = idx != CGM_NONE && group_limited(&cgm_acct.h, idx);
		hier_unlock(&cgm_acct.h.hdr->tree_lock);
		hier_close(&cgm_acct.h);
		return refuse(limits_asked || limited, "off (cannot attach)",
			      "cannot attach to group %s: %s", group,
			      err == -ENOSPC ? "the hierarchy is full" : cgm_strerror(-err));
	}
	p = hier_proc(&cgm_acct.h, cgm_acct.proc);
	if (!apply_limit(p->group, CGM_LIMIT_MAX, cgm_conf.max, "max") ||
	    !apply_limit(p->group, CGM_LIMIT_HIGH, cgm_conf.high, "high")) {
		acct_detach(&cgm_acct);
		hier_close(&cgm_acct.h);
		return refuse(true, "off (limit refused)", "the limit asked for cannot be set");
	}
	if (scope && !cgm_conf.scope[0])
		export_scope(group);
	cgm_accounted_init();
	cgm_thread_start_init();
	/* From now on the library's lines go only to the stderr the program started with. */
	cgm_log_pin_stderr();
	cgm_exit_report_prepare();
	atexit(accounting_stop);
	pthread_atfork(NULL, NULL, cgm_accounted_fork_child);
	cgm_seen_epoch = __atomic_load_n(&cgm_acct.h.hdr->epoch, __ATOMIC_ACQUIRE);
	cgm_sync_limits();
	static_branch_enable(&cgm_accounting_key);
	cgm_spill_init();
	/*
	 * What the process already has in memory is sampled at its first
	 * allocation slow path (or by a reader, acct_refresh_stale), not
	 * here: a program that never allocates (/bin/true) makes none of
	 * the sample's system calls.
	 */
	if (!cgm_conf.verbose)
		return "on";
	at = 0;
	cgm_str_add(status, sizeof(status), &at, scope ? "on (scope " : "on (group ");
	cgm_str_add(status, sizeof(status), &at, group);
	cgm_str_add(status, sizeof(status), &at, ", hierarchy ");
	cgm_str_add(status, sizeof(status), &at, path);
	cgm_str_add(status, sizeof(status), &at, ")");
	return status;
}
