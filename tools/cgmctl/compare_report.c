/*
 * cgmctl compare's report: from the samples compare.c took, the summary
 * it prints (peak and mean of each series; cgmalloc's charge over the
 * kernel's, at the peak and as a median) as text or JSON, and in the
 * output directory the samples as a table and a gnuplot plot of them.
 */
#include <errno.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cgm/log.h"
#include "compare.h"

#define MIB (1024.0 * 1024.0)

struct summary {
	uint64_t peak[NR_SERIES];
	double mean[NR_SERIES];
	double ratio_peak, ratio_median;	/* < 0: no kernel figure to divide by */
	size_t ratio_n;
};

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void summarize(const struct compare *m, struct summary *sum)
{
	double *ratios = malloc((m->n ? m->n : 1) * sizeof(*ratios));
	double total[NR_SERIES] = { 0 };

	memset(sum, 0, sizeof(*sum));
	for (size_t i = 0; i < m->n; i++) {
		const uint64_t *v = m->s[i].v;

		for (int j = 0; j < NR_SERIES; j++) {
			if (v[j] > sum->peak[j])
				sum->peak[j] = v[j];
			total[j] += (double)v[j];
		}
		/* Below 1 MiB the command is still starting: a ratio of small numbers. */
		if (ratios && v[KERNEL_ANON] >= (1u << 20))
			ratios[sum->ratio_n++] = (double)v[CGM_CURRENT] / (double)v[KERNEL_ANON];
	}
	for (int j = 0; j < NR_SERIES; j++)
		sum->mean[j] = m->n ? total[j] / (double)m->n : 0;
	sum->ratio_peak = sum->peak[KERNEL_ANON] ?
		(double)sum->peak[CGM_CURRENT] / (double)sum->peak[KERNEL_ANON] : -1;
	sum->ratio_median = -1;
	if (sum->ratio_n) {
		size_t k = sum->ratio_n / 2;

		qsort(ratios, sum->ratio_n, sizeof(*ratios), by_value);
		sum->ratio_median = sum->ratio_n % 2 ? ratios[k] : (ratios[k - 1] + ratios[k]) / 2;
	}
	free(ratios);
}

static const char *ratio_text(double r, char *buf, size_t len, const char *none)
{
	if (r < 0)
		return none;
	snprintf(buf, len, "%.3f", r);
	return buf;
}

static void print_text(const struct compare *m, const struct summary *sum, int status)
{
	uint64_t ms = m->n ? m->s[m->n - 1].ms : 0;
	char buf[1024];

	fputs("command        ", stdout);
	for (char **a = m->cmd; *a; a++) {
		cgm_escape_line(*a, buf, sizeof(buf));
		printf("%s%s", a == m->cmd ? "" : " ", buf);
	}
	printf("\nkernel_cgroup  %s (cgroup v%d)\n", m->kpath, m->k.version);
	printf("cgmalloc_group %s (%s)\n", m->group, m->c->path);
	printf("samples        %zu (every %u ms over %.2f s)\n", m->n, m->interval_ms,
	       (double)ms / 1000);
	printf("status         %d\n\n", status);
	printf("%-16s %10s %10s\n", "series", "peak_MiB", "mean_MiB");
	for (int j = 0; j < NR_SERIES; j++)
		if (m->shown[j])
			printf("%-16s %10.2f %10.2f\n", compare_series[j].name,
			       (double)sum->peak[j] / MIB, sum->mean[j] / MIB);
	printf("\nratio_at_peak  %s (peak cgm_current / peak kernel_anon)\n",
	       ratio_text(sum->ratio_peak, buf, sizeof(buf), "-"));
	printf("ratio_median   %s (cgm_current / kernel_anon over %zu samples with kernel_anon >= 1 MiB)\n",
	       ratio_text(sum->ratio_median, buf, sizeof(buf), "-"), sum->ratio_n);
}

static void print_json(const struct compare *m, const struct summary *sum, int status)
{
	char buf[32];

	fputs("{\"command\": [", stdout);
	for (char **a = m->cmd; *a; a++) {
		fputs(a == m->cmd ? "" : ", ", stdout);
		json_string(stdout, *a);
	}
	fputs("], \"kernel_cgroup\": ", stdout);
	json_string(stdout, m->kpath);
	printf(", \"cgroup_version\": %d, \"group\": ", m->k.version);
	json_string(stdout, m->group);
	fputs(", \"hierarchy\": ", stdout);
	json_string(stdout, m->c->path);
	printf(", \"interval_ms\": %u, \"samples\": %zu, \"duration_ms\": %" PRIu64
	       ", \"status\": %d", m->interval_ms, m->n, m->n ? m->s[m->n - 1].ms : 0, status);
	for (int pass = 0; pass < 2; pass++) {
		printf(", \"%s\": {", pass ? "mean_bytes" : "peak_bytes");
		for (int j = 0, first = 1; j < NR_SERIES; j++) {
			if (!m->shown[j])
				continue;
			printf("%s\"%s\": ", first ? "" : ", ", compare_series[j].name);
			if (pass)
				printf("%.0f", sum->mean[j]);
			else
				printf("%" PRIu64, sum->peak[j]);
			first = 0;
		}
		putchar('}');
	}
	printf(", \"ratio_at_peak\": %s", ratio_text(sum->ratio_peak, buf, sizeof(buf), "null"));
	printf(", \"ratio_median\": %s, \"ratio_samples\": %zu}\n",
	       ratio_text(sum->ratio_median, buf, sizeof(buf), "null"), sum->ratio_n);
}

/* A string in gnuplot's single quotes, where '' is a quote; one line. */
static void gp_string(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++)
		if (*s == '\'')
			fputs("''", f);
		else
			fputc((unsigned char)*s < 0x20 ? ' ' : *s, f);
	fputc('\'', f);
}

/* Open @name in the output directory for writing; NULL after saying why. */
static FILE *open_output(const struct compare *m, const char *name, char *path, size_t len)
{
	FILE *f;

	snprintf(path, len, "%s/%s", m->outdir, name);
	f = fopen(path, "we");
	if (!f)
		ctl_err("compare: cannot write %s: %s", path, strerror(errno));
	return f;
}

static int close_output(FILE *f, const char *path)
{
	bool bad = ferror(f);

	if (fclose(f) == 0 && !bad)
		return 0;
	ctl_err("compare: cannot write %s", path);
	return -1;
}

/* DIR/samples.tsv: a header line, then a row of bytes per sample. */
static int write_tsv(const struct compare *m)
{
	char path[4096];
	FILE *f = open_output(m, "samples.tsv", path, sizeof(path));

	if (!f)
		return -1;
	fputs("time_ms", f);
	for (int j = 0; j < NR_SERIES; j++)
		if (m->shown[j])
			fprintf(f, "\t%s", compare_series[j].name);
	fputc('\n', f);
	for (size_t i = 0; i < m->n; i++) {
		fprintf(f, "%" PRIu64, m->s[i].ms);
		for (int j = 0; j < NR_SERIES; j++)
			if (m->shown[j])
				fprintf(f, "\t%" PRIu64, m->s[i].v[j]);
		fputc('\n', f);
	}
	return close_output(f, path);
}

/*
 * DIR/plot.gp, and DIR/plot.png drawn from it by gnuplot run in DIR: the
 * script names its files relatively, so that it redraws the plot by hand
 * wherever DIR is moved.  A missing or failing gnuplot costs the plot
 * only.
 */
static void write_plot(const struct compare *m)
{
	char *argv[] = { "gnuplot", "plot.gp", NULL };
	posix_spawn_file_actions_t fa;
	char path[4096];
	FILE *f = open_output(m, "plot.gp", path, sizeof(path));
	int col = 2, err, ws;
	pid_t pid;

	if (!f)
		return;
	fputs("# cgmctl compare: `gnuplot plot.gp` in this directory redraws plot.png\n"
	      "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
	      "    set terminal pngcairo size 960,540\n"
	      "} else {\n"
	      "    set terminal png size 960,540\n"
	      "}\n"
	      "set output 'plot.png'\n"
	      "set datafile separator tab\n"
	      "set datafile columnheaders\n"
	      "set title ", f);
	gp_string(f, m->cmd[0]);
	fputs(" noenhanced\n"
	      "set xlabel 'seconds'\n"
	      "set ylabel 'MiB'\n"
	      "set grid\n"
	      "set key top left Left reverse noenhanced\n"
	      "plot", f);
	/* The kernel's lines solid, cgmalloc's dashed: where they agree, both show. */
	for (int j = 0; j < NR_SERIES; j++) {
		if (!m->shown[j])
			continue;
		fprintf(f, "%s'%s' using ($1/1000):($%d/1048576) with lines lw %d dt %d title '%s'",
			col == 2 ? " " : ", \\\n    ", col == 2 ? "samples.tsv" : "", col,
			j < CGM_CURRENT ? 3 : 2, j < CGM_CURRENT ? 1 : 2, compare_series[j].name);
		col++;
	}
	fputc('\n', f);
	if (close_output(f, path) < 0)
		return;
	if (posix_spawn_file_actions_init(&fa) != 0)
		return;
	err = posix_spawn_file_actions_addchdir_np(&fa, m->outdir);
	if (!err)
		err = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (err == ENOENT)
		ctl_err("compare: gnuplot is not on PATH: no plot.png (Debian: gnuplot-nox)");
	else if (err)
		ctl_err("compare: cannot run gnuplot: %s", strerror(err));
	else if (waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
		ctl_err("compare: gnuplot failed: no plot.png (the script is %s)", path);
}

int compare_report(const struct compare *m, int status)
{
	struct summary sum;

	summarize(m, &sum);
	if (m->c->json)
		print_json(m, &sum, status);
	else
		print_text(m, &sum, status);
	if (!m->outdir)
		return 0;
	if (write_tsv(m) < 0)
		return -1;
	write_plot(m);
	return 0;
}
