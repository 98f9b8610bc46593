/*
 * zpool internals: every type of the pool and every function one file of
 * zpool/ offers another.  Nothing outside zpool/ includes this header.
 *
 * Memory layout.  The pool reserves one arena of address space and carves
 * zspages out of it as runs of 1..ZP_MAX_PAGES_PER_ZSPAGE contiguous pages,
 * so an object never straddles a discontiguity and can always be read in
 * place.  Each arena page has a descriptor (struct zp_zspage) in a parallel
 * table; the descriptor of a zspage's first page describes the zspage.
 *
 * An object's location is (first page, object index, class) packed in 64
 * bits.  A handle is an index into the handle table, whose slot holds the
 * location; compaction moves the object and rewrites the slot, so handles
 * stay valid.
 */
#ifndef CGM_ZP_TYPES_H
#define CGM_ZP_TYPES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgm/compiler.h"
#include "cgm/zpool.h"

#define ZP_PAGE_SHIFT		12
#define ZP_MIN_ALLOC		32u
#define ZP_CLASS_DELTA		16u
/* Classes 32, 48, ... 4096 (slot sizes, header included), then huge. */
#define ZP_NR_CLASSES		((ZP_PAGE_SIZE - ZP_MIN_ALLOC) / ZP_CLASS_DELTA + 1)
#define ZP_HUGE_CLASS		ZP_NR_CLASSES
#define ZP_NR_ALL_CLASSES	(ZP_NR_CLASSES + 1)
/* The kernel's CONFIG_ZSMALLOC_CHAIN_SIZE default. */
#define ZP_MAX_PAGES_PER_ZSPAGE	8u
/* Freed runs given back to the OS together, in one system call (arena.c). */
#define ZP_PENDING_RUNS		16u
#define ZP_MAX_OBJS		(ZP_MAX_PAGES_PER_ZSPAGE * ZP_PAGE_SIZE / ZP_MIN_ALLOC)
/*
 * Each non-huge object starts with a 32-bit header, as zsmalloc's handle
 * word: allocated objects hold (handle << 1) | 1, so compaction can find
 * the handle to rewrite; free objects hold (next free index << 1).
 */
#define ZP_OBJ_HDR		4u
#define ZP_OBJ_ALLOCATED	1u
#define ZP_NO_OBJ		0xffffu

/* Location: first page id (32 bits) | object index (10) | class (8). */
#define ZP_LOC_CLASS_BITS	8
#define ZP_LOC_OBJ_BITS		10
_Static_assert(ZP_MAX_OBJS <= 1u << ZP_LOC_OBJ_BITS, "object index fits");
_Static_assert(ZP_NR_ALL_CLASSES <= 1u << ZP_LOC_CLASS_BITS, "class fits");
static inline uint64_t zp_loc(uint32_t page, unsigned obj, unsigned cls)
{
	return ((uint64_t)page << (ZP_LOC_OBJ_BITS + ZP_LOC_CLASS_BITS)) |
	       ((uint64_t)obj << ZP_LOC_CLASS_BITS) | cls;
}
static inline uint32_t zp_loc_page(uint64_t loc)
{
	return (uint32_t)(loc >> (ZP_LOC_OBJ_BITS + ZP_LOC_CLASS_BITS));
}
static inline unsigned zp_loc_obj(uint64_t loc)
{
	return (unsigned)(loc >> ZP_LOC_CLASS_BITS) & ((1u << ZP_LOC_OBJ_BITS) - 1);
}
static inline unsigned zp_loc_class(uint64_t loc)
{
	return (unsigned)loc & ((1u << ZP_LOC_CLASS_BITS) - 1);
}

/*
 * Fullness groups, as zsmalloc's ZS_INUSE_RATIO_*: 0 is empty, 1..9 are
 * 1-10%..81-90% in use, 10 is 91-99%, 11 is full.
 */
#define ZP_FULLNESS_EMPTY	0
#define ZP_FULLNESS_99		10
#define ZP_FULLNESS_FULL	11
#define ZP_NR_FULLNESS		12

/*
 * zspage lock word (the zspage_lock of the 2025 zsmalloc series, made
 * lock-free for readers): a count of pinning readers/writers in the low
 * bits, plus LIVE while the zspage exists and ISOLATED while compaction
 * owns it.  Readers pin with one fetch_add and never wait; compaction
 * isolates only a zspage nobody pins (it skips busy ones).
 */
#define ZS_LIVE			(1u << 31)
#define ZS_ISOLATED		(1u << 30)
#define ZS_PIN_MASK		(ZS_ISOLATED - 1)

/* zspage flags (under the class lock). */
#define ZS_F_LISTED		0x1	/* on a fullness list */
#define ZS_F_DEFERRED		0x2	/* on the class's deferred list */

struct zp_zspage {
	_Atomic uint32_t lock;	/* first page only: LIVE|ISOLATED|pins */
	uint32_t head;		/* first page of the zspage holding this page */
	uint32_t prev, next;	/* fullness / deferred / free-run lists */
	uint32_t huge_handle;	/* huge class: the only object's handle */
	uint16_t class_idx;
	uint16_t inuse;
	uint16_t freeobj;	/* first free object, ZP_NO_OBJ if full */
	uint8_t fullness;
	uint8_t flags;
	uint16_t nr_pages;
};

struct zp_class {
	pthread_mutex_t lock;
	unsigned index;
	unsigned size;			/* slot size, header included */
	unsigned hdr;			/* ZP_OBJ_HDR, or 0 for the huge class */
	unsigned pages_per_zspage;
	unsigned objs_per_zspage;
	uint32_t fullness_list[ZP_NR_FULLNESS];	/* list heads, 0 = empty */
	uint32_t deferred;		/* zspages waiting for readers to leave */
	uint64_t fullness_count[ZP_NR_FULLNESS];
	uint64_t nr_zspages;
	uint64_t obj_used;
	atomic_bool compacting;
} __attribute__((aligned(64)));

/* Lock-free allocator of small integer ids (handles, entries). */
struct zp_idpool {
	_Atomic uint64_t head;		/* (tag << 32) | first free id */
	_Atomic uint32_t top;		/* next id never handed out */
	uint32_t cap;
	_Atomic uint32_t *next;		/* free-list links, cap entries */
};

/*
 * Page-store entry.  state: kind (low 3 bits) | WB (being written back or
 * recompressed) | DOOMED (invalidated meanwhile) | OFFLRU | loaders <<
 * ZE_LOADER_SHIFT.
 */
#define ZE_FREE			0u
#define ZE_SAME			1u	/* same-filled: word */
#define ZE_OBJ			2u	/* compressed (or raw) object: handle */
#define ZE_DISK			3u	/* in the backing file: offset */
#define ZE_ZOBJ			4u	/* recompressed with zstd: zhandle, zlen */
#define ZE_KIND_MASK		7u
#define ZE_WB			0x8u
#define ZE_DOOMED		0x10u
#define ZE_OFFLRU		0x20u	/* ZE_OBJ that recompression declined: not on the LRU */
#define ZE_LOADER_SHIFT		8
#define ZE_LOADER		(1u << ZE_LOADER_SHIFT)

struct zp_entry {
	_Atomic uint32_t state;
	uint32_t len;			/* compressed bytes; ZP_PAGE_SIZE: raw */
	uint32_t handle;		/* ZE_OBJ */
	uint32_t lru_prev, lru_next;	/* ZE_OBJ without WB: on the LRU */
	uint32_t csum;			/* ZE_DISK: zp_csum of the bytes written */
	uint64_t word;			/* ZE_SAME: the word */
	_Atomic uint64_t offset;	/* ZE_DISK: file offset */
	uint32_t zhandle, zlen;		/* ZE_ZOBJ: the zstd object (zlen: ZP_ZLEN_DICT | bytes) */
	uint32_t stored_ms;		/* when stored (zp_now_ms, wraps in 49 days) */
	uint32_t dict;			/* zstd pools: ZE_OBJ/ZE_DISK compressed against the dictionary */
};

/* A ZE_ZOBJ compressed against the dictionary (zdict.c). */
#define ZP_ZLEN_DICT		0x80000000u

static inline uint32_t zp_zlen_bytes(uint32_t zlen)
{
	return zlen & ~ZP_ZLEN_DICT;
}

/* zdict.c: the pool's zstd dictionary, made once from a sample of its pages. */
#define ZP_ZDICT_PAGES		4
#define ZP_ZDICT_BYTES		(ZP_ZDICT_PAGES * ZP_PAGE_SIZE)
struct zp_zdict {
	unsigned char *cand;		/* the sample, then the content (mmap'd) */
	size_t map_bytes;
	unsigned char *cws;		/* zstd's two dictionaries (mmap'd when made) */
	size_t cws_bytes;
	pthread_mutex_t lock;		/* the sample */
	_Atomic uint64_t seen;		/* compressible stores sampled from (written under lock) */
	uint64_t rng;			/* lock held */
	void *cdict, *ddict;		/* valid once ready */
	atomic_bool chosen;		/* the sample is closed: a dictionary or none */
	atomic_bool ready;
};

/* One compression context: a scratch buffer and codec state. */
#define ZP_NR_CTX		8
struct zp_cctx {
	pthread_mutex_t lock;
	void *lz4_state;
	void *zstd_c, *zstd_d;		/* in zstd_mem, laid out at the context's first use of zstd */
	unsigned char *zstd_mem;	/* mapped once the pool's zstd_ready */
	unsigned char *buf;		/* 2 pages: compression output */
	bool used;			/* taken since zp_trim() (the lock's holder's) */
} __attribute__((aligned(64)));

struct zp_wb;

struct zp_pool {
	struct zp_options opt;
	char backing_path[4096];
	size_t huge_watermark;
	size_t stat_pages;		/* pages of this struct (mmap'd) */

	/* arena of zspage memory */
	char *arena;
	uint32_t arena_pages;
	struct zp_zspage *desc;
	pthread_mutex_t arena_lock;
	uint32_t arena_top;		/* next never-used page */
	uint32_t no_huge_top;		/* huge pages no longer asked for below (arena.c) */
	uint32_t free_runs[ZP_MAX_PAGES_PER_ZSPAGE + 1];
	/* Runs freed and not yet given back to the OS (arena.c), under arena_lock. */
	struct zp_run {
		uint32_t page;
		uint32_t nr_pages;
	} pending[ZP_PENDING_RUNS];
	unsigned nr_pending;
	/* Pages charged to zspages; never past limit_pages (max_bytes in
	 * whole pages, UINT64_MAX without a limit). */
	_Atomic uint64_t pages_allocated;
	uint64_t limit_pages;
	/* A store was refused at the limit; stores are refused before they
	 * compress until the pool is back under 90% (zswap's reached_full). */
	atomic_bool limit_full;

	/* handles */
	struct zp_idpool handles;
	_Atomic uint64_t *handle_slot;

	/* classes: class_map[i] is the class that size class i merged into */
	uint8_t class_map[ZP_NR_ALL_CLASSES];
	struct zp_class classes[ZP_NR_ALL_CLASSES];

	/* page store */
	struct zp_idpool entries;
	struct zp_entry *entry;
	pthread_mutex_t lru_lock;
	uint32_t lru_head, lru_tail;	/* oldest at head */
	struct zp_cctx *ctx;		/* ZP_NR_CTX contexts */
	/* The contexts' zstd state, made at the first use of zstd (codec.c). */
	pthread_mutex_t zstd_lock;
	atomic_bool zstd_ready;
	size_t zstd_bytes;		/* of each context's zstd mapping, once ready */
	size_t zstd_cbytes;		/* of it, the compression state's (the rest: decompression's) */
	struct zp_zdict zdict;
	struct zp_wb *wb;

	/* statistics; relaxed atomics, exact only when quiescent */
	_Atomic uint64_t st_stored, st_orig, st_compr, st_same, st_huge;
	_Atomic uint64_t st_compacted, st_moved, st_written, st_on_disk;
	_Atomic uint64_t st_wb_loads, st_wb_errors, st_wb_read_errors;
	_Atomic uint64_t st_limit_hit, st_reject_poor, st_reject_alloc;
	_Atomic uint64_t st_recompressed, st_recompress_declined, st_recompressed_dict;
	_Atomic uint64_t st_stored_dict, st_stored_dense, st_stored_dense_dict;
};

/* mem.c: the only source of memory (and zp_map/zp_unmap in cgm/zpool.h) */
size_t zp_page_align(size_t bytes);

/* idpool.c */
int zp_idpool_init(struct zp_idpool *ip, uint32_t cap);
void zp_idpool_destroy(struct zp_idpool *ip);
uint32_t zp_id_alloc(struct zp_idpool *ip);
void zp_id_free(struct zp_idpool *ip, uint32_t id);

/* class.c */
/* Extra tail waste (thousandths) accepted for a shorter zspage. */
#define ZP_WASTE_SLACK		50
void zp_class_geometry(unsigned size, unsigned *pages, unsigned *objs);
void zp_classes_init(struct zp_pool *pool);
struct zp_class *zp_size_class(struct zp_pool *pool, size_t size);

/* arena.c */
int zp_arena_init(struct zp_pool *pool, size_t bytes);
void zp_arena_destroy(struct zp_pool *pool);
int zp_arena_alloc(struct zp_pool *pool, unsigned nr_pages, uint32_t *pagep);
void zp_arena_free(struct zp_pool *pool, uint32_t page, unsigned nr_pages);
static inline char *zp_page_addr(struct zp_pool *pool, uint32_t page)
{
	return pool->arena + ((size_t)page << ZP_PAGE_SHIFT);
}

/* zspage.c: zspages, fullness, pinning (class lock held where noted) */
int zp_zspage_create(struct zp_pool *pool, struct zp_class *cls,
		     uint32_t *pagep);
void zp_zspage_insert(struct zp_pool *pool, struct zp_class *cls,
		      uint32_t page);				/* locked */
unsigned zp_zspage_release(struct zp_pool *pool, struct zp_class *cls,
			   uint32_t page);			/* locked */
void zp_zspage_list(struct zp_pool *pool, struct zp_class *cls,
		    uint32_t page);				/* locked */
void zp_fix_fullness(struct zp_class *cls, struct zp_zspage *zs,
		     uint32_t page, struct zp_zspage *desc);	/* locked */
void zp_list_del(struct zp_class *cls, struct zp_zspage *desc, uint32_t page);
unsigned zp_drain_deferred(struct zp_pool *pool, struct zp_class *cls); /* locked */
void zp_defer(struct zp_class *cls, struct zp_zspage *desc, uint32_t page);
unsigned zp_obj_alloc(struct zp_pool *pool, struct zp_class *cls,
		      uint32_t page, zp_handle_t handle);	/* locked */
void zp_obj_release(struct zp_pool *pool, struct zp_class *cls,
		    uint32_t page, unsigned obj);		/* locked */
static inline char *zp_obj_addr(struct zp_pool *pool, struct zp_class *cls,
				uint32_t page, unsigned obj)
{
	return zp_page_addr(pool, page) + (size_t)obj * cls->size;
}
static inline uint32_t *zp_obj_hdr(struct zp_pool *pool, struct zp_class *cls,
				   uint32_t page, unsigned obj)
{
	return (uint32_t *)(void *)zp_obj_addr(pool, cls, page, obj);
}

/* obj.c */
int zp_obj_malloc(struct zp_pool *pool, size_t size, zp_handle_t *handle);
uint64_t zp_handle_loc(struct zp_pool *pool, zp_handle_t handle);
bool zp_handle_valid(struct zp_pool *pool, zp_handle_t handle);
void zp_obj_forget_pins(struct zp_pool *pool, zp_handle_t handle);
void zp_class_maybe_compact(struct zp_pool *pool, struct zp_class *cls);

/* compact.c */
unsigned long zp_compact_class(struct zp_pool *pool, struct zp_class *cls);
uint64_t zp_class_freeable(const struct zp_class *cls);

/* codec.c */
int zp_codec_init(struct zp_pool *pool);
void zp_codec_destroy(struct zp_pool *pool);
struct zp_cctx *zp_cctx_get(struct zp_pool *pool);
void zp_cctx_put(struct zp_cctx *c);
/*
 * Compress a page into c->buf with the pool's codec; returns the length or
 * 0 if it did not fit.  A zstd pool compresses against @cdict if given
 * (zp_zdict_cdict(), asked before the context was taken), and then sets
 * *@dict: its decompression needs the dictionary (@dict true).
 */
size_t zp_compress(struct zp_pool *pool, struct zp_cctx *c, const void *page, const void *cdict,
		   bool *dict);
int zp_decompress(struct zp_pool *pool, const void *src, size_t len, void *dst, bool dict);
/*
 * The same with zstd whatever the pool's codec (zstd pools, or recompress).
 * With @cdict (zp_zdict_cdict()), compressed against it, and *@dict set:
 * the object then loads only with @dict true.
 */
size_t zp_compress_zstd(struct zp_pool *pool, struct zp_cctx *c, const void *page,
			const void *cdict, bool *dict);
int zp_decompress_zstd(struct zp_pool *pool, const void *src, size_t len, void *dst, bool dict);

/* zdict.c */
/* Does the pool make a dictionary: zstd is used (its codec, or recompression), and not no_dict. */
bool zp_zdict_wanted(const struct zp_pool *pool);
int zp_zdict_init(struct zp_pool *pool);
void zp_zdict_destroy(struct zp_pool *pool);
/* What a compression context needs to compress against the dictionary. */
size_t zp_zdict_cctx_bytes(int level);
/* A page stored (@len: its compressed size): into the sample, maybe. */
void zp_zdict_offer(struct zp_pool *pool, const void *page, size_t len);
/*
 * The dictionary to compress with, chosen on the first call the sample
 * allows; else NULL.  Never with a compression context held: choosing
 * takes one.
 */
const void *zp_zdict_cdict(struct zp_pool *pool);
/* The dictionary to load with, once made, else NULL. */
const void *zp_zdict_ddict(struct zp_pool *pool);

/* writeback.c */
int zp_wb_init(struct zp_pool *pool);
void zp_wb_destroy(struct zp_pool *pool);
int zp_wb_load(struct zp_pool *pool, uint64_t offset, uint32_t len,
	       uint32_t csum, bool dict, void *dst);
void zp_wb_space_free(struct zp_pool *pool, uint64_t offset, uint32_t len);
uint64_t zp_wb_space_used(struct zp_pool *pool);
bool zp_wb_backing_off(struct zp_pool *pool);

/* csum.c */
uint32_t zp_csum(const void *buf, size_t len);

/* store.c */
void zp_entry_release(struct zp_pool *pool, zp_entry_t e);
void zp_lru_add_head(struct zp_pool *pool, zp_entry_t e);	/* lru locked */
zp_entry_t zp_lru_pop_oldest(struct zp_pool *pool);		/* lru locked */
uint32_t zp_now_ms(void);
/*
 * End a hold (WB set) on ZE_OBJ entry @e: once no load is in flight, its
 * state becomes @kind (WB and the rest cleared) and true is returned; an
 * entry invalidated meanwhile (DOOMED) is left for the caller to free:
 * false.  Takes lru_lock.
 */
bool zp_entry_switch(struct zp_pool *pool, zp_entry_t e, uint32_t kind);

/* strerror without the allocation glibc may do for unknown numbers. */
const char *zp_strerror(int err);

#define zp_stat_add(pool, f, n) \
	atomic_fetch_add_explicit(&(pool)->f, (uint64_t)(n), memory_order_relaxed)
#define zp_stat_sub(pool, f, n) \
	atomic_fetch_sub_explicit(&(pool)->f, (uint64_t)(n), memory_order_relaxed)

#endif /* CGM_ZP_TYPES_H */
