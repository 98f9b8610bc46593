/*
 * Reading /proc/<pid>/maps and smaps without allocating: the library reads
 * them inside mremap (which may run inside malloc) and at start-up.
 */
#ifndef CGM_PROC_MAPS_H
#define CGM_PROC_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A file a line at a time, through a buffer on the caller's stack. */
struct cgm_line_reader {
	int fd;
	size_t pos, len;
	bool cut;			/* the buffer held no newline: skip to the next */
	char buf[4096];
};

/*
 * The next line of @r, its newline replaced by a NUL; NULL at the end.  A
 * line longer than the buffer is skipped: in maps, only a path makes one.
 */
char *cgm_next_line(struct cgm_line_reader *r);

/* The value of a hex digit as procfs writes them (lower case), or 16. */
static inline unsigned cgm_hex_digit(char c)
{
	return c >= '0' && c <= '9' ? (unsigned)(c - '0') :
	       c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 16;
}

/* A VMA's line: "start-end perms offset major:minor inode   name". */
struct cgm_maps_line {
	uintptr_t start, end;
	char perms[4];
	uintptr_t major, minor, inode;
	bool anon;			/* no file: device 00:00, inode 0 */
	const char *name;		/* "", [heap], [anon:...], a path */
};

/* Parse VMA line @s into @v; false if it is not one. */
bool cgm_parse_maps_line(const char *s, struct cgm_maps_line *v);

#endif /* CGM_PROC_MAPS_H */
