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

/* The same, indexed by the 8-byte step (n + 7) >> 3. */
static inline size_t cgm_step_block_size(size_t step)
{
	return cgm_small_block_size(step * 8);
}

#endif /* CGM_SIZE_CLASS_H */
