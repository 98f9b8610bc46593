/*
 * The accounting watcher: one thread per accounted process that learns of
 * what other processes change in the shared hierarchy.
 *
 * cgmctl (or another process) bumps the hierarchy's epoch futex when it
 * sets a limit, asks for a move or wants fresh statistics.  The watcher
 * wakes, switches this process's limits key, carries out a move of this
 * process, and every 2 s harvests this
 * process's frees and flushes statistics (readers flush for themselves;
 * this bounds the age of what the exit report and limits see).  It never
 * allocates and has every signal blocked.
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgm/accounted.h"
#include "cgm/shim.h"
#include "cgm/clock.h"
#include "cgm/log.h"

#define FLUSH_PERIOD_NS 2000000000LL

static volatile int watcher_stop;

/* Bring the limits key in line with the hierarchy. */
void cgm_watch_limits(void)
{
	struct cgm_proc *p = hier_proc(&cgm_acct.h, cgm_acct.proc);
	bool limited = p && group_limited(&cgm_acct.h, p->group);

	if (limited && !static_key_enabled(&cgm_limits_key))
		static_branch_enable(&cgm_limits_key);
	else if (!limited && static_key_enabled(&cgm_limits_key))
		static_branch_disable(&cgm_limits_key);
}

static void watch_move(void)
{
	struct cgm_proc *p = hier_proc(&cgm_acct.h, cgm_acct.proc);
	uint32_t to = p ? __atomic_load_n(&p->move_to, __ATOMIC_ACQUIRE) : CGM_NONE;
	int err;

	if (to == CGM_NONE)
		return;
	err = cgm_move_self(to);
	if (err)
		cgm_log("accounting: move to another group refused: %s",
			err == -ENOMEM ? "the destination's memory.max is too small" : "no such group");
	__atomic_store_n(&p->move_to, CGM_NONE, __ATOMIC_RELEASE);
	cgm_watch_limits();
}

static void *watcher_main(void *arg)
{
	struct cgm_hier_header *hdr = cgm_acct.h.hdr;
	int64_t next_flush = cgm_now_ns() + FLUSH_PERIOD_NS;

	(void)arg;
	prctl(PR_SET_NAME, "cgm-watcher");
	while (!watcher_stop && cgm_acct.proc != CGM_NONE) {
		uint32_t epoch = __atomic_load_n(&hdr->epoch, __ATOMIC_ACQUIRE);
		int64_t left = next_flush - cgm_now_ns();
		struct timespec ts;

		if (left > 0) {
			ts.tv_sec = (time_t)(left / 1000000000);
			ts.tv_nsec = (long)(left % 1000000000);
			syscall(SYS_futex, &hdr->epoch, FUTEX_WAIT, epoch, &ts, NULL, 0);
		}
		if (watcher_stop || cgm_acct.proc == CGM_NONE)
			break;
		cgm_watch_limits();
		watch_move();
		/* Readers flush for themselves; this bounds the age of what they see. */
		if (cgm_now_ns() >= next_flush) {
			acct_harvest(&cgm_acct.h, cgm_acct.proc);
			rstat_flush(&cgm_acct.h);
			next_flush = cgm_now_ns() + FLUSH_PERIOD_NS;
		}
	}
	return NULL;
}

void cgm_watcher_start(void)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t th;

	watcher_stop = 0;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	if (cgm_pthread_create_unaccounted(&th, &attr, watcher_main, NULL) != 0)
		cgm_log("accounting: cannot start the watcher thread; limits and moves "
			"set by other processes are seen only at start-up");
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void cgm_watcher_stop(void)
{
	watcher_stop = 1;
	if (cgm_acct.h.hdr)
		hier_bump_epoch(&cgm_acct.h);
}
