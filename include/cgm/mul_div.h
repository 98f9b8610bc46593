/*
 * a * b / c for the counters (pages, bytes) of shares and proportions,
 * without dividing a 128-bit number.  That division is a call into
 * libgcc (__divti3, __udivti3), which the linker puts at the very end of
 * the library's code, outside the 64 KiB that ordinary processes map
 * (shim/warm-text.ld): on a machine with two NUMA nodes, every process's
 * first sample (shim/numa.c) mapped a second window of code for it.
 */
#ifndef CGM_MUL_DIV_H
#define CGM_MUL_DIV_H

#include <stdint.h>

/* r * b / c where r * b does not fit in 64 bits (base/mul_div.c). */
int64_t cgm_mul_div_wide(int64_t r, int64_t b, int64_t c);

/*
 * floor(a * b / c) for a, b >= 0 and c > 0 (0 otherwise), saturated at
 * INT64_MAX.  With a = q * c + r, a * b / c is q * b + r * b / c exactly,
 * and only r * b can overflow where the result does not: that rare case
 * is out of line.
 */
static inline int64_t cgm_mul_div(int64_t a, int64_t b, int64_t c)
{
	uint64_t whole, part, sum;
	int64_t r;

	if (a <= 0 || b <= 0 || c <= 0)
		return 0;
	r = a % c;
	if (__builtin_mul_overflow((uint64_t)(a / c), (uint64_t)b, &whole))
		return INT64_MAX;
	if (__builtin_mul_overflow((uint64_t)r, (uint64_t)b, &part))
		part = (uint64_t)cgm_mul_div_wide(r, b, c);
	else
		part /= (uint64_t)c;
	sum = whole + part;
	return sum < whole || sum > INT64_MAX ? INT64_MAX : (int64_t)sum;
}

#endif /* CGM_MUL_DIV_H */
