/*
 * pthread_create, wrapped so that a new thread has its accounting slot
 * before it runs a line of its own code.
 *
 * Without it a thread gets its slot at its first malloc; a thread that
 * only frees (a consumer handed blocks by others) would count its frees
 * in the shared boot slot, where they are lost.  The wrapper's argument
 * block comes from mimalloc directly (not from the accounted malloc), and
 * threads started some other way (raw clone) still fall back to the
 * first-malloc path.
 */
#include <dlfcn.h>
#include <errno.h>
#include <mimalloc.h>
#include <pthread.h>

#include "cgm/accounted.h"
#include "cgm/shim.h"
#include "cgm/compiler.h"

typedef int (*pthread_create_fn)(pthread_t *, const pthread_attr_t *,
				 void *(*)(void *), void *);

static pthread_create_fn real_pthread_create;

struct thread_start {
	void *(*fn)(void *);
	void *arg;
};

static void *thread_trampoline(void *p)
{
	struct thread_start ts = *(struct thread_start *)p;

	mi_free(p);
	if (static_key_enabled(&cgm_accounting_key))
		cgm_thread_register();
	return cgm_thread_run(ts.fn, ts.arg);
}

/* Found in the constructor: dlsym may allocate, which is fine there. */
void cgm_thread_start_init(void)
{
	real_pthread_create = (pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create");
}

/*
 * The library's threads start where its reclaim needs them, often at
 * memory.max: what glibc allocates for one (its TLS vector, with calloc)
 * is charged past the limits, as the loader's allocations are
 * (shim/lazy_libs.c).  Refused there, the calloc failed the handler's
 * creation and spilling was off for good, and for the background
 * reclaim's it reclaimed, which asked for that thread again, until the
 * stack ran out (a process exec'd at memory.max).
 */
int cgm_pthread_create_raw(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
			   void *arg)
{
	unsigned char was;
	int err;

	if (!real_pthread_create)
		return EAGAIN;
	was = cgm_charge_nofail_begin();
	err = real_pthread_create(th, attr, fn, arg);
	cgm_charge_nofail_end(was);
	return err;
}

CGM_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr,
			      void *(*fn)(void *), void *arg)
{
	struct thread_start *ts;
	int err;

	if (!real_pthread_create)
		real_pthread_create = (pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create");
	if (!real_pthread_create)
		return EAGAIN;
	if (!static_key_enabled(&cgm_accounting_key))
		return real_pthread_create(th, attr, fn, arg);
	ts = mi_malloc(sizeof(*ts));
	if (!ts)
		return EAGAIN;
	ts->fn = fn;
	ts->arg = arg;
	err = real_pthread_create(th, attr, thread_trampoline, ts);
	if (err)
		mi_free(ts);
	return err;
}
