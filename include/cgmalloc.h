/*
 * cgmalloc: the API for programs that want to talk to the shim.
 *
 * A program runs unchanged under LD_PRELOAD=libcgmalloc.so; this header is
 * for the ones that want more: to know they run under cgmalloc, and (as the
 * accounting lands) to read and write their group's memory.* files.
 * Link with -lcgmalloc, or look the functions up with dlsym() so the
 * program still runs without the preload.
 */
#ifndef CGMALLOC_H
#define CGMALLOC_H

#ifdef __cplusplus
extern "C" {
#endif

#define CGMALLOC_VERSION "0.1.0"

/* The version string of the loaded library. */
const char *cgm_version(void);

/*
 * 1 once the library's constructor has run (configuration read, features
 * switched on); 0 for calls that arrive earlier.  Allocation works either
 * way.
 */
int cgm_initialized(void);

#ifdef __cplusplus
}
#endif

#endif /* CGMALLOC_H */
