/*
 * Statistics: pool-wide counters and zsmalloc's per-class table.
 *
 * Counters are relaxed atomics updated where things happen; a snapshot
 * taken while other threads work is a little inconsistent between fields,
 * as /sys/kernel/debug/zswap is.  The class table is read under each class
 * lock, so each row is exact.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "zp_types.h"

#define LOAD(pool, f) atomic_load_explicit(&(pool)->f, memory_order_relaxed)

void zp_pool_stats(struct zp_pool *pool, struct zp_stats *st)
{
	uint64_t handles = atomic_load(&pool->handles.top);
	uint64_t entries = atomic_load(&pool->entries.top);

	st->stored_pages = LOAD(pool, st_stored);
	st->orig_data_size = LOAD(pool, st_orig);
	st->compr_data_size = LOAD(pool, st_compr);
	st->mem_used_total = (uint64_t)zp_get_total_pages(pool) * ZP_PAGE_SIZE;
	/* Table entries ever touched, and the descriptors of arena pages
	 * ever used: what the tables can have made resident. */
	st->meta_bytes = handles * (sizeof(*pool->handle_slot) + sizeof(uint32_t)) +
			 entries * (sizeof(*pool->entry) + sizeof(uint32_t)) +
			 (uint64_t)__atomic_load_n(&pool->arena_top, __ATOMIC_RELAXED) *
			 sizeof(struct zp_zspage);
	st->same_pages = LOAD(pool, st_same);
	st->huge_pages = LOAD(pool, st_huge);
	st->pages_compacted = LOAD(pool, st_compacted);
	st->objs_moved = LOAD(pool, st_moved);
	st->written_back_pages = LOAD(pool, st_written);
	st->wb_pages_on_disk = LOAD(pool, st_on_disk);
	st->wb_loads = LOAD(pool, st_wb_loads);
	st->wb_io_errors = LOAD(pool, st_wb_errors);
	st->wb_read_errors = LOAD(pool, st_wb_read_errors);
	st->backing_bytes = zp_wb_space_used(pool);
	st->pool_limit_hit = LOAD(pool, st_limit_hit);
	st->reject_compress_poor = LOAD(pool, st_reject_poor);
	st->reject_alloc_fail = LOAD(pool, st_reject_alloc);
	st->recompressed_pages = LOAD(pool, st_recompressed);
	st->recompress_declined = LOAD(pool, st_recompress_declined);
	st->recompressed_dict = LOAD(pool, st_recompressed_dict);
	st->stored_dict = LOAD(pool, st_stored_dict);
	st->stored_dense = LOAD(pool, st_stored_dense);
	st->stored_dense_dict = LOAD(pool, st_stored_dense_dict);
}

static void class_row(struct zp_class *cls, struct zp_class_stats *row)
{
	pthread_mutex_lock(&cls->lock);
	row->index = cls->index;
	row->size = cls->size;
	/* Groups 1..11 (10%..100%); empty zspages are not shown. */
	for (unsigned fg = 1; fg < ZP_NR_FULLNESS; fg++)
		row->fullness[fg - 1] = cls->fullness_count[fg];
	row->obj_allocated = cls->nr_zspages * cls->objs_per_zspage;
	row->obj_used = cls->obj_used;
	row->pages_used = cls->nr_zspages * cls->pages_per_zspage;
	row->pages_per_zspage = cls->pages_per_zspage;
	row->freeable = zp_class_freeable(cls);
	pthread_mutex_unlock(&cls->lock);
}

unsigned zp_class_stats(struct zp_pool *pool, struct zp_class_stats *rows,
			unsigned max)
{
	unsigned n = 0;

	for (unsigned i = 0; i < ZP_NR_ALL_CLASSES && n < max; i++)
		if (pool->class_map[i] == i)
			class_row(&pool->classes[i], &rows[n++]);
	return n;
}

/* snprintf into what is left of the buffer; remembers overflow. */
struct out {
	char *buf;
	size_t size, len;
	bool full;
};

static void CGM_PRINTF(2, 3) out_printf(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->len, o->size - o->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->size - o->len) {
		o->full = true;
		return;
	}
	o->len += (size_t)n;
}

static const char *const zp_fullness_names[11] = {
	"10%", "20%", "30%", "40%", "50%", "60%", "70%", "80%", "90%", "99%", "100%",
};

int zp_classes_show(struct zp_pool *pool, char *buf, size_t size)
{
	struct out o = { .buf = buf, .size = size, .len = 0, .full = false };
	struct zp_class_stats row, total = { 0 };

	if (!buf || size == 0)
		return -EINVAL;
	buf[0] = '\0';
	out_printf(&o, "%5s %5s", "class", "size");
	for (unsigned i = 0; i < 11; i++)
		out_printf(&o, " %9s", zp_fullness_names[i]);
	out_printf(&o, " %13s %10s %10s %16s %8s\n", "obj_allocated",
		   "obj_used", "pages_used", "pages_per_zspage", "freeable");
	for (unsigned i = 0; i < ZP_NR_ALL_CLASSES; i++) {
		if (pool->class_map[i] != i)
			continue;
		class_row(&pool->classes[i], &row);
		out_printf(&o, "%5u %5u", row.index, row.size);
		for (unsigned g = 0; g < 11; g++) {
			out_printf(&o, " %9lu", (unsigned long)row.fullness[g]);
			total.fullness[g] += row.fullness[g];
		}
		out_printf(&o, " %13lu %10lu %10lu %16u %8lu\n",
			   (unsigned long)row.obj_allocated,
			   (unsigned long)row.obj_used,
			   (unsigned long)row.pages_used, row.pages_per_zspage,
			   (unsigned long)row.freeable);
		total.obj_allocated += row.obj_allocated;
		total.obj_used += row.obj_used;
		total.pages_used += row.pages_used;
		total.freeable += row.freeable;
	}
	out_printf(&o, "\n%5s %5s", "Total", "");
	for (unsigned g = 0; g < 11; g++)
		out_printf(&o, " %9lu", (unsigned long)total.fullness[g]);
	out_printf(&o, " %13lu %10lu %10lu %16s %8lu\n",
		   (unsigned long)total.obj_allocated,
		   (unsigned long)total.obj_used,
		   (unsigned long)total.pages_used, "",
		   (unsigned long)total.freeable);
	return o.full ? -ENOSPC : (int)o.len;
}
