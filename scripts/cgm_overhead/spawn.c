/*
 * cgm-overhead-spawn: run one workload and report the workload's own rusage.
 *
 * Why it exists: the kernel charges a process's maximum RSS with the
 * high-water mark of the address space it replaced at exec.  A child that
 * the ~10 MB Python harness forks or vforks therefore reports at least the
 * harness's RSS as its ru_maxrss (measured here: /bin/true "uses" 8 MB when
 * posix_spawned from Python, 1 MB from this program).  The harness starts
 * this small program instead, which forks the workload from its own small
 * address space and reports what wait4 says about that child alone.
 *
 * And the peak RSS: ru_maxrss comes from the kernel's RSS counters as
 * they stand without their per-CPU parts (percpu_counter_read), off by up
 * to 32 pages per CPU -- here 1524 KiB for a program whose exact peak was
 * 1792, which drowns the 10% a small program's goal allows.  So the child
 * is traced for one event only, its exit (PTRACE_O_TRACEEXIT: no other
 * stop but for the signals it gets, passed on unchanged), and at that
 * stop, its memory still mapped, VmHWM is read from /proc/PID/status: the
 * larger of the high-water mark and the exact current RSS.  MAXRSS_KIB is
 * the larger of that and ru_maxrss.
 *
 * Usage: cgm-overhead-spawn FD [VAR=VALUE]... -- CMD [ARGS]...
 *
 * The VAR=VALUE settings are made in the child only, so an LD_PRELOAD
 * reaches the workload and not this program.  CMD is run with execvp.  One
 * line is written to file descriptor FD (which the workload does not
 * inherit):
 *   ok STATUS WALL_NS UTIME_US STIME_US MAXRSS_KIB MINFLT MAJFLT NVCSW NIVCSW
 * with STATUS the raw wait status, or
 *   exec-error ERRNO
 * when CMD could not be executed.  Exit status: 0 when a line was written,
 * 2 on a usage error, 1 when fork or wait4 failed.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int usage(void)
{
	fprintf(stderr, "cgm-overhead-spawn: usage: cgm-overhead-spawn FD [VAR=VALUE]... -- CMD [ARGS]...\n");
	return 2;
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static long long tv_us(struct timeval tv)
{
	return tv.tv_sec * 1000000ll + tv.tv_usec;
}

/* VmHWM of process @pid in KiB, or -1 (this helper is no allocator: stdio will do). */
static long vm_hwm_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (kib < 0 && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kib) != 1)
			kib = -1;
	fclose(f);
	return kib;
}

/* In the child: wait until the parent traces it (@go_fd gives EOF), the
 * settings, then exec; an exec failure goes back to the parent through
 * @err_fd (close-on-exec, so success closes it silently). */
static void run_child(char **settings, int nsettings, char **cmd, int err_fd, int go_fd)
{
	char c;
	int e;

	while (read(go_fd, &c, 1) < 0 && errno == EINTR)
		;
	close(go_fd);

	for (int i = 0; i < nsettings; i++)
		if (putenv(settings[i]) != 0)
			break;
	execvp(cmd[0], cmd);
	e = errno;
	/* If this write fails the parent sees a plain exit status 127. */
	if (write(err_fd, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

int main(int argc, char **argv)
{
	char *end;
	long fd;
	int sep = -1, pipefd[2], gofd[2], status, e = 0;
	long long start, wall;
	long hwm = -1;
	bool traced;
	struct rusage ru;
	pid_t pid;
	ssize_t n;

	if (argc < 4)
		return usage();
	errno = 0;
	fd = strtol(argv[1], &end, 10);
	if (errno || *end || end == argv[1] || fd < 0 || fd > 1023)
		return usage();
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			sep = i;
			break;
		}
		if (!strchr(argv[i], '='))
			return usage();
	}
	if (sep < 0 || sep + 1 >= argc)
		return usage();
	/* The report descriptor is ours, not the workload's. */
	if (fcntl((int)fd, F_SETFD, FD_CLOEXEC) != 0 || pipe2(pipefd, O_CLOEXEC) != 0 ||
	    pipe2(gofd, O_CLOEXEC) != 0) {
		perror("cgm-overhead-spawn");
		return 1;
	}

	start = now_ns();
	pid = fork();
	if (pid < 0) {
		perror("cgm-overhead-spawn: fork");
		return 1;
	}
	if (pid == 0) {
		close(pipefd[0]);
		close(gofd[1]);
		run_child(argv + 2, sep - 2, argv + sep + 1, pipefd[1], gofd[0]);
	}
	close(pipefd[1]);
	close(gofd[0]);
	/* Without tracing (not permitted here): ru_maxrss alone. */
	traced = ptrace(PTRACE_SEIZE, pid, 0, PTRACE_O_TRACEEXIT | PTRACE_O_EXITKILL) == 0;
	close(gofd[1]);
	for (;;) {
		if (wait4(pid, &status, 0, &ru) < 0) {
			if (errno == EINTR)
				continue;
			perror("cgm-overhead-spawn: wait4");
			return 1;
		}
		if (!traced || !WIFSTOPPED(status))
			break;
		if (status >> 8 == (SIGTRAP | (PTRACE_EVENT_EXIT << 8))) {
			hwm = vm_hwm_kib(pid);
			ptrace(PTRACE_CONT, pid, 0, 0);
		} else {
			/* A signal for the workload: delivered as it would be. */
			ptrace(PTRACE_CONT, pid, 0, WSTOPSIG(status));
		}
	}
	wall = now_ns() - start;
	n = read(pipefd[0], &e, sizeof(e));
	if (n == (ssize_t)sizeof(e))
		dprintf((int)fd, "exec-error %d\n", e);
	else
		dprintf((int)fd, "ok %d %lld %lld %lld %ld %ld %ld %ld %ld\n", status, wall,
			tv_us(ru.ru_utime), tv_us(ru.ru_stime),
			hwm > ru.ru_maxrss ? hwm : ru.ru_maxrss, ru.ru_minflt,
			ru.ru_majflt, ru.ru_nvcsw, ru.ru_nivcsw);
	return 0;
}
