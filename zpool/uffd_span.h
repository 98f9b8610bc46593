/*
 * Registering and unregistering a span with a userfaultfd where the span
 * may meet mappings that cannot take one (zpool/uffd_span.c).
 */
#ifndef ZP_UFFD_SPAN_H
#define ZP_UFFD_SPAN_H

#include <stdbool.h>
#include <stdint.h>

/*
 * UFFDIO_REGISTER (with @mode) or UFFDIO_UNREGISTER (@reg false) of
 * [start, end) on @uffd.  The kernel refuses the whole call (EINVAL) when
 * one mapping in the span cannot take a userfaultfd (a file's, say); the
 * call is then made again on each mapping of the span alone, so that the
 * others are done.  Returns 0, or -errno of the first call that failed.
 */
int uffd_span(int uffd, uintptr_t start, uintptr_t end, bool reg, uint64_t mode);

#endif /* ZP_UFFD_SPAN_H */
