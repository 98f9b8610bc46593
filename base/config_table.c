/*
 * The table of CGMALLOC_CONF keys.  Adding a key: a field in struct
 * cgm_config and one row here; the parser, the messages, `cgmctl help conf`
 * and the README table follow from it.
 */
#include <stddef.h>

#include "cgm/config.h"

#define FIELD(f) offsetof(struct cgm_config, f), sizeof(((struct cgm_config *)0)->f)

static const char *const onoff_names[] = { "on", "off", NULL };
static const char *const oom_names[] = { "enomem", "kill", NULL };
static const char *const stats_names[] = { "none", "exit", NULL };
static const char *const charge_names[] = { "resident", "alloc", NULL };
static const char *const codec_names[] = { "lz4", "zstd", NULL };
static const char *const free_path_names[] = { "auto", "split", "mixed", NULL };

const struct cgm_conf_key cgm_conf_keys[] = {
	{ "verbose", CGM_CONF_BOOL, FIELD(verbose), "0",
	  "print the effective configuration and diagnostics to stderr",
	  NULL, 0, 0 },
	{ "strict", CGM_CONF_BOOL, FIELD(strict), "0",
	  "a bad CGMALLOC_CONF item is fatal: exit status 2 before main",
	  NULL, 0, 0 },
	{ "static_keys", CGM_CONF_ENUM, FIELD(static_keys), "on",
	  "patch static-key sites (on) or make every site read its key (off)",
	  onoff_names, 0, 0 },
	{ "accounting", CGM_CONF_BOOL, FIELD(accounting), "1",
	  "charge every allocation to the process's group",
	  NULL, 0, 0 },
	{ "hierarchy", CGM_CONF_STRING, FIELD(hierarchy), "",
	  "hierarchy file shared by processes (default /dev/shm/cgmalloc-<uid>/hierarchy)",
	  NULL, 0, 0 },
	{ "group", CGM_CONF_STRING, FIELD(group), "",
	  "group to attach to, like /batch/job1 (default: the kernel memory cgroup path, else /; "
	  "with max= or high=, a group of this run's own below it)",
	  NULL, 0, 0 },
	{ "scope", CGM_CONF_STRING, FIELD(scope), "",
	  "a group for this run, like /batch/run7: made if missing, removed with its limits "
	  "once its last process is gone (instead of group=)",
	  NULL, 0, 0 },
	{ "charge_batch", CGM_CONF_UINT, FIELD(charge_batch), "64",
	  "pages a thread charges to its group at a time (MEMCG_CHARGE_BATCH)",
	  NULL, 1, 65536 },
	{ "max", CGM_CONF_SIZE, FIELD(max), "max",
	  "memory.max of the group (without group=: of this run's own group, gone with it)",
	  NULL, 0, 0 },
	{ "high", CGM_CONF_SIZE, FIELD(high), "max",
	  "memory.high of the group (without group=: of this run's own group, gone with it)",
	  NULL, 0, 0 },
	{ "charge", CGM_CONF_ENUM, FIELD(charge), "resident",
	  "blocks above 128 KiB and the program's own mmap()s are charged by their resident "
	  "pages, sampled (resident), or in full when made, failing at memory.max (alloc)",
	  charge_names, 0, 0 },
	{ "enforce", CGM_CONF_BOOL, FIELD(enforce), "1",
	  "when a limit applies and accounting cannot start: exit with status 2 before main (1), "
	  "or run unaccounted (0)",
	  NULL, 0, 0 },
	{ "oom", CGM_CONF_ENUM, FIELD(oom), "enomem",
	  "at memory.max: fail the allocation (enomem) or kill the largest process (kill)",
	  oom_names, 0, 0 },
	{ "free_path", CGM_CONF_ENUM, FIELD(free_path), "auto",
	  "how an accounted free tells blocks of at most 1 KiB from those up to 16 KiB: by a "
	  "branch (split: cheapest when one kind dominates), or by a table without one (mixed: "
	  "no mispredicted branch when both come in a random mix), or split until a thread's "
	  "allocations show medium blocks coming between small ones often enough that the "
	  "branch would cost more than the table, then mixed (auto)",
	  free_path_names, 0, 0 },
	{ "alloc_pop", CGM_CONF_BOOL, FIELD(alloc_pop), "1",
	  "an accounted malloc of up to 16 KiB takes its block off the free list of the page "
	  "mimalloc's heap names for the size, and calls into mimalloc only when that page has "
	  "none; 0: every allocation calls into mimalloc (to measure what that saves in one "
	  "build)",
	  NULL, 0, 0 },
	{ "spill", CGM_CONF_BOOL, FIELD(spill), "0",
	  "reclaim (memory.high, memory.max, memory.reclaim) moves cold pages into a compressed "
	  "pool and faults them back on access; needs a userfaultfd that serves system calls",
	  NULL, 0, 0 },
	{ "spill_codec", CGM_CONF_ENUM, FIELD(spill_codec), "lz4",
	  "compressor of spilled pages",
	  codec_names, 0, 0 },
	{ "spill_backing", CGM_CONF_STRING, FIELD(spill_backing), "",
	  "file the pool writes pages back to past memory.zswap.max (default: none, spilling "
	  "stops there); each process writes to FILE.PID of its own, unlinked once open",
	  NULL, 0, 0 },
	{ "spill_recompress", CGM_CONF_BOOL, FIELD(spill_recompress), "1",
	  "pages of an lz4 pool are compressed again with zstd once idle a second, or oldest "
	  "first when reclaim needs room, as zram recompresses idle pages (lz4 pools without "
	  "spill_backing)",
	  NULL, 0, 0 },
	{ "spill_dict", CGM_CONF_BOOL, FIELD(spill_dict), "1",
	  "zstd (recompression, or spill_codec=zstd) compresses against a dictionary of four "
	  "of the program's own pages, chosen once from a sample of the first 4096 pages "
	  "spilled that compressed to half: copies up to a quarter smaller where the program's "
	  "pages resemble each other (records, a page cache), loaded as fast",
	  NULL, 0, 0 },
	{ "spill_background", CGM_CONF_BOOL, FIELD(spill_background), "1",
	  "a thread of the process spills in the background to keep its group a margin (1/32) "
	  "below the lower of memory.high and memory.max, so that allocating threads seldom "
	  "reclaim themselves",
	  NULL, 0, 0 },
	{ "spill_background_zstd", CGM_CONF_BOOL, FIELD(spill_background_zstd), "1",
	  "with spill_recompress, the background reclaim compresses the pages it spills with "
	  "zstd at once, as recompression would leave them, instead of with lz4 now and both "
	  "codecs again when the pool needs room: its pages are the coldest",
	  NULL, 0, 0 },
	{ "spill_hold_high", CGM_CONF_BOOL, FIELD(spill_hold_high), "0",
	  "memory.high holds while pages come back: each time 1/64 of the limit has come back "
	  "(2 MiB at most), the handler thread spills the group down to 1/32 below its limit "
	  "when it is past 1/64 below, before it serves the next fault, as the kernel's "
	  "swap-ins reclaim (a program reading much of what was spilled thrashes); "
	  "0: the background reclaim stops while the pages it spilled come back as fast as it "
	  "spills, and the group may pass memory.high meanwhile",
	  NULL, 0, 0 },
	{ "spill_hold_max", CGM_CONF_BOOL, FIELD(spill_hold_max), "0",
	  "memory.max holds while pages come back, as the kernel never lets a swap-in pass it: "
	  "what a sample finds beyond memory.max is spilled by the handler thread before it "
	  "serves the next fault, from pages that did not come back lately, and readahead "
	  "pauses at the limit (a program that reads back more than the limit holds "
	  "thrashes); 0: pages come back past memory.max until the program's next allocation "
	  "reclaims",
	  NULL, 0, 0 },
	{ "spill_fork_lazy", CGM_CONF_BOOL, FIELD(spill_fork_lazy), "1",
	  "a forked child keeps what was spilled in its copy of the pool and brings back only "
	  "what it touches (its own handler thread; the userfaultfd's fork event, which needs "
	  "CAP_SYS_PTRACE), unless the previous child still runs the program (workers share the"
	  " parent's pages); 0, or without that capability, or with spill_backing: every "
	  "spilled page comes back before fork",
	  NULL, 0, 0 },
	{ "spill_cpu_latency", CGM_CONF_BOOL, FIELD(spill_cpu_latency), "1",
	  "while the handler serves a burst of faults, ask idle CPUs to poll instead of halting "
	  "(a CPU latency request of 0 on /dev/cpu_dma_latency, root only; machine-wide while "
	  "held): a thread waiting on a refault wakes at once, where a halted CPU takes 10-15 us "
	  "to wake on a KVM guest",
	  NULL, 0, 0 },
	{ "spill_core", CGM_CONF_BOOL, FIELD(spill_core), "1",
	  "a signal that dumps core (SIGSEGV, SIGABRT, SIGQUIT, ...) and that the program does "
	  "not handle first brings every spilled page back, up to 10 s, so that the core holds "
	  "them (a debugger cannot read a spilled page, and the kernel dumps zeros there)",
	  NULL, 0, 0 },
	{ "stats", CGM_CONF_ENUM, FIELD(stats), "none",
	  "exit: print the group's memory.stat and memory.events at exit",
	  stats_names, 0, 0 },
	{ "stats_file", CGM_CONF_STRING, FIELD(stats_file), "",
	  "write the exit report to this file instead of stderr",
	  NULL, 0, 0 },
};

const size_t cgm_conf_nkeys = sizeof(cgm_conf_keys) / sizeof(cgm_conf_keys[0]);
