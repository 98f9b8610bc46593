/*
 * Messages to the user: one line on stderr, prefixed "cgmalloc: ".
 *
 * The shim runs inside other programs and may be called from inside malloc,
 * so these helpers format into a stack buffer and write(2) it: no stdio
 * stream, no lock that a forked child could inherit held, no allocation.
 */
#ifndef CGM_LOG_H
#define CGM_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "cgm/compiler.h"

/*
 * write(2) @n bytes of @buf to @fd as the library writes its lines: the
 * raw system call (write() is a cancellation point, and a line said from
 * inside malloc must not be where a thread of the program gets
 * cancelled: cgm/nocancel.h), retried on EINTR, and without SIGPIPE -- a
 * reader of stderr that has gone (a pipe to head, a closed log pipe)
 * killed the program with it, /bin/true under stats=exit included.
 * SIGPIPE is blocked around the write, and the one it raised taken off
 * again (not one that was pending before: the program's).  Returns what
 * write(2) does; async-signal-safe.
 */
ssize_t cgm_write_quiet(int fd, const void *buf, size_t n);

/*
 * Pin stderr: from now on the library's lines go only to the file that
 * descriptor 2 is now, never into a file of the program's that took the
 * number later.  A program may close descriptor 2 and open a data file,
 * which gets number 2; a line the library said after that (memory.max's
 * OOM kill, a spill diagnostic) landed in the program's data.  Called
 * once at start-up, when accounting starts; before that, and without
 * accounting, lines go to descriptor 2.
 */
void cgm_log_pin_stderr(void);

/*
 * Keep @fd, a copy of the pinned descriptor 2 that the caller made (at a
 * high number, close-on-exec; the program may close it), as where lines
 * go once descriptor 2 is no longer the pinned file: for a program that
 * closes its stderr before the library is done (stats=exit's report).
 * (The caller makes the copy: this file is linked alone into tests.)
 */
void cgm_log_keep_stderr_copy(int fd);

/*
 * Where a line of the library's goes now: 2 while it is the pinned file
 * (or nothing was pinned), else the copy while that still is, else -1:
 * nowhere -- also when descriptor 2 was closed at start-up.  An fstat()
 * or two when pinned: for lines, which are rare, not for a fast path.
 */
int cgm_log_fd(void);

/*
 * Print "cgmalloc: <message>\n" to cgm_log_fd() in one write(2)
 * (cgm_write_quiet).  cgm_log(fmt, ...) and cgm_log_once(flag, fmt, ...)
 * take a string literal as @fmt: it is checked against the arguments as
 * printf's is, and stored in a section of its own, .cgm_msg, which the
 * library's linker script puts among the cold read-only data
 * (scripts/lib-ld-script).  A process reads a message's text only when it
 * says it; among the read-only data that every process maps whole (the
 * first segment, a fault-around window of its own), the messages were
 * most of what was left.
 */
#define cgm_log(fmt, ...)	cgm_log_text(CGM_MSG(fmt, ##__VA_ARGS__), ##__VA_ARGS__)
#define cgm_log_once(flag, fmt, ...)						\
	cgm_log_once_text(flag, CGM_MSG(fmt, ##__VA_ARGS__), ##__VA_ARGS__)
/* Literal @lit, stored in .cgm_msg. */
#define CGM_MSG_TEXT(lit) (__extension__({					\
	static const char cgm_msg_text_[] __attribute__((section(".cgm_msg"))) = lit; \
	cgm_msg_text_; }))
/* Format @fmt, checked against the arguments that follow it, stored in .cgm_msg. */
#define CGM_MSG(fmt, ...)							\
	((void)sizeof(cgm_log_format_check(fmt, ##__VA_ARGS__)), CGM_MSG_TEXT(fmt))

/*
 * snprintf() into @buf of a message's text that a caller passes on (a
 * reason, said later through cgm_log's "%s"), its format a literal kept
 * with the messages' in .cgm_msg and checked in the same way.
 */
#define cgm_msg_format(buf, len, fmt, ...)					\
	cgm_msg_snprintf(buf, len, CGM_MSG(fmt, ##__VA_ARGS__), ##__VA_ARGS__)
int cgm_msg_snprintf(char *buf, size_t len, const char *fmt, ...);

/* Never defined nor called: what the compiler checks a format against. */
int cgm_log_format_check(const char *fmt, ...) CGM_PRINTF(1, 2);
/*
 * Cold: a path that says something is not the path a process takes
 * normally, and the compiler moves it out of its function (NAME.cold),
 * out of the 64 KiB of code that processes keep resident (about 550
 * bytes of that window, which had 40 left).
 */
void cgm_log_text(const char *fmt, ...) __attribute__((cold));
void cgm_vlog(const char *fmt, va_list ap) __attribute__((cold));

/*
 * Copy @in to @out (@len bytes, NUL included) as one printable line:
 * control characters become '?', bytes that are not UTF-8 "\xNN".
 * Returns the length written.  Every message of cgm_log() goes through it.
 */
size_t cgm_escape_line(const char *in, char *out, size_t len);

/*
 * The description of errno value @err, untranslated: strerror() may
 * look up a translation and allocate, which code inside malloc must not.
 */
const char *cgm_strerror(int err);

/* Like cgm_log, but only the first call with this flag prints. */
void cgm_log_once_text(int *flag, const char *fmt, ...) __attribute__((cold));

#endif /* CGM_LOG_H */
