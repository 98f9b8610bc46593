/*
 * A model-based random test of spilling (tests/spill/test_spill_model.sh).
 *
 *   spill_model [SEED [OPS [THREADS]]]
 *
 * Run preloaded with spill=1.  THREADS workers (2 by default, at most 4)
 * each own a set of objects -- heap blocks from malloc, calloc and
 * realloc, and anonymous mappings of their own -- and do a random
 * sequence of operations on them: writes of random patterns, reads,
 * realloc, mremap (in place, moving, onto another of their mappings),
 * munmap of the whole or a part, mmap MAP_FIXED over a part,
 * MADV_DONTNEED and MADV_FREE.  Each mapping is kept one mapping of the
 * kernel's (see struct object), so that without spilling every mremap
 * succeeds: one that fails is a failure too.  Worker 0 (the main thread) does OPS of
 * them and, every so often, writes memory.reclaim of its own group, so
 * the pages of every worker get spilled while the others write them; and
 * a few times it forks, with every worker stopped between two operations,
 * and the child checks every object and exits with its status.  The
 * others go on until worker 0 is done.
 *
 * The model is a shadow copy of every object's bytes, in a MAP_SHARED
 * mapping: the library neither tracks nor spills shared mappings, so
 * nothing the test compares with can be wrong for the reason under test.
 * Every read compares with it, and so does a check of every object at the
 * end.  The run must have spilled something (zswpout of the group grew),
 * or it tested nothing.
 *
 * Each worker's sequence depends only on the seed and its number, so a
 * failure names the seed, the worker and its operation number; the
 * interleaving of the workers is the machine's.  Exit 0 if every byte
 * was right, 1 if not (the first wrong byte is described on stderr), 2 if
 * the program cannot run (not preloaded, out of memory).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgmalloc.h"

#define PAGE		4096ul
#define PAGE_UP(x)	(((x) + PAGE - 1) & ~(PAGE - 1))
#define PAGE_DOWN(x)	((x) & ~(PAGE - 1))
#define MIB		(1ul << 20)

#define MAX_WORKERS	4
#define NSLOT		40		/* objects a worker holds at most */
#define SLOT_CAP	(8 * MIB)	/* largest object (the shadow's room per slot) */
#define BUDGET		(24 * MIB)	/* bytes a worker holds at most */
#define HIST		10		/* operations remembered per object */
#define RECLAIM_EVERY	300		/* worker 0's operations between reclaims */
#define FORKS		3		/* forks in a run */

enum kind { NONE, HEAP, MAP };

enum op {
	OP_MALLOC, OP_CALLOC, OP_MMAP, OP_WRITE, OP_READ, OP_CHECK, OP_FREE, OP_MUNMAP,
	OP_REALLOC, OP_MREMAP, OP_MREMAP_FIXED, OP_MREMAPPED_ONTO, OP_DONTNEED, OP_FREE_ADVICE,
	OP_TRIM, OP_SPLIT, OP_MAP_FIXED, OP_FORK, OP_END, NR_OPS
};

static const char *const op_names[NR_OPS] = {
	[OP_MALLOC] = "malloc", [OP_CALLOC] = "calloc", [OP_MMAP] = "mmap",
	[OP_WRITE] = "write", [OP_READ] = "read", [OP_CHECK] = "check",
	[OP_FREE] = "free", [OP_MUNMAP] = "munmap", [OP_REALLOC] = "realloc",
	[OP_MREMAP] = "mremap", [OP_MREMAP_FIXED] = "mremap onto another",
	[OP_MREMAPPED_ONTO] = "mremapped onto (head replaced)",
	[OP_DONTNEED] = "MADV_DONTNEED", [OP_FREE_ADVICE] = "MADV_FREE",
	[OP_TRIM] = "munmap of a part", [OP_SPLIT] = "split by munmap",
	[OP_MAP_FIXED] = "mmap MAP_FIXED over a part", [OP_FORK] = "fork check",
	[OP_END] = "final check",
};

struct event {
	uint64_t op;
	enum op what;
	size_t off, len;
};

struct object {
	enum kind kind;
	unsigned char *p;
	size_t len;
	uint64_t born;			/* the worker's operation that made it */
	/*
	 * A mapping that mremap moved: its pages' offsets no longer follow
	 * its addresses, so the kernel could not merge a MAP_FIXED mapping
	 * into it, and a mapping of several parts is one that mremap
	 * refuses (EFAULT).  Every mapping is kept one part (op_map_fixed):
	 * with spilling off, each mremap succeeds.
	 */
	bool moved;
	struct event hist[HIST];	/* its last operations, a ring */
	unsigned nhist;
};

struct worker {
	int id;
	pthread_t thread;
	/* Held for each operation: a fork takes every worker's, between two. */
	pthread_mutex_t lock;
	uint64_t rng;
	uint64_t op;			/* operations done */
	size_t live;			/* bytes held */
	unsigned char *shadow;		/* NSLOT slots of SLOT_CAP bytes */
	struct object obj[NSLOT];
	uint64_t counts[NR_OPS];
};

/* The model: in a MAP_SHARED mapping, which is never spilled. */
struct model {
	struct worker w[MAX_WORKERS];
};

static struct model *m;
static int nworkers = 2;
static uint64_t seed, ops_arg;
static char group[256];
static const char *who = "parent";
static atomic_bool failed;
static atomic_bool done;
/* What this thread is at, for a crash report: the worker and the object. */
static _Thread_local struct worker *at_worker;
static _Thread_local int at_slot = -1;
/* Worker 0 wants every worker's lock: the others wait before their next operation. */
static atomic_bool fork_pending;

/* ---- messages: write(2) only, a forked child prints them too ---- */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "spill_model: ");
	va_list ap;

	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(STDERR_FILENO, buf, (size_t)n) < 0)
		_exit(2);
}

/* ---- the random sequence ---- */

/* splitmix64: each worker's own sequence, from the seed and its number. */
static uint64_t rnd(struct worker *w)
{
	uint64_t z = (w->rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* 0 .. n-1 (n > 0). */
static size_t below(struct worker *w, size_t n)
{
	return (size_t)(rnd(w) % n);
}

/* A size: small (16 B..1 KiB) half the time, medium (to 128 KiB) or large (to 4 MiB). */
static size_t rand_size(struct worker *w)
{
	size_t r = below(w, 100);

	if (r < 50)
		return 16 + below(w, 1024 - 16 + 1);
	if (r < 85)
		return 1025 + below(w, 128 * 1024 - 1024);
	return 128 * 1024 + 1 + below(w, 4 * MIB - 128 * 1024);
}

/*
 * Random bytes of one of a few kinds into @dst (the shadow): incompressible,
 * one repeated byte (a same-filled page), zeros, a ramp, or words of a
 * small alphabet (compressible text).
 */
static void pattern(struct worker *w, unsigned char *dst, size_t len)
{
	size_t i = 0;

	switch (below(w, 5)) {
	case 0:
		for (; i + 8 <= len; i += 8) {
			uint64_t v = rnd(w);

			memcpy(dst + i, &v, 8);
		}
		for (; i < len; i++)
			dst[i] = (unsigned char)rnd(w);
		break;
	case 1:
		memset(dst, (int)(1 + below(w, 255)), len);
		break;
	case 2:
		memset(dst, 0, len);
		break;
	case 3: {
		unsigned char b = (unsigned char)rnd(w), step = (unsigned char)(1 + below(w, 7));

		for (; i < len; i++)
			dst[i] = (unsigned char)(b + step * i);
		break;
	}
	default: {
		uint64_t v = rnd(w);

		for (; i < len; i++) {
			if (!(i % 11))
				v = rnd(w);
			dst[i] = (unsigned char)("etaoin shrdlu"[(v >> (i % 11 * 4)) % 13]);
		}
		break;
	}
	}
}

/* ---- the model ---- */

static unsigned char *shadow_of(struct worker *w, int slot)
{
	return w->shadow + (size_t)slot * SLOT_CAP;
}

/* The shadow's pages over [@from, @to) are not needed: give them back (shmem). */
static void shadow_drop(struct worker *w, int slot, size_t from, size_t to)
{
	from = PAGE_UP(from);
	to = PAGE_UP(to);
	if (to > from)
		madvise(shadow_of(w, slot) + from, to - from, MADV_REMOVE);
}

static void remember(struct worker *w, int slot, enum op what, size_t off, size_t len)
{
	struct object *o = &w->obj[slot];

	o->hist[o->nhist++ % HIST] = (struct event){ w->op, what, off, len };
	w->counts[what]++;
}

static const char *kind_name(enum kind k)
{
	return k == HEAP ? "heap block" : k == MAP ? "mapping" : "nothing";
}

/* The object's last operations, and how to replay the run. */
static void say_history(const struct object *o)
{
	for (unsigned k = o->nhist > HIST ? o->nhist - HIST : 0; k < o->nhist; k++) {
		const struct event *e = &o->hist[k % HIST];

		say("  op %" PRIu64 ": %s [%zu, +%zu)", e->op, op_names[e->what], e->off, e->len);
	}
	say("  replay: spill_model %" PRIu64 " %" PRIu64 " %d", seed, ops_arg, nworkers);
}

/*
 * Describe a wrong byte: the seed to replay with, the worker, its
 * operation, the object, what the page holds, and the object's last
 * operations.
 */
static void mismatch(struct worker *w, int slot, enum op what, size_t at)
{
	struct object *o = &w->obj[slot];
	unsigned char *sh = shadow_of(w, slot);
	uintptr_t page = PAGE_DOWN((uintptr_t)o->p + at);
	size_t lo = page > (uintptr_t)o->p ? page - (uintptr_t)o->p : 0;
	size_t hi = page + PAGE - (uintptr_t)o->p < o->len ? page + PAGE - (uintptr_t)o->p : o->len;
	size_t zeros = 0, wrong = 0;

	for (size_t i = lo; i < hi; i++) {
		zeros += !o->p[i];
		wrong += o->p[i] != sh[i];
	}
	atomic_store(&failed, true);
	say("FAIL seed %" PRIu64 " worker %d op %" PRIu64 " (%s, %s): object %d, a %s of %zu bytes "
	    "at %p made at op %" PRIu64 ": byte %zu expected 0x%02x, read 0x%02x",
	    seed, w->id, w->op, who, op_names[what], slot, kind_name(o->kind), o->len,
	    (void *)o->p, o->born, at, sh[at], o->p[at]);
	say("  its page, bytes %zu to %zu of the object: %zu wrong, %zu zero", lo, hi, wrong, zeros);
	say_history(o);
}

/* Compare [off, off + len) of the object with the model. */
static bool compare(struct worker *w, int slot, size_t off, size_t len, enum op what)
{
	struct object *o = &w->obj[slot];
	unsigned char *sh = shadow_of(w, slot);

	at_worker = w;
	at_slot = slot;
	if (!memcmp(o->p + off, sh + off, len))
		return true;
	for (size_t i = off; i < off + len; i++)
		if (o->p[i] != sh[i]) {
			mismatch(w, slot, what, i);
			break;
		}
	return false;
}

static bool check_object(struct worker *w, int slot, enum op what)
{
	struct object *o = &w->obj[slot];

	return o->kind == NONE || compare(w, slot, 0, o->len, what);
}

static bool check_worker(struct worker *w, enum op what)
{
	for (int s = 0; s < NSLOT; s++)
		if (!check_object(w, s, what))
			return false;
	return true;
}

static int free_slot(struct worker *w)
{
	for (int s = 0; s < NSLOT; s++)
		if (w->obj[s].kind == NONE)
			return s;
	return -1;
}

/* A random object of @kind other than @not, or -1. */
static int pick(struct worker *w, enum kind kind, int not)
{
	int start = (int)below(w, NSLOT);

	for (int k = 0; k < NSLOT; k++) {
		int s = (start + k) % NSLOT;

		if (s != not && w->obj[s].kind == kind)
			return s;
	}
	return -1;
}

/* A random range of @o: small, medium or to the end. */
static void rand_range(struct worker *w, const struct object *o, size_t *off, size_t *len)
{
	size_t r = below(w, 10);

	*off = below(w, o->len);
	if (r < 5)
		*len = 1 + below(w, 256);
	else if (r < 8)
		*len = 1 + below(w, 64 * 1024);
	else
		*len = o->len - *off;
	if (*len > o->len - *off)
		*len = o->len - *off;
}

/* A random run of whole pages of mapping @o: first page and count. */
static void rand_pages(struct worker *w, const struct object *o, size_t *first, size_t *n)
{
	size_t pages = o->len / PAGE;

	*first = below(w, pages);
	*n = 1 + below(w, pages - *first < 64 ? pages - *first : 64);
}

/*
 * Say which mappings of the kernel's cover [p, p + len) (/proc/self/smaps),
 * with their userfaultfd registrations (VmFlags um: missing pages, uw:
 * write-protect -- the spiller's).
 */
static void say_mappings(const void *p, size_t len)
{
	uintptr_t lo = (uintptr_t)p, hi = lo + len, s, e;
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	bool in = false;

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &s, &e) == 2) {
			in = s < hi && e > lo;
			if (in)
				say("  mapping [%+td, %+td) of it:", (ptrdiff_t)(s - lo), (ptrdiff_t)(e - lo));
		} else if (in && !strncmp(line, "VmFlags:", 8)) {
			line[strcspn(line, "\n")] = '\0';
			say("    %s%s", line, strstr(line, " um") || strstr(line, " uw") ?
			    " (registered with a userfaultfd)" : "");
		}
	}
	fclose(f);
}

/* ---- operations ---- */

static void forget(struct worker *w, int slot)
{
	struct object *o = &w->obj[slot];

	shadow_drop(w, slot, 0, o->len);
	w->live -= o->len;
	o->kind = NONE;
	o->p = NULL;
	o->len = 0;
}

static bool op_destroy(struct worker *w, int slot)
{
	struct object *o = &w->obj[slot];
	bool ok = check_object(w, slot, o->kind == HEAP ? OP_FREE : OP_MUNMAP);

	remember(w, slot, o->kind == HEAP ? OP_FREE : OP_MUNMAP, 0, o->len);
	if (o->kind == HEAP) {
		free(o->p);
	} else if (munmap(o->p, o->len)) {
		say("FAIL seed %" PRIu64 " worker %d op %" PRIu64 ": munmap(%p, %zu): %s", seed,
		    w->id, w->op, (void *)o->p, o->len, strerror(errno));
		atomic_store(&failed, true);
	}
	forget(w, slot);
	return ok;
}

static bool op_create(struct worker *w, int slot)
{
	struct object *o = &w->obj[slot];
	unsigned char *sh = shadow_of(w, slot);
	size_t len = rand_size(w), r = below(w, 100);
	enum op what = r < 45 ? OP_MALLOC : r < 65 ? OP_CALLOC : OP_MMAP;
	void *p;

	if (what == OP_MMAP)
		len = PAGE_UP(len);
	if (w->live + len > BUDGET) {
		enum kind k = below(w, 2) ? HEAP : MAP;
		int victim = pick(w, k, -1);

		if (victim < 0)
			victim = pick(w, k == HEAP ? MAP : HEAP, -1);
		return victim < 0 || op_destroy(w, victim);
	}
	p = what == OP_MALLOC ? malloc(len) : what == OP_CALLOC ? calloc(1, len) :
	    mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!p || p == MAP_FAILED) {
		say("%s of %zu bytes failed: %s", op_names[what], len, strerror(errno));
		exit(2);
	}
	*o = (struct object){ .kind = what == OP_MMAP ? MAP : HEAP, .p = p, .len = len, .born = w->op };
	w->live += len;
	remember(w, slot, what, 0, len);
	if (what == OP_MALLOC || (what == OP_MMAP && below(w, 10) < 7)) {
		pattern(w, sh, len);
		memcpy(o->p, sh, len);
		return true;
	}
	/* calloc's block and a fresh mapping read zeros. */
	memset(sh, 0, len);
	return what == OP_MMAP || compare(w, slot, 0, len, what);
}

static bool op_write(struct worker *w, int slot)
{
	struct object *o = &w->obj[slot];
	unsigned char *sh = shadow_of(w, slot);
	size_t off, len;

	rand_range(w, o, &off, &len);
	remember(w, slot, OP_WRITE, off, len);
	pattern(w, sh + off, len);
	memcpy(o->p + off, sh + off, len);
	return true;
}

static bool op_read(struct worker *w, int slot)
{
	size_t off, len;

	rand_range(w, &w->obj[slot], &off, &len);
	remember(w, slot, OP_READ, off, len);
	return compare(w, slot, off, len, OP_READ);
}

static bool op_realloc(struct worker *w, int slot)
{
	struct object *o = &w->obj[slot];
	unsigned char *sh = shadow_of(w, slot);
	size_t old = o->len, len, r = below(w, 10);
	unsigned char *p;

	len = r < 4 ? old + 1 + below(w, old) : r < 7 ? 1 + below(w, old) : rand_size(w);
	if (len > SLOT_CAP)
		len = SLOT_CAP;
	if (len > old && w->live + len - old > BUDGET)
		return op_destroy(w, slot);
	remember(w, slot, OP_REALLOC, old, len);
	p = realloc(o->p, len);
	if (!p) {
		say("realloc to %zu bytes failed: %s", len, strerror(errno));
		exit(2);
	}
	o->p = p;
	o->len = len;
	w->live = w->live + len - old;
	if (len > old) {
		pattern(w, sh + old, len - old);
		memcpy(o->p + old, sh + old, len - old);
	} else {
		shadow_drop(w, slot, len, old);
	}
	return compare(w, slot, 0, len < old ? len : old, OP_REALLOC);
}

/*
 * mremap of mapping @slot: grow or shrink, in place or moving, or onto the
 * head of another mapping of this worker (MREMAP_FIXED), which loses it.
 */
static bool op_mremap(struct worker *w, int slot)
{
	struct object *o = &w->obj[slot];
	unsigned char *sh = shadow_of(w, slot);
	size_t old = o->len, len, r = below(w, 10);
	int flags = MREMAP_MAYMOVE, victim = -1;
	enum op what = OP_MREMAP;
	void *to = NULL, *p;

	if (below(w, 2) || old == PAGE)
		len = old + PAGE * (1 + below(w, old / PAGE + 1));
	else
		len = PAGE * (1 + below(w, old / PAGE - 1));
	if (len > SLOT_CAP)
		len = SLOT_CAP;
	if (r < 2) {
		flags = 0;
	} else if (r < 4) {
		victim = pick(w, MAP, slot);
		if (victim >= 0 && w->obj[victim].len >= len) {
			flags = MREMAP_MAYMOVE | MREMAP_FIXED;
			to = w->obj[victim].p;
			what = OP_MREMAP_FIXED;
		} else {
			victim = -1;
		}
	}
	if (len > old && w->live + len - old > BUDGET)
		return op_destroy(w, slot);
	remember(w, slot, what, old, len);
	if (victim >= 0) {
		remember(w, victim, OP_MREMAPPED_ONTO, 0, len);
		if (!check_object(w, victim, OP_MREMAPPED_ONTO))
			return false;
	}
	p = mremap(o->p, old, len, flags, to);
	if (p == MAP_FAILED) {
		int err = errno;

		if (!flags && err == ENOMEM)
			return true;	/* no room to grow in place */
		say("FAIL seed %" PRIu64 " worker %d op %" PRIu64 ": object %d: mremap(%p, %zu, %zu, "
		    "%d, %p): %s", seed, w->id, w->op, slot, (void *)o->p, old, len, flags, to,
		    strerror(err));
		/* EFAULT: the range is no longer one mapping -- split by a registration? */
		say_mappings(o->p, old);
		say_history(o);
		atomic_store(&failed, true);
		return false;
	}
	if (victim >= 0) {
		struct object *v = &w->obj[victim];
		unsigned char *vsh = shadow_of(w, victim);

		if (v->len == len) {
			forget(w, victim);
		} else {
			memmove(vsh, vsh + len, v->len - len);
			shadow_drop(w, victim, v->len - len, v->len);
			v->p += len;
			v->len -= len;
			w->live -= len;
		}
	}
	o->moved |= p != o->p;
	o->p = p;
	o->len = len;
	w->live = w->live + len - old;
	if (len > old)
		memset(sh + old, 0, len - old);	/* the growth of an anonymous mapping */
	else
		shadow_drop(w, slot, len, old);
	return compare(w, slot, 0, len, what);
}

/* MADV_DONTNEED over whole pages of the object: they read zeros at once. */
static bool op_dontneed(struct worker *w, int slot)
{
	struct object *o = &w->obj[slot];
	uintptr_t lo = PAGE_UP((uintptr_t)o->p), hi = PAGE_DOWN((uintptr_t)o->p + o->len);
	size_t first, n, off;

	if (hi <= lo)
		return op_write(w, slot);
	first = below(w, (hi - lo) / PAGE);
	n = 1 + below(w, (hi - lo) / PAGE - first);
	off = lo + first * PAGE - (uintptr_t)o->p;
	remember(w, slot, OP_DONTNEED, off, n * PAGE);
	if (madvise(o->p + off, n * PAGE, MADV_DONTNEED)) {
		say("madvise(MADV_DONTNEED) failed: %s", strerror(errno));
		exit(2);
	}
	memset(shadow_of(w, slot) + off, 0, n * PAGE);
	return compare(w, slot, off, n * PAGE, OP_DONTNEED);
}

/*
 * MADV_FREE over pages of a mapping: each may keep its bytes or be freed
 * (zeros) until it is written.  A byte written into each page fixes which;
 * the rest of the page must then be all of its old bytes or all zeros.
 */
static bool op_free_advice(struct worker *w, int slot)
{
	struct object *o = &w->obj[slot];
	unsigned char *sh = shadow_of(w, slot);
	size_t first, n;

	rand_pages(w, o, &first, &n);
	remember(w, slot, OP_FREE_ADVICE, first * PAGE, n * PAGE);
	if (madvise(o->p + first * PAGE, n * PAGE, MADV_FREE)) {
		say("madvise(MADV_FREE) failed: %s", strerror(errno));
		exit(2);
	}
	for (size_t k = first; k < first + n; k++) {
		unsigned char *pg = o->p + k * PAGE, *spg = sh + k * PAGE;
		bool zero = true;

		spg[0] = (unsigned char)rnd(w);
		pg[0] = spg[0];
		if (!memcmp(pg + 1, spg + 1, PAGE - 1))
			continue;
		for (size_t i = 1; i < PAGE && zero; i++)
			zero = !pg[i];
		if (!zero)
			return compare(w, slot, k * PAGE, PAGE, OP_FREE_ADVICE);
		memset(spg + 1, 0, PAGE - 1);
	}
	return true;
}

/*
 * munmap of a part of a mapping: its head, its tail, or a hole in the
 * middle that leaves two mappings (the second takes a free slot).
 */
static bool op_trim(struct worker *w, int slot)
{
	struct object *o = &w->obj[slot];
	unsigned char *sh = shadow_of(w, slot);
	size_t pages = o->len / PAGE, r = below(w, 3), a, b;
	int other = free_slot(w);

	if (pages < 2)
		return op_read(w, slot);
	if (r == 2 && (pages < 3 || other < 0))
		r = 1;
	if (r == 0) {		/* head: [0, b) */
		a = 0;
		b = 1 + below(w, pages - 1);
	} else if (r == 1) {	/* tail: [a, pages) */
		a = 1 + below(w, pages - 1);
		b = pages;
	} else {		/* hole: [a, b), 0 < a < b < pages */
		a = 1 + below(w, pages - 2);
		b = a + 1 + below(w, pages - 1 - a);
	}
	remember(w, slot, r == 2 ? OP_SPLIT : OP_TRIM, a * PAGE, (b - a) * PAGE);
	if (munmap(o->p + a * PAGE, (b - a) * PAGE)) {
		say("munmap of a part failed: %s", strerror(errno));
		exit(2);
	}
	w->live -= (b - a) * PAGE;
	if (r == 0) {
		memmove(sh, sh + b * PAGE, (pages - b) * PAGE);
		shadow_drop(w, slot, (pages - b) * PAGE, o->len);
		o->p += b * PAGE;
		o->len -= b * PAGE;
	} else if (r == 1) {
		shadow_drop(w, slot, a * PAGE, o->len);
		o->len = a * PAGE;
	} else {
		struct object *q = &w->obj[other];

		*q = (struct object){ .kind = MAP, .p = o->p + b * PAGE, .len = (pages - b) * PAGE,
				      .born = w->op, .moved = o->moved };
		memcpy(shadow_of(w, other), sh + b * PAGE, q->len);
		remember(w, other, OP_SPLIT, 0, q->len);
		shadow_drop(w, slot, a * PAGE, o->len);
		o->len = a * PAGE;
		if (!check_object(w, other, OP_SPLIT))
			return false;
	}
	return check_object(w, slot, r == 2 ? OP_SPLIT : OP_TRIM);
}

/*
 * A fresh mapping MAP_FIXED over pages inside a mapping: they read zeros.
 * Inside, not at an end, and not in a mapping that mremap moved: the
 * kernel merges the new part with the rest, so the mapping stays one
 * (at an end it could merge with a neighbour instead).
 */
static bool op_map_fixed(struct worker *w, int slot)
{
	struct object *o = &w->obj[slot];
	size_t pages = o->len / PAGE, first, n;
	void *p;

	if (o->moved || pages < 3)
		return op_dontneed(w, slot);
	first = 1 + below(w, pages - 2);
	n = 1 + below(w, pages - 1 - first < 64 ? pages - 1 - first : 64);
	remember(w, slot, OP_MAP_FIXED, first * PAGE, n * PAGE);
	p = mmap(o->p + first * PAGE, n * PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (p != o->p + first * PAGE) {
		say("mmap MAP_FIXED failed: %s", strerror(errno));
		exit(2);
	}
	memset(shadow_of(w, slot) + first * PAGE, 0, n * PAGE);
	return compare(w, slot, first * PAGE, n * PAGE, OP_MAP_FIXED);
}

/* One operation on a random object (or a new one). */
static bool step(struct worker *w)
{
	int slot = (int)below(w, NSLOT);
	struct object *o = &w->obj[slot];
	size_t r;

	at_worker = w;
	at_slot = slot;
	if (o->kind == NONE)
		return op_create(w, slot);
	r = below(w, 100);
	if (r < 26)
		return op_write(w, slot);
	if (r < 48)
		return op_read(w, slot);
	if (r < 51) {
		remember(w, slot, OP_CHECK, 0, o->len);
		return check_object(w, slot, OP_CHECK);
	}
	if (r < 61)
		return op_destroy(w, slot);
	if (r < 73)
		return o->kind == HEAP ? op_realloc(w, slot) : op_mremap(w, slot);
	if (r < 81)
		return op_dontneed(w, slot);
	if (o->kind == HEAP)
		return op_write(w, slot);
	if (r < 86)
		return op_free_advice(w, slot);
	if (r < 94)
		return op_trim(w, slot);
	return op_map_fixed(w, slot);
}

/*
 * SIGSEGV or SIGBUS (the library raises it for a page the pool lost):
 * say where, as a wrong byte is said, and die of the signal.
 */
static void on_crash(int sig, siginfo_t *si, void *uc)
{
	struct worker *w = at_worker;

	(void)uc;
	if (w && at_slot >= 0) {
		struct object *o = &w->obj[at_slot];

		say("FAIL seed %" PRIu64 " worker %d op %" PRIu64 " (%s): signal %d at %p, on object "
		    "%d, a %s of %zu bytes at %p made at op %" PRIu64, seed, w->id, w->op, who, sig,
		    si->si_addr, at_slot, kind_name(o->kind), o->len, (void *)o->p, o->born);
		say_history(o);
	} else {
		say("FAIL seed %" PRIu64 " (%s): signal %d at %p", seed, who, sig, si->si_addr);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

/* ---- the group ---- */

/* A "key N" line of the group's memory.stat. */
static uint64_t stat_value(const char *key)
{
	char buf[4096], *at;
	size_t kl = strlen(key);
	int n = cgm_read(group, "memory.stat", buf, sizeof(buf));

	if (n < 0) {
		say("cgm_read(%s, memory.stat): %s", group, strerror(-n));
		exit(2);
	}
	for (at = buf; at; at = strchr(at, '\n'), at = at ? at + 1 : NULL)
		if (!strncmp(at, key, kl) && at[kl] == ' ')
			return strtoull(at + kl + 1, NULL, 10);
	say("memory.stat of %s has no %s", group, key);
	exit(2);
}

/* memory.reclaim of the process's own group: what it spills, its threads refault. */
static bool reclaim(unsigned mb)
{
	char v[32];
	int err;

	at_slot = -1;
	snprintf(v, sizeof(v), "%uM", mb);
	err = cgm_write(group, "memory.reclaim", v);
	/* -EAGAIN: less came back than asked, as the kernel says it. */
	if (err && err != -EAGAIN) {
		say("FAIL (%s) seed %" PRIu64 ": memory.reclaim %s of %s: %s", who, seed, v, group,
		    strerror(-err));
		atomic_store(&failed, true);
		return false;
	}
	return true;
}

/* ---- fork ---- */

/* The bytes of a forked child's own block: no shadow, the child must not write the model. */
static unsigned char child_byte(size_t i)
{
	return (unsigned char)(i / 4096 * 13 + i % 251);
}

/*
 * In a forked child: check every object; every other fork, also allocate
 * (the child joins its parent's group at its first allocation), fill a
 * block of its own, reclaim in its own right -- its pages are its own
 * once written, so its new engine spills them -- and check everything
 * again.  Returns the child's exit status.
 */
static int child_checks(unsigned nth)
{
	size_t len = 4 * MIB;
	unsigned char *own;
	bool ok = true;

	who = "forked child";
	for (int i = 0; i < nworkers && ok; i++)
		ok = check_worker(&m->w[i], OP_FORK);
	if (!ok || !(nth % 2))
		return ok ? 0 : 1;
	at_slot = -1;
	own = malloc(len);
	if (!own)
		return 2;
	for (size_t i = 0; i < len; i++)
		own[i] = child_byte(i);
	ok = reclaim(32);
	for (int i = 0; i < nworkers && ok; i++)
		ok = check_worker(&m->w[i], OP_FORK);
	at_slot = -1;
	for (size_t i = 0; i < len && ok; i++)
		if (own[i] != child_byte(i)) {
			say("FAIL seed %" PRIu64 " (forked child of fork %u): byte %zu of its own "
			    "block: expected 0x%02x, read 0x%02x", seed, nth, i, child_byte(i), own[i]);
			ok = false;
		}
	free(own);
	return ok ? 0 : 1;
}

/*
 * Fork with every worker between two operations; the child checks the
 * objects (child_checks) and exits with its status.
 */
static bool fork_check(struct worker *w0, unsigned nth)
{
	pid_t child;
	int st;

	atomic_store(&fork_pending, true);
	for (int i = 1; i < nworkers; i++)
		pthread_mutex_lock(&m->w[i].lock);
	child = fork();
	if (child == 0)
		_exit(child_checks(nth));
	if (child > 0 && waitpid(child, &st, 0) != child)
		st = -1;
	for (int i = 1; i < nworkers; i++)
		pthread_mutex_unlock(&m->w[i].lock);
	atomic_store(&fork_pending, false);
	w0->counts[OP_FORK]++;
	if (child < 0) {
		say("fork failed: %s", strerror(errno));
		exit(2);
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		say("FAIL seed %" PRIu64 " worker 0 op %" PRIu64 ": the child of fork %u %s %d", seed,
		    w0->op, nth, WIFEXITED(st) ? "exited" : "was killed by signal",
		    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		atomic_store(&failed, true);
		return false;
	}
	return true;
}

/* ---- the workers ---- */

static void *other_worker(void *arg)
{
	struct worker *w = arg;

	while (!atomic_load(&done) && !atomic_load(&failed)) {
		bool ok;

		/* A mutex is not fair: without this, a worker could keep its lock from a fork. */
		while (atomic_load(&fork_pending))
			nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
		pthread_mutex_lock(&w->lock);
		ok = step(w);
		w->op++;
		pthread_mutex_unlock(&w->lock);
		if (!ok)
			break;
	}
	return NULL;
}

/* Worker 0: @ops operations, a reclaim every RECLAIM_EVERY, FORKS forks spread over them. */
static void main_worker(uint64_t ops, unsigned *reclaims)
{
	struct worker *w = &m->w[0];
	unsigned forks = 0;

	for (; w->op < ops && !atomic_load(&failed); w->op++) {
		if (w->op % RECLAIM_EVERY == RECLAIM_EVERY - 1) {
			if (!reclaim((unsigned)(8 + below(w, 57))))
				break;
			(*reclaims)++;
			/* Everything of this worker, some of it spilled just now. */
			if (below(w, 2) && !check_worker(w, OP_CHECK))
				break;
			continue;
		}
		if (forks < FORKS && w->op >= (forks + 1) * ops / (FORKS + 1)) {
			if (!fork_check(w, ++forks))
				break;
			continue;
		}
		if (!step(w))
			break;
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	uint64_t ops = argc > 2 ? strtoull(argv[2], NULL, 0) : 4000, out0, in0, out1, in1, total = 0;
	unsigned reclaims = 0;
	double t0 = now_s();
	int n;

	seed = argc > 1 ? strtoull(argv[1], NULL, 0) : (uint64_t)time(NULL);
	ops_arg = ops;
	nworkers = argc > 3 ? atoi(argv[3]) : 2;
	if (argc > 4 || nworkers < 1 || nworkers > MAX_WORKERS || !ops) {
		fprintf(stderr, "usage: spill_model [SEED [OPS [THREADS (1..%d)]]]\n", MAX_WORKERS);
		return 2;
	}
	if (!cgm_accounting_enabled() || (n = cgm_group(group, sizeof(group))) < 0) {
		fprintf(stderr, "spill_model: not under cgmalloc with accounting "
			"(run with LD_PRELOAD=libcgmalloc.so, CGMALLOC_CONF=...,spill=1)\n");
		return 2;
	}
	sigaction(SIGSEGV, &(struct sigaction){ .sa_sigaction = on_crash, .sa_flags = SA_SIGINFO }, NULL);
	sigaction(SIGBUS, &(struct sigaction){ .sa_sigaction = on_crash, .sa_flags = SA_SIGINFO }, NULL);
	m = mmap(NULL, sizeof(*m), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 2;
	say("seed %" PRIu64 ", %" PRIu64 " operations, %d workers, group %s (replay: spill_model "
	    "%" PRIu64 " %" PRIu64 " %d)", seed, ops, nworkers, group, seed, ops, nworkers);
	out0 = stat_value("zswpout");
	in0 = stat_value("zswpin");
	for (int i = 0; i < nworkers; i++) {
		struct worker *w = &m->w[i];

		w->id = i;
		w->rng = seed * 0x100000001b3ull + (uint64_t)i * 0x9e3779b97f4a7c15ull;
		pthread_mutex_init(&w->lock, NULL);
		w->shadow = mmap(NULL, NSLOT * SLOT_CAP, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (w->shadow == MAP_FAILED)
			return 2;
	}
	for (int i = 1; i < nworkers; i++)
		if (pthread_create(&m->w[i].thread, NULL, other_worker, &m->w[i]))
			return 2;
	main_worker(ops, &reclaims);
	atomic_store(&done, true);
	for (int i = 1; i < nworkers; i++)
		pthread_join(m->w[i].thread, NULL);

	/* Every object, once more, after a last reclaim. */
	if (!atomic_load(&failed))
		reclaim(64);
	for (int i = 0; i < nworkers && !atomic_load(&failed); i++)
		check_worker(&m->w[i], OP_END);
	out1 = stat_value("zswpout");
	in1 = stat_value("zswpin");
	for (int i = 0; i < nworkers; i++) {
		struct worker *w = &m->w[i];

		total += w->op;
		say("worker %d: %" PRIu64 " ops: %" PRIu64 " writes, %" PRIu64 " reads, %" PRIu64
		    " allocations, %" PRIu64 " reallocs/mremaps (%" PRIu64 " onto another mapping), %"
		    PRIu64 " discards, %" PRIu64
		    " partial munmaps, %" PRIu64 " MAP_FIXED", i, w->op, w->counts[OP_WRITE],
		    w->counts[OP_READ] + w->counts[OP_CHECK],
		    w->counts[OP_MALLOC] + w->counts[OP_CALLOC] + w->counts[OP_MMAP],
		    w->counts[OP_REALLOC] + w->counts[OP_MREMAP] + w->counts[OP_MREMAP_FIXED],
		    w->counts[OP_MREMAP_FIXED],
		    w->counts[OP_DONTNEED] + w->counts[OP_FREE_ADVICE],
		    w->counts[OP_TRIM] + w->counts[OP_SPLIT], w->counts[OP_MAP_FIXED]);
	}
	say("seed %" PRIu64 ": %" PRIu64 " operations in %.1f s, %u reclaims, %" PRIu64 " forks, "
	    "zswpout +%" PRIu64 ", zswpin +%" PRIu64, seed, total, now_s() - t0, reclaims,
	    m->w[0].counts[OP_FORK], out1 - out0, in1 - in0);
	if (!atomic_load(&failed) && out1 == out0) {
		say("FAIL seed %" PRIu64 ": nothing was spilled (zswpout did not grow): the run "
		    "tested nothing", seed);
		atomic_store(&failed, true);
	}
	for (int i = 0; i < nworkers && !atomic_load(&failed); i++)
		for (int s = 0; s < NSLOT; s++)
			if (m->w[i].obj[s].kind != NONE)
				op_destroy(&m->w[i], s);
	if (atomic_load(&failed))
		return 1;
	say("ok");
	return 0;
}
