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
 * The same, indexed by the 8-byte step (n + 7) >> 3, for steps 0..128, as
 * a table: the loops over every size class (precharge, flush, harvest)
 * read it instead of computing each size.  test_charge checks it against
 * cgm_small_block_size().
 */
#define CGM_STEP_SIZES 129
static const uint16_t cgm_step_size[CGM_STEP_SIZES] = {
	8, 8, 16, 32, 32, 48, 48, 64, 64, 80, 80, 96, 96, 112, 112, 128,
	128, 160, 160, 160, 160, 192, 192, 192, 192, 224, 224, 224, 224, 256, 256, 256,
	256, 320, 320, 320, 320, 320, 320, 320, 320, 384, 384, 384, 384, 384, 384, 384,
	384, 448, 448, 448, 448, 448, 448, 448, 448, 512, 512, 512, 512, 512, 512, 512,
	512, 640, 640, 640, 640, 640, 640, 640, 640, 640, 640, 640, 640, 640, 640, 640,
	640, 768, 768, 768, 768, 768, 768, 768, 768, 768, 768, 768, 768, 768, 768, 768,
	768, 896, 896, 896, 896, 896, 896, 896, 896, 896, 896, 896, 896, 896, 896, 896,
	896, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024,
	1024,
};

/*
 * The block sizes themselves, / 8: the only indices of a thread slot's
 * freed_small[] that the free path ever counts in (it indexes by block
 * size / 8).  Harvest and flush visit these 21 instead of all 129.
 */
#define CGM_NR_BINS 21
static const uint8_t cgm_bin_step[CGM_NR_BINS] = {
	1, 2, 4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128,
};

static inline size_t cgm_step_block_size(size_t step)
{
	return cgm_step_size[step];
}

#endif /* CGM_SIZE_CLASS_H */
