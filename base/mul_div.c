/*
 * The rare half of cgm_mul_div() (include/cgm/mul_div.h): r * b / c with
 * r < c, where r * b passes 64 bits -- counters of more than 2^32 pages
 * each.  The quotient is below b, so it fits; it is found by long
 * division, one bit at a time, keeping the remainder below c, with no
 * 128-bit division (a call into libgcc that stays at the end of the
 * library's code).
 */
#include "cgm/compiler.h"
#include "cgm/mul_div.h"

CGM_COLD int64_t cgm_mul_div_wide(int64_t r, int64_t b, int64_t c)
{
	unsigned __int128 product = (unsigned __int128)(uint64_t)r * (uint64_t)b;
	uint64_t divisor = (uint64_t)c, rem = 0, quot = 0;

	for (int bit = 127; bit >= 0; bit--) {
		/* rem < divisor < 2^63: doubling it and adding a bit cannot overflow. */
		rem = rem << 1 | (uint64_t)(product >> bit & 1);
		quot <<= 1;
		if (rem >= divisor) {
			rem -= divisor;
			quot |= 1;
		}
	}
	return (int64_t)quot;
}
