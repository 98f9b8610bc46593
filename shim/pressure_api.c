/*
 * memory.pressure triggers through the C API (include/cgmalloc.h): each
 * trigger is an eventfd that becomes readable when it fires.  A watcher
 * thread of the process polls the triggers (each at window / 10, as the
 * kernel does); it exists only while the process has triggers -- the
 * feature asked for it -- and is gone in a forked child, whose triggers
 * are not inherited.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "cgm/accounted.h"
#include "cgm/clock.h"
#include "cgm/compiler.h"
#include "cgm/log.h"
#include "cgm/shim.h"
#include "cgmalloc.h"

#define MAX_TRIGGERS 16

struct api_trigger {
	int fd;				/* -1: free slot */
	uint32_t group;
	struct psi_trigger t;
};

static struct api_trigger triggers[MAX_TRIGGERS] = { [0 ... MAX_TRIGGERS - 1] = { .fd = -1 } };
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool watching;
static bool atfork_set;

static void *watch(void *arg)
{
	(void)arg;
	for (;;) {
		int64_t period = INT64_MAX, now = cgm_now_ns();
		struct timespec ts;

		pthread_mutex_lock(&lock);
		for (int i = 0; i < MAX_TRIGGERS; i++) {
			struct api_trigger *a = &triggers[i];

			if (a->fd < 0)
				continue;
			if (!hier_group(&cgm_acct.h, a->group))
				continue;	/* the group is gone: nothing more fires */
			if (psi_trigger_poll(&cgm_acct.h, a->group, &a->t, now))
				eventfd_write(a->fd, 1);
			if (psi_trigger_period_ns(&a->t) < period)
				period = psi_trigger_period_ns(&a->t);
		}
		if (period == INT64_MAX) {
			watching = false;
			pthread_mutex_unlock(&lock);
			return NULL;
		}
		pthread_mutex_unlock(&lock);
		ts = (struct timespec){ (time_t)(period / 1000000000), (long)(period % 1000000000) };
		nanosleep(&ts, NULL);
	}
}

static void forget_in_child(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

	lock = fresh;
	watching = false;
	for (int i = 0; i < MAX_TRIGGERS; i++)
		triggers[i].fd = -1;	/* the fds stay the parent's copies; nothing writes them */
}

CGM_EXPORT int cgm_pressure_trigger(const char *group, const char *spec)
{
	struct psi_trigger t;
	char why[160];
	int64_t idx;
	int slot = -1, fd, err;

	if (!spec || psi_trigger_parse(spec, &t, why, sizeof(why)) < 0)
		return -EINVAL;
	idx = cgm_group_index(group);
	if (idx < 0)
		return (int)idx;
	fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fd < 0)
		return -errno;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_TRIGGERS && slot < 0; i++)
		if (triggers[i].fd < 0)
			slot = i;
	if (slot < 0) {
		pthread_mutex_unlock(&lock);
		close(fd);
		return -ENOSPC;
	}
	triggers[slot] = (struct api_trigger){ .fd = fd, .group = (uint32_t)idx, .t = t };
	if (!watching) {
		pthread_t th;
		pthread_attr_t attr;
		sigset_t all, old;

		if (!atfork_set) {
			pthread_atfork(NULL, NULL, forget_in_child);
			atfork_set = true;
		}
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		/* The watcher takes no signal of the program's. */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		err = pthread_create(&th, &attr, watch, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&attr);
		if (err) {
			triggers[slot].fd = -1;
			pthread_mutex_unlock(&lock);
			close(fd);
			return -err;
		}
		watching = true;
	}
	pthread_mutex_unlock(&lock);
	return fd;
}

CGM_EXPORT int cgm_pressure_trigger_close(int fd)
{
	int found = -EBADF;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_TRIGGERS; i++)
		if (fd >= 0 && triggers[i].fd == fd) {
			triggers[i].fd = -1;
			found = 0;
		}
	pthread_mutex_unlock(&lock);
	if (!found)
		close(fd);
	return found;
}
