/*
 * The pool's only source of memory: anonymous mmap.
 *
 * zpool runs inside the interposed malloc, so it may never call malloc.
 * Large tables are reserved with MAP_NORESERVE and become resident only
 * where they are touched, which lets every table be sized for the largest
 * pool at creation and never grow.
 */
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zp_types.h"

size_t zp_page_align(size_t bytes)
{
	return (bytes + ZP_PAGE_SIZE - 1) & ~(size_t)(ZP_PAGE_SIZE - 1);
}

/*
 * Map @bytes of zeroed memory; NULL on failure.  A reservation
 * (@noreserve) is left out of core dumps: gigabytes of address space,
 * mostly untouched, that a core piped to a program (core_pattern "|...")
 * would receive as zeros, and whose used part is the pool's own copies
 * (spill_core brings the program's pages back in place before a dump).
 *
 * The system calls themselves, not the mmap() and munmap() the library
 * interposes: these record the program's mappings (shim/regions.c), which
 * the pool's and the spill engine's never are, under a lock that a
 * forking thread holds until fork() returns -- and fork() waits for the
 * spill engine's handler thread to read the kernel's report of it.  The
 * handler mapped a smaller table of spilled pages when idle
 * (spill.c:sp_shrink), or a context's zstd state at its first use: it
 * waited for that lock, and the process hung for good in fork()
 * (test_spill_lib's six forks with a backing file, 3 runs of 6).
 */
void *zp_map(size_t bytes, bool noreserve)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | (noreserve ? MAP_NORESERVE : 0);
	long p = syscall(SYS_mmap, NULL, zp_page_align(bytes), PROT_READ | PROT_WRITE,
			 flags, -1, 0L);

	if (p == -1)
		return NULL;
	if (noreserve)
		madvise((void *)p, zp_page_align(bytes), MADV_DONTDUMP);
	return (void *)p;
}

void zp_unmap(void *p, size_t bytes)
{
	if (p)
		syscall(SYS_munmap, p, zp_page_align(bytes));
}

/* (Its flags: bit 63 present, bit 56 mapped by this process alone; 512 pages a read.) */
size_t zp_resident_bytes(int pagemap, const void *p, size_t bytes)
{
	enum { CHUNK = 512 };
	uint64_t pm[CHUNK];
	uintptr_t page = (uintptr_t)p / ZP_PAGE_SIZE;
	size_t pages = zp_page_align(bytes) / ZP_PAGE_SIZE, own = 0;

	if (!p || !bytes || pagemap < 0)
		return 0;
	for (size_t done = 0; done < pages;) {
		size_t n = pages - done < CHUNK ? pages - done : CHUNK;
		ssize_t got = pread(pagemap, pm, n * sizeof(pm[0]),
				    (off_t)((page + done) * sizeof(pm[0])));

		if (got <= 0)
			break;
		n = (size_t)got / sizeof(pm[0]);
		for (size_t i = 0; i < n; i++)
			own += (pm[i] >> 63 & 1) && (pm[i] >> 56 & 1);
		done += n;
	}
	return own * ZP_PAGE_SIZE;
}

const char *zp_strerror(int err)
{
	const char *s = strerrordesc_np(err);

	return s ? s : "unknown error";
}
