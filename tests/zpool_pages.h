/*
 * Page generators shared by the zpool tests, fuzz driver and benchmark:
 * random, zero, same-filled, text, and real heap pages of a running
 * program.
 */
#ifndef ZPOOL_PAGES_H
#define ZPOOL_PAGES_H

#include <stddef.h>
#include <stdint.h>

#define ZPT_PAGE 4096u

/* xorshift64*: fast, deterministic per seed. */
static inline uint64_t zpt_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1Dull;
}

void zpt_page_random(uint64_t *rng, unsigned char *page);
void zpt_page_same(uint64_t word, unsigned char *page);
void zpt_page_text(uint64_t *rng, unsigned char *page);
/* A page of a mix: random runs, zero runs, repeated small records. */
void zpt_page_mixed(uint64_t *rng, unsigned char *page);

/*
 * Up to @max resident pages of anonymous writable memory ([heap] and
 * anonymous mappings) of a running Python program that built a realistic
 * heap (dicts, strings, lists, numbers), read through /proc/PID/mem.
 * Without python3, the pages come from this process's own heap after it
 * built similar structures with malloc.  Returns the number of pages put
 * in *pages (malloc'd, ZPT_PAGE each), or -1.  @source names the origin.
 */
long zpt_heap_pages(size_t max, unsigned char **pages, const char **source);

/* Load a page file written by zpt_save_pages, or make one; same result. */
long zpt_heap_pages_cached(const char *path, size_t max, unsigned char **pages,
			   const char **source);

#endif
