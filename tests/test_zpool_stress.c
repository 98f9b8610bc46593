/*
 * Multithreaded stress of the pool: four threads store, load, invalidate
 * pages and allocate, read, free objects, while a fifth compacts and a
 * sixth forces writeback, under a pool limit that also writes back on its
 * own; the fifth also gives back the compression contexts' scratch
 * (zp_trim), which the workers' next use lays out again.  Every load and
 * every object read is checked against the thread's reference copy, and
 * the fifth thread checks that the pool never passes its limit.  Also
 * built with ThreadSanitizer (check-tsan-zpool).
 *
 * With "recompress" the pool has no backing file and the sixth thread
 * recompresses the oldest entries with zstd instead (zp_recompress),
 * while the workers load and invalidate them -- against the dictionary,
 * chosen from the workers' stores while they store.  With "zstd" the
 * pool is a zstd one, whose stores use that dictionary once it is chosen,
 * and the sixth thread writes back as without an argument.
 *
 * usage: test_zpool_stress [ops-per-thread] [seed] [recompress|zstd]
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgm/zpool.h"
#include "zpool_pages.h"

#define WORKERS 4
#define SLOTS 160
#define OBJS 160

static struct zp_pool *pool;
static unsigned char *heap;
static long nheap;
static unsigned long ops = 20000;
static uint64_t seed = 42;
static atomic_bool stop;
static atomic_ulong mismatches, errors, compactions, writebacks, peak_pages;
static bool recompress, zstd;

struct worker {
	pthread_t tid;
	unsigned id;
	zp_entry_t e[SLOTS];
	unsigned char ref[SLOTS][ZPT_PAGE];
	zp_handle_t h[OBJS];
	uint32_t hsize[OBJS], hseed[OBJS];
	unsigned long stores, loads, objs, refused, objs_refused;
};

static void make_page(uint64_t *rng, unsigned char *p)
{
	switch (zpt_rand(rng) % 6) {
	case 0: zpt_page_random(rng, p); break;
	case 1: zpt_page_same(zpt_rand(rng) & 0xff, p); break;
	case 2: zpt_page_text(rng, p); break;
	case 3: zpt_page_mixed(rng, p); break;
	default:
		memcpy(p, heap + (size_t)(zpt_rand(rng) % (uint64_t)nheap) * ZPT_PAGE,
		       ZPT_PAGE);
		break;
	}
}

static void obj_fill(unsigned char *buf, uint32_t size, uint32_t s)
{
	for (uint32_t i = 0; i < size; i++)
		buf[i] = (unsigned char)(s + i * 13);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t rng = seed * 1000 + w->id + 1;
	unsigned char page[ZPT_PAGE], out[ZPT_PAGE];
	unsigned long bad = 0, err = 0;
	int ret;

	for (unsigned long n = 0; n < ops; n++) {
		unsigned op = (unsigned)(zpt_rand(&rng) % 100);
		unsigned i = (unsigned)(zpt_rand(&rng) % SLOTS);
		unsigned j = (unsigned)(zpt_rand(&rng) % OBJS);

		if (op < 25) {
			if (w->e[i]) {
				err += zp_invalidate(pool, w->e[i]) != 0;
				w->e[i] = 0;
			}
			make_page(&rng, page);
			ret = zp_store(pool, page, &w->e[i]);
			if (ret == 0) {
				memcpy(w->ref[i], page, ZPT_PAGE);
				w->stores++;
			} else {
				/* At the limit while writeback lags: refused,
				 * as zswap refuses; anything else is a bug. */
				err += ret != -ENOSPC;
				w->refused++;
				w->e[i] = 0;
			}
		} else if (op < 60) {
			if (w->e[i]) {
				bad += zp_load(pool, w->e[i], out) != 0 ||
				       memcmp(out, w->ref[i], ZPT_PAGE) != 0;
				w->loads++;
			}
		} else if (op < 70) {
			if (w->e[i]) {
				err += zp_invalidate(pool, w->e[i]) != 0;
				w->e[i] = 0;
			}
		} else if (op < 80) {
			/* Objects: compaction moves them under our handles. */
			if (w->h[j])
				err += zp_free(pool, w->h[j]) != 0;
			w->hsize[j] = 16 + (uint32_t)(zpt_rand(&rng) % 3000);
			w->hseed[j] = (uint32_t)zpt_rand(&rng);
			w->h[j] = zp_malloc(pool, w->hsize[j]);
			if (w->h[j]) {
				obj_fill(page, w->hsize[j], w->hseed[j]);
				err += zp_obj_write(pool, w->h[j], page, w->hsize[j]) != 0;
				w->objs++;
			} else {
				/* Objects count toward the limit: at it, zp_malloc
				 * refuses (it never writes back). */
				w->objs_refused++;
			}
		} else if (op < 95) {
			if (w->h[j]) {
				const void *p = zp_obj_read_begin(pool, w->h[j], out);

				obj_fill(page, w->hsize[j], w->hseed[j]);
				bad += !p || memcmp(p, page, w->hsize[j]) != 0;
				zp_obj_read_end(pool, w->h[j], p);
			}
		} else if (w->h[j]) {
			err += zp_free(pool, w->h[j]) != 0;
			w->h[j] = 0;
		}
	}
	/* Everything still reads back; then release it all. */
	for (unsigned i = 0; i < SLOTS; i++) {
		if (!w->e[i])
			continue;
		bad += zp_load(pool, w->e[i], out) != 0 ||
		       memcmp(out, w->ref[i], ZPT_PAGE) != 0;
		err += zp_invalidate(pool, w->e[i]) != 0;
	}
	for (unsigned j = 0; j < OBJS; j++)
		if (w->h[j])
			err += zp_free(pool, w->h[j]) != 0;
	atomic_fetch_add(&mismatches, bad);
	atomic_fetch_add(&errors, err);
	return NULL;
}

static void *compactor_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		unsigned long pages = zp_get_total_pages(pool);

		/* The limit holds exactly, with four threads allocating. */
		if (pages > atomic_load(&peak_pages))
			atomic_store(&peak_pages, pages);
		zp_compact(pool);
		/* And the contexts' scratch given back under the workers' feet (zp_trim). */
		zp_trim(pool);
		atomic_fetch_add(&compactions, 1);
		sched_yield();
	}
	return NULL;
}

static void *writeback_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		long n = recompress ? zp_recompress(pool, 16, 0) : zp_writeback(pool, 16);

		if (n > 0)
			atomic_fetch_add(&writebacks, (unsigned long)n);
		sched_yield();
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static struct worker w[WORKERS];
	char path[] = "/tmp/zpool-stress-XXXXXX";
	struct zp_options o = { .max_bytes = 1024 * ZPT_PAGE, .wb_batch = 16 };
	pthread_t compactor, writer;
	const char *source;
	struct zp_stats st;
	unsigned long stores = 0, loads = 0, objs = 0, refused = 0, objs_refused = 0;
	int fd, bad = 0;

	if (argc > 1)
		ops = strtoul(argv[1], NULL, 0);
	if (argc > 2)
		seed = strtoull(argv[2], NULL, 0);
	recompress = argc > 3 && strcmp(argv[3], "recompress") == 0;
	zstd = argc > 3 && strcmp(argv[3], "zstd") == 0;
	nheap = zpt_heap_pages(1024, &heap, &source);
	fd = mkstemp(path);
	if (nheap <= 0 || fd < 0) {
		fprintf(stderr, "setup failed\n");
		return 2;
	}
	close(fd);
	o.backing = recompress ? NULL : path;
	o.recompress = recompress;
	o.codec = zstd ? ZP_CODEC_ZSTD : ZP_CODEC_LZ4;
	/* The dictionary is chosen early, while the workers store and load (zdict.c). */
	o.dict_after = 64;
	if (zp_create_pool(&o, &pool)) {
		fprintf(stderr, "cannot create pool\n");
		return 2;
	}
	unlink(path);	/* the pool keeps it open; nothing is left behind */
	pthread_create(&compactor, NULL, compactor_main, NULL);
	pthread_create(&writer, NULL, writeback_main, NULL);
	for (unsigned i = 0; i < WORKERS; i++) {
		w[i].id = i;
		pthread_create(&w[i].tid, NULL, worker_main, &w[i]);
	}
	for (unsigned i = 0; i < WORKERS; i++) {
		pthread_join(w[i].tid, NULL);
		stores += w[i].stores;
		loads += w[i].loads;
		objs += w[i].objs;
		refused += w[i].refused;
		objs_refused += w[i].objs_refused;
	}
	atomic_store(&stop, true);
	pthread_join(compactor, NULL);
	pthread_join(writer, NULL);
	zp_compact(pool);
	zp_pool_stats(pool, &st);
	printf("stress: %d threads x %lu ops (%s): %lu stores (%lu refused), %lu loads, "
	       "%lu objects (%lu refused), "
	       "%lu compactions (%lu pages, %lu objects moved), %lu written back, "
	       "%lu loads from disk, %lu recompressed (%lu declined, %lu against the dictionary), "
	       "%lu stored against the dictionary\n",
	       WORKERS, ops, source,
	       stores, refused, loads, objs,
	       objs_refused, atomic_load(&compactions), (unsigned long)st.pages_compacted,
	       (unsigned long)st.objs_moved, (unsigned long)st.written_back_pages,
	       (unsigned long)st.wb_loads, (unsigned long)st.recompressed_pages,
	       (unsigned long)st.recompress_declined, (unsigned long)st.recompressed_dict,
	       (unsigned long)st.stored_dict);
	if ((recompress && !st.recompressed_dict) || (zstd && !st.stored_dict)) {
		fprintf(stderr, "FAIL: nothing was compressed against the dictionary\n");
		bad = 1;
	}
	if (atomic_load(&mismatches) || atomic_load(&errors)) {
		fprintf(stderr, "FAIL: %lu mismatches, %lu errors\n",
			atomic_load(&mismatches), atomic_load(&errors));
		bad = 1;
	}
	if (st.stored_pages || st.mem_used_total || st.backing_bytes ||
	    st.compr_data_size || st.orig_data_size) {
		fprintf(stderr, "FAIL: left over: %lu entries, %lu bytes of memory, "
			"%lu of file\n", (unsigned long)st.stored_pages,
			(unsigned long)st.mem_used_total,
			(unsigned long)st.backing_bytes);
		bad = 1;
	}
	if (atomic_load(&peak_pages) * ZPT_PAGE > o.max_bytes) {
		fprintf(stderr, "FAIL: the pool reached %lu pages, limit %zu\n",
			atomic_load(&peak_pages), o.max_bytes / ZPT_PAGE);
		bad = 1;
	}
	if ((recompress ? st.recompressed_pages : st.written_back_pages) == 0 ||
	    st.objs_moved == 0) {
		fprintf(stderr, "FAIL: %s or compaction never happened\n",
			recompress ? "recompression" : "writeback");
		bad = 1;
	}
	zp_destroy_pool(pool);
	printf("%d passed, %d failed\n", bad ? 0 : 1, bad);
	return bad;
}
