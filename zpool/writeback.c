/*
 * Writeback of the oldest entries to a backing file, through io_uring.
 *
 * One writer at a time takes a batch of the oldest in-memory entries off
 * the LRU, copies their compressed objects into buffers registered with
 * the ring once at creation, and submits the batch in one io_uring_enter;
 * as each write completes, the entry switches to "on disk" and its object
 * is freed.  File space is handed out in 256-byte sectors from a bitmap,
 * lowest free run first, so the space of invalidated entries is reused
 * and the file stays as short as its live contents allow.
 *
 * A write that fails (I/O error, full disk, short write) keeps its entry
 * in memory, back at the old end of the LRU; the event is counted and
 * reported once on stderr.  Nothing is lost.  A failure also starts a
 * backoff, because a full or failing device usually stays so for a while
 * and every attempt costs a batch of copies, writes and error counts:
 *   - the next writeback, whoever asks for it, starts with a probe of one
 *     write, and goes on with whole batches only if that one lands;
 *   - the pool's own writeback, made by a store at the limit, is not
 *     attempted at all for 1 ms after a failure, doubled at each failure
 *     that follows up to 1 s (the store is refused at once meanwhile),
 *     and at once again when file space is freed after an ENOSPC;
 *   - a write that lands ends the backoff.
 * zp_writeback itself is always attempted: its caller paces it.
 *
 * Each entry written carries a checksum (csum.c) of the bytes written,
 * checked when they are read back: bytes changed in the file make the
 * load fail with -EIO instead of returning them.
 *
 * Loads of written-back entries read through a few rings of their own,
 * each with one registered page buffer, so concurrent loads rarely share
 * one and never wait for a writeback batch.
 *
 * The file is written and read through the page cache, which would keep
 * a copy of everything written back: memory the group no longer counts,
 * but still memory (the kernel's swap keeps no such copy).  So each batch
 * written is sent to the disk at once (sync_file_range, not waited for),
 * and the next writeback drops those pages, clean by then, from the cache
 * (POSIX_FADV_DONTNEED, which leaves a page still dirty where it is:
 * nothing is lost).  A load drops the pages it read.  What the last
 * writeback wrote stays cached until the next one, or until the kernel
 * evicts it.  On tmpfs the file is memory whatever is done (the advice
 * does nothing there).
 *
 * Without io_uring (kernel too old, or forbidden by seccomp/sysctl) the
 * same paths use pwrite/pread, and say so once.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>

#include "cgm/log.h"
#include "cgm/own_fds.h"
#include "zp_types.h"

#define ZP_SECTOR_SHIFT		8
#define ZP_SECTOR		(1u << ZP_SECTOR_SHIFT)
#define ZP_WB_MAX_BATCH		256u
#define ZP_NR_RD		4
#define ZP_SPACE_NONE		UINT64_MAX
#define ZP_WB_BACKOFF_MIN_NS	1000000ull		/* 1 ms */
#define ZP_WB_BACKOFF_MAX_NS	1000000000ull		/* 1 s */

struct zp_rd {
	pthread_mutex_t lock;
	bool uring;			/* the ring works (under lock) */
	struct io_uring ring;
	unsigned char *buf;		/* one page, registered */
} __attribute__((aligned(64)));

struct zp_wb {
	int fd;
	bool rings;			/* the rings exist */
	bool uring;			/* writes use the ring (under lock) */
	unsigned batch;
	pthread_mutex_t lock;		/* one writeback at a time */
	struct io_uring ring;
	unsigned char *bufs;		/* batch pages, registered */
	struct iovec iov[ZP_WB_MAX_BATCH];
	uint32_t ids[ZP_WB_MAX_BATCH];
	uint64_t off[ZP_WB_MAX_BATCH];
	uint32_t len[ZP_WB_MAX_BATCH];
	int res[ZP_WB_MAX_BATCH];

	pthread_mutex_t space_lock;
	uint64_t *bitmap;		/* one bit per sector, 1 = in use */
	uint64_t nr_sectors;
	uint64_t low;			/* every sector below is in use */
	_Atomic uint64_t used_sectors;

	struct zp_rd rd[ZP_NR_RD];

	/* Backoff after a failed write (see the top of the file). */
	_Atomic uint64_t retry_ns;	/* limit path waits until; 0: go */
	_Atomic int last_err;		/* errno of the last failure; 0: none */
	uint64_t backoff_ns;		/* current delay; 0: healthy (lock) */
	bool probe;			/* start with one write (lock) */

	/* Written since the last drop from the page cache (lock). */
	bool undropped;

	_Atomic unsigned fail_count;
	_Atomic int fail_err;
	int logged_write, logged_read, logged_csum, logged_uring;
};

/*
 * Drop the whole pages of [lo, hi) of the file from the page cache: the
 * kernel drops only pages that are wholly inside the range, so it is
 * rounded out (other entries' bytes in the edge pages are on disk too).
 */
static void drop_cached(struct zp_wb *wb, uint64_t lo, uint64_t hi)
{
	lo &= ~(uint64_t)(ZP_PAGE_SIZE - 1);
	hi = (hi + ZP_PAGE_SIZE - 1) & ~(uint64_t)(ZP_PAGE_SIZE - 1);
	if (hi > lo)
		(void)posix_fadvise(wb->fd, (off_t)lo, (off_t)(hi - lo), POSIX_FADV_DONTNEED);
}

/*
 * The batches written before this writeback, clean by now, out of the
 * cache (lock).  The whole file: the cache may hold a written range in
 * large folios that reach past its ends, which a drop of the range alone
 * leaves (ext4: a 128 KiB folio at the end of a range stayed).
 */
static void drop_written(struct zp_wb *wb)
{
	if (wb->undropped)
		(void)posix_fadvise(wb->fd, 0, 0, POSIX_FADV_DONTNEED);
	wb->undropped = false;
}

/*
 * Entries [0, n) of the batch landed (or some did): start the disk
 * writes of the range now, so that the next writeback finds its pages
 * clean and can drop them (lock).
 */
static void start_disk_write(struct zp_wb *wb, unsigned n)
{
	uint64_t lo = UINT64_MAX, hi = 0;

	for (unsigned i = 0; i < n; i++) {
		if (wb->res[i] != (int)wb->len[i])
			continue;
		if (wb->off[i] < lo)
			lo = wb->off[i];
		if (wb->off[i] + wb->len[i] > hi)
			hi = wb->off[i] + wb->len[i];
	}
	if (hi <= lo)
		return;
	(void)sync_file_range(wb->fd, (off_t)lo, (off_t)(hi - lo), SYNC_FILE_RANGE_WRITE);
	wb->undropped = true;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- file space ---- */

static bool bit_test(const uint64_t *map, uint64_t i)
{
	return map[i >> 6] >> (i & 63) & 1;
}

static void bits_set(uint64_t *map, uint64_t i, unsigned n, bool on)
{
	for (uint64_t j = i; j < i + n; j++) {
		if (on)
			map[j >> 6] |= 1ull << (j & 63);
		else
			map[j >> 6] &= ~(1ull << (j & 63));
	}
}

/* First run of @k free sectors in [from, to), or ZP_SPACE_NONE. */
static uint64_t space_scan(struct zp_wb *wb, uint64_t from, uint64_t to,
			   unsigned k)
{
	unsigned run = 0;

	for (uint64_t i = from; i < to; i++) {
		if ((i & 63) == 0 && wb->bitmap[i >> 6] == UINT64_MAX &&
		    i + 64 <= to) {
			i += 63;
			run = 0;
			continue;
		}
		run = bit_test(wb->bitmap, i) ? 0 : run + 1;
		if (run == k)
			return i + 1 - k;
	}
	return ZP_SPACE_NONE;
}

static uint64_t space_alloc(struct zp_wb *wb, uint32_t len)
{
	unsigned k = (len + ZP_SECTOR - 1) >> ZP_SECTOR_SHIFT;
	uint64_t s;

	pthread_mutex_lock(&wb->space_lock);
	s = space_scan(wb, wb->low, wb->nr_sectors, k);
	if (s != ZP_SPACE_NONE) {
		bits_set(wb->bitmap, s, k, true);
		if (s == wb->low)
			wb->low = s + k;
		atomic_fetch_add_explicit(&wb->used_sectors, k, memory_order_relaxed);
	}
	pthread_mutex_unlock(&wb->space_lock);
	return s == ZP_SPACE_NONE ? s : s << ZP_SECTOR_SHIFT;
}

static void space_free(struct zp_wb *wb, uint64_t offset, uint32_t len)
{
	unsigned k = (len + ZP_SECTOR - 1) >> ZP_SECTOR_SHIFT;

	pthread_mutex_lock(&wb->space_lock);
	bits_set(wb->bitmap, offset >> ZP_SECTOR_SHIFT, k, false);
	if (offset >> ZP_SECTOR_SHIFT < wb->low)
		wb->low = offset >> ZP_SECTOR_SHIFT;
	pthread_mutex_unlock(&wb->space_lock);
	atomic_fetch_sub_explicit(&wb->used_sectors, k, memory_order_relaxed);
}

/* The file space of an invalidated entry: free, and where writeback
 * stopped for want of space, worth another try now. */
void zp_wb_space_free(struct zp_pool *pool, uint64_t offset, uint32_t len)
{
	struct zp_wb *wb = pool->wb;

	space_free(wb, offset, len);
	if (atomic_load_explicit(&wb->last_err, memory_order_relaxed) == ENOSPC)
		atomic_store_explicit(&wb->retry_ns, 0, memory_order_relaxed);
}

/*
 * Is the pool's own writeback backing off after a failure?  Read without
 * the writeback lock: a stale answer costs one early probe or one refused
 * store, never an entry.
 */
bool zp_wb_backing_off(struct zp_pool *pool)
{
	uint64_t until = atomic_load_explicit(&pool->wb->retry_ns,
					      memory_order_relaxed);

	return until && now_ns() < until;
}

uint64_t zp_wb_space_used(struct zp_pool *pool)
{
	if (!pool->wb)
		return 0;
	return atomic_load_explicit(&pool->wb->used_sectors,
				    memory_order_relaxed) << ZP_SECTOR_SHIFT;
}

/* ---- setup ---- */

/*
 * A ring's descriptor is the library's like the backing file's: moved out
 * of the program's low numbers and guarded (cgm/own_fds.h).  They sat at
 * 3-7, where a program's dup2() onto 3 or its close_range() would have
 * taken the rings that read written-back pages in.  The ring works on
 * through any descriptor of its file; liburing enters it through
 * enter_ring_fd, which is ring_fd while no ring fd is registered.
 */
static void ring_keep(struct io_uring *ring)
{
	ring->ring_fd = ring->enter_ring_fd = cgm_fd_keep(ring->ring_fd);
}

/* io_uring_queue_exit() closes the descriptor: unguarded first, or the shim's close() keeps it. */
static void ring_exit(struct io_uring *ring)
{
	cgm_fd_forget(ring->ring_fd);
	io_uring_queue_exit(ring);
}

static int ring_init(struct io_uring *ring, unsigned entries,
		     const struct iovec *iov, unsigned nbufs)
{
	int ret = io_uring_queue_init(entries, ring, 0);

	if (ret < 0)
		return ret;
	ret = io_uring_register_buffers(ring, iov, nbufs);
	if (ret < 0)
		io_uring_queue_exit(ring);
	else
		ring_keep(ring);
	return ret;
}

int zp_wb_init(struct zp_pool *pool)
{
	struct zp_wb *wb;
	int ret;

	wb = zp_map(sizeof(*wb), false);
	if (!wb)
		return -ENOMEM;
	pool->wb = wb;
	wb->fd = -1;
	pthread_mutex_init(&wb->lock, NULL);
	pthread_mutex_init(&wb->space_lock, NULL);
	wb->batch = pool->opt.wb_batch;
	wb->nr_sectors = pool->opt.backing_max >> ZP_SECTOR_SHIFT;
	wb->bitmap = zp_map((wb->nr_sectors + 63) / 64 * 8, true);
	wb->bufs = zp_map((size_t)wb->batch * ZP_PAGE_SIZE, false);
	for (unsigned i = 0; i < ZP_NR_RD; i++) {
		pthread_mutex_init(&wb->rd[i].lock, NULL);
		wb->rd[i].buf = zp_map(ZP_PAGE_SIZE, false);
		if (!wb->rd[i].buf)
			return -ENOMEM;
	}
	if (!wb->bitmap || !wb->bufs)
		return -ENOMEM;
	/* Kept (cgm/own_fds.h): a number the program reused would get our pages. */
	wb->fd = cgm_fd_keep(open(pool->backing_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
				  0600));
	if (wb->fd < 0) {
		ret = -errno;
		cgm_log("zpool: cannot open backing file %s: %s",
			pool->backing_path, zp_strerror(-ret));
		return ret;
	}
	/* A file in memory saves no memory: say so once (the pool works all the same). */
	{
		struct statfs fs;

		if (fstatfs(wb->fd, &fs) == 0 &&
		    (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC))
			cgm_log("zpool: backing file %s is in memory (tmpfs): what is written "
				"back there still takes memory; put it on a disk",
				pool->backing_path);
	}
	/*
	 * Loads read a few hundred bytes here and there: no read-ahead, so a
	 * load brings one page into the cache, and drops just that one.
	 */
	(void)posix_fadvise(wb->fd, 0, 0, POSIX_FADV_RANDOM);
	/* The buffers exist with or without a ring: pwrite uses them too. */
	for (unsigned i = 0; i < wb->batch; i++) {
		wb->iov[i].iov_base = wb->bufs + (size_t)i * ZP_PAGE_SIZE;
		wb->iov[i].iov_len = ZP_PAGE_SIZE;
	}
	ret = ring_init(&wb->ring, wb->batch, wb->iov, wb->batch);
	for (unsigned i = 0; ret == 0 && i < ZP_NR_RD; i++) {
		struct iovec iov = { .iov_base = wb->rd[i].buf,
				     .iov_len = ZP_PAGE_SIZE };

		ret = ring_init(&wb->rd[i].ring, 2, &iov, 1);
		if (ret < 0) {
			while (i--)
				ring_exit(&wb->rd[i].ring);
			ring_exit(&wb->ring);
		}
	}
	wb->rings = wb->uring = ret == 0;
	for (unsigned i = 0; i < ZP_NR_RD; i++)
		wb->rd[i].uring = wb->uring;
	if (!wb->uring)
		cgm_log_once(&wb->logged_uring,
			     "zpool: io_uring unavailable (%s); writeback to %s uses pwrite/pread",
			     zp_strerror(-ret), pool->backing_path);
	return 0;
}

void zp_wb_destroy(struct zp_pool *pool)
{
	struct zp_wb *wb = pool->wb;

	if (!wb)
		return;
	if (wb->rings) {
		ring_exit(&wb->ring);
		for (unsigned i = 0; i < ZP_NR_RD; i++)
			ring_exit(&wb->rd[i].ring);
	}
	cgm_fd_close(wb->fd);
	for (unsigned i = 0; i < ZP_NR_RD; i++)
		zp_unmap(wb->rd[i].buf, ZP_PAGE_SIZE);
	zp_unmap(wb->bufs, (size_t)wb->batch * ZP_PAGE_SIZE);
	zp_unmap(wb->bitmap, (wb->nr_sectors + 63) / 64 * 8);
	zp_unmap(wb, sizeof(*wb));
	pool->wb = NULL;
}

void zp_test_fail_writes(struct zp_pool *pool, unsigned count, int err)
{
	if (!pool->wb)
		return;
	atomic_store(&pool->wb->fail_err, err);
	atomic_store(&pool->wb->fail_count, count);
}

/* ---- writing ---- */

/* Reap @nr completions of the write ring into wb->res. */
static void reap(struct zp_wb *wb, unsigned nr)
{
	for (unsigned done = 0; done < nr; done++) {
		struct io_uring_cqe *cqe;
		int ret;

		do
			ret = io_uring_wait_cqe(&wb->ring, &cqe);
		while (ret == -EINTR);
		if (ret < 0)
			return;		/* their res stay -EIO */
		if (cqe->user_data < ZP_WB_MAX_BATCH)
			wb->res[cqe->user_data] = cqe->res;
		io_uring_cqe_seen(&wb->ring, cqe);
	}
}

/*
 * Write the batch's n buffers (lengths in wb->len); results, bytes written
 * or -errno, into wb->res.  If the ring refuses a submission it is not
 * used again: those writes count as failed now (their entries stay in
 * memory) and later batches use pwrite.
 */
static void write_batch(struct zp_pool *pool, struct zp_wb *wb, unsigned n)
{
	unsigned queued = 0;
	int ret;

	for (unsigned i = 0; i < n; i++) {
		if (wb->off[i] == ZP_SPACE_NONE) {
			wb->res[i] = -ENOSPC;
		} else if (!wb->uring) {
			ssize_t r = pwrite(wb->fd, wb->iov[i].iov_base, wb->len[i],
					   (off_t)wb->off[i]);

			wb->res[i] = r < 0 ? -errno : (int)r;
		} else {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&wb->ring);

			io_uring_prep_write_fixed(sqe, wb->fd, wb->iov[i].iov_base,
						  wb->len[i], wb->off[i], (int)i);
			io_uring_sqe_set_data64(sqe, i);
			wb->res[i] = -EIO;	/* until its completion says */
			queued++;
		}
	}
	if (queued) {
		do
			ret = io_uring_submit_and_wait(&wb->ring, queued);
		while (ret == -EINTR);
		reap(wb, ret > 0 ? (unsigned)ret : 0);
		if (ret < (int)queued) {
			wb->uring = false;
			cgm_log_once(&wb->logged_uring,
				     "zpool: io_uring submission to %s failed (%s); "
				     "writeback goes on with pwrite",
				     pool->backing_path,
				     zp_strerror(ret < 0 ? -ret : EAGAIN));
		}
	}
	/* The test hook turns completed writes into failures. */
	for (unsigned i = 0; i < n; i++) {
		unsigned c = atomic_load(&wb->fail_count);

		while (c && wb->res[i] >= 0 &&
		       !atomic_compare_exchange_weak(&wb->fail_count, &c, c - 1))
			;
		if (c && wb->res[i] >= 0)
			wb->res[i] = -atomic_load(&wb->fail_err);
	}
}

/* The write of entry e landed: switch it to disk, free its object. */
static void finish_written(struct zp_pool *pool, zp_entry_t e, uint64_t off)
{
	struct zp_entry *ent = &pool->entry[e];
	/* Ours until the switch below; the owner may free it right after. */
	uint32_t len = ent->len;
	zp_handle_t handle = ent->handle;

	atomic_store_explicit(&ent->offset, off, memory_order_relaxed);
	if (!zp_entry_switch(pool, e, ZE_DISK)) {
		/* Invalidated while in flight: finish its free. */
		space_free(pool->wb, off, len);
		zp_free(pool, handle);
		zp_entry_release(pool, e);
		return;
	}
	zp_free(pool, handle);
	zp_stat_sub(pool, st_orig, ZP_PAGE_SIZE);
	zp_stat_sub(pool, st_compr, len);
	if (len == ZP_PAGE_SIZE)
		zp_stat_sub(pool, st_huge, 1);
	zp_stat_add(pool, st_written, 1);
	zp_stat_add(pool, st_on_disk, 1);
}

/* The write of entry e failed: keep it in memory, oldest again. */
static void finish_failed(struct zp_pool *pool, zp_entry_t e, uint64_t off,
			  int err)
{
	struct zp_entry *ent = &pool->entry[e];

	if (off != ZP_SPACE_NONE)
		space_free(pool->wb, off, ent->len);
	zp_stat_add(pool, st_wb_errors, 1);
	cgm_log_once(&pool->wb->logged_write,
		     "zpool: writeback to %s failed: %s; entries stay in memory",
		     pool->backing_path, zp_strerror(err));
	pthread_mutex_lock(&pool->lru_lock);
	if (atomic_load_explicit(&ent->state, memory_order_acquire) & ZE_DOOMED) {
		pthread_mutex_unlock(&pool->lru_lock);
		zp_free(pool, ent->handle);
		zp_entry_release(pool, e);
		return;
	}
	atomic_fetch_and_explicit(&ent->state, ~ZE_WB, memory_order_release);
	zp_lru_add_head(pool, e);
	pthread_mutex_unlock(&pool->lru_lock);
}

/* Take up to @max of the oldest entries, copy their objects into the
 * registered buffers and checksum the copies.  Returns how many. */
static unsigned gather_batch(struct zp_pool *pool, struct zp_wb *wb,
			     unsigned max)
{
	unsigned n = 0;

	pthread_mutex_lock(&pool->lru_lock);
	while (n < max) {
		zp_entry_t e = zp_lru_pop_oldest(pool);

		if (!e)
			break;
		atomic_fetch_or_explicit(&pool->entry[e].state, ZE_WB,
					 memory_order_relaxed);
		wb->ids[n++] = e;
	}
	pthread_mutex_unlock(&pool->lru_lock);
	/* Our WB flag keeps the objects alive: invalidation defers to us. */
	for (unsigned i = 0; i < n; i++) {
		struct zp_entry *ent = &pool->entry[wb->ids[i]];
		const void *p = zp_obj_read_begin(pool, ent->handle, NULL);

		wb->len[i] = ent->len;
		wb->off[i] = p ? space_alloc(wb, ent->len) : ZP_SPACE_NONE;
		if (p) {
			memcpy(wb->iov[i].iov_base, p, ent->len);
			zp_obj_read_end(pool, ent->handle, p);
			/* Published with ZE_DISK, which loads acquire. */
			ent->csum = zp_csum(wb->iov[i].iov_base, ent->len);
		}
	}
	return n;
}

/* After a writeback that wrote @written and failed with @err (0: none):
 * start, lengthen or end the backoff (writeback lock held). */
static void backoff_update(struct zp_wb *wb, unsigned long written, int err)
{
	if (err) {
		wb->backoff_ns = wb->backoff_ns ? wb->backoff_ns * 2 :
				 ZP_WB_BACKOFF_MIN_NS;
		if (wb->backoff_ns > ZP_WB_BACKOFF_MAX_NS)
			wb->backoff_ns = ZP_WB_BACKOFF_MAX_NS;
		wb->probe = true;
		atomic_store_explicit(&wb->last_err, err, memory_order_relaxed);
		atomic_store_explicit(&wb->retry_ns, now_ns() + wb->backoff_ns,
				      memory_order_relaxed);
	} else if (written) {
		wb->backoff_ns = 0;
		wb->probe = false;
		atomic_store_explicit(&wb->last_err, 0, memory_order_relaxed);
		atomic_store_explicit(&wb->retry_ns, 0, memory_order_relaxed);
	}
}

long zp_writeback(struct zp_pool *pool, unsigned long nr)
{
	struct zp_wb *wb = pool->wb;
	unsigned long written = 0;
	int err = 0;

	if (!wb)
		return -ENODEV;
	pthread_mutex_lock(&wb->lock);
	drop_written(wb);
	while (written < nr && !err) {
		/* After a failure, one write tells whether the device is back
		 * before a whole batch is spent on it. */
		unsigned max = wb->probe ? 1 : wb->batch;
		unsigned n;

		if (nr - written < max)
			max = (unsigned)(nr - written);
		n = gather_batch(pool, wb, max);

		if (n == 0)
			break;
		write_batch(pool, wb, n);
		start_disk_write(wb, n);
		/* Failures go back to the head youngest first, so the batch
		 * keeps its order there; the oldest one's error is reported. */
		for (unsigned j = n; j-- > 0;) {
			zp_entry_t e = wb->ids[j];

			if (wb->res[j] == (int)wb->len[j]) {
				finish_written(pool, e, wb->off[j]);
				written++;
			} else {
				err = wb->res[j] < 0 ? -wb->res[j] : ENOSPC;
				finish_failed(pool, e, wb->off[j], err);
			}
		}
		if (!err)
			wb->probe = false;
	}
	backoff_update(wb, written, err);
	pthread_mutex_unlock(&wb->lock);
	if (written == 0 && err)
		return -err;
	return (long)written;
}

/* ---- reading ---- */

/* One read through the ring; -EAGAIN if the ring refused it. */
static int read_uring(struct zp_wb *wb, struct zp_rd *rd, uint64_t off,
		      uint32_t len, uint32_t at)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&rd->ring);
	struct io_uring_cqe *cqe;
	int res;

	io_uring_prep_read_fixed(sqe, wb->fd, rd->buf + at, len, off, 0);
	do
		res = io_uring_submit_and_wait(&rd->ring, 1);
	while (res == -EINTR);
	if (res != 1)
		return -EAGAIN;
	do
		res = io_uring_wait_cqe(&rd->ring, &cqe);
	while (res == -EINTR);
	if (res < 0)
		return res;
	res = cqe->res;
	io_uring_cqe_seen(&rd->ring, cqe);
	return res;
}

static int read_rd(struct zp_wb *wb, struct zp_rd *rd, uint64_t off,
		   uint32_t len)
{
	uint32_t done = 0;

	while (done < len) {
		int res = -EAGAIN;

		if (rd->uring) {
			res = read_uring(wb, rd, off + done, len - done, done);
			/* A ring that refuses a submission is not used again. */
			if (res == -EAGAIN)
				rd->uring = false;
		}
		if (!rd->uring) {
			ssize_t r = pread(wb->fd, rd->buf + done, len - done,
					  (off_t)(off + done));

			res = r < 0 ? -errno : (int)r;
		}
		if (res < 0)
			return res;
		if (res == 0)
			return -EIO;	/* the file is shorter than we wrote */
		done += (uint32_t)res;
	}
	return 0;
}

/* Read an entry's bytes back, check them against @csum, and decompress
 * (or copy) them into @dst.  -EIO, @dst untouched, if they changed. */
int zp_wb_load(struct zp_pool *pool, uint64_t offset, uint32_t len,
	       uint32_t csum, bool dict, void *dst)
{
	struct zp_wb *wb = pool->wb;
	struct zp_rd *rd = NULL;
	int ret;

	for (unsigned i = 0; i < ZP_NR_RD && !rd; i++)
		if (pthread_mutex_trylock(&wb->rd[i].lock) == 0)
			rd = &wb->rd[i];
	if (!rd) {
		rd = &wb->rd[offset % ZP_NR_RD];
		pthread_mutex_lock(&rd->lock);
	}
	ret = read_rd(wb, rd, offset, len);
	/* Read once, into our buffer: the cache's copy is of no more use. */
	drop_cached(wb, offset, offset + len);
	if (ret == 0 && zp_csum(rd->buf, len) != csum) {
		pthread_mutex_unlock(&rd->lock);
		zp_stat_add(pool, st_wb_read_errors, 1);
		cgm_log_once(&wb->logged_csum,
			     "zpool: %s changed behind the pool's back: checksum "
			     "mismatch at offset %llu; the load fails with EIO",
			     pool->backing_path, (unsigned long long)offset);
		return -EIO;
	}
	if (ret == 0) {
		if (len == ZP_PAGE_SIZE)
			memcpy(dst, rd->buf, ZP_PAGE_SIZE);
		else
			ret = zp_decompress(pool, rd->buf, len, dst, dict);
	}
	pthread_mutex_unlock(&rd->lock);
	if (ret < 0) {
		zp_stat_add(pool, st_wb_read_errors, 1);
		cgm_log_once(&wb->logged_read,
			     "zpool: reading back from %s failed: %s",
			     pool->backing_path, zp_strerror(-ret));
		return ret;
	}
	zp_stat_add(pool, st_wb_loads, 1);
	return 0;
}
