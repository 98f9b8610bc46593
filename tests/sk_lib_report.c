/*
 * Print the static-key report of libcgmalloc.so itself, for
 * tests/check-sites-objdump to compare with objdump -d of the library.
 */
#include <stdio.h>

#include "cgmalloc.h"

int main(void)
{
	static char buf[1 << 16];

	cgm_static_keys_report(buf, sizeof(buf));
	fputs(buf, stdout);
	return 0;
}
