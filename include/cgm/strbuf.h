/*
 * Building a string in a fixed buffer without the printf family.
 *
 * Start-up formats a few paths (the hierarchy file's, the group's) and
 * its status line.  snprintf() would do, but it runs glibc's printf
 * code, whose pages a program that never prints may otherwise leave
 * unmapped: a 64 KiB fault-around window of it that a call maps stays in
 * the RSS of a small program.  These append in place instead, and cost
 * a few hundred instructions less each.
 */
#ifndef CGM_STRBUF_H
#define CGM_STRBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Append @src to the string being built in @buf (@len bytes, @len > 0)
 * at *@at, which starts at 0.  Returns false once the text does not fit:
 * @buf then holds as much as fits, terminated, and *@at is @len, so that
 * every later append fails too and the caller may check only the last.
 */
bool cgm_str_add(char *buf, size_t len, size_t *at, const char *src);

/* Append the decimal digits of @v; false as cgm_str_add(). */
bool cgm_str_add_u64(char *buf, size_t len, size_t *at, uint64_t v);

/* @buf = @src, truncated to fit; false if it had to be. */
bool cgm_str_copy(char *buf, size_t len, const char *src);

#endif /* CGM_STRBUF_H */
