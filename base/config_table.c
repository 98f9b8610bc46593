/*
 * The table of CGMALLOC_CONF keys, made of the rows of config_keys.def
 * (their help texts are config_help.c's).  The parser, the messages,
 * `cgmctl help conf` and the README table follow from it.
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

#define CGM_CONF_KEY(name, type, def, names, min, max, help)			\
	{ #name, CGM_CONF_##type, FIELD(name), def, names, min, max },
const struct cgm_conf_key cgm_conf_keys[] = {
#include "config_keys.def"
};
#undef CGM_CONF_KEY

const size_t cgm_conf_nkeys = sizeof(cgm_conf_keys) / sizeof(cgm_conf_keys[0]);
