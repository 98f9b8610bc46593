/*
 * What the accounting tests share: a private hierarchy file, a small
 * random number generator, the shim's fast paths re-enacted on a thread
 * slot, child processes attached to a group, and the checks of the
 * invariants that hold whenever nothing is in flight.
 *
 * The unit tests link the accounting sources directly (no shim), so the
 * "allocations" here are bookkeeping only: sim_malloc() charges a block
 * size exactly as cgm_acct_malloc() does, sim_free() counts it exactly as
 * cgm_acct_free() does, and nothing is really allocated.
 */
#ifndef ACCT_FIXTURE_H
#define ACCT_FIXTURE_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgm/acct.h"
#include "cgm/hier.h"

/* A hierarchy file in a directory of its own, removed by acct_tmp_remove(). */
struct acct_tmp {
	char dir[64];
	char path[128];
};

/* Make the directory (in /dev/shm, else /tmp); the file does not exist yet. */
int acct_tmp_create(struct acct_tmp *t);
/* Create and open the hierarchy; aborts the test run with the reason on failure. */
void acct_tmp_open(struct acct_tmp *t, struct cgm_hier *h);
/* Remove the file, anything hier_open left next to it, and the directory. */
void acct_tmp_remove(struct acct_tmp *t);

/* xorshift64*: reproducible from the seed printed on failure. */
uint64_t acct_rand(uint64_t *s);
static inline uint64_t acct_rand_below(uint64_t *s, uint64_t n)
{
	return n ? acct_rand(s) % n : 0;
}

/* The block size the sim charges for a request: mimalloc's small sizes, else pages. */
int64_t sim_block_size(size_t n);

/*
 * cgm_acct_alloc_slow() on @t: take the block size of an @n-byte request
 * from the byte stock (acct_stock_take(), refilling it), and count it.
 * Every size goes this way (the shim's per-class allowances for small
 * sizes are a fast-path detail that the preloaded tests exercise).
 * Returns the charged block size, or -ENOMEM with the stock as it was.
 */
int64_t sim_malloc(struct cgm_acct *a, struct cgm_thread_slot *t, size_t n,
		   bool check_limits);
/* cgm_acct_free_big(): count a freed block of @size bytes in @t. */
void sim_free(struct cgm_thread_slot *t, int64_t size);

/*
 * cgm_acct_realloc(): a block of @old bytes becomes @n bytes; only the
 * growth is charged.  Returns the new block size, or -ENOMEM.
 */
int64_t sim_realloc(struct cgm_acct *a, struct cgm_thread_slot *t, int64_t old, size_t n,
		    bool check_limits);

/*
 * A random tree of @n groups (/g0, /g0/g3, ...) under the root; @idx gets
 * their indices.  Returns 0 or -1.
 */
int acct_random_tree(struct cgm_hier *h, uint64_t *rng, int n, uint32_t *idx);

/* Harvest every attached process and flush the statistics. */
void acct_drain(struct cgm_hier *h);

/* Sum of held_pages over the live process slots in the subtree of @group. */
int64_t acct_subtree_held(const struct cgm_hier *h, uint32_t group);

/*
 * Every live group's usage against the pages its subtree's processes
 * hold.  Returns the number of groups that differ; the first is described
 * in @msg.
 */
int acct_check_usage_held(const struct cgm_hier *h, char *msg, size_t len);

/*
 * Every live group's hierarchical statistics against its local ones plus
 * its children's hierarchical ones.  Returns the number of mismatches.
 */
int acct_check_stat_tree(const struct cgm_hier *h, char *msg, size_t len);

/*
 * A child process attached to a group of the hierarchy at @path.  It
 * runs @fn, reports the result and waits; acct_child_finish() lets it
 * exit with or without detaching (as a SIGKILLed process would).
 */
struct acct_child {
	pid_t pid;
	int cmd;			/* parent -> child */
	int done;			/* child -> parent */
};
typedef int (*acct_child_fn)(struct cgm_acct *a, void *arg);

int acct_child_start(struct acct_child *c, const char *path, const char *group,
		     acct_child_fn fn, void *arg);
/*
 * The same, but the child comes from fork() of the attached process
 * @parent, joins its group (acct_attach_group, as the shim's child does)
 * and then moves itself to @group.
 */
int acct_child_fork(struct acct_child *c, const struct cgm_acct *parent, const char *group,
		    acct_child_fn fn, void *arg);
/* Wait for @fn's result (a negative errno if the child failed before it). */
int acct_child_result(struct acct_child *c);
/* Let the child go on: detach (true) or just _exit (false).  Returns its wait status. */
int acct_child_finish(struct acct_child *c, bool detach);

/*
 * Run @fn(@arg) in a child process and wait at most @timeout_ms for it.
 * Returns 0 if it returned, else -1 with what happened ("killed by signal
 * 11", "still running after 5000 ms") in @msg.
 */
int acct_run_guarded(void (*fn)(void *), void *arg, int timeout_ms, char *msg, size_t len);

/* Read a "key value" line of a memory.stat / memory.events rendering. */
int64_t acct_file_value(const char *text, const char *key);

/* Write @value to file @file of group @path (as root); the test fails if refused. */
void acct_group_write(struct cgm_hier *h, const char *path, const char *file, const char *value);

/* memory.current of group @path, in pages; the test fails if there is no such group. */
int64_t acct_group_usage(struct cgm_hier *h, const char *path);

/* The "@key N" line of file @file of group @path; the test fails if unreadable. */
int64_t acct_group_value(struct cgm_hier *h, const char *path, const char *file, const char *key);

/* Shared memory that survives fork, for results of children. */
void *acct_shared_alloc(size_t size);

/*
 * main() of a test program: "regressions" as the first argument runs only
 * the cases of bugs these tests found, all fixed (@add is told which set
 * to add); a number after it
 * sets *@seed.  @setup/@teardown may be NULL.  Returns the exit status.
 */
int acct_suite_main(int argc, char **argv, const char *name, uint64_t *seed,
		    void (*setup)(void), void (*teardown)(void),
		    void (*add)(TCase *tc, bool regressions));

#endif /* ACCT_FIXTURE_H */
