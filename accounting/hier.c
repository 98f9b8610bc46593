/*
 * Opening, creating and validating the hierarchy file.
 *
 * A new file is built under a temporary name and published with link(),
 * so no process ever maps a half-initialised hierarchy.  An existing file
 * is trusted only after its owner, size, magic, version, geometry and
 * header checksum have been checked; anything else is refused with one
 * line saying what was wrong, and the caller runs on without accounting --
 * except a file of another cgmalloc layout (an upgrade) that no process
 * has mapped, which is replaced by a fresh one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgm/hier.h"
#include "cgm/log.h"
#include "cgm/proc_maps.h"
#include "cgm/strbuf.h"

int hier_user_dir(const char *base, char *buf, size_t len, char *why, size_t whylen)
{
	unsigned int uid = (unsigned int)getuid();
	struct stat st;
	size_t at = 0;

	cgm_str_add(buf, len, &at, base);
	cgm_str_add(buf, len, &at, "/cgmalloc-");
	if (!cgm_str_add_u64(buf, len, &at, uid)) {
		cgm_msg_format(why, whylen, "%s: path too long", base);
		return -ENAMETOOLONG;
	}
	if (mkdir(buf, 0700) < 0 && errno != EEXIST) {
		int err = errno;

		cgm_msg_format(why, whylen, "cannot create %s: %s", buf, cgm_strerror(err));
		return -err;
	}
	/*
	 * Anyone may create a name in a sticky, world-writable directory
	 * first: only a real directory of ours that nobody else can enter
	 * will do.
	 */
	if (lstat(buf, &st) < 0) {
		int err = errno;

		cgm_msg_format(why, whylen, "cannot stat %s: %s", buf, cgm_strerror(err));
		return -err;
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 077) != 0) {
		cgm_msg_format(why, whylen,
			       "%s is not a private directory of uid %u (%s owned by uid %u, mode %03o): "
			       "remove it, or name another hierarchy= file", buf, uid,
			       S_ISDIR(st.st_mode) ? "a directory" :
			       S_ISLNK(st.st_mode) ? "a symlink" : "not a directory",
			       (unsigned int)st.st_uid, (unsigned int)(st.st_mode & 0777));
		return -EPERM;
	}
	return 0;
}

int hier_default_path(char *buf, size_t len, char *why, size_t whylen)
{
	char dir[CGM_PATH_MAX];
	int err = hier_user_dir("/dev/shm", dir, sizeof(dir), why, whylen);
	size_t at = 0;

	if (err)
		return err;
	cgm_str_add(buf, len, &at, dir);
	if (!cgm_str_add(buf, len, &at, "/hierarchy")) {
		cgm_msg_format(why, whylen, "%s: path too long", dir);
		return -ENAMETOOLONG;
	}
	return 0;
}

static size_t layout_size(void)
{
	return CGM_HIER_FILE_BYTES;
}

/* FNV-1a over the geometry fields: catches a scribbled header. */
uint64_t hier_header_checksum(const struct cgm_hier_header *hd)
{
	const unsigned char *p = (const unsigned char *)hd;
	size_t n = offsetof(struct cgm_hier_header, uid);
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

/*
 * How many of the hierarchy's locks the calling thread holds or is in
 * the middle of taking or releasing.  A child forked by a signal handler
 * that interrupted such a section must not wait for them: their owner is
 * the parent's thread.  The count covers the whole of pthread_mutex_lock
 * and pthread_mutex_unlock (a signal that lands inside the unlock finds
 * the lock word still naming this thread), so it rises before the call
 * and falls after it; the signal fences keep the compiler from moving
 * the count across the call.
 */
static CGM_TLS unsigned int locks_held;

unsigned int hier_locks_held(void)
{
	return locks_held;
}

/*
 * How many times a busy lock is looked at, a spin-wait hint apart, before
 * the thread sleeps on it: a few microseconds, a few times what the
 * sections it guards take (a stock refill holds the process lock about a
 * microsecond).  A robust mutex never spins in glibc: a thread that found
 * it held went to sleep in the kernel and was woken by a system call of
 * the unlocking one.  bench/larson's threads, refilling their stocks,
 * slept 160-380 times a run that way; spinning first, 7-55 times (median
 * 15), what they do under mimalloc alone.  1024 looks slept no less
 * often; and a holder that is not running (preempted: larson runs more
 * threads than these machines have CPUs) costs each waiter the whole
 * spin, so it is kept short.
 */
#define HIER_LOCK_SPINS 100

/*
 * pthread_mutex_trylock(), a lock whose owner died taken as consistent
 * (see hier_lock): true when @m is ours.
 */
static bool trylock_robust(pthread_mutex_t *m)
{
	int err = pthread_mutex_trylock(m);

	if (err == EOWNERDEAD)
		pthread_mutex_consistent(m);
	return err == 0 || err == EOWNERDEAD;
}

/*
 * Take @m if it comes free within HIER_LOCK_SPINS looks.  The lock word
 * is read, not written, until it reads free (glibc's robust mutex: the
 * owner's TID, 0 when free; a dead owner's reads not free, and
 * pthread_mutex_lock() then answers EOWNERDEAD), so the spinning does not
 * take the line from the holder.
 */
static bool hier_lock_spin(pthread_mutex_t *m)
{
	for (unsigned int i = 0; i < HIER_LOCK_SPINS; i++) {
		/* Lost a race for it: go on looking (a failure other than busy does the same once). */
		if (__atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED) == 0 && trylock_robust(m))
			return true;
		cgm_cpu_relax();
	}
	return false;
}

void hier_lock(pthread_mutex_t *m)
{
	locks_held++;
	atomic_signal_fence(memory_order_seq_cst);
	/*
	 * pthread_mutex_lock() reads the mutex before it writes it: on a page
	 * this process has not written yet (the first lock after attach or
	 * fork), that is a read fault, which maps the file's page read-only,
	 * then a write fault.  Writing first (an add of zero to the lock
	 * word, as hier_prefault() does) takes one fault -- 20-25 us each
	 * on these machines' guests.
	 */
	hier_write_touch(m);
	if (hier_lock_spin(m))
		return;
	/*
	 * A process killed while holding the lock leaves EOWNERDEAD: the
	 * data it guarded is made of counters and links that every user
	 * re-validates, so the lock is marked consistent and used.
	 */
	if (pthread_mutex_lock(m) == EOWNERDEAD)
		pthread_mutex_consistent(m);
}

bool hier_trylock(pthread_mutex_t *m)
{
	locks_held++;
	atomic_signal_fence(memory_order_seq_cst);
	if (!trylock_robust(m)) {
		atomic_signal_fence(memory_order_seq_cst);
		locks_held--;
		return false;
	}
	return true;
}

void hier_lock_claimed(const struct cgm_hier *h, pthread_mutex_t *m, const char *what)
{
	struct timespec ms = { 0, 1000000 };

	for (int i = 0; i < 1000; i++) {
		if (hier_trylock(m))
			return;
		nanosleep(&ms, NULL);
	}
	cgm_log("hierarchy %s: the lock of %s was held for a second while the slot was free "
		"(a corrupt file): made afresh", h->path, what);
	hier_init_shared_mutex(m);
	hier_lock(m);
}

void hier_unlock(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
	atomic_signal_fence(memory_order_seq_cst);
	locks_held--;
}

/* Inlined, as our_geometry() is: on its own it lay outside the hot list. */
static inline __attribute__((always_inline)) void set_pointers(struct cgm_hier *h, void *base,
							    size_t size)
{
	h->hdr = base;
	h->size = size;
	hier_prefault_forget(h);
	h->groups = (struct cgm_group *)((char *)base + h->hdr->groups_off);
	h->procs = (struct cgm_proc *)((char *)base + h->hdr->procs_off);
	h->threads = (struct cgm_thread_slot *)((char *)base + h->hdr->threads_off);
	/* Not a header field: the header's size is kept (mi_layout_ok stays its last 8 bytes). */
	h->keys = (struct cgm_group_key *)((char *)base + CGM_HIER_KEYS_OFF);
}

static void init_layout(void *base, size_t size)
{
	struct cgm_hier_header *hd = base;
	struct cgm_hier h;
	struct cgm_group *root;

	hd->magic = CGM_HIER_MAGIC;
	hd->version = CGM_HIER_VERSION;
	hd->header_size = sizeof(*hd);
	hd->file_size = size;
	hd->max_groups = CGM_MAX_GROUPS;
	hd->max_procs = CGM_MAX_PROCS;
	hd->max_threads = CGM_MAX_THREADS;
	hd->group_size = sizeof(struct cgm_group);
	hd->proc_size = sizeof(struct cgm_proc);
	hd->thread_size = sizeof(struct cgm_thread_slot);
	hd->groups_off = CGM_HIER_GROUPS_OFF;
	hd->procs_off = CGM_HIER_PROCS_OFF;
	hd->threads_off = CGM_HIER_THREADS_OFF;
	hd->uid = (uint32_t)getuid();
	hier_init_shared_mutex(&hd->tree_lock);
	hier_init_shared_mutex(&hd->flush_lock);
	hd->checksum = hier_header_checksum(hd);

	set_pointers(&h, base, size);
	root = &h.groups[CGM_ROOT];
	root->state = CGM_SLOT_LIVE;
	hier_map_set(hd->group_map, CGM_ROOT);
	root->parent = CGM_NONE;
	h.keys[CGM_ROOT].parent = CGM_NONE;
	root->first_child = CGM_NONE;
	root->next_sibling = CGM_NONE;
	page_counter_init(&root->memory, NULL);
	root->zswap_max = root->swap_max = INT64_MAX;
	root->zswap_writeback = 1;
	psi_init(&root->psi);
}

/*
 * The header's table sizes and offsets are this build's.  Inlined: its
 * callers are in the hot list; on its own (as layout 21 made it at first)
 * it lay outside it, and every process mapped a second window of code.
 */
static inline __attribute__((always_inline)) bool our_geometry(const struct cgm_hier_header *hd)
{
	return hd->max_groups == CGM_MAX_GROUPS && hd->max_procs == CGM_MAX_PROCS &&
	       hd->max_threads == CGM_MAX_THREADS &&
	       hd->group_size == sizeof(struct cgm_group) &&
	       hd->proc_size == sizeof(struct cgm_proc) &&
	       hd->thread_size == sizeof(struct cgm_thread_slot) &&
	       hd->groups_off == CGM_HIER_GROUPS_OFF && hd->procs_off == CGM_HIER_PROCS_OFF &&
	       hd->threads_off == CGM_HIER_THREADS_OFF;
}

/*
 * A header that another cgmalloc wrote for its own layout: our magic, and
 * another version; or our version with a header of another size (its
 * checksum is then elsewhere); or a self-consistent header (the checksum
 * matches) whose geometry is not ours -- a build of the same version with
 * other sizes.  Not corruption: such a file may be replaced once nobody
 * uses it.  A file of our own geometry whose size is wrong is not
 * another build's but truncated or grown: its groups and limits are the
 * user's, and it is refused, never replaced (it once was, silently).
 */
static bool other_build(const struct cgm_hier_header *hd)
{
	if (hd->magic != CGM_HIER_MAGIC)
		return false;
	return hd->version != CGM_HIER_VERSION || hd->header_size != sizeof(*hd) ||
	       (hd->checksum == hier_header_checksum(hd) && !our_geometry(hd));
}

/* Check everything in the header that the accessors rely on. */
static int validate(const struct cgm_hier_header *hd, size_t size,
		    char *why, size_t whylen)
{
	if (size < sizeof(*hd)) {
		cgm_msg_format(why, whylen, "truncated (%zu bytes, header needs %zu)", size,
			       sizeof(*hd));
		return -EINVAL;
	}
	if (hd->magic != CGM_HIER_MAGIC) {
		cgm_msg_format(why, whylen, "not a cgmalloc hierarchy (bad magic)");
		return -EINVAL;
	}
	if (hd->version != CGM_HIER_VERSION) {
		cgm_msg_format(why, whylen, "layout version %u, this library reads version %u "
			       "(remove the file once no process uses it)",
			       hd->version, CGM_HIER_VERSION);
		return -EPROTO;
	}
	if (hd->header_size != sizeof(*hd) || !our_geometry(hd) ||
	    hd->checksum != hier_header_checksum(hd)) {
		cgm_msg_format(why, whylen, "corrupt header or another build's layout (geometry or "
			       "checksum does not match; remove the file once no process uses it)");
		return -EINVAL;
	}
	if (hd->file_size != size || size != layout_size()) {
		cgm_msg_format(why, whylen, "truncated or resized (%zu bytes, expected %zu)",
			       size, layout_size());
		return -EINVAL;
	}
	return 0;
}

/* Build a new hierarchy under a temporary name and publish it at @path. */
static int create_file(const char *path, char *why, size_t whylen)
{
	char tmp[CGM_PATH_MAX + 32];
	size_t size = layout_size();
	void *base;
	int fd, err = 0;

	snprintf(tmp, sizeof(tmp), "%s.new.%d", path, (int)getpid());
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		cgm_msg_format(why, whylen, "cannot create %s: %s", tmp, cgm_strerror(errno));
		return -errno;
	}
	/*
	 * The storage is reserved now: a sparse file on a full /dev/shm would
	 * let a later first touch of a page kill every user with SIGBUS.
	 */
	err = -posix_fallocate(fd, 0, (off_t)size);
	if (err) {
		cgm_msg_format(why, whylen, "cannot reserve %zu KiB for %s: %s", size >> 10, tmp,
			       cgm_strerror(-err));
		goto out;
	}
	base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		err = -errno;
		cgm_msg_format(why, whylen, "cannot map %s: %s", tmp, cgm_strerror(errno));
		goto out;
	}
	init_layout(base, size);
	munmap(base, size);
	/* link() fails if another process published first: theirs is used. */
	if (link(tmp, path) < 0 && errno != EEXIST) {
		err = -errno;
		cgm_msg_format(why, whylen, "cannot create %s: %s", path, cgm_strerror(errno));
	}
out:
	close(fd);
	unlink(tmp);
	return err;
}

/*
 * Is the file (device @dev, inode @ino) mapped by any process we can see?
 * Read /proc/<pid>/maps for every pid; only used when a file of another
 * layout is found, to decide whether it may be replaced.  Raw reads into
 * stack buffers (no DIR or FILE): this runs at start-up, maybe inside malloc.
 */
static bool file_in_use(dev_t dev, ino_t ino)
{
	char ents[4096], path[300], *line;
	struct cgm_line_reader r;
	struct cgm_maps_line v;
	int proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	bool used = false;
	long n;

	if (proc < 0)
		return true;
	while (!used && (n = syscall(SYS_getdents64, proc, ents, sizeof(ents))) > 0) {
		for (long off = 0; off < n && !used;) {
			struct dirent64 *d = (struct dirent64 *)(ents + off);

			off += d->d_reclen;
			if (d->d_name[0] < '0' || d->d_name[0] > '9')
				continue;
			snprintf(path, sizeof(path), "/proc/%s/maps", d->d_name);
			r.fd = open(path, O_RDONLY | O_CLOEXEC);
			if (r.fd < 0)
				continue;
			r.pos = r.len = 0;
			r.cut = false;
			while (!used && (line = cgm_next_line(&r)))
				used = cgm_parse_maps_line(line, &v) && v.inode == (uintptr_t)ino &&
				       makedev(v.major, v.minor) == dev;
			close(r.fd);
		}
	}
	close(proc);
	return used;
}

/*
 * A hierarchy of another layout (an older or newer cgmalloc) that no
 * process has mapped is replaced by a fresh one; one in use is refused.
 */
static bool replace_unused_foreign(const char *path, const struct stat *st,
				   char *why, size_t whylen)
{
	if (file_in_use(st->st_dev, st->st_ino))
		return false;
	if (unlink(path) < 0)
		return false;
	return create_file(path, why, whylen) == 0;
}

int hier_open(struct cgm_hier *h, const char *path, bool create,
	      char *why, size_t whylen)
{
	bool replaced = false;
	struct stat st;
	void *base;
	int fd, err;

	memset(h, 0, sizeof(*h));
	if (strlen(path) >= sizeof(h->path)) {
		cgm_msg_format(why, whylen, "hierarchy path too long");
		return -ENAMETOOLONG;
	}
	memcpy(h->path, path, strlen(path) + 1);
reopen:
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && errno == ENOENT && create) {
		err = create_file(path, why, whylen);
		if (err)
			return err;
		fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	}
	if (fd < 0) {
		err = -errno;
		/* O_NOFOLLOW's ELOOP reads "too many levels of symbolic links" for one. */
		if (errno == ELOOP)
			cgm_msg_format(why, whylen, "cannot open %s: a symbolic link, which is not "
				       "followed (name the file itself)", path);
		else
			cgm_msg_format(why, whylen, "cannot open %s: %s", path, cgm_strerror(errno));
		return err;
	}
	if (fstat(fd, &st) < 0) {
		err = -errno;
		cgm_msg_format(why, whylen, "cannot stat %s: %s", path, cgm_strerror(errno));
		close(fd);
		return err;
	}
	if (st.st_uid != getuid()) {
		cgm_msg_format(why, whylen, "%s belongs to uid %u, not to this user (uid %u)",
			       path, (unsigned)st.st_uid, (unsigned)getuid());
		close(fd);
		return -EPERM;
	}
	if (!S_ISREG(st.st_mode) || (size_t)st.st_size < sizeof(struct cgm_hier_header)) {
		cgm_msg_format(why, whylen, "%s: truncated or not a regular file (%lld bytes)",
			       path, (long long)st.st_size);
		close(fd);
		return -EINVAL;
	}
	base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (base == MAP_FAILED) {
		err = -errno;
		cgm_msg_format(why, whylen, "cannot map %s: %s", path, cgm_strerror(errno));
		return err;
	}
	/*
	 * The header's pages are read at once and on every slow path: write
	 * them first, so that they alone are mapped (hier_prefault() says
	 * why); the add of zero leaves a foreign file as it was.
	 */
	for (size_t off = 0; off < sizeof(struct cgm_hier_header) && off < (size_t)st.st_size;
	     off += (size_t)1 << CGM_HIER_UNIT_SHIFT)
		hier_write_touch((char *)base + off);
	err = validate(base, (size_t)st.st_size, why, whylen);
	if (err && create && !replaced && (size_t)st.st_size >= sizeof(struct cgm_hier_header) &&
	    other_build(base)) {
		char ignored[256];

		/* Another cgmalloc's layout: replace it if nobody uses it. */
		munmap(base, (size_t)st.st_size);
		if (replace_unused_foreign(path, &st, ignored, sizeof(ignored))) {
			replaced = true;
			goto reopen;
		}
		snprintf(ignored, sizeof(ignored), "%s", why);
		cgm_msg_format(why, whylen, "%s: %s", path, ignored);
		return err;
	}
	if (err) {
		char detail[256];

		snprintf(detail, sizeof(detail), "%s", why);
		cgm_msg_format(why, whylen, "%s: %s", path, detail);
		munmap(base, (size_t)st.st_size);
		return err;
	}
	/*
	 * A process touches a few scattered pages of the file (its slots,
	 * its groups, the header): reading ahead around them is wasted.
	 * MADV_RANDOM stops readahead only (a file not in /dev/shm): a read
	 * fault still maps up to fifteen neighbours already in the page cache
	 * (fault-around), which hier_prefault() avoids for the slots.
	 */
	madvise(base, (size_t)st.st_size, MADV_RANDOM);
	set_pointers(h, base, (size_t)st.st_size);
	page_counter_add_domain(base, (size_t)st.st_size);
	return 0;
}

/* Has this process written a unit of the page at @off (or is it the header's)? */
static bool page_used(const struct cgm_hier *h, size_t off, size_t page)
{
	if (off < sizeof(struct cgm_hier_header))
		return true;
	for (size_t u = off >> CGM_HIER_UNIT_SHIFT;
	     u < (off + page) >> CGM_HIER_UNIT_SHIFT && u < CGM_HIER_UNITS; u++)
		if (__atomic_load_n(&h->prefaulted[u / 64], __ATOMIC_RELAXED) & (1ULL << (u % 64)))
			return true;
	return false;
}

/*
 * The file is 34.6 MB, and a process uses a few of its pages: locked
 * whole, it sat in every process that locks its memory (python3 calling
 * mlockall: 81 MB locked against mimalloc's 46 MB alone).  The pages let
 * go are the file's (a shared mapping): unmapping them loses nothing, and
 * a later touch maps them again, unlocked.  The pages kept locked are
 * those the process writes, so its allocation paths still take no fault.
 */
void hier_release_unused(struct cgm_hier *h)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), off = 0;
	char *base = (char *)h->hdr;

	if (!base)
		return;
	while (off < h->size) {
		size_t from;

		if (page_used(h, off, page)) {
			off += page;
			continue;
		}
		for (from = off; off < h->size && !page_used(h, off, page); off += page)
			;
		if (off > h->size)
			off = h->size;
		if (munlock(base + from, off - from) == 0)
			madvise(base + from, off - from, MADV_DONTNEED);
	}
}

void hier_close(struct cgm_hier *h)
{
	if (h->hdr) {
		page_counter_remove_domain(h->hdr);
		munmap(h->hdr, h->size);
	}
	h->hdr = NULL;
}

struct cgm_group *hier_group(const struct cgm_hier *h, uint32_t idx)
{
	struct cgm_group *g;

	if (idx >= CGM_MAX_GROUPS)
		return NULL;
	g = &h->groups[idx];
	/* What the accessors hand out is read next: map just its pages. */
	hier_prefault(h, g, sizeof(*g));
	return __atomic_load_n(&g->state, __ATOMIC_ACQUIRE) == CGM_SLOT_LIVE ? g : NULL;
}

struct cgm_proc *hier_proc(const struct cgm_hier *h, uint32_t idx)
{
	if (idx >= CGM_MAX_PROCS)
		return NULL;
	hier_prefault(h, &h->procs[idx], sizeof(h->procs[idx]));
	return &h->procs[idx];
}

struct cgm_thread_slot *hier_thread(const struct cgm_hier *h, uint32_t idx)
{
	if (idx >= CGM_MAX_THREADS)
		return NULL;
	hier_prefault(h, &h->threads[idx], sizeof(h->threads[idx]));
	return &h->threads[idx];
}

uint32_t hier_group_index(const struct cgm_hier *h, const struct cgm_group *g)
{
	return (uint32_t)(g - h->groups);
}

uint32_t hier_proc_index(const struct cgm_hier *h, const struct cgm_proc *p)
{
	return (uint32_t)(p - h->procs);
}

uint32_t hier_thread_index(const struct cgm_hier *h, const struct cgm_thread_slot *t)
{
	uintptr_t off = (uintptr_t)t - (uintptr_t)h->threads;

	return off % sizeof(*t) == 0 && off / sizeof(*t) < CGM_MAX_THREADS ?
	       (uint32_t)(off / sizeof(*t)) : CGM_NONE;
}

void hier_bump_epoch(struct cgm_hier *h)
{
	__atomic_add_fetch(&h->hdr->epoch, 1, __ATOMIC_RELEASE);
}
