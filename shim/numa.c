/*
 * The split of a process's anon between NUMA nodes, for memory.numa_stat.
 * On a machine with one node there is nothing to look at.  With more,
 * /proc/self/numa_maps gives, for each mapping with anonymous pages
 * ("anon=N"), its pages per node ("N0=x N1=y"): the anon of the sample is
 * divided in the same shares.  Read in the slow path of a sample, without
 * malloc or stdio.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "cgm/acct.h"
#include "cgm/mul_div.h"
#include "cgm/self_proc.h"
#include "cgm/shim.h"

#define LINE_MAX_KEPT 1024

/* Add the "N<k>=<pages>" of one numa_maps line of an anonymous mapping to @pages. */
static void count_line(const char *line, size_t len, int64_t pages[CGM_MAX_NODES])
{
	bool anon = false;

	for (size_t i = 0; i + 5 < len; i++)
		if (!memcmp(line + i, " anon=", 6)) {
			anon = true;
			break;
		}
	if (!anon)
		return;
	for (size_t i = 0; i + 2 < len; i++) {
		int64_t node = 0, v = 0;
		size_t j;

		if (line[i] != ' ' || line[i + 1] != 'N' || line[i + 2] < '0' || line[i + 2] > '9')
			continue;
		for (j = i + 2; j < len && line[j] >= '0' && line[j] <= '9'; j++)
			node = node * 10 + (line[j] - '0');
		if (j >= len || line[j] != '=')
			continue;
		for (j++; j < len && line[j] >= '0' && line[j] <= '9' && v < (1LL << 50); j++)
			v = v * 10 + (line[j] - '0');
		pages[node < CGM_MAX_NODES ? node : CGM_MAX_NODES - 1] += v;
	}
}

void cgm_numa_split(int64_t anon, int64_t out[CGM_MAX_NODES])
{
	int64_t pages[CGM_MAX_NODES] = { 0 }, total = 0;
	char buf[8192], line[LINE_MAX_KEPT];
	size_t kept = 0;
	off_t at = 0;
	ssize_t n;
	int fd, own;

	memset(out, 0, CGM_MAX_NODES * sizeof(out[0]));
	out[0] = anon;
	if (acct_online_nodes() <= 1)
		return;
	/* A process that spills reads through a numa_maps kept open (shim/self_proc.c). */
	fd = cgm_self_kept(CGM_SELF_NUMA_MAPS);
	own = fd < 0;
	if (own)
		fd = open("/proc/self/numa_maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	while ((n = pread(fd, buf, sizeof(buf), at)) > 0) {
		at += n;
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] == '\n') {
				count_line(line, kept, pages);
				kept = 0;
			} else if (kept < sizeof(line)) {
				line[kept++] = buf[i];
			}
		}
	}
	if (own)
		close(fd);
	for (int k = 0; k < CGM_MAX_NODES; k++)
		total += pages[k];
	if (total <= 0)
		return;
	for (int k = 0; k < CGM_MAX_NODES; k++)
		out[k] = cgm_mul_div(anon, pages[k], total);
}
