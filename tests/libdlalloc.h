/*
 * What tests/libdlalloc.so exports.  Its users load it with dlopen() and
 * find these with dlsym(); the declarations are for the library itself.
 */
#ifndef CGM_LIBDLALLOC_H
#define CGM_LIBDLALLOC_H

#include <stddef.h>

int dl_table_ok(void);
void *dl_alloc(size_t n, unsigned char fill);
size_t dl_count_bad(const void *p, size_t n, unsigned char fill);
void dl_free(void *p);
void *dl_grow(void *p, size_t old, size_t n, unsigned char fill);
size_t dl_tls_touch(unsigned char seed);

#endif /* CGM_LIBDLALLOC_H */
