/*
 * A reproducer of the kernel bug the spill engine works around
 * (zpool/spill.c, sp_check_left()), without the engine: UFFDIO_MOVE that
 * moves pages it reports it left.
 *
 *   uffd_move_misreport [ROUNDS]    (make kernel-uffd-move)
 *
 * Two threads write random bytes into 64 anonymous pages, registered
 * with a userfaultfd for missing faults and asynchronous write-protect.
 * Each round write-protects the pages again (PAGEMAP_SCAN), moves all 64
 * to a second area with UFFDIO_MOVE, counts the pages the call reports
 * moved and the pages the second area holds (mincore), then copies the
 * moved pages back (UFFDIO_COPY), which wakes the writers.  A write that
 * resolves a write-protect fault while the move runs changes a page table
 * entry under it; Linux 6.18's move_pages() then keeps the -EAGAIN of its
 * retry, moves the next batch without counting it, and fails with EEXIST
 * at the page it has just moved.
 *
 * Prints how many moves said fewer pages than they moved.  Exit 0 either
 * way (it reports on the kernel, it does not test this library), 77
 * where the kernel has no UFFDIO_MOVE or write tracking, 2 on an error.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgm/uffd_abi.h"

#define PG	4096ul
#define NPAGES	64
#define WRITERS	2

static unsigned char *pages, *dest;
static atomic_bool stop;

static int uffd_with(uint64_t features)
{
	struct uffdio_api api = { .api = UFFD_API, .features = features };
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);

	/* A uffd that lacks a feature is no use here: the caller says so. */
	if (fd >= 0 && (ioctl(fd, UFFDIO_API, &api) != 0 || (api.features & features) != features)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static void *writer(void *arg)
{
	uint64_t s = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		pages[(s % NPAGES) * PG + (s >> 40) % PG] = (unsigned char)s;
	}
	return NULL;
}

/* Write-protect every page again, as the spiller's clock does before it picks. */
static int protect_again(int pagemap)
{
	struct page_region v[NPAGES];
	struct pm_scan_arg scan = {
		.size = sizeof(scan), .flags = PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
		.start = (uintptr_t)pages, .end = (uintptr_t)pages + NPAGES * PG,
		.vec = (uintptr_t)v, .vec_len = NPAGES,
		.category_mask = PAGE_IS_WRITTEN, .return_mask = PAGE_IS_WRITTEN,
	};

	return ioctl(pagemap, PAGEMAP_SCAN, &scan) < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 20000, short_moves = 0, partial = 0, unseen = 0;
	int wp = uffd_with(UFFD_FEATURE_WP_ASYNC), mv = uffd_with(UFFD_FEATURE_MOVE);
	int pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	pthread_t w[WRITERS];

	if (wp < 0 || mv < 0 || pagemap < 0) {
		fprintf(stderr, "uffd_move_misreport: no userfaultfd with UFFDIO_MOVE and write "
			"tracking here (Linux 6.8, and root or vm.unprivileged_userfaultfd=1)\n");
		return 77;
	}
	pages = mmap(NULL, NPAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	dest = mmap(NULL, NPAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pages == MAP_FAILED || dest == MAP_FAILED)
		return 2;
	madvise(pages, NPAGES * PG, MADV_NOHUGEPAGE);
	madvise(dest, NPAGES * PG, MADV_NOHUGEPAGE);
	memset(pages, 1, NPAGES * PG);
	if (ioctl(wp, UFFDIO_REGISTER, &(struct uffdio_register){
			  .range = { (uintptr_t)pages, NPAGES * PG },
			  .mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP }) ||
	    ioctl(mv, UFFDIO_REGISTER, &(struct uffdio_register){
			  .range = { (uintptr_t)dest, NPAGES * PG },
			  .mode = UFFDIO_REGISTER_MODE_MISSING })) {
		perror("uffd_move_misreport: UFFDIO_REGISTER");
		return 2;
	}
	for (uintptr_t i = 0; i < WRITERS; i++)
		if (pthread_create(&w[i], NULL, writer, (void *)i))
			return 2;
	for (long r = 0; r < rounds; r++) {
		struct uffdio_move m = {
			.dst = (uintptr_t)dest, .src = (uintptr_t)pages, .len = NPAGES * PG,
			.mode = UFFDIO_MOVE_MODE_DONTWAKE,
		};
		unsigned char vec[NPAGES];
		long said, held = 0;
		int err = 0;

		if (protect_again(pagemap)) {
			perror("uffd_move_misreport: PAGEMAP_SCAN");
			return 2;
		}
		if (ioctl(mv, UFFDIO_MOVE, &m))
			err = errno;
		said = err ? (m.move > 0 ? m.move / (long)PG : 0) : NPAGES;
		if (mincore(dest, NPAGES * PG, vec))
			return 2;
		for (int i = 0; i < NPAGES; i++)
			held += vec[i] & 1;
		partial += said < NPAGES;
		unseen += held > said ? held - said : 0;
		if (held > said && ++short_moves <= 3)
			printf("round %ld: the move said %ld pages (%s), %ld had moved\n", r, said,
			       err ? strerror(err) : "no error", held);
		/* Every page that moved goes back; the writers waiting for it wake. */
		for (int i = 0; i < NPAGES; i++) {
			struct uffdio_copy c = {
				.dst = (uintptr_t)pages + i * PG, .src = (uintptr_t)dest + i * PG,
				.len = PG,
			};

			if ((vec[i] & 1) && ioctl(wp, UFFDIO_COPY, &c) && errno != EEXIST) {
				perror("uffd_move_misreport: UFFDIO_COPY");
				return 2;
			}
		}
		madvise(dest, NPAGES * PG, MADV_DONTNEED);
	}
	atomic_store(&stop, true);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(w[i], NULL);
	printf("uffd_move_misreport: %ld moves of %d pages, %ld short; %ld said fewer pages than "
	       "they moved (%ld pages unreported)\n", rounds, NPAGES, partial, short_moves, unseen);
	return 0;
}
