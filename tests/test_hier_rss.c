/*
 * How much of the shared hierarchy file a small process maps.
 *
 * Every page of the file exists, and a read fault on a shared file
 * mapping maps up to fifteen neighbours the page cache holds
 * (fault-around): a process that read its slots maps 64 KiB of the file
 * around each.  hier_prefault() writes a slot's pages before the first
 * read, so a process maps only the pages it uses.  Here a first process
 * runs THREADS threads at once (their thread slots, and so the pages
 * around the next process's slot, are written and in the page cache),
 * then a fresh process (exec) allocates and frees a little and measures
 * the RSS of its mapping of the file (/proc/self/smaps): it must stay
 * within LIMIT_KIB.  Without the prefaults it maps 132-136 KiB here (the
 * header, its process slot and its thread slot, each with its window),
 * and 124 KiB in a one-thread benchmark; with them 16-28 KiB.
 *
 * Before the probe, EXITED processes of the test live together and then
 * exit, each leaving its slot exiting (a later attach frees one of them
 * at a time), as a hierarchy that many programs used holds hundreds: a
 * new process that read every one of them to find slots of its own pid
 * left behind by an exec mapped a page of the process table per seven
 * slots (152 KiB here against 20-28 KiB now; 160 KiB with 280 in a
 * default hierarchy).  Then KILLED more are killed while attached: their
 * slots stay attached until the table is full, and a new process that
 * read each attached slot for its pid mapped 92 KiB of the file here (it
 * reads the pids in the header now).
 *
 * With HIER_RSS_PROBE_GROUP set, the probe makes and joins that group
 * (group= added to its CGMALLOC_CONF), whose parent tests/runtime.mk has
 * given HIER_RSS_SIBLINGS children first: finding that the group does not exist
 * read every sibling (1.5 KiB each) until the group keys
 * (struct cgm_group_key): 76 KiB of the file with 40 siblings, 400 KiB
 * in make bench.
 *
 * Usage: test_hier_rss   (accounting on, CGMALLOC_CONF names the hierarchy)
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgmalloc.h"
#include "smaps_rss.h"

#define THREADS		48
#define EXITED		300
#define KILLED		128
#define LIMIT_KIB	40
/* A probe that made its group beside many others: its group's two pages and the keys' page more. */
#define SIBLINGS_LIMIT_KIB	(LIMIT_KIB + 12)

static pthread_barrier_t all_in;

static void *thread_main(void *arg)
{
	/* Above the small sizes: the thread takes its slot at once. */
	void *p = malloc(64 * 1024);

	(void)arg;
	pthread_barrier_wait(&all_in);
	free(p);
	return NULL;
}

/* The first process: THREADS threads alive together, each with a slot. */
static int run_threads(void)
{
	pthread_t t[THREADS];

	pthread_barrier_init(&all_in, NULL, THREADS);
	for (int i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, thread_main, NULL) != 0) {
			fprintf(stderr, "test_hier_rss: cannot start thread %d\n", i);
			return 1;
		}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	return 0;
}

/*
 * A holder (exec'd: attaches at start): a block, a byte on @ready, then
 * wait for EOF on @gate.
 */
static int hold(int gate, int ready)
{
	char c, *p = malloc(64 * 1024);

	if (!p)
		return 1;
	p[0] = 1;
	if (write(ready, "r", 1) != 1)
		return 1;
	while (read(gate, &c, 1) < 0)
		;
	free(p);
	return 0;		/* exit: the library detaches, the slot is left exiting */
}

/*
 * @n processes attached together (each exec'd, so it attaches at start
 * with a slot of its own), which then exit normally -- their slots are
 * left exiting -- or, with @kill, are killed: their slots stay attached
 * (until the table is full and dead processes' slots are freed).
 */
static int run_holders(const char *argv0, int n, bool kill_them)
{
	int gate[2], ready[2], st, failed = 0, started = 0;
	pid_t pid[EXITED];
	char fds[2][16];

	if (n > EXITED || pipe(gate) != 0 || pipe(ready) != 0)
		return 1;
	snprintf(fds[0], sizeof(fds[0]), "%d", gate[0]);
	snprintf(fds[1], sizeof(fds[1]), "%d", ready[1]);
	for (; started < n; started++) {
		pid[started] = fork();
		if (pid[started] < 0)
			break;
		if (pid[started] == 0) {
			close(gate[1]);
			close(ready[0]);
			execl("/proc/self/exe", argv0, "hold", fds[0], fds[1], (char *)NULL);
			_exit(127);
		}
	}
	close(gate[0]);
	close(ready[1]);
	/* Every holder has attached before any is killed or let go. */
	for (int i = 0; i < started; i++) {
		char c;

		if (read(ready[0], &c, 1) != 1) {
			failed++;
			break;
		}
	}
	close(ready[0]);
	if (kill_them)
		for (int i = 0; i < started; i++)
			kill(pid[i], SIGKILL);
	close(gate[1]);
	for (int i = 0; i < started; i++) {
		bool ok = waitpid(pid[i], &st, 0) == pid[i] &&
			  (kill_them ? WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL :
				       WIFEXITED(st) && WEXITSTATUS(st) == 0);

		failed += !ok;
	}
	if (started < n || failed) {
		fprintf(stderr, "test_hier_rss: %d of %d %s processes failed\n",
			n - started + failed, n, kill_them ? "killed" : "exiting");
		return 1;
	}
	return 0;
}

/* The hierarchy= of CGMALLOC_CONF into @buf; "" for the default. */
static void conf_hierarchy(char *buf, size_t len)
{
	const char *conf = getenv("CGMALLOC_CONF"), *at = conf ? strstr(conf, "hierarchy=") : NULL;
	size_t n;

	buf[0] = '\0';
	if (!at)
		return;
	at += strlen("hierarchy=");
	n = strcspn(at, ",");
	if (n < len) {
		memcpy(buf, at, n);
		buf[n] = '\0';
	}
}

/* The mapping of the hierarchy file: @arg names it, or "" for the default. */
static bool hierarchy_file(const char *perms, const char *path, const void *arg)
{
	const char *want = arg;

	(void)perms;
	return want[0] ? strcmp(path, want) == 0 : smaps_path_ends(path, "/hierarchy");
}

/* RSS in KiB of the mapping of the hierarchy file (-1 if none). */
static long hier_rss_kib(void)
{
	char want[256];

	conf_hierarchy(want, sizeof(want));
	return smaps_rss_kib(hierarchy_file, want);
}

/*
 * On a failure: which pages of the file the process has mapped, as runs
 * of file offsets (from /proc/self/pagemap), so that the slots or tables
 * read can be told from the header's layout.  (It failed about once in
 * a hundred runs on a loaded machine, 48-328 KiB: the new thread tried
 * as free the slots of processes that had detached, which one map of
 * slots in use and of slots to flush had off it; flush_map now.)
 */
static void print_mapped_runs(void)
{
	char want[256], line[512];
	FILE *maps = fopen("/proc/self/maps", "r");
	FILE *pm = fopen("/proc/self/pagemap", "r");
	unsigned long lo = 0, hi = 0, off = 0;

	conf_hierarchy(want, sizeof(want));
	while (maps && fgets(line, sizeof(line), maps)) {
		unsigned long a, b, o;
		char path[256] = "";

		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %255s", &a, &b, &o, path) == 4 &&
		    hierarchy_file("", path, want)) {
			lo = a;
			hi = b;
			off = o;
			break;
		}
	}
	for (unsigned long a = lo, run = 0; pm && a < hi; a += 4096) {
		uint64_t e = 0;
		bool present = fseek(pm, (long)(a / 4096 * 8), SEEK_SET) == 0 &&
			       fread(&e, sizeof(e), 1, pm) == 1 && (e >> 63);

		if (present && !run)
			run = a;
		if (run && (!present || a + 4096 >= hi)) {
			fprintf(stderr, "test_hier_rss: mapped: file KiB %lu..%lu\n",
				(off + run - lo) / 1024, (off + (present ? a + 4096 : a) - lo) / 1024);
			run = 0;
		}
	}
	if (maps)
		fclose(maps);
	if (pm)
		fclose(pm);
}

/* The measured process: a few small and medium blocks, as a small program. */
static int probe(void)
{
	void *p[64];
	long kib;
	int limit = getenv("HIER_RSS_PROBE_GROUP") ? SIBLINGS_LIMIT_KIB : LIMIT_KIB;

	if (!cgm_accounting_enabled()) {
		fprintf(stderr, "test_hier_rss: accounting is off\n");
		return 1;
	}
	for (int i = 0; i < 64; i++)
		p[i] = malloc((size_t)(i % 8 + 1) * 600);
	for (int i = 0; i < 64; i++)
		free(p[i]);
	kib = hier_rss_kib();
	if (kib < 0) {
		fprintf(stderr, "test_hier_rss: no mapping of the hierarchy in /proc/self/smaps\n");
		return 1;
	}
	if (kib > limit) {
		fprintf(stderr, "test_hier_rss: the process maps %ld KiB of the hierarchy file "
			"(limit %d KiB): reads fault around its slots\n", kib, limit);
		print_mapped_runs();
		return 1;
	}
	fprintf(stderr, "test_hier_rss: %ld KiB of the hierarchy file mapped (limit %d)\n", kib,
		limit);
	return 0;
}

int main(int argc, char **argv)
{
	pid_t pid;
	int st;

	if (argc > 1 && strcmp(argv[1], "probe") == 0)
		return probe();
	if (argc > 3 && strcmp(argv[1], "hold") == 0)
		return hold(atoi(argv[2]), atoi(argv[3]));
	pid = fork();
	if (pid == 0)
		_exit(run_threads());
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "test_hier_rss: the threads' process failed\n");
		return 1;
	}
	if (run_holders(argv[0], EXITED, false) != 0 || run_holders(argv[0], KILLED, true) != 0)
		return 1;
	pid = fork();
	if (pid == 0) {
		const char *group = getenv("HIER_RSS_PROBE_GROUP"), *conf = getenv("CGMALLOC_CONF");
		char joined[4096];

		if (group && conf) {
			snprintf(joined, sizeof(joined), "%s,group=%s", conf, group);
			setenv("CGMALLOC_CONF", joined, 1);
		}
		execl("/proc/self/exe", argv[0], "probe", (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return 1;
	return WEXITSTATUS(st);
}
