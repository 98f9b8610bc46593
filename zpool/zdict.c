/*
 * The pool's zstd dictionary: a raw-content dictionary made of a few
 * pages of the pool's own data.
 *
 * A 4 KiB page is too short for zstd to learn much from itself: most of
 * what it could repeat lies in other pages.  Given a handful of the
 * program's pages as a dictionary (content zstd may refer back into, no
 * entropy tables), a page like them compresses a sixth to a quarter
 * smaller and loads as fast: on this machine, at level 3, a python3 heap
 * of 200,000 dict records went from 3.58 to 4.17-4.39 and sqlite3's page
 * cache from 3.42 to 4.26.  Pages that compress well alone gain little
 * (the zpool bench's mixed heap of records, an index and JSON: 4.22 ->
 * 4.27).  Pages unlike the dictionary compress as without one (3.42 ->
 * 3.44 across those two programs), or a little worse (4% with pages of
 * random bytes).
 *
 * So which pages matters.  The first ones a pool sees are not the ones:
 * python3's first spilled pages are the interpreter's own, unlike the
 * records that fill the pool afterwards, and a dictionary of them made its
 * pool 2% larger than none.  The pool keeps a uniform sample
 * (reservoir) of ZDICT_CANDIDATES pages among the first ZDICT_SAMPLED
 * stores that its codec halved, and once that many are seen, the next
 * compression with zstd tries each candidate as a dictionary for the
 * others and keeps the ZP_ZDICT_PAGES that saved the most -- none when
 * none saves anything.
 *
 * It serves zstd wherever the pool uses it: the recompression of an lz4
 * pool's idle entries, and every store of a zstd pool once it exists.
 * The dictionary is made once and never changes, so an entry needs to say
 * only whether it was compressed with it: ZP_ZLEN_DICT in a recompressed
 * entry's zlen, the entry's dict for a zstd pool's objects (which keep
 * it when written back: the backing file's copy needs it too).  The
 * reservoir's lock is only tried by stores (a busy one skips the page);
 * a forked child gets it fresh (zp_pool_forked) and goes on alone.
 * (A recompressed entry's flag is a bit of its zlen, not its dict: the
 * switch to ZE_ZOBJ publishes zlen, while loads of the lz4 object it
 * replaces still read the entry.)
 * Everything lives in mmap'd memory: the candidates and the content in
 * an area laid out at pool creation, touched only once pages are stored;
 * zstd's "static" dictionaries, which never call malloc, in one mapped
 * when the dictionary is made (their sizes are libzstd's to tell, and a
 * pool asks nothing of libzstd before it uses zstd: codec.c).
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include "zp_types.h"

/* A candidate page is one the codec halved at least: data with something to repeat. */
#define ZDICT_SAMPLE_MAX	(ZP_PAGE_SIZE / 2)
/* The sample: this many pages, among this many stores (16 MiB of such pages). */
#define ZDICT_CANDIDATES	16
#define ZDICT_SAMPLED		4096

static uint64_t zdict_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * How many compressible stores the sample is drawn from
 * (zp_options.dict_after), never fewer than it holds.
 */
static uint64_t zdict_sampled(const struct zp_pool *pool)
{
	uint64_t n = pool->opt.dict_after ? pool->opt.dict_after :
		     ZDICT_SAMPLED;

	return n < ZDICT_CANDIDATES ? ZDICT_CANDIDATES : n;
}

_Static_assert(ZDICT_CANDIDATES > ZP_ZDICT_PAGES, "a choice among the candidates");

/*
 * zstd's tables for a page against the dictionary, at most 2^ZDICT_TABLE_LOG
 * entries each.  Level 3 would take 2^16 and 2^15 for 20 KiB of input:
 * the dictionary's own tables (resident once made) then come to 400 KB,
 * 150 KB at this bound, and the ratio is within half a percent (python3
 * heap pages 4.234 -> 4.217; 2^13: 4.185).
 */
#define ZDICT_TABLE_LOG	14

static ZSTD_compressionParameters zdict_cparams(int level)
{
	ZSTD_compressionParameters cp = ZSTD_getCParams(level, ZP_PAGE_SIZE, ZP_ZDICT_BYTES);

	if (cp.hashLog > ZDICT_TABLE_LOG)
		cp.hashLog = ZDICT_TABLE_LOG;
	if (cp.chainLog > ZDICT_TABLE_LOG)
		cp.chainLog = ZDICT_TABLE_LOG;
	return cp;
}

static size_t zdict_cbytes(int level)
{
	return zp_page_align(ZSTD_estimateCDictSize_advanced(ZP_ZDICT_BYTES, zdict_cparams(level),
							      ZSTD_dlm_byRef));
}

static size_t zdict_dbytes(void)
{
	return zp_page_align(ZSTD_estimateDDictSize(ZP_ZDICT_BYTES, ZSTD_dlm_byRef));
}

size_t zp_zdict_cctx_bytes(int level)
{
	return ZSTD_estimateCCtxSize_usingCParams(zdict_cparams(level));
}

/* The area: candidates, then content (the dictionaries' workspaces are apart: d->cws). */
static unsigned char *zdict_content(const struct zp_zdict *d)
{
	return d->cand + (size_t)ZDICT_CANDIDATES * ZP_PAGE_SIZE;
}

bool zp_zdict_wanted(const struct zp_pool *pool)
{
	return !pool->opt.no_dict && (pool->opt.recompress || pool->opt.codec == ZP_CODEC_ZSTD);
}

int zp_zdict_init(struct zp_pool *pool)
{
	struct zp_zdict *d = &pool->zdict;
	size_t bytes;

	pthread_mutex_init(&d->lock, NULL);
	if (!zp_zdict_wanted(pool))
		return 0;
	/* The workspaces' sizes are libzstd's to tell: asked when the dictionary is made. */
	bytes = (size_t)ZDICT_CANDIDATES * ZP_PAGE_SIZE + ZP_ZDICT_BYTES;
	d->cand = zp_map(bytes, false);
	if (!d->cand)
		return -ENOMEM;
	d->map_bytes = bytes;
	/* A fixed seed: the same stores make the same dictionary, run after run. */
	d->rng = 0x9e3779b97f4a7c15ull;
	return 0;
}

void zp_zdict_destroy(struct zp_pool *pool)
{
	struct zp_zdict *d = &pool->zdict;

	if (d->cand)
		zp_unmap(d->cand, d->map_bytes);
	zp_unmap(d->cws, d->cws_bytes);
	d->cand = d->cws = NULL;
	d->cdict = d->ddict = NULL;
	atomic_store_explicit(&d->ready, false, memory_order_relaxed);
}

void zp_zdict_offer(struct zp_pool *pool, const void *page, size_t len)
{
	struct zp_zdict *d = &pool->zdict;
	uint64_t seen, slot;

	if (!d->cand || len > ZDICT_SAMPLE_MAX ||
	    atomic_load_explicit(&d->seen, memory_order_relaxed) >= zdict_sampled(pool) ||
	    pthread_mutex_trylock(&d->lock) != 0)
		return;
	seen = atomic_load_explicit(&d->seen, memory_order_relaxed);
	if (seen < zdict_sampled(pool)) {
		/* Reservoir sampling: each page seen so far is in with the same chance. */
		slot = seen < ZDICT_CANDIDATES ? seen : zdict_rand(&d->rng) % (seen + 1);
		if (slot < ZDICT_CANDIDATES)
			memcpy(d->cand + slot * ZP_PAGE_SIZE, page, ZP_PAGE_SIZE);
		atomic_store_explicit(&d->seen, seen + 1, memory_order_relaxed);
	}
	pthread_mutex_unlock(&d->lock);
}

/* zstd's size of candidate @j, against the dictionary @cd or none; 0 if it failed. */
static size_t zdict_size(struct zp_pool *pool, struct zp_cctx *c, const struct zp_zdict *d,
			 unsigned j, const ZSTD_CDict *cd)
{
	bool with;

	return zp_compress_zstd(pool, c, d->cand + (size_t)j * ZP_PAGE_SIZE, cd, &with);
}

/*
 * Each candidate as a dictionary of its own for the others: the bytes it
 * saves them (@gain), against their sizes without one.  About 270 zstd
 * compressions of a page, once: 3.5-4.9 ms of thread CPU here.
 */
static void zdict_gains(struct zp_pool *pool, struct zp_cctx *c, struct zp_zdict *d,
			int64_t gain[ZDICT_CANDIDATES])
{
	int level = pool->opt.recompress_level;
	size_t alone[ZDICT_CANDIDATES];

	for (unsigned j = 0; j < ZDICT_CANDIDATES; j++)
		alone[j] = zdict_size(pool, c, d, j, NULL);
	for (unsigned i = 0; i < ZDICT_CANDIDATES; i++) {
		const ZSTD_CDict *cd = ZSTD_initStaticCDict(d->cws, zdict_cbytes(level),
							    d->cand + (size_t)i * ZP_PAGE_SIZE,
							    ZP_PAGE_SIZE, ZSTD_dlm_byRef,
							    ZSTD_dct_rawContent, zdict_cparams(level));

		gain[i] = 0;
		for (unsigned j = 0; cd && j < ZDICT_CANDIDATES; j++) {
			size_t with = j == i ? 0 : zdict_size(pool, c, d, j, cd);

			if (with && alone[j])
				gain[i] += (int64_t)alone[j] - (int64_t)with;
		}
	}
}

/* The ZP_ZDICT_PAGES candidates that saved the most, if they saved anything: the dictionary. */
static void zdict_choose(struct zp_pool *pool, struct zp_zdict *d)
{
	int level = pool->opt.recompress_level;
	int64_t gain[ZDICT_CANDIDATES], total = 0;
	struct zp_cctx *c;
	const ZSTD_CDict *cd;
	const ZSTD_DDict *dd;

	d->cws_bytes = zdict_cbytes(level) + zdict_dbytes();
	d->cws = zp_map(d->cws_bytes, false);
	/* No memory for the dictionaries: none is chosen (total stays 0). */
	if (d->cws) {
		c = zp_cctx_get(pool);
		zdict_gains(pool, c, d, gain);
		zp_cctx_put(c);
		for (unsigned k = 0; k < ZP_ZDICT_PAGES; k++) {
			unsigned best = 0;

			for (unsigned i = 1; i < ZDICT_CANDIDATES; i++)
				if (gain[i] > gain[best])
					best = i;
			total += gain[best];
			memcpy(zdict_content(d) + (size_t)k * ZP_PAGE_SIZE,
			       d->cand + (size_t)best * ZP_PAGE_SIZE, ZP_PAGE_SIZE);
			gain[best] = INT64_MIN;
		}
	}
	/* The candidates' memory goes back; their space stays reserved. */
	madvise(d->cand, (size_t)ZDICT_CANDIDATES * ZP_PAGE_SIZE, MADV_DONTNEED);
	if (total <= 0)
		return;		/* pages with nothing in common, or no memory: no dictionary */
	cd = ZSTD_initStaticCDict(d->cws, zdict_cbytes(level), zdict_content(d),
				  ZP_ZDICT_BYTES, ZSTD_dlm_byRef, ZSTD_dct_rawContent,
				  zdict_cparams(level));
	dd = ZSTD_initStaticDDict(d->cws + zdict_cbytes(level), zdict_dbytes(),
				  zdict_content(d), ZP_ZDICT_BYTES, ZSTD_dlm_byRef,
				  ZSTD_dct_rawContent);
	if (!cd || !dd)
		return;		/* recompression goes on without */
	d->cdict = (void *)cd;
	d->ddict = (void *)dd;
	atomic_store_explicit(&d->ready, true, memory_order_release);
}

const void *zp_zdict_cdict(struct zp_pool *pool)
{
	struct zp_zdict *d = &pool->zdict;

	if (cgm_likely(atomic_load_explicit(&d->ready, memory_order_acquire)))
		return d->cdict;
	/* (The sample still open: no lock, every store of a zstd pool asks.) */
	if (!d->cand || atomic_load_explicit(&d->chosen, memory_order_relaxed) ||
	    atomic_load_explicit(&d->seen, memory_order_relaxed) < zdict_sampled(pool))
		return NULL;
	pthread_mutex_lock(&d->lock);
	if (!atomic_load_explicit(&d->chosen, memory_order_relaxed)) {
		zdict_choose(pool, d);
		atomic_store_explicit(&d->chosen, true, memory_order_release);
	}
	pthread_mutex_unlock(&d->lock);
	return atomic_load_explicit(&d->ready, memory_order_acquire) ? d->cdict : NULL;
}

const void *zp_zdict_ddict(struct zp_pool *pool)
{
	return atomic_load_explicit(&pool->zdict.ready, memory_order_acquire) ?
	       pool->zdict.ddict : NULL;
}
