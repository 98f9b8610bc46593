/*
 * glibc's malloc introspection and tuning calls, answered for mimalloc.
 *
 * Programs call these to report memory use or to tune glibc's arenas.  The
 * tuning knobs have no mimalloc counterpart and are accepted and ignored;
 * the reports are built from what mimalloc can tell (committed memory,
 * resident size) so that their numbers are plausible, never garbage.
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <mimalloc.h>
#include <stdio.h>

#include "cgm/compiler.h"
#include "cgm/shim.h"

static void process_memory(size_t *commit, size_t *peak_commit, size_t *rss)
{
	size_t elapsed, user, sys, peak_rss, faults;

	mi_process_info(&elapsed, &user, &sys, rss, &peak_rss, commit,
			peak_commit, &faults);
}

CGM_EXPORT struct mallinfo2 mallinfo2(void)
{
	struct mallinfo2 mi = { 0 };
	size_t commit, peak_commit, rss;

	process_memory(&commit, &peak_commit, &rss);
	/*
	 * mimalloc has no single arena; report what it has committed as the
	 * arena, all of it in use (the free space inside its pages is not
	 * known without walking every heap).
	 */
	mi.arena = commit;
	mi.uordblks = commit;
	mi.fordblks = 0;
	mi.usmblks = peak_commit;
	mi.ordblks = 1;
	return mi;
}

static int clamp_int(size_t v)
{
	return v > INT_MAX ? INT_MAX : (int)v;
}

CGM_EXPORT struct mallinfo mallinfo(void)
{
	struct mallinfo2 m2 = mallinfo2();
	struct mallinfo m = { 0 };

	m.arena = clamp_int(m2.arena);
	m.ordblks = clamp_int(m2.ordblks);
	m.usmblks = clamp_int(m2.usmblks);
	m.uordblks = clamp_int(m2.uordblks);
	m.fordblks = clamp_int(m2.fordblks);
	return m;
}

/* Same layout as glibc's report, which is what scripts grep for. */
CGM_EXPORT void malloc_stats(void)
{
	struct mallinfo2 m = mallinfo2();

	fprintf(stderr, "Arena 0:\nsystem bytes     = %10zu\nin use bytes     = %10zu\n"
		"Total (incl. mmap):\nsystem bytes     = %10zu\nin use bytes     = %10zu\n"
		"max mmap regions = %10d\nmax mmap bytes   = %10lu\n",
		m.arena, m.uordblks, m.arena, m.uordblks, 0, 0UL);
}

CGM_EXPORT int malloc_info(int options, FILE *fp)
{
	struct mallinfo2 m = mallinfo2();

	if (options != 0) {
		errno = EINVAL;
		return -1;
	}
	fprintf(fp, "<malloc version=\"1\">\n<heap nr=\"0\">\n"
		"<system type=\"current\" size=\"%zu\"/>\n"
		"<system type=\"max\" size=\"%zu\"/>\n</heap>\n"
		"<system type=\"current\" size=\"%zu\"/>\n"
		"<system type=\"max\" size=\"%zu\"/>\n</malloc>\n",
		m.arena, m.usmblks, m.arena, m.usmblks);
	return 0;
}

/* Returns 1 as glibc does when memory may have been given back. */
CGM_EXPORT int malloc_trim(size_t pad)
{
	(void)pad;
	mi_collect(true);
	return 1;
}

/* glibc returns 1 for success; every parameter is accepted and ignored. */
CGM_EXPORT int mallopt(int param, int value)
{
	(void)param;
	(void)value;
	return 1;
}
