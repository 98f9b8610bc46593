/*
 * Cold memory for the spill test programs: blocks of 64 KiB filled once
 * with bytes that compress about 2:1 (half of each 64 bytes scrambled),
 * so that spilling them takes some time and the pool some room, and
 * checked byte for byte at the end.
 */
#ifndef SPILL_COLD_BLOCKS_H
#define SPILL_COLD_BLOCKS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define COLD_BLOCK	(64u << 10)

static inline unsigned char cold_byte(size_t block, size_t i)
{
	uint64_t x = (block << 20 | i) * 0x9e3779b97f4a7c15ull;

	return (unsigned char)(i % 64 < 32 ? x >> 56 : (block * 13 + i / 64) & 0xff);
}

/* The @n numbers after the program's name into @out; false (usage said) if there are not @n. */
static inline int spill_args(int argc, char **argv, int n, const char *usage, unsigned long *out)
{
	if (argc != n + 1) {
		fprintf(stderr, "usage: %s %s\n", argv[0], usage);
		return 0;
	}
	for (int i = 0; i < n; i++)
		out[i] = strtoul(argv[i + 1], NULL, 10);
	return 1;
}

/* @mb MiB of cold blocks in *@n of them, or NULL (said on stderr, as @who). */
static inline unsigned char **cold_fill(const char *who, unsigned long mb, size_t *n)
{
	size_t count = mb * (1u << 20) / COLD_BLOCK;
	unsigned char **cold = calloc(count ? count : 1, sizeof(*cold));

	if (!cold) {
		fprintf(stderr, "%s: FAIL: no memory for the table of cold blocks\n", who);
		return NULL;
	}
	for (size_t b = 0; b < count; b++) {
		cold[b] = malloc(COLD_BLOCK);
		if (!cold[b]) {
			fprintf(stderr, "%s: FAIL: cold block %zu: malloc returned NULL\n", who, b);
			return NULL;
		}
		for (size_t i = 0; i < COLD_BLOCK; i++)
			cold[b][i] = cold_byte(b, i);
	}
	*n = count;
	return cold;
}

/* The bytes of the @n cold blocks that differ (said on stderr); the blocks are freed. */
static inline size_t cold_check(const char *who, unsigned char **cold, size_t n)
{
	size_t bad = 0;

	for (size_t b = 0; b < n; b++) {
		for (size_t i = 0; i < COLD_BLOCK; i++)
			bad += cold[b][i] != cold_byte(b, i);
		free(cold[b]);
	}
	free(cold);
	if (bad)
		fprintf(stderr, "%s: FAIL: %zu cold bytes differ\n", who, bad);
	return bad;
}

#endif /* SPILL_COLD_BLOCKS_H */
