/*
 * memory.pressure triggers through the C API (tests/pressure/test_pressure.sh),
 * run preloaded in a group with a low memory.high:
 *
 *   psi_prog QUIET_GROUP
 *
 * arms "some 100000 500000" on its own group and on QUIET_GROUP, then
 * allocates until it is throttled: its own trigger's fd must become
 * readable and QUIET_GROUP's must not.  The library's watcher thread
 * exists while triggers are armed and is gone after they are closed.
 * vmpressure listeners ("low") of both groups: events come from its own
 * reclaim under memory.high, none in QUIET_GROUP.
 * Prints "psi_prog: ok NAME" per check, "psi_prog: FAIL ..." otherwise.
 */
#include <dirent.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cgmalloc.h"

static int failed;

static void check(int ok, const char *what)
{
	fprintf(stderr, "psi_prog: %s %s\n", ok ? "ok" : "FAIL", what);
	failed |= !ok;
}

static int threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	struct pollfd pfd[3];
	void *volatile keep[512] = { 0 };
	struct timespec start, now;
	int mine, quiet, vlow, vquiet, n = 0, before = threads();
	unsigned long long count = 0;

	if (argc != 2)
		return 2;
	check(cgm_pressure_trigger(NULL, "some 1 100") == -22, "bad spec refused");
	check(cgm_pressure_trigger("/no/such/group", "some 100000 500000") < 0, "missing group refused");
	check(cgm_vmpressure_listen(NULL, "severe") == -22, "bad vmpressure level refused");
	vlow = cgm_vmpressure_listen(NULL, "low");
	vquiet = cgm_vmpressure_listen(argv[1], "low");
	check(vlow >= 0 && vquiet >= 0, "vmpressure listeners");
	mine = cgm_pressure_trigger(NULL, "some 100000 500000");
	quiet = cgm_pressure_trigger(argv[1], "some 100000 500000");
	check(mine >= 0 && quiet >= 0, "armed");
	check(threads() == before + 1, "one watcher thread while armed");
	pfd[0] = (struct pollfd){ .fd = mine, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = quiet, .events = POLLIN };
	pfd[2] = (struct pollfd){ .fd = vlow, .events = POLLIN };
	clock_gettime(CLOCK_MONOTONIC, &start);
	/*
	 * Allocate and touch, round a ring, until throttled long enough for
	 * the trigger to fire and reclaim has looked at a vmpressure window
	 * (5 s at most).
	 */
	for (;;) {
		free(keep[n % 512]);
		keep[n % 512] = calloc(1, 64 << 10);
		n++;
		if (poll(pfd, 3, 0) > 0 && (pfd[0].revents & POLLIN) && (pfd[2].revents & POLLIN))
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec > 5)
			break;
	}
	check(pfd[0].revents & POLLIN, "own group's trigger fired");
	check(read(mine, &count, sizeof(count)) == sizeof(count) && count >= 1, "its count read");
	check(!(pfd[1].revents & POLLIN) && poll(&pfd[1], 1, 0) == 0, "quiet group's did not");
	/* Reclaim under memory.high raised vmpressure events here, none in the quiet group. */
	check(pfd[2].revents & POLLIN, "vmpressure event in own group");
	check(poll(&(struct pollfd){ .fd = vquiet, .events = POLLIN }, 1, 0) == 0,
	      "no vmpressure event in the quiet group");
	check(cgm_pressure_trigger_close(vlow) == 0 && cgm_pressure_trigger_close(vquiet) == 0,
	      "vmpressure listeners closed");
	check(cgm_pressure_trigger_close(mine) == 0 && cgm_pressure_trigger_close(quiet) == 0,
	      "closed");
	check(cgm_pressure_trigger_close(mine) == -9, "closed twice refused");
	/* The watcher leaves at its next look (a period: 50 ms). */
	for (int i = 0; i < 100 && threads() != before; i++)
		usleep(10000);
	check(threads() == before, "watcher gone with the triggers");
	if (!failed)
		fprintf(stderr, "psi_prog: done\n");
	return failed;
}
