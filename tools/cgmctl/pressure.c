/*
 * cgmctl pressure GROUP [SPEC] [-n N] [-t SECS]: without SPEC, the
 * group's memory.pressure; with a trigger SPEC ("some 150000 1000000",
 * the kernel's format and rules), wait for it to fire and print one line
 * each time it does ("some 150000 1000000 fired: total=... us") -- what
 * a policy that poll()s a cgroup v2 memory.pressure file gets, from the
 * shell.  Stops after N firings (1) or SECS seconds (exit status 1 if it
 * never fired).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cgm/acct.h"
#include "cgm/clock.h"
#include "cgm/files.h"
#include "cgmctl.h"

static int show(struct ctl *c, uint32_t idx)
{
	char buf[256];
	int n = cgm_file_read(&c->h, idx, "memory.pressure", buf, sizeof(buf));

	if (n < 0) {
		ctl_err("pressure: %s", strerror(-n));
		return CTL_FAIL;
	}
	fputs(buf, stdout);
	return CTL_OK;
}

int cmd_pressure(struct ctl *c, int argc, char **argv)
{
	struct psi_trigger trig;
	long count = 1, fired = 0;
	double secs = 0;
	int64_t deadline = 0;
	char why[160];
	uint32_t idx;
	int opt, st;

	while ((opt = ctl_getopt(c, argc, argv, "n:t:")) != -1) {
		char *end;

		errno = 0;
		if (opt == 'n') {
			count = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || count < 1) {
				ctl_err("pressure: bad value '%s' for -n (expected 1 or more)", optarg);
				return CTL_USAGE;
			}
		} else if (opt == 't') {
			secs = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(secs > 0 && secs <= 86400)) {
				ctl_err("pressure: bad value '%s' for -t (expected seconds, up to 86400)",
					optarg);
				return CTL_USAGE;
			}
		} else {
			return CTL_USAGE;
		}
	}
	if (argc - optind < 1 || argc - optind > 2) {
		ctl_err("pressure: expected 1 or 2 arguments (usage: cgmctl pressure GROUP "
			"[\"some|full THRESHOLD_US WINDOW_US\"] [-n N] [-t SECS])");
		return CTL_USAGE;
	}
	if (argc - optind == 2 && psi_trigger_parse(argv[optind + 1], &trig, why, sizeof(why)) < 0) {
		ctl_err("pressure: %s", why);
		return CTL_USAGE;
	}
	st = ctl_open_group(c, argv[optind], &idx);
	if (st != CTL_OK)
		return st;
	if (argc - optind == 1) {
		st = show(c, idx);
		ctl_close(c);
		return st;
	}
	if (secs > 0)
		deadline = cgm_now_ns() + (int64_t)(secs * 1e9);
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fired < count && (!deadline || cgm_now_ns() < deadline)) {
		int64_t period = psi_trigger_period_ns(&trig);
		struct timespec ts = { (time_t)(period / 1000000000), (long)(period % 1000000000) };

		if (!hier_group(&c->h, idx)) {
			ctl_err("pressure: group %s is gone", argv[optind]);
			ctl_close(c);
			return CTL_FAIL;
		}
		if (psi_trigger_poll(&c->h, idx, &trig, cgm_now_ns())) {
			struct cgm_psi_view v;

			psi_totals_now(&c->h, idx, cgm_now_ns(), &v);
			printf("%s fired: total=%" PRId64 " us\n", argv[optind + 1],
			       v.total[trig.kind] / 1000);
			fired++;
			continue;
		}
		nanosleep(&ts, NULL);
	}
	ctl_close(c);
	return fired ? CTL_OK : CTL_FAIL;
}
