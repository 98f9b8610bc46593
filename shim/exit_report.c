/*
 * stats=exit: the group's memory.stat and memory.events at exit, to
 * stderr or to stats_file=.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cgm/accounted.h"
#include "cgm/files.h"
#include "cgm/log.h"
#include "cgm/shim.h"
#include "cgm/spiller.h"

void cgm_exit_report(void)
{
	CGM_BIG_BSS static char buf[16384];
	struct cgm_proc *p = hier_proc(&cgm_acct.h, cgm_acct.proc);
	static const char *const files[] = { "memory.current", "memory.peak",
					     "memory.stat", "memory.events" };
	char path[CGM_PATH_MAX];
	size_t n = 0;
	int fd = STDERR_FILENO;

	if (!p)
		return;
	/* What the handler thread brought back since the last sample. */
	cgm_spill_publish();
	rstat_flush(&cgm_acct.h);
	group_path(&cgm_acct.h, p->group, path, sizeof(path));
	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "cgmalloc: exit report of pid %d, group %s\n",
			      (int)getpid(), path);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]) && n < sizeof(buf); i++) {
		int len;

		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "== %s\n", files[i]);
		len = cgm_file_read(&cgm_acct.h, p->group, files[i], buf + n, sizeof(buf) - n);
		if (len > 0)
			n += (size_t)len < sizeof(buf) - n ? (size_t)len : sizeof(buf) - n - 1;
	}
	if (n < sizeof(buf)) {
		int len = cgm_spill_report(buf + n, sizeof(buf) - n);

		if (len > 0)
			n += (size_t)len < sizeof(buf) - n ? (size_t)len : sizeof(buf) - n - 1;
	}
	if (cgm_conf.stats_file[0]) {
		fd = open(cgm_conf.stats_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0) {
			cgm_log("stats_file: cannot open %s (%s); the report goes to stderr",
				cgm_conf.stats_file, cgm_strerror(errno));
			fd = STDERR_FILENO;
		}
	}
	if (write(fd, buf, n) < 0)
		cgm_log("stats: cannot write the exit report to %s: %s",
			fd == STDERR_FILENO ? "stderr" : cgm_conf.stats_file, cgm_strerror(errno));
	if (fd != STDERR_FILENO)
		close(fd);
}
