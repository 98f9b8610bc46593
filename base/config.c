/*
 * Parser of CGMALLOC_CONF, driven by cgm_conf_keys[].
 *
 * It runs in the library constructor, possibly before the program's own
 * start-up code, so it does not allocate: values go straight into the
 * fixed-size fields of struct cgm_config and the text is copied to the
 * stack.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "cgm/config.h"
#include "cgm/log.h"

const char *cgm_conf_env(void)
{
	static const char name[] = "CGMALLOC_CONF=";

	if (getauxval(AT_SECURE) || !environ)
		return NULL;
	for (char **e = environ; *e; e++)
		if (strncmp(*e, name, sizeof(name) - 1) == 0)
			return *e + sizeof(name) - 1;
	return NULL;
}

static bool *bool_field(struct cgm_config *c, const struct cgm_conf_key *k)
{
	return (bool *)((char *)c + k->offset);
}

static uint64_t *u64_field(struct cgm_config *c, const struct cgm_conf_key *k)
{
	return (uint64_t *)((char *)c + k->offset);
}

static int *int_field(struct cgm_config *c, const struct cgm_conf_key *k)
{
	return (int *)((char *)c + k->offset);
}

static char *str_field(struct cgm_config *c, const struct cgm_conf_key *k)
{
	return (char *)c + k->offset;
}

static int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "1", "yes", "on", "true" };
	static const char *const no[] = { "0", "no", "off", "false" };

	for (size_t i = 0; i < 4; i++) {
		if (strcmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

static int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (*s == '\0')
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

const char *cgm_conf_expected(const struct cgm_conf_key *k, char *buf,
			      size_t len)
{
	size_t n;

	switch (k->type) {
	case CGM_CONF_BOOL:
		return CGM_MSG_TEXT("expected 0 or 1");
	case CGM_CONF_SIZE:
		return CGM_MSG_TEXT("expected a size like 512M or 'max'");
	case CGM_CONF_UINT:
		cgm_msg_format(buf, len, "expected an integer from %" PRIu64 " to %" PRIu64,
			       k->min, k->max);
		return buf;
	case CGM_CONF_ENUM:
		n = (size_t)cgm_msg_format(buf, len, "expected one of:");
		for (const char *const *e = k->names; *e && n < len; e++)
			n += (size_t)snprintf(buf + n, len - n, "%s %s",
					      e == k->names ? "" : ",", *e);
		return buf;
	case CGM_CONF_STRING:
		cgm_msg_format(buf, len, "expected text of at most %zu bytes", k->size - 1);
		return buf;
	}
	return CGM_MSG_TEXT("expected a value");
}

/* Store @val into the field of @k.  Returns 0 or a negative errno. */
static int conf_set(struct cgm_config *c, const struct cgm_conf_key *k,
		    const char *val)
{
	uint64_t u;
	bool b;
	int err;

	switch (k->type) {
	case CGM_CONF_BOOL:
		err = parse_bool(val, &b);
		if (!err)
			*bool_field(c, k) = b;
		return err;
	case CGM_CONF_SIZE:
		err = cgm_parse_size(val, &u);
		if (!err)
			*u64_field(c, k) = u;
		return err;
	case CGM_CONF_UINT:
		err = parse_uint(val, k->min, k->max, &u);
		if (!err)
			*u64_field(c, k) = u;
		return err;
	case CGM_CONF_ENUM:
		for (int i = 0; k->names[i]; i++) {
			if (strcmp(val, k->names[i]) == 0) {
				*int_field(c, k) = i;
				return 0;
			}
		}
		return -EINVAL;
	case CGM_CONF_STRING:
		if (strlen(val) >= k->size)
			return -ENAMETOOLONG;
		memcpy(str_field(c, k), val, strlen(val) + 1);
		return 0;
	}
	return -EINVAL;
}

void cgm_conf_defaults(struct cgm_config *conf)
{
	memset(conf, 0, sizeof(*conf));
	for (size_t i = 0; i < cgm_conf_nkeys; i++) {
		/* The defaults are part of the table and tested: they parse. */
		(void)conf_set(conf, &cgm_conf_keys[i], cgm_conf_keys[i].def);
	}
}

static const struct cgm_conf_key *find_key(const char *name)
{
	for (size_t i = 0; i < cgm_conf_nkeys; i++)
		if (strcmp(cgm_conf_keys[i].name, name) == 0)
			return &cgm_conf_keys[i];
	return NULL;
}

/* Trim blanks at both ends of @s in place. */
static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n'))
		*--e = '\0';
	return s;
}

static int parse_item(struct cgm_config *conf, char *item, bool quiet)
{
	const struct cgm_conf_key *k;
	char expected[256];
	char *eq, *key, *val;
	int err;

	eq = strchr(item, '=');
	if (eq)
		*eq = '\0';
	key = trim(item);
	val = eq ? trim(eq + 1) : NULL;

	k = find_key(key);
	if (!k) {
		if (!quiet)
			cgm_log("CGMALLOC_CONF: unknown key '%s' (see 'cgmctl help conf' for the keys)",
				key);
		return -ENOENT;
	}
	if (!val) {
		/* A bare boolean key means "on": CGMALLOC_CONF=verbose. */
		if (k->type == CGM_CONF_BOOL) {
			*bool_field(conf, k) = true;
			return 0;
		}
		if (!quiet)
			cgm_log("CGMALLOC_CONF: missing value for '%s' (%s)", key,
				cgm_conf_expected(k, expected, sizeof(expected)));
		return -EINVAL;
	}
	err = conf_set(conf, k, val);
	if (err && !quiet)
		cgm_log("CGMALLOC_CONF: bad value '%s' for '%s' (%s)", val, key,
			cgm_conf_expected(k, expected, sizeof(expected)));
	return err;
}

/*
 * A text too long to take is ignored, but not a strict=1 in it: the user
 * who asked for bad input to be fatal gets that for this bad input too.
 */
static void apply_strict(struct cgm_config *conf, const char *text)
{
	const struct cgm_conf_key *k = find_key("strict");

	for (const char *item = text; item; item = strchr(item, ',') ? strchr(item, ',') + 1 : NULL) {
		const char *comma = strchr(item, ',');
		size_t len = comma ? (size_t)(comma - item) : strlen(item);
		char buf[64], *eq, *val;

		if (len >= sizeof(buf))
			continue;
		memcpy(buf, item, len);
		buf[len] = '\0';
		eq = strchr(buf, '=');
		if (eq)
			*eq = '\0';
		if (strcmp(trim(buf), "strict") != 0)
			continue;
		val = eq ? trim(eq + 1) : NULL;
		if (!val)
			*bool_field(conf, k) = true;
		else
			(void)conf_set(conf, k, val);
	}
}

int cgm_conf_parse(struct cgm_config *conf, const char *text, bool quiet)
{
	char buf[CGM_CONF_ENV_MAX];
	char *item, *next;
	int bad = 0;

	if (!text)
		return 0;
	if (strlen(text) >= sizeof(buf)) {
		if (!quiet)
			cgm_log("CGMALLOC_CONF: longer than %zu bytes, ignored but for strict=",
				sizeof(buf) - 1);
		apply_strict(conf, text);
		return 1;
	}
	memcpy(buf, text, strlen(text) + 1);
	for (item = buf; item; item = next) {
		next = strchr(item, ',');
		if (next)
			*next++ = '\0';
		if (*trim(item) == '\0')
			continue;	/* "a=1,,b=2" and a trailing comma are fine */
		if (parse_item(conf, item, quiet) < 0)
			bad++;
	}
	return bad;
}

const char *cgm_conf_format(const struct cgm_config *conf,
			    const struct cgm_conf_key *k, char *buf,
			    size_t len)
{
	const char *base = (const char *)conf + k->offset;
	uint64_t u;
	int i;
	bool b;

	switch (k->type) {
	case CGM_CONF_BOOL:
		memcpy(&b, base, sizeof(b));
		snprintf(buf, len, "%d", b ? 1 : 0);
		break;
	case CGM_CONF_SIZE:
		memcpy(&u, base, sizeof(u));
		cgm_format_size(u, buf, len);
		break;
	case CGM_CONF_UINT:
		memcpy(&u, base, sizeof(u));
		snprintf(buf, len, "%" PRIu64, u);
		break;
	case CGM_CONF_ENUM:
		memcpy(&i, base, sizeof(i));
		snprintf(buf, len, "%s", k->names[i]);
		break;
	case CGM_CONF_STRING:
		snprintf(buf, len, "%s", base);
		break;
	}
	return buf;
}
