/*
 * A program that commits memory the way a JVM or another runtime with its
 * own heap does (tests/spill/test_spill_lib.sh): it reserves address space
 * with PROT_NONE and commits it a piece at a time with mmap(MAP_FIXED)
 * over the reservation, grows a mapping of its own with mremap(), and
 * between the commits mallocs and frees blocks, so that mimalloc keeps
 * pages to purge whenever the library reclaims.
 *
 *   spill_commit [MB]
 *
 * Commits MB MiB (default 96) in 1 MiB pieces, writes every page of each,
 * then reads every byte back; prints "spill_commit: ok" or a FAIL line
 * (status 1).  Under a limit with spill=1 each commit's charge may
 * reclaim: the JVM's metaspace commit once hung there for good (the
 * library held its spill lock across the charge, and the reclaim's
 * madvise waited for that lock).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MIB (1024u * 1024u)

static unsigned char byte_at(size_t piece, size_t i)
{
	return (unsigned char)((piece * 131 + i / 64 * 7) & 0xff);
}

int main(int argc, char **argv)
{
	size_t mb = argc > 1 ? strtoul(argv[1], NULL, 10) : 96;
	size_t grow_len = MIB;
	unsigned char *reserve, *grown;
	void *keep[64] = { 0 };

	reserve = mmap(NULL, mb * MIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	grown = mmap(NULL, grow_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (reserve == MAP_FAILED || grown == MAP_FAILED) {
		printf("spill_commit: FAIL reserve\n");
		return 1;
	}
	for (size_t piece = 0; piece < mb; piece++) {
		unsigned char *p = reserve + piece * MIB;

		/* Blocks made and mostly freed: mimalloc has pages to purge at each reclaim. */
		for (int k = 0; k < 64; k++) {
			free(keep[k]);
			keep[k] = malloc(16384 + (size_t)k * 256);
			if (keep[k])
				memset(keep[k], k, 1024);
		}
		for (int k = 0; k < 48; k++) {
			free(keep[k]);
			keep[k] = NULL;
		}
		if (mmap(p, MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			 -1, 0) != p) {
			printf("spill_commit: FAIL commit of piece %zu\n", piece);
			return 1;
		}
		for (size_t i = 0; i < MIB; i++)
			p[i] = byte_at(piece, i);
		/* Every eighth piece, the mapping of its own grows by a MiB. */
		if (piece % 8 == 7) {
			unsigned char *q = mremap(grown, grow_len, grow_len + MIB, MREMAP_MAYMOVE);

			if (q == MAP_FAILED) {
				printf("spill_commit: FAIL mremap to %zu MiB\n", grow_len / MIB + 1);
				return 1;
			}
			grown = q;
			memset(grown + grow_len, 0x5a, MIB);
			grow_len += MIB;
		}
	}
	for (size_t piece = 0; piece < mb; piece++) {
		const unsigned char *p = reserve + piece * MIB;

		for (size_t i = 0; i < MIB; i++)
			if (p[i] != byte_at(piece, i)) {
				printf("spill_commit: FAIL byte %zu of piece %zu: %u\n", i, piece, p[i]);
				return 1;
			}
	}
	for (size_t i = MIB; i < grow_len; i++)
		if (grown[i] != 0x5a) {
			printf("spill_commit: FAIL byte %zu of the grown mapping\n", i);
			return 1;
		}
	printf("spill_commit: ok\n");
	return 0;
}
