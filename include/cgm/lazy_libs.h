/*
 * The spill pool's libraries -- liblz4, libzstd, liburing -- loaded by
 * libcgmalloc.so with dlopen when spilling starts (shim/lazy_libs.c),
 * not by the dynamic loader when the program starts.
 */
#ifndef CGM_LAZY_LIBS_H
#define CGM_LAZY_LIBS_H

/*
 * Load the three libraries and find every function zpool/ calls in them.
 * Call it before the first pool is created, from the constructor: dlopen
 * allocates and takes the loader's lock, so never from a malloc path or
 * the fault handler.  Callers serialise; a second call after a success
 * returns 0 at once.
 *
 * Returns 0, or -ENOENT when a library or one of its functions is
 * missing, after one line on stderr that names it and says spill=1 is
 * refused.  The libraries stay loaded for the life of the process.
 */
int cgm_lazy_libs_load(void);

#endif /* CGM_LAZY_LIBS_H */
