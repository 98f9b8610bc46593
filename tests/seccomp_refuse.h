/*
 * Make one system call fail in the calling process from now on, as a
 * seccomp sandbox may refuse it: for tests of what the library does when
 * the kernel says no.  Sets no_new_privs (a filter needs it unprivileged).
 */
#ifndef TESTS_SECCOMP_REFUSE_H
#define TESTS_SECCOMP_REFUSE_H

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>

/* System call @nr fails with @err from now on; 0, or -errno if the filter could not be set. */
static inline int seccomp_refuse(long nr, int err)
{
	struct sock_filter insns[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned int)nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned int)err & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(insns) / sizeof(insns[0]), .filter = insns };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) ? -errno : 0;
}

#endif
