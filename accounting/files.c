/*
 * The interface files of a group, in cgroup v2's names and formats, so
 * that what cgmctl prints can be compared with a real cgroup and a value
 * that works there works here.  cgm_files[] is the one list of them.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgm/acct.h"
#include "cgm/files.h"
#include "cgm/log.h"
#include "cgm/size.h"

static const char *const event_names[CGM_NR_EVENTS] = {
	"low", "high", "max", "oom", "oom_kill", "oom_group_kill", "sock_throttled",
};

const char *cgm_stat_name(int i, char *buf, size_t len)
{
	static const char *const names[] = {
		"anon", "heap_free", "mapped_anon", "zswap", "zswapped", "swap",
		"numa_anon_N0", "numa_anon_N1", "numa_anon_N2", "numa_anon_N3",
		"numa_anon_N4", "numa_anon_N5", "numa_anon_N6", "numa_anon_N7", "heap_live",
		"allocs", "frees", "alloc_bytes", "free_bytes", "throttle_usec",
		"zswpout", "zswpin", "zswpwb", "pswpin", "pswpout", "workingset_refault_anon",
		"pgscan", "pgsteal", "pgscan_kswapd", "pgscan_direct", "pgsteal_kswapd",
		"pgsteal_direct",
	};
	_Static_assert(sizeof(names) / sizeof(names[0]) == CGM_STAT_HIST0,
		       "every memory.stat key before the histogram has a name");

	if (i < CGM_STAT_HIST0)
		return names[i];
	/* bucket b holds (2^(b+2), 2^(b+3)] bytes; named by its upper bound */
	snprintf(buf, len, "alloc_size_le_%llu", 1ULL << (i - CGM_STAT_HIST0 + 3));
	return buf;
}

void cgm_files_flush(struct cgm_hier *h, uint32_t group)
{
	/* What processes that died without detaching held is not in use. */
	acct_reclaim_dead(h);
	acct_harvest_subtree(h, group);
	acct_refresh_stale(h, group, CGM_SAMPLE_STALE_NS);
	rstat_flush(h);
}

#define OUT(...) (n += snprintf(buf + (n < (int)len ? n : (int)len), \
			       n < (int)len ? len - (size_t)n : 0, __VA_ARGS__))

/* ---- the handlers ---- */

/* memory.current and memory.peak: private says which (0: usage, 1: peak). */
static int show_usage(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
		      char *buf, size_t len)
{
	const struct cgm_group *g = hier_group(h, group);
	const int64_t *pages = f->private ? &g->memory.watermark : &g->memory.usage;
	int n = 0;

	OUT("%" PRIu64 "\n", page_counter_bytes(__atomic_load_n(pages, __ATOMIC_RELAXED)));
	return n;
}

/* memory.peak takes any text, as the kernel's (6.12) does. */
static int parse_any(const char *v, uint64_t *out, char *why, size_t whylen)
{
	(void)v;
	(void)why;
	(void)whylen;
	*out = 0;
	return 0;
}

/*
 * A write to memory.peak starts it again from the usage now.  The
 * kernel's resets the peak seen through that open file only; cgmalloc
 * keeps one peak per group, which every reader then sees reset.
 */
static int write_peak(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
		      uint64_t v, char *why, size_t whylen)
{
	(void)f;
	(void)v;
	(void)why;
	(void)whylen;
	page_counter_reset_watermark(&hier_group(h, group)->memory);
	return 0;
}

/* The counter field of limit @which. */
static const int64_t *limit_field(const struct cgm_group *g, int which)
{
	switch (which) {
	case CGM_LIMIT_MAX:
		return &g->memory.max;
	case CGM_LIMIT_HIGH:
		return &g->memory.high;
	case CGM_LIMIT_LOW:
		return &g->memory.low;
	default:
		return &g->memory.min;
	}
}

static int show_limit(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
		      char *buf, size_t len)
{
	const struct cgm_group *g = hier_group(h, group);
	int64_t pages = __atomic_load_n(limit_field(g, f->private), __ATOMIC_RELAXED);
	char tmp[32];
	int n = 0;

	OUT("%s\n", cgm_format_size(page_counter_bytes(pages), tmp, sizeof(tmp)));
	return n;
}

static int parse_limit(const char *v, uint64_t *bytes, char *why, size_t whylen)
{
	if (cgm_parse_size(v, bytes) == 0)
		return 0;
	snprintf(why, whylen, "bad value '%s' (expected a size like 512M or 'max')", v);
	return -EINVAL;
}

/*
 * memory.max or memory.high written below the group's usage reclaims at
 * once, as the kernel's memory_max_write and memory_high_write do: the
 * processes give back what their allocators keep (the writer waits up to
 * half a second for them).  What is still over is then refused or
 * throttled at their next allocations.
 *
 * Asked again while a pass brings usage down and it is still over (or,
 * for memory.reclaim, less came back than asked), as the kernel's loops
 * there retry: each process is asked for its share of what is over, and
 * what it spends to spill -- the first time, the pool's libraries,
 * tables and thread -- is charged meanwhile.  In one pass, python3's
 * forked child holding 40 MB gave back 17 MiB net of the 20M asked of
 * its group by memory.reclaim, and the writer said EAGAIN.
 */
#define WRITE_RECLAIM_PASSES	4

static int write_limit(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
		       uint64_t bytes, char *why, size_t whylen)
{
	enum acct_limit which = (enum acct_limit)f->private;
	struct cgm_group *g = hier_group(h, group);
	bool reclaims = which == CGM_LIMIT_MAX || which == CGM_LIMIT_HIGH;
	int err;

	(void)why;
	(void)whylen;
	/*
	 * Compared with the usage as of now, and before the limit is set: an
	 * idle process's last sample may be from before it filled what it
	 * holds, and a refresh after a lower memory.max could charge it only
	 * up to the limit.  From the stale figure, memory.high=20M left an
	 * idle python3 holding 46 MB at 46 MB, memory.max=20M showed it at
	 * exactly 20M, and neither spilled a page.
	 */
	if (reclaims)
		acct_refresh_stale(h, group, CGM_SAMPLE_STALE_NS);
	err = acct_set_limit(h, group, which, bytes);
	for (int pass = 0; !err && reclaims && pass < WRITE_RECLAIM_PASSES; pass++) {
		int64_t over = page_counter_read(&g->memory) - page_counter_pages(bytes);

		if (over <= 0 || acct_reclaim_subtree(h, group, over, true) <= 0)
			break;
	}
	return err;
}

/* memory.stat and memory.stat.local: private says which. */
static int show_stat(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
		     char *buf, size_t len)
{
	const struct cgm_group *g = hier_group(h, group);
	const int64_t *stat = f->private ? g->stat_local : g->stat;
	char name[48];
	int n = 0;

	for (int i = 0; i < CGM_NR_STATS; i++) {
		int64_t v = __atomic_load_n(&stat[i], __ATOMIC_RELAXED);

		/* The per-node figures are memory.numa_stat's. */
		if (cgm_stat_is_numa(i))
			continue;
		if (i == CGM_STAT_THROTTLE_NS)
			v /= 1000;
		OUT("%s %" PRId64 "\n", cgm_stat_name(i, name, sizeof(name)), v);
	}
	return n;
}

/* memory.events and memory.events.local: private says which. */
static int show_events(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
		       char *buf, size_t len)
{
	const struct cgm_group *g = hier_group(h, group);
	const int64_t *ev = f->private ? g->events_local : g->events;
	int n = 0;

	for (int i = 0; i < CGM_NR_EVENTS; i++)
		OUT("%s %" PRId64 "\n", event_names[i], __atomic_load_n(&ev[i], __ATOMIC_RELAXED));
	return n;
}

static int show_oom_group(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
			  char *buf, size_t len)
{
	int n = 0;

	(void)f;
	OUT("%u\n", hier_group(h, group)->oom_group);
	return n;
}

static int parse_bool01(const char *v, uint64_t *out, char *why, size_t whylen)
{
	if (!strcmp(v, "0") || !strcmp(v, "1")) {
		*out = v[0] == '1';
		return 0;
	}
	snprintf(why, whylen, "bad value '%s' (expected 0 or 1)", v);
	return -EINVAL;
}

static int write_oom_group(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
			   uint64_t v, char *why, size_t whylen)
{
	(void)f;
	(void)why;
	(void)whylen;
	hier_group(h, group)->oom_group = v != 0;
	return 0;
}

/* cgroup.delegate: the group's processes may manage what is below it. */
static int show_delegate(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
			 char *buf, size_t len)
{
	int n = 0;

	(void)f;
	OUT("%d\n", (hier_group(h, group)->flags & CGM_GROUP_DELEGATED) ? 1 : 0);
	return n;
}

static int write_delegate(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
			  uint64_t v, char *why, size_t whylen)
{
	struct cgm_group *g = hier_group(h, group);

	(void)f;
	(void)why;
	(void)whylen;
	if (v)
		__atomic_or_fetch(&g->flags, CGM_GROUP_DELEGATED, __ATOMIC_RELAXED);
	else
		__atomic_and_fetch(&g->flags, ~(uint32_t)CGM_GROUP_DELEGATED, __ATOMIC_RELAXED);
	hier_bump_epoch(h);
	return 0;
}

static int show_procs(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
		      char *buf, size_t len)
{
	struct cgm_proc *p;
	uint32_t i;
	int n = 0;

	(void)f;
	for_each_live_proc(h, i, p)
		if (p->group == group && !acct_proc_gone(p))
			OUT("%d\n", p->pid);
	return n;
}

static int parse_pid(const char *v, uint64_t *out, char *why, size_t whylen)
{
	char *end;
	/* A sign makes strtoull wrap: "-5" is refused as too large. */
	unsigned long long pid = strtoull(v, &end, 10);

	if (*v == '\0' || *end != '\0' || pid == 0 || pid > INT32_MAX) {
		snprintf(why, whylen, "bad value '%s' (expected a pid)", v);
		return -EINVAL;
	}
	*out = (uint64_t)pid;
	return 0;
}

/* cgroup.procs: move the process with this pid into @group. */
static int write_procs(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
		       uint64_t pid, char *why, size_t whylen)
{
	struct cgm_proc *p;
	uint32_t i;
	int err;

	(void)f;
	for_each_live_proc(h, i, p) {
		struct timespec ts = { 0, 5000000 };

		if (p->pid != (int64_t)pid || acct_proc_gone(p))
			continue;
		/*
		 * Ask the process to move itself (its next allocation slow path
		 * does it, under the moving key); if it does not within a
		 * second (idle, or stopped), move its charge from here.
		 */
		__atomic_store_n(&p->move_to, group, __ATOMIC_RELEASE);
		hier_bump_epoch(h);
		err = 1;
		for (int t = 0; t < 200 && err == 1; t++) {
			if (__atomic_load_n(&p->move_to, __ATOMIC_ACQUIRE) == CGM_NONE)
				err = __atomic_load_n(&p->group, __ATOMIC_ACQUIRE) == group ? 0 : -ENOMEM;
			else
				nanosleep(&ts, NULL);
		}
		if (err == 1)
			err = acct_move(h, i, group);
		if (err == -ENOMEM)
			snprintf(why, whylen, "refused: the destination's memory.max cannot take the "
				 "process's %" PRId64 " pages", proc_charged_pages(p));
		return err;
	}
	snprintf(why, whylen, "no process %" PRIu64 " is attached to the hierarchy", pid);
	return -ESRCH;
}

/*
 * memory.reclaim: "<bytes> [swappiness=<0..200>]", as the kernel takes it.
 * cgmalloc reclaims what the allocators of the subtree's processes keep
 * (the kernel would also swap and drop cache); swappiness is checked and
 * has nothing to steer yet.
 */
static int parse_reclaim(const char *v, uint64_t *out, char *why, size_t whylen)
{
	const char *size = cgm_skip_spaces(v), *sp;

	/* The size is one memparse() at the start, as memory_reclaim() reads it. */
	*out = cgm_memparse(size, &sp);
	if (sp == size)
		goto bad;
	/* Saturated: CGM_SIZE_MAX is "max" to page_counter_pages(), not a count. */
	if (*out == CGM_SIZE_MAX)
		*out = CGM_SIZE_MAX - 1;
	sp = cgm_skip_spaces(sp);
	if (*sp) {
		char *end;
		unsigned long long sw;

		if (strncmp(sp, "swappiness=", 11) != 0)
			goto bad;
		sw = strtoull(sp + 11, &end, 10);
		if (end == sp + 11 || *end != '\0' || sw > 200)
			goto bad;
	}
	return 0;
bad:
	snprintf(why, whylen, "bad value '%s' (expected a size like 64M, then optionally "
		 "swappiness=0..200)", v);
	return -EINVAL;
}

void (*cgm_files_reclaim_self)(void);

/* -EAGAIN, as the kernel says it, when less than @bytes came back. */
static int write_reclaim(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
			 uint64_t bytes, char *why, size_t whylen)
{
	int64_t got;
	char a[32], b[32];

	(void)f;
	got = 0;
	for (int pass = 0; pass < WRITE_RECLAIM_PASSES; pass++) {
		int64_t more = acct_reclaim_subtree(h, group, page_counter_pages(bytes) - got, true);

		if (more <= 0)
			break;
		got += more;
		if (got >= page_counter_pages(bytes))
			break;
	}
	if (bytes == 0 || got >= page_counter_pages(bytes))
		return 0;
	snprintf(why, whylen, "reclaimed %s of the %s asked (a process reclaims at its next "
		 "allocation; an idle one only with spill=1)",
		 cgm_format_size(page_counter_bytes(got > 0 ? got : 0), a, sizeof(a)),
		 cgm_format_size(bytes, b, sizeof(b)));
	return -EAGAIN;
}

/*
 * memory.zswap.current, memory.swap.current: the pools of the subtree's
 * spilling processes, and what they wrote back to their backing files
 * (the swap device of a preloaded process).
 */
static int show_zswap_current(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
			      char *buf, size_t len)
{
	const struct cgm_group *g = hier_group(h, group);
	int64_t v = __atomic_load_n(&g->stat[f->private ? CGM_STAT_SWAP_BYTES : CGM_STAT_ZSWAP],
				    __ATOMIC_RELAXED);
	int n = 0;

	OUT("%" PRId64 "\n", v > 0 ? v : 0);
	return n;
}

/* memory.zswap.max and memory.swap.max: private 0 and 1. */
static int64_t *swap_limit_field(struct cgm_group *g, int which)
{
	return which ? &g->swap_max : &g->zswap_max;
}

static int show_swap_limit(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
			   char *buf, size_t len)
{
	int64_t v = __atomic_load_n(swap_limit_field(hier_group(h, group), f->private),
				    __ATOMIC_RELAXED);
	char tmp[32];
	int n = 0;

	OUT("%s\n", cgm_format_size(v == INT64_MAX ? CGM_SIZE_MAX : (uint64_t)v, tmp, sizeof(tmp)));
	return n;
}

static int write_swap_limit(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
			    uint64_t bytes, char *why, size_t whylen)
{
	(void)why;
	(void)whylen;
	__atomic_store_n(swap_limit_field(hier_group(h, group), f->private),
			 bytes >= INT64_MAX ? INT64_MAX : (int64_t)bytes, __ATOMIC_RELAXED);
	hier_bump_epoch(h);
	return 0;
}

static int show_zswap_writeback(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
				char *buf, size_t len)
{
	int n = 0;

	(void)f;
	OUT("%u\n", __atomic_load_n(&hier_group(h, group)->zswap_writeback, __ATOMIC_RELAXED));
	return n;
}

static int write_zswap_writeback(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
				 uint64_t v, char *why, size_t whylen)
{
	(void)f;
	(void)why;
	(void)whylen;
	__atomic_store_n(&hier_group(h, group)->zswap_writeback, v != 0, __ATOMIC_RELAXED);
	return 0;
}

/* memory.numa_stat: the group's anon per node, from the same folded statistics as memory.stat. */
static int show_numa_stat(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
			  char *buf, size_t len)
{
	const struct cgm_group *g = hier_group(h, group);
	int n = 0, nodes = acct_online_nodes();

	(void)f;
	OUT("anon");
	for (int i = 0; i < nodes; i++)
		OUT(" N%d=%" PRId64, i, __atomic_load_n(&g->stat[CGM_STAT_NUMA_ANON0 + i], __ATOMIC_RELAXED));
	OUT("\n");
	return n;
}

/* memory.pressure, in the kernel's PSI format (totals in microseconds). */
static int show_pressure(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
			 char *buf, size_t len)
{
	static const char *const kind[CGM_PSI_KINDS] = { "some", "full" };
	struct cgm_psi_view v = { 0 };
	int n = 0;

	(void)f;
	psi_read(h, group, &v);
	for (int k = 0; k < CGM_PSI_KINDS; k++)
		OUT("%s avg10=%.2f avg60=%.2f avg300=%.2f total=%" PRId64 "\n", kind[k],
		    v.avg[k][0], v.avg[k][1], v.avg[k][2], v.total[k] / 1000);
	return n;
}

/*
 * cgroup.events: populated while a process of the subtree lives (a slot
 * whose process died without detaching counts no more than a zombie does
 * in the kernel); a group is never frozen here.
 */
static int show_cgroup_events(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
			      char *buf, size_t len)
{
	struct cgm_proc *p;
	uint32_t i;
	int populated = 0, n = 0;

	(void)f;
	for_each_live_proc(h, i, p)
		if (group_in_subtree(h, __atomic_load_n(&p->group, __ATOMIC_ACQUIRE), group) &&
		    !acct_proc_gone(p)) {
			populated = 1;
			break;
		}
	OUT("populated %d\nfrozen 0\n", populated);
	return n;
}

/* cgroup.stat: the groups below it; none is dying, as rmdir frees a group at once. */
static int show_cgroup_stat(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
			    char *buf, size_t len)
{
	uint32_t nr = 0;
	int n = 0;

	(void)f;
	for (uint32_t i = 0; i < CGM_MAX_GROUPS; i++)
		if (i != group && hier_group(h, i) && group_in_subtree(h, i, group))
			nr++;
	OUT("nr_descendants %u\nnr_dying_descendants 0\n", nr);
	return n;
}

/*
 * SIGKILL the process of slot @p if it is still the process that attached,
 * through a pidfd opened before the check (oom.c's kill_proc does the
 * same): a reused pid is never signalled.  0 or a negative errno.
 */
static int kill_attached(const struct cgm_proc *p)
{
	int32_t pid = __atomic_load_n(&p->pid, __ATOMIC_RELAXED);
	int fd, err = 0;

	/* 0 or below would signal a process group, or every process. */
	if (pid <= 0)
		return 0;
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0 && errno != ENOSYS)
		return errno == ESRCH ? 0 : -errno;
	if (!acct_proc_gone(p) &&
	    (fd < 0 ? kill(pid, SIGKILL) : (int)syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0)) < 0 &&
	    errno != ESRCH)
		err = -errno;
	if (fd >= 0)
		close(fd);
	return err;
}

/*
 * cgroup.kill: SIGKILL every process of the subtree, as the kernel's
 * cgroup_kill(); only 1 is taken (-ERANGE for 0, as the kernel says).
 * A process attaching during the walk may be missed.
 */
static int write_kill(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
		      uint64_t v, char *why, size_t whylen)
{
	struct cgm_proc *p;
	uint32_t i;
	int err = 0;

	(void)f;
	if (v != 1) {
		snprintf(why, whylen, "only 1 kills the group's processes");
		return -ERANGE;
	}
	for_each_live_proc(h, i, p) {
		int e;

		if (!group_in_subtree(h, __atomic_load_n(&p->group, __ATOMIC_ACQUIRE), group))
			continue;
		e = kill_attached(p);
		if (e && !err) {
			snprintf(why, whylen, "pid %d: %s", p->pid, cgm_strerror(-e));
			err = e;
		}
	}
	return err;
}

/* cgroup.controllers and cgroup.subtree_control: memory, the one controller, always on. */
static int show_controllers(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
			    char *buf, size_t len)
{
	int n = 0;

	(void)f;
	(void)h;
	(void)group;
	OUT("memory\n");
	return n;
}

/* cgroup.subtree_control takes "+memory" (space-separated, any number): nothing changes. */
static int parse_subtree_control(const char *v, uint64_t *out, char *why, size_t whylen)
{
	for (const char *p = v; *p;) {
		const char *blank = strchr(p, ' ');
		size_t l = blank ? (size_t)(blank - p) : strlen(p);

		if (l && (l != 7 || strncmp(p, "+memory", 7) != 0)) {
			snprintf(why, whylen, "bad value '%s' (memory is the one controller and is "
				 "always enabled: only +memory is taken)", v);
			return -EINVAL;
		}
		p += l + (p[l] == ' ');
	}
	*out = 1;
	return 0;
}

static int write_subtree_control(const struct cgm_file *f, struct cgm_hier *h, uint32_t group,
				 uint64_t v, char *why, size_t whylen)
{
	(void)f;
	(void)h;
	(void)group;
	(void)v;
	(void)why;
	(void)whylen;
	return 0;
}

/* ---- the table ---- */

const struct cgm_file cgm_files[] = {
	{ .name = "memory.current", .flags = CGM_FILE_FLUSH, .show = show_usage,
	  .help = "bytes charged to the group and its descendants" },
	{ .name = "memory.peak", .flags = CGM_FILE_FLUSH, .private = 1, .show = show_usage,
	  .parse = parse_any, .write = write_peak,
	  .help = "the highest memory.current seen; a write starts it again from the usage now" },
	{ .name = "memory.max", .flags = CGM_FILE_NOT_ON_ROOT, .private = CGM_LIMIT_MAX,
	  .show = show_limit, .parse = parse_limit, .write = write_limit,
	  .help = "hard limit: at it, reclaim, then fail the allocation or OOM-kill" },
	{ .name = "memory.high", .flags = CGM_FILE_NOT_ON_ROOT, .private = CGM_LIMIT_HIGH,
	  .show = show_limit, .parse = parse_limit, .write = write_limit,
	  .help = "throttle limit: allocating threads above it sleep" },
	{ .name = "memory.low", .flags = CGM_FILE_NOT_ON_ROOT, .private = CGM_LIMIT_LOW,
	  .show = show_limit, .parse = parse_limit, .write = write_limit,
	  .help = "best-effort protection: reclaim takes from it only when unprotected groups did not give enough" },
	{ .name = "memory.min", .flags = CGM_FILE_NOT_ON_ROOT, .private = CGM_LIMIT_MIN,
	  .show = show_limit, .parse = parse_limit, .write = write_limit,
	  .help = "hard protection: reclaim never takes from a group within it" },
	{ .name = "memory.reclaim", .parse = parse_reclaim, .write = write_reclaim,
	  .help = "write a size: the subtree's processes give back what their allocators keep "
		  "(EAGAIN if less came back)" },
	{ .name = "memory.zswap.current", .flags = CGM_FILE_FLUSH | CGM_FILE_NOT_ON_ROOT,
	  .show = show_zswap_current,
	  .help = "bytes of compressed pool holding the subtree's spilled pages (spill=1)" },
	{ .name = "memory.zswap.max", .flags = CGM_FILE_NOT_ON_ROOT, .private = 0,
	  .show = show_swap_limit, .parse = parse_limit, .write = write_swap_limit,
	  .help = "most compressed pool bytes; past it, pages are written back or not spilled" },
	{ .name = "memory.zswap.writeback", .flags = CGM_FILE_NOT_ON_ROOT,
	  .show = show_zswap_writeback, .parse = parse_bool01, .write = write_zswap_writeback,
	  .help = "0: the pool never writes pages back to its backing file" },
	{ .name = "memory.swap.current", .flags = CGM_FILE_FLUSH | CGM_FILE_NOT_ON_ROOT,
	  .private = 1, .show = show_zswap_current,
	  .help = "bytes of spilled pages written back to the backing files" },
	{ .name = "memory.swap.max", .flags = CGM_FILE_NOT_ON_ROOT, .private = 1,
	  .show = show_swap_limit, .parse = parse_limit, .write = write_swap_limit,
	  .help = "most bytes written back; past it, the pool keeps pages in memory" },
	{ .name = "memory.stat", .flags = CGM_FILE_FLUSH, .show = show_stat,
	  .help = "statistics of the group and its descendants" },
	{ .name = "memory.stat.local", .flags = CGM_FILE_FLUSH, .private = 1, .show = show_stat,
	  .help = "statistics of the group's own processes" },
	{ .name = "memory.numa_stat", .flags = CGM_FILE_FLUSH, .show = show_numa_stat,
	  .help = "anon per NUMA node (N0=bytes ...), of the group and its descendants" },
	{ .name = "memory.pressure", .flags = CGM_FILE_FLUSH, .show = show_pressure,
	  .help = "time the subtree's threads stalled on memory (reclaim, throttling, refaults), "
		  "PSI format: some/full avg10 avg60 avg300 total (us)" },
	{ .name = "memory.events", .show = show_events,
	  .help = "low/high/max/oom/oom_kill/oom_group_kill/sock_throttled counts, descendants included" },
	{ .name = "memory.events.local", .private = 1, .show = show_events,
	  .help = "the same events, of the group itself" },
	{ .name = "memory.oom.group", .flags = CGM_FILE_NOT_ON_ROOT, .show = show_oom_group,
	  .parse = parse_bool01, .write = write_oom_group,
	  .help = "1: an OOM kill takes every process of the group" },
	{ .name = "cgroup.procs", .show = show_procs, .parse = parse_pid, .write = write_procs,
	  .help = "the attached processes; writing a pid moves it here with its charge" },
	{ .name = "cgroup.delegate", .flags = CGM_FILE_NOT_ON_ROOT, .show = show_delegate,
	  .parse = parse_bool01, .write = write_delegate,
	  .help = "cgmalloc's own: 1 lets the group's processes set the limits of, and move "
		  "processes between, the groups below it" },
	{ .name = "cgroup.events", .flags = CGM_FILE_NOT_ON_ROOT, .show = show_cgroup_events,
	  .help = "populated 1 while a process of the group or below it lives; frozen 0" },
	{ .name = "cgroup.stat", .show = show_cgroup_stat,
	  .help = "nr_descendants: the groups below it; nr_dying_descendants 0" },
	{ .name = "cgroup.kill", .flags = CGM_FILE_NOT_ON_ROOT, .parse = parse_bool01,
	  .write = write_kill,
	  .help = "write 1: SIGKILL every process of the group and of the groups below it" },
	{ .name = "cgroup.controllers", .show = show_controllers,
	  .help = "memory: the one controller" },
	{ .name = "cgroup.subtree_control", .show = show_controllers, .parse = parse_subtree_control,
	  .write = write_subtree_control,
	  .help = "memory, always enabled: writing +memory is taken and changes nothing" },
};

const size_t cgm_nfiles = CGM_ARRAY_SIZE(cgm_files);

const struct cgm_file *cgm_file_find(const char *name)
{
	for (size_t i = 0; i < cgm_nfiles; i++)
		if (!strcmp(name, cgm_files[i].name))
			return &cgm_files[i];
	return NULL;
}

bool cgm_file_exists(const struct cgm_file *f, uint32_t group)
{
	if (f->flags & CGM_FILE_NOT_ON_ROOT)
		return group != CGM_ROOT;
	if (f->flags & CGM_FILE_ONLY_ON_ROOT)
		return group == CGM_ROOT;
	return true;
}

int cgm_file_render(struct cgm_hier *h, uint32_t group, const char *name,
		    char *buf, size_t len)
{
	const struct cgm_file *f = cgm_file_find(name);

	if (!hier_group(h, group) || !f || !cgm_file_exists(f, group))
		return -ENOENT;
	if (len)
		buf[0] = '\0';
	if (!f->show)
		return -EACCES;
	return f->show(f, h, group, buf, len);
}

int cgm_file_read(struct cgm_hier *h, uint32_t group, const char *name,
		  char *buf, size_t len)
{
	const struct cgm_file *f = cgm_file_find(name);

	if (!hier_group(h, group) || !f)
		return -ENOENT;
	if (f->flags & CGM_FILE_FLUSH)
		cgm_files_flush(h, group);
	return cgm_file_render(h, group, name, buf, len);
}

/*
 * The file of @name and @value as its parser sees it (one trailing newline
 * or blank dropped, as `echo 1G > memory.max` sends one), parsed into
 * *@val.  Returns the file, or NULL with *@err and @why set.
 */
static const struct cgm_file *parse_write(const char *name, const char *value, uint64_t *val,
					  int *err, char *why, size_t whylen)
{
	const struct cgm_file *f = cgm_file_find(name);
	char v[128];
	size_t l;

	snprintf(why, whylen, "failed");
	if (!f) {
		snprintf(why, whylen, "no file %s (files: memory.current, memory.max, ...)", name);
		*err = -ENOENT;
		return NULL;
	}
	if (!f->write) {
		snprintf(why, whylen, "%s is read-only", name);
		*err = -EACCES;
		return NULL;
	}
	if (strlen(value) >= sizeof(v)) {
		snprintf(why, whylen, "value too long");
		*err = -EINVAL;
		return NULL;
	}
	memcpy(v, value, strlen(value) + 1);
	l = strlen(v);
	while (l && (v[l - 1] == '\n' || v[l - 1] == ' '))
		v[--l] = '\0';
	*err = f->parse(v, val, why, whylen);
	return *err ? NULL : f;
}

int cgm_file_check(const char *name, const char *value, char *why, size_t whylen)
{
	uint64_t val;
	int err;

	parse_write(name, value, &val, &err, why, whylen);
	return err;
}

/* The nearest group from @idx up that is delegated, or CGM_NONE. */
static uint32_t delegation_root(const struct cgm_hier *h, uint32_t idx)
{
	const struct cgm_group *g;

	for_each_ancestor(h, idx, g)
		if (__atomic_load_n(&g->flags, __ATOMIC_RELAXED) & CGM_GROUP_DELEGATED)
			return idx;
	return CGM_NONE;
}

/*
 * May a process of group @writer write file @f of group @target?  As with
 * cgroup delegation: a process may set the limits of the groups below its
 * own, but not of its own group or an ancestor -- else a limited program
 * lifts its limit -- except below a delegated group that it is in.  It
 * may move processes into its own subtree, or anywhere in a delegated
 * group's.  Accounting is cooperative: this stops a program that asks,
 * not one that writes to the shared mapping (see the README).
 */
static int may_write(const struct cgm_hier *h, uint32_t writer, const struct cgm_file *f,
		     uint32_t target, char *why, size_t whylen)
{
	uint32_t d;

	if (writer == CGM_NONE)
		return 0;
	d = delegation_root(h, writer);
	/* Moving processes in, and reclaim, lift no limit: within its own subtree. */
	if (f->write == write_procs || f->write == write_reclaim) {
		if (group_in_subtree(h, target, writer) ||
		    (d != CGM_NONE && group_in_subtree(h, target, d)))
			return 0;
		snprintf(why, whylen, "a process may %s only its own group or below it, or within "
			 "a delegated group (cgroup.delegate)",
			 f->write == write_procs ? "move processes into" : "reclaim from");
		return -EPERM;
	}
	if (!group_in_subtree(h, writer, target) ||
	    (d != CGM_NONE && target != d && group_in_subtree(h, target, d)))
		return 0;
	snprintf(why, whylen, "a process may not change %s of its own group or of an ancestor "
		 "(cgroup delegation: write it from outside, or delegate a group above)", f->name);
	return -EPERM;
}

int cgm_file_write(struct cgm_hier *h, uint32_t writer, uint32_t group, const char *name,
		   const char *value, char *why, size_t whylen)
{
	const struct cgm_file *f;
	uint64_t val;
	int err;

	if (!hier_group(h, group)) {
		snprintf(why, whylen, "no such group");
		return -ENOENT;
	}
	f = parse_write(name, value, &val, &err, why, whylen);
	if (!f)
		return err;
	if (!cgm_file_exists(f, group)) {
		snprintf(why, whylen, "the root group has no %s (as in cgroup v2)", name);
		return -EINVAL;
	}
	err = may_write(h, writer, f, group, why, whylen);
	return err ? err : f->write(f, h, group, val, why, whylen);
}
