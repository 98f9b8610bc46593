/*
 * Size classes: their geometry, and which of them are merged.
 *
 * Classes are 16 bytes apart from 32 bytes to a page (slot size, object
 * header included).  Each class packs its objects into zspages of 1..8
 * contiguous pages.  A longer zspage can waste a smaller fraction at its
 * tail (the space that cannot hold a whole object), but each class keeps
 * about one partly filled zspage, so a long zspage costs more than its
 * tail saves until the class holds many of them.  We take the shortest
 * zspage whose tail waste is within ZP_WASTE_SLACK of the least any
 * length achieves: measured on a 32 MB set of Python heap pages, pool
 * memory per compressed byte after compaction went from 1.19 (least
 * waste, zsmalloc's rule) to 1.09.  Neighbouring classes that end up
 * with the same pages and objects per zspage would only differ in the
 * space they waste inside each slot, so, as zsmalloc does, the smaller
 * ones are merged into the largest: one set of zspages, lists and locks.
 */
#include "zp_types.h"

/* Tail waste, in thousandths of the zspage. */
static unsigned waste_permille(unsigned size, unsigned n)
{
	size_t bytes = (size_t)n * ZP_PAGE_SIZE;

	return (unsigned)(bytes % size * 1000 / bytes);
}

void zp_class_geometry(unsigned size, unsigned *pages, unsigned *objs)
{
	unsigned least = 1000, n;

	for (n = 1; n <= ZP_MAX_PAGES_PER_ZSPAGE; n++)
		if (waste_permille(size, n) < least)
			least = waste_permille(size, n);
	for (n = 1; waste_permille(size, n) > least + ZP_WASTE_SLACK; n++)
		;
	*pages = n;
	*objs = (unsigned)((size_t)n * ZP_PAGE_SIZE / size);
}

static void class_setup(struct zp_class *cls, unsigned index, unsigned size,
			unsigned hdr, unsigned pages, unsigned objs)
{
	pthread_mutex_init(&cls->lock, NULL);
	cls->index = index;
	cls->size = size;
	cls->hdr = hdr;
	cls->pages_per_zspage = pages;
	cls->objs_per_zspage = objs;
}

void zp_classes_init(struct zp_pool *pool)
{
	unsigned prev_pages = 0, prev_objs = 0, rep = 0;

	for (int i = ZP_NR_CLASSES - 1; i >= 0; i--) {
		unsigned size = ZP_MIN_ALLOC + (unsigned)i * ZP_CLASS_DELTA;
		unsigned pages, objs;

		zp_class_geometry(size, &pages, &objs);
		if (pages == prev_pages && objs == prev_objs) {
			pool->class_map[i] = (uint8_t)rep;
			continue;
		}
		rep = (unsigned)i;
		prev_pages = pages;
		prev_objs = objs;
		pool->class_map[i] = (uint8_t)i;
		class_setup(&pool->classes[i], (unsigned)i, size, ZP_OBJ_HDR,
			    pages, objs);
	}
	/* Huge: a whole page per object and no header; the handle lives in
	 * the zspage descriptor instead. */
	pool->class_map[ZP_HUGE_CLASS] = ZP_HUGE_CLASS;
	class_setup(&pool->classes[ZP_HUGE_CLASS], ZP_HUGE_CLASS, ZP_PAGE_SIZE,
		    0, 1, 1);
}

/* The class an object of @size bytes (1..ZP_PAGE_SIZE) is allocated in. */
struct zp_class *zp_size_class(struct zp_pool *pool, size_t size)
{
	size_t slot = size + ZP_OBJ_HDR;
	unsigned i;

	if (slot > ZP_PAGE_SIZE)
		return &pool->classes[ZP_HUGE_CLASS];
	i = slot <= ZP_MIN_ALLOC ? 0 :
	    (unsigned)((slot - ZP_MIN_ALLOC + ZP_CLASS_DELTA - 1) / ZP_CLASS_DELTA);
	return &pool->classes[pool->class_map[i]];
}

size_t zp_huge_class_size(struct zp_pool *pool)
{
	/* The smallest class holding one object in a one-page zspage: any
	 * object that needs it occupies a page, compressed or not. */
	for (unsigned i = 0; i < ZP_NR_CLASSES; i++) {
		struct zp_class *cls = &pool->classes[pool->class_map[i]];

		if (cls->objs_per_zspage == 1 && cls->pages_per_zspage == 1)
			return ZP_MIN_ALLOC + i * ZP_CLASS_DELTA - ZP_OBJ_HDR - ZP_CLASS_DELTA + 1;
	}
	return ZP_PAGE_SIZE;
}
