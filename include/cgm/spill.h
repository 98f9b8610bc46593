/*
 * spill: move cold anonymous pages into the compressed pool and bring them
 * back on access through userfaultfd.
 *
 *   spill_open    create the engine: two uffds, a staging area, the page
 *                 table, and the handler thread that serves refaults
 *   spill_out     capture pages (UFFDIO_MOVE), store them compressed
 *   spill_stats   counters
 *   spill_close   bring every spilled page back, stop the thread, unmap
 *
 * How a page leaves.  spill_out() enters each page in the table as "in
 * transit", registers the call's range for MISSING faults on the program
 * uffd, and moves the pages with UFFDIO_MOVE into a staging area that is
 * registered on a second uffd (a move's destination must be registered on
 * the uffd that issues it, and the staging uffd has no handler: nothing
 * ever faults there).  The move is atomic against the program's writes: a
 * write either lands before the move and travels with the page, or finds
 * the page missing and waits for the handler.  Each staged page is then
 * compressed into the pool (zp_store) and its staging page released.
 *
 * How a page comes back.  A thread (or a system call: the uffd is created
 * without UFFD_USER_MODE_ONLY and without UFFD_FEATURE_SIGBUS) that touches
 * a spilled page blocks until the handler thread loads the page from the
 * pool and installs it with UFFDIO_COPY, which wakes it.  A fault on a page
 * still in transit waits until its store finishes, so it never sees zeros
 * or stale bytes.  A range stays registered only while some page of it is
 * spilled; the registration of the last page's range is dropped when that
 * page comes back, so hot memory never faults through the handler.
 *
 * Nothing here calls malloc or stdio: every table is mmap'd at
 * spill_open() and messages go through cgm_log(), so the engine can run
 * inside the interposed malloc.
 *
 * Coldness.  A page that refaults within hot_distance spills of leaving
 * (its refault distance, as the kernel's workingset measures it) is hot:
 * spill_out() leaves it in place until that many more pages have been
 * spilled.
 *
 * Limits of this engine, for whoever wires it in:
 *   - fork(): the child reads zeros where the parent's pages were
 *     spilled unless it takes over its copy of the engine
 *     (spill_fork_prepare, which needs UFFD_FEATURE_EVENT_FORK and so
 *     CAP_SYS_PTRACE) or the pages were brought back first
 *     (spill_restore_range over everything).
 *   - MADV_DONTNEED/munmap by the program on a spilled page is not seen
 *     (no EVENT_REMOVE/UNMAP, whose waits would deadlock a handler that
 *     runs in the program): call spill_forget_range() before them, and
 *     spill_restore_range() before an mremap that moves spilled pages.
 *   - A thread must not touch, in the same spill_out() call, a page it is
 *     spilling (it would wait for its own store).
 */
#ifndef CGM_SPILL_H
#define CGM_SPILL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct zp_pool;
struct spill_engine;

/*
 * Options; a zeroed struct means defaults.
 *   pool        the pool pages are stored in (required); the engine does
 *               not own it, and it must outlive spill_close()
 *   max_pages   most pages spilled at once (0: 1 Mi pages, 4 GiB); a page
 *               past it is skipped.  The engine's table starts at 4096
 *               slots (24 bytes each) and doubles as pages go out, up to
 *               two slots per page of max_pages
 *   max_ranges  most spill_out() ranges with a page still spilled (0: 64 Ki)
 */
struct spill_options {
	struct zp_pool *pool;
	size_t max_pages;
	size_t max_ranges;
	/*
	 * Called on the handler thread after idle_ms without a fault (0: never):
	 * work for a process that is not allocating, such as answering a
	 * reclaim.  It must not touch memory that can be spilled (the thread
	 * that would bring it back is the one running it) nor wait for a
	 * thread that may.  It returns true when it has more to do: it is then
	 * called again as soon as no fault waits, until a fault comes, so it
	 * should do a little at a time (that fault waits for it).
	 */
	bool (*idle)(void);
	unsigned idle_ms;
	/*
	 * Called on the handler thread with true before it serves a batch of
	 * faults and with false after (NULL: not called): the faulting
	 * threads are stalled meanwhile (memory.pressure).
	 */
	void (*serving)(bool start);
	/*
	 * Called on the handler thread after it served a batch of faults,
	 * with the pages that batch brought back (faults and readahead), and
	 * after each step of a cluster's readahead (which waits until no
	 * fault does), when it brought any back (NULL: not called).  The
	 * faulting threads are awake again; what it does delays the service
	 * of the next fault.  It returns how many ms the handler is to hold
	 * off before it serves another (0: none; at most 2000): a throttle of
	 * the threads that bring pages back.  A fork or spill_close() ends
	 * the wait early.
	 * It must not touch memory that can be spilled (as idle).
	 */
	unsigned (*served)(uint64_t pages);
	/*
	 * While the served hook holds the handler off: called every
	 * millisecond of the hold with the ns held so far (@ended false), and
	 * returns true to end it there; then once with the whole time held
	 * (@ended true, return ignored).  NULL: the hold lasts what served
	 * asked.  Kernel-like throttling ends as soon as reclaim has covered
	 * what came back; the full penalty is for reclaim that makes no
	 * progress.  It must not touch memory that can be spilled (as idle).
	 */
	bool (*holding)(int64_t held_ns, bool ended);
	/*
	 * Read ahead on sequential faults: a fault at the page after the
	 * last one (or just past what was read ahead) brings back the next
	 * 2, 4, 8, 16, then 32 spilled pages too.  Any other fault that is a refault
	 * within the hot distance brings back the rest of its aligned
	 * 16-page cluster.  Off in a zeroed struct.
	 */
	bool readahead;
	/*
	 * A page that came back within the hot distance stays hot (not taken
	 * by spill_out) for this long at most, in ms (0: 10 s); once every
	 * one has expired, the handler's idle gives the hot-page table back.
	 */
	unsigned hot_ms;
	/*
	 * While the handler serves a burst of faults -- from the fault that
	 * wakes it until it goes back to sleep -- hold a CPU latency request
	 * of 0 (/dev/cpu_dma_latency, PM QoS): idle CPUs poll instead of
	 * halting, so the thread the handler wakes runs at once.  Machine-wide
	 * while held, as any such request is.  The device is root's: without
	 * it, nothing is held (spill_stats' cpu_latency_err says why).  Off in
	 * a zeroed struct.
	 */
	bool cpu_latency;
	/*
	 * How to start the handler thread (NULL: pthread_create).  Whatever
	 * it runs before sp_handler must not touch spillable memory: the
	 * thread that would bring it back is this one.
	 */
	int (*create_thread)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
};

/* Counters; totals since spill_open() unless said otherwise. */
struct spill_stats {
	uint64_t spilled;	/* pages moved out and stored in the pool */
	uint64_t refaulted;	/* pages brought back by a fault */
	uint64_t restored;	/* pages brought back by spill_close() */
	uint64_t skipped;	/* pages left in place: the move failed (not
				 * present, EBUSY after fork, ...), already
				 * spilled, or the table was full */
	uint64_t store_failed;	/* pages put back because zp_store failed */
	uint64_t stored_bytes;	/* page bytes handed to the pool (4 KiB each;
				 * the compressed size is in zp_pool_stats) */
	uint64_t in_pool;	/* pages spilled now */
	uint64_t ranges;	/* ranges registered now */
	uint64_t skipped_hot;	/* pages left in place because they were hot */
	uint64_t refaulted_hot;	/* refaults within the hot distance */
	uint64_t forgotten;	/* spilled pages the program discarded */
	uint64_t readahead;	/* pages brought back ahead of a fault: faults
				 * at consecutive pages read the next 2 to 32;
				 * a hot refault, its 16-page cluster */
	uint64_t misreported;	/* pages a move said it left in place but
				 * moved all the same (a kernel bug: see
				 * sp_check_left()); stored like the others */
	uint64_t zero_filled;	/* faults on a registered page with nothing
				 * spilled there (never spilled, or back and
				 * given back by the program since), served a
				 * page of zeros: the kernel's work, done by
				 * the handler */
	uint64_t unshared;	/* pages still copy-on-write shared since a
				 * fork that a spill wrote (a no-op write) to
				 * make the process's own: a move refuses them */
	uint64_t read_in_place;	/* spilled pages compressed where they landed, not
				 * from a copy the kernel made: a lone page, or
				 * process_vm_readv refused (by seccomp, say);
				 * slower on a VM with shadow page tables
				 * (sp_read_staged()) */
	uint64_t staged;	/* staging slots holding copies not yet cleared
				 * (63 a lane at most; spill_stage_clear()) */
	uint64_t bursts;	/* times the handler woke from sleep to a fault */
	uint64_t bursts_polled;	/* of them, served with idle CPUs polling */
	uint64_t held_off;	/* times the served hook held the handler off */
	uint64_t held_off_ms;	/* for this long in all */
	int cpu_latency_err;	/* why no CPU latency request can be held
				 * (errno of opening /dev/cpu_dma_latency), or
				 * 0: held in bursts, or not asked for */
};

/*
 * Can this process have an engine?  0, or -EPERM / -EOPNOTSUPP with the
 * same one line spill_open() would print.
 */
int spill_probe(void);

/*
 * Create an engine over @opt->pool: the uffds, the tables, and the handler
 * thread (which blocks every signal).  Returns 0 and sets *enginep, or:
 *   -EPERM       the kernel gives this process no uffd that serves system
 *                calls: one "cgmalloc: spill: ..." line names what to grant
 *                (root, CAP_SYS_PTRACE, sysctl vm.unprivileged_userfaultfd=1,
 *                or read-write access to /dev/userfaultfd)
 *   -EOPNOTSUPP  the kernel lacks userfaultfd or UFFDIO_MOVE (Linux 6.8+)
 *   -EINVAL      no pool
 *   -ENOMEM, -EAGAIN (thread)
 * Call once per engine, from any thread, while no other call on it runs.
 */
int spill_open(const struct spill_options *opt, struct spill_engine **enginep);

/*
 * Spill @npages pages from @addr (page-aligned, private anonymous,
 * writable memory of this process).  Each page is moved out and stored;
 * a page that cannot be moved (not present, shared after fork, already
 * spilled, table full) is left in place and counted as skipped; a page the
 * pool refuses is put back and counted in store_failed.  Returns the number
 * of pages spilled, or -EINVAL (unaligned, overlaps the engine's own
 * memory, not registrable memory: then nothing was spilled), -ENOSPC (no
 * free range slot), -ESHUTDOWN (engine closing).  Safe from any number of
 * threads at once, and against faults on the same pages.
 */
long spill_out(struct spill_engine *e, void *addr, size_t npages);
/*
 * spill_out(), the pages stored with zp_store_dense(): with zstd at once
 * in an lz4 pool that recompresses, for pages cold enough to be
 * recompressed before long (the background reclaim's).
 */
long spill_out_dense(struct spill_engine *e, void *addr, size_t npages);

/*
 * Clear the staging slots that hold copies of pages already in the pool
 * (at most 63 pages per lane: spill_out() clears a lane once a batch's
 * worth is used), and give back the pool's freed zspages
 * (zp_release_freed()).  For the end of a reclaim; lanes in use are
 * skipped.
 */
void spill_stage_clear(struct spill_engine *e);

/*
 * Bring back the spilled pages of [addr, addr + len) (restore_range), or
 * drop them so that they read as zeros, as discarded pages do
 * (forget_range).  Pages in transit are waited for.  Return the pages
 * restored or forgotten.  A call with nothing spilled costs one load.
 */
long spill_restore_range(struct spill_engine *e, const void *addr, size_t len);
long spill_forget_range(struct spill_engine *e, const void *addr, size_t len);
/*
 * Restore every spilled page of every range that meets [addr, addr + len),
 * beyond it too: afterwards no registration of a spill covers any of it
 * (what an mremap of it needs).
 */
long spill_release_range(struct spill_engine *e, const void *addr, size_t len);

/*
 * Write tracking (Linux 6.7: UFFD_FEATURE_WP_ASYNC and PAGEMAP_SCAN; no
 * root needed beyond the engine's own uffd).  spill_track() registers the
 * region [addr, addr + len) -- a whole mapping -- for asynchronous
 * write-protection: a write to a protected page is let through by the
 * kernel itself (no handler) and marks it written.  spill_written() finds
 * the pages of [addr, addr + len) written since they were last
 * protected, into @runs (at most @max, 64 at most per call), and with
 * @protect protects them again: the reference bit of a CLOCK.  Without,
 * they stay written (and unprotected: the program's writes to them do
 * not fault).  Pages never protected count as written.
 * Both return -EOPNOTSUPP where the kernel lacks it; spill_track
 * -ENOSPC past 4096 regions.
 */
struct spill_run {
	void *addr;
	size_t npages;
};
int spill_track(struct spill_engine *e, const void *addr, size_t len);
/*
 * Stop tracking the regions that meet [addr, addr + len) and drop their
 * write-protect registration (before the program mremaps them: a mapping
 * must be one VMA to be moved, and a registration splits it).
 */
void spill_untrack(struct spill_engine *e, const void *addr, size_t len);
/*
 * The program unmapped [addr, addr + len) (munmap, a fixed mapping over
 * it, a mremap onto it): its spilled pages are forgotten, as
 * spill_forget_range() does, and the spills' spans and the tracked
 * regions lose that part (the kernel dropped its registration with it).
 * Kept, a later settling unregistered over whatever the program mapped
 * there next, and the kernel refused the whole call where that was a
 * file's mapping (check-spill-model: the mremap of a tracked mapping
 * then failed).
 */
void spill_unmapped(struct spill_engine *e, const void *addr, size_t len);
long spill_written(struct spill_engine *e, const void *addr, size_t len,
		   struct spill_run *runs, size_t max, bool protect);

/*
 * Catch first touches: with @on, every tracked region is registered for
 * MISSING faults whole, so that a thread touching a page of one that is
 * not in memory (never touched, or given back) faults through the
 * handler, which serves it zeros (zero_filled) and tells the served hook
 * it as a page that came back -- the hook can then hold the thread off:
 * memory.high's throttle of memory charged without an allocation, as
 * the kernel throttles any charge.  Each such touch costs the handler's
 * round trip instead of the kernel's fault.  Off, registration follows
 * the spilled pages again; the unregistration clears the regions'
 * write-protect bits, so their pages read as written at the next scan.
 * Returns the regions it changed (0: already so), -EOPNOTSUPP without
 * write tracking.
 */
int spill_catch_touches(struct spill_engine *e, bool on);
/* Whether it catches now (no lock: the served hook asks after each batch). */
bool spill_catching(struct spill_engine *e);

/* The refault distance below which a page is hot (0, the default: none is). */
void spill_set_hot_distance(struct spill_engine *e, size_t pages);
/*
 * Until called again, a page that came back more than @ms ago is not hot,
 * whatever its distance (0: the engine's hot_ms again, the default).
 */
void spill_set_hot_age(struct spill_engine *e, unsigned ms);
/* Pages left in place so far because they were hot (one atomic load). */
uint64_t spill_skipped_hot(struct spill_engine *e);
/*
 * Did a page come back (placed by a fault, read ahead or restored) in
 * the 2 MiB blocks that [addr, addr + len) meets within the last @ms
 * milliseconds?  The engine remembers 1024 blocks (a clash forgets the
 * older one: false).
 */
bool spill_came_back_within(struct spill_engine *e, const void *addr, size_t len, unsigned ms);
/*
 * Thrashing, as a reclaimer sees it: how many pages spilled since its
 * last spill_mark_refaults() have come back since, by a fault or read
 * ahead.  Pages that left before the mark do not count, however soon
 * they come back: a program turning to data it left long ago is not
 * undoing this reclaimer's work.  One mark for the engine (the
 * background reclaim's).
 */
void spill_mark_refaults(struct spill_engine *e);
uint64_t spill_refaults_since_mark(struct spill_engine *e);
/*
 * Pause or resume readahead (opened with it off: stays off).  A caller
 * that must spill a page for each one brought back (a group at its
 * memory.max) gains nothing from pages brought back before they are
 * asked for.
 */
void spill_pause_readahead(struct spill_engine *e, bool paused);

/*
 * Whether a page another process still maps (shared copy-on-write since a
 * fork) may be copied to be spilled: the copy takes the page out of this
 * process's memory, and the other keeps the original.  Pages mapped by
 * this process alone are always taken (no copy).  Default: true.  Off in
 * a forked child, which is not charged for what it shares.
 */
void spill_unshare_shared(struct spill_engine *e, bool copy);

/*
 * Read the counters (each one exact, the set not a snapshot).  A refault is
 * counted, and its range unregistered, just after the faulting thread is
 * released: that thread may read the counters a moment before they
 * include its fault.
 */
void spill_stats(struct spill_engine *e, struct spill_stats *st);

/*
 * What of the engine's own memory is resident in pages of the process's
 * own (zp_resident_bytes()), the pool's compressed pages not included:
 * anon that nothing can spill, which the shim leaves out of the process's
 * charge, as the kernel does not charge its zswap bookkeeping.  The engine's
 * scratch goes back once its handler has been idle (spill_options'
 * idle_ms, the idle work done); its tables grow with what is spilled.
 */
struct spill_footprint {
	size_t tables;		/* the engine and its tables: entries, ranges, hot pages, ... */
	size_t hot;		/* of them, the hot pages' */
	size_t scratch;		/* staging slots, copy pages, readahead span, the pool's contexts */
};
void spill_footprint(struct spill_engine *e, struct spill_footprint *fp);
/*
 * The same without waiting for the engine's lock: -EBUSY if another thread
 * holds it (the caller may be a signal handler that interrupted it).
 */
int spill_footprint_try(struct spill_engine *e, struct spill_footprint *fp);

/*
 * Bring every spilled page back into place (pages a program thread faults
 * meanwhile are served as usual), unregister every range, stop and join
 * the handler thread, close the uffds and unmap the engine.  A page the
 * pool cannot load (backing-file I/O error) raises SIGBUS, as a failed
 * swap-in does.  No spill_out() may run during or after it.
 */
void spill_close(struct spill_engine *e);

/*
 * In a forked child: let go of the parent's engine -- close its uffds and
 * unmap its tables -- without touching its thread, which the child does
 * not have.  The child's pages were restored before the fork.
 */
void spill_abandon(struct spill_engine *e);

/*
 * Around fork(), so that the child keeps what the parent spilled in its
 * copy of the pool and brings it back itself, lazily, as the parent
 * would -- a fork costs no restore, and a child that execs never brings
 * anything back.
 *
 * spill_fork_prepare, before every fork, with spill_out() and the range
 * calls kept out until spill_fork_parent: with @lazy, the handler freezes
 * the table and the pool (faults are still served, the entries left in
 * place) so that the child's copy is whole.  False if it is not done
 * (!@lazy; the kernel does not report forks to this process: no
 * CAP_SYS_PTRACE; nothing is registered; the handler does not answer):
 * bring every page back instead.
 *
 * spill_fork_parent, in the parent after every fork announced: waits for
 * the handler to hand the child's userfaultfd (the kernel's
 * UFFD_EVENT_FORK) to the child and to thaw.  A fork not announced (a
 * raw clone(), _Fork()) is said in one line, where the kernel reports it.
 *
 * spill_fork_child, in the child (its only thread): takes the userfaultfd
 * and starts its own handler thread.  0: this process has the engine now;
 * otherwise (no descriptor came, or the handler cannot start) every
 * spilled page was put back in place, and the engine is to be abandoned.
 */
bool spill_fork_prepare(struct spill_engine *e, bool lazy);
void spill_fork_parent(struct spill_engine *e);
int spill_fork_child(struct spill_engine *e);

#endif /* CGM_SPILL_H */
