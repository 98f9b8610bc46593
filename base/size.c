/*
 * Parsing and printing sizes ("512M", "max").  No allocation: the
 * CGMALLOC_CONF parser calls this while malloc may be bootstrapping.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cgm/size.h"

int cgm_parse_size(const char *s, uint64_t *out)
{
	uint64_t v = 0, mult = 1;
	const char *p = s;

	if (strcmp(s, "max") == 0) {
		*out = CGM_SIZE_MAX;
		return 0;
	}
	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	switch (*p) {
	case '\0': break;
	case 'k': case 'K': mult = 1ULL << 10; p++; break;
	case 'm': case 'M': mult = 1ULL << 20; p++; break;
	case 'g': case 'G': mult = 1ULL << 30; p++; break;
	case 't': case 'T': mult = 1ULL << 40; p++; break;
	default: return -EINVAL;
	}
	if (*p != '\0')
		return -EINVAL;
	if (v > UINT64_MAX / mult)
		return -ERANGE;
	v *= mult;
	/* "max" is spelled out; a number that happens to be ~0 is out of range. */
	if (v == CGM_SIZE_MAX)
		return -ERANGE;
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
