/*
 * CGMALLOC_CONF: the one table of configuration keys.
 *
 * CGMALLOC_CONF is a comma-separated list of key=value pairs, read once at
 * start-up with secure_getenv().  Every key is one row of cgm_conf_keys[]:
 * name, type, default, help and where the value lives in struct cgm_config.
 * The parser, the error messages, `cgmctl help conf` and the README table
 * are all driven by that table; a new feature adds a field and a row.
 *
 * Parsing never allocates: it may run while malloc is being bootstrapped.
 */
#ifndef CGM_CONFIG_H
#define CGM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgm/size.h"

/* Longest string value (paths included), terminating NUL included. */
#define CGM_CONF_STR_MAX 1024

/* Longest CGMALLOC_CONF accepted as a whole. */
#define CGM_CONF_ENV_MAX 8192

enum cgm_conf_type {
	CGM_CONF_BOOL,		/* 0/1, no/yes, off/on, false/true */
	CGM_CONF_SIZE,		/* bytes, K/M/G/T suffix (binary), or "max" */
	CGM_CONF_UINT,		/* decimal integer within [min, max] */
	CGM_CONF_ENUM,		/* one of a list of names; stored as its index */
	CGM_CONF_STRING,	/* free text (paths), at most CGM_CONF_STR_MAX-1 */
};

/* The effective configuration; one field per key. */
struct cgm_config {
	bool verbose;
	bool strict;
	int static_keys;		/* enum cgm_static_keys_mode */
	bool accounting;
	char hierarchy[CGM_CONF_STR_MAX];
	char group[CGM_CONF_STR_MAX];
	char scope[CGM_CONF_STR_MAX];
	uint64_t charge_batch;		/* pages */
	uint64_t max;			/* memory.max applied to the group */
	uint64_t high;			/* memory.high applied to the group */
	int charge;			/* enum cgm_charge_mode */
	bool enforce;			/* fail closed when a limit applies */
	int oom;			/* enum cgm_oom_policy */
	int free_path;			/* enum cgm_free_path */
	bool alloc_pop;			/* malloc takes blocks off mimalloc's pages itself */
	bool spill;			/* cold pages go into a compressed pool */
	int spill_codec;		/* enum cgm_spill_codec */
	char spill_backing[CGM_CONF_STR_MAX];	/* writeback file, "" none */
	bool spill_recompress;		/* idle pool pages go from lz4 to zstd */
	bool spill_dict;		/* zstd against a dictionary of the program's pages */
	bool spill_background;		/* a thread keeps the group below its limit */
	bool spill_background_zstd;	/* its pages go to zstd at once (recompressing pools) */
	bool spill_hold_high;		/* pages brought back are reclaimed for at once */
	bool spill_hold_max;		/* ... at least what is beyond memory.max */
	bool spill_throttle;		/* memory.high throttles the faults that bring pages back */
	bool spill_strict_high;		/* ... and first touches, whenever the group is over */
	bool spill_fork_lazy;		/* a forked child keeps the spilled pages spilled */
	bool spill_cpu_latency;		/* idle CPUs poll during fault bursts (PM QoS) */
	bool spill_core;		/* a core-dumping signal brings spilled pages back first */
	int stats;			/* enum cgm_stats_mode */
	char stats_file[CGM_CONF_STR_MAX];
};

enum cgm_static_keys_mode { CGM_SK_ON, CGM_SK_OFF };
enum cgm_oom_policy { CGM_OOM_ENOMEM, CGM_OOM_KILL };
/*
 * What large blocks and the program's own mappings are charged: the pages
 * found resident (as the kernel charges touched pages), or their whole
 * size when they are made (a malloc or mmap past memory.max fails at once).
 */
enum cgm_charge_mode { CGM_CHARGE_RESIDENT, CGM_CHARGE_ALLOC };
enum cgm_stats_mode { CGM_STATS_NONE, CGM_STATS_EXIT };
/* How an accounted free tells small blocks from medium ones (shim/accounted.c). */
enum cgm_free_path { CGM_FREE_PATH_AUTO, CGM_FREE_PATH_SPLIT, CGM_FREE_PATH_MIXED };
enum cgm_spill_codec { CGM_SPILL_LZ4, CGM_SPILL_ZSTD };

struct cgm_conf_key {
	const char *name;
	enum cgm_conf_type type;
	size_t offset;			/* into struct cgm_config */
	size_t size;			/* of the field (strings: buffer size) */
	const char *def;		/* default, in the syntax of a value */
	const char *const *names;	/* CGM_CONF_ENUM: NULL-terminated */
	uint64_t min, max;		/* CGM_CONF_UINT: accepted range */
};

extern const struct cgm_conf_key cgm_conf_keys[];
extern const size_t cgm_conf_nkeys;

/* What key @k of cgm_conf_keys[] means (base/config_help.c: not in the library). */
const char *cgm_conf_key_help(const struct cgm_conf_key *k);

/* How a value of this key is written, for messages and help. */
const char *cgm_conf_expected(const struct cgm_conf_key *k, char *buf,
			      size_t len);

/*
 * Fill @conf with every key's default.  Never fails.
 */
void cgm_conf_defaults(struct cgm_config *conf);

/*
 * CGMALLOC_CONF from the process's environment, or NULL: also NULL in a
 * program run set-user-ID or with capabilities (AT_SECURE), as
 * secure_getenv() would.  It reads environ itself, as mimalloc does:
 * glibc's getenv and secure_getenv lie in a 64 KiB fault-around window
 * of its code that mimalloc alone may leave unmapped (where the window
 * falls depends on the load address), so a call at every start-up can
 * add that window to the RSS of a small program.
 */
const char *cgm_conf_env(void);

/*
 * Parse @text (the CGMALLOC_CONF syntax) on top of @conf.  A bad item is
 * reported with one "cgmalloc: CGMALLOC_CONF: ..." line on stderr (unless
 * @quiet) and leaves that key at the value it had.  Returns the number of
 * bad items.
 */
int cgm_conf_parse(struct cgm_config *conf, const char *text, bool quiet);

/*
 * Format the value of key @k in @conf the way it would be written in
 * CGMALLOC_CONF.  Returns @buf.
 */
const char *cgm_conf_format(const struct cgm_config *conf,
			    const struct cgm_conf_key *k, char *buf,
			    size_t len);

#endif /* CGM_CONFIG_H */
