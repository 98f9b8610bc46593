/* tests/bind_lib.c: a lazily bound library for tests/test_bind_now.c. */
#ifndef CGM_TEST_BIND_LIB_H
#define CGM_TEST_BIND_LIB_H

#include <sys/types.h>

pid_t bind_lib_getppid(void);
mode_t bind_lib_umask(mode_t mask);

#endif /* CGM_TEST_BIND_LIB_H */
