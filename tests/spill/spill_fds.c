/*
 * The library's threads take no descriptor number from under the
 * program.  A thread reads back heap pages that spilling takes away (the
 * handler serves them and samples the group, the background reclaim
 * spills them again) while the main thread opens /dev/null over and over
 * and checks that it gets the lowest free number every time, as a
 * program that closes stdin and opens /dev/null expecting 0 does.  Then
 * the same in a forked child, whose own handler serves its faults.
 *
 *   spill_fds GO_FILE [MIB [SECONDS]]
 *
 * Says "spill_fds: ready" on stderr with the heap filled, waits for
 * GO_FILE, and exits 1 if any open got another number (each one is said).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BLOCK	(64 * 1024)
#define PAGE	4096

static unsigned char **blocks;
static size_t nblocks;
static atomic_bool stop;
static atomic_long bad_bytes;

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Every page of every block, over and over: each byte says where it is. */
static void *reader(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop))
		for (size_t b = 0; b < nblocks && !atomic_load(&stop); b++)
			for (size_t o = 0; o < BLOCK; o += PAGE)
				if (blocks[b][o] != (unsigned char)(b * 7 + o / PAGE))
					atomic_fetch_add(&bad_bytes, 1);
	return NULL;
}

/* Opens for @seconds while the reader runs: how many got a number other than @lowest. */
static long opens_moved(int lowest, double seconds, long *opens)
{
	pthread_t th;
	long moved = 0;
	double until = now_s() + seconds;

	atomic_store(&stop, false);
	pthread_create(&th, NULL, reader, NULL);
	for (*opens = 0; now_s() < until; (*opens)++) {
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

		if (fd != lowest) {
			if (moved++ < 5)
				fprintf(stderr, "spill_fds: pid %d: open gave %d, %d was free\n",
					(int)getpid(), fd, lowest);
		}
		if (fd >= 0)
			close(fd);
	}
	atomic_store(&stop, true);
	pthread_join(th, NULL);
	return moved;
}

int main(int argc, char **argv)
{
	size_t mib = argc > 2 ? strtoul(argv[2], NULL, 0) : 48;
	double seconds = argc > 3 ? atof(argv[3]) : 2.0;
	long opens, moved, child_moved = -1, child_opens = 0;
	int lowest, st, pipefd[2];
	pid_t child;

	if (argc < 2) {
		fprintf(stderr, "usage: spill_fds GO_FILE [MIB [SECONDS]]\n");
		return 2;
	}
	nblocks = mib * 1024 * 1024 / BLOCK;
	blocks = calloc(nblocks, sizeof(*blocks));
	for (size_t b = 0; blocks && b < nblocks; b++) {
		blocks[b] = malloc(BLOCK);
		if (!blocks[b])
			return 2;
		for (size_t o = 0; o < BLOCK; o++)
			blocks[b][o] = (unsigned char)(b * 7 + o / PAGE);
	}
	if (!blocks)
		return 2;
	fprintf(stderr, "spill_fds: ready\n");
	while (access(argv[1], F_OK) != 0)
		usleep(20000);

	lowest = open("/dev/null", O_RDONLY | O_CLOEXEC);
	close(lowest);
	moved = opens_moved(lowest, seconds, &opens);

	if (pipe(pipefd))
		return 2;
	child = fork();
	if (child == 0) {
		long got[2];

		close(pipefd[0]);
		lowest = open("/dev/null", O_RDONLY | O_CLOEXEC);
		close(lowest);
		got[0] = opens_moved(lowest, seconds / 2, &got[1]);
		_exit(write(pipefd[1], got, sizeof(got)) == sizeof(got) ? 0 : 3);
	}
	close(pipefd[1]);
	if (child > 0) {
		long got[2];

		if (read(pipefd[0], got, sizeof(got)) == sizeof(got)) {
			child_moved = got[0];
			child_opens = got[1];
		}
		waitpid(child, &st, 0);
	}
	close(pipefd[0]);
	fprintf(stderr, "spill_fds: %ld opens, %ld got another number; in the child %ld, %ld; %ld bytes wrong\n",
		opens, moved, child_opens, child_moved, atomic_load(&bad_bytes));
	return moved || child_moved != 0 || atomic_load(&bad_bytes) ? 1 : 0;
}
