/*
 * Internal interface of the shim: bootstrap state shared by its files.
 */
#ifndef CGM_SHIM_H
#define CGM_SHIM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgm/config.h"
#include "cgm/hier.h"

/* The effective configuration, valid once the constructor has run. */
extern struct cgm_config cgm_conf;

/* Set by the constructor when it has finished. */
extern bool cgm_initialized_flag;

/*
 * Aligned allocation from mimalloc.  Not mi_malloc_aligned(): in mimalloc
 * 2.0.9 (Debian's), its shortcut assumes that a block whose size is a power
 * of two is naturally aligned, which is false above 128 bytes (measured:
 * mi_malloc_aligned(1024, 256) returned ...180 in about 1% of calls).  The
 * _at form with offset 0 checks the address it hands out.
 */
static inline void *cgm_mi_aligned(size_t n, size_t align)
{
	extern void *mi_malloc_aligned_at(size_t, size_t, size_t);

	return mi_malloc_aligned_at(n, align, 0);
}

/* glibc's MALLOC_ALIGNMENT on 64-bit: what malloc guarantees. */
#define CGM_MALLOC_ALIGN 16

/* Hidden names of the interposed entry points, for calls from inside. */
void *cgm_malloc(size_t n);
void cgm_free(void *p);
void *cgm_realloc(void *p, size_t n);
void *cgm_calloc(size_t count, size_t size);
int cgm_posix_memalign(void **out, size_t align, size_t n);
void *cgm_valloc(size_t n);
void *cgm_pvalloc(size_t n);

/* C23's sized frees, which glibc 2.36's <stdlib.h> does not declare yet. */
void free_sized(void *p, size_t n);
void free_aligned_sized(void *p, size_t align, size_t n);

/* Aligned allocation, @align a power of two (accounted when accounting is on). */
void *cgm_aligned_alloc_checked(size_t align, size_t n);

/* glibc's memalign semantics, shared by memalign and its aliases. */
void *cgm_memalign(size_t align, size_t n);

/* The C++ runtime's std::__throw_bad_alloc, found lazily; NULL if absent. */
void (*cgm_find_throw_bad_alloc(void))(void);

/* Divide @anon bytes between the NUMA nodes as the process's anonymous pages lie (shim/numa.c). */
void cgm_numa_split(int64_t anon, int64_t out[CGM_MAX_NODES]);

/*
 * pthread_create without the wrapper (shim/thread_start.c): no argument
 * block on the heap, no accounting slot -- for the library's own threads,
 * which must not touch memory that can be spilled.  What glibc allocates
 * for the thread is charged past the limits (cgm_charge_nofail_begin).
 */
int cgm_pthread_create_raw(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
			   void *arg);

/* The index of group @group of the process's hierarchy (NULL: its own), or a negative errno. */
int64_t cgm_group_index(const char *group);

/* ---- acct_setup.c: accounting on at start-up, off at exit ---- */

/*
 * Switch accounting on as the configuration asks.  Returns what became
 * of it, for the verbose line: "on (group ..., hierarchy ...)" or
 * "off (why)".
 */
const char *cgm_accounting_start(void);

/* ---- accounted.c: the accounted slow paths ---- */

/* Tables and the thread-exit hook, before accounting is switched on. */
void cgm_accounted_init(void);
/*
 * In the child of fork(): nothing charged for what it inherits; it joins
 * its parent's group at its first allocation that needs a slot.
 */
void cgm_accounted_fork_child(void);
/* A slot for the calling thread, before its own code runs. */
void cgm_thread_register(void);

/* ---- epoch.c: what other processes change in the hierarchy ---- */

/* The hierarchy's epoch when this process last acted on it. */
extern uint32_t cgm_seen_epoch;
/* Bring the limits static key in line with the hierarchy. */
void cgm_sync_limits(void);
/* The epoch moved: act on limits and on a move asked for (cgm_epoch_check). */
void cgm_epoch_changed(void);
/* In the child of fork(): the epoch lock may have been another thread's. */
void cgm_epoch_fork_child(void);

/*
 * Until cgm_charge_nofail_end(), the calling thread's charges are not
 * refused: what memory.max refuses is charged past it, exactly the pages
 * it lacks, and nothing reclaims or sleeps over memory.high, as the kernel
 * forces what must not fail (__GFP_NOFAIL).  The end restores what
 * begin returned and gives back all that is left in the thread's stock
 * and allowances.  For the dynamic loader's allocations when the spill
 * pool's libraries load (shim/lazy_libs.c) and a thread of the library's
 * starting (shim/thread_start.c), both often at memory.max.
 */
unsigned char cgm_charge_nofail_begin(void);
void cgm_charge_nofail_end(unsigned char was);

/* ---- resident.c: residency samples ---- */

/*
 * A slow path ran: sample the process's resident memory if a sample is
 * due (@large: a block of 1 MiB or more, or a mapping, so look now), and
 * throttle at memory.high for what it found.
 */
void cgm_resident_tick(bool large);
/*
 * Sample now; returns the pages it charged (negative: uncharged).  The
 * charge is from /proc/self/statm; memory.stat's split of the anon
 * (heap_free, mapped_anon), from a walk of the process's regions, is
 * walked for too unless @lazy_split and no sample is due yet by its
 * interval (then the split is the last walk's, within the anon).
 */
int64_t cgm_resident_sample(bool lazy_split);
/* How many samples walked the regions so far, and what the last such walk took (ns). */
uint64_t cgm_resident_walks(void);
int64_t cgm_resident_walk_ns(void);
/*
 * What the process could fill without allocating, at its last sample
 * that walked its regions (bytes): its mappings' pages not resident, and
 * live heap bytes beyond the heap's resident ones (shim/resident.c).
 */
extern int64_t cgm_untouched_bytes;
/*
 * Charge the process's resident memory as of now, for reclaim that has
 * just spilled or purged: the charge from /proc/self/statm, the split of
 * memory.stat (the walk of the regions, milliseconds in a large process)
 * only when a sample is due anyway, or @split asks for it.  Returns as
 * cgm_resident_sample().
 */
int64_t cgm_resident_charge(bool split);
/*
 * At exit, a process whose next sample was due a second ago or more
 * (CGM_EXIT_RESAMPLE_NS) takes one more (shim/acct_setup.c), so that what
 * it touched without allocating since reaches memory.peak before its
 * charge goes.
 */
#define CGM_EXIT_RESAMPLE_NS	(1000 * 1000000LL)
/* When the next sample is due by its interval (0: none taken yet); shim/resident.c. */
extern int64_t cgm_next_sample_ns;
/*
 * charge=resident: must this allocation of @bytes, not charged by its
 * bytes, fail?  True when the group is over its memory.max after reclaim
 * and the OOM policy.  Near a limit it samples first: the blocks made
 * since the last sample may have been touched since.
 */
bool cgm_resident_refuse(int64_t bytes);
/*
 * Give back what the allocator keeps (mi_collect) and sample again.
 * Repeated within a millisecond it only samples, unless @force.
 */
void cgm_reclaim_self(bool force);
/*
 * Reclaim for a charge of @need pages that memory.max refused (0: for
 * pressure): cgm_reclaim_self(false), and with spill=1 spilling until the
 * charge would fit, not only what is over the limits.  @deep: every
 * page is a candidate, the lately refaulted ones too (as for @need).
 */
void cgm_reclaim_for(int64_t need, bool deep);

/*
 * shim/mi_purge.c: mimalloc's frees and collects with its decommit delays
 * at zero, so that what they give up leaves memory now.  Init reads the
 * delays to go back to (after mimalloc has read its environment).
 */
void cgm_mi_purge_init(void);
void cgm_mi_free_now(void *p);
void cgm_mi_collect_now(void);

/*
 * shim/large_park.c: a freed large block that should leave memory, held
 * for the thread's next large allocation.  Park it (the thread's older
 * one goes to mimalloc); hand it to mimalloc as any free (a large
 * allocation follows); purge it now (reclaim, a limit near, thread exit);
 * purge it if it was parked long enough ago (a slow path's clock).
 */
void cgm_park_large(void *p);
void cgm_park_release(void);
void cgm_park_purge(void);
void cgm_park_settle(int64_t now_ns);
/*
 * shim/thread_run.c: run a new thread's function, and purge the block it
 * parked when it ends (a return, pthread_exit() or cancellation).
 */
void *cgm_thread_run(void *(*fn)(void *), void *arg);
/*
 * memory.reclaim written by this process: the same, forced, and again
 * after mimalloc's decommit delays while much is left (it may sleep up to
 * half a second).
 */
void cgm_reclaim_self_wait(void);
/*
 * memory.reclaim written by another process, answered at a slow path that
 * must not sleep: the samples of the next half second collect first, so
 * that what mimalloc's delays held back goes too.
 */
void cgm_reclaim_later(void);
void cgm_resident_fork_child(void);
/* A forked child that charges only the pages it does not share with its parent. */
bool cgm_resident_exclusive_only(void);
/* A forked child joined its parent's group: what it inherited is not its own. */
void cgm_resident_joined(void);

/* ---- exit_report.c ---- */

/* stats=exit: the group's files to stderr or stats_file=. */
void cgm_exit_report(void);
/* stats=exit without stats_file, at start-up (stderr pinned): keep a copy of stderr for the report. */
void cgm_exit_report_prepare(void);

/* ---- thread_start.c ---- */

/* Find the real pthread_create (in the constructor: dlsym may allocate). */
void cgm_thread_start_init(void);

#endif /* CGM_SHIM_H */
