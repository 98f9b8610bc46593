/*
 * spill_core=1: a core dump holds the spilled pages.
 *
 * The kernel dumps zeros where a page is spilled: it does not wait on a
 * userfaultfd while it dumps a process (nor for a debugger reading it
 * through /proc/PID/mem or ptrace).  A core of a crashed program would
 * lack exactly its cold data.  So once the engine is open, each signal
 * whose default action dumps core, where the program left it at
 * SIG_DFL, gets a handler that first brings every spilled page back and
 * then lets the signal take its default course: a fault happens again
 * when the handler returns, any other signal is sent again.  A program
 * that installs a handler of its own replaces this one as it would have
 * replaced the default (and one that chains to the previous handler
 * chains here); exec resets it.
 *
 * The handler first puts the whole set back to SIG_DFL, so that a second
 * crash, in this thread or another, dumps at once.  It brings pages back
 * only where a core will be written (RLIMIT_CORE above 0, or a pipe in
 * core_pattern, which ignores the limit; the process dumpable), with a
 * timer that sends a core-dumping signal after RESTORE_S seconds: should
 * the restore never end (a lock held by a thread that the crash left
 * where it was), the process dumps all the same, with what is back by
 * then.  One line on stderr says how many pages came back.
 *
 * Everything here is a system call or the spiller's restore, which never
 * allocates; the spill lock is never held where this handler can run
 * (every thread that holds it blocks signals).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgm/log.h"
#include "cgm/spiller.h"

/* The longest a crash waits for its spilled pages before the dump goes on without them. */
#define RESTORE_S	10

static const int core_signals[] = {
	SIGQUIT, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV, SIGXCPU, SIGXFSZ, SIGSYS,
};
#define NR_CORE_SIGNALS	(sizeof(core_signals) / sizeof(core_signals[0]))

static bool watching;

/* Is @sa the default disposition? */
static bool is_default(const struct sigaction *sa)
{
	return !(sa->sa_flags & SA_SIGINFO) && sa->sa_handler == SIG_DFL;
}

static void core_signal(int sig, siginfo_t *si, void *ctx);

/* Every signal of the set whose handler is still this one: back to SIG_DFL. */
static void defaults(void)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };

	for (size_t i = 0; i < NR_CORE_SIGNALS; i++) {
		struct sigaction cur;

		if (sigaction(core_signals[i], NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
		    cur.sa_sigaction == core_signal)
			sigaction(core_signals[i], &dfl, NULL);
	}
}

/*
 * Will the kernel write a core?  Not when the process is not dumpable,
 * nor with RLIMIT_CORE at 0 unless core_pattern pipes the core to a
 * program (which the limit does not stop, but for its value 1).
 */
static bool core_wanted(void)
{
	struct rlimit lim;
	char first = 0;
	int fd;

	if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) <= 0)
		return false;
	if (getrlimit(RLIMIT_CORE, &lim) == 0 && lim.rlim_cur > 1)
		return true;
	fd = open("/proc/sys/kernel/core_pattern", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (read(fd, &first, 1) != 1)
		first = 0;
	close(fd);
	return first == '|' && !(getrlimit(RLIMIT_CORE, &lim) == 0 && lim.rlim_cur == 1);
}

/*
 * A signal for the whole process after RESTORE_S seconds: the first of
 * the set at its default action now (defaults() put back the ones this
 * handler had; the program may have its own for some), which dumps
 * core, or SIGKILL if the program handles them all.  Unblocked in this
 * thread in case no other thread takes it.  The raw system calls:
 * glibc's timer_create is not safe in a signal handler.
 */
static void arm_watchdog(void)
{
	struct sigevent ev = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGKILL };
	struct itimerspec when = { .it_value = { .tv_sec = RESTORE_S } };
	sigset_t one;
	int timer;

	for (size_t i = 0; i < NR_CORE_SIGNALS && ev.sigev_signo == SIGKILL; i++) {
		struct sigaction cur;

		if (sigaction(core_signals[i], NULL, &cur) == 0 && is_default(&cur))
			ev.sigev_signo = core_signals[i];
	}
	sigemptyset(&one);
	sigaddset(&one, ev.sigev_signo);
	pthread_sigmask(SIG_UNBLOCK, &one, NULL);
	if (syscall(SYS_timer_create, CLOCK_MONOTONIC, &ev, &timer) == 0)
		syscall(SYS_timer_settime, timer, 0, &when, NULL);
}

static void core_signal(int sig, siginfo_t *si, void *ctx)
{
	int saved = errno;

	(void)ctx;
	defaults();
	if (core_wanted()) {
		long back;

		arm_watchdog();
		back = cgm_spill_restore_for_core();
		if (back >= 0)
			cgm_log("spill: signal %d (%s): %ld spilled pages brought back for the core dump",
				sig, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?", back);
	}
	/*
	 * A fault comes again when the handler returns, now to the default
	 * action, with its own address and registers in the core.  A signal
	 * that was sent (or a trap, which does not repeat) is sent again,
	 * to this thread: pending until the handler returns.
	 */
	if (!(si && si->si_code > 0 &&
	      (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE)))
		syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), sig);
	errno = saved;
}

void cgm_core_dump_watch(void)
{
	struct sigaction sa = { .sa_sigaction = core_signal, .sa_flags = SA_SIGINFO | SA_ONSTACK };

	if (watching)
		return;
	watching = true;
	sigfillset(&sa.sa_mask);
	for (size_t i = 0; i < NR_CORE_SIGNALS; i++) {
		struct sigaction old;

		if (sigaction(core_signals[i], NULL, &old) != 0 || !is_default(&old))
			continue;
		/* The program installed one in between: its handler goes back. */
		if (sigaction(core_signals[i], &sa, &old) == 0 && !is_default(&old))
			sigaction(core_signals[i], &old, NULL);
	}
}
