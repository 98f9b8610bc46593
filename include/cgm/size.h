/*
 * Sizes as users write them: "512M", "1G", "max".  Shared by the
 * CGMALLOC_CONF parser, the memory.* file parsers and cgmctl.
 */
#ifndef CGM_SIZE_H
#define CGM_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* A size of "max": no limit. */
#define CGM_SIZE_MAX	UINT64_MAX

/*
 * Parse a size: digits with an optional K/M/G/T suffix (powers of 1024) or
 * the word "max" (CGM_SIZE_MAX).  Returns 0, -EINVAL (not a size) or
 * -ERANGE (overflow).  Never allocates.
 */
int cgm_parse_size(const char *s, uint64_t *out);

/* Format a size as bytes, or "max".  Returns @buf. */
const char *cgm_format_size(uint64_t v, char *buf, size_t len);

#endif /* CGM_SIZE_H */
