/*
 * Model-based random test of the page store: long random sequences of
 * store / load / invalidate / compact / writeback, in several pool
 * configurations, checked against a reference copy of every stored page
 * and against the statistics the model predicts.  Every load must be
 * byte-identical.  Pages: random, zero, same-filled words, text, mixed,
 * and real heap pages of a running program.
 *
 * usage: test_zpool_model [ops-per-config] [seed]
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgm/zpool.h"
#include "zpool_pages.h"

#define SLOTS 2500

struct slot {
	zp_entry_t e;
	bool same;
};

static unsigned char *heap;
static long nheap;
static unsigned long failures, checks;

#define CHECK(cond, ...) do {						\
	checks++;							\
	if (!(cond)) {							\
		if (failures++ < 20) {					\
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);			\
			fputc('\n', stderr);				\
		}							\
	}								\
} while (0)

static bool is_same(const unsigned char *p)
{
	for (size_t i = 8; i < ZPT_PAGE; i += 8)
		if (memcmp(p, p + i, 8))
			return false;
	return true;
}

static void make_page(uint64_t *rng, unsigned char *p)
{
	switch (zpt_rand(rng) % 8) {
	case 0: zpt_page_random(rng, p); break;
	case 1: memset(p, 0, ZPT_PAGE); break;
	case 2: zpt_page_same(zpt_rand(rng) % 3 ? zpt_rand(rng) : 0xffffffffffffffffull, p); break;
	case 3: zpt_page_text(rng, p); break;
	case 4: zpt_page_mixed(rng, p); break;
	default:
		memcpy(p, heap + (size_t)(zpt_rand(rng) % (uint64_t)nheap) * ZPT_PAGE,
		       ZPT_PAGE);
		break;
	}
}

struct config {
	const char *name;
	struct zp_options opt;
	bool backing;
};

static void check_stats(struct zp_pool *pool, struct slot *slots,
			unsigned live, const char *when)
{
	struct zp_stats st;
	unsigned same = 0;

	for (unsigned i = 0; i < SLOTS; i++)
		same += slots[i].e && slots[i].same;
	zp_pool_stats(pool, &st);
	CHECK(st.stored_pages == live, "%s: stored_pages %lu, model %u", when,
	      (unsigned long)st.stored_pages, live);
	CHECK(st.same_pages == same, "%s: same_pages %lu, model %u", when,
	      (unsigned long)st.same_pages, same);
	CHECK(st.orig_data_size == (st.stored_pages - st.wb_pages_on_disk) * ZPT_PAGE,
	      "%s: orig_data_size %lu vs %lu in memory", when,
	      (unsigned long)st.orig_data_size,
	      (unsigned long)(st.stored_pages - st.wb_pages_on_disk));
	CHECK(st.compr_data_size <= st.orig_data_size, "%s: compr > orig", when);
	CHECK(st.huge_pages * ZPT_PAGE <= st.compr_data_size, "%s: huge", when);
	/* Pool memory holds at least the compressed bytes. */
	CHECK(st.mem_used_total >= st.compr_data_size, "%s: mem %lu < compr %lu",
	      when, (unsigned long)st.mem_used_total,
	      (unsigned long)st.compr_data_size);
}

static void run(const struct config *cfg, unsigned long ops, uint64_t seed)
{
	static struct slot slots[SLOTS];
	static unsigned char ref[SLOTS][ZPT_PAGE];
	unsigned char page[ZPT_PAGE], out[ZPT_PAGE];
	struct zp_options o = cfg->opt;
	char path[] = "/tmp/zpool-model-XXXXXX";
	struct zp_pool *pool;
	uint64_t rng = seed;
	unsigned live = 0;
	unsigned long stores = 0, loads = 0, rejected = 0, wb = 0;
	struct zp_stats st;
	int ret;

	if (cfg->backing) {
		int fd = mkstemp(path);

		if (fd < 0) {
			perror("mkstemp");
			exit(2);
		}
		close(fd);
		o.backing = path;
	}
	if (zp_create_pool(&o, &pool)) {
		fprintf(stderr, "%s: cannot create pool\n", cfg->name);
		exit(2);
	}
	if (cfg->backing)
		unlink(path);	/* the pool keeps it open */
	memset(slots, 0, sizeof(slots));
	for (unsigned long n = 0; n < ops; n++) {
		unsigned i = (unsigned)(zpt_rand(&rng) % SLOTS);
		unsigned op = (unsigned)(zpt_rand(&rng) % 100);
		struct slot *s = &slots[i];

		if (op < 40 && !s->e) {
			make_page(&rng, page);
			ret = zp_store(pool, page, &s->e);
			if (ret == 0) {
				memcpy(ref[i], page, ZPT_PAGE);
				s->same = is_same(page);
				live++;
				stores++;
			} else {
				s->e = 0;
				rejected++;
				CHECK((ret == -E2BIG && o.huge_policy == ZP_HUGE_REJECT) ||
				      (ret == -ENOSPC && o.max_bytes && !o.backing),
				      "%s: store returned %d", cfg->name, ret);
			}
		} else if (op < 75 && s->e) {
			ret = zp_load(pool, s->e, out);
			CHECK(ret == 0 && memcmp(out, ref[i], ZPT_PAGE) == 0,
			      "%s: op %lu: load of slot %u (entry %u) ret %d differs",
			      cfg->name, n, i, s->e, ret);
			loads++;
		} else if (op < 90 && s->e) {
			ret = zp_invalidate(pool, s->e);
			CHECK(ret == 0, "%s: invalidate %d", cfg->name, ret);
			s->e = 0;
			live--;
		} else if (op < 93) {
			zp_compact(pool);
		} else if (op < 95) {
			long w = zp_writeback(pool, 1 + zpt_rand(&rng) % 6);

			CHECK(o.backing ? w >= 0 : w == -ENODEV, "%s: writeback %ld",
			      cfg->name, w);
			wb += w > 0 ? (unsigned long)w : 0;
		} else if (op < 96) {
			check_stats(pool, slots, live, cfg->name);
		}
	}
	check_stats(pool, slots, live, cfg->name);
	/* Everything still loads, then everything goes. */
	for (unsigned i = 0; i < SLOTS; i++) {
		if (!slots[i].e)
			continue;
		ret = zp_load(pool, slots[i].e, out);
		CHECK(ret == 0 && memcmp(out, ref[i], ZPT_PAGE) == 0,
		      "%s: final load of slot %u differs", cfg->name, i);
		CHECK(zp_invalidate(pool, slots[i].e) == 0, "%s: final invalidate",
		      cfg->name);
	}
	zp_compact(pool);
	zp_pool_stats(pool, &st);
	CHECK(st.stored_pages == 0 && st.orig_data_size == 0 &&
	      st.compr_data_size == 0 && st.same_pages == 0 &&
	      st.huge_pages == 0 && st.wb_pages_on_disk == 0,
	      "%s: counters not back to zero", cfg->name);
	CHECK(st.mem_used_total == 0, "%s: %lu bytes of pool memory left",
	      cfg->name, (unsigned long)st.mem_used_total);
	CHECK(st.backing_bytes == 0, "%s: %lu bytes of file space left",
	      cfg->name, (unsigned long)st.backing_bytes);
	printf("%-22s stores %6lu loads %6lu rejected %5lu written back %6lu "
	       "compacted %6lu pages, io errors %lu\n", cfg->name, stores, loads,
	       rejected, (unsigned long)st.written_back_pages,
	       (unsigned long)st.pages_compacted, (unsigned long)st.wb_io_errors);
	(void)wb;
	zp_destroy_pool(pool);
}

int main(int argc, char **argv)
{
	unsigned long ops = argc > 1 ? strtoul(argv[1], NULL, 0) : 40000;
	uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : 0x5eed;
	const char *source;
	const struct config cfgs[] = {
		{ .name = "lz4+writeback+limit", .backing = true,
		  .opt = { .max_bytes = 256 * ZPT_PAGE } },
		{ .name = "zstd+writeback", .backing = true,
		  .opt = { .codec = ZP_CODEC_ZSTD, .wb_batch = 7 } },
		{ .name = "lz4 reject,limit", .backing = false,
		  .opt = { .huge_policy = ZP_HUGE_REJECT, .max_bytes = 600 * ZPT_PAGE } },
		{ .name = "lz4 eager compaction", .backing = false,
		  .opt = { .compact_threshold = 5, .level = 4 } },
	};

	nheap = zpt_heap_pages(4096, &heap, &source);
	if (nheap <= 0) {
		fprintf(stderr, "no heap pages\n");
		return 2;
	}
	printf("heap pages: %ld from %s; seed %#llx\n", nheap, source,
	       (unsigned long long)seed);
	for (size_t c = 0; c < sizeof(cfgs) / sizeof(cfgs[0]); c++)
		run(&cfgs[c], ops, seed + c);
	printf("%lu passed, %lu failed\n", checks - failures, failures);
	return failures ? 1 : 0;
}
