/*
 * Reading a group's memory.stat with many groups (the
 * kernel anchor: root's memory.numa_stat with 10,000 memcgs took 0.700 s
 * walking the tree, 0.001 s once it read the already-hierarchical value).
 *
 *   stat_read HIERARCHY [GROUPS [PROCS]]	(default 10000 groups, 16 processes)
 *
 * Builds GROUPS groups in a fresh hierarchy file, starts PROCS processes
 * attached to groups spread over the tree, each with a thread slot whose
 * counters it advances (as its malloc fast path would), then times, as a
 * median of repeated runs: a flush after all of them changed, a flush
 * after one changed, a flush with nothing changed (after the same idle
 * time as the other two, and again straight after a flush), the read of root's
 * memory.stat after a flush, and the same statistics summed by walking
 * every group (what reading costs without hierarchical values).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgm/acct.h"
#include "cgm/files.h"

#define RUNS 51

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

/* A worker: attach, take a thread slot, advance its counters on SIGUSR1. */
static struct cgm_thread_slot *worker_slot;
static volatile sig_atomic_t bumps;

static void on_usr1(int sig)
{
	(void)sig;
	bumps++;
}

static void worker(struct cgm_acct *a, const char *group)
{
	uint32_t idx;

	signal(SIGUSR1, on_usr1);
	if (acct_attach(a, group) < 0)
		_exit(1);
	idx = acct_thread_register(a, getpid());
	worker_slot = hier_thread(&a->h, idx);
	for (;;) {
		sig_atomic_t seen = bumps;

		/* What malloc/free do: allocations and frees of bin 4 (64 B blocks). */
		worker_slot->refilled[4] += 100;
		worker_slot->frees += 60;
		worker_slot->freed_bytes += 60 * cgm_bin_size(4);
		while (bumps == seen)
			pause();
	}
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "/tmp/cgm-stat-read";
	int ngroups = argc > 2 ? atoi(argv[2]) : 10000;
	int nprocs = argc > 3 ? atoi(argv[3]) : 16;
	static char buf[16384];
	struct cgm_acct a = { .proc = CGM_NONE, .batch_pages = 64 };
	double t_all[RUNS], t_one[RUNS], t_none[RUNS], t_none_warm[RUNS], t_read[RUNS], t_walk[RUNS];
	double t_numa[RUNS], t_psi[RUNS];
	char why[256], name[64];
	pid_t *pids = calloc((size_t)nprocs, sizeof(pid_t));
	int64_t sum = 0;

	unlink(path);
	if (hier_open(&a.h, path, true, why, sizeof(why)) < 0) {
		fprintf(stderr, "stat_read: %s\n", why);
		return 1;
	}
	hier_lock(&a.h.hdr->tree_lock);
	for (int i = 0; i < ngroups; i++) {
		/* 100 parents with up to 99 children each: a two-level tree */
		if (i % 100 == 0)
			snprintf(name, sizeof(name), "/g%d", i / 100);
		else
			snprintf(name, sizeof(name), "/g%d/c%d", i / 100, i % 100);
		if (group_mkdir(&a.h, name) < 0) {
			fprintf(stderr, "stat_read: cannot create group %s\n", name);
			return 1;
		}
	}
	hier_unlock(&a.h.hdr->tree_lock);
	for (int i = 0; i < nprocs; i++) {
		snprintf(name, sizeof(name), "/g%d/c%d", (i * 37) % (ngroups / 100), 1 + i % 99);
		pids[i] = fork();
		if (pids[i] == 0)
			worker(&a, name);
	}
	sleep(1);
	rstat_flush(&a.h);
	for (int r = 0; r < RUNS; r++) {
		double t0;

		for (int i = 0; i < nprocs; i++)
			kill(pids[i], SIGUSR1);
		usleep(20000);
		t0 = now_us();
		rstat_flush(&a.h);
		t_all[r] = now_us() - t0;

		kill(pids[r % nprocs], SIGUSR1);
		usleep(20000);
		t0 = now_us();
		rstat_flush(&a.h);
		t_one[r] = now_us() - t0;

		/* Idle as long as before the other two: the same cold caches. */
		usleep(20000);
		t0 = now_us();
		rstat_flush(&a.h);
		t_none[r] = now_us() - t0;

		t0 = now_us();
		rstat_flush(&a.h);
		t_none_warm[r] = now_us() - t0;

		t0 = now_us();
		cgm_file_render(&a.h, CGM_ROOT, "memory.stat", buf, sizeof(buf));
		t_read[r] = now_us() - t0;

		t0 = now_us();
		cgm_file_render(&a.h, CGM_ROOT, "memory.numa_stat", buf, sizeof(buf));
		t_numa[r] = now_us() - t0;

		t0 = now_us();
		cgm_file_render(&a.h, CGM_ROOT, "memory.pressure", buf, sizeof(buf));
		t_psi[r] = now_us() - t0;

		/* The tree walk the hierarchical values avoid. */
		t0 = now_us();
		sum = 0;
		for (uint32_t g = 0; g < CGM_MAX_GROUPS; g++) {
			struct cgm_group *grp = hier_group(&a.h, g);

			if (grp)
				for (int s = 0; s < CGM_NR_STATS; s++)
					sum += grp->stat_local[s];
		}
		t_walk[r] = now_us() - t0;
	}
	for (int i = 0; i < nprocs; i++) {
		kill(pids[i], SIGKILL);
		waitpid(pids[i], NULL, 0);
	}
	printf("| %d groups, %d processes | median of %d |\n|---|---:|\n", ngroups, nprocs, RUNS);
	printf("| flush, all %d processes changed | %.1f us |\n", nprocs, median(t_all, RUNS));
	printf("| flush, one process changed | %.1f us |\n", median(t_one, RUNS));
	printf("| flush, nothing changed | %.1f us |\n", median(t_none, RUNS));
	printf("| flush, nothing changed, straight after another flush (warm caches) | %.1f us |\n",
	       median(t_none_warm, RUNS));
	/*
	 * A flush reads every live thread slot (the kernel's flush visits
	 * every CPU) and then does work for what changed only: the slope.
	 */
	printf("| cost per changed process: (all changed - nothing changed) / %d | %.2f us |\n",
	       nprocs, (median(t_all, RUNS) - median(t_none, RUNS)) / nprocs);
	printf("| read root memory.stat after a flush | %.1f us |\n", median(t_read, RUNS));
	printf("| read root memory.numa_stat after a flush | %.1f us |\n", median(t_numa, RUNS));
	printf("| read root memory.pressure (its averages brought up to date) | %.1f us |\n",
	       median(t_psi, RUNS));
	printf("| same statistics by walking every group | %.1f us |\n", median(t_walk, RUNS));
	fprintf(stderr, "(walk sum %lld)\n", (long long)sum);
	hier_close(&a.h);
	unlink(path);
	return 0;
}
