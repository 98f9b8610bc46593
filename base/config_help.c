/*
 * What each CGMALLOC_CONF key means, for `cgmctl help conf` and the README
 * table: the help column of config_keys.def, in the order of
 * cgm_conf_keys[].  Its own file so that libcgmalloc.so, which never
 * prints it, does not link it (config_keys.def says why).
 */
#include <stddef.h>

#include "cgm/config.h"

#define CGM_CONF_KEY(name, type, def, names, min, max, help) help,
static const char *const key_help[] = {
#include "config_keys.def"
};
#undef CGM_CONF_KEY

const char *cgm_conf_key_help(const struct cgm_conf_key *k)
{
	return key_help[k - cgm_conf_keys];
}
