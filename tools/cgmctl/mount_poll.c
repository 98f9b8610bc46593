/*
 * poll() on the files of cgmctl mount, as cgroupfs answers it.
 *
 * cgroupfs's files are kernfs files: an open file counts as changed until
 * it is first read, and afterwards whenever the kernel notified the file
 * (kernfs_notify) since the open file's last read; a change polls as
 * POLLPRI|POLLERR, and the poller sees the new text by reading from
 * offset 0 again.  The kernel notifies memory.events, memory.events.local
 * and cgroup.events; here nothing tells the mount when the hierarchy
 * changes, so the loop renders each polled file of those every
 * MOUNT_NOTIFY_MS and compares a fingerprint of the text with that of the
 * text the open file last read.  memory.pressure polls as the kernel's
 * cgroup_pressure_poll(): POLLPRI|POLLERR without a trigger, and with the
 * one trigger written to the open file, POLLPRI once for each firing,
 * which the loop looks for every psi_trigger_period_ns().
 *
 * A poller is woken through the handle FUSE gave with its poll request
 * (fuse_notify_poll); woken, it polls again and gets a new handle, so a
 * handle is kept only while the file is not ready, and then replaced by
 * the newer one.  The open files the loop must look at -- a handle kept,
 * a trigger armed -- are on mount_fs.watched.  Everything here runs in
 * the request loop's one thread.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgm/clock.h"
#include "mount.h"

/* How often the loop renders a polled memory.events, memory.events.local, cgroup.events (ms). */
#define MOUNT_NOTIFY_MS 100

/* What poll() always says of a kernfs file (the kernel's DEFAULT_POLLMASK). */
#define READY (POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM)
/* And what it adds for a change. */
#define CHANGED (POLLPRI | POLLERR)

/* The longest text a fingerprint covers: those files' texts are far shorter. */
#define FINGERPRINT_MAX 1024

enum mount_watch_kind mount_watch_kind(const struct cgm_file *f)
{
	/* The files the kernel's cgroup_file_notify() is called for, in memcg and cgroup core. */
	static const char *const notified[] = {
		"memory.events", "memory.events.local", "cgroup.events",
	};

	if (!f)
		return MOUNT_WATCH_NONE;
	if (strcmp(f->name, "memory.pressure") == 0)
		return MOUNT_WATCH_TRIGGER;
	for (size_t i = 0; i < sizeof(notified) / sizeof(notified[0]); i++)
		if (strcmp(f->name, notified[i]) == 0)
			return MOUNT_WATCH_EVENTS;
	return MOUNT_WATCH_NONE;
}

/* FNV-1a of the first FINGERPRINT_MAX bytes of a text of @len bytes, and of @len. */
static uint64_t fingerprint(const char *text, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ len;

	for (size_t i = 0; i < len && i < FINGERPRINT_MAX; i++)
		h = (h ^ (unsigned char)text[i]) * 0x100000001b3ULL;
	return h;
}

/*
 * Does @of's text differ from what its last read rendered?  Rendered as
 * the read renders it (cgm_file_read); a text that cannot be rendered
 * counts as changed: a read will say why.
 */
static bool text_changed(struct mount_fs *m, const struct open_file *of)
{
	char buf[FINGERPRINT_MAX + 1];
	int n = cgm_file_read(&m->c->h, of->n.group, of->n.file->name, buf, sizeof(buf));

	return n < 0 || fingerprint(buf, (size_t)n) != of->w.seen;
}

/* Put @of on the list the loop looks at, or take it off, as it now needs. */
static void watch_update(struct mount_fs *m, struct open_file *of)
{
	struct mount_watch *w = &of->w;
	bool on = w->prev || m->watched == of;
	bool want = w->ph || w->armed;

	if (want && !on) {
		w->prev = NULL;
		w->next = m->watched;
		if (m->watched)
			m->watched->w.prev = of;
		m->watched = of;
	} else if (!want && on) {
		if (w->prev)
			w->prev->w.next = w->next;
		else
			m->watched = w->next;
		if (w->next)
			w->next->w.prev = w->prev;
		w->prev = w->next = NULL;
	}
}

/* Keep @ph as @of's poll handle (NULL: none), in place of the one kept. */
static void keep_handle(struct mount_fs *m, struct open_file *of, struct fuse_pollhandle *ph)
{
	if (of->w.ph)
		fuse_pollhandle_destroy(of->w.ph);
	of->w.ph = ph;
	watch_update(m, of);
}

/* Wake @of's poller, if one waits: it polls again, with a new handle. */
static void notify(struct mount_fs *m, struct open_file *of)
{
	if (!of->w.ph)
		return;
	/* An error means the kernel forgot the file (closed meanwhile): nobody to wake. */
	fuse_notify_poll(of->w.ph);
	keep_handle(m, of, NULL);
}

unsigned int mount_poll(struct mount_fs *m, struct open_file *of, struct fuse_pollhandle *ph)
{
	struct mount_watch *w = &of->w;
	unsigned int revents = READY;

	if (mount_still_there(&m->c->h, &of->n) < 0) {
		revents |= CHANGED;
	} else if (w->kind == MOUNT_WATCH_TRIGGER) {
		/* The firing is taken by the poll that sees it, as psi_trigger_poll() takes t->event. */
		if (!w->armed)
			revents |= CHANGED;
		else if (w->fired)
			revents |= POLLPRI;
		w->fired = false;
	} else if (!w->read || (w->kind == MOUNT_WATCH_EVENTS && text_changed(m, of))) {
		revents |= CHANGED;
	}
	/* A file that never changes after its first read, or an unarmed trigger, needs no handle. */
	if (w->kind == MOUNT_WATCH_NONE || (w->kind == MOUNT_WATCH_TRIGGER && !w->armed)) {
		if (ph)
			fuse_pollhandle_destroy(ph);
		return revents;
	}
	if (ph && !w->ph && w->kind == MOUNT_WATCH_EVENTS)
		w->next_ns = cgm_now_ns() + MOUNT_NOTIFY_MS * 1000000LL;
	if (ph)
		keep_handle(m, of, ph);
	/*
	 * Ready now: another thread polling the same open file, asleep on the
	 * handle kept, may have missed the change until the loop's next look.
	 */
	if (revents & POLLPRI)
		notify(m, of);
	return revents;
}

void mount_poll_read(struct open_file *of)
{
	of->w.read = true;
	if (of->w.kind == MOUNT_WATCH_EVENTS)
		of->w.seen = fingerprint(of->text, of->len);
}

int mount_poll_arm(struct mount_fs *m, struct open_file *of, const char *spec, char *why,
		   size_t whylen)
{
	struct mount_watch *w = &of->w;
	struct psi_trigger t;
	int err;

	if (w->armed) {
		snprintf(why, whylen, "a trigger is armed on this open file already");
		return -EBUSY;
	}
	err = psi_trigger_parse(spec, &t, why, whylen);
	if (err)
		return err;
	w->trig = t;
	w->armed = true;
	w->fired = false;
	/* The first look takes the trigger's first sample: the growth is measured from it. */
	w->next_ns = cgm_now_ns();
	psi_trigger_poll(&m->c->h, of->n.group, &w->trig, w->next_ns);
	w->next_ns += psi_trigger_period_ns(&w->trig);
	watch_update(m, of);
	return 0;
}

void mount_poll_release(struct mount_fs *m, struct open_file *of)
{
	of->w.armed = false;
	keep_handle(m, of, NULL);
}

int64_t mount_poll_next(const struct mount_fs *m)
{
	int64_t next = INT64_MAX;

	for (const struct open_file *of = m->watched; of; of = of->w.next)
		if (of->w.next_ns < next)
			next = of->w.next_ns;
	return next;
}

void mount_poll_tick(struct mount_fs *m, int64_t now)
{
	struct cgm_hier *h = &m->c->h;
	struct open_file *of, *next;

	for (of = m->watched; of; of = next) {
		struct mount_watch *w = &of->w;

		/* notify() may take it off the list. */
		next = w->next;
		if (now < w->next_ns)
			continue;
		if (mount_still_there(h, &of->n) < 0) {
			/* Its poll says POLLPRI|POLLERR now; the trigger's group is no more. */
			w->armed = false;
			notify(m, of);
			watch_update(m, of);
			continue;
		}
		if (w->kind == MOUNT_WATCH_TRIGGER) {
			if (psi_trigger_poll(h, of->n.group, &w->trig, now)) {
				w->fired = true;
				notify(m, of);
			}
			w->next_ns = now + psi_trigger_period_ns(&w->trig);
		} else {
			if (text_changed(m, of))
				notify(m, of);
			w->next_ns = now + MOUNT_NOTIFY_MS * 1000000LL;
		}
	}
}

void mount_poll_end(struct mount_fs *m)
{
	while (m->watched)
		mount_poll_release(m, m->watched);
}
