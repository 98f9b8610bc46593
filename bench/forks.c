/*
 * fork + exit, for `make bench-fork`: N children one after the other,
 * each allocating and freeing a block and exiting (atexit handlers, the
 * accounting's detach included), the parent waiting for each.  Prints
 * the time per fork in microseconds.  Under callgrind with
 * --toggle-collect=child_main each child's profile counts the child's own
 * work: its first allocation (which attaches it) and its exit.
 *
 *   forks N
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Through a volatile pointer: the compiler may not elide a malloc/free pair. */
static void *(*volatile alloc)(size_t) = malloc;

static __attribute__((noinline, noreturn)) void child_main(void)
{
	free(alloc(64));
	exit(0);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < n; i++) {
		pid_t pid = fork();
		int status;

		if (pid == 0)
			child_main();
		if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0) {
			fprintf(stderr, "forks: child %ld failed\n", i);
			return 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%.2f\n", ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) /
			 1e3 / (double)n);
	return 0;
}
