/* Reading /proc/<pid>/maps and smaps without allocating (include/cgm/proc_maps.h). */
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgm/proc_maps.h"

char *cgm_next_line(struct cgm_line_reader *r)
{
	for (;;) {
		char *s = r->buf + r->pos, *nl = memchr(s, '\n', r->len - r->pos);
		long got;

		if (nl) {
			*nl = '\0';
			r->pos += (size_t)(nl - s) + 1;
			if (!r->cut)
				return s;
			r->cut = false;
			continue;
		}
		memmove(r->buf, s, r->len - r->pos);
		r->len -= r->pos;
		r->pos = 0;
		if (r->len == sizeof(r->buf)) {
			r->len = 0;
			r->cut = true;
		}
		got = syscall(SYS_read, r->fd, r->buf + r->len, sizeof(r->buf) - r->len);
		if (got <= 0)
			return NULL;
		r->len += (size_t)got;
	}
}

static const char *parse_hex(const char *s, uintptr_t *v)
{
	*v = 0;
	for (; cgm_hex_digit(*s) < 16; s++)
		*v = *v << 4 | cgm_hex_digit(*s);
	return s;
}

/* Does @s hold at least @n characters before its NUL? */
static bool at_least(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!s[i])
			return false;
	return true;
}

bool cgm_parse_maps_line(const char *s, struct cgm_maps_line *v)
{
	uintptr_t off;

	s = parse_hex(s, &v->start);
	if (*s != '-')
		return false;
	s = parse_hex(s + 1, &v->end);
	if (*s != ' ' || !at_least(s + 1, 5) || s[5] != ' ')
		return false;
	memcpy(v->perms, s + 1, 4);
	s = parse_hex(s + 6, &off);
	if (*s != ' ')
		return false;
	s = parse_hex(s + 1, &v->major);
	if (*s != ':')
		return false;
	s = parse_hex(s + 1, &v->minor);
	if (*s != ' ')
		return false;
	v->inode = 0;
	for (s++; *s >= '0' && *s <= '9'; s++)
		v->inode = v->inode * 10 + (uintptr_t)(*s - '0');
	while (*s == ' ')
		s++;
	v->anon = !v->major && !v->minor && !v->inode;
	v->name = s;
	return v->end > v->start;
}
