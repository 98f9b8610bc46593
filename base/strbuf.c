/*
 * Strings built in place (include/cgm/strbuf.h says why not snprintf).
 * No allocation, no locale, nothing but the bytes given.
 */
#include "cgm/strbuf.h"

bool cgm_str_add(char *buf, size_t len, size_t *at, const char *src)
{
	size_t i = *at;

	if (i >= len)
		return false;	/* an earlier append did not fit */
	for (; *src; src++) {
		if (i + 1 == len) {
			buf[i] = '\0';
			*at = len;
			return false;
		}
		buf[i++] = *src;
	}
	buf[i] = '\0';
	*at = i;
	return true;
}

bool cgm_str_add_u64(char *buf, size_t len, size_t *at, uint64_t v)
{
	char digits[21];
	size_t n = sizeof(digits) - 1;

	digits[n] = '\0';
	do {
		digits[--n] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return cgm_str_add(buf, len, at, digits + n);
}

bool cgm_str_copy(char *buf, size_t len, const char *src)
{
	size_t at = 0;

	return cgm_str_add(buf, len, &at, src);
}
