/*
 * The library's cold imports are bound lazily, at their first call
 * (the Makefile says which files and why).  With spill=1 they are all
 * bound at once before the first page can spill (shim/bind_now.c).
 */
#ifndef CGM_BIND_NOW_H
#define CGM_BIND_NOW_H

struct cgm_bind_count {
	int slots;	/* lazily bound functions (JUMP_SLOT relocations) */
	int bound;	/* of them, bound by this call */
	int failed;	/* of them, that dlsym could not find */
};

/*
 * Bind every lazily bound function of libcgmalloc.so now, as LD_BIND_NOW
 * would have at start-up: the resolver that binds one at its first call
 * reads the dynamic loader's tables, which live partly in the heap (the
 * link maps and the global scope of what dlopen loaded), and a heap page
 * may be spilled.  A resolver run in the fault handler, or by a thread
 * holding a lock the handler needs, would then wait on itself.
 *
 * Call it with no lock held, outside malloc (dlsym may allocate).
 * Returns 0 and fills @out, or -1 when the library's dynamic section
 * cannot be read (an architecture without support here), after one line
 * on stderr.  Slots whose current value is already the right one are
 * not written.
 */
int cgm_bind_now(struct cgm_bind_count *out);

/*
 * How many lazy slots do not yet hold the function they would be bound
 * to (what cgm_bind_now() would write), or -1 as it would fail.  For the
 * tests.
 */
int cgm_bind_pending(void);

#endif /* CGM_BIND_NOW_H */
