/*
 * Descriptors the library keeps open for itself inside the program: the
 * spill engine's userfaultfds, its stop eventfd, its CPU latency request,
 * /proc/self/pagemap, the pool's backing file.
 *
 * A program may close every descriptor it did not open (close_range(3,
 * ~0U), closefrom(3), a loop of close()).  A userfaultfd that goes takes
 * its registrations with it, and the spilled pages then read as zeros;
 * a number that the program reuses would have the library's writes land
 * in the program's file.  So each such descriptor is moved to a high
 * number, out of the way of the lowest-free rule that open() follows, and
 * registered here; the shim's close(), close_range() and closefrom()
 * (shim/fd_guard.c) leave registered descriptors open -- in the process
 * that registered them: a vfork() child's copies are its own to close.
 *
 * Async-signal-safe and free of malloc: close() may be called anywhere.
 */
#ifndef CGM_OWN_FDS_H
#define CGM_OWN_FDS_H

#include <stdbool.h>

/* At most this many are registered at once; more are kept where they are, unguarded. */
#define CGM_OWN_FDS_MAX 16

/*
 * Move @fd to a high number (close-on-exec) and register it.  Returns the
 * descriptor to use from now on: the new one, or @fd itself when it cannot
 * be moved (it is registered all the same).  @fd < 0 is returned as is.
 */
int cgm_fd_keep(int fd);

/*
 * Move @fd to a high number (close-on-exec) without registering it: a
 * descriptor of the library's that the program may close (the engine
 * notes its identity and checks it before use) but that must not take
 * the low number the program's next open() expects.  Returns the
 * descriptor to use: @fd itself when it cannot be moved.
 */
int cgm_fd_move_high(int fd);

/* Unregister @fd and close it (the real close, not the guarded one). */
void cgm_fd_close(int fd);

/* Unregister @fd without closing it: the number is no longer ours. */
void cgm_fd_forget(int fd);

/* Is @fd registered? */
bool cgm_fd_kept(int fd);

/* The lowest registered descriptor >= @from, or -1. */
int cgm_fd_kept_from(unsigned int from);

/* How many are registered (0: the guards have nothing to do). */
unsigned int cgm_fd_kept_count(void);

#endif /* CGM_OWN_FDS_H */
