/*
 * Parsing and printing sizes ("512M", "0x100000", "max") by the kernel's
 * rules for memory.max.  No allocation: the CGMALLOC_CONF parser calls
 * this while malloc may be bootstrapping.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cgm/size.h"

/* The kernel's isspace(), whose Latin-1 table counts 0xa0 (no-break space) too. */
static bool kernel_isspace(char c)
{
	unsigned char u = (unsigned char)c;

	return u == ' ' || (u >= '\t' && u <= '\r') || u == 0xa0;
}

/* The value of digit @c in bases up to 16; 16 if it is none. */
static unsigned int digit_value(char c)
{
	if (c >= '0' && c <= '9')
		return (unsigned int)(c - '0');
	if (c >= 'a' && c <= 'f')
		return (unsigned int)(c - 'a' + 10);
	if (c >= 'A' && c <= 'F')
		return (unsigned int)(c - 'A' + 10);
	return 16;
}

/* log2 of the multiplier that suffix @c stands for; 0 if @c is none. */
static unsigned int suffix_shift(char c)
{
	switch (c) {
	case 'k': case 'K': return 10;
	case 'm': case 'M': return 20;
	case 'g': case 'G': return 30;
	case 't': case 'T': return 40;
	case 'p': case 'P': return 50;
	case 'e': case 'E': return 60;
	default: return 0;
	}
}

uint64_t cgm_parse_decimal(const char *s, const char **end)
{
	uint64_t v = 0;

	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned int d = (unsigned int)(*s - '0');

		v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
	}
	if (end)
		*end = s;
	return v;
}

const char *cgm_skip_spaces(const char *s)
{
	while (kernel_isspace(*s))
		s++;
	return s;
}

uint64_t cgm_memparse(const char *s, const char **end)
{
	const char *p = s;
	unsigned int base = 10, d, shift;
	uint64_t v = 0;
	bool over = false;

	/* simple_strtoull()'s base 0: "0x" is a prefix only before a hex digit. */
	if (p[0] == '0') {
		base = 8;
		if ((p[1] == 'x' || p[1] == 'X') && digit_value(p[2]) < 16) {
			base = 16;
			p += 2;
		}
	}
	for (; (d = digit_value(*p)) < base; p++) {
		if (v > (UINT64_MAX - d) / base)
			over = true;
		else
			v = v * base + d;
	}
	/*
	 * The kernel reads a lone suffix ("M") as 0; here a suffix needs a
	 * number, so that a stray letter does not become a limit of zero.
	 */
	if (p == s) {
		*end = s;
		return 0;
	}
	shift = suffix_shift(*p);
	if (shift) {
		p++;
		if (v > UINT64_MAX >> shift)
			over = true;
		else
			v <<= shift;
	}
	*end = p;
	/* The kernel's wraps around, so "16E" would be 0: saturating is the safe reading. */
	return over ? UINT64_MAX : v;
}

int cgm_parse_size(const char *s, uint64_t *out)
{
	const char *p = cgm_skip_spaces(s), *q, *end;
	uint64_t v;

	/* What strstrip() leaves of the written text: from p to q. */
	q = p + strlen(p);
	while (q > p && kernel_isspace(q[-1]))
		q--;
	if (q - p == 3 && memcmp(p, "max", 3) == 0) {
		*out = CGM_SIZE_MAX;
		return 0;
	}
	v = cgm_memparse(p, &end);
	/* The kernel takes an empty text as 0: refused, as a limit of 0 by mistake. */
	if (end == p || end != q)
		return -EINVAL;
	*out = v;
	return 0;
}

const char *cgm_format_size(uint64_t v, char *buf, size_t len)
{
	if (v == CGM_SIZE_MAX)
		snprintf(buf, len, "max");
	else
		snprintf(buf, len, "%" PRIu64, v);
	return buf;
}
