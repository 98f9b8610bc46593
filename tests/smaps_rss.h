/*
 * RSS of some of the calling process's own mappings, from
 * /proc/self/smaps: for tests that bound what a process keeps resident.
 */
#ifndef TESTS_SMAPS_RSS_H
#define TESTS_SMAPS_RSS_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Does the mapping of @path (maybe "") with permissions @perms count? */
typedef bool (*smaps_match_fn)(const char *perms, const char *path, const void *arg);

/* Does @path end with @suffix? */
static inline bool smaps_path_ends(const char *path, const char *suffix)
{
	size_t n = strlen(path), k = strlen(suffix);

	return n >= k && strcmp(path + n - k, suffix) == 0;
}

/*
 * The library's executable mappings, and how much of them a process may
 * have resident: one fault-around window and the pages the static keys
 * patch (tests/test_text_rss.c, tests/libexit_rss.c).
 */
#define SMAPS_LIBRARY_CODE_LIMIT_KIB	80

static inline bool smaps_library_code(const char *perms, const char *path, const void *arg)
{
	(void)arg;
	return strchr(perms, 'x') && smaps_path_ends(path, "/libcgmalloc.so");
}

/* KiB resident in the mappings @match accepts, summed; -1 if none does. */
static inline long smaps_rss_kib(smaps_match_fn match, const void *arg)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	bool in = false;
	long kib = -1, rss;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8] = "", path[256] = "";

		/* A mapping's first line starts "lo-hi perms"; its fields start with a word. */
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %255s", &lo, &hi, perms, path) >= 3) {
			in = match(perms, path, arg);
			if (in && kib < 0)
				kib = 0;
		} else if (in && sscanf(line, "Rss: %ld kB", &rss) == 1) {
			kib += rss;
		}
	}
	fclose(f);
	return kib;
}

#endif /* TESTS_SMAPS_RSS_H */
