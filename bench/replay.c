/*
 * replay: threads replaying a recorded allocation trace.
 *
 * After mimalloc-bench's rptest.  Each thread generates its own trace from
 * a fixed seed (events over a table of slots: allocate, free, realloc, or
 * send the block to another thread), a chunk of events at a time, and
 * replays each chunk as fast as it can.  Sizes are skewed as in real programs: mostly up to
 * 128 bytes, some up to 1 KiB and 8 KiB, a few up to 64 KiB.  A sent block
 * goes to the other thread's inbox, which that thread empties and frees
 * every few events, so about one free in seven is remote.  The trace is
 * generated, not read from a file, so the workload is the same everywhere
 * and the replay's cost is the allocator's, not the disk's.
 *
 * Usage: replay [EVENTS_PER_THREAD] [THREADS]   (default 5000000, 4)
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "bench_list.h"

#define SLOTS 4096
#define CHUNK 65536 /* events generated at a time */
#define POLL 64 /* events between two looks at the inbox */
#define MIN_SIZE 16 /* room for the inbox link and the tag */
#define TAG 8   /* offset of the byte that identifies a block */

/*
 * An event in 32 bits: the operation, the slot, and the new size (for
 * ALLOC and REALLOC) or the receiving thread (for SEND).
 */
enum op { OP_ALLOC, OP_FREE, OP_REALLOC, OP_SEND };
#define EV_OP(e) ((enum op)((e) >> 30))
#define EV_SLOT(e) (((e) >> 18) & (SLOTS - 1))
#define EV_ARG(e) ((e) & 0x3ffff)
#define EV(op, slot, arg) ((uint32_t)(op) << 30 | (uint32_t)(slot) << 18 | (uint32_t)(arg))

/* Where the generator of one thread's trace stands. */
struct tracer {
	uint64_t rng;
	unsigned id;
	unsigned char used[SLOTS];
};

struct replayer {
	struct bench_thread thr; /* first, for bench_threads_run() */
	unsigned id;
	unsigned long events;
	struct bench_list inbox;
};

static struct replayer *replayers;
static unsigned long nreplayers;
static atomic_ulong sending; /* threads still replaying */

/* 70% 16..128 bytes, 20% up to 1 KiB, 8% up to 8 KiB, 2% up to 64 KiB. */
static uint32_t skewed_size(uint64_t r)
{
	unsigned pick = r % 100;
	uint32_t x = (uint32_t)(r >> 32);

	if (pick < 70)
		return MIN_SIZE + x % (128 - MIN_SIZE + 1);
	if (pick < 90)
		return 129 + x % (1024 - 128);
	if (pick < 98)
		return 1025 + x % (8192 - 1024);
	return 8193 + x % (65536 - 8192);
}

/*
 * Writes the next @n events of @tr's trace: a random slot is allocated
 * when empty; when full it is freed (60%), reallocated (30%) or sent away
 * (10%), which keeps a little over half the slots in use.
 */
static void generate(struct tracer *tr, uint32_t *trace, unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		uint64_t r = bench_rand(&tr->rng);
		unsigned k = r % SLOTS;
		unsigned what = (r >> 12) % 10;
		uint64_t r2 = bench_rand(&tr->rng);

		if (!tr->used[k]) {
			trace[i] = EV(OP_ALLOC, k, skewed_size(r2));
			tr->used[k] = 1;
		} else if (what < 6) {
			trace[i] = EV(OP_FREE, k, 0);
			tr->used[k] = 0;
		} else if (what < 9 || nreplayers < 2) {
			trace[i] = EV(OP_REALLOC, k, skewed_size(r2));
		} else {
			unsigned to = (unsigned)((tr->id + 1 + r2 % (nreplayers - 1)) % nreplayers);

			trace[i] = EV(OP_SEND, k, to);
			tr->used[k] = 0;
		}
	}
}

/* Frees every block other threads have sent to @me. */
static void receive(struct replayer *me)
{
	struct bench_node *n = bench_list_take(&me->inbox);

	while (n) {
		unsigned char *p = (unsigned char *)n;

		n = n->next;
		me->thr.sum += p[TAG];
		free(p);
	}
}

/* Replays @n events of @trace over @slot; returns 0, or -1 when an
 * allocation failed or realloc lost a block's contents. */
static int replay(struct replayer *me, const uint32_t *trace, unsigned long n,
		  unsigned char **slot)
{
	for (unsigned long i = 0; i < n; i++) {
		uint32_t e = trace[i];
		unsigned k = EV_SLOT(e);
		unsigned char *p;

		switch (EV_OP(e)) {
		case OP_ALLOC:
			p = malloc(EV_ARG(e));
			if (!p)
				return -1;
			p[TAG] = (unsigned char)k;
			p[EV_ARG(e) - 1] = 1;
			slot[k] = p;
			break;
		case OP_FREE:
			me->thr.sum += slot[k][TAG];
			free(slot[k]);
			slot[k] = NULL;
			break;
		case OP_REALLOC:
			p = realloc(slot[k], EV_ARG(e));
			if (!p)
				return -1;
			slot[k] = p;
			if (p[TAG] != (unsigned char)k)
				return -1;
			p[EV_ARG(e) - 1] = 2;
			break;
		case OP_SEND:
			bench_list_push(&replayers[EV_ARG(e)].inbox,
					(struct bench_node *)slot[k],
					(struct bench_node *)slot[k]);
			slot[k] = NULL;
			break;
		}
		if (i % POLL == 0)
			receive(me);
	}
	return 0;
}

static void *replay_run(void *arg)
{
	struct replayer *me = arg;
	static const struct timespec nap = { .tv_nsec = 50000 };
	struct tracer tr = { .rng = 0x632be59bd9b4e019ull * (me->id + 1), .id = me->id };
	uint32_t *trace = malloc(CHUNK * sizeof(*trace));
	unsigned char *slot[SLOTS] = { 0 };
	unsigned long done = 0;

	if (!trace)
		me->thr.failed = 1;
	while (!me->thr.failed && done < me->events) {
		unsigned long n = me->events - done < CHUNK ? me->events - done : CHUNK;

		generate(&tr, trace, n);
		me->thr.failed = replay(me, trace, n, slot) < 0;
		done += n;
	}
	for (unsigned k = 0; k < SLOTS; k++)
		free(slot[k]);
	free(trace);
	/* Blocks keep coming until the last thread is done sending: a thread
	 * that waited for them without freeing would hold them all. */
	atomic_fetch_sub(&sending, 1);
	while (atomic_load(&sending)) {
		receive(me);
		nanosleep(&nap, NULL);
	}
	receive(me);
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long events = bench_arg(argc, argv, 1, 5000000, "EVENTS_PER_THREAD");
	unsigned long sum;

	nreplayers = bench_arg(argc, argv, 2, 4, "THREADS");
	replayers = bench_calloc(argv[0], nreplayers, sizeof(*replayers), "the threads");
	sending = nreplayers;
	for (unsigned long t = 0; t < nreplayers; t++) {
		replayers[t].id = (unsigned)t;
		replayers[t].events = events;
	}
	sum = bench_threads_run(argv[0], replayers, nreplayers, sizeof(*replayers), replay_run,
				"an allocation failed or realloc lost the contents");
	free(replayers);
	printf("replay: %lu threads x %lu events, checksum %lu\n", nreplayers, events, sum);
	return 0;
}
