/*
 * memory.* and cgroup.procs: rendering and parsing in the cgroup v2
 * formats, so that what cgmctl prints can be compared with a real cgroup
 * and a value that works there works here.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cgm/acct.h"
#include "cgm/config.h"
#include "cgm/files.h"

const char *const cgm_file_names[] = {
	"memory.current", "memory.peak", "memory.max", "memory.high",
	"memory.low", "memory.min", "memory.stat", "memory.stat.local",
	"memory.events", "memory.events.local", "memory.oom.group",
	"cgroup.procs", NULL,
};

static const char *const event_names[CGM_NR_EVENTS] = {
	"low", "high", "max", "oom", "oom_kill", "oom_group_kill",
};

const char *cgm_stat_name(int i, char *buf, size_t len)
{
	static const char *const names[] = {
		"anon", "allocs", "frees", "alloc_bytes", "free_bytes", "throttle_usec",
	};

	if (i < CGM_STAT_HIST0)
		return names[i];
	/* bucket b holds (2^(b+2), 2^(b+3)] bytes; named by its upper bound */
	snprintf(buf, len, "alloc_size_le_%llu", 1ULL << (i - CGM_STAT_HIST0 + 3));
	return buf;
}

void cgm_files_flush(struct cgm_hier *h, uint32_t group)
{
	acct_harvest_subtree(h, group);
	rstat_flush(h);
}

#define OUT(...) (n += snprintf(buf + (n < (int)len ? n : (int)len), \
			       n < (int)len ? len - (size_t)n : 0, __VA_ARGS__))

static int render_limit(char *buf, size_t len, int64_t pages)
{
	char tmp[32];
	int n = 0;

	OUT("%s\n", cgm_format_size(page_counter_bytes(pages), tmp, sizeof(tmp)));
	return n;
}

static int render_stat(const int64_t *stat, char *buf, size_t len)
{
	char name[48];
	int n = 0;

	for (int i = 0; i < CGM_NR_STATS; i++) {
		int64_t v = stat[i];

		if (i == CGM_STAT_THROTTLE_NS)
			v /= 1000;
		OUT("%s %" PRId64 "\n", cgm_stat_name(i, name, sizeof(name)), v);
	}
	return n;
}

static int render_events(const int64_t *ev, char *buf, size_t len)
{
	int n = 0;

	for (int i = 0; i < CGM_NR_EVENTS; i++)
		OUT("%s %" PRId64 "\n", event_names[i], __atomic_load_n(&ev[i], __ATOMIC_RELAXED));
	return n;
}

static int render_procs(struct cgm_hier *h, uint32_t group, char *buf, size_t len)
{
	int n = 0;

	for (uint32_t i = 0; i < CGM_MAX_PROCS; i++) {
		struct cgm_proc *p = &h->procs[i];

		if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == CGM_SLOT_LIVE &&
		    p->group == group && acct_proc_start_time(p->pid) == p->start_time)
			OUT("%d\n", p->pid);
	}
	return n;
}

int cgm_file_read(struct cgm_hier *h, uint32_t group, const char *name,
		  char *buf, size_t len)
{
	if (!hier_group(h, group))
		return -ENOENT;
	if (!strcmp(name, "memory.current") || !strcmp(name, "memory.peak") ||
	    !strncmp(name, "memory.stat", 11))
		cgm_files_flush(h, group);
	return cgm_file_render(h, group, name, buf, len);
}

int cgm_file_render(struct cgm_hier *h, uint32_t group, const char *name,
		    char *buf, size_t len)
{
	struct cgm_group *g = hier_group(h, group);
	int n = 0;

	if (!g)
		return -ENOENT;
	if (len)
		buf[0] = '\0';
	if (!strcmp(name, "memory.current"))
		OUT("%" PRIu64 "\n", page_counter_bytes(page_counter_read(&g->memory)));
	else if (!strcmp(name, "memory.peak"))
		OUT("%" PRIu64 "\n", page_counter_bytes(__atomic_load_n(&g->memory.watermark, __ATOMIC_RELAXED)));
	else if (!strcmp(name, "memory.max"))
		n = render_limit(buf, len, g->memory.max);
	else if (!strcmp(name, "memory.high"))
		n = render_limit(buf, len, g->memory.high);
	else if (!strcmp(name, "memory.low"))
		n = render_limit(buf, len, g->memory.low);
	else if (!strcmp(name, "memory.min"))
		n = render_limit(buf, len, g->memory.min);
	else if (!strcmp(name, "memory.stat"))
		n = render_stat(g->stat, buf, len);
	else if (!strcmp(name, "memory.stat.local"))
		n = render_stat(g->stat_local, buf, len);
	else if (!strcmp(name, "memory.events"))
		n = render_events(g->events, buf, len);
	else if (!strcmp(name, "memory.events.local"))
		n = render_events(g->events_local, buf, len);
	else if (!strcmp(name, "memory.oom.group"))
		OUT("%u\n", g->oom_group);
	else if (!strcmp(name, "cgroup.procs"))
		n = render_procs(h, group, buf, len);
	else
		return -ENOENT;
	return n;
}

/* Trim one trailing newline, as `echo 1G > memory.max` sends. */
static void chomp(char *s)
{
	size_t l = strlen(s);

	while (l && (s[l - 1] == '\n' || s[l - 1] == ' '))
		s[--l] = '\0';
}

static int write_limit(struct cgm_hier *h, uint32_t group, int which, const char *v,
		       char *why, size_t whylen)
{
	uint64_t bytes;

	if (cgm_parse_size(v, &bytes) < 0) {
		snprintf(why, whylen, "bad value '%s' (expected a size like 512M or 'max')", v);
		return -EINVAL;
	}
	return acct_set_limit(h, group, which, bytes);
}

/* cgroup.procs: move the process with this pid into @group. */
static int write_procs(struct cgm_hier *h, uint32_t group, const char *v,
		       char *why, size_t whylen)
{
	char *end;
	long pid = strtol(v, &end, 10);
	int err;

	if (*v == '\0' || *end != '\0' || pid <= 0 || pid > INT32_MAX) {
		snprintf(why, whylen, "bad value '%s' (expected a pid)", v);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < CGM_MAX_PROCS; i++) {
		struct cgm_proc *p = &h->procs[i];
		struct timespec ts = { 0, 5000000 };

		if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != CGM_SLOT_LIVE || p->pid != pid ||
		    acct_proc_start_time(p->pid) != p->start_time)
			continue;
		/*
		 * Ask the process to move itself (its watcher does it); if it
		 * does not within a second (stopped, or no watcher), move its
		 * charge from here.
		 */
		__atomic_store_n(&p->move_to, group, __ATOMIC_RELEASE);
		hier_bump_epoch(h);
		for (int t = 0; t < 200; t++) {
			if (__atomic_load_n(&p->move_to, __ATOMIC_ACQUIRE) == CGM_NONE)
				return __atomic_load_n(&p->group, __ATOMIC_ACQUIRE) == group ? 0 : -ENOMEM;
			nanosleep(&ts, NULL);
		}
		err = acct_move(h, i, group);
		if (err == -ENOMEM)
			snprintf(why, whylen, "the destination's memory.max cannot take the process's %" PRId64 " pages",
				 p->held_pages);
		return err;
	}
	snprintf(why, whylen, "no process %ld is attached to the hierarchy", pid);
	return -ESRCH;
}

int cgm_file_write(struct cgm_hier *h, uint32_t group, const char *name,
		   const char *value, char *why, size_t whylen)
{
	char v[128];
	struct cgm_group *g = hier_group(h, group);

	snprintf(why, whylen, "failed");
	if (!g) {
		snprintf(why, whylen, "no such group");
		return -ENOENT;
	}
	if (strlen(value) >= sizeof(v)) {
		snprintf(why, whylen, "value too long");
		return -EINVAL;
	}
	strcpy(v, value);
	chomp(v);
	if (!strcmp(name, "memory.max"))
		return write_limit(h, group, CGM_LIMIT_MAX, v, why, whylen);
	if (!strcmp(name, "memory.high"))
		return write_limit(h, group, CGM_LIMIT_HIGH, v, why, whylen);
	if (!strcmp(name, "memory.low"))
		return write_limit(h, group, CGM_LIMIT_LOW, v, why, whylen);
	if (!strcmp(name, "memory.min"))
		return write_limit(h, group, CGM_LIMIT_MIN, v, why, whylen);
	if (!strcmp(name, "memory.oom.group")) {
		if (strcmp(v, "0") && strcmp(v, "1")) {
			snprintf(why, whylen, "bad value '%s' (expected 0 or 1)", v);
			return -EINVAL;
		}
		g->oom_group = v[0] == '1';
		return 0;
	}
	if (!strcmp(name, "cgroup.procs"))
		return write_procs(h, group, v, why, whylen);
	for (int i = 0; cgm_file_names[i]; i++) {
		if (!strcmp(name, cgm_file_names[i])) {
			snprintf(why, whylen, "%s is read-only", name);
			return -EACCES;
		}
	}
	snprintf(why, whylen, "no file %s (files: memory.current, memory.max, ...)", name);
	return -ENOENT;
}
