/*
 * Programs for tests/reliability/test_reliability.sh, run preloaded with
 * libcgmalloc.so (they do not link it).  One subcommand each:
 *
 *   pthread-exit          main starts a worker and calls pthread_exit():
 *                         the process must end when the worker does
 *   threads               "THREADS CHILD_THREADS": entries of /proc/self/task
 *                         here and in a forked child, after some malloc
 *   fork-in-handler SECS  a timer whose handler forks (the child mallocs
 *                         and _exits) interrupts a malloc loop 1 ms after
 *                         each handler returns:
 *                         "forks N" unless it deadlocks
 *   thread-churn N BYTES  N threads one after the other, each keeping a
 *                         BYTES block: "kept K nulls M"
 *   proc-churn N          N children one after the other, each allocating
 *                         and exiting: "children N failed M"
 *   limit-race T SECS     T threads allocate and free near memory.max while
 *                         this one samples memory.current and memory.peak
 *                         (through cgm_read, found with dlsym): "worst W max M"
 *   orphan-child          prints "parent PID child CPID", forks a child that
 *                         allocates nothing until this one has read a line
 *                         from stdin (time to remove the group it would
 *                         join), then allocates, checks and frees blocks of
 *                         16 B to 64 KiB: "child status S blocks N bad B"
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Through a volatile pointer: the compiler may not elide a malloc/free pair. */
static void *(*volatile alloc)(size_t) = malloc;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- pthread-exit ---- */

static void *sleeper(void *arg)
{
	(void)arg;
	free(alloc(1000));
	usleep(200000);
	return NULL;
}

static int pthread_exit_main(void)
{
	pthread_t th;

	if (pthread_create(&th, NULL, sleeper, NULL) != 0)
		return 1;
	pthread_exit(NULL);
}

/* ---- threads ---- */

static int count_tasks(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static int threads_main(void)
{
	int fds[2], child_n = -1, status;
	pid_t pid;

	for (int i = 0; i < 1000; i++)
		free(alloc((size_t)(i * 37 % 5000 + 1)));
	if (pipe(fds) < 0)
		return 1;
	pid = fork();
	if (pid == 0) {
		int n;

		free(alloc(100000));
		n = count_tasks();
		_exit(write(fds[1], &n, sizeof(n)) == sizeof(n) ? 0 : 1);
	}
	if (pid < 0 || read(fds[0], &child_n, sizeof(child_n)) != sizeof(child_n))
		return 1;
	waitpid(pid, &status, 0);
	printf("%d %d\n", count_tasks(), child_n);
	return 0;
}

/* ---- fork-in-handler ---- */

static volatile sig_atomic_t forks, forks_stop;

/*
 * The timer is one-shot, armed again when the handler is done: a fork and
 * its child take 0.8-1.5 ms on some machines, and a periodic 1 ms timer
 * would then run the handler back to back, leaving the malloc loop no
 * time to reach its end (a livelock, not the deadlock this looks for).
 */
static void arm_fork_timer(void)
{
	struct itimerval it = { { 0, 0 }, { 0, 1000 } };

	setitimer(ITIMER_REAL, &it, NULL);
}

static void fork_handler(int sig)
{
	int saved = errno, status;
	pid_t pid;

	(void)sig;
	pid = fork();
	if (pid == 0) {
		free(alloc(64));
		free(alloc(300000));
		_exit(0);
	}
	if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status))
		forks++;
	if (!forks_stop)
		arm_fork_timer();
	errno = saved;
}

static int fork_in_handler_main(double secs)
{
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	struct sigaction sa = { .sa_handler = fork_handler };
	unsigned int seed = 1;
	void *live[64] = { 0 };
	double end = now() + secs;

	sigaction(SIGALRM, &sa, NULL);
	arm_fork_timer();
	while (now() < end) {
		unsigned int i = (unsigned int)rand_r(&seed) % 64;
		size_t n = rand_r(&seed) % 8 ? 16 + (size_t)rand_r(&seed) % 2000 :
					       (size_t)rand_r(&seed) % (1 << 20);

		free(live[i]);
		live[i] = alloc(n);
	}
	forks_stop = 1;
	setitimer(ITIMER_REAL, &off, NULL);
	for (int i = 0; i < 64; i++)
		free(live[i]);
	printf("forks %d\n", (int)forks);
	return forks > 0 ? 0 : 1;
}

/* ---- thread-churn ---- */

static size_t churn_bytes;

static void *keeper(void *arg)
{
	(void)arg;
	return alloc(churn_bytes);
}

static int thread_churn_main(long n, size_t bytes)
{
	long kept = 0, nulls = 0;

	churn_bytes = bytes;
	for (long i = 0; i < n; i++) {
		pthread_t th;
		void *p;

		if (pthread_create(&th, NULL, keeper, NULL) != 0 || pthread_join(th, &p) != 0)
			return 1;
		if (p) {
			memset(p, 1, bytes);
			kept++;
		} else {
			nulls++;
		}
	}
	printf("kept %ld nulls %ld\n", kept * (long)bytes, nulls);
	return 0;
}

/* ---- proc-churn ---- */

static int proc_churn_main(long n)
{
	long failed = 0;

	for (long i = 0; i < n; i++) {
		pid_t pid = fork();
		int status;

		if (pid == 0) {
			char *p = alloc(65536);

			if (p)
				memset(p, 1, 65536);
			exit(p ? 0 : 1);
		}
		if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			failed++;
	}
	printf("children %ld failed %ld\n", n, failed);
	return 0;
}

/* ---- limit-race ---- */

static volatile int race_stop;

static void *racer(void *arg)
{
	unsigned int seed = (unsigned int)(uintptr_t)arg;
	void *live[128] = { 0 };

	while (!race_stop) {
		unsigned int i = (unsigned int)rand_r(&seed) % 128;
		size_t n = rand_r(&seed) % 4 ? 16 + (size_t)rand_r(&seed) % 1000 :
					       (size_t)rand_r(&seed) % (512 << 10);

		free(live[i]);
		live[i] = alloc(n);
	}
	for (int i = 0; i < 128; i++)
		free(live[i]);
	return NULL;
}

static long read_file(int (*rd)(const char *, const char *, char *, size_t), const char *file)
{
	char buf[64];

	if (rd(NULL, file, buf, sizeof(buf)) <= 0)
		return -1;
	return strcmp(buf, "max\n") ? strtol(buf, NULL, 10) : -1;
}

static int limit_race_main(int threads, double secs)
{
	int (*rd)(const char *, const char *, char *, size_t) =
		(int (*)(const char *, const char *, char *, size_t))dlsym(RTLD_DEFAULT, "cgm_read");
	pthread_t th[16];
	long worst = 0, max;
	double end = now() + secs;

	if (!rd || threads > 16)
		return 2;
	max = read_file(rd, "memory.max");
	for (int i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, racer, (void *)(uintptr_t)(i + 1));
	while (now() < end) {
		long cur = read_file(rd, "memory.current"), peak = read_file(rd, "memory.peak");

		if (cur > worst)
			worst = cur;
		if (peak > worst)
			worst = peak;
	}
	race_stop = 1;
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	printf("worst %ld max %ld\n", worst, max);
	return 0;
}

/* ---- orphan-child ---- */

#define ORPHAN_BLOCKS 4000

/* The child: wait for the go byte, then allocate; exit status 3 if a block was wrong. */
static int orphan_child(int go)
{
	static unsigned char *b[ORPHAN_BLOCKS];
	static size_t size[ORPHAN_BLOCKS];
	unsigned long bad = 0;
	char c;

	if (read(go, &c, 1) != 1)
		_exit(4);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < ORPHAN_BLOCKS; i++) {
			size[i] = 16u << ((unsigned)(i + round) % 13);
			b[i] = alloc(size[i]);
			if (!b[i])
				_exit(5);
			memset(b[i], (unsigned char)(i + round), size[i]);
		}
		for (int i = 0; i < ORPHAN_BLOCKS; i++) {
			if (b[i][0] != (unsigned char)(i + round) ||
			    b[i][size[i] - 1] != (unsigned char)(i + round))
				bad++;
			free(b[i]);
		}
	}
	printf("blocks %d bad %lu\n", 3 * ORPHAN_BLOCKS, bad);
	_exit(bad ? 3 : 0);
}

static int orphan_child_main(void)
{
	char line[64];
	int go[2], status;
	pid_t pid;

	free(alloc(100)); /* attached before the fork */
	if (pipe(go) != 0)
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		close(go[1]);
		return orphan_child(go[0]);
	}
	close(go[0]);
	printf("parent %d child %d\n", (int)getpid(), (int)pid);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	if (write(go[1], "g", 1) != 1 || waitpid(pid, &status, 0) != pid)
		return 1;
	printf("child status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	return 0;
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "";

	setvbuf(stdout, NULL, _IONBF, 0);
	if (!strcmp(cmd, "pthread-exit"))
		return pthread_exit_main();
	if (!strcmp(cmd, "threads"))
		return threads_main();
	if (!strcmp(cmd, "fork-in-handler") && argc == 3)
		return fork_in_handler_main(atof(argv[2]));
	if (!strcmp(cmd, "thread-churn") && argc == 4)
		return thread_churn_main(atol(argv[2]), (size_t)atol(argv[3]));
	if (!strcmp(cmd, "proc-churn") && argc == 3)
		return proc_churn_main(atol(argv[2]));
	if (!strcmp(cmd, "limit-race") && argc == 4)
		return limit_race_main(atoi(argv[2]), atof(argv[3]));
	if (!strcmp(cmd, "orphan-child"))
		return orphan_child_main();
	fprintf(stderr, "usage: rel_prog pthread-exit|threads|fork-in-handler SECS|"
		"thread-churn N BYTES|proc-churn N|limit-race T SECS|orphan-child\n");
	return 2;
}
