/*
 * The monotonic clock in nanoseconds, for intervals (throttle stalls, the
 * time a move kept its key on).
 */
#ifndef CGM_CLOCK_H
#define CGM_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t cgm_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif /* CGM_CLOCK_H */
