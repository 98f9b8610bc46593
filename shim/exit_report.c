/*
 * stats=exit: the group's memory.stat and memory.events at exit, to
 * stderr or to stats_file= (%p in it: the pid).
 *
 * "stderr" is the file descriptor 2 was when the program started.  Many
 * programs close it on their way out -- every coreutils program (sort's
 * close_stdout closes stderr too), mawk, xz -- before the library's exit
 * handler runs, which was registered first and so runs last: the report
 * went nowhere, without a word.  And a program that closed descriptor 2
 * and then opened a file of its own got that number, and the report
 * would have gone into its file.  So with stats=exit (and no stats_file)
 * the library keeps a copy of descriptor 2 from the start, at a high
 * number and close-on-exec (base/own_fds.c), and at exit writes to
 * descriptor 2 if it is still the same file, else to the copy if that is
 * (a program that closed every descriptor may have reused its number
 * too), else nowhere.  The identity and the copy are base/log.c's: the
 * library's other lines follow the same rule.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cgm/accounted.h"
#include "cgm/files.h"
#include "cgm/log.h"
#include "cgm/own_fds.h"
#include "cgm/shim.h"
#include "cgm/spiller.h"

void cgm_exit_report_prepare(void)
{
	/* After cgm_log_pin_stderr(): the copy is of the pinned file. */
	if (cgm_conf.stats == CGM_STATS_EXIT && !cgm_conf.stats_file[0] &&
	    cgm_log_fd() == STDERR_FILENO)
		cgm_log_keep_stderr_copy(cgm_fd_move_high(fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 0)));
}

/*
 * stats_file with each %p replaced by the process's pid, and %% by %, into
 * @out: a run of several processes (a shell and what it starts, make -j)
 * then writes a report each, where one name had the last of them to exit
 * overwrite the others' (the program's own report lost under its shell's
 * or timeout's).  False if the name does not fit.
 */
static bool stats_path(char *out, size_t len)
{
	size_t n = 0;

	for (const char *s = cgm_conf.stats_file; *s; s++) {
		char pid[24];
		const char *add = s;
		size_t k = 1;

		if (s[0] == '%' && s[1] == 'p') {
			k = (size_t)snprintf(pid, sizeof(pid), "%d", (int)getpid());
			add = pid;
			s++;
		} else if (s[0] == '%' && s[1] == '%') {
			add = ++s;
		}
		if (n + k >= len)
			return false;
		memcpy(out + n, add, k);
		n += k;
	}
	out[n] = '\0';
	return true;
}

void cgm_exit_report(void)
{
	CGM_BIG_BSS static char buf[16384];
	struct cgm_proc *p = hier_proc(&cgm_acct.h, cgm_acct.proc);
	static const char *const files[] = { "memory.current", "memory.peak",
					     "memory.stat", "memory.events" };
	char path[CGM_PATH_MAX], file[CGM_CONF_STR_MAX + 32];
	size_t n = 0;
	bool opened;
	int fd = -1;

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
		if (!stats_path(file, sizeof(file)))
			cgm_log("stats_file: %s with %%p expanded is too long; the report goes to "
				"stderr", cgm_conf.stats_file);
		else if ((fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
			cgm_log("stats_file: cannot open %s (%s); the report goes to stderr",
				file, cgm_strerror(errno));
	}
	opened = fd >= 0;
	/* -1: nowhere -- whatever has number 2 now is the program's. */
	if (!opened && (fd = cgm_log_fd()) < 0)
		return;
	/*
	 * (Not said when writing to the copy failed: the line would go
	 * there too.)
	 */
	if (cgm_write_quiet(fd, buf, n) < 0 && (opened || fd == STDERR_FILENO))
		cgm_log("stats: cannot write the exit report to %s: %s",
			opened ? file : "stderr", cgm_strerror(errno));
	if (opened)
		close(fd);
}
