/*
 * One-line diagnostics to stderr that are safe inside malloc.
 *
 * vsnprintf into a stack buffer does not allocate for the plain %s/%d/%zu
 * conversions used here; the line goes out in a single write(2) so that
 * lines of concurrent threads or processes do not interleave.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cgm/log.h"

void cgm_vlog(const char *fmt, va_list ap)
{
	char buf[1024];
	int saved_errno = errno;
	size_t n = sizeof("cgmalloc: ") - 1;
	int len;

	memcpy(buf, "cgmalloc: ", n);
	len = vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
	if (len < 0)
		len = 0;
	n += (size_t)len < sizeof(buf) - n - 1 ? (size_t)len : sizeof(buf) - n - 2;
	buf[n++] = '\n';
	/* Best effort: nothing useful can be done if stderr is gone. */
	while (write(STDERR_FILENO, buf, n) < 0 && errno == EINTR)
		;
	errno = saved_errno;
}

void cgm_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cgm_vlog(fmt, ap);
	va_end(ap);
}

void cgm_log_once(int *flag, const char *fmt, ...)
{
	va_list ap;

	if (__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED))
		return;
	va_start(ap, fmt);
	cgm_vlog(fmt, ap);
	va_end(ap);
}
