/*
 * libFuzzer target over the CGMALLOC_CONF parser (shim/config.c).
 *
 * The input is a CGMALLOC_CONF text; its first eight bytes are also a
 * size for the size formatter.  Besides "never crashes", it checks what
 * the parser promises and what cgmctl and the exit report rely on:
 *   - a key the text does not name keeps its default;
 *   - parsing is idempotent: the same text again changes nothing and
 *     reports the same number of bad items;
 *   - every key's formatted value, parsed back as "key=value", gives the
 *     same value, one key at a time and all keys in one text;
 *   - a size formatted by cgm_format_size parses back to the same number,
 *     and a text that cgm_parse_size accepts survives the round trip.
 * A violated property aborts with the key and values involved.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgm/config.h"
#include "fuzz/fuzz.h"

/* A formatted value: the longest string plus room for any number. */
#define VALUE_MAX (CGM_CONF_STR_MAX + 64)

static void fail(const char *what, const struct cgm_conf_key *k,
		 const char *a, const char *b)
{
	fprintf(stderr, "fuzz_config: %s (key %s): '%s' vs '%s'\n", what,
		k ? k->name : "-", a, b);
	abort();
}

static const char *field(const struct cgm_config *c, const struct cgm_conf_key *k)
{
	return (const char *)c + k->offset;
}

/* Field by field: padding bytes between fields are nobody's business. */
static bool same_value(const struct cgm_config *a, const struct cgm_config *b,
		       const struct cgm_conf_key *k)
{
	if (k->type == CGM_CONF_STRING)
		return strcmp(field(a, k), field(b, k)) == 0;
	return memcmp(field(a, k), field(b, k), k->size) == 0;
}

static void check_same(const char *what, const struct cgm_config *a,
		       const struct cgm_config *b)
{
	char va[VALUE_MAX], vb[VALUE_MAX];

	for (size_t i = 0; i < cgm_conf_nkeys; i++) {
		const struct cgm_conf_key *k = &cgm_conf_keys[i];

		if (!same_value(a, b, k))
			fail(what, k, cgm_conf_format(a, k, va, sizeof(va)),
			     cgm_conf_format(b, k, vb, sizeof(vb)));
	}
}

/* Keys the text does not even mention must be left at their defaults. */
static void check_unnamed_keep_default(const char *text, const struct cgm_config *c)
{
	struct cgm_config def;
	char va[VALUE_MAX], vb[VALUE_MAX];

	cgm_conf_defaults(&def);
	for (size_t i = 0; i < cgm_conf_nkeys; i++) {
		const struct cgm_conf_key *k = &cgm_conf_keys[i];

		if (!strstr(text, k->name) && !same_value(c, &def, k))
			fail("a key the text does not name changed", k,
			     cgm_conf_format(c, k, va, sizeof(va)),
			     cgm_conf_format(&def, k, vb, sizeof(vb)));
	}
}

/* Every key's value, formatted and parsed back, alone and all together. */
static void check_round_trip(const struct cgm_config *c)
{
	static char all[CGM_CONF_ENV_MAX];
	char item[VALUE_MAX + 64], val[VALUE_MAX], back[VALUE_MAX];
	struct cgm_config one, every;
	size_t n = 0;

	for (size_t i = 0; i < cgm_conf_nkeys; i++) {
		const struct cgm_conf_key *k = &cgm_conf_keys[i];
		uint64_t size;

		cgm_conf_format(c, k, val, sizeof(val));
		snprintf(item, sizeof(item), "%s=%s", k->name, val);
		cgm_conf_defaults(&one);
		if (cgm_conf_parse(&one, item, true) != 0)
			fail("a formatted value is refused", k, item, "");
		if (!same_value(c, &one, k))
			fail("a formatted value parses to another", k, val,
			     cgm_conf_format(&one, k, back, sizeof(back)));
		if (k->type == CGM_CONF_SIZE) {
			uint64_t v;

			memcpy(&v, field(c, k), sizeof(v));
			if (cgm_parse_size(val, &size) != 0 || size != v)
				fail("cgm_parse_size of a formatted size", k, val, "");
		}
		n += (size_t)snprintf(all + n, sizeof(all) - n, "%s%s", i ? "," : "", item);
		if (n >= sizeof(all))
			fail("the keys' values do not fit in CGMALLOC_CONF", k, all, "");
	}
	cgm_conf_defaults(&every);
	if (cgm_conf_parse(&every, all, true) != 0)
		fail("the whole formatted configuration is refused", NULL, all, "");
	check_same("the whole formatted configuration parses to another", c, &every);
}

static void check_sizes(const uint8_t *data, size_t size, const char *text)
{
	char buf[32], again[32];
	uint64_t v = 0, back;

	/* Any number: formatted, then parsed, it is the same number. */
	memcpy(&v, data, size < sizeof(v) ? size : sizeof(v));
	cgm_format_size(v, buf, sizeof(buf));
	if (cgm_parse_size(buf, &back) != 0 || back != v)
		fail("cgm_format_size does not parse back", NULL, buf, "");
	/* Whatever cgm_parse_size accepts is a size that formats and parses back. */
	if (cgm_parse_size(text, &v) == 0) {
		cgm_format_size(v, buf, sizeof(buf));
		if (cgm_parse_size(buf, &back) != 0 || back != v)
			fail("an accepted size does not survive formatting", NULL, text, buf);
		cgm_format_size(back, again, sizeof(again));
		if (strcmp(buf, again))
			fail("a size formats two ways", NULL, buf, again);
	}
}

/* Help texts: NUL-terminated within their buffer whatever its size. */
static void check_expected(size_t len)
{
	char buf[256];

	for (size_t i = 0; i < cgm_conf_nkeys; i++) {
		const char *s;

		memset(buf, 'x', sizeof(buf));
		s = cgm_conf_expected(&cgm_conf_keys[i], buf, len);
		if (s == buf && !memchr(buf, '\0', len))
			fail("cgm_conf_expected leaves no NUL", &cgm_conf_keys[i], "", "");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Longer than CGM_CONF_ENV_MAX on purpose: the refusal is tested too. */
	static char text[2 * CGM_CONF_ENV_MAX + 1];
	struct cgm_config c, again, def;
	int bad, bad_again;

	if (size >= sizeof(text))
		size = sizeof(text) - 1;
	memcpy(text, data, size);
	text[size] = '\0';

	cgm_conf_defaults(&c);
	bad = cgm_conf_parse(&c, text, true);
	if (bad < 0)
		fail("negative count of bad items", NULL, text, "");
	if (strlen(text) >= CGM_CONF_ENV_MAX) {
		/* Too long: refused as a whole, nothing applied but a strict=. */
		cgm_conf_defaults(&def);
		if (bad != 1)
			fail("an over-long text is not one bad item", NULL, "", "");
		def.strict = c.strict;
		check_same("an over-long text changed the configuration", &c, &def);
	}
	check_unnamed_keep_default(text, &c);

	memcpy(&again, &c, sizeof(c));
	bad_again = cgm_conf_parse(&again, text, true);
	if (bad_again != bad)
		fail("the same text twice counts different bad items", NULL, text, "");
	check_same("parsing the same text twice is not idempotent", &c, &again);

	check_round_trip(&c);
	check_sizes(data, size, text);
	check_expected(size ? data[0] % 256 + 1 : 256);
	return 0;
}
