/*
 * A program to be moved between groups while it allocates: two threads
 * malloc and free blocks of 16 B to 2 KiB (small and larger than the
 * small sizes) and keep up to 256 of them live, until SIGTERM.  Writes
 * "ready" to the file named by argv[1] once both threads run.  Used,
 * preloaded, by tests/cgmctl/test_moving.sh; does not link the library.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIVE 256

static volatile int stop;
static volatile int running;

static void *worker(void *arg)
{
	unsigned int seed = (unsigned int)(uintptr_t)arg;
	void *live[LIVE] = { 0 };

	__atomic_add_fetch(&running, 1, __ATOMIC_RELEASE);
	while (!stop) {
		unsigned int i = (unsigned int)rand_r(&seed) % LIVE;
		size_t n = 16 + (size_t)rand_r(&seed) % 2033;

		free(live[i]);
		live[i] = rand_r(&seed) & 1 ? malloc(n) : calloc(1, n);
		if (live[i])
			memset(live[i], 0x5a, n);
	}
	for (unsigned int i = 0; i < LIVE; i++)
		free(live[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[2];
	sigset_t set;
	FILE *f;
	int sig;

	if (argc != 2) {
		fprintf(stderr, "usage: move_worker READY-FILE\n");
		return 2;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1));
	while (__atomic_load_n(&running, __ATOMIC_ACQUIRE) < 2)
		;
	f = fopen(argv[1], "w");
	if (!f)
		return 1;
	fputs("ready", f);
	fclose(f);
	sigwait(&set, &sig);
	stop = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	return 0;
}
