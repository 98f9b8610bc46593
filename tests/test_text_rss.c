/*
 * How much of the library's code an ordinary process has resident.
 *
 * A read fault on a library's code maps the page and the rest of its
 * 16-page fault-around window that the page cache holds, so a process
 * that runs a few functions spread over all 118 KiB of code has it all
 * resident, in every process.  The library's linker script
 * (scripts/lib-ld-script, the list shim/hot-text.ld) puts
 * the functions an ordinary program runs together first, where the fault
 * of the library's _init already maps them.  Here a process with
 * accounting on allocates and frees blocks of every kind, in a second
 * thread too, and reads the RSS of the library's executable mappings
 * from /proc/self/smaps: it must stay within LIMIT_KIB.  All of the code
 * was resident (116-120 KiB) before the layout; 64 KiB with it.  Both
 * the first process of a hierarchy (it creates the file and checks
 * mimalloc: 92-112 KiB while the hot list lacked that code) and a later
 * one (the test runs itself again, exec) measure; the later one starts
 * after a third has exited, whose slot its attach frees once it has seen
 * the process gone (76-124 KiB while the hot list lacked that check).
 * The library's segments are aligned to 64 KiB (-z max-page-size, which
 * the loader honours since glibc 2.35), so the hot code starts where a
 * window does: unaligned, where the loader happened to put the library
 * decided whether the hot code straddled two windows (64 KiB in most
 * runs, 88 in some).  The limit, 80 KiB, is one window and the pages
 * the static keys patch.  make check runs it with limits too (each
 * process in a scope of its own, memory.high and memory.max set): their
 * start-up and the check of a large block against memory.max ran code
 * outside the hot list, and 128-164 KiB were resident.
 *
 * The library's read-only data is measured too (its r--p mappings):
 * .rodata shared a window with the unwind tables, which only an
 * unwinder reads, and 16 + 56 KiB of it (and 8 of relro) were resident
 * in every process; in the first segment, after the dynamic symbols the
 * loader reads anyway (scripts/lib-ld-script), 36 + 8; 32 + 8 with the
 * strings of the cgroup files' code among the cold ones; 24 + 8 with the
 * messages' formats among them too (cgm_log, include/cgm/log.h) and the
 * configuration keys' help, which only cgmctl prints, out of the library;
 * 20 + 8 with the reasons' formats (cgm_msg_format) there too and
 * mimalloc's bin of each size a byte.  The limit, RODATA_LIMIT_KIB, is
 * that and a page.
 *
 * And its data (its file-backed rw-p mapping: .got.plt and .data; bss is
 * anonymous): every process writes the boot slot, cgm_acct and the static
 * keys there, so each of its pages is resident and private.  An
 * initialized variable of 3 KiB that hardly any process uses (the
 * unaccounted slot, shim/accounted.c) took it past two pages: 12 KiB in
 * every process.  DATA_LIMIT_KIB is the two pages it holds now.
 *
 * And where the loader put the library: at a multiple of LIB_LOAD_ALIGN
 * (the Makefile's, 2 MiB), the alignment of its first segment
 * (scripts/load_align.c: the libraries loaded after it then land where
 * they would without it).
 *
 * Usage: test_text_rss   (accounting on)
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgmalloc.h"
#include "smaps_rss.h"

#ifndef LIB_LOAD_ALIGN
#error "LIB_LOAD_ALIGN: the Makefile's alignment of the library's first segment (tests/runtime.mk)"
#endif

#define LIMIT_KIB	SMAPS_LIBRARY_CODE_LIMIT_KIB
#define RODATA_LIMIT_KIB	32
#define DATA_LIMIT_KIB		8

/* Blocks of every kind, freed again: small, medium, large, aligned, resized. */
static void *work(void *arg)
{
	static const size_t sizes[] = { 8, 100, 1000, 5000, 60000, 300000, 3u << 20 };

	(void)arg;
	for (int r = 0; r < 100; r++) {
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			char *p = malloc(sizes[i]), *q = calloc(1, sizes[i]);
			void *a = aligned_alloc(64, sizes[i]);

			if (!p || !q || !a)
				return (void *)1;
			p[0] = q[0];
			p = realloc(p, sizes[i] * 2);
			free(p);
			free(q);
			free(a);
		}
	}
	return NULL;
}

/* The library's read-only data mappings (relro included: read-only once relocated). */
static bool library_rodata(const char *perms, const char *path, const void *arg)
{
	(void)arg;
	return perms[0] == 'r' && perms[1] == '-' && perms[2] == '-' &&
	       smaps_path_ends(path, "/libcgmalloc.so");
}

/* The library's writable file-backed mapping (.got.plt, .data). */
static bool library_data(const char *perms, const char *path, const void *arg)
{
	(void)arg;
	return perms[0] == 'r' && perms[1] == 'w' && smaps_path_ends(path, "/libcgmalloc.so");
}

/* Is the library's image at a multiple of LIB_LOAD_ALIGN, as scripts/load_align.c asks the loader? */
static bool loaded_aligned(void)
{
	Dl_info info;

	if (!dladdr((void *)cgm_accounting_enabled, &info) || !info.dli_fbase) {
		fprintf(stderr, "test_text_rss: dladdr found no library for cgm_accounting_enabled\n");
		return false;
	}
	if ((uintptr_t)info.dli_fbase % (uintptr_t)(LIB_LOAD_ALIGN) != 0) {
		fprintf(stderr, "test_text_rss: the library is loaded at %p, not at a multiple of %#lx "
			"(the first segment's alignment, scripts/load_align.c)\n", info.dli_fbase,
			(unsigned long)(LIB_LOAD_ALIGN));
		return false;
	}
	return true;
}

/* This program again with @arg, waited for: 0 and its exit status, or -1. */
static int run_self(const char *argv0, const char *arg, int *status)
{
	pid_t child = fork();
	int st;

	if (child == 0) {
		execl("/proc/self/exe", argv0, arg, (char *)NULL);
		_exit(127);
	}
	if (child < 0 || waitpid(child, &st, 0) != child || !WIFEXITED(st))
		return -1;
	*status = WEXITSTATUS(st);
	return 0;
}

int main(int argc, char **argv)
{
	pthread_t other;
	void *failed = NULL;
	const char *who = "a later";
	long kib;

	if (!cgm_accounting_enabled()) {
		fprintf(stderr, "test_text_rss: accounting is off: nothing to measure\n");
		return 1;
	}
	if (work(NULL) || pthread_create(&other, NULL, work, NULL) || pthread_join(other, &failed) ||
	    failed) {
		fprintf(stderr, "test_text_rss: an allocation failed\n");
		return 1;
	}
	if (argc > 1 && strcmp(argv[1], "exit") == 0)
		return 0;
	if (!loaded_aligned())
		return 1;
	if (argc < 2 || strcmp(argv[1], "measure") != 0) {
		int status;

		/*
		 * A process that has exited first: the measuring one's attach
		 * frees its slot once it has seen it gone, as a program started
		 * after others in the default hierarchy does.
		 */
		if (run_self(argv[0], "exit", &status) || status != 0 ||
		    run_self(argv[0], "measure", &status)) {
			fprintf(stderr, "test_text_rss: a child process did not run or exit\n");
			return 1;
		}
		if (status != 0)
			return status;
		/* This process was the first: it created the hierarchy and checked mimalloc. */
		who = "the hierarchy's first";
	}
	kib = smaps_rss_kib(smaps_library_code, NULL);
	if (kib < 0) {
		fprintf(stderr, "test_text_rss: no executable mapping of libcgmalloc.so in smaps\n");
		return 1;
	}
	printf("test_text_rss: %ld KiB of the library's code resident in %s process (limit %d)\n",
	       kib, who, LIMIT_KIB);
	if (kib > LIMIT_KIB) {
		fprintf(stderr, "test_text_rss: %ld KiB of code resident in %s process, more than %d: "
			"functions an ordinary program runs are outside shim/hot-text.ld "
			"(run scripts/hot-text)\n", kib, who, LIMIT_KIB);
		return 1;
	}
	kib = smaps_rss_kib(library_rodata, NULL);
	printf("test_text_rss: %ld KiB of the library's read-only data resident in %s process "
	       "(limit %d)\n", kib, who, RODATA_LIMIT_KIB);
	if (kib < 0 || kib > RODATA_LIMIT_KIB) {
		fprintf(stderr, "test_text_rss: %ld KiB of read-only data resident in %s process, "
			"more than %d: .rodata shares a fault-around window with data that only "
			"an unwinder reads (scripts/lib-ld-script)\n", kib, who, RODATA_LIMIT_KIB);
		return 1;
	}
	kib = smaps_rss_kib(library_data, NULL);
	printf("test_text_rss: %ld KiB of the library's data resident in %s process (limit %d)\n",
	       kib, who, DATA_LIMIT_KIB);
	if (kib < 0 || kib > DATA_LIMIT_KIB) {
		fprintf(stderr, "test_text_rss: %ld KiB of the library's data resident in %s "
			"process, more than %d: an initialized variable that few processes use "
			"belongs in bss, set when it is first needed\n", kib, who, DATA_LIMIT_KIB);
		return 1;
	}
	return 0;
}
