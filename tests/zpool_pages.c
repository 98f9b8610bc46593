/*
 * Page generators for the zpool tests and benchmark.
 *
 * "Real heap pages" are read from a live process: a Python program builds
 * records, an index and a JSON blob, then waits; we read every resident
 * page of its anonymous writable mappings through /proc/PID/mem (present
 * pages only, from /proc/PID/pagemap).  The reading side is the parent,
 * so ptrace access is granted under the default Yama policy.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zpool_pages.h"

void zpt_page_random(uint64_t *rng, unsigned char *page)
{
	for (size_t i = 0; i < ZPT_PAGE; i += 8) {
		uint64_t v = zpt_rand(rng);

		memcpy(page + i, &v, 8);
	}
}

void zpt_page_same(uint64_t word, unsigned char *page)
{
	for (size_t i = 0; i < ZPT_PAGE; i += 8)
		memcpy(page + i, &word, 8);
}

static const char *const zpt_words[] = {
	"the", "memory", "cgroup", "page", "of", "compressed", "pool", "and",
	"zsmalloc", "writeback", "to", "a", "file", "kernel", "thread", "in",
	"object", "handle", "class", "compaction", "moves", "is", "lz4", "zstd",
};

void zpt_page_text(uint64_t *rng, unsigned char *page)
{
	size_t n = 0;

	while (n < ZPT_PAGE) {
		const char *w = zpt_words[zpt_rand(rng) % (sizeof(zpt_words) /
							  sizeof(zpt_words[0]))];
		size_t len = strlen(w);

		for (size_t i = 0; i < len && n < ZPT_PAGE; i++)
			page[n++] = (unsigned char)w[i];
		if (n < ZPT_PAGE)
			page[n++] = zpt_rand(rng) % 11 == 0 ? '\n' : ' ';
	}
}

void zpt_page_mixed(uint64_t *rng, unsigned char *page)
{
	size_t n = 0;

	while (n < ZPT_PAGE) {
		size_t run = 8 + zpt_rand(rng) % 200;
		unsigned kind = (unsigned)(zpt_rand(rng) % 3);

		if (run > ZPT_PAGE - n)
			run = ZPT_PAGE - n;
		for (size_t i = 0; i < run; i++)
			page[n + i] = kind == 0 ? 0 : kind == 1 ?
				(unsigned char)zpt_rand(rng) : (unsigned char)(i % 16);
		n += run;
	}
}

static const char zpt_python[] =
	"import sys, random, json\n"
	"random.seed(7)\n"
	"abc = 'abcdefghijklmnopqrstuvwxyz'\n"
	"words = [''.join(random.choice(abc) for _ in range(random.randint(3, 10)))"
	" for _ in range(5000)]\n"
	"recs = [{'id': i, 'name': random.choice(words) + ' ' + random.choice(words),"
	" 'score': random.random() * 100, 'tags': [random.choice(words) for _ in"
	" range(random.randint(0, 5))], 'n': random.randint(0, 1 << 40)}"
	" for i in range(60000)]\n"
	"idx = {r['name'] + str(r['id']): r for r in recs}\n"
	"blob = json.dumps(recs[:10000])\n"
	"sys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdin.read()\n";

/* Read resident pages of pid's anonymous writable mappings. */
static long read_anon_pages(pid_t pid, size_t max, unsigned char *out)
{
	char path[64], line[512];
	FILE *maps;
	int mem, pagemap;
	long n = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	maps = fopen(path, "r");
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	mem = open(path, O_RDONLY);
	snprintf(path, sizeof(path), "/proc/%d/pagemap", (int)pid);
	pagemap = open(path, O_RDONLY);
	if (!maps || mem < 0 || pagemap < 0)
		goto out;
	while ((size_t)n < max && fgets(line, sizeof(line), maps)) {
		unsigned long lo, hi;
		char perms[8], name[256] = "";

		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %255[^\n]", &lo, &hi,
			   perms, name) < 3)
			continue;
		if (strcmp(perms, "rw-p") != 0 ||
		    (name[0] && strcmp(name, "[heap]") != 0))
			continue;
		for (unsigned long a = lo; a < hi && (size_t)n < max; a += ZPT_PAGE) {
			uint64_t pm = 0;

			if (pread(pagemap, &pm, 8, (off_t)(a / ZPT_PAGE * 8)) != 8 ||
			    !(pm >> 63 & 1))
				continue;	/* not resident */
			if (pread(mem, out + (size_t)n * ZPT_PAGE, ZPT_PAGE,
				  (off_t)a) == (ssize_t)ZPT_PAGE)
				n++;
		}
	}
out:
	if (maps)
		fclose(maps);
	if (mem >= 0)
		close(mem);
	if (pagemap >= 0)
		close(pagemap);
	return n;
}

static long python_heap(size_t max, unsigned char *out)
{
	int in[2], outp[2];
	char buf[16];
	pid_t pid;
	long n = -1;

	if (pipe(in) || pipe(outp))
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(outp[1], 1);
		close(in[1]);
		close(outp[0]);
		setenv("PYTHONHASHSEED", "0", 1);
		execlp("python3", "python3", "-c", zpt_python, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(outp[1]);
	if (pid > 0 && read(outp[0], buf, 6) == 6 && memcmp(buf, "ready\n", 6) == 0)
		n = read_anon_pages(pid, max, out);
	close(in[1]);
	close(outp[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return n;
}

/* Fallback: build C structures on our own heap, then read it. */
static long own_heap(size_t max, unsigned char *out)
{
	struct rec { struct rec *next; double score; long id; char name[24]; };
	struct rec *head = NULL;
	uint64_t rng = 12345;
	long n;

	for (int i = 0; i < 100000; i++) {
		struct rec *r = malloc(sizeof(*r) + zpt_rand(&rng) % 64);

		if (!r)
			break;
		r->next = head;
		r->score = (double)(zpt_rand(&rng) % 10000) / 7.0;
		r->id = i;
		snprintf(r->name, sizeof(r->name), "%s-%d",
			 zpt_words[i % (sizeof(zpt_words) / sizeof(zpt_words[0]))], i);
		head = r;
	}
	n = read_anon_pages(getpid(), max, out);
	while (head) {
		struct rec *next = head->next;

		free(head);
		head = next;
	}
	return n;
}

long zpt_heap_pages(size_t max, unsigned char **pages, const char **source)
{
	unsigned char *out = malloc(max * ZPT_PAGE);
	long n;

	if (!out)
		return -1;
	n = python_heap(max, out);
	*source = "python3 heap (/proc/PID/mem)";
	if (n < (long)max / 4) {
		n = own_heap(max, out);
		*source = "own malloc heap (/proc/self/mem)";
	}
	if (n <= 0) {
		free(out);
		return -1;
	}
	*pages = out;
	return n;
}

long zpt_heap_pages_cached(const char *path, size_t max, unsigned char **pages,
			   const char **source)
{
	FILE *f = fopen(path, "rb");
	long n;

	if (f) {
		unsigned char *out = malloc(max * ZPT_PAGE);

		n = out ? (long)fread(out, ZPT_PAGE, max, f) : -1;
		fclose(f);
		if (n > 0) {
			*pages = out;
			*source = "page file";
			return n;
		}
		free(out);
	}
	n = zpt_heap_pages(max, pages, source);
	if (n > 0 && (f = fopen(path, "wb"))) {
		fwrite(*pages, ZPT_PAGE, (size_t)n, f);
		fclose(f);
	}
	return n;
}
