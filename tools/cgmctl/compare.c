/*
 * cgmctl compare: run a command in a kernel memory cgroup and in a
 * cgmalloc group at once, sample both every few milliseconds, and say how
 * far cgmalloc's charge is from the kernel's -- accounting fidelity
 * checked on a real program.
 *
 * The forked child joins the kernel cgroup first, so that the kernel
 * counts every page the command touches from its first instruction, and
 * then becomes the command through cmd_run(): the same group set-up,
 * environment and exec as `cgmctl run -g GROUP`.
 *
 * The report on the samples is compare_report.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "cgm/acct.h"
#include "cgm/files.h"
#include "cgm/size.h"
#include "compare.h"

#define MAX_INTERVAL_MS 3600000

const struct compare_series compare_series[NR_SERIES] = {
	{ "kernel_anon", NULL }, { "kernel_usage", NULL }, { "cgm_current", NULL },
	{ "cgm_anon", "anon" }, { "cgm_heap_free", "heap_free" },
	{ "cgm_mapped_anon", "mapped_anon" },
};

/* ---- signals: forwarded to the command, which compare outlives to clean up ---- */

static const int caught[] = { SIGINT, SIGTERM, SIGHUP, SIGCHLD };
static struct sigaction saved[CGM_ARRAY_SIZE(caught)];
static volatile sig_atomic_t last_signal, nr_signals, child_exited;

static void on_signal(int sig)
{
	if (sig == SIGCHLD) {
		child_exited = 1;
		return;
	}
	last_signal = sig;
	nr_signals++;
}

/*
 * No SA_RESTART: a signal ends the sleep between samples, so that the
 * command's exit or a ^C is acted on at once.  A signal ignored on entry
 * (a background job's SIGINT, nohup's SIGHUP) stays ignored, by compare
 * as by the command.
 */
static void catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < CGM_ARRAY_SIZE(caught); i++)
		sigaddset(&sa.sa_mask, caught[i]);
	for (size_t i = 0; i < CGM_ARRAY_SIZE(caught); i++) {
		sigaction(caught[i], NULL, &saved[i]);
		if (saved[i].sa_handler != SIG_IGN || caught[i] == SIGCHLD)
			sigaction(caught[i], &sa, NULL);
	}
}

static void restore_signals(void)
{
	for (size_t i = 0; i < CGM_ARRAY_SIZE(caught); i++)
		sigaction(caught[i], &saved[i], NULL);
}

/* ---- sampling ---- */

/* Milliseconds from @t0 to now; 0 if @t0 is ahead. */
static uint64_t ms_since(const struct timespec *t0)
{
	struct timespec t;
	int64_t ns;

	clock_gettime(CLOCK_MONOTONIC, &t);
	ns = (int64_t)(t.tv_sec - t0->tv_sec) * 1000000000 + (t.tv_nsec - t0->tv_nsec);
	return ns > 0 ? (uint64_t)ns / 1000000 : 0;
}

/*
 * The group's memory.current and memory.stat keys into @s.  Until the
 * child's run has made the group nothing is charged to it: @s keeps its
 * zeros.
 */
static void read_group(struct compare *m, struct sample *s)
{
	struct cgm_hier *h = &m->c->h;
	char buf[8192];
	uint32_t idx;

	hier_lock(&h->hdr->tree_lock);
	idx = group_lookup(h, m->group);
	hier_unlock(&h->hdr->tree_lock);
	/* One flush, by the read of memory.current; memory.stat is rendered as it then is. */
	if (idx == CGM_NONE || cgm_file_read(h, idx, "memory.current", buf, sizeof(buf)) <= 0)
		return;
	s->v[CGM_CURRENT] = strtoull(buf, NULL, 10);
	if (cgm_file_render(h, idx, "memory.stat", buf, sizeof(buf)) <= 0)
		return;
	for (int i = CGM_STAT0; i < NR_SERIES; i++)
		if (m->shown[i])
			s->v[i] = (uint64_t)ctl_keyed_value(buf, compare_series[i].stat);
}

static void take_sample(struct compare *m, uint64_t ms)
{
	struct sample s = { .ms = ms };
	int err;

	if (m->failed)
		return;
	err = kcg_read(&m->k, &s.v[KERNEL_ANON], &s.v[KERNEL_USAGE]);
	if (err) {
		ctl_err("compare: cannot read %s: %s", m->k.dir, strerror(-err));
		m->failed = true;
		return;
	}
	read_group(m, &s);
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 1024;
		struct sample *bigger = realloc(m->s, cap * sizeof(*bigger));

		if (!bigger) {
			ctl_err("compare: out of memory after %zu samples", m->n);
			m->failed = true;
			return;
		}
		m->s = bigger;
		m->cap = cap;
	}
	m->s[m->n++] = s;
}

/*
 * Sample every interval until child @pid exits; its wait status in
 * *@ws.  A first signal to compare is passed on to the command, a second
 * one kills it.
 */
static void watch(struct compare *m, pid_t pid, const struct timespec *t0, int *ws)
{
	struct timespec next = *t0;
	int forwarded = 0;

	for (;;) {
		pid_t r = waitpid(pid, ws, WNOHANG);

		if (r == pid || (r < 0 && errno != EINTR))
			return;
		take_sample(m, ms_since(t0));
		if (nr_signals > forwarded) {
			kill(pid, forwarded ? SIGKILL : last_signal);
			forwarded = nr_signals;
		}
		next.tv_nsec += (long)(m->interval_ms % 1000) * 1000000L;
		next.tv_sec += m->interval_ms / 1000 + next.tv_nsec / 1000000000L;
		next.tv_nsec %= 1000000000L;
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR &&
		       !child_exited && nr_signals == forwarded)
			;
		/* Behind by more than an interval (a stopped compare): start again from now. */
		if (ms_since(&next) > m->interval_ms)
			clock_gettime(CLOCK_MONOTONIC, &next);
	}
}

/* ---- set-up and clean-up ---- */

static int parse_interval(const char *s, unsigned int *ms)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (*s >= '0' && *s <= '9' && !*end && !errno && v >= 1 && v <= MAX_INTERVAL_MS) {
		*ms = (unsigned int)v;
		return 0;
	}
	ctl_err("compare: -i '%s': expected milliseconds from 1 to %d", s, MAX_INTERVAL_MS);
	return -1;
}

/* The output directory, made now so that a bad one fails before the command runs. */
static int make_outdir(const char *dir)
{
	struct stat st;

	if (mkdir(dir, 0777) == 0 || (errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)))
		return 0;
	ctl_err("compare: -o %s: %s", dir, errno == EEXIST ? "not a directory" : strerror(errno));
	return -1;
}

/*
 * The hierarchy, the name of the group (made by the child's run) and the
 * kernel cgroup, limited to @limit bytes (CGM_SIZE_MAX: no limit).
 */
static int set_up(struct compare *m, uint64_t limit)
{
	char name[64], why[512], stat[8192];
	int n, err;

	if (ctl_open(m->c, true) < 0)
		return -1;
	snprintf(m->group, sizeof(m->group), "/compare-%d", (int)getpid());
	hier_lock(&m->c->h.hdr->tree_lock);
	m->created = group_lookup(&m->c->h, m->group) == CGM_NONE;
	hier_unlock(&m->c->h.hdr->tree_lock);
	/* The statistics this build has, as the root's memory.stat lists them. */
	n = cgm_file_read(&m->c->h, CGM_ROOT, "memory.stat", stat, sizeof(stat));
	for (int j = 0; j < NR_SERIES; j++)
		m->shown[j] = j < CGM_STAT0 || (n > 0 && ctl_keyed_value(stat, compare_series[j].stat) >= 0);
	snprintf(name, sizeof(name), "cgmalloc-compare-%d", (int)getpid());
	if (kcg_create(&m->k, name, why, sizeof(why)) < 0) {
		ctl_err("compare: no writable kernel memory cgroup (%s)", why);
		return -1;
	}
	snprintf(m->kpath, sizeof(m->kpath), "%s", m->k.dir);
	err = kcg_set_max(&m->k, limit);
	if (err) {
		ctl_err("compare: cannot set the limit of %s: %s", m->k.dir, strerror(-err));
		return -1;
	}
	return 0;
}

/* Remove what set_up() and the child's run made: 0, or -1 after saying what is left. */
static int clean_up(struct compare *m)
{
	struct cgm_hier *h = &m->c->h;
	int ret = 0, err;

	err = kcg_remove(&m->k);
	if (err) {
		ctl_err("compare: cannot remove %s: %s", m->k.dir,
			err == -EBUSY ? "processes are still in it" : strerror(-err));
		ret = -1;
	}
	if (!h->hdr)
		return ret;
	if (m->created) {
		struct cgm_group *g;

		/* What the command held if it died without detaching comes back first. */
		acct_reclaim_dead(h);
		hier_lock(&h->hdr->tree_lock);
		err = group_rmdir(h, m->group);
		g = hier_group(h, group_lookup(h, m->group));
		/*
		 * Processes the command left running keep the group: it becomes
		 * a scope, removed with the last of them.
		 */
		if (err == -EBUSY && g && g->nr_procs) {
			g->flags |= CGM_GROUP_TRANSIENT;
			err = 0;
		}
		hier_unlock(&h->hdr->tree_lock);
		/* ENOENT: run took the group back itself when the command did not start. */
		if (err && err != -ENOENT) {
			ctl_err("compare: cannot remove group %s: %s", m->group,
				err == -EBUSY ? "it still holds a charge or child groups" :
				strerror(-err));
			ret = -1;
		}
	}
	ctl_close(m->c);
	return ret;
}

/*
 * The child: join the kernel cgroup, then become the command as run does.
 * A failure to join goes to the parent on @fd, so that compare, not the
 * command, is seen to fail.
 */
static void child(struct compare *m, int fd, int argc, char **argv)
{
	int err;

	restore_signals();
	err = kcg_join(&m->k, getpid());
	if (err) {
		ssize_t w = write(fd, &err, sizeof(err));

		(void)w;
		_exit(CTL_FAIL);
	}
	close(fd);
	/* run opens the hierarchy again for itself. */
	ctl_close(m->c);
	_exit(cmd_run(m->c, argc, argv));
}

/* run's command line for the child: run -g GROUP [-s @set] -- CMD. */
static char **run_args(const struct compare *m, char *set, int *argc)
{
	size_t ncmd = 0;
	char **argv;
	int n = 0;

	while (m->cmd[ncmd])
		ncmd++;
	argv = calloc(ncmd + 7, sizeof(*argv));
	if (!argv)
		return NULL;
	argv[n++] = "run";
	argv[n++] = "-g";
	argv[n++] = (char *)m->group;
	if (set) {
		argv[n++] = "-s";
		argv[n++] = set;
	}
	argv[n++] = "--";
	memcpy(argv + n, m->cmd, ncmd * sizeof(*argv));
	*argc = n + (int)ncmd;
	return argv;
}

/*
 * Fork the child, wait until it has joined the kernel cgroup, and sample
 * it until it exits: 0 with its wait status in *@ws, or -1 after saying
 * why it could not be run.
 */
static int run_child(struct compare *m, const char *limit, int *ws)
{
	char *set = NULL, **argv = NULL;
	struct timespec t0;
	int fd[2] = { -1, -1 }, argc, err = 0, ret = -1;
	pid_t pid;

	if ((limit && asprintf(&set, "memory.max=%s", limit) < 0) ||
	    !(argv = run_args(m, set, &argc)) || pipe2(fd, O_CLOEXEC) < 0) {
		ctl_err("compare: cannot start the command: %s", strerror(errno));
		goto out;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(fd[0]);
		child(m, fd[1], argc, argv);
	}
	close(fd[1]);
	if (pid < 0) {
		ctl_err("compare: cannot fork: %s", strerror(errno));
		goto out;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* EOF: the child joined and went on to run (or died before telling). */
	while (read(fd[0], &err, sizeof(err)) < 0 && errno == EINTR)
		;
	if (err) {
		ctl_err("compare: cannot move the command into %s: %s", m->k.dir, strerror(-err));
		waitpid(pid, ws, 0);
		goto out;
	}
	watch(m, pid, &t0, ws);
	ret = 0;
out:
	if (fd[0] >= 0)
		close(fd[0]);
	free(argv);
	free(set);
	return ret;
}

int cmd_compare(struct ctl *c, int argc, char **argv)
{
	struct compare m = { .c = c, .interval_ms = 100 };
	const char *limit = NULL;
	uint64_t limit_bytes = CGM_SIZE_MAX;
	bool ran = false;
	int opt, ws = 0, status;
	char why[256];

	while ((opt = ctl_getopt(c, argc, argv, "+i:o:L:")) != -1) {
		switch (opt) {
		case 'i':
			if (parse_interval(optarg, &m.interval_ms) < 0)
				return CTL_USAGE;
			break;
		case 'o':
			m.outdir = optarg;
			break;
		case 'L':
			limit = optarg;
			break;
		default:
			return CTL_USAGE;
		}
	}
	if (optind >= argc) {
		ctl_err("compare: no command (usage: cgmctl compare [-i MS] [-o DIR] [--limit SIZE] -- CMD [ARGS])");
		return CTL_USAGE;
	}
	m.cmd = argv + optind;
	if (limit && (cgm_file_check("memory.max", limit, why, sizeof(why)) < 0 ||
		      cgm_parse_size(limit, &limit_bytes) < 0)) {
		ctl_err("compare: --limit: %s", why);
		return CTL_USAGE;
	}
	if (m.outdir && make_outdir(m.outdir) < 0)
		return CTL_FAIL;
	/* From the kernel cgroup's mkdir on, a signal must not leave it behind. */
	catch_signals();
	if (set_up(&m, limit_bytes) == 0 && !nr_signals)
		ran = run_child(&m, limit, &ws) == 0;
	if (clean_up(&m) < 0)
		m.failed = true;
	restore_signals();
	if (!ran) {
		free(m.s);
		return nr_signals ? 128 + last_signal : CTL_FAIL;
	}
	/* The status a shell gives a command killed by a signal. */
	status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
	if (compare_report(&m, status) < 0)
		m.failed = true;
	free(m.s);
	return m.failed ? CTL_FAIL : status;
}
