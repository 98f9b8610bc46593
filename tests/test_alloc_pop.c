/*
 * The accounted malloc takes a block of up to 16 KiB off the free list of
 * the page mimalloc's heap names for the size (mi209_pop_small,
 * mi209_pop_queue in include/cgm/mi_layout.h), and calls mimalloc only
 * when that page has none.  Check that it does, in the main thread, in a
 * new thread and in a forked child (the heap is found at an offset from
 * the thread pointer: a wrong one would read another word, or another
 * thread's heap), and that the blocks are right: distinct, of the size's
 * block size, in pages of the calling thread's own heap, and handed out
 * again by mimalloc after they are freed.
 *
 * How: this program defines mi_malloc_small() and mi_malloc() itself.  It
 * comes first in the symbol search order, so the library's calls into
 * mimalloc come here; each is counted and passed to mimalloc's heap API
 * (mi_heap_malloc_small, mi_heap_malloc on the default heap), which does
 * what the two entry points do.  Without the pops every allocation would
 * be counted; with them, one in a page's worth of blocks.
 *
 * With alloc_pop=0 (argument "off") every allocation must call mimalloc,
 * the blocks just as right: the configuration, and the heap of ours with
 * no page that the library falls back to where it does not find
 * mimalloc's.
 *
 * Usage: test_alloc_pop [on|off]   (accounting must be on; off: run with alloc_pop=0)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mimalloc.h>

#include "cgm/mi_layout.h"
#include "cgmalloc.h"

#define SMALL 48
#define MEDIUM 4096
#define NSMALL 4000
#define NMEDIUM 600

/*
 * volatile: the compiler knows malloc() and free() touch no variable of
 * the program, and would otherwise drop the stores around them.
 */
static volatile unsigned long small_calls, medium_calls;
/* Whether the library is to pop (alloc_pop=1, the default). */
static int pops = 1;
/* Counted only by the thread that counts (the others' calls are their own). */
static __thread volatile int counting;

void *mi_malloc_small(size_t n)
{
	if (counting)
		small_calls++;
	return mi_heap_malloc_small(mi_heap_get_default(), n);
}

void *mi_malloc(size_t n)
{
	if (counting)
		medium_calls++;
	return mi_heap_malloc(mi_heap_get_default(), n);
}

static void *blocks[NSMALL];

/*
 * Allocate @count blocks of @size with counting on: NULL, or what was
 * wrong.  *@calls gets how many of them went to mimalloc.
 */
static const char *allocate(size_t size, int count, unsigned long *calls)
{
	const char *heap = (const char *)mi_heap_get_default();
	volatile unsigned long *counter = size <= 1024 ? &small_calls : &medium_calls;
	unsigned long before = *counter;

	counting = 1;
	for (int i = 0; i < count; i++)
		blocks[i] = malloc(size);
	counting = 0;
	*calls = *counter - before;
	for (int i = 0; i < count; i++) {
		if (!blocks[i])
			return "malloc returned NULL";
		if (mi_usable_size(blocks[i]) != (size <= 1024 ? SMALL : MEDIUM))
			return "a block of another size";
		if (*(char *const *)(mi209_page(blocks[i]) + MI209_HEAP_AT) != heap)
			return "a block from a page of another heap than the thread's";
		memset(blocks[i], i & 0xff, size);
	}
	for (int i = 0; i < count; i++)
		for (size_t k = 0; k < size; k += 512)
			if (((unsigned char *)blocks[i])[k] != (i & 0xff))
				return "two blocks overlap";
	return NULL;
}

/* Allocate, check, free, and allocate again: NULL or what was wrong. */
static const char *round_of(size_t size, int count, unsigned long *calls, unsigned long *again)
{
	const char *why = allocate(size, count, calls);

	if (why)
		return why;
	for (int i = 0; i < count; i++)
		free(blocks[i]);
	/* The freed blocks are on local free lists: mimalloc collects them when a page runs dry. */
	why = allocate(size, count, again);
	for (int i = 0; i < count; i++)
		free(blocks[i]);
	return why;
}

/*
 * A block of @size bytes freed and allocated again, CYCLES times, one
 * other block of the size kept: the page's free list (extended 4 blocks
 * at a time for these sizes) runs out every few cycles, and the pop takes
 * the page's local frees then.  NULL or what was wrong; *@calls the calls
 * into mimalloc (@counter: small_calls or medium_calls).
 */
#define CYCLES 1000
#define CYCLED_SMALL 1024
static const char *cycle(size_t size, volatile unsigned long *counter, unsigned long *calls)
{
	void *(*volatile alloc)(size_t) = malloc;
	void *keep = alloc(size), *p;
	unsigned long before = *counter;

	counting = 1;
	for (int i = 0; i < CYCLES; i++) {
		p = alloc(size);
		if (!p || p == keep || mi_usable_size(p) != size)
			break;
		memset(p, i & 0xff, size);
		free(p);
		p = NULL;
	}
	counting = 0;
	*calls = *counter - before;
	free(keep);
	return p ? "a wrong block in a cycle of one size" : NULL;
}

/* One thread's checks: 0 or 1, with a line on stderr. */
static int check(const char *who)
{
	unsigned long small, small_again, medium, medium_again, cycled, cycled_small;
	const char *why;

	/* A first block of each size: the thread's heap and pages are made by mimalloc. */
	free(malloc(SMALL));
	free(malloc(MEDIUM));
	why = round_of(SMALL, NSMALL, &small, &small_again);
	if (!why)
		why = round_of(MEDIUM, NMEDIUM, &medium, &medium_again);
	if (!why)
		why = cycle(MEDIUM, &medium_calls, &cycled);
	if (!why)
		why = cycle(CYCLED_SMALL, &small_calls, &cycled_small);
	if (why) {
		fprintf(stderr, "test_alloc_pop: %s: %s\n", who, why);
		return 1;
	}
	printf("%s: calls into mimalloc: %lu of %d blocks of %d bytes (%lu again after freeing them), "
	       "%lu of %d of %d bytes (%lu again), %lu and %lu in %d frees and mallocs of one of %d "
	       "and of %d bytes\n", who, small, NSMALL, SMALL, small_again, medium, NMEDIUM, MEDIUM,
	       medium_again, cycled, cycled_small, CYCLES, MEDIUM, CYCLED_SMALL);
	/*
	 * mimalloc extends a page's free list by 4 KiB of blocks at a time
	 * (at least 4 blocks): about one call in 85 blocks of 48 bytes, one
	 * in 4 of 4 KiB, the rest popped.  A tenth and a half are far above
	 * that and far below every block.
	 */
	if (pops && (small > NSMALL / 10 || small_again > NSMALL / 10 || medium > NMEDIUM / 2 ||
		     medium_again > NMEDIUM / 2 || cycled > CYCLES / 10 || cycled_small > CYCLES / 10)) {
		fprintf(stderr, "test_alloc_pop: %s: too many allocations called into mimalloc\n", who);
		return 1;
	}
	/* A few come out of the allowance's refill, which allocates through its own path. */
	if (!pops && (small < NSMALL * 9 / 10 || small_again < NSMALL * 9 / 10 ||
		      medium < NMEDIUM * 9 / 10 || medium_again < NMEDIUM * 9 / 10 ||
		      cycled < CYCLES * 9 / 10 || cycled_small < CYCLES * 9 / 10)) {
		fprintf(stderr, "test_alloc_pop: %s: alloc_pop=0, but allocations did not call mimalloc\n",
			who);
		return 1;
	}
	return 0;
}

static void *thread_main(void *arg)
{
	*(int *)arg = check("new thread");
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th;
	int failed = 0, status;
	pid_t pid;

	pops = !(argc > 1 && strcmp(argv[1], "off") == 0);

	if (!cgm_accounting_enabled()) {
		fprintf(stderr, "test_alloc_pop: accounting is off: nothing to test\n");
		return 1;
	}
	failed |= check("main thread");
	if (pthread_create(&th, NULL, thread_main, &status) || pthread_join(th, NULL)) {
		fprintf(stderr, "test_alloc_pop: cannot run a thread\n");
		return 1;
	}
	failed |= status;
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		perror("test_alloc_pop: fork");
		return 1;
	}
	if (pid == 0) {
		status = check("forked child");
		fflush(stdout);
		_exit(status);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		failed = 1;
	if (!failed)
		printf("test_alloc_pop: ok\n");
	return failed;
}
