/*
 * spill=1 in the library (shim/spiller.c): reclaim moves the coldest
 * pages of the heap and of the program's own anonymous mappings into a
 * compressed pool (zpool/spill.c), and they fault back on access.
 *
 * Off (the default), nothing of it runs: no pool, no engine, no thread;
 * the mapping functions test one static key that stays a NOP.
 */
#ifndef CGM_SPILLER_H
#define CGM_SPILLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgm/static_key.h"

struct cgm_proc;

/* On once this process has a spill engine: the mapping functions tell it what they discard. */
DECLARE_STATIC_KEY_FALSE(cgm_spill_key);

/*
 * In the constructor, with the configuration read: with spill=1, check
 * that this process may have a userfaultfd that serves system calls, and
 * start the background reclaim, which loads the pool's libraries and
 * opens the engine (its handler thread) at the first reclaim; without it
 * (spill_background=0) they are made here.  Refused in one line on
 * stderr, and spilling stays off.
 */
void cgm_spill_init(void);

/*
 * Load the pool's libraries and bind the library's functions, once: on
 * the background reclaim's thread, never in an allocation path.  False
 * (after a line on stderr; spilling is then off) if they cannot be had.
 */
bool cgm_spill_load(void);
/* They are loaded. */
bool cgm_spill_loaded(void);
/* This thread is loading them (its reclaims return at once). */
bool cgm_spill_loading(void);
/* The load failed: nothing will spill in this process. */
bool cgm_spill_load_failed(void);

/* Is spilling on in this process? */
bool cgm_spill_on(void);

/*
 * Spill up to @want pages, the coldest first (a clock over the regions:
 * pages written since it last passed, and pages that refaulted soon after
 * leaving, are skipped).  With @thorough (an explicit reclaim) a second
 * lap takes what the first gave a second chance.  The pool's oldest pages
 * are recompressed with zstd first (spill_recompress), and what that
 * gives back of the pool is wanted less.  Returns the pages reclaimed
 * (spilled, and pool pages given back), and adds the resident pages it
 * looked at to *@looked (may be NULL).  Another thread spilling
 * meanwhile: 0 at once.
 */
int64_t cgm_spill_reclaim(int64_t want, uint64_t *looked, bool thorough);

/*
 * Answer for this process (@p, its slot) what a memory.reclaim or limit
 * write asked of it, by spilling, and mark it answered.  Returns the
 * pages reclaimed, or -1 if nothing is asked or another thread of the
 * process is answering (it marks it).
 */
int64_t cgm_spill_answer(struct cgm_proc *p);

/*
 * The program locks its memory (@why: which call): spilling stops for
 * good in this process, every spilled page comes back and the pool goes,
 * with one line on stderr (where spilling was on).
 */
void cgm_spill_stop_locked(const char *why);

/*
 * cgm_spill_stop() of cgmalloc.h: spilling stops until
 * cgm_spill_resume_asked(), every spilled page comes back, with one line
 * on stderr.  The pages, 0 without an engine.
 */
long cgm_spill_stop_asked(void);

/*
 * cgm_spill_resume() of cgmalloc.h: spilling may start again (the next
 * reclaim makes a new engine).  0, -ENODEV (spill=1 not set or refused
 * at start-up) or -EPERM (the program locked its memory).
 */
int cgm_spill_resume_asked(void);

/*
 * A core-dumping signal is on its way: spilling stops for good and every
 * spilled page comes back (shim/core_dump.c).  The pages, or -1 without
 * an engine.
 */
long cgm_spill_restore_for_core(void);

/*
 * spill_core=1, once the engine is open: a handler for each signal whose
 * default action dumps core and that is still at that default (not one
 * the program inherited ignored), which brings the spilled pages back
 * before the dump (shim/core_dump.c).
 */
void cgm_core_dump_watch(void);

/*
 * Spill @want pages, or what is over the group's limit if more, or what
 * must go before a charge of @need pages fits under memory.max if more
 * still, in rounds until the group is under (the pool's growth counted).
 * Returns the pages reclaimed.
 */
int64_t cgm_spill_over_limit(int64_t want, int64_t need, uint64_t *looked, bool thorough);

/*
 * The program discards [addr, addr + len) (munmap, MADV_DONTNEED, ...):
 * spilled pages there go, and no spill runs until cgm_spill_release()
 * after the call (a page spilled in between would come back with its old
 * bytes).  With @unmaps (munmap, a fixed mapping over it, a shrinking
 * break), the range also leaves the regions whose writes are tracked.
 * False when there is nothing to hold.
 */
bool cgm_spill_discard_begin(const void *addr, size_t len, bool unmaps);
/*
 * The program moves [addr, addr + len) (mremap): its spilled pages come
 * back and its registration goes first, and no spill runs until
 * cgm_spill_release() (after the mremap).  When it moves onto another
 * mapping (MREMAP_FIXED), @onto, @onto_len (else NULL, 0): that one is
 * replaced, and its spilled pages go as munmap's do.  False when there is
 * nothing to hold (no engine).
 */
bool cgm_spill_hold(const void *addr, size_t len, const void *onto, size_t onto_len);
void cgm_spill_release(void);

/*
 * The background reclaim (shim/bg_reclaim.c, spill_background=1): its
 * thread starts in the constructor (in a forked child, at its first
 * allocation slow path); a sample that finds the group near its limit
 * kicks it; busy while it looks or spills; a forked child forgets the
 * parent's thread.
 */
void cgm_bg_reclaim_start(void);
void cgm_bg_reclaim_kick(void);
/*
 * A block or mapping was just made that, touched, could take the group
 * to its limit: the background reclaim looks at the group's growth often
 * until it stops growing.
 */
void cgm_bg_reclaim_watch(void);
/* Ask it to load the pool's libraries (cgm_spill_load); false if there is no thread. */
bool cgm_bg_reclaim_load_kick(void);
bool cgm_bg_reclaim_busy(void);
/* The background reclaim thread runs in this process. */
bool cgm_bg_reclaim_started(void);
/* Called by the background reclaim thread as it starts. */
void cgm_spill_background_thread(void);
/*
 * spill_strict_high=1: the background reclaim found that what the process
 * could fill without allocating could take its group to its limit: first
 * touches go through the handler, to be throttled (shim/spiller.c).
 */
void cgm_spill_catch_threat(void);
void cgm_bg_reclaim_forked(void);
/*
 * A forked child's thread, wanted but not made at fork: its first
 * allocation slow path makes it (cgm_bg_reclaim_start_wanted, from
 * cgm_resident_tick), so that a child that only execs or exits pays nothing.
 */
extern bool cgm_bg_start_wanted;
void cgm_bg_reclaim_start_later(void);
void cgm_bg_reclaim_start_wanted(void);
/* Pages the background reclaim spilled or got back from the pool, in all. */
uint64_t cgm_bg_reclaim_pages(void);
/* Times it stopped because what it spilled came back (thrashing). */
uint64_t cgm_bg_reclaim_thrash_stops(void);
/* The background reclaim's mark, and the pages spilled since it that came back (spill.h). */
void cgm_spill_mark_refaults(void);
uint64_t cgm_spill_refaults_since_mark(void);

/* Publish the pool's figures and the spill counts for the next sample (resident.c). */
void cgm_spill_publish(void);

/* One line of what spilling did, for the exit report: its length, 0 when off. */
int cgm_spill_report(char *buf, size_t len);

#endif /* CGM_SPILLER_H */
