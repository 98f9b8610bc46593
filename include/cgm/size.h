/*
 * Sizes as users write them: "512M", "1G", "0x100000", "max".  Shared by
 * the CGMALLOC_CONF parser, the memory.* file parsers and cgmctl, so that
 * every one takes a size as the kernel's memory.max does.
 */
#ifndef CGM_SIZE_H
#define CGM_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* A size of "max": no limit. */
#define CGM_SIZE_MAX	UINT64_MAX

/*
 * The kernel's memparse(): at @s, a number as simple_strtoull() reads it
 * in base 0 -- decimal, hexadecimal after "0x" or "0X", octal after a
 * leading 0 -- then an optional suffix K, M, G, T, P or E in either case,
 * each a power of 1024.  No sign and no blank is read.  Sets *@end past
 * what was read, to @s if there is no number.  Two deviations, so that
 * no slip reads as a limit of 0: a value past 64 bits saturates at
 * UINT64_MAX (the kernel's wraps around), and a suffix with no number
 * before it is not read (the kernel's reads "M" as 0).  Never allocates.
 */
uint64_t cgm_memparse(const char *s, const char **end);

/*
 * A decimal number at @s, digits only (no sign, no blank, no prefix), as
 * the kernel's files print them; *@end (if not NULL) past the digits, at
 * @s if there are none.  Saturates at UINT64_MAX.  Not strtoull(), whose
 * code lies in the fault-around window of glibc's getenv (see
 * cgm_conf_env()).
 */
uint64_t cgm_parse_decimal(const char *s, const char **end);

/*
 * @s past its leading blanks: the kernel's skip_spaces(), with its
 * isspace() (the ASCII blanks, and 0xa0 of its Latin-1 table).
 */
const char *cgm_skip_spaces(const char *s);

/*
 * Parse a size as memory.max, memory.high, memory.low and memory.min take
 * it (strstrip(), then page_counter_memparse()): blanks around it are
 * dropped, then the word "max" gives CGM_SIZE_MAX, anything else must be
 * one cgm_memparse() to its end.  A number past 64 bits is CGM_SIZE_MAX
 * too: "max", as any limit of 2^63 bytes or more reads back from the
 * kernel (PAGE_COUNTER_MAX).  Unlike the kernel, which reads an empty
 * text as 0, "" and blanks alone are refused.
 * Returns 0, or -EINVAL (not a size; *@out untouched).  Never allocates.
 */
int cgm_parse_size(const char *s, uint64_t *out);

/* Format a size as bytes, or "max".  Returns @buf. */
const char *cgm_format_size(uint64_t v, char *buf, size_t len);

#endif /* CGM_SIZE_H */
