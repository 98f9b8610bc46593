/*
 * cgmctl compare: what the sampling (compare.c) hands to the report
 * (compare_report.c) -- the series sampled, the samples taken, and the
 * run they were taken from.
 */
#ifndef CGMCTL_COMPARE_H
#define CGMCTL_COMPARE_H

#include "cgmctl.h"

/* The series a sample holds: the columns of samples.tsv, the rows of the report. */
enum { KERNEL_ANON, KERNEL_USAGE, CGM_CURRENT, CGM_STAT0, NR_SERIES = CGM_STAT0 + 3 };

struct compare_series {
	const char *name;
	const char *stat;	/* the key in cgmalloc's memory.stat, for CGM_STAT0 on */
};

/* Indexed by the enum above; defined in compare.c. */
extern const struct compare_series compare_series[NR_SERIES];

struct sample {
	uint64_t ms;		/* since the fork */
	uint64_t v[NR_SERIES];
};

struct compare {
	struct ctl *c;
	struct kcg k;
	char kpath[PATH_MAX];		/* k.dir, kept for the report */
	char group[CGM_PATH_MAX];
	bool created;			/* the group is compare's to remove */
	bool shown[NR_SERIES];		/* this build's memory.stat has the key */
	bool failed;			/* compare itself failed: exit CTL_FAIL */
	unsigned int interval_ms;
	const char *outdir;
	char **cmd;
	struct sample *s;
	size_t n, cap;
};

/*
 * Report on the samples of @m, taken from a command that ended with
 * @status: the summary (peak and mean of each series, cgmalloc's charge
 * over the kernel's at the peak and as a median) on stdout, as JSON if
 * m->c->json, else as text; with an output directory also
 * DIR/samples.tsv, DIR/plot.gp and DIR/plot.png.  Returns 0, or -1 after
 * saying that samples.tsv could not be written; a plot that could not be
 * drawn is only said.  @m's samples are left for the caller to free.
 */
int compare_report(const struct compare *m, int status);

#endif /* CGMCTL_COMPARE_H */
