/*
 * The /proc/self files a sample reads, kept open while the process spills
 * (shim/self_proc.c says why).
 */
#ifndef CGM_SELF_PROC_H
#define CGM_SELF_PROC_H

#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

enum cgm_self_file { CGM_SELF_STATM, CGM_SELF_PAGEMAP, CGM_SELF_NUMA_MAPS, CGM_SELF_FILES };

/* pid << 32 | descriptor of each file kept open; 0: none. */
extern uint64_t cgm_self_kept_word[CGM_SELF_FILES];

/*
 * This process's file @f kept open, or -1: none is (the process does not
 * spill, or has not spilled yet), or it is the parent's of a vfork() child
 * -- the caller then opens the file for the while, as before.  Inline, as
 * its callers are on every process's sample path (shim/hot-text.ld): a
 * process that never spilled loads one word.
 */
static inline int cgm_self_kept(enum cgm_self_file f)
{
	uint64_t w = __atomic_load_n(&cgm_self_kept_word[f], __ATOMIC_ACQUIRE);

	if (!w || w >> 32 != (uint32_t)syscall(SYS_getpid))
		return -1;
	return (int)(uint32_t)w;
}

/* Open and keep those files not kept yet: as spilling starts in this process. */
void cgm_self_keep_open(void);

/* In a forked child, alone: close the parent's (the child opens its own as it starts spilling). */
void cgm_self_kept_fork_child(void);

#endif
