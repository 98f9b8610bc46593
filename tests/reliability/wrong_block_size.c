/*
 * Preloaded before libcgmalloc.so by test_mimalloc_check.sh: mimalloc's
 * mi_usable_size() as a different mimalloc layout would make it look to
 * the start-up layout check -- every block 16 bytes larger than the page
 * metadata says.  The check must then leave accounting off.
 */
#include <dlfcn.h>
#include <stddef.h>

size_t mi_usable_size(const void *p);

size_t mi_usable_size(const void *p)
{
	static size_t (*real)(const void *);

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "mi_usable_size");
	return real(p) + 16;
}
