/*
 * A library linked for lazy binding, like libcgmalloc.so, with
 * shim/bind_now.c in it: tests/test_bind_now.c binds its slots at once.
 * Its two functions call libc functions nothing else here calls, so
 * their slots stay unbound until they are called or bound.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "bind_lib.h"

pid_t bind_lib_getppid(void)
{
	return getppid();
}

mode_t bind_lib_umask(mode_t mask)
{
	return umask(mask);
}
