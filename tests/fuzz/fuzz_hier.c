/*
 * libFuzzer target over the hierarchy file (accounting/).
 *
 * One private hierarchy is created per fuzzing process and put back to
 * its freshly created state before every input (holes punched over the
 * whole file, then the few pages a new hierarchy has written restored),
 * so that an input that fails fails again on its own.  The input is a
 * program of at most MAX_OPS operations: making, removing and looking up
 * groups by fuzz-built paths, limits, writing and reading every file of
 * cgm_file_names, flushes, harvests, reclaiming dead processes, this
 * process attaching, charging, freeing and moving -- and scribbling
 * fuzz-chosen bytes over the groups, the process slots, the thread slots
 * and the header of the mapped file, after which hier_open() of the file
 * must refuse it cleanly or accept it.
 *
 * Nothing may crash, hang or trip ASan/UBSan, whatever was scribbled.
 * While nothing has been scribbled, the results must also be right:
 * a group made is found at its path and its path reads back, a removed
 * group is gone, file texts are NUL-terminated within their buffer, a
 * limit read back and written again reads the same, and at the end the
 * tree links, nr_limited and every group's usage against the pages its
 * processes hold agree.
 *
 * Left out on purpose: the process slots' mutexes (a scribbled lock word
 * is a lock held by a thread that does not exist: waiting for it is what
 * a robust mutex does), writes to cgroup.procs naming a live process (the
 * writer waits a second for it to move itself), and oom=kill and
 * cgroup.kill (they would SIGKILL whatever pid a scribble put in a slot).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgm/acct.h"
#include "fuzz/fuzz.h"
#include "cgm/size.h"
#include "cgm/files.h"
#include "cgm/hier.h"
#include "cgm/size_class.h"

#define MAX_OPS 48
#define MAX_KNOWN 128
#define MAX_EXTENTS 64

struct input {
	const uint8_t *p;
	size_t left;
};

static uint64_t take(struct input *in, unsigned int bytes)
{
	uint64_t v = 0;

	while (bytes-- && in->left) {
		v = v << 8 | *in->p++;
		in->left--;
	}
	return v;
}

/* ---- the private hierarchy and its pristine state ---- */

static char dir[64], path[128], scratch[160];
static int fd = -1;
/* This process, as the shim would be: attached or not, with one thread slot. */
static struct cgm_acct me = { .proc = CGM_NONE, .batch_pages = CGM_CHARGE_BATCH };
static struct { off_t off; size_t len; void *data; } pristine[MAX_EXTENTS];
static int npristine;

static void remove_files(void)
{
	if (path[0])
		unlink(path);
	if (scratch[0])
		unlink(scratch);
	if (dir[0])
		rmdir(dir);
}

static void __attribute__((noreturn)) die(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_hier: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
	abort();
}

/* The data a new hierarchy holds (header, root, proc mutexes), found with SEEK_DATA. */
static void save_pristine(void)
{
	off_t end = lseek(fd, 0, SEEK_END), off = 0;

	while (off < end && (off = lseek(fd, off, SEEK_DATA)) >= 0) {
		off_t hole = lseek(fd, off, SEEK_HOLE);

		if (npristine == MAX_EXTENTS)
			die("too many data extents in a new hierarchy", NULL);
		pristine[npristine].off = off;
		pristine[npristine].len = (size_t)(hole - off);
		pristine[npristine].data = malloc((size_t)(hole - off));
		if (!pristine[npristine].data)
			die("out of memory", NULL);
		memcpy(pristine[npristine].data, (char *)me.h.hdr + off, (size_t)(hole - off));
		npristine++;
		off = hole;
	}
}

/*
 * The directory is named after the pid: a fuzzer that crashed (no atexit)
 * leaves one behind, which the next run removes once its pid is gone.
 */
static void remove_stale(const char *base)
{
	char stale[128];
	DIR *d = opendir(base);
	struct dirent *e;

	while (d && (e = readdir(d))) {
		int pid;

		if (sscanf(e->d_name, "cgm-fuzz-hier.%d", &pid) != 1 ||
		    kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(stale, sizeof(stale), "%s/%s/hier", base, e->d_name);
		unlink(stale);
		snprintf(stale, sizeof(stale), "%s/%s/copy", base, e->d_name);
		unlink(stale);
		snprintf(stale, sizeof(stale), "%s/%s", base, e->d_name);
		rmdir(stale);
	}
	if (d)
		closedir(d);
}

static void setup_once(void)
{
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	char why[512];

	remove_stale(base);
	snprintf(dir, sizeof(dir), "%s/cgm-fuzz-hier.%d", base, (int)getpid());
	if (mkdir(dir, 0700) < 0)
		die("mkdir", strerror(errno));
	snprintf(path, sizeof(path), "%s/hier", dir);
	snprintf(scratch, sizeof(scratch), "%s/copy", dir);
	atexit(remove_files);
	if (hier_open(&me.h, path, true, why, sizeof(why)) < 0)
		die("hier_open", why);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die("open", strerror(errno));
	save_pristine();
}

/* Back to the state hier_open() created: every input starts from the same file. */
static void reset(void)
{
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)me.h.size) < 0)
		die("punching the hierarchy", strerror(errno));
	for (int i = 0; i < npristine; i++)
		memcpy((char *)me.h.hdr + pristine[i].off, pristine[i].data, pristine[i].len);
	me.proc = CGM_NONE;
	me.oom_policy = ACCT_OOM_ENOMEM;
}

/* ---- what one input has done so far ---- */

struct run {
	struct input in;
	struct cgm_hier *h;		/* me.h, or a re-opened mapping of the file */
	struct cgm_hier reopened;
	uint32_t known[MAX_KNOWN];	/* indices mkdir returned (may be stale) */
	int nknown;
	uint32_t high;			/* above every group index made */
	uint32_t tslot;			/* our thread slot, CGM_NONE if none */
	bool scribbled;			/* results need not be right, only safe */
};

static uint32_t pick_group(struct run *r)
{
	uint8_t b = (uint8_t)take(&r->in, 1);

	if (b >= 0xf0)
		return (uint32_t)take(&r->in, 4);	/* any index, out of range too */
	if (b >= 0xe0 || !r->nknown)
		return CGM_ROOT;
	return r->known[b % r->nknown];
}

static void remember(struct run *r, uint32_t idx)
{
	if (r->nknown < MAX_KNOWN)
		r->known[r->nknown++] = idx;
	if (idx + 1 > r->high)
		r->high = idx + 1;
}

/* ---- fuzz-built paths and values ---- */

static const char *const components[] = {
	"a", "b", "c", "job1", "x.y", "-", "@", "A:B+c", "..", ".", "", "bad name",
	"n23456789012345678901234567890123456789012345678901234567890123",	/* 63: longest */
	"n234567890123456789012345678901234567890123456789012345678901234",	/* 64: too long */
};
#define NCOMP (sizeof(components) / sizeof(components[0]))

/* Mostly paths of a few plausible names; some near the depth limit; some raw bytes. */
static void make_path(struct run *r, char *buf, size_t len)
{
	uint8_t mode = (uint8_t)take(&r->in, 1);
	size_t n = 0;

	buf[0] = '\0';
	if (mode >= 0xe0) {
		size_t raw = take(&r->in, 1) % 96;

		for (size_t i = 0; i < raw && i + 1 < len; i++)
			buf[n++] = (char)take(&r->in, 1);
		buf[n] = '\0';
		return;
	}
	if (mode == 0) {
		snprintf(buf, len, "/");
		return;
	}
	if (mode >= 0xc0) {
		/* 60 to 67 levels: around the depth limit of 64 */
		for (int d = 0; d < 60 + mode % 8 && n + 3 < len; d++)
			n += (size_t)snprintf(buf + n, len - n, "/%c", 'a' + d % 3);
		return;
	}
	for (int d = 0; d < 1 + mode % 5; d++) {
		const char *c = components[take(&r->in, 1) % NCOMP];

		n += (size_t)snprintf(buf + n, len - n, "/%s", c);
		if (n >= len)
			break;
	}
}

static const char *const special_values[] = {
	"max", "max\n", "0", "1", "1\n", "-1", "", " ", "\n", "1G ", "4095", "4096",
	"18446744073709551615", "18446744073709551616", "9223372036854775807",
	"9223372036854771712", "8796093022207T", "17179869183G", "2x", "0x10", "+5",
};
#define NSPECIAL (sizeof(special_values) / sizeof(special_values[0]))

static void make_value(struct run *r, char *buf, size_t len)
{
	static const char suffix[] = "\0KMGTk";
	uint8_t mode = (uint8_t)take(&r->in, 1);

	if (mode < 0x80) {
		uint64_t v = take(&r->in, 8) >> (mode % 64);
		char s = suffix[mode % 6];

		snprintf(buf, len, "%" PRIu64 "%.1s%s", v, &s, mode & 0x40 ? "\n" : "");
	} else if (mode < 0xc0) {
		snprintf(buf, len, "%s", special_values[mode % NSPECIAL]);
	} else {
		/* raw, up to 160 bytes: longer than a file write takes */
		size_t raw = take(&r->in, 1) % 161, n = 0;

		for (; n < raw && n + 1 < len; n++)
			buf[n] = (char)take(&r->in, 1);
		buf[n] = '\0';
	}
}

/* ---- operations on groups ---- */

static void check_found_at(struct run *r, uint32_t idx, const char *p)
{
	char back[CGM_PATH_MAX];

	if (r->scribbled)
		return;
	if (group_lookup(r->h, p) != idx)
		die("a group made is not found at its path", p);
	if (group_path(r->h, idx, back, sizeof(back)) < 0 || strcmp(back, p))
		die("group_path does not give back the path", p);
}

static void op_mkdir(struct run *r)
{
	char p[CGM_PATH_MAX];
	int64_t idx;

	make_path(r, p, sizeof(p));
	hier_lock(&r->h->hdr->tree_lock);
	idx = group_mkdir(r->h, p);
	hier_unlock(&r->h->hdr->tree_lock);
	if (idx >= 0) {
		remember(r, (uint32_t)idx);
		check_found_at(r, (uint32_t)idx, p);
	} else if (!r->scribbled && group_path_valid(p) == 0) {
		die("mkdir of a valid path refused", p);
	}
}

static void op_rmdir(struct run *r)
{
	char p[CGM_PATH_MAX];
	int err;

	make_path(r, p, sizeof(p));
	hier_lock(&r->h->hdr->tree_lock);
	err = group_rmdir(r->h, p);
	hier_unlock(&r->h->hdr->tree_lock);
	if (r->scribbled)
		return;
	if (err == 0 && group_lookup(r->h, p) != CGM_NONE)
		die("a removed group is still found", p);
	if (!strcmp(p, "/") && err != -EBUSY)
		die("the root was not refused as busy", p);
}

static void op_lookup(struct run *r)
{
	char p[CGM_PATH_MAX];
	uint32_t idx;

	make_path(r, p, sizeof(p));
	idx = group_lookup(r->h, p);
	if (idx != CGM_NONE) {
		/* (a scribbled root is still "/": its users check hier_group) */
		if (!r->scribbled && !hier_group(r->h, idx))
			die("group_lookup returned a group that is not live", p);
		check_found_at(r, idx, p);
	}
}

/* group_path into a buffer of fuzz-chosen size, exactly that large (ASan sees overruns). */
static void op_path(struct run *r)
{
	uint32_t idx = pick_group(r);
	size_t len = take(&r->in, 2) % (CGM_PATH_MAX + 1) + 1;
	char *buf = malloc(len);

	if (!buf)
		return;
	if (group_path(r->h, idx, buf, len) == 0 && !memchr(buf, '\0', len))
		die("group_path gave no NUL", NULL);
	free(buf);
}

static void op_event(struct run *r)
{
	uint32_t idx = pick_group(r);

	group_event(r->h, idx, (enum cgm_event)(take(&r->in, 1) % CGM_NR_EVENTS));
}

/* ---- files ---- */

static const char *pick_file(struct run *r)
{
	uint8_t b = (uint8_t)take(&r->in, 1);

	if (b == 0xff)
		return "memory.nonesuch";
	return cgm_files[b % cgm_nfiles].name;
}

/* Read into a buffer of exactly @len bytes: the text must end inside it. */
static int read_file(struct run *r, uint32_t group, const char *name, size_t len,
		     char *copy, size_t copylen)
{
	char *buf = malloc(len ? len : 1);
	int n;

	if (!buf)
		return -ENOMEM;
	n = cgm_file_read(r->h, group, name, buf, len);
	if (n >= 0 && len) {
		size_t l = strnlen(buf, len);

		if (l == len)
			die("a file text is not NUL-terminated in its buffer", name);
		if (l != ((size_t)n < len ? (size_t)n : len - 1))
			die("a file read returns another length than it wrote", name);
	}
	if (copy)
		snprintf(copy, copylen, "%s", n >= 0 && len ? buf : "");
	free(buf);
	return n;
}

static void op_read(struct run *r)
{
	uint32_t group = pick_group(r);
	const char *name = pick_file(r);
	size_t len = take(&r->in, 1) ? take(&r->in, 2) % 8192 : 0;

	read_file(r, group, name, len, NULL, 0);
}

static bool is_limit_file(const char *name)
{
	return !strcmp(name, "memory.max") || !strcmp(name, "memory.high") ||
	       !strcmp(name, "memory.low") || !strcmp(name, "memory.min");
}

/*
 * A pid that names a live process makes the writer wait for it to move
 * (up to a second): only pids of no process are written.
 */
static bool procs_value_is_live_pid(const char *v)
{
	long pid = strtol(v, NULL, 10);

	return pid > 0 && pid <= INT32_MAX && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

static void op_write(struct run *r)
{
	uint32_t group = pick_group(r);
	const char *name = pick_file(r);
	char v[200], why[256], first[64], second[64];
	int err;

	make_value(r, v, sizeof(v));
	if ((!strcmp(name, "cgroup.procs") && procs_value_is_live_pid(v)) ||
	    !strcmp(name, "cgroup.kill"))
		return;
	why[0] = '\0';
	err = cgm_file_write(r->h, CGM_NONE, group, name, v, why, sizeof(why));
	if (err > 0)
		die("cgm_file_write returned a positive value", name);
	if (err < 0 && !why[0])
		die("cgm_file_write failed without a reason", name);
	if (err || !is_limit_file(name))
		return;
	/* What a limit file reads back, written again, reads the same. */
	if (read_file(r, group, name, sizeof(first), first, sizeof(first)) < 0)
		return;
	if (cgm_file_write(r->h, CGM_NONE, group, name, first, why, sizeof(why)) < 0)
		die("a limit read back is refused when written", first);
	if (read_file(r, group, name, sizeof(second), second, sizeof(second)) >= 0 &&
	    strcmp(first, second))
		die("a limit written back reads differently", first);
}

static void op_set_limit(struct run *r)
{
	uint32_t group = pick_group(r);
	int which = (int)(take(&r->in, 1) % 5);	/* 4: not a limit */
	uint64_t bytes = take(&r->in, 8);

	if (take(&r->in, 1) & 1)
		bytes = CGM_SIZE_MAX;
	(void)acct_set_limit(r->h, group, which, bytes);
}

/* ---- this process: attach, charge, free, move, detach ---- */

static void op_attach(struct run *r)
{
	char p[CGM_PATH_MAX];

	make_path(r, p, sizeof(p));
	/* Our old slot (same pid) is released: its thread slot goes with it. */
	r->tslot = CGM_NONE;
	if (acct_attach(&me, p) < 0) {
		me.proc = CGM_NONE;
		return;
	}
	remember(r, me.h.procs[me.proc].group);
	r->tslot = acct_thread_register(&me, (int)syscall(SYS_gettid));
}

static struct cgm_thread_slot *our_slot(struct run *r)
{
	return me.proc == CGM_NONE ? NULL : hier_thread(&me.h, r->tslot);
}

/* cgm_acct_alloc_slow(): take @size from the stock, refilling it by a charge. */
static void op_charge(struct run *r)
{
	struct cgm_thread_slot *t = our_slot(r);
	int64_t size = (int64_t)(take(&r->in, 4) % (1u << 30)) + 1;

	if (!t)
		return;
	/*
	 * acct_stock_take() with the subtraction wrapping: the stock may be
	 * scribbled, and the shim's plain arithmetic would overflow on it.
	 */
	t->stock = cgm_wrap_sub(t->stock, size);
	if (t->stock < 0 && acct_stock_refill(&me, t, size, false) < 0)
		return;
	t->big_allocs++;
	t->big_alloc_bytes += (uint64_t)size;
	t->big_hist[rstat_hist_bucket((uint64_t)size)]++;
}

/* cgm_acct_free(): frees count in bytes for harvest. */
static void op_free(struct run *r)
{
	struct cgm_thread_slot *t = our_slot(r);
	uint64_t size = take(&r->in, 4) % (1u << 30) + 1;

	if (!t)
		return;
	t->frees++;
	t->freed_bytes += size <= CGM_SMALL_MAX ? cgm_small_block_size(size) : size;
}

static void op_move(struct run *r)
{
	uint32_t group = pick_group(r);
	uint32_t proc = take(&r->in, 1) & 1 ? (uint32_t)take(&r->in, 2) : me.proc;

	if (proc != CGM_NONE)
		(void)acct_move(r->h, proc, group);
}

static void op_detach(struct run *r)
{
	(void)r;
	if (me.proc != CGM_NONE)
		acct_detach(&me);
}

/* ---- flushes and reclaim ---- */

static void op_flush(struct run *r)
{
	switch (take(&r->in, 1) % 4) {
	case 0: rstat_flush(r->h); break;
	case 1: acct_harvest_subtree(r->h, pick_group(r)); break;
	case 2: acct_harvest(r->h, (uint32_t)take(&r->in, 2)); break;
	default: (void)acct_reclaim_dead(r->h); break;
	}
}

/* ---- scribbling on the file ---- */

static uint64_t scribble_value(struct run *r, uint8_t mode)
{
	switch (mode % 8) {
	case 0: return 0;
	case 1: return UINT64_MAX;
	case 2: return CGM_NONE;
	case 3: return r->nknown ? r->known[take(&r->in, 1) % r->nknown] : CGM_ROOT;
	case 4: return (uint64_t)INT64_MAX;
	case 5: return (uint64_t)INT64_MIN;
	case 6: return take(&r->in, 1);
	default: return take(&r->in, 8);
	}
}

/* Write @width bytes of @v at @off in the area [base, base + size). */
static void poke(char *base, size_t size, size_t off, unsigned int width, uint64_t v)
{
	if (off >= size)
		return;
	if (width > size - off)
		width = (unsigned int)(size - off);
	memcpy(base + off, &v, width);	/* little-endian: the low bytes */
}

/* An index into an area: mostly the first few slots (the ones in use), sometimes any. */
static uint32_t scribble_slot(struct run *r, uint32_t count)
{
	uint8_t b = (uint8_t)take(&r->in, 1);

	if (b < 0xc0)
		return b % 8;
	if (b < 0xe0 && r->high)
		return (uint32_t)take(&r->in, 1) % r->high;
	return (uint32_t)take(&r->in, 2) % count;
}

static void op_scribble(struct run *r)
{
	uint8_t area = (uint8_t)take(&r->in, 1), mode = (uint8_t)take(&r->in, 1);
	unsigned int width = 1u << (mode >> 3 & 3);
	uint64_t v = scribble_value(r, mode);
	size_t off;
	uint32_t slot;

	r->scribbled = true;
	switch (area % 3) {
	case 0:
		slot = scribble_slot(r, CGM_MAX_GROUPS);
		off = take(&r->in, 2) % sizeof(struct cgm_group);
		poke((char *)&r->h->groups[slot], sizeof(struct cgm_group), off, width, v);
		break;
	case 1:
		slot = scribble_slot(r, CGM_MAX_PROCS);
		off = take(&r->in, 1) % sizeof(struct cgm_proc);
		/* not the lock: see the top of the file */
		if (off + width > offsetof(struct cgm_proc, lock) &&
		    off < offsetof(struct cgm_proc, lock) + sizeof(pthread_mutex_t))
			return;
		poke((char *)&r->h->procs[slot], sizeof(struct cgm_proc), off, width, v);
		break;
	default:
		slot = scribble_slot(r, CGM_MAX_THREADS);
		off = take(&r->in, 2) % sizeof(struct cgm_thread_slot);
		poke((char *)&r->h->threads[slot], sizeof(struct cgm_thread_slot), off, width, v);
		break;
	}
}

static void close_reopened(struct run *r)
{
	if (r->reopened.hdr)
		hier_close(&r->reopened);
	r->h = &me.h;
}

/* hier_open() of what is at @p: refused with a reason, or accepted and usable. */
static void open_and_use(struct run *r, const char *p, bool keep)
{
	struct cgm_hier h;
	char why[512] = "";
	char text[256];
	int err = hier_open(&h, p, false, why, sizeof(why));

	if (err > 0)
		die("hier_open returned a positive value", p);
	if (err < 0) {
		if (!why[0] || h.hdr)
			die("hier_open refused without a reason or left a mapping", p);
		return;
	}
	(void)cgm_file_read(&h, CGM_ROOT, "memory.stat", text, sizeof(text));
	(void)group_lookup(&h, "/a/b");
	if (!keep) {
		hier_close(&h);
		return;
	}
	/* Go on with the re-opened mapping: accepted means safe to use. */
	close_reopened(r);
	r->reopened = h;
	r->h = &r->reopened;
}

static void op_header(struct run *r)
{
	struct cgm_hier_header *hd = me.h.hdr;
	uint8_t mode = (uint8_t)take(&r->in, 1);
	unsigned int width = 1u << (mode >> 3 & 3);
	uint64_t v = scribble_value(r, mode);
	size_t locks = offsetof(struct cgm_hier_header, tree_lock);
	size_t off = take(&r->in, 2) % (locks + sizeof(hd->checksum));

	r->scribbled = true;
	/* Everything but the mutexes: the checksum comes after them. */
	if (off >= locks)
		off = offsetof(struct cgm_hier_header, checksum) + (off - locks);
	else if (off + width > locks)
		width = (unsigned int)(locks - off);
	poke((char *)hd, sizeof(*hd), off, width, v);
	if (mode & 0x80)
		hd->checksum = hier_header_checksum(hd);
	open_and_use(r, path, true);
}

/* A copy of the header in a file of another size: only the right size is accepted. */
static void op_truncated_copy(struct run *r)
{
	uint8_t mode = (uint8_t)take(&r->in, 1);
	off_t size = (off_t)me.h.size;
	int cfd;

	switch (mode % 4) {
	case 0: size = (off_t)(take(&r->in, 2) % 4096); break;
	case 1: size -= 4096; break;
	case 2: size += 4096; break;
	default: break;
	}
	cfd = open(scratch, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (cfd < 0)
		return;
	if (pwrite(cfd, me.h.hdr, sizeof(struct cgm_hier_header), 0) < 0 ||
	    ftruncate(cfd, size) < 0) {
		close(cfd);
		return;
	}
	close(cfd);
	open_and_use(r, scratch, false);
	unlink(scratch);
}

/* ---- invariants of an unscribbled hierarchy ---- */

static bool limited(const struct cgm_group *g)
{
	return g->memory.max != PAGE_COUNTER_MAX || g->memory.high != PAGE_COUNTER_MAX;
}

/* held[g]: the pages held by the processes in the subtree of g, for g < r->high. */
static void sum_held(const struct run *r, int64_t *held)
{
	memset(held, 0, sizeof(*held) * r->high);
	for (uint32_t i = 0; i < CGM_MAX_PROCS; i++) {
		const struct cgm_proc *p = &r->h->procs[i];
		uint32_t g = p->group;

		if (p->state != CGM_SLOT_LIVE)
			continue;
		for (int d = 0; d < 80 && g < r->high && hier_group(r->h, g); d++) {
			held[g] += proc_charged_pages(p);
			if (g == CGM_ROOT)
				break;
			g = r->h->groups[g].parent;
		}
	}
}

static void check_group(const struct run *r, uint32_t i, const int64_t *held,
			uint32_t *nr_limited)
{
	const struct cgm_hier *h = r->h;
	const struct cgm_group *g = hier_group(h, i), *p;
	uint32_t c, n = 0;
	bool linked = i == CGM_ROOT;

	if (!g)
		return;
	*nr_limited += limited(g);
	for (c = g->first_child; c != CGM_NONE && n <= r->high; c = h->groups[c].next_sibling) {
		if (!hier_group(h, c) || h->groups[c].parent != i)
			die("a child list holds a group that is not a live child", g->name);
		n++;
	}
	if (n != g->nr_children)
		die("nr_children is not the length of the child list", g->name);
	if (page_counter_read(&g->memory) != held[i])
		die("usage differs from the pages the subtree's processes hold", g->name);
	if (i == CGM_ROOT)
		return;
	p = hier_group(h, g->parent);
	for (c = p ? p->first_child : CGM_NONE, n = 0; hier_group(h, c) && n <= r->high;
	     c = h->groups[c].next_sibling, n++)
		linked |= c == i;
	if (!linked)
		die("a live group is not in its parent's child list", g->name);
}

static void check_invariants(const struct run *r)
{
	static int64_t held[CGM_MAX_GROUPS];
	uint32_t nr_limited = 0;

	sum_held(r, held);
	for (uint32_t i = 0; i < r->high; i++)
		check_group(r, i, held, &nr_limited);
	if (nr_limited != r->h->hdr->nr_limited)
		die("nr_limited is not the number of limited groups", NULL);
}

/* ---- the program ---- */

typedef void (*op_fn)(struct run *r);

static const op_fn ops[] = {
	op_mkdir, op_mkdir, op_rmdir, op_lookup, op_path, op_event,
	op_read, op_read, op_write, op_write, op_set_limit,
	op_attach, op_charge, op_free, op_move, op_detach, op_flush,
	op_scribble, op_scribble, op_header, op_truncated_copy,
};
#define NOPS (sizeof(ops) / sizeof(ops[0]))

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	struct run r = { .in = { data, size }, .h = &me.h, .high = 1, .tslot = CGM_NONE };

	if (!ready) {
		setup_once();
		ready = true;
	}
	reset();
	for (int n = 0; n < MAX_OPS && r.in.left; n++)
		ops[take(&r.in, 1) % NOPS](&r);
	if (!r.scribbled) {
		rstat_flush(r.h);
		check_invariants(&r);
	}
	close_reopened(&r);
	return 0;
}
