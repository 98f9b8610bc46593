/*
 * zpool: a zsmalloc-style compressed page pool, and the zswap-like page
 * store built on it.
 *
 * Two layers, one pool:
 *
 *   object allocator (zsmalloc)   zp_malloc / zp_obj_write / zp_obj_read_begin
 *                                 / zp_obj_read_end / zp_free / zp_compact
 *   page store (zswap)            zp_store / zp_load / zp_invalidate
 *                                 / zp_writeback
 *
 * Every byte the pool uses, data and metadata, comes from mmap: this code
 * runs inside the interposed malloc and must never call it.
 *
 * Concurrency: every call may be made from any thread at any time, except
 * that one handle (one entry) must not be freed (invalidated) while another
 * thread still uses it; that is the caller's ownership, as in the kernel.
 * Loads never wait for compaction and take no pool-wide lock.
 *
 * Errors: functions return 0 (or a handle/entry, or a count) on success and
 * a negative errno on failure; bad handles and entries are refused with
 * -EINVAL and one "cgmalloc: zpool: ..." line on stderr, never a crash.
 */
#ifndef CGM_ZPOOL_H
#define CGM_ZPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ZP_PAGE_SIZE	4096u

struct zp_pool;

/* Handle of one object in the pool; 0 is never a valid handle. */
typedef uint32_t zp_handle_t;
/* Entry of one stored page; 0 is never a valid entry. */
typedef uint32_t zp_entry_t;

enum zp_codec {
	ZP_CODEC_LZ4 = 0,	/* default */
	ZP_CODEC_ZSTD,
};

/* What the store does with a page that compresses worse than the watermark. */
enum zp_huge_policy {
	ZP_HUGE_RAW = 0,	/* keep it uncompressed, one page per object */
	ZP_HUGE_REJECT,		/* refuse it: zp_store returns -E2BIG */
};

/*
 * Pool options.  A zeroed struct means "all defaults".  No configuration
 * key sets them yet: nothing in libcgmalloc.so creates a pool until the
 * spiller exists.
 *
 *   backing     file for writeback (created, truncated); NULL or "" means
 *               no writeback
 *   max_bytes   limit on pool memory (zspage pages), held exactly and
 *               rounded down to whole pages (0: no limit).  A store that
 *               finds the pool at the limit, or whose object needs a new
 *               zspage past it, first writes the oldest entries back and
 *               compacts; without a backing file, or while writeback backs
 *               off after a failed write (see zp_writeback), it is refused
 *               with -ENOSPC.  After a refusal, stores make room (or are
 *               refused) before compressing until the pool is back under
 *               90% of the limit, as zswap's accept threshold.  zp_malloc
 *               never writes back: it refuses.
 *   codec       lz4 or zstd, with level (lz4: acceleration, default 1;
 *               zstd: level, default 3)
 */
struct zp_options {
	const char *backing;
	size_t max_bytes;
	enum zp_codec codec;
	int level;
	enum zp_huge_policy huge_policy;
	/* Compressed size above which a page is "huge"; 0: the smallest size
	 * that occupies a whole page anyway (zp_huge_class_size()). */
	size_t huge_watermark;
	/* A class whose unused object slots pass this percentage of its slots
	 * is compacted by the thread that frees into it; 0: 30, >= 100: never. */
	unsigned compact_threshold;
	/* Address space reserved for pool memory; 0: 4 GiB, or 2 * max_bytes
	 * when that is larger.  Stores past it fail with -ENOMEM. */
	size_t arena_bytes;
	/* Largest backing file; 0: 16 GiB. */
	size_t backing_max;
	/* Entries written per io_uring submission; 0: 32 (at most 256). */
	unsigned wb_batch;
	/*
	 * Keep zstd at hand for zp_recompress() (zram's recompression of
	 * idle pages): lz4 pools only, and only without a backing file --
	 * the coldest entries either go to the file or are recompressed.
	 * recompress_level: zstd's level, 0 for 3.
	 */
	bool recompress;
	int recompress_level;
	/*
	 * zstd without the dictionary of the pool's own pages (zpool/zdict.c),
	 * which makes zstd's objects up to a quarter smaller where a
	 * program's pages resemble each other.  The dictionary serves zstd
	 * wherever the pool uses it: every store of a zstd pool, the
	 * recompression of an lz4 one.
	 */
	bool no_dict;
	/*
	 * The dictionary's pages are drawn from this many stores that the
	 * pool's codec halved (and chosen once that many are seen); 0: 4096,
	 * at least 16.
	 */
	unsigned dict_after;
};

/* Pool-wide statistics (the kernel's names where they exist). */
struct zp_stats {
	uint64_t stored_pages;		/* entries alive, in memory or on disk */
	uint64_t orig_data_size;	/* bytes of pages held in memory */
	uint64_t compr_data_size;	/* bytes of their compressed objects */
	uint64_t mem_used_total;	/* bytes of zspage memory */
	uint64_t meta_bytes;		/* resident metadata (tables), estimate */
	uint64_t same_pages;		/* same-filled pages (one word each) */
	uint64_t huge_pages;		/* pages kept uncompressed */
	uint64_t pages_compacted;	/* zspage pages freed by compaction */
	uint64_t objs_moved;		/* objects moved by compaction */
	uint64_t written_back_pages;	/* pages written to the backing file */
	uint64_t wb_pages_on_disk;	/* entries currently on disk */
	uint64_t wb_loads;		/* loads served from the backing file */
	uint64_t wb_io_errors;		/* failed writes (I/O error, full disk) */
	uint64_t wb_read_errors;	/* failed loads from the backing file
					 * (I/O error, checksum mismatch) */
	uint64_t backing_bytes;		/* file space in use */
	uint64_t pool_limit_hit;	/* stores that found the pool at max */
	uint64_t reject_compress_poor;	/* huge pages refused (ZP_HUGE_REJECT) */
	uint64_t reject_alloc_fail;	/* stores refused: no memory */
	uint64_t recompressed_pages;	/* entries zp_recompress() moved to zstd */
	uint64_t recompress_declined;	/* entries it left (raw, or zstd no smaller) */
	uint64_t recompressed_dict;	/* of those moved, compressed against the dictionary */
	uint64_t stored_dict;		/* zstd pools: stores compressed against it */
	uint64_t stored_dense;		/* zp_store_dense(): stores that went to zstd at once */
	uint64_t stored_dense_dict;	/* of those, compressed against the dictionary */
};

/* Per-class row of zp_classes_show(), as zsmalloc's debugfs "classes". */
struct zp_class_stats {
	unsigned index;
	unsigned size;
	uint64_t fullness[11];		/* zspages 10%,20%..90%,99%,100% full */
	uint64_t obj_allocated;
	uint64_t obj_used;
	uint64_t pages_used;
	unsigned pages_per_zspage;
	uint64_t freeable;		/* pages compaction could free */
};

/* Create a pool.  @opt may be NULL.  Returns 0 and sets *poolp, or -errno
 * (-EINVAL for a bad option, with a line on stderr naming it). */
int zp_create_pool(const struct zp_options *opt, struct zp_pool **poolp);
/* Destroy a pool and unmap everything; no call may be in flight. */
void zp_destroy_pool(struct zp_pool *pool);
/*
 * In the child of fork(), whose copy of the pool it keeps using: every
 * lock released (the threads that may have held one are the parent's).
 * The pool must not have been changing at the fork; no backing file.
 */
void zp_pool_forked(struct zp_pool *pool);
/*
 * Give the OS the pages of zspages freed lately: the pool gives them back
 * 16 runs at a time, in one system call, and until then up to 15 freed
 * runs stay resident (no longer counted in zp_get_total_pages()).  For
 * when freeing stops for a while (a handler going to sleep, a reclaim's
 * end).  Safe from any thread.
 */
void zp_release_freed(struct zp_pool *pool);

/*
 * Give back the scratch memory the pool's compression contexts wrote
 * since the last call (their output pages, zstd's state), to be faulted
 * in and laid out again at their next use: for a pool idle a while.
 * Contexts in use at the time are left.
 */
void zp_trim(struct zp_pool *pool);

/* Resident bytes of that scratch memory (zp_resident_bytes, through @pagemap), for reports. */
size_t zp_scratch_resident(struct zp_pool *pool, int pagemap);

/*
 * Bytes of [@p, @p + @bytes) in pages of this process's own: present and
 * mapped by it alone (read through @pagemap, /proc/self/pagemap open), not
 * the shared zero page that reading untouched memory maps, which no group
 * is charged for (mincore counts it).  0 if pagemap cannot be read.  The
 * caller opens the file: a descriptor opened here for each call, on the
 * library's threads, took the lowest free number from under the program's
 * own open()s (shim/self_proc.c).
 */
size_t zp_resident_bytes(int pagemap, const void *p, size_t bytes);

/*
 * Anonymous memory of the pool's own and of the spill engine's: @bytes
 * zeroed, page-aligned up; a reservation (@noreserve) is left out of core
 * dumps.  NULL on failure.  Made and removed by the system calls, not the
 * library's interposed mmap()/munmap() (zpool/mem.c says why).
 */
void *zp_map(size_t bytes, bool noreserve);
void zp_unmap(void *p, size_t bytes);

/* ---- object allocator (zsmalloc) ---- */

/* Allocate an object of @size (1..ZP_PAGE_SIZE) bytes.  Returns its handle,
 * or 0 when @size is out of range, memory is exhausted, or the object
 * needs a new zspage that would take the pool past max_bytes (objects
 * count toward the limit like stored pages; zp_malloc writes nothing
 * back to make room). */
zp_handle_t zp_malloc(struct zp_pool *pool, size_t size);
/* Free the object of @handle.  Returns 0 or -EINVAL for a bad handle. */
int zp_free(struct zp_pool *pool, zp_handle_t handle);
/* Copy @len bytes (at most the allocated size) into the object. */
int zp_obj_write(struct zp_pool *pool, zp_handle_t handle, const void *buf,
		 size_t len);
/*
 * Map the object for reading; the pointer stays valid until
 * zp_obj_read_end() even if compaction moves the object meanwhile (the
 * reader keeps the old copy alive).  Objects are always contiguous here
 * (zspages are contiguous pages), so @local_copy is never written; it is
 * kept for the API's shape.  Returns NULL for a bad handle.
 */
const void *zp_obj_read_begin(struct zp_pool *pool, zp_handle_t handle,
			      void *local_copy);
void zp_obj_read_end(struct zp_pool *pool, zp_handle_t handle,
		     const void *ptr);
/* Allocated size class of @handle's object (bytes usable), 0 if bad. */
size_t zp_obj_size(struct zp_pool *pool, zp_handle_t handle);
/* Compact every class; returns the number of pages freed. */
unsigned long zp_compact(struct zp_pool *pool);
/* Smallest object size that takes a whole zspage page by itself. */
size_t zp_huge_class_size(struct zp_pool *pool);
/* Pages of zspage memory in use. */
unsigned long zp_get_total_pages(struct zp_pool *pool);

/* ---- page store (zswap) ---- */

/*
 * Store one page (ZP_PAGE_SIZE bytes).  Returns 0 and sets *entry, or
 * -E2BIG (incompressible page under ZP_HUGE_REJECT), -ENOSPC (pool at
 * max_bytes and not enough could be written back, or writeback is
 * backing off after a failed write: refused at once, nothing tried),
 * -ENOMEM.
 */
int zp_store(struct zp_pool *pool, const void *page, zp_entry_t *entry);
/*
 * Store a page that is cold enough to end up recompressed: in an lz4 pool
 * made with recompress, compressed with zstd at once (against the
 * dictionary once there is one), as zp_recompress() would leave it,
 * instead of with lz4 now and both codecs again later.  A page zstd does
 * not bring under the huge watermark is stored as zp_store() does; in
 * any other pool this is zp_store().  Same returns as zp_store().
 */
int zp_store_dense(struct zp_pool *pool, const void *page, zp_entry_t *entry);
/*
 * Copy the stored page, byte-identical, into @dst.  -EINVAL for a bad
 * entry; -EIO when the backing file cannot be read or what is read back
 * differs from what was written (every write is checksummed): @dst is
 * then left as it was, never filled with corrupted bytes, and the entry
 * stays (a later load may succeed if the file is repaired).
 */
int zp_load(struct zp_pool *pool, zp_entry_t entry, void *dst);
/*
 * In a child of fork() (after zp_pool_forked): @entry was being loaded by
 * a thread of the parent when the address space was copied, so the copy
 * counts a reader that the child does not have; it goes.  No thread of
 * the child may be loading @entry.
 */
void zp_load_forked(struct zp_pool *pool, zp_entry_t entry);
/* Drop the entry, its object and its file space. */
int zp_invalidate(struct zp_pool *pool, zp_entry_t entry);
/*
 * Write back up to @nr of the oldest entries held in memory to the backing
 * file, in batches of wb_batch; stops at the first batch with a failed
 * write.  Returns how many were written (0 if no entry was in memory, or
 * @nr is 0); if there were entries but none could be written, the
 * negative errno of the failure (-ENOSPC: device or backing_max full,
 * short write; -EIO, ...); -ENODEV without a backing file.  A failed
 * write keeps its entry in memory (counted in wb_io_errors).
 *
 * After a failed write the pool backs off: the next writeback starts
 * with a single write and goes on only if it lands, and the writeback a
 * store at the limit would make is not attempted for 1 ms, doubling at
 * each further failure up to 1 s, or until file space is freed after an
 * ENOSPC; a write that lands ends the backoff.  zp_writeback itself is
 * always attempted.
 *
 * Each call first drops what earlier ones wrote from the page cache
 * (written to the disk meanwhile: pages still dirty stay), so what is
 * written back leaves memory; with @nr 0 that is all it does.
 */
long zp_writeback(struct zp_pool *pool, unsigned long nr);

/*
 * Recompress up to @nr of the oldest entries stored at least @min_age_ms
 * ago with zstd (the pool must have been created with recompress): an
 * entry whose zstd object is more than a ninth smaller than its lz4 one
 * changes object, keeping its number; others (raw pages, pages zstd does
 * not shrink) stay as they are and are not looked at again.  Loads in
 * flight are never disturbed: the switch waits until none is.  Returns
 * the entries looked at (recompressed or declined); -EOPNOTSUPP for a
 * pool without recompress.
 */
long zp_recompress(struct zp_pool *pool, unsigned long nr, uint32_t min_age_ms);

/* ---- statistics ---- */

void zp_pool_stats(struct zp_pool *pool, struct zp_stats *st);
/* Fill @rows (up to @max) for every class that is not merged into another;
 * returns the number of rows. */
unsigned zp_class_stats(struct zp_pool *pool, struct zp_class_stats *rows,
			unsigned max);
/* Render the per-class table as text into @buf (NUL-terminated).  Returns
 * the length written, or -ENOSPC if @size was too small (buf then holds a
 * truncated table). */
int zp_classes_show(struct zp_pool *pool, char *buf, size_t size);

/* ---- test hooks ---- */

/* Make the next @count backing-file writes fail with -@err (e.g. EIO). */
void zp_test_fail_writes(struct zp_pool *pool, unsigned count, int err);

#endif /* CGM_ZPOOL_H */
