/*
 * Start-up of the shim: the library constructor.
 *
 * Allocation works before this runs (mimalloc initialises itself on first
 * use), so nothing here is needed for correctness of malloc; it reads
 * CGMALLOC_CONF, silences mimalloc's own messages, routes mimalloc's
 * failure reports into errno, and switches on the configured features.
 */
#include <errno.h>
#include <mimalloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgm/compiler.h"
#include "cgm/config.h"
#include "cgm/log.h"
#include "cgm/regions.h"
#include "cgm/shim.h"
#include "cgm/static_key.h"
#include "cgmalloc.h"

struct cgm_config cgm_conf;
bool cgm_initialized_flag;

CGM_EXPORT const char *cgm_version(void)
{
	return CGMALLOC_VERSION;
}

CGM_EXPORT size_t cgm_static_keys_report(char *buf, size_t len)
{
	return static_keys_report(buf, len);
}

CGM_EXPORT int cgm_initialized(void)
{
	return __atomic_load_n(&cgm_initialized_flag, __ATOMIC_ACQUIRE);
}

/* mimalloc refused a size or the OS refused memory: malloc's errno. */
static void mi_error_to_errno(int err, void *arg)
{
	(void)arg;
	if (err == ENOMEM || err == EOVERFLOW)
		errno = ENOMEM;
}

/* mimalloc's messages go to stderr only when verbose=1 asked for them. */
static void mi_output(const char *msg, void *arg)
{
	(void)arg;
	/*
	 * mimalloc 2.0.9 buffers its output until one is registered, and its
	 * own start-up leaves a lone "\n" in that buffer, which
	 * mi_register_output() flushes to us: not a message.
	 */
	if (msg[0] == '\n' && msg[1] == '\0')
		return;
	if (cgm_conf.verbose) {
		size_t n = strlen(msg);

		if (write(STDERR_FILENO, msg, n) < 0)
			return;
	}
}

/* verbose=1: the effective configuration and what came of it, in one line. */
static void print_config(const char *accounting)
{
	char line[3072], val[CGM_CONF_STR_MAX];
	const char *reason;
	enum static_keys_mode mode = static_keys_mode(&reason);
	size_t n = 0;

	for (size_t i = 0; i < cgm_conf_nkeys && n < sizeof(line); i++)
		n += (size_t)snprintf(line + n, sizeof(line) - n, " %s=%s",
				      cgm_conf_keys[i].name,
				      cgm_conf_format(&cgm_conf, &cgm_conf_keys[i],
						      val, sizeof(val)));
	cgm_log("%s pid %d, config:%s; static keys %s (%s); accounting %s",
		CGMALLOC_VERSION, (int)getpid(), line,
		mode == STATIC_KEYS_PATCHED ? "patched" : "fallback", reason, accounting);
}

__attribute__((constructor(101))) static void cgm_bootstrap(void)
{
	int saved_errno = errno;
	const char *accounting;
	int bad;

	cgm_conf_defaults(&cgm_conf);
	bad = cgm_conf_parse(&cgm_conf, cgm_conf_env(), false);
	if (bad && cgm_conf.strict) {
		cgm_log("CGMALLOC_CONF: %d bad item%s and strict=1: exiting", bad,
			bad == 1 ? "" : "s");
		_exit(2);
	}
	mi_register_output(mi_output, NULL);
	mi_register_error(mi_error_to_errno, NULL);
	cgm_regions_init();
	static_keys_init(cgm_conf.static_keys == CGM_SK_ON);
	accounting = cgm_accounting_start();
	static_keys_startup_done();
	if (cgm_conf.verbose)
		print_config(accounting);
	__atomic_store_n(&cgm_initialized_flag, true, __ATOMIC_RELEASE);
	errno = saved_errno;
}
