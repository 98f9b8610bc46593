/*
 * Several processes sharing one hierarchy: tests/acct_worker.c runs
 * preloaded with libcgmalloc.so in groups of a private hierarchy file,
 * and this program (linked with the accounting, not with the shim) reads
 * the hierarchy through the accounting API while they run and after
 * they are gone.
 *
 * usage: test_accounting_mp [regressions]
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "acct_fixture.h"
#include "cgm/files.h"

#ifndef ACCT_WORKER
#error "ACCT_WORKER: path of the acct_worker program"
#endif
#ifndef CGM_LIB
#error "CGM_LIB: path of libcgmalloc.so"
#endif

#define PAGE CGM_PAGE_SIZE
#define BATCH_BYTES ((int64_t)CGM_CHARGE_BATCH * PAGE)

static uint64_t seed0 = 1;
static struct acct_tmp tmp;
static struct cgm_hier h;

static void setup(void)
{
	ck_assert_int_eq(acct_tmp_create(&tmp), 0);
	acct_tmp_open(&tmp, &h);
}

static void teardown(void)
{
	hier_close(&h);
	acct_tmp_remove(&tmp);
}

/* ---- workers ---- */

struct worker {
	pid_t pid;
	int in, out;
	char buf[1024];
	size_t have;
	const char *group;
	/* from its last "live" line */
	int64_t live, usable;
};

/* Start acct_worker ARGS... preloaded, attached to @group, with @conf added to CGMALLOC_CONF. */
static void worker_start(struct worker *w, const char *group, const char *conf, ...)
{
	int in[2], out[2];
	char *argv[8], env_conf[CGM_PATH_MAX + 256];
	va_list ap;
	int n = 0;

	memset(w, 0, sizeof(*w));
	w->group = group;
	argv[n++] = (char *)ACCT_WORKER;
	va_start(ap, conf);
	while (n < 7 && (argv[n] = va_arg(ap, char *)))
		n++;
	va_end(ap);
	argv[n] = NULL;
	/*
	 * charge=alloc: these checks are of the byte charging (usage equal
	 * to what the processes hold); charging by residency has its own
	 * tests (tests/fidelity, test_sample).
	 */
	snprintf(env_conf, sizeof(env_conf), "hierarchy=%s,group=%s,charge=alloc%s%s", tmp.path,
		 group, conf[0] ? "," : "", conf);
	ck_assert_int_eq(pipe(in), 0);
	ck_assert_int_eq(pipe(out), 0);
	w->pid = fork();
	ck_assert_int_ge(w->pid, 0);
	if (w->pid == 0) {
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		setenv("LD_PRELOAD", CGM_LIB, 1);
		setenv("CGMALLOC_CONF", env_conf, 1);
		execv(ACCT_WORKER, argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	w->in = in[1];
	w->out = out[0];
}

/* The worker's next line into @line; fails the test after @timeout_ms. */
static void worker_line(struct worker *w, char *line, size_t len, int timeout_ms)
{
	for (;;) {
		char *nl = memchr(w->buf, '\n', w->have);
		struct pollfd pfd = { .fd = w->out, .events = POLLIN };
		ssize_t r;

		if (nl) {
			size_t l = (size_t)(nl - w->buf);

			ck_assert_uint_lt(l, len);
			memcpy(line, w->buf, l);
			line[l] = '\0';
			memmove(w->buf, nl + 1, w->have - l - 1);
			w->have -= l + 1;
			return;
		}
		ck_assert_msg(poll(&pfd, 1, timeout_ms) == 1, "worker %d (%s): no answer in %d ms",
			      (int)w->pid, w->group, timeout_ms);
		r = read(w->out, w->buf + w->have, sizeof(w->buf) - 1 - w->have);
		ck_assert_msg(r > 0, "worker %d (%s) closed its output", (int)w->pid, w->group);
		w->have += (size_t)r;
	}
}

/* Expect a line starting with @word; returns the rest of it. */
static const char *worker_expect(struct worker *w, const char *word, int timeout_ms)
{
	static char line[256];
	size_t l = strlen(word);

	worker_line(w, line, sizeof(line), timeout_ms);
	ck_assert_msg(!strncmp(line, word, l) && (line[l] == ' ' || line[l] == '\0'),
		      "worker %d (%s): '%s', expected '%s'", (int)w->pid, w->group, line, word);
	return line + l;
}

static void worker_live(struct worker *w, int timeout_ms)
{
	const char *rest = worker_expect(w, "live", timeout_ms);

	ck_assert_int_eq(sscanf(rest, "%" SCNd64 " %" SCNd64, &w->live, &w->usable), 2);
}

static void worker_say(struct worker *w, const char *cmd)
{
	ck_assert_int_eq(write(w->in, cmd, strlen(cmd)), (ssize_t)strlen(cmd));
}

static int worker_wait(struct worker *w)
{
	int status = -1;

	close(w->in);
	while (waitpid(w->pid, &status, 0) < 0 && errno == EINTR)
		;
	close(w->out);
	return status;
}

/* Wait for a worker that is expected to die (OOM kill): fails the test after @timeout_ms. */
static int worker_wait_death(struct worker *w, int timeout_ms)
{
	int status = -1;

	for (int waited = 0; waitpid(w->pid, &status, WNOHANG) != w->pid; waited += 10) {
		if (waited >= timeout_ms) {
			kill(w->pid, SIGKILL);
			waitpid(w->pid, &status, 0);
			ck_abort_msg("worker %d (%s) still alive after %d ms", (int)w->pid, w->group,
				     timeout_ms);
		}
		usleep(10000);
	}
	close(w->in);
	close(w->out);
	return status;
}

static void worker_exit_ok(struct worker *w)
{
	int status;

	worker_say(w, "exit\n");
	status = worker_wait(w);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "worker %d (%s) ended with status 0x%x", (int)w->pid, w->group, status);
}

/* ---- reading the hierarchy ---- */

static uint32_t group(const char *path)
{
	uint32_t g = group_lookup(&h, path);

	ck_assert_msg(g != CGM_NONE, "no group %s", path);
	return g;
}

static int64_t file_value(const char *path, const char *file, const char *key)
{
	char buf[4096];

	ck_assert_int_gt(cgm_file_read(&h, group(path), file, buf, sizeof(buf)), 0);
	return key ? acct_file_value(buf, key) : strtoll(buf, NULL, 10);
}

static int64_t current(const char *path)
{
	return file_value(path, "memory.current", NULL);
}

static void check_usage_held(const char *when)
{
	char msg[256];

	acct_drain(&h);
	ck_assert_msg(acct_check_usage_held(&h, msg, sizeof(msg)) == 0, "%s: %s", when, msg);
}

static int live_procs(void)
{
	int n = 0;

	for (uint32_t i = 0; i < CGM_MAX_PROCS; i++)
		n += h.procs[i].state == CGM_SLOT_LIVE;
	return n;
}

static uint32_t proc_of(pid_t pid)
{
	for (uint32_t i = 0; i < CGM_MAX_PROCS; i++)
		if (h.procs[i].state == CGM_SLOT_LIVE && h.procs[i].pid == pid)
			return i;
	return CGM_NONE;
}

/* Stocks and class allowances of every live thread slot stay within their bound. */
static void check_precharge_bounds(void)
{
	int64_t worst = 0;
	int negative = 0;

	for (uint32_t i = 0; i < CGM_MAX_THREADS; i++) {
		const struct cgm_thread_slot *t = &h.threads[i];
		int64_t pre;

		if (t->state != CGM_SLOT_LIVE)
			continue;
		pre = acct_slot_precharge(t);
		negative += t->stock < 0;
		if (pre > worst)
			worst = pre;
	}
	ck_assert_int_eq(negative, 0);
	/* "a thread's precharge stays within about two batches" (shim/accounted.c) */
	ck_assert_msg(worst <= 2 * BATCH_BYTES + BATCH_BYTES / 8,
		      "a thread holds %" PRId64 " bytes precharged", worst);
}

/*
 * 8 processes in 3 nested groups allocate and free concurrently, with
 * threads and cross-thread frees.  Once they hold still: every group's
 * usage is what its subtree's processes hold, at least their live bytes
 * and at most those plus the stocks; once they exit, nothing is left.
 */
START_TEST(test_eight_processes)
{
	static const char *const where[8] = { "/mp/a", "/mp/a", "/mp/a", "/mp/a/b", "/mp/a/b",
					      "/mp/a/b", "/mp/c", "/mp/c" };
	static const char *const groups[] = { "/mp/a", "/mp/a/b", "/mp/c", "/mp", NULL };
	struct worker w[8];

	for (int i = 0; i < 8; i++)
		worker_start(&w[i], where[i], "", "churn", "3", "1500", NULL);
	for (int i = 0; i < 8; i++)
		worker_expect(&w[i], "started", 10000);
	/* Readers flush and harvest while the workers run. */
	for (int i = 0; i < 20; i++) {
		for (int g = 0; groups[g]; g++)
			ck_assert_int_ge(current(groups[g]), 0);
		usleep(50000);
	}
	for (int i = 0; i < 8; i++)
		worker_live(&w[i], 20000);

	check_usage_held("holding still");
	check_precharge_bounds();
	for (int g = 0; groups[g]; g++) {
		int64_t live = 0, usable = 0, cur = current(groups[g]), heap_live, nprocs = 0;

		for (int i = 0; i < 8; i++) {
			if (!strncmp(where[i], groups[g], strlen(groups[g]))) {
				live += w[i].live;
				usable += w[i].usable;
				nprocs++;
			}
		}
		ck_assert_msg(cur >= live, "%s: memory.current %" PRId64 " < live bytes %" PRId64,
			      groups[g], cur, live);
		/* Past the live blocks: the main threads' precharge, a partial page, libc's own. */
		ck_assert_msg(cur <= usable + nprocs * (2 * BATCH_BYTES + 256 * 1024),
			      "%s: memory.current %" PRId64 " for %" PRId64 " usable live bytes",
			      groups[g], cur, usable);
		/* heap_live: allocated - freed, as counted by the statistics. */
		heap_live = file_value(groups[g], "memory.stat", "heap_live");
		ck_assert_msg(heap_live >= live - nprocs * 64 * 1024 && heap_live <= cur,
			      "%s: heap_live %" PRId64 ", live %" PRId64 ", current %" PRId64,
			      groups[g], heap_live, live, cur);
		ck_assert_int_gt(file_value(groups[g], "memory.stat", "allocs"), 0);
	}

	/* Half free everything first: usage comes back down for them. */
	for (int i = 0; i < 8; i += 2) {
		worker_say(&w[i], "free\n");
		worker_expect(&w[i], "freed", 10000);
	}
	check_usage_held("after frees");
	for (int i = 0; i < 8; i++)
		worker_exit_ok(&w[i]);
	/* Detach returned everything: no reclaim needed for processes that exited. */
	for (int g = 0; groups[g]; g++)
		ck_assert_msg(current(groups[g]) == 0, "%s: %" PRId64 " bytes left after every process exited",
			      groups[g], current(groups[g]));
	ck_assert_int_eq(current("/"), 0);
	acct_reclaim_dead(&h);
	ck_assert_int_eq(live_procs(), 0);
	ck_assert_int_eq(file_value("/mp", "memory.stat", "heap_live"), 0);
}
END_TEST

/*
 * A process killed with SIGKILL cannot detach: its charge comes back
 * through acct_reclaim_dead() (from here, from a reader of the group's
 * files, or when a limit refuses a charge) and the group's usage is that
 * of the survivors again.  The victims hold memory but are idle when
 * killed; the survivors are busy.
 */
START_TEST(test_sigkill_returns_charge)
{
	struct worker w[4], late;
	int status;

	for (int i = 0; i < 2; i++)
		worker_start(&w[i], "/k", "", "churn", "2", "1500", NULL);
	worker_start(&w[2], "/k", "", "hog", "8388608", NULL);
	worker_start(&w[3], "/k/sub", "", "hog", "4194304", NULL);
	for (int i = 0; i < 2; i++)
		worker_expect(&w[i], "started", 10000);
	for (int i = 2; i < 4; i++)
		worker_live(&w[i], 10000);
	kill(w[2].pid, SIGKILL);
	status = worker_wait(&w[2]);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	ck_assert_int_ne(proc_of(w[2].pid), CGM_NONE);	/* it could not detach */
	ck_assert_int_ge(acct_reclaim_dead(&h), 1);
	ck_assert_int_eq(proc_of(w[2].pid), CGM_NONE);
	/*
	 * A process attaching does not look at the others (that would cost
	 * every exec a read of /proc per process); a reader of memory.current
	 * returns the next victim's charge.
	 */
	kill(w[3].pid, SIGKILL);
	worker_wait(&w[3]);
	worker_start(&late, "/k2", "", "hog", "65536", NULL);
	worker_live(&late, 10000);
	ck_assert_int_ne(proc_of(w[3].pid), CGM_NONE);
	ck_assert_int_eq(current("/k/sub"), 0);
	ck_assert_int_eq(proc_of(w[3].pid), CGM_NONE);
	for (int i = 0; i < 2; i++)
		worker_live(&w[i], 20000);
	check_usage_held("after the kills");
	ck_assert_int_ge(current("/k"), w[0].live + w[1].live);
	ck_assert_int_le(current("/k"), w[0].usable + w[1].usable + 2 * (2 * BATCH_BYTES + 256 * 1024));
	for (int i = 0; i < 2; i++)
		worker_exit_ok(&w[i]);
	worker_exit_ok(&late);
	ck_assert_int_eq(current("/k"), 0);
	ck_assert_int_eq(current("/"), 0);
}
END_TEST

/*
 * The same with victims killed while they allocate and free (one page
 * per charge, so that charges and harvests are frequent): a SIGKILL may
 * land between a page counter update and the process's held_pages, and
 * the reclaim must still leave usage equal to what the survivor holds.
 */
START_TEST(test_sigkill_while_allocating)
{
	struct worker survivor, w[3];
	struct timespec pause;
	int bad = 0;
	char first[320] = "";

	worker_start(&survivor, "/ks", "", "hog", "1048576", NULL);
	worker_live(&survivor, 10000);
	for (int round = 0; round < 16; round++) {
		char msg[256];

		for (int i = 0; i < 3; i++)
			worker_start(&w[i], "/ks", "charge_batch=1", "churn", "4", "60000", NULL);
		for (int i = 0; i < 3; i++)
			worker_expect(&w[i], "started", 10000);
		pause = (struct timespec){ 0, 50000000L + 40000000L * (round % 5) };
		nanosleep(&pause, NULL);
		for (int i = 0; i < 3; i++) {
			kill(w[i].pid, SIGKILL);
			worker_wait(&w[i]);
		}
		acct_reclaim_dead(&h);
		acct_drain(&h);
		if (acct_check_usage_held(&h, msg, sizeof(msg)) && bad++ == 0)
			snprintf(first, sizeof(first), "round %d: %s", round, msg);
	}
	ck_assert_msg(bad == 0, "%d of 16 rounds left usage != held; first: %s", bad, first);
	worker_exit_ok(&survivor);
}
END_TEST

/* ---- a limit shared by several processes ---- */

static volatile int sampling;
static int64_t worst_sample;

static void *sampler(void *arg)
{
	struct page_counter *c = arg;

	while (sampling) {
		int64_t u = page_counter_read(c);

		if (u > worst_sample)
			worst_sample = u;
	}
	return NULL;
}

/*
 * memory.max on a parent shared by 3 processes in its children, each
 * allocating until malloc fails and then trading blocks at the limit:
 * usage and the peak never pass max, what fits is max less small change,
 * every process saw NULL, the events are counted on the parent.
 */
START_TEST(test_shared_limit)
{
	static const char *const where[3] = { "/lim/a", "/lim/b", "/lim/c" };
	struct worker w[3];
	char why[256];
	int64_t max = 16 << 20, total = 0, peak;
	pthread_t th;

	hier_lock(&h.hdr->tree_lock);
	ck_assert_int_gt(group_mkdir(&h, "/lim"), 0);
	hier_unlock(&h.hdr->tree_lock);
	ck_assert_int_eq(cgm_file_write(&h, CGM_NONE, group("/lim"), "memory.max", "16M", why, sizeof(why)), 0);
	sampling = 1;
	pthread_create(&th, NULL, sampler, &h.groups[group("/lim")].memory);
	for (int i = 0; i < 3; i++)
		worker_start(&w[i], where[i], "", "fill", "65536", "800", NULL);
	for (int i = 0; i < 3; i++) {
		long nulls = 0;
		int64_t bytes = 0;
		const char *rest = worker_expect(&w[i], "full", 30000);

		ck_assert_int_eq(sscanf(rest, "%" SCNd64 " %ld", &bytes, &nulls), 2);
		ck_assert_msg(nulls > 0, "worker in %s never got NULL", where[i]);
		total += bytes;
	}
	sampling = 0;
	pthread_join(th, NULL);
	/* Only charges that stood make the peak. */
	peak = file_value("/lim", "memory.peak", NULL);
	ck_assert_msg(peak <= max, "memory.peak %" PRId64 " > memory.max %" PRId64, peak, max);
	/* A reader may see racing charges before they back out: one batch per process at most. */
	ck_assert_msg(worst_sample * PAGE <= max + 3 * BATCH_BYTES,
		      "usage sampled at %" PRId64 " bytes, max %" PRId64, worst_sample * PAGE, max);
	ck_assert_int_le(current("/lim"), max);
	ck_assert_int_le(total, max);
	/*
	 * Nor hit early: a process sees NULL only when less than a block is
	 * left, so the three hold the limit less a block and a page each.
	 */
	ck_assert_msg(total >= max - 3 * (65536 + 2 * PAGE), "only %" PRId64 " bytes fit under %" PRId64,
		      total, max);
	check_usage_held("at the limit");
	ck_assert_int_gt(file_value("/lim", "memory.events.local", "max"), 0);
	ck_assert_int_gt(file_value("/lim", "memory.events.local", "oom"), 0);
	ck_assert_int_eq(file_value("/lim/a", "memory.events", "oom"), 0);
	ck_assert_int_gt(h.groups[group("/lim")].memory.failcnt, 0);
	for (int i = 0; i < 3; i++)
		worker_exit_ok(&w[i]);
	ck_assert_int_eq(current("/lim"), 0);
}
END_TEST


/* oom=kill: the largest process of the group at its limit dies by SIGKILL. */
START_TEST(test_oom_kill)
{
	struct worker big, small;
	char why[256];
	int status;

	hier_lock(&h.hdr->tree_lock);
	ck_assert_int_gt(group_mkdir(&h, "/ok/big"), 0);
	hier_unlock(&h.hdr->tree_lock);
	ck_assert_int_eq(cgm_file_write(&h, CGM_NONE, group("/ok"), "memory.max", "24M", why, sizeof(why)), 0);
	worker_start(&big, "/ok/big", "oom=kill", "hog", "16777216", NULL);
	worker_live(&big, 10000);
	ck_assert_int_eq(big.live, 16 << 20);
	/* 12M more does not fit beside 16M: the big one goes, the small one gets all it asked. */
	worker_start(&small, "/ok/small", "oom=kill", "hog", "12582912", NULL);
	worker_live(&small, 20000);
	ck_assert_int_eq(small.live, 12 << 20);
	status = worker_wait_death(&big, 10000);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		      "the largest process ended with status 0x%x", status);
	ck_assert_int_eq(file_value("/ok/big", "memory.events.local", "oom_kill"), 1);
	ck_assert_int_eq(file_value("/ok", "memory.events", "oom_kill"), 1);
	ck_assert_int_ge(file_value("/ok", "memory.events.local", "oom"), 1);
	ck_assert_int_eq(file_value("/ok", "memory.events", "oom_group_kill"), 0);
	ck_assert_int_eq(h.groups[CGM_ROOT].events[CGM_EV_OOM_KILL], 0);
	check_usage_held("after the OOM kill");
	ck_assert_int_le(current("/ok"), 24 << 20);
	worker_exit_ok(&small);
	ck_assert_int_eq(current("/ok"), 0);
}
END_TEST

/*
 * oom=kill never signals a stranger: a slot left by a process that died
 * without detaching, whose pid now belongs to an unrelated process (one
 * that started after the slot's attach), is reclaimed -- its charge comes
 * back -- and the unrelated process lives on.
 */
START_TEST(test_oom_spares_pid_reuse)
{
	struct worker small;
	uint32_t stale = CGM_NONE, g;
	int64_t pages = (16 << 20) / PAGE;
	char why[256];
	pid_t stranger;
	int status;

	hier_lock(&h.hdr->tree_lock);
	ck_assert_int_gt(group_mkdir(&h, "/os/stale"), 0);
	hier_unlock(&h.hdr->tree_lock);
	ck_assert_int_eq(cgm_file_write(&h, CGM_NONE, group("/os"), "memory.max", "24M", why, sizeof(why)), 0);
	worker_start(&small, "/os/small", "oom=kill", "hog", "4194304", NULL);
	worker_live(&small, 10000);
	/*
	 * After the last attach: a slot attached long before the stranger
	 * started, and holding 16 MiB, names the stranger's pid.
	 */
	stranger = fork();
	ck_assert_int_ge(stranger, 0);
	if (stranger == 0) {
		pause();
		_exit(0);
	}
	hier_lock(&h.hdr->tree_lock);
	g = group("/os/stale");
	for (uint32_t i = 0; i < CGM_MAX_PROCS && stale == CGM_NONE; i++) {
		struct cgm_proc *p = &h.procs[i];

		if (p->state != CGM_SLOT_FREE)
			continue;
		stale = i;
		p->pid = stranger;
		p->attach_ns = 1;
		p->group = g;
		p->first_thread = CGM_NONE;
		p->held_pages = pages;
		p->move_to = CGM_NONE;
		snprintf(p->comm, sizeof(p->comm), "long-gone");
		h.groups[g].nr_procs++;
		page_counter_charge(&h.groups[g].memory, pages);
		__atomic_store_n(&p->state, CGM_SLOT_LIVE, __ATOMIC_RELEASE);
	}
	hier_unlock(&h.hdr->tree_lock);
	ck_assert_int_ne(stale, CGM_NONE);
	/* 8M more does not fit beside 4M and the stale 16M: the OOM path runs. */
	worker_say(&small, "hog 8388608\n");
	worker_live(&small, 20000);
	ck_assert_int_eq(small.live, 12 << 20);
	ck_assert_int_eq(waitpid(stranger, &status, WNOHANG), 0);
	ck_assert_int_eq(kill(stranger, 0), 0);
	ck_assert_int_eq(h.procs[stale].state == CGM_SLOT_LIVE && h.procs[stale].pid == stranger, 0);
	ck_assert_int_eq(file_value("/os", "memory.events", "oom_kill"), 0);
	check_usage_held("after the stale slot went");
	worker_exit_ok(&small);
	kill(stranger, SIGKILL);
	waitpid(stranger, &status, 0);
	ck_assert_int_eq(current("/os"), 0);
}
END_TEST

/* memory.oom.group=1: the whole group goes, the allocating process included. */
START_TEST(test_oom_group_kill)
{
	struct worker w[3];
	char why[256];

	hier_lock(&h.hdr->tree_lock);
	ck_assert_int_gt(group_mkdir(&h, "/og/x"), 0);
	ck_assert_int_gt(group_mkdir(&h, "/og/y"), 0);
	hier_unlock(&h.hdr->tree_lock);
	ck_assert_int_eq(cgm_file_write(&h, CGM_NONE, group("/og"), "memory.max", "24M", why, sizeof(why)), 0);
	ck_assert_int_eq(cgm_file_write(&h, CGM_NONE, group("/og"), "memory.oom.group", "1", why, sizeof(why)), 0);
	worker_start(&w[0], "/og/x", "oom=kill", "hog", "16777216", NULL);
	worker_live(&w[0], 10000);
	worker_start(&w[1], "/og/y", "oom=kill", "hog", "2097152", NULL);
	worker_live(&w[1], 10000);
	worker_start(&w[2], "/og/y", "oom=kill", "hog", "12582912", NULL);
	for (int i = 0; i < 3; i++) {
		int status = worker_wait_death(&w[i], 20000);

		ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
			      "worker %d of the oom.group ended with status 0x%x", i, status);
	}
	ck_assert_int_eq(file_value("/og", "memory.events.local", "oom_group_kill"), 1);
	ck_assert_int_eq(file_value("/og", "memory.events", "oom_kill"), 3);
	acct_reclaim_dead(&h);
	ck_assert_int_eq(current("/og"), 0);
	ck_assert_int_eq(live_procs(), 0);
}
END_TEST

/* fork(): the child has its own slot in the same group, and its exit gives back its charge. */
START_TEST(test_fork)
{
	struct worker w;
	int64_t before, child_held = 0;
	uint32_t parent_proc, child_proc;
	pid_t child = 0;
	char line[128];
	int status = -1;

	worker_start(&w, "/f", "", "fork", "4194304", NULL);
	worker_expect(&w, "ready", 10000);
	check_usage_held("before fork");
	before = current("/f");
	ck_assert_int_ge(before, 4 << 20);
	parent_proc = proc_of(w.pid);
	ck_assert_int_ne(parent_proc, CGM_NONE);
	worker_say(&w, "fork\n");
	/* "forked PID" from the parent and "child PID" from the child, in either order. */
	for (int i = 0; i < 2; i++) {
		int pid;

		worker_line(&w, line, sizeof(line), 10000);
		ck_assert_msg(sscanf(line, "forked %d", &pid) == 1 || sscanf(line, "child %d", &pid) == 1,
			      "'%s'", line);
		child = pid;
	}
	child_proc = proc_of(child);
	ck_assert_msg(child_proc != CGM_NONE && child_proc != parent_proc, "the child has no slot of its own");
	ck_assert_int_eq(h.procs[child_proc].group, h.procs[parent_proc].group);
	check_usage_held("with the child");
	child_held = h.procs[child_proc].held_pages;
	/*
	 * Its own 1 MiB, less what its frees uncharged (at most 8 blocks of
	 * 64 KiB), and nothing for the 4 MiB it inherited: the kernel charges
	 * nothing at fork.
	 */
	ck_assert_int_ge(child_held * PAGE, 1 << 19);
	ck_assert_int_le(child_held * PAGE, (1 << 20) + 2 * BATCH_BYTES + 256 * 1024);
	ck_assert_int_ge(current("/f"), before + child_held * PAGE - BATCH_BYTES);
	ck_assert_int_lt(current("/f"), before + (4 << 20));
	worker_say(&w, "reap\n");
	ck_assert_int_eq(sscanf(worker_expect(&w, "reaped", 10000), "%d", &status), 1);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child ended with 0x%x", status);
	check_usage_held("after the child");
	ck_assert_int_eq(current("/f"), before);
	worker_exit_ok(&w);
	ck_assert_int_eq(current("/f"), 0);
}
END_TEST

/*
 * A thread that never allocates frees what another thread allocated (a
 * consumer): the frees must come back to the group like any other.
 */
START_TEST(test_consumer_thread_frees)
{
	struct worker w;
	int64_t cur;

	worker_start(&w, "/cf", "", "consumer", "33554432", NULL);
	worker_expect(&w, "done", 20000);
	check_usage_held("after the consumer");
	cur = current("/cf");
	ck_assert_msg(cur <= 2 * BATCH_BYTES + 256 * 1024,
		      "32 MiB allocated and freed, memory.current still %" PRId64, cur);
	worker_exit_ok(&w);
}
END_TEST

/*
 * Statistics past a threshold: a thread that allocates 32 MiB folds its
 * own deltas up the tree every 16 charge batches, so the group's
 * statistics show most of it without any reader flushing (read straight
 * from the mapping).
 */
START_TEST(test_threshold_flush)
{
	struct worker w;
	struct timespec t0, t1;
	int64_t bytes;
	double secs;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	worker_start(&w, "/th", "", "hog", "33554432", NULL);
	worker_expect(&w, "live", 20000);
	bytes = __atomic_load_n(&h.groups[group("/th")].stat_local[CGM_STAT_ALLOC_BYTES],
				__ATOMIC_RELAXED);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	/* Up to 16 batches unflushed, and the last block or two settling. */
	ck_assert_msg(bytes >= 32 * 1024 * 1024 - 17 * BATCH_BYTES,
		      "%" PRId64 " of 32 MiB allocated seen without a flush after %.2f s",
		      bytes, secs);
	worker_exit_ok(&w);
}
END_TEST

static void add_tests(TCase *tc, bool regressions)
{
	if (regressions) {
		tcase_add_test(tc, test_sigkill_while_allocating);
		return;
	}
	tcase_add_test(tc, test_consumer_thread_frees);
	tcase_add_test(tc, test_threshold_flush);
	tcase_add_test(tc, test_eight_processes);
	tcase_add_test(tc, test_sigkill_returns_charge);
	tcase_add_test(tc, test_shared_limit);
	tcase_add_test(tc, test_oom_kill);
	tcase_add_test(tc, test_oom_spares_pid_reuse);
	tcase_add_test(tc, test_oom_group_kill);
	tcase_add_test(tc, test_fork);
}

int main(int argc, char **argv)
{
	return acct_suite_main(argc, argv, "accounting_mp", &seed0, setup, teardown, add_tests);
}
