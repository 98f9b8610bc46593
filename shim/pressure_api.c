/*
 * memory.pressure triggers and vmpressure listeners through the C API
 * (include/cgmalloc.h): each is an eventfd that becomes readable when it
 * fires.  A watcher
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
	bool armed;			/* false: a free slot */
	int fd;
	uint32_t group;
	int vmp_level;			/* a vmpressure listener of this level, or -1 (PSI) */
	uint64_t vmp_seen;		/* its events already told */
	struct psi_trigger t;
};

#define VMP_POLL_NS	(50 * 1000000LL)

/*
 * All zero, all free, among the big buffers of the bss (CGM_BIG_BSS):
 * untouched until a trigger is armed.  With its fds at -1 it was 3.8 KiB
 * of initialised data, a page of .data that fault-around maps into every
 * process.
 */
CGM_BIG_BSS static struct api_trigger triggers[MAX_TRIGGERS];
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

			if (!a->armed)
				continue;
			if (!hier_group(&cgm_acct.h, a->group))
				continue;	/* the group is gone: nothing more fires */
			if (a->vmp_level >= 0) {
				uint64_t n = vmpressure_events(&cgm_acct.h, a->group, a->vmp_level);

				if (n != a->vmp_seen)
					eventfd_write(a->fd, n - a->vmp_seen);
				a->vmp_seen = n;
				if (VMP_POLL_NS < period)
					period = VMP_POLL_NS;
				continue;
			}
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
		triggers[i].armed = false;	/* the fds stay the parent's copies; nothing writes them */
}

/* Arm @a (its fd not set yet) in a free slot, starting the watcher: the fd, or a negative errno. */
static int arm(struct api_trigger *a)
{
	int slot = -1, fd, err;

	fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fd < 0)
		return -errno;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_TRIGGERS && slot < 0; i++)
		if (!triggers[i].armed)
			slot = i;
	if (slot < 0) {
		pthread_mutex_unlock(&lock);
		close(fd);
		return -ENOSPC;
	}
	triggers[slot] = *a;
	triggers[slot].fd = fd;
	triggers[slot].armed = true;
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
			triggers[slot].armed = false;
			pthread_mutex_unlock(&lock);
			close(fd);
			return -err;
		}
		watching = true;
	}
	pthread_mutex_unlock(&lock);
	return fd;
}

CGM_EXPORT int cgm_pressure_trigger(const char *group, const char *spec)
{
	struct api_trigger a = { .vmp_level = -1 };
	char why[160];
	int64_t idx;

	if (!spec || psi_trigger_parse(spec, &a.t, why, sizeof(why)) < 0)
		return -EINVAL;
	idx = cgm_group_index(group);
	if (idx < 0)
		return (int)idx;
	a.group = (uint32_t)idx;
	return arm(&a);
}

CGM_EXPORT int cgm_vmpressure_listen(const char *group, const char *level)
{
	struct api_trigger a;
	int64_t idx;
	int fd;

	a = (struct api_trigger){ .vmp_level = vmpressure_parse_level(level) };
	if (a.vmp_level < 0)
		return -EINVAL;
	idx = cgm_group_index(group);
	if (idx < 0)
		return (int)idx;
	a.group = (uint32_t)idx;
	a.vmp_seen = vmpressure_events(&cgm_acct.h, a.group, a.vmp_level);
	/* Listening turns the computing on, in every process (at its next slow path). */
	vmpressure_listen(&cgm_acct.h, a.group, true);
	fd = arm(&a);
	if (fd < 0)
		vmpressure_listen(&cgm_acct.h, a.group, false);
	else
		cgm_sync_limits();
	return fd;
}

CGM_EXPORT int cgm_pressure_trigger_close(int fd)
{
	int found = -EBADF;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_TRIGGERS; i++)
		if (triggers[i].armed && triggers[i].fd == fd) {
			triggers[i].armed = false;
			if (triggers[i].vmp_level >= 0)
				vmpressure_listen(&cgm_acct.h, triggers[i].group, false);
			found = 0;
		}
	pthread_mutex_unlock(&lock);
	if (!found)
		close(fd);
	return found;
}
