/*
 * The block sizes mimalloc 2.0.9 hands out for small requests, as a pure
 * function: accounting charges the block, not the request, and must know
 * the block size before allocating (so that a limit can refuse).
 *
 * The shim checks at start-up that the loaded mimalloc agrees
 * (shim/mi_layout.c) and leaves accounting off if it does not.
 */
#ifndef CGM_SIZE_CLASS_H
#define CGM_SIZE_CLASS_H

#include <stddef.h>
#include <stdint.h>

/*
 * Block size for a request of @n bytes, n <= CGM_SMALL_MAX (1024):
 * 8 and 16; then multiples of 16 up to 64; then four sizes per power of
 * two (80, 96, 112, 128, 160, ...).
 */
static inline size_t cgm_small_block_size(size_t n)
{
	size_t w = (n + 7) >> 3, shift;

	if (w <= 1)
		return 8;
	if (w <= 8)
		return ((w + 1) & ~(size_t)1) * 8;
	w--;
	shift = (size_t)(63 - __builtin_clzll(w)) - 2;
	return (((w >> shift) + 1) << shift) * 8;
}

/*
 * mimalloc's bins up to 1 KiB: bin b holds blocks of cgm_bin_step[b] * 8
 * bytes.  Small allocations are precharged and counted per bin.
 */
#define CGM_NR_BINS 21
static const uint8_t cgm_bin_step[CGM_NR_BINS] = {
	1, 2, 4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128,
};

static inline size_t cgm_bin_size(unsigned int bin)
{
	return (size_t)cgm_bin_step[bin] * 8;
}

/*
 * mimalloc's bins above 1 KiB up to 16 KiB, the medium ones (the blocks
 * of its small pages, a 64 KiB slice each).  A request of 1025..16384
 * bytes is charged from the thread's stock by its bin's block
 * size, before the allocation, and counted per bin; the block's free
 * gives the bytes back to the stock of the freeing thread and counts
 * again.  Above 1 KiB every block size of mimalloc's is a multiple of
 * 256 bytes, so the request rounded up to 256 decides the bin:
 * cgm_medium_bin[] is indexed by (size - 1) / 256 (entries 0..3, sizes of
 * at most 1 KiB, are never read).  The shim checks at start-up that the
 * loaded mimalloc's queues hold these sizes (shim/mi_layout.c).
 */
#define CGM_MEDIUM_MAX 16384
#define CGM_NR_MEDIUM_BINS 16
static const uint8_t cgm_medium_bin[CGM_MEDIUM_MAX / 256] = {
	0, 0, 0, 0, 0, 1, 2, 3, 4, 4, 5, 5, 6, 6, 7, 7,
	8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11,
	12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13,
	14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15,
};

/* The block size of medium bin @m. */
static const uint16_t cgm_medium_sizes[CGM_NR_MEDIUM_BINS] = {
	1280, 1536, 1792, 2048, 2560, 3072, 3584, 4096,
	5120, 6144, 7168, 8192, 10240, 12288, 14336, 16384,
};

/*
 * The bin of a small request of @n bytes (n <= 1024): the bin whose block
 * cgm_small_block_size() gives.  A search, for start-up: the shim keeps
 * the answer for every size in a table that malloc reads.
 */
static inline unsigned int cgm_small_bin(size_t n)
{
	size_t step = cgm_small_block_size(n) / 8;
	unsigned int b = 0;

	while (b < CGM_NR_BINS - 1 && cgm_bin_step[b] < step)
		b++;
	return b;
}

/*
 * Fill @bins[w] = cgm_small_bin(n) for every word size w = (n + 7) / 8 of
 * a request n in 0..1024, a bin at a time: a request goes to the smallest
 * bin that holds it, and every bin's size is a multiple of 8, so the word
 * size alone decides.  Start-up runs this (a search per size cost 110,000
 * instructions, a third of what the shim adds to a program's start).
 */
#define CGM_NR_WSIZES 129	/* word sizes 0..128, requests 0..1024 */
static inline void cgm_fill_wsize_bins(uint8_t bins[CGM_NR_WSIZES])
{
	size_t w = 0;

	for (unsigned int b = 0; b < CGM_NR_BINS; b++)
		for (; w * 8 <= cgm_bin_size(b); w++)
			bins[w] = (uint8_t)b;
}

#endif /* CGM_SIZE_CLASS_H */
