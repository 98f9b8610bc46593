/*
 * libFuzzer target over the zpool API.  The input is a program: each op
 * byte picks an operation (allocate, write, read, free, store, load,
 * invalidate, compact, writeback, statistics) and the bytes after it its
 * arguments, including bogus handles and entries.  A model of every live
 * object and page checks each read and load; a mismatch aborts, as does
 * any crash the sanitizers see.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgm/zpool.h"
#include "fuzz/fuzz.h"
#include "zpool_pages.h"

#define MAX_OBJS 48
#define MAX_PAGES 24

struct input {
	const uint8_t *p;
	size_t left;
};

static uint32_t take(struct input *in, unsigned bytes)
{
	uint32_t v = 0;

	while (bytes-- && in->left) {
		v = v << 8 | *in->p++;
		in->left--;
	}
	return v;
}

struct obj { zp_handle_t h; uint32_t size, seed; bool written; };
struct page { zp_entry_t e; unsigned char data[ZPT_PAGE]; };

static struct obj objs[MAX_OBJS];
static struct page pages[MAX_PAGES];

static void obj_fill(unsigned char *b, uint32_t size, uint32_t seed)
{
	for (uint32_t i = 0; i < size; i++)
		b[i] = (unsigned char)(seed + i * 7 + (i >> 9));
}

static bool live_handle(zp_handle_t h)
{
	for (int i = 0; i < MAX_OBJS; i++)
		if (objs[i].h == h)
			return true;
	return false;
}

static bool live_entry(zp_entry_t e)
{
	for (int i = 0; i < MAX_PAGES; i++)
		if (pages[i].e == e)
			return true;
	return false;
}

static bool any_live_page(void)
{
	for (int i = 0; i < MAX_PAGES; i++)
		if (pages[i].e)
			return true;
	return false;
}

static void make_page(struct input *in, unsigned char *d)
{
	uint64_t rng = take(in, 4) | 1;
	unsigned kind = take(in, 1) % 6;

	switch (kind) {
	case 0: memset(d, 0, ZPT_PAGE); break;
	case 1: zpt_page_same(rng * 0x9e3779b97f4a7c15ull, d); break;
	case 2: zpt_page_random(&rng, d); break;
	case 3: zpt_page_text(&rng, d); break;
	case 4: zpt_page_mixed(&rng, d); break;
	default:
		/* the rest of the input, repeated */
		for (size_t i = 0; i < ZPT_PAGE; i++)
			d[i] = in->left ? in->p[i % in->left] : (unsigned char)i;
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	struct zp_options o = { .arena_bytes = 64 << 20, .backing_max = 16 << 20 };
	char path[] = "/tmp/zpool-fuzz-XXXXXX";
	unsigned char buf[ZPT_PAGE], want[ZPT_PAGE];
	static char text[1 << 15];
	struct zp_pool *pool;
	int fd;

	o.codec = take(&in, 1) % 2 ? ZP_CODEC_ZSTD : ZP_CODEC_LZ4;
	o.huge_policy = take(&in, 1) % 2 ? ZP_HUGE_REJECT : ZP_HUGE_RAW;
	o.max_bytes = (take(&in, 1) % 4) * 32 * ZPT_PAGE;
	o.compact_threshold = take(&in, 1);
	/* A backing file costs five io_uring rings per input: half the
	 * inputs go without one. */
	fd = take(&in, 1) % 2 ? mkstemp(path) : -1;
	if (fd >= 0) {
		close(fd);
		o.backing = path;
	}
	if (zp_create_pool(&o, &pool)) {
		if (fd >= 0)
			unlink(path);
		return 0;
	}
	if (fd >= 0)
		unlink(path);
	memset(objs, 0, sizeof(objs));
	for (int i = 0; i < MAX_PAGES; i++)
		pages[i].e = 0;

	while (in.left) {
		unsigned op = take(&in, 1) % 13;
		unsigned i = take(&in, 1);
		struct obj *ob = &objs[i % MAX_OBJS];
		struct page *pg = &pages[i % MAX_PAGES];

		switch (op) {
		case 0:	/* malloc */
			if (ob->h)
				zp_free(pool, ob->h);
			ob->size = take(&in, 2) % (ZPT_PAGE + 8);
			ob->seed = take(&in, 1);
			ob->written = false;
			ob->h = zp_malloc(pool, ob->size);
			if ((ob->size == 0 || ob->size > ZPT_PAGE) && ob->h)
				abort();
			break;
		case 1:	/* write */
			if (ob->h) {
				obj_fill(buf, ob->size, ob->seed);
				if (zp_obj_write(pool, ob->h, buf, ob->size))
					abort();
				ob->written = true;
			}
			break;
		case 2:	/* read */
			if (ob->h && ob->written) {
				const void *p = zp_obj_read_begin(pool, ob->h, buf);

				obj_fill(want, ob->size, ob->seed);
				if (!p || memcmp(p, want, ob->size))
					abort();
				zp_obj_read_end(pool, ob->h, p);
			}
			break;
		case 3:	/* free */
			if (ob->h && zp_free(pool, ob->h))
				abort();
			ob->h = 0;
			break;
		case 4: {	/* bogus handle */
			zp_handle_t h = take(&in, 4);

			/*
			 * Stored pages hold objects of the same pool whose
			 * handles the caller never sees: freeing one of those
			 * is the caller's bug, which no allocator can tell
			 * from a free of its own.  So bogus handles only while
			 * no page is stored.
			 */
			if (!live_handle(h) && !any_live_page()) {
				zp_free(pool, h);
				zp_obj_read_end(pool, h, zp_obj_read_begin(pool, h, buf));
				zp_obj_write(pool, h, buf, 1);
			}
			break;
		}
		case 5:
			zp_compact(pool);
			break;
		case 6:	/* store */
			if (pg->e && zp_invalidate(pool, pg->e))
				abort();
			pg->e = 0;
			make_page(&in, pg->data);
			if (zp_store(pool, pg->data, &pg->e))
				pg->e = 0;
			break;
		case 7:	/* load */
			if (pg->e && (zp_load(pool, pg->e, buf) ||
				      memcmp(buf, pg->data, ZPT_PAGE)))
				abort();
			break;
		case 8:	/* invalidate */
			if (pg->e && zp_invalidate(pool, pg->e))
				abort();
			pg->e = 0;
			break;
		case 9: {	/* bogus entry */
			zp_entry_t e = take(&in, 4);

			if (!live_entry(e)) {
				zp_load(pool, e, buf);
				zp_invalidate(pool, e);
			}
			break;
		}
		case 10:
			zp_writeback(pool, take(&in, 1));
			break;
		case 11: {
			size_t len = take(&in, 2) % sizeof(text) + 1;
			int n = zp_classes_show(pool, text, len);

			if (strlen(text) >= len || (n >= 0 && (size_t)n != strlen(text)))
				abort();
			break;
		}
		default: {
			struct zp_stats st;

			zp_pool_stats(pool, &st);
			if (st.compr_data_size > st.orig_data_size ||
			    st.stored_pages < st.wb_pages_on_disk)
				abort();
			break;
		}
		}
	}
	for (int i = 0; i < MAX_PAGES; i++)
		if (pages[i].e && (zp_load(pool, pages[i].e, buf) ||
				   memcmp(buf, pages[i].data, ZPT_PAGE)))
			abort();
	zp_destroy_pool(pool);
	return 0;
}
