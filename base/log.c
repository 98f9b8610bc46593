/*
 * One-line diagnostics to stderr that are safe inside malloc.
 *
 * vsnprintf into a stack buffer does not allocate for the plain %s/%d/%zu
 * conversions used here; the line goes out in a single write(2) so that
 * lines of concurrent threads or processes do not interleave.  Whatever a
 * message quotes (a value from the environment, a file name) cannot break
 * the line or drive a terminal: control characters become '?' and bytes
 * that are not UTF-8 become \xNN.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgm/log.h"

/* How many bytes of valid UTF-8 start at @s (0: not a valid sequence). */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t n;

	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	/* No overlong forms, no surrogates, nothing above U+10FFFF. */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

size_t cgm_escape_line(const char *in, char *out, size_t len)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t n = 0;

	if (len == 0)
		return 0;
	while (*s && n + 1 < len) {
		size_t u = *s >= 0x80 ? utf8_len(s) : 0;

		if (u) {
			if (n + u >= len)
				break;
			memcpy(out + n, s, u);
			n += u;
			s += u;
		} else if (*s >= 0x80) {
			if (n + 4 >= len)
				break;
			n += (size_t)snprintf(out + n, len - n, "\\x%02x", *s++);
		} else {
			out[n++] = *s < 0x20 || *s == 0x7f ? '?' : (char)*s;
			s++;
		}
	}
	out[n] = '\0';
	return n;
}

ssize_t cgm_write_quiet(int fd, const void *buf, size_t n)
{
	/* The kernel's sigset is 8 bytes: glibc's sigset_t begins with it. */
	const size_t kset = 8;
	sigset_t pipe_set, old, pending;
	struct timespec no_wait = { 0, 0 };
	bool blocked, was_pending;
	long r;
	int err;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	sigemptyset(&pending);
	/* (Should the mask not change, the write goes as it did before.) */
	blocked = syscall(SYS_rt_sigprocmask, SIG_BLOCK, &pipe_set, &old, kset) == 0;
	was_pending = blocked && syscall(SYS_rt_sigpending, &pending, kset) == 0 &&
		      sigismember(&pending, SIGPIPE);
	while ((r = syscall(SYS_write, fd, buf, n)) < 0 && errno == EINTR)
		;
	err = errno;
	/* The SIGPIPE this write raised (thread-directed, blocked): taken off before the mask goes back. */
	if (blocked && r < 0 && err == EPIPE && !was_pending)
		syscall(SYS_rt_sigtimedwait, &pipe_set, NULL, &no_wait, kset);
	if (blocked)
		syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, kset);
	errno = err;
	return r;
}

/*
 * The stderr the program started with, once the library pinned it
 * (cgm_log_pin_stderr): its identity, whether descriptor 2 was open at
 * all, and a copy (-1: none kept).  Written once, when accounting starts
 * (usually before the program has threads; the flag is published last).
 */
static bool err_pinned, err_was_open;
static dev_t err_dev;
static ino_t err_ino;
static int err_copy = -1;

/* Is @fd the file descriptor 2 was at start-up? */
static bool is_start_stderr(int fd)
{
	struct stat st;

	return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == err_dev && st.st_ino == err_ino;
}

void cgm_log_pin_stderr(void)
{
	struct stat st;

	if (__atomic_load_n(&err_pinned, __ATOMIC_ACQUIRE))
		return;
	err_was_open = fstat(STDERR_FILENO, &st) == 0;
	if (err_was_open) {
		err_dev = st.st_dev;
		err_ino = st.st_ino;
	}
	/* A thread that logs now sees the identity with the flag. */
	__atomic_store_n(&err_pinned, true, __ATOMIC_RELEASE);
}

void cgm_log_keep_stderr_copy(int fd)
{
	if (err_copy < 0)
		err_copy = fd;
}

int cgm_log_fd(void)
{
	if (!__atomic_load_n(&err_pinned, __ATOMIC_ACQUIRE))
		return STDERR_FILENO;
	if (!err_was_open)
		return -1;
	if (is_start_stderr(STDERR_FILENO))
		return STDERR_FILENO;
	if (is_start_stderr(err_copy))
		return err_copy;
	return -1;
}

void cgm_vlog(const char *fmt, va_list ap)
{
	char raw[1024], buf[1024];
	int saved_errno = errno, fd;
	size_t n = sizeof("cgmalloc: ") - 1;

	if (vsnprintf(raw, sizeof(raw), fmt, ap) < 0)
		raw[0] = '\0';
	memcpy(buf, "cgmalloc: ", n);
	n += cgm_escape_line(raw, buf + n, sizeof(buf) - n - 1);
	buf[n++] = '\n';
	/*
	 * Best effort: nothing useful can be done if stderr is gone, and a
	 * line said to a pipe whose reader has gone must not kill the program
	 * (cgm_write_quiet: no SIGPIPE).
	 */
	fd = cgm_log_fd();
	if (fd >= 0)
		cgm_write_quiet(fd, buf, n);
	errno = saved_errno;
}

void cgm_log_text(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cgm_vlog(fmt, ap);
	va_end(ap);
}

int cgm_msg_snprintf(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return n;
}

void cgm_log_once_text(int *flag, const char *fmt, ...)
{
	va_list ap;

	if (__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED))
		return;
	va_start(ap, fmt);
	cgm_vlog(fmt, ap);
	va_end(ap);
}

const char *cgm_strerror(int err)
{
	const char *s = strerrordesc_np(err);

	return s ? s : "unknown error";
}
