/*
 * The userfaultfd and pagemap ABI the spill engine uses that is newer than
 * the installed uapi headers (Debian 12's are Linux 6.1), defined where
 * they lack it: UFFDIO_MOVE (Linux 6.8), write tracking (6.7).  Shared by
 * zpool/spill.c and tests/spill/uffd_move_misreport.c.
 */
#ifndef CGM_UFFD_ABI_H
#define CGM_UFFD_ABI_H

#include <linux/types.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>

/* UFFDIO_MOVE (Linux 6.8) is newer than the installed uapi headers. */
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE		(1 << 16)
#endif
#ifndef UFFDIO_MOVE
#define _UFFDIO_MOVE			(0x05)
#define UFFDIO_MOVE_MODE_DONTWAKE	((__u64)1 << 0)
struct uffdio_move {
	__u64 dst;
	__u64 src;
	__u64 len;
	__u64 mode;
	__s64 move;
};
#define UFFDIO_MOVE	_IOWR(UFFDIO, _UFFDIO_MOVE, struct uffdio_move)
#endif
/* Write tracking (Linux 6.7): asynchronous write-protect faults, and the
 * pagemap ioctl that finds written pages and protects them again. */
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC		(1 << 15)
#endif
#ifndef PAGEMAP_SCAN
struct page_region {
	__u64 start;
	__u64 end;
	__u64 categories;
};
struct pm_scan_arg {
	__u64 size;
	__u64 flags;
	__u64 start;
	__u64 end;
	__u64 walk_end;
	__u64 vec;
	__u64 vec_len;
	__u64 max_pages;
	__u64 category_inverted;
	__u64 category_mask;
	__u64 category_anyof_mask;
	__u64 return_mask;
};
#define PAGEMAP_SCAN			_IOWR('f', 16, struct pm_scan_arg)
#define PM_SCAN_WP_MATCHING		(1 << 0)
#define PM_SCAN_CHECK_WPASYNC		(1 << 1)
#define PAGE_IS_WRITTEN			(1 << 1)
#define PAGE_IS_PRESENT			(1 << 3)
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW		_IO(0xAA, 0x00)
#endif

#endif /* CGM_UFFD_ABI_H */
