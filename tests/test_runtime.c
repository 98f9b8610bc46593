/*
 * The shim in the awkward places of a real process: calls from dlsym() and
 * dlerror(), from thread start-up and thread-exit destructors, in a forked
 * child of a multithreaded parent, in a signal handler the program has made
 * safe, through dlopen()ed code, and before the shim's own constructor.
 *
 * The binary is linked against libcgmalloc.so and is run as
 *   LD_PRELOAD=libcgmalloc.so:libearly.so test_runtime
 * so that tests/libearly.c's constructor runs before the shim's (see the
 * last test).  DLALLOC_PATH names tests/libdlalloc.so.
 */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <mimalloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgmalloc.h"
#include "libearly.h"
#include "check_run.h"

#ifndef DLALLOC_PATH
#error "DLALLOC_PATH must name libdlalloc.so"
#endif

/*
 * malloc through a pointer the compiler cannot see through: clang removes a
 * malloc whose block is only written and freed, and the call must happen.
 */
static void *(*volatile opaque_malloc)(size_t) = malloc;

/* Content checks count mismatches in plain loops and assert once. */
static size_t count_not(const void *p, size_t n, unsigned char v)
{
	const unsigned char *c = p;
	size_t bad = 0;

	for (size_t i = 0; i < n; i++)
		bad += c[i] != v;
	return bad;
}

/* malloc @n bytes filled with @v; NULL only if malloc failed. */
static unsigned char *filled(size_t n, unsigned char v)
{
	unsigned char *p = opaque_malloc(n);

	if (p)
		memset(p, v, n);
	return p;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * Wait for a forked child for at most @timeout_s seconds; a child that
 * hangs (a lock inherited held) is killed.  Returns its wait status, or -1
 * on a timeout.
 */
static int wait_child(pid_t pid, int timeout_s)
{
	int status;

	for (int ms = 0; ms < timeout_s * 1000; ms += 5) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return status;
		if (r < 0)
			return -1;
		sleep_ms(5);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

START_TEST(test_shim_active)
{
	void *(*volatile mallocp)(size_t) = malloc;
	Dl_info info = { 0 };
	void *p = mallocp(100);

	ck_assert_int_eq(cgm_initialized(), 1);
	ck_assert_msg(dladdr((void *)mallocp, &info) && info.dli_fname &&
		      strstr(info.dli_fname, "libcgmalloc"),
		      "malloc is bound to %s, not libcgmalloc.so",
		      info.dli_fname ? info.dli_fname : "?");
	ck_assert(mi_is_in_heap_region(p));
	free(p);
}
END_TEST

/* ---- dlsym and dlerror allocate inside the dynamic loader ---- */

static void *dl_errors(void *arg)
{
	uintptr_t bad = 0;
	char name[64];

	(void)arg;
	for (int i = 0; i < 500; i++) {
		const char *msg;

		snprintf(name, sizeof(name), "cgm_no_such_symbol_%d", i);
		if (dlsym(RTLD_DEFAULT, name) != NULL)
			bad++;
		/* The message is built with malloc and freed by the next call. */
		msg = dlerror();
		if (!msg || !strstr(msg, name))
			bad++;
		if (dlerror() != NULL)
			bad++;
		if (dlopen("/nonexistent/cgm/libnothing.so", RTLD_NOW) != NULL)
			bad++;
		msg = dlerror();
		if (!msg || !strstr(msg, "libnothing"))
			bad++;
		if (dlsym(RTLD_DEFAULT, "malloc") == NULL)
			bad++;
	}
	return (void *)bad;
}

START_TEST(test_dlsym_dlerror)
{
	pthread_t t[4];
	uintptr_t bad = (uintptr_t)dl_errors(NULL);

	/* Each new thread's first dlerror() allocates its own buffer. */
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, dl_errors, NULL), 0);
	for (int i = 0; i < 4; i++) {
		void *r;

		pthread_join(t[i], &r);
		bad += (uintptr_t)r;
	}
	ck_assert_uint_eq(bad, 0);
}
END_TEST

/* ---- thread start and exit ---- */

#define TH_BLOCK 200

static pthread_key_t key_first, key_second, key_tls;
static __thread unsigned char *tls_block;	/* freed by key_tls's destructor */
static atomic_int dtor_first, dtor_second, dtor_tls, th_errors, detached_done;

/* Runs at thread exit: checks and frees, allocates, and sets another key. */
static void first_dtor(void *v)
{
	unsigned char *again;

	if (count_not(v, TH_BLOCK, 0x11))
		th_errors++;
	free(v);
	/* A value set here makes glibc run the destructors another round. */
	again = filled(TH_BLOCK, 0x22);
	if (!again || pthread_setspecific(key_second, again) != 0)
		th_errors++;
	dtor_first++;
}

static void second_dtor(void *v)
{
	void *tmp;

	if (count_not(v, TH_BLOCK, 0x22))
		th_errors++;
	free(v);
	tmp = opaque_malloc(100000);	/* malloc and free while the thread is going away */
	if (!tmp)
		th_errors++;
	free(tmp);
	dtor_second++;
}

/* The thread_local-with-a-destructor pattern of C: a __thread pointer freed
 * by a key destructor. */
static void tls_dtor(void *v)
{
	if (v != tls_block || count_not(tls_block, 3000, 0x33))
		th_errors++;
	free(tls_block);
	tls_block = NULL;
	dtor_tls++;
}

struct handoff {
	unsigned char *to_main[8];	/* allocated by the thread, freed by main */
	unsigned char *from_main;	/* allocated by main, freed by the thread */
};

static void *thread_life(void *arg)
{
	struct handoff *h = arg;

	if (count_not(h->from_main, 5000, 0x44))
		th_errors++;
	free(h->from_main);
	for (int i = 0; i < 8; i++)
		h->to_main[i] = filled((size_t)64 << i, (unsigned char)i);
	tls_block = filled(3000, 0x33);
	if (pthread_setspecific(key_first, filled(TH_BLOCK, 0x11)) ||
	    pthread_setspecific(key_tls, tls_block))
		th_errors++;
	return NULL;
}

static void *detached_life(void *arg)
{
	thread_life(arg);
	free(arg);		/* the struct main allocated, freed here */
	detached_done++;
	return NULL;
}

START_TEST(test_thread_start_and_exit)
{
	enum { ROUNDS = 8, BATCH = 16, DETACHED = 64 };
	struct handoff h[BATCH];
	pthread_attr_t attr;
	size_t bad = 0;

	ck_assert_int_eq(pthread_key_create(&key_first, first_dtor), 0);
	ck_assert_int_eq(pthread_key_create(&key_second, second_dtor), 0);
	ck_assert_int_eq(pthread_key_create(&key_tls, tls_dtor), 0);

	for (int r = 0; r < ROUNDS; r++) {
		pthread_t t[BATCH];

		for (int i = 0; i < BATCH; i++) {
			h[i].from_main = filled(5000, 0x44);
			ck_assert_int_eq(pthread_create(&t[i], NULL, thread_life, &h[i]), 0);
		}
		for (int i = 0; i < BATCH; i++)
			pthread_join(t[i], NULL);
		/* The threads are gone; their blocks are freed here. */
		for (int i = 0; i < BATCH; i++)
			for (int k = 0; k < 8; k++) {
				bad += count_not(h[i].to_main[k], (size_t)64 << k, (unsigned char)k);
				free(h[i].to_main[k]);
			}
	}

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (int i = 0; i < DETACHED; i++) {
		struct handoff *d = malloc(sizeof(*d));

		ck_assert_ptr_nonnull(d);
		d->from_main = filled(5000, 0x44);
		ck_assert_int_eq(pthread_create(&(pthread_t){ 0 }, &attr, detached_life, d), 0);
	}
	pthread_attr_destroy(&attr);
	for (int ms = 0; ms < 20000 && (detached_done < DETACHED ||
					dtor_tls < ROUNDS * BATCH + DETACHED); ms += 5)
		sleep_ms(5);

	ck_assert_uint_eq(bad, 0);
	ck_assert_int_eq(th_errors, 0);
	ck_assert_int_eq(detached_done, DETACHED);
	ck_assert_int_eq(dtor_first, ROUNDS * BATCH + DETACHED);
	ck_assert_int_eq(dtor_tls, ROUNDS * BATCH + DETACHED);
	/* A detached thread may still be in its last destructor round. */
	for (int ms = 0; ms < 5000 && dtor_second < ROUNDS * BATCH + DETACHED; ms += 5)
		sleep_ms(5);
	ck_assert_int_eq(dtor_second, ROUNDS * BATCH + DETACHED);
}
END_TEST

/* ---- fork from a multithreaded parent ---- */

static atomic_int busy_stop;
static atomic_int atfork_calls;

/* Allocate, check and free in a loop until told to stop. */
static void *busy(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	unsigned char *keep[64] = { 0 };
	size_t size[64] = { 0 };
	uintptr_t bad = 0;

	while (!busy_stop) {
		unsigned i = (seed = seed * 1103515245u + 12345u) >> 16 & 63;

		if (keep[i]) {
			bad += count_not(keep[i], size[i], (unsigned char)i);
			free(keep[i]);
		}
		/* Mostly small; one in eight up to 300 KB (mimalloc's large pages). */
		size[i] = (seed >> 4) % 8 == 0 ? seed % 300000 + 1 : seed % 500 + 1;
		keep[i] = filled(size[i], (unsigned char)i);
		if (!keep[i])
			bad++;
	}
	for (int i = 0; i < 64; i++)
		free(keep[i]);
	return (void *)bad;
}

/* Handlers that allocate: they run around fork(), inside glibc's fork. */
static void atfork_alloc(void)
{
	void *p = opaque_malloc(777);

	if (p)
		memset(p, 1, 777);
	free(p);
	atfork_calls++;
}

static void *child_thread(void *arg)
{
	size_t bad = 0;

	(void)arg;
	for (int i = 0; i < 2000; i++) {
		unsigned char *p = filled((size_t)(i % 97) * 31 + 1, (unsigned char)i);

		bad += count_not(p, (size_t)(i % 97) * 31 + 1, (unsigned char)i);
		free(p);
	}
	return (void *)bad;
}

/* In the child: the parent's blocks are intact and freeable; new ones work. */
static int child_work(unsigned char **pre, size_t npre)
{
	unsigned char *mine[256];
	pthread_t t;
	void *tbad = (void *)1;
	size_t bad = 0;

	for (size_t i = 0; i < npre; i++) {
		bad += count_not(pre[i], i * 1000 + 1, (unsigned char)(i + 1));
		free(pre[i]);
	}
	for (int r = 0; r < 4; r++) {
		for (int i = 0; i < 256; i++)
			mine[i] = filled((size_t)i * (r + 1) * 9 + 1, (unsigned char)(i ^ r));
		for (int i = 0; i < 256; i++) {
			bad += count_not(mine[i], (size_t)i * (r + 1) * 9 + 1,
					 (unsigned char)(i ^ r));
			mine[i] = realloc(mine[i], 4096);
			if (!mine[i])
				return 1;
			free(mine[i]);
		}
	}
	if (pthread_create(&t, NULL, child_thread, NULL) != 0 || pthread_join(t, &tbad) != 0)
		return 1;
	return bad != 0 || tbad != NULL;
}

START_TEST(test_fork_multithreaded)
{
	enum { THREADS = 4, FORKS = 30, PRE = 16 };
	pthread_t t[THREADS];
	unsigned char *pre[PRE];
	uintptr_t bad = 0;

	ck_assert_int_eq(pthread_atfork(atfork_alloc, atfork_alloc, atfork_alloc), 0);
	for (int i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, busy, (void *)(uintptr_t)(i + 1)), 0);
	for (int f = 0; f < FORKS; f++) {
		pid_t pid;
		int status;

		for (size_t i = 0; i < PRE; i++)
			pre[i] = filled(i * 1000 + 1, (unsigned char)(i + 1));
		sleep_ms(2);	/* the busy threads are mid-malloc somewhere */
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0)
			_exit(child_work(pre, PRE));
		status = wait_child(pid, 60);
		ck_assert_msg(status != -1, "fork %d: child hung (lock held across fork?)", f);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			      "fork %d: child status %#x", f, status);
		/* The parent's copies are untouched by the child. */
		for (size_t i = 0; i < PRE; i++) {
			bad += count_not(pre[i], i * 1000 + 1, (unsigned char)(i + 1));
			free(pre[i]);
		}
	}
	busy_stop = 1;
	for (int i = 0; i < THREADS; i++) {
		void *r;

		pthread_join(t[i], &r);
		bad += (uintptr_t)r;
	}
	ck_assert_uint_eq(bad, 0);
	/* prepare and parent handlers in the parent, FORKS times each. */
	ck_assert_int_eq(atfork_calls, 2 * FORKS);
}
END_TEST

/* ---- a signal handler the program has made safe ---- */

#define SIG_ROUNDS 300

static atomic_int sig_handled, sig_errors;

static void alloc_handler(int sig)
{
	int saved = errno;
	int round = sig_handled;
	size_t n = round % 10 == 0 ? (size_t)3 << 20 : (size_t)(round * 37 % 5000) + 1;
	unsigned char *p = filled(n, (unsigned char)round);
	unsigned char *z = calloc(64, 16);

	(void)sig;
	if (!p || !z || count_not(p, n, (unsigned char)round) || count_not(z, 1024, 0)) {
		sig_errors++;
	} else {
		p = realloc(p, n * 2);
		if (!p || count_not(p, n, (unsigned char)round))
			sig_errors++;
	}
	free(p);
	free(z);
	sig_handled++;
	errno = saved;
}

struct sender {
	pthread_t target;
	int sig;
};

/* Sends one signal per round, each once the previous one was handled. */
static void *signal_sender(void *arg)
{
	struct sender *s = arg;

	for (int sent = 0; sent < SIG_ROUNDS; sent++) {
		void *churn = opaque_malloc((size_t)sent * 11 + 1);	/* this thread allocates too */

		free(churn);
		for (int ms = 0; sig_handled < sent && ms < 10000; ms++)
			sleep_ms(1);
		pthread_kill(s->target, s->sig);
	}
	return NULL;
}

START_TEST(test_signal_handler)
{
	struct sigaction sa = { 0 };
	sigset_t block, during;
	struct sender s = { pthread_self(), SIGUSR1 };
	pthread_t t;
	size_t bad = 0;

	sa.sa_handler = alloc_handler;
	sigemptyset(&sa.sa_mask);
	ck_assert_int_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	/* The program's own malloc calls run with the signal blocked ... */
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	ck_assert_int_eq(pthread_sigmask(SIG_BLOCK, &block, &during), 0);
	sigdelset(&during, SIGUSR1);
	ck_assert_int_eq(pthread_create(&t, NULL, signal_sender, &s), 0);

	for (int r = 0; r < SIG_ROUNDS; r++) {
		unsigned char *p = filled((size_t)r * 101 + 1, 0x77);

		bad += count_not(p, (size_t)r * 101 + 1, 0x77);
		free(p);
		/* ... and the handler runs only while main waits in sigsuspend. */
		while (sig_handled <= r)
			sigsuspend(&during);
	}
	pthread_join(t, NULL);
	ck_assert_uint_eq(bad, 0);
	ck_assert_int_eq(sig_errors, 0);
	ck_assert_int_eq(sig_handled, SIG_ROUNDS);
}
END_TEST

/* ---- code in a dlopen()ed library ---- */

struct dlalloc {
	void *handle;
	int (*table_ok)(void);
	void *(*alloc)(size_t, unsigned char);
	size_t (*count_bad)(const void *, size_t, unsigned char);
	void (*free)(void *);
	void *(*grow)(void *, size_t, size_t, unsigned char);
	size_t (*tls_touch)(unsigned char);
};

static void dlalloc_open(struct dlalloc *d)
{
	d->handle = dlopen(DLALLOC_PATH, RTLD_NOW | RTLD_LOCAL);
	ck_assert_msg(d->handle, "dlopen: %s", dlerror());
	d->table_ok = (int (*)(void))dlsym(d->handle, "dl_table_ok");
	d->alloc = (void *(*)(size_t, unsigned char))dlsym(d->handle, "dl_alloc");
	d->count_bad = (size_t (*)(const void *, size_t, unsigned char))
		dlsym(d->handle, "dl_count_bad");
	d->free = (void (*)(void *))dlsym(d->handle, "dl_free");
	d->grow = (void *(*)(void *, size_t, size_t, unsigned char))dlsym(d->handle, "dl_grow");
	d->tls_touch = (size_t (*)(unsigned char))dlsym(d->handle, "dl_tls_touch");
	ck_assert(d->table_ok && d->alloc && d->count_bad && d->free && d->grow &&
		  d->tls_touch);
}

static struct dlalloc *tls_lib;

static void *tls_user(void *arg)
{
	uintptr_t bad = 0;

	for (int i = 0; i < 20; i++)
		bad += tls_lib->tls_touch((unsigned char)((uintptr_t)arg + (unsigned)i));
	return (void *)bad;	/* the dynamic TLS block is freed as the thread exits */
}

START_TEST(test_dlopen_library)
{
	enum { N = 64, CYCLES = 6 };
	unsigned char *from_lib[N], *survivors[N] = { 0 };
	size_t bad = 0, lib_bad = 0;
	struct dlalloc d;

	for (int c = 0; c < CYCLES; c++) {
		pthread_t t[4];

		dlalloc_open(&d);
		ck_assert_msg(d.table_ok(), "cycle %d: constructor's table", c);
		/* Survivors of the previous cycle outlived a dlclose. */
		for (int i = 0; i < N; i++) {
			if (survivors[i])
				bad += count_not(survivors[i], (size_t)i * 300 + 1, (unsigned char)i);
			free(survivors[i]);
		}
		for (int i = 0; i < N; i++) {
			from_lib[i] = d.alloc((size_t)i * 300 + 1, (unsigned char)i);
			ck_assert_ptr_nonnull(from_lib[i]);
			ck_assert(mi_is_in_heap_region(from_lib[i]));
		}
		/* Program-allocated, checked and grown and freed by the library. */
		for (int i = 0; i < N; i++) {
			unsigned char *p = filled((size_t)i * 7 + 1, 0x5c);

			p = d.grow(p, (size_t)i * 7 + 1, (size_t)i * 700 + 10, 0x5c);
			ck_assert_ptr_nonnull(p);
			lib_bad += d.count_bad(p, (size_t)i * 700 + 10, 0x5c);
			d.free(p);
		}
		/* Library-allocated: half freed by the program, half kept. */
		for (int i = 0; i < N; i++) {
			bad += count_not(from_lib[i], (size_t)i * 300 + 1, (unsigned char)i);
			if (i % 2)
				free(from_lib[i]);
			survivors[i] = i % 2 ? NULL : from_lib[i];
		}
		tls_lib = &d;
		for (int i = 0; i < 4; i++)
			ck_assert_int_eq(pthread_create(&t[i], NULL, tls_user, (void *)(uintptr_t)i), 0);
		for (int i = 0; i < 4; i++) {
			void *r;

			pthread_join(t[i], &r);
			lib_bad += (uintptr_t)r;
		}
		lib_bad += d.tls_touch(9);
		ck_assert_int_eq(dlclose(d.handle), 0);
	}
	for (int i = 0; i < N; i++) {
		if (survivors[i])
			bad += count_not(survivors[i], (size_t)i * 300 + 1, (unsigned char)i);
		free(survivors[i]);
	}
	ck_assert_uint_eq(bad, 0);
	ck_assert_uint_eq(lib_bad, 0);
}
END_TEST

/* ---- calls that arrived before the shim's constructor ---- */

START_TEST(test_before_constructor)
{
	const struct early_report *(*get)(void) =
		(const struct early_report *(*)(void))dlsym(RTLD_DEFAULT, "cgm_test_early_report");
	const struct early_report *r;
	size_t bad = 0;

	ck_assert_msg(get, "libearly.so is not loaded: run with "
		      "LD_PRELOAD=libcgmalloc.so:libearly.so");
	r = get();
	ck_assert_msg(r->initialized == 0,
		      "libearly's constructor saw cgm_initialized() = %d, not 0: it did "
		      "not run before the shim's", r->initialized);
	ck_assert_msg(r->errors == 0, "%d errors in the early constructor, first: %s",
		      r->errors, r->first_error);
	ck_assert_int_eq(r->huge_malloc_errno, ENOMEM);
	ck_assert_int_eq(r->thread_ok, 1);
	ck_assert_int_ge(r->nblocks, 10);
	for (int i = 0; i < r->nblocks; i++) {
		const struct early_block *b = &r->blocks[i];

		ck_assert_msg(mi_is_in_heap_region(b->ptr), "%s: not mimalloc memory", b->how);
		ck_assert_msg(malloc_usable_size(b->ptr) >= b->size,
			      "%s: usable size %zu < %zu", b->how,
			      malloc_usable_size(b->ptr), b->size);
		if (b->align)
			ck_assert_msg(((uintptr_t)b->ptr & (b->align - 1)) == 0,
				      "%s: %p not aligned to %zu", b->how, b->ptr, b->align);
		bad += count_not(b->ptr, b->size, b->fill);
	}
	ck_assert_uint_eq(bad, 0);
	/* Resizing and freeing them now goes through the initialised shim. */
	for (int i = 0; i < r->nblocks; i++) {
		const struct early_block *b = &r->blocks[i];
		unsigned char *p = realloc(b->ptr, b->size + 4096);

		ck_assert_ptr_nonnull(p);
		bad += count_not(p, b->size, b->fill);
		free(p);
	}
	ck_assert_uint_eq(bad, 0);
}
END_TEST

static Suite *runtime_suite(void)
{
	Suite *s = suite_create("runtime");
	TCase *tc = tcase_create("contexts");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_shim_active);
	tcase_add_test(tc, test_dlsym_dlerror);
	tcase_add_test(tc, test_thread_start_and_exit);
	tcase_add_test(tc, test_fork_multithreaded);
	tcase_add_test(tc, test_signal_handler);
	tcase_add_test(tc, test_dlopen_library);
	tcase_add_test(tc, test_before_constructor);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(runtime_suite());
}
