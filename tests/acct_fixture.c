/*
 * The accounting tests' shared fixture (see acct_fixture.h).
 */
#include <dirent.h>
#include <ftw.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acct_fixture.h"
#include "cgm/files.h"
#include "cgm/size_class.h"
#include "check_run.h"

/*
 * Set by acct_suite_main(): every test's directory is made in it, and it
 * is removed with all it holds once the tests have run (a failed Check
 * test ends with _exit, without its teardown).
 */
static char tmp_base[64];

static const char *tmp_parent(void)
{
	struct stat st;

	if (tmp_base[0])
		return tmp_base;
	return stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

int acct_tmp_create(struct acct_tmp *t)
{
	snprintf(t->dir, sizeof(t->dir), "%s/cgm-acct-test-XXXXXX", tmp_parent());
	if (!mkdtemp(t->dir))
		return -errno;
	snprintf(t->path, sizeof(t->path), "%s/hier", t->dir);
	return 0;
}

void acct_tmp_open(struct acct_tmp *t, struct cgm_hier *h)
{
	char why[512];
	int err;

	if (!t->dir[0] && acct_tmp_create(t) < 0) {
		fprintf(stderr, "acct_fixture: cannot make a temporary directory: %s\n",
			strerror(errno));
		abort();
	}
	err = hier_open(h, t->path, true, why, sizeof(why));
	if (err) {
		fprintf(stderr, "acct_fixture: hier_open %s: %s\n", t->path, why);
		abort();
	}
}

void acct_tmp_remove(struct acct_tmp *t)
{
	DIR *d;
	struct dirent *e;

	if (!t->dir[0])
		return;
	d = opendir(t->dir);
	while (d && (e = readdir(d))) {
		char p[sizeof(t->dir) + 300];

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", t->dir, e->d_name);
		if (unlink(p) < 0)
			rmdir(p);
	}
	if (d)
		closedir(d);
	rmdir(t->dir);
	t->dir[0] = '\0';
}

uint64_t acct_rand(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ULL;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dULL;
}

int64_t sim_block_size(size_t n)
{
	if (n <= CGM_SMALL_MAX)
		return (int64_t)cgm_small_block_size(n);
	return (int64_t)((n + CGM_PAGE_SIZE - 1) & ~(size_t)(CGM_PAGE_SIZE - 1));
}

int64_t sim_malloc(struct cgm_acct *a, struct cgm_thread_slot *t, size_t n,
		   bool check_limits)
{
	int64_t size = sim_block_size(n);

	if (acct_stock_take(a, t, size, check_limits) < 0)
		return -ENOMEM;
	cgm_owner_add(t->big_allocs, 1);
	cgm_owner_add(t->big_alloc_bytes, (uint64_t)size);
	cgm_owner_add(t->big_hist[rstat_hist_bucket((uint64_t)size)], 1);
	return size;
}

void sim_free(struct cgm_thread_slot *t, int64_t size)
{
	cgm_owner_add(t->freed_bytes, (uint64_t)size);
	cgm_owner_add(t->frees, 1);
}

int64_t sim_realloc(struct cgm_acct *a, struct cgm_thread_slot *t, int64_t old, size_t n,
		    bool check_limits)
{
	int64_t size = sim_block_size(n);

	if (size > old) {
		if (acct_stock_take(a, t, size - old, check_limits) < 0)
			return -ENOMEM;
	} else {
		cgm_owner_add(t->stock, old - size);
		acct_stock_trim(a, t);
	}
	cgm_owner_add(t->reallocs, 1);
	cgm_owner_add(t->realloc_new_bytes, (uint64_t)size);
	cgm_owner_add(t->realloc_old_bytes, (uint64_t)old);
	cgm_owner_add(t->big_hist[rstat_hist_bucket((uint64_t)size)], 1);
	return size;
}

int acct_random_tree(struct cgm_hier *h, uint64_t *rng, int n, uint32_t *idx)
{
	static char paths[64][CGM_PATH_MAX];

	for (int i = 0; i < n && i < 64; i++) {
		int parent = i ? (int)acct_rand_below(rng, (uint64_t)i + 1) - 1 : -1;
		char path[CGM_PATH_MAX + 16];
		int64_t g;

		snprintf(path, sizeof(path), "%s/g%d", parent < 0 ? "" : paths[parent], i);
		path[CGM_PATH_MAX - 1] = '\0';
		memcpy(paths[i], path, CGM_PATH_MAX);
		hier_lock(&h->hdr->tree_lock);
		g = group_mkdir(h, paths[i]);
		hier_unlock(&h->hdr->tree_lock);
		if (g <= 0)
			return -1;
		idx[i] = (uint32_t)g;
	}
	return 0;
}

void acct_drain(struct cgm_hier *h)
{
	acct_harvest_subtree(h, CGM_ROOT);
	rstat_flush(h);
}

int64_t acct_subtree_held(const struct cgm_hier *h, uint32_t group)
{
	int64_t sum = 0;

	for (uint32_t i = 0; i < CGM_MAX_PROCS; i++) {
		const struct cgm_proc *p = &h->procs[i];

		if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == CGM_SLOT_LIVE &&
		    group_in_subtree(h, p->group, group))
			sum += proc_charged_pages(p);
	}
	return sum;
}

int acct_check_usage_held(const struct cgm_hier *h, char *msg, size_t len)
{
	int bad = 0;

	msg[0] = '\0';
	for (uint32_t i = 0; i < CGM_MAX_GROUPS; i++) {
		const struct cgm_group *g = hier_group(h, i);
		int64_t usage, held;

		if (!g)
			continue;
		usage = page_counter_read(&g->memory);
		held = acct_subtree_held(h, i);
		if (usage != held && bad++ == 0) {
			char path[CGM_PATH_MAX];

			group_path(h, i, path, sizeof(path));
			snprintf(msg, len, "group %s: usage %" PRId64 " pages, its processes hold %" PRId64,
				 path, usage, held);
		}
	}
	return bad;
}

int acct_check_stat_tree(const struct cgm_hier *h, char *msg, size_t len)
{
	static int64_t sum[CGM_MAX_GROUPS][CGM_NR_STATS];
	int bad = 0;

	/* Children found by their parent index, not by the sibling lists. */
	memset(sum, 0, sizeof(sum));
	for (uint32_t i = 0; i < CGM_MAX_GROUPS; i++) {
		const struct cgm_group *g = hier_group(h, i);

		if (!g || i == CGM_ROOT || g->parent >= CGM_MAX_GROUPS)
			continue;
		for (int s = 0; s < CGM_NR_STATS; s++)
			sum[g->parent][s] += g->stat[s];
	}
	msg[0] = '\0';
	for (uint32_t i = 0; i < CGM_MAX_GROUPS; i++) {
		const struct cgm_group *g = hier_group(h, i);

		if (!g)
			continue;
		for (int s = 0; s < CGM_NR_STATS; s++) {
			if (g->stat[s] == g->stat_local[s] + sum[i][s])
				continue;
			if (bad++ == 0) {
				char path[CGM_PATH_MAX];

				group_path(h, i, path, sizeof(path));
				snprintf(msg, len, "group %s stat %d: hierarchical %" PRId64
					 " != local %" PRId64 " + children %" PRId64,
					 path, s, g->stat[s], g->stat_local[s], sum[i][s]);
			}
		}
	}
	return bad;
}

/* In the child: report @fn's result, wait for the parent's word, detach or not. */
static void __attribute__((noreturn)) child_main(struct cgm_acct *a, int r, int cmd, int done,
						  acct_child_fn fn, void *arg)
{
	char op = 0;

	if (r == 0)
		r = fn(a, arg);
	if (write(done, &r, sizeof(r)) != sizeof(r))
		_exit(3);
	if (read(cmd, &op, 1) == 1 && op == 'd')
		acct_detach(a);
	_exit(0);
}

static pid_t child_fork(struct acct_child *c, int *cmd_rd, int *done_wr)
{
	int cmd[2], done[2];

	if (pipe(cmd) < 0)
		return -1;
	if (pipe(done) < 0) {
		close(cmd[0]);
		close(cmd[1]);
		return -1;
	}
	c->pid = fork();
	if (c->pid < 0)
		return -1;
	if (c->pid == 0) {
		close(cmd[1]);
		close(done[0]);
		*cmd_rd = cmd[0];
		*done_wr = done[1];
		return 0;
	}
	close(cmd[0]);
	close(done[1]);
	c->cmd = cmd[1];
	c->done = done[0];
	return c->pid;
}

int acct_child_start(struct acct_child *c, const char *path, const char *group,
		     acct_child_fn fn, void *arg)
{
	int cmd, done;
	pid_t pid = child_fork(c, &cmd, &done);

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		struct cgm_acct a = { .proc = CGM_NONE, .batch_pages = CGM_CHARGE_BATCH };
		char why[512];
		int r = hier_open(&a.h, path, false, why, sizeof(why));

		if (r == 0)
			r = acct_attach(&a, group);
		child_main(&a, r, cmd, done, fn, arg);
	}
	return 0;
}

int acct_child_fork(struct acct_child *c, const struct cgm_acct *parent, const char *group,
		    acct_child_fn fn, void *arg)
{
	int cmd, done;
	pid_t pid = child_fork(c, &cmd, &done);

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		struct cgm_acct a = *parent;
		struct cgm_proc *pp = hier_proc(&a.h, parent->proc);
		int64_t g;
		int r;

		/* What the shim's fork child does at its first allocation. */
		a.proc = CGM_NONE;
		r = pp ? acct_attach_group(&a, pp->group) : -EINVAL;
		if (r == 0) {
			hier_lock(&a.h.hdr->tree_lock);
			g = group_mkdir(&a.h, group);
			hier_unlock(&a.h.hdr->tree_lock);
			r = g < 0 ? (int)g : acct_move(&a.h, a.proc, (uint32_t)g);
		}
		child_main(&a, r, cmd, done, fn, arg);
	}
	return 0;
}

int acct_child_result(struct acct_child *c)
{
	int r;

	if (read(c->done, &r, sizeof(r)) != sizeof(r))
		return -EPIPE;
	return r;
}

int acct_child_finish(struct acct_child *c, bool detach)
{
	char op = detach ? 'd' : 'x';
	int status = -1;

	if (write(c->cmd, &op, 1) != 1)
		kill(c->pid, SIGKILL);
	close(c->cmd);
	close(c->done);
	while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
		;
	return status;
}

int acct_run_guarded(void (*fn)(void *), void *arg, int timeout_ms, char *msg, size_t len)
{
	pid_t pid = fork();
	int status = 0;

	msg[0] = '\0';
	if (pid < 0) {
		snprintf(msg, len, "fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		fn(arg);
		_exit(0);
	}
	for (int waited = 0; waited <= timeout_ms; waited += 10) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid) {
			if (WIFSIGNALED(status)) {
				snprintf(msg, len, "killed by signal %d (%s)", WTERMSIG(status),
					 strsignal(WTERMSIG(status)));
				return -1;
			}
			if (WEXITSTATUS(status)) {
				snprintf(msg, len, "exited with status %d", WEXITSTATUS(status));
				return -1;
			}
			return 0;
		}
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	snprintf(msg, len, "still running after %d ms (a loop)", timeout_ms);
	return -1;
}

int64_t acct_file_value(const char *text, const char *key)
{
	size_t kl = strlen(key);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, kl) && p[kl] == ' ')
			return strtoll(p + kl + 1, NULL, 10);
	return -1;
}

void acct_group_write(struct cgm_hier *h, const char *path, const char *file, const char *value)
{
	char why[256];
	uint32_t g = group_lookup(h, path);
	int err;

	ck_assert_msg(g != CGM_NONE, "no group %s", path);
	err = cgm_file_write(h, CGM_NONE, g, file, value, why, sizeof(why));
	ck_assert_msg(err == 0, "%s %s=%s: %s", path, file, value, why);
}

int64_t acct_group_usage(struct cgm_hier *h, const char *path)
{
	uint32_t g = group_lookup(h, path);

	ck_assert_msg(g != CGM_NONE, "no group %s", path);
	return page_counter_read(&h->groups[g].memory);
}

int64_t acct_group_value(struct cgm_hier *h, const char *path, const char *file, const char *key)
{
	char buf[8192];
	uint32_t g = group_lookup(h, path);

	ck_assert_msg(g != CGM_NONE, "no group %s", path);
	ck_assert_int_gt(cgm_file_read(h, g, file, buf, sizeof(buf)), 0);
	return acct_file_value(buf, key);
}

void *acct_shared_alloc(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

int acct_suite_main(int argc, char **argv, const char *name, uint64_t *seed,
		    void (*setup)(void), void (*teardown)(void),
		    void (*add)(TCase *tc, bool regressions))
{
	bool regressions = argc > 1 && !strcmp(argv[1], "regressions");
	Suite *s = suite_create(name);
	TCase *tc = tcase_create(regressions ? "regressions" : name);
	int status;

	if (argc > 1 + regressions)
		*seed = strtoull(argv[1 + regressions], NULL, 0);
	snprintf(tmp_base, sizeof(tmp_base), "%s/cgm-acct-test-XXXXXX", tmp_parent());
	if (!mkdtemp(tmp_base))
		tmp_base[0] = '\0';
	if (setup || teardown)
		tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	add(tc, regressions);
	suite_add_tcase(s, tc);
	status = check_run(s);
	if (tmp_base[0])
		nftw(tmp_base, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	return status;
}
