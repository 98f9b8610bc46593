/*
 * cgmalloc: the API for programs that want to talk to the shim.
 *
 * A program runs unchanged under LD_PRELOAD=libcgmalloc.so; this header is
 * for the ones that want more: to know they run under cgmalloc, and to read
 * and write the memory.* files of their group and of the others.
 * Link with -lcgmalloc, or look the functions up with dlsym() so the
 * program still runs without the preload.
 */
#ifndef CGMALLOC_H
#define CGMALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CGMALLOC_VERSION "0.1.0"

/* The version string of the loaded library. */
const char *cgm_version(void);

/*
 * 1 once the library's constructor has run (configuration read, features
 * switched on); 0 for calls that arrive earlier.  Allocation works either
 * way.
 */
int cgm_initialized(void);

/*
 * The static keys of the library: the mode in force (patched or fallback,
 * and why), then one line per site with its offset in libcgmalloc.so, its
 * key and its current form (nop, jmp or fallback).  Writes at most @len
 * bytes into @buf; returns the length the whole report needs.
 */
size_t cgm_static_keys_report(char *buf, size_t len);

/*
 * The accounting: the memory.* files of the process's group and of any
 * other group in its hierarchy, as `cgmctl cat` and `cgmctl set` see them.
 *
 * @group is a path like "/batch/job1", or NULL for the process's own
 * group.  @file is one of a group's files (`cgmctl help files`):
 * memory.current, memory.peak, memory.max, memory.high, memory.low,
 * memory.min, memory.stat, memory.stat.local, memory.events,
 * memory.events.local, memory.oom.group, cgroup.procs, cgroup.delegate.
 * None of these functions allocates: text goes into the caller's buffer.
 *
 * Writes follow cgroup delegation: a process may set the limits of the
 * groups below its own, not of its own group or an ancestor (a limited
 * program does not lift its limit), except below a group that was
 * delegated (cgroup.delegate, written from outside); it may move
 * processes into its own group's subtree, or within a delegated group's.
 *
 * Accounting is cooperative.  The hierarchy is a file mapped into every
 * attached process: a program that can write its own memory can change
 * anything in it, its limits included, and one that clears LD_PRELOAD or
 * calls the system's allocator directly is not accounted at all.  The
 * rules above keep well-behaved programs to their limits; against hostile
 * code the boundary is the kernel's memory cgroup.
 *
 * Errors, as negative errno values:
 *	-ENODEV	accounting is off in this process (accounting=0, the
 *		hierarchy was refused, or the process has detached at exit)
 *	-EINVAL	a malformed group path, a bad value for cgm_write(), a
 *		file the root group does not have (its memory.max, ...), or
 *		a NULL argument
 *	-ENOENT	no such group, or no such file
 *	-EACCES	cgm_write() to a read-only file
 *	-EPERM	cgm_write() that delegation does not allow (above)
 *	-ESRCH	cgm_write() of cgroup.procs: no such attached process
 *	-ENOMEM	cgm_write() of cgroup.procs: the destination's memory.max
 *		cannot take the process's charge
 *	-ERANGE	the text does not fit in @len bytes (@buf then holds as
 *		much of it as fits, NUL-terminated)
 */

/* 1 if this process's allocations are charged to a group, else 0. */
int cgm_accounting_enabled(void);

/*
 * Read @file of @group into @buf (NUL-terminated, in the cgroup v2
 * format).  Statistics and usage are flushed first, so they are current.
 * Returns the length of the text, or a negative errno.  memory.stat
 * needs about 1 KiB; cgroup.procs up to 8 KiB.
 */
int cgm_read(const char *group, const char *file, char *buf, size_t len);

/*
 * Write @value to @file of @group ("512M", "max", "1", a pid), as
 * `echo value > file` would in a cgroup.  A bad value changes nothing.
 * Returns 0 or a negative errno.
 */
int cgm_write(const char *group, const char *file, const char *value);

/*
 * Return this process's freed memory to its group's usage and fold every
 * thread's counters into the hierarchy's statistics, so that other
 * processes (cgmctl) see them now rather than at their own next read.
 * Returns 0 or -ENODEV.
 */
int cgm_flush(void);

/*
 * Write the path of this process's group ("/batch/job1") into @buf.
 * Returns its length, or a negative errno.
 */
int cgm_group(char *buf, size_t len);

/*
 * A memory.pressure trigger on @group (NULL: this process's own), as a
 * write of @spec ("some 150000 1000000": stall of THRESHOLD microseconds
 * within a WINDOW of 500000..10000000 microseconds) to an open cgroup v2
 * memory.pressure file arms one.  Returns a file descriptor that becomes
 * readable (poll POLLIN; read 8 bytes: the count) each time the trigger
 * fires, at most once per window; or -EINVAL (bad spec), -ENOENT, -ENODEV
 * (accounting off), -ENOSPC (16 triggers already).  While the process has
 * triggers, one thread of the library's watches them.
 */
int cgm_pressure_trigger(const char *group, const char *spec);

/*
 * Listen for vmpressure events of @group (NULL: this process's own), as
 * cgroup v1's memory.pressure_level through cgroup.event_control: @level
 * is "low", "medium" or "critical", and the listener is told of events of
 * that level and above -- from reclaim that gets back less than 40% (medium)
 * or 5% (critical) of the pages it looks at, over windows of 512 pages, in
 * the group or below it.  Returns an eventfd (readable: the count of
 * events since the last read), or -EINVAL, -ENOENT, -ENODEV, -ENOSPC.
 * The levels are computed only while a listener exists.  Closed with
 * cgm_pressure_trigger_close().
 */
int cgm_vmpressure_listen(const char *group, const char *level);

/* Disarm the trigger or listener of @fd and close it: 0 or -EBADF. */
int cgm_pressure_trigger_close(int fd);

/*
 * spill=1: bring back every page this process spilled and stop spilling
 * in it until cgm_spill_resume().  A debugger cannot read a spilled page
 * (gdb: "Cannot access memory"); in gdb, `call (long) cgm_spill_stop()`
 * first (with the other threads free to run, gdb's default).  Says so in
 * one line on stderr.  Returns the pages brought back; 0 when nothing
 * spills in this process.
 */
long cgm_spill_stop(void);

/*
 * Let spilling start again after cgm_spill_stop() (at the next reclaim).
 * Returns 0, -ENODEV when spill=1 is not set or was refused at start-up,
 * or -EPERM once the program locked its memory (mlockall: for good).
 */
int cgm_spill_resume(void);

#ifdef __cplusplus
}
#endif

#endif /* CGMALLOC_H */
