/*
 * A registration change over a span that meets a mapping which cannot
 * take a userfaultfd (zpool/uffd_span.h).
 *
 * The spill engine settles spans it learnt earlier: the pages of one
 * spill, a region whose writes it tracks.  The program may since have
 * unmapped part of one and mapped a file there.  The kernel checks every
 * mapping of the span before it changes any, so that one mapping made
 * the whole call fail and left the program's own pieces registered:
 * check-spill-model once saw a mremap fail (EFAULT) on a mapping whose
 * pieces kept their write tracking that way.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdbool.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgm/proc_maps.h"
#include "uffd_span.h"

static int span_call(int uffd, uintptr_t start, uintptr_t end, bool reg, uint64_t mode)
{
	struct uffdio_register r = { .range = { .start = start, .len = end - start }, .mode = mode };

	if (reg ? ioctl(uffd, UFFDIO_REGISTER, &r) : ioctl(uffd, UFFDIO_UNREGISTER, &r.range))
		return -errno;
	return 0;
}

int uffd_span(int uffd, uintptr_t start, uintptr_t end, bool reg, uint64_t mode)
{
	/* Through a buffer on the stack: this runs where malloc may not. */
	struct cgm_line_reader lr = { .pos = 0 };
	struct cgm_maps_line v;
	int rc = span_call(uffd, start, end, reg, mode), first = 0;
	char *s;

	if (rc != -EINVAL)
		return rc;
	lr.fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (lr.fd < 0)
		return rc;
	while ((s = cgm_next_line(&lr))) {
		if (!cgm_parse_maps_line(s, &v) || v.end <= start)
			continue;
		if (v.start >= end)
			break;
		rc = span_call(uffd, v.start > start ? v.start : start, v.end < end ? v.end : end,
			       reg, mode);
		if (rc && !first)
			first = rc;
	}
	syscall(SYS_close, lr.fd);
	return first;
}
