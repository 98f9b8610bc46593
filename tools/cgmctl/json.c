/*
 * The little JSON cgmctl writes: strings escaped per RFC 8259, and
 * numbers printed bare only when they are plain decimal integers.
 */
#include <string.h>

#include "cgmctl.h"

void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

bool json_is_number(const char *s)
{
	const char *p = s + (*s == '-');

	/* JSON forbids leading zeros ("007"); 0 alone is fine. */
	if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] != '\0'))
		return false;
	return strspn(p, "0123456789") == strlen(p);
}
