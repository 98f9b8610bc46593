/*
 * mmap, mremap, munmap, brk and sbrk, interposed to keep a table of the
 * process's private anonymous mappings and whose each is: mimalloc's (the
 * heap) or the program's own.  The kernel memory cgroup charges the pages
 * of both that are resident; shim/resident.c samples them from here.
 *
 * A mapping is mimalloc's when the call comes from inside libmimalloc.so
 * (its return address), which reaches mmap through the PLT like any
 * library.  The table lives in memory mapped with raw system calls, never
 * malloc's: these functions run inside malloc when mimalloc maps a
 * segment.  Regions are kept sorted and disjoint, so a lookup is a binary
 * search.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <mimalloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgm/compiler.h"
#include "cgm/regions.h"
#include "cgm/self_proc.h"
#include "cgm/spiller.h"
#include "cgm/uffd_abi.h"

#define PAGE 4096UL
#define PAGE_UP(x) (((x) + PAGE - 1) & ~(PAGE - 1))
/* Not known yet: the call came before mimalloc's range could be looked up. */
#define OWNER_UNKNOWN CGM_NR_REGION_OWNERS

struct region {
	uintptr_t start, end;
	uintptr_t caller;		/* where the mapping was asked for */
	uint32_t owner;			/* enum cgm_region_owner, or OWNER_UNKNOWN */
	bool charged;			/* charged in full when made (charge=alloc), by this process */
	bool dense;			/* a quarter or more resident at the last sample (sparse_bytes) */
};

static struct region *tab;
static size_t nr, cap;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* libmimalloc.so's mapping; mi_hi == 0 until looked up. */
static uintptr_t mi_lo, mi_hi;
/* The program break: the program's region ends at brk_hi. */
static uintptr_t brk_hi;

/*
 * This thread holds the lock, or is inside pthread_mutex_lock/unlock on
 * it: a signal handler that maps memory (or forks) while the thread it
 * interrupted is in the table must not wait for itself.  Its mapping goes
 * untracked instead.  The flag is up before the lock call and down after
 * the unlock call (the signal fences keep the compiler from moving it
 * across them): a signal landing inside pthread_mutex_unlock finds the
 * lock still held.
 */
static CGM_TLS bool holding;

static bool table_lock(void)
{
	if (holding)
		return false;
	holding = true;
	atomic_signal_fence(memory_order_seq_cst);
	pthread_mutex_lock(&lock);
	return true;
}

static void table_unlock(void)
{
	pthread_mutex_unlock(&lock);
	atomic_signal_fence(memory_order_seq_cst);
	holding = false;
}

static void *raw_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

/* The mapping of the object holding @sym, once the loader can say (lock-free, in glibc). */
static bool object_range(const void *sym, uintptr_t *lo, uintptr_t *hi)
{
	struct dl_find_object o;

	if (__atomic_load_n(hi, __ATOMIC_ACQUIRE))
		return true;
	if (_dl_find_object((void *)(uintptr_t)sym, &o) != 0)
		return false;
	*lo = (uintptr_t)o.dlfo_map_start;
	__atomic_store_n(hi, (uintptr_t)o.dlfo_map_end, __ATOMIC_RELEASE);
	return true;
}

static uint32_t owner_of(uintptr_t caller)
{
	if (!object_range((const void *)(uintptr_t)&mi_malloc, &mi_lo, &mi_hi))
		return OWNER_UNKNOWN;
	return caller >= mi_lo && caller < mi_hi ? CGM_REGION_HEAP : CGM_REGION_PROGRAM;
}

/* Is @caller in this library?  Its own mappings (the compressed pool's) are not the program's. */
static bool from_self(uintptr_t caller)
{
	static uintptr_t lo, hi;

	return object_range((const void *)(uintptr_t)&from_self, &lo, &hi) &&
	       caller >= lo && caller < hi;
}

/* Room for @more entries.  Lock held. */
static bool table_room(size_t more)
{
	size_t want;
	void *p;

	if (nr + more <= cap)
		return true;
	want = cap ? 2 * cap : 1024;
	if (!tab)
		p = raw_mmap(NULL, want * sizeof(*tab), PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	else
		p = (void *)syscall(SYS_mremap, tab, cap * sizeof(*tab), want * sizeof(*tab),
				    MREMAP_MAYMOVE);
	if (p == MAP_FAILED)
		return false;
	tab = p;
	cap = want;
	return true;
}

/* The first region that ends after @addr (nr if none).  Lock held. */
static size_t table_find(uintptr_t addr)
{
	size_t lo = 0, hi = nr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (tab[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Take [start, end) out of the table, splitting a region that it cuts in
 * two.  Returns the bytes taken from regions charged in full.  Lock held.
 */
static uint64_t table_remove(uintptr_t start, uintptr_t end)
{
	size_t i = table_find(start), gone_from, gone = 0;
	uint64_t charged = 0;

	if (i < nr && tab[i].start < start && tab[i].end > end) {
		/* A hole in the middle: the tail becomes a region of its own. */
		struct region tail = tab[i];

		if (tab[i].charged)
			charged = end - start;
		if (!table_room(1))
			return charged;
		tail.start = end;
		tab[i].end = start;
		memmove(&tab[i + 2], &tab[i + 1], (nr - i - 1) * sizeof(*tab));
		tab[i + 1] = tail;
		nr++;
		return charged;
	}
	if (i < nr && tab[i].start < start && tab[i].end > start) {
		if (tab[i].charged)
			charged += tab[i].end - start;
		tab[i].end = start;
		i++;
	}
	gone_from = i;
	while (i < nr && tab[i].end <= end) {
		if (tab[i].charged)
			charged += tab[i].end - tab[i].start;
		i++;
		gone++;
	}
	if (i < nr && tab[i].start < end) {
		if (tab[i].charged)
			charged += end - tab[i].start;
		tab[i].start = end;
	}
	if (gone) {
		memmove(&tab[gone_from], &tab[gone_from + gone], (nr - gone_from - gone) * sizeof(*tab));
		nr -= gone;
	}
	return charged;
}

/* Add [start, end), which no region overlaps.  Lock held. */
static void table_add(uintptr_t start, uintptr_t end, uint32_t owner, uintptr_t caller,
		      bool charged)
{
	size_t i;

	if (start >= end || !table_room(1))
		return;
	i = table_find(start);
	memmove(&tab[i + 1], &tab[i], (nr - i) * sizeof(*tab));
	tab[i] = (struct region){ .start = start, .end = end, .caller = caller, .owner = owner,
				  .charged = charged };
	nr++;
}

static bool private_anon(int flags)
{
	return (flags & MAP_ANONYMOUS) && (flags & MAP_TYPE) == MAP_PRIVATE;
}

CGM_KEYED CGM_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	uintptr_t caller = (uintptr_t)__builtin_return_address(0);
	bool anon = private_anon(flags) && !from_self(caller);
	uint32_t owner = anon ? owner_of(caller) : OWNER_UNKNOWN;
	int charged = 0;
	uint64_t unmapped;
	void *p;

	bool held = false;

	/*
	 * The charge first, with no lock held: it may reclaim, and reclaim
	 * purges (mimalloc's madvise comes back through ours) and spills,
	 * both of which take the spill lock.  Taken the other way round, a
	 * runtime that commits its heap with MAP_FIXED (a JVM's metaspace)
	 * hung for good under a limit, with every signal blocked.
	 */
	if (anon && owner == CGM_REGION_PROGRAM) {
		charged = cgm_map_charge((int64_t)PAGE_UP(len));
		if (charged < 0) {
			errno = ENOMEM;
			return MAP_FAILED;
		}
	}
	/* A fixed mapping replaces what was there: spilled pages of it are gone. */
	if ((flags & MAP_FIXED) && static_branch_unlikely(&cgm_spill_key) && !from_self(caller))
		held = cgm_spill_discard_begin(addr, len, true);
	p = raw_mmap(addr, len, prot, flags, fd, off);
	if (held)
		cgm_spill_release();
	if (p == MAP_FAILED) {
		if (charged > 0)
			cgm_map_uncharge((int64_t)PAGE_UP(len));
		return p;
	}
	if (!table_lock())
		return p;
	/* MAP_FIXED replaces whatever was there. */
	unmapped = (flags & MAP_FIXED) ? table_remove((uintptr_t)p, (uintptr_t)p + PAGE_UP(len)) : 0;
	if (anon)
		table_add((uintptr_t)p, (uintptr_t)p + PAGE_UP(len), owner, caller, charged > 0);
	table_unlock();
	if (unmapped)
		cgm_map_uncharge((int64_t)unmapped);
	return p;
}

CGM_KEYED CGM_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
	__attribute__((alias("mmap")));

CGM_KEYED CGM_EXPORT int munmap(void *addr, size_t len)
{
	uint64_t unmapped;
	uintptr_t caller = (uintptr_t)__builtin_return_address(0);
	bool self = from_self(caller);

	/*
	 * Not for the library's own unmaps (the pool's, the spill engine's):
	 * the sample may reclaim, and the engine unmaps its old table with
	 * its own lock held -- a reclaim that touched a spilled page there
	 * would wait for a handler that waits for that lock.  Nor for
	 * mimalloc's, which it makes from inside a malloc or a free: what a
	 * slow path does there (a reclaim's collect, the purge of a parked
	 * block) would call into mimalloc again, in the middle of its own
	 * work.  What it unmaps is free memory, and a large block is sampled
	 * before its free (free_big_slow).
	 */
	if (len >= (1 << 20) && !self && owner_of(caller) != CGM_REGION_HEAP)
		cgm_map_unmapping();
	/* The library's own unmaps run under the spill lock already. */
	bool held = static_branch_unlikely(&cgm_spill_key) && !self &&
		    cgm_spill_discard_begin(addr, len, true);
	long rc;

	/* syscall() returns -1 with errno set on failure. */
	rc = syscall(SYS_munmap, addr, len);
	if (held)
		cgm_spill_release();
	if (rc != 0)
		return -1;
	if (!table_lock())
		return 0;
	unmapped = table_remove((uintptr_t)addr, (uintptr_t)addr + PAGE_UP(len));
	table_unlock();
	if (unmapped)
		cgm_map_uncharge((int64_t)unmapped);
	return 0;
}

/*
 * The mapping a mremap(MREMAP_FIXED) to @want replaces, or NULL: none
 * where the kernel refuses the call before it unmaps the target (an
 * unaligned target, or one that overlaps the old range).
 */
static const void *moves_onto(const void *old, size_t old_len, size_t new_len, int flags,
			      const void *want)
{
	uintptr_t o = (uintptr_t)old, w = (uintptr_t)want;

	if (!(flags & MREMAP_FIXED) || w % PAGE || !new_len)
		return NULL;
	if (w < o + PAGE_UP(old_len) && o < w + PAGE_UP(new_len))
		return NULL;
	return want;
}

CGM_KEYED CGM_EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	struct region was = { .owner = OWNER_UNKNOWN + 1 };
	int64_t grow = (int64_t)PAGE_UP(new_len) - (int64_t)PAGE_UP(old_len);
	uint64_t replaced = 0, left;
	void *want = NULL, *p;
	int charged = 0;
	bool spill_held = false;
	va_list ap;
	size_t i;

	if (flags & MREMAP_FIXED) {
		va_start(ap, flags);
		want = va_arg(ap, void *);
		va_end(ap);
	}
	if (table_lock()) {
		i = table_find((uintptr_t)old);
		if (i < nr && tab[i].start <= (uintptr_t)old)
			was = tab[i];
		table_unlock();
	}
	/* The charge before the hold, as in mmap(): its reclaim takes the spill lock. */
	if (was.owner == CGM_REGION_PROGRAM && grow > 0) {
		charged = cgm_map_charge(grow);
		if (charged < 0) {
			errno = ENOMEM;
			return MAP_FAILED;
		}
	}
	/*
	 * The uffd registration does not follow a moved mapping, and a
	 * registration splits it: its spilled pages come back and its
	 * registration goes first, and no spill runs until it has moved.
	 */
	if (static_branch_unlikely(&cgm_spill_key))
		spill_held = cgm_spill_hold(old, old_len, moves_onto(old, old_len, new_len, flags, want),
					    new_len);
	p = (void *)syscall(SYS_mremap, old, old_len, new_len, flags, want);
	/* One of our mappings that spilling left in pieces: moved a piece at a time. */
	if (p == MAP_FAILED && errno == EFAULT && spill_held && was.owner <= OWNER_UNKNOWN)
		p = cgm_mremap_pieces(old, old_len, new_len, flags, want);
	if (spill_held)
		cgm_spill_release();
	if (p == MAP_FAILED) {
		if (charged > 0)
			cgm_map_uncharge(grow);
		return MAP_FAILED;
	}
	if (!table_lock())
		return p;
	/* The region moves or changes size; whatever was at a fixed target goes. */
	left = table_remove((uintptr_t)old, (uintptr_t)old + PAGE_UP(old_len));
	if (flags & MREMAP_FIXED)
		replaced = table_remove((uintptr_t)p, (uintptr_t)p + PAGE_UP(new_len));
	if (was.owner <= OWNER_UNKNOWN)
		table_add((uintptr_t)p, (uintptr_t)p + PAGE_UP(new_len), was.owner, was.caller,
			  was.charged || charged > 0);
	table_unlock();
	/* A charged region keeps its charge but for what it gave up in shrinking. */
	if (was.charged && grow < 0)
		replaced += (uint64_t)-grow;
	else if (!was.charged && charged > 0)
		replaced += left;	/* charged only the growth: the rest was never ours */
	if (replaced)
		cgm_map_uncharge((int64_t)replaced);
	return p;
}

/*
 * Advice that discards pages (mimalloc purges with it, programs drop
 * buffers with it) drops what of them was spilled first: they must read as
 * zeros (or, after MADV_FREE, either), not come back from the pool.
 */
CGM_KEYED CGM_EXPORT int madvise(void *addr, size_t len, int advice)
{
	bool held = static_branch_unlikely(&cgm_spill_key) &&
		    (advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE ||
		     advice == MADV_DONTNEED_LOCKED) &&
		    !from_self((uintptr_t)__builtin_return_address(0)) &&
		    cgm_spill_discard_begin(addr, len, false);
	int rc = (int)syscall(SYS_madvise, addr, len, advice);

	if (held)
		cgm_spill_release();
	return rc;
}

size_t cgm_regions_spans(struct cgm_region_span *out, size_t max)
{
	size_t n = 0;

	if (!table_lock())
		return 0;
	for (size_t i = 0; i < nr && n < max; i++)
		if (tab[i].owner < CGM_NR_REGION_OWNERS)
			out[n++] = (struct cgm_region_span){ tab[i].start, tab[i].end };
	table_unlock();
	return n;
}

/* The break moved from @from to @to: the program's region follows it. */
static void brk_moved(uintptr_t from, uintptr_t to, bool charged)
{
	uint64_t unmapped = 0;

	if (!table_lock())
		return;
	if (!brk_hi)
		brk_hi = from;
	if (PAGE_UP(to) > PAGE_UP(brk_hi))
		table_add(PAGE_UP(brk_hi), PAGE_UP(to), CGM_REGION_PROGRAM, 0, charged);
	else if (PAGE_UP(to) < PAGE_UP(brk_hi))
		unmapped = table_remove(PAGE_UP(to), PAGE_UP(brk_hi));
	brk_hi = to;
	table_unlock();
	if (unmapped)
		cgm_map_uncharge((int64_t)unmapped);
}

/* What growing the break from @from to @to maps: whole pages. */
static int64_t brk_growth(uintptr_t from, uintptr_t to)
{
	return to > from ? (int64_t)(PAGE_UP(to) - PAGE_UP(from)) : 0;
}

CGM_KEYED CGM_EXPORT int brk(void *addr)
{
	uintptr_t from = (uintptr_t)syscall(SYS_brk, 0), got;
	int64_t grow = brk_growth(from, (uintptr_t)addr);
	int charged = grow ? cgm_map_charge(grow) : 0;
	bool held = false;

	if (charged < 0) {
		errno = ENOMEM;
		return -1;
	}
	/* A break that shrinks unmaps: what was spilled there goes. */
	if (static_branch_unlikely(&cgm_spill_key) && (uintptr_t)addr < from)
		held = cgm_spill_discard_begin((void *)PAGE_UP((uintptr_t)addr),
					       PAGE_UP(from) - PAGE_UP((uintptr_t)addr), true);
	got = (uintptr_t)syscall(SYS_brk, addr);
	if (held)
		cgm_spill_release();
	if (got != (uintptr_t)addr) {
		if (charged > 0)
			cgm_map_uncharge(grow);
		errno = ENOMEM;
		return -1;
	}
	brk_moved(from, got, charged > 0);
	return 0;
}

CGM_EXPORT void *sbrk(intptr_t incr)
{
	uintptr_t from = (uintptr_t)syscall(SYS_brk, 0);

	if (incr == 0)
		return (void *)from;
	if ((incr > 0 && from + (uintptr_t)incr < from) ||
	    (incr < 0 && (uintptr_t)-incr > from) || brk((void *)(from + (uintptr_t)incr)) < 0) {
		errno = ENOMEM;
		return (void *)-1;
	}
	return (void *)from;
}

/* Resident bytes of [start, end), with mincore a chunk at a time.  Lock held. */
static inline __attribute__((always_inline)) uint64_t resident_bytes(uintptr_t start, uintptr_t end)
{
	/*
	 * 4 MiB of the range per call, on the stack: a page of bss for it
	 * (16 MiB a call) was 4 KiB of every process's RSS.  The page-table
	 * walk, not the call, is most of mincore's cost: a 1 GiB heap takes
	 * 256 calls a sample instead of 64.  Inlined, as it was without the
	 * array: as a function of its own it lay outside the hot list's
	 * window (scripts/hot-text names the functions it saw).
	 */
	unsigned char vec[1024];
	uint64_t pages = 0;

	while (start < end) {
		size_t len = end - start < sizeof(vec) * PAGE ? end - start : sizeof(vec) * PAGE;
		size_t n = len / PAGE, i = 0;

		if (mincore((void *)start, len, vec) == 0) {
			/*
			 * The low bit of each byte: eight pages a word, summed
			 * by one multiply (the top byte collects the eight 0/1
			 * bytes) -- x86-64's baseline has no popcnt, and
			 * libgcc's costs 20 instructions a word.
			 */
			for (; i + 8 <= n; i += 8) {
				uint64_t w;

				memcpy(&w, vec + i, 8);
				pages += ((w & 0x0101010101010101ULL) * 0x0101010101010101ULL) >> 56;
			}
			for (; i < n; i++)
				pages += vec[i] & 1;
		}
		start += len;
	}
	return pages * PAGE;
}

/*
 * Below SPARSE_MIN a region is counted with mincore whatever its density:
 * a call or two covers it, cheaper than opening pagemap for it.  And
 * only a process that had CGM_REGIONS_LARGE of regions at its last sample
 * counts any by PAGEMAP_SCAN: an ordinary small process never runs
 * sparse_bytes(), which lies outside the code shim/hot-text.ld keeps
 * together (check-text-rss).
 */
#define SPARSE_MIN		(4UL << 20)
uint64_t cgm_regions_reserved;

/*
 * PAGEMAP_SCAN failed once (a kernel before 6.7, or pagemap closed to
 * us): mincore from then on.
 */
static bool scan_refused;

/*
 * Resident bytes of [start, end) by PAGEMAP_SCAN on /proc/self/pagemap
 * (*@fd, opened here if it is not yet; Linux 6.7), or -1 for a range below
 * SPARSE_MIN, or if pagemap cannot be opened or the kernel has no such
 * ioctl (then mincore from then on).  The kernel returns the present
 * pages as ranges and steps over a stretch with no page table in one go,
 * where mincore fills in a byte for every page: of 1 GiB with nothing in
 * it, 3 us against 620; with a page in 64, 0.6 ms against 2.9.  But each
 * present page costs it more: 1 GiB all resident, 3.2 ms against 0.9
 * (`make bench-resident`, bench/RESULTS-resident.md; the two cross
 * between a page in 8 and every other page).  So it counts the regions
 * found sparse at the last sample: node's reservations (V8's, 0.8 GiB
 * with nearly nothing in them) and mimalloc's nearly empty ones, of which
 * a sample under reclaim walked 2.2 GiB, 5.8 ms a sample.  Out of line
 * and outside shim/hot-text.ld's list: a small process never calls it
 * (CGM_REGIONS_LARGE).  Lock held.
 */
static CGM_NOINLINE int64_t sparse_bytes(int *fd, uintptr_t start, uintptr_t end)
{
	struct page_region got[64];
	uint64_t bytes = 0;

	if (end - start < SPARSE_MIN || scan_refused)
		return -1;
	if (*fd < 0)
		*fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (*fd < 0) {
		scan_refused = true;
		return -1;
	}

	while (start < end) {
		struct pm_scan_arg a = {
			.size = sizeof(a), .start = start, .end = end,
			.vec = (uintptr_t)got, .vec_len = sizeof(got) / sizeof(got[0]),
			.category_mask = PAGE_IS_PRESENT, .return_mask = PAGE_IS_PRESENT,
		};
		long n;

		/* Defined for valgrind, which knows nothing of what this ioctl writes there. */
		memset(got, 0, sizeof(got));
		n = syscall(SYS_ioctl, *fd, PAGEMAP_SCAN, &a);
		if (n < 0) {
			scan_refused = true;
			return -1;
		}
		for (long i = 0; i < n; i++)
			bytes += got[i].end - got[i].start;
		if (a.walk_end <= start || a.walk_end > end)
			break;
		start = a.walk_end;
	}
	return (int64_t)bytes;
}

/* Exclusively mapped resident bytes of [start, end), from pagemap (@fd).  Lock held. */
static uint64_t exclusive_bytes(int fd, uintptr_t start, uintptr_t end)
{
	CGM_BIG_BSS static uint64_t ent[2048];
	uint64_t pages = 0;

	while (start < end) {
		size_t n = (end - start) / PAGE < 2048 ? (end - start) / PAGE : 2048;
		ssize_t got = pread(fd, ent, n * sizeof(ent[0]), (off_t)(start / PAGE * sizeof(ent[0])));

		if (got <= 0)
			break;
		n = (size_t)got / sizeof(ent[0]);
		/* Bit 63: present; bit 56: mapped by this process alone. */
		for (size_t i = 0; i < n; i++)
			pages += (ent[i] >> 63) & (ent[i] >> 56) & 1;
		start += n * PAGE;
	}
	return pages * PAGE;
}

/*
 * Resident bytes of @r, by whichever way costs less for it; its density
 * noted.  Inlined into cgm_regions_usage(), on shim/hot-text.ld's list:
 * as a function of its own it would need a place there.  Lock held.
 */
static inline __attribute__((always_inline)) uint64_t region_resident(struct region *r, int *scan_fd)
{
	uint64_t size = r->end - r->start, bytes;
	int64_t sparse = -1;

	if (!r->dense && cgm_regions_reserved >= CGM_REGIONS_LARGE)
		sparse = sparse_bytes(scan_fd, r->start, r->end);
	bytes = sparse >= 0 ? (uint64_t)sparse : resident_bytes(r->start, r->end);
	r->dense = bytes >= size / 4;
	return bytes;
}

int cgm_regions_usage(struct cgm_regions_usage *u, bool exclusive)
{
	bool known;
	int fd = -1, scan_fd, kept;

	memset(u, 0, sizeof(*u));
	/* A process that spills reads through a pagemap kept open (shim/self_proc.c). */
	kept = scan_fd = cgm_self_kept(CGM_SELF_PAGEMAP);
	if (exclusive) {
		fd = kept >= 0 ? kept :
		     (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -1;
	}
	if (!table_lock()) {
		if (fd >= 0 && fd != kept)
			syscall(SYS_close, fd);
		return -1;
	}
	known = owner_of(0) != OWNER_UNKNOWN;
	for (size_t i = 0; i < nr; i++) {
		struct region *r = &tab[i];

		/* Mapped before mimalloc's range could be looked up: now it can. */
		if (r->owner == OWNER_UNKNOWN && known)
			r->owner = owner_of(r->caller);
		if (r->owner >= CGM_NR_REGION_OWNERS)
			continue;
		u->reserved[r->owner] += r->end - r->start;
		u->resident[r->owner] += fd >= 0 ? exclusive_bytes(fd, r->start, r->end) :
					 region_resident(r, &scan_fd);
	}
	cgm_regions_reserved = u->reserved[CGM_REGION_HEAP] + u->reserved[CGM_REGION_PROGRAM];
	table_unlock();
	if (fd >= 0 && fd != kept)
		syscall(SYS_close, fd);
	if (scan_fd >= 0 && scan_fd != kept)
		syscall(SYS_close, scan_fd);
	return 0;
}

/* Around fork(): the child gets a table no thread is halfway through changing. */
static CGM_TLS bool fork_locked;

static void regions_prepare(void)
{
	/* fork() from a signal handler that interrupted this thread in the table: don't wait. */
	fork_locked = table_lock();
}

static void regions_parent(void)
{
	if (fork_locked)
		table_unlock();
}

static void regions_child(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

	lock = fresh;
	holding = false;
	/* What the parent charged stays the parent's: the child's unmaps return nothing. */
	for (size_t i = 0; i < nr; i++)
		tab[i].charged = 0;
}

void cgm_regions_init(void)
{
	pthread_atfork(regions_prepare, regions_parent, regions_child);
}
