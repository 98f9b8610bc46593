/*
 * Unit tests of the CGMALLOC_CONF parser (shim/config.c) and its table
 * (shim/config_table.c).  Linked with those files directly, not with the
 * shim, so they also run under AddressSanitizer.
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgm/config.h"
#include "cgm/log.h"
#include "cgm/strbuf.h"
#include "check_run.h"

/* Run cgm_conf_parse with stderr captured into @err. */
static int parse_capture(struct cgm_config *c, const char *text, char *err,
			 size_t len)
{
	char path[] = "/tmp/cgm-test-conf-XXXXXX";
	int fd = mkstemp(path), saved = dup(2), bad;
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	unlink(path);
	dup2(fd, 2);
	bad = cgm_conf_parse(c, text, false);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, err, len - 1, 0);
	err[n > 0 ? n : 0] = '\0';
	close(fd);
	return bad;
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

START_TEST(test_defaults_parse)
{
	struct cgm_config c;

	/* Every default in the table is a valid value of its key. */
	for (size_t i = 0; i < cgm_conf_nkeys; i++) {
		char text[CGM_CONF_STR_MAX + 64];

		cgm_conf_defaults(&c);
		if (cgm_conf_keys[i].def[0] == '\0')
			continue;
		snprintf(text, sizeof(text), "%s=%s", cgm_conf_keys[i].name,
			 cgm_conf_keys[i].def);
		ck_assert_msg(cgm_conf_parse(&c, text, true) == 0, "default of %s",
			      cgm_conf_keys[i].name);
	}
	cgm_conf_defaults(&c);
	ck_assert(!c.verbose);
	ck_assert(!c.strict);
	ck_assert(c.accounting);
	ck_assert_uint_eq(c.charge_batch, 64);
	ck_assert_uint_eq(c.max, CGM_SIZE_MAX);
	ck_assert_int_eq(c.static_keys, CGM_SK_ON);
	ck_assert_str_eq(c.group, "");
}
END_TEST

START_TEST(test_table_is_well_formed)
{
	for (size_t i = 0; i < cgm_conf_nkeys; i++) {
		const struct cgm_conf_key *k = &cgm_conf_keys[i];

		ck_assert_ptr_nonnull(cgm_conf_key_help(k));
		ck_assert_uint_gt(strlen(cgm_conf_key_help(k)), 10);
		ck_assert(k->type != CGM_CONF_ENUM || k->names != NULL);
		ck_assert(k->type != CGM_CONF_UINT || k->min <= k->max);
		for (size_t j = 0; j < i; j++)
			ck_assert_str_ne(k->name, cgm_conf_keys[j].name);
	}
}
END_TEST

START_TEST(test_values_of_every_type)
{
	struct cgm_config c;
	char err[4096];

	cgm_conf_defaults(&c);
	ck_assert_int_eq(parse_capture(&c, "verbose=1,strict=yes,accounting=off,"
				       "charge_batch=128,max=512M,high=1g,oom=kill,"
				       "stats=exit,group=/batch/job1,static_keys=off",
				       err, sizeof(err)), 0);
	ck_assert_str_eq(err, "");
	ck_assert(c.verbose);
	ck_assert(c.strict);
	ck_assert(!c.accounting);
	ck_assert_uint_eq(c.charge_batch, 128);
	ck_assert_uint_eq(c.max, 512ULL << 20);
	ck_assert_uint_eq(c.high, 1ULL << 30);
	ck_assert_int_eq(c.oom, CGM_OOM_KILL);
	ck_assert_int_eq(c.stats, CGM_STATS_EXIT);
	ck_assert_str_eq(c.group, "/batch/job1");
	ck_assert_int_eq(c.static_keys, CGM_SK_OFF);
}
END_TEST

START_TEST(test_blanks_empty_items_and_bare_bool)
{
	struct cgm_config c;
	char err[4096];

	cgm_conf_defaults(&c);
	ck_assert_int_eq(parse_capture(&c, " verbose , , max = 4K ,", err, sizeof(err)), 0);
	ck_assert_str_eq(err, "");
	ck_assert(c.verbose);
	ck_assert_uint_eq(c.max, 4096);
	ck_assert_int_eq(parse_capture(&c, "", err, sizeof(err)), 0);
	ck_assert_int_eq(cgm_conf_parse(&c, NULL, false), 0);
}
END_TEST

START_TEST(test_bad_value_message)
{
	struct cgm_config c;
	char err[4096];

	cgm_conf_defaults(&c);
	ck_assert_int_eq(parse_capture(&c, "max=abc", err, sizeof(err)), 1);
	ck_assert_str_eq(err, "cgmalloc: CGMALLOC_CONF: bad value 'abc' for 'max' "
			 "(expected a size like 512M or 'max')\n");
	/* The key keeps its previous value. */
	ck_assert_uint_eq(c.max, CGM_SIZE_MAX);
}
END_TEST

START_TEST(test_each_error_is_one_line_and_keeps_default)
{
	static const char *const bad[] = {
		"nosuchkey=1", "verbose=2", "charge_batch=0", "charge_batch=65537",
		"charge_batch=12x", "charge_batch=", "max=", "max=12Q", "max=-1",
		"max=08", "high=1Gx", "max=1 G", "oom=maybe",
		"stats", "group", "=5", "static_keys=sometimes",
	};
	struct cgm_config c, d;
	char err[4096];

	cgm_conf_defaults(&d);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cgm_conf_defaults(&c);
		ck_assert_msg(parse_capture(&c, bad[i], err, sizeof(err)) == 1, "%s", bad[i]);
		ck_assert_msg(count_lines(err) == 1, "'%s' gave: %s", bad[i], err);
		ck_assert(strncmp(err, "cgmalloc: CGMALLOC_CONF: ", 25) == 0);
		ck_assert_msg(memcmp(&c, &d, sizeof(c)) == 0, "'%s' changed the config", bad[i]);
	}
}
END_TEST

START_TEST(test_errors_do_not_stop_later_items)
{
	struct cgm_config c;
	char err[4096];

	cgm_conf_defaults(&c);
	ck_assert_int_eq(parse_capture(&c, "foo=1,max=1M,bar,high=x,verbose=1",
				       err, sizeof(err)), 3);
	ck_assert_int_eq(count_lines(err), 3);
	ck_assert_uint_eq(c.max, 1 << 20);
	ck_assert(c.verbose);
	ck_assert_uint_eq(c.high, CGM_SIZE_MAX);
}
END_TEST

/*
 * Sizes as the kernel's memory.max takes them: strstrip(), then "max" or
 * one memparse() to the end.  V is what cgm_parse_size() gives, or the
 * error; MAXED marks a number past 64 bits, saturated to "max" where the
 * kernel's would wrap around.
 */
#define MAXED CGM_SIZE_MAX
static const struct size_case { const char *s; int err; uint64_t v; } size_cases[] = {
	/* decimal, and each suffix in both cases (powers of 1024) */
	{ "0", 0, 0 }, { "1", 0, 1 }, { "4096", 0, 4096 },
	{ "1k", 0, 1ULL << 10 }, { "1K", 0, 1ULL << 10 },
	{ "3m", 0, 3ULL << 20 }, { "3M", 0, 3ULL << 20 },
	{ "2g", 0, 2ULL << 30 }, { "2G", 0, 2ULL << 30 },
	{ "5t", 0, 5ULL << 40 }, { "5T", 0, 5ULL << 40 },
	{ "6p", 0, 6ULL << 50 }, { "6P", 0, 6ULL << 50 },
	{ "1e", 0, 1ULL << 60 }, { "1E", 0, 1ULL << 60 }, { "15E", 0, 15ULL << 60 },
	{ "9223372036854775807", 0, INT64_MAX },
	{ "9223372036854775808", 0, 1ULL << 63 }, { "8E", 0, 1ULL << 63 },
	{ "18446744073709551614", 0, UINT64_MAX - 1 },
	{ "16777215T", 0, 16777215ULL << 40 },
	/* hexadecimal after 0x or 0X; 'e' there is a digit, not exbi */
	{ "0x100000", 0, 1ULL << 20 }, { "0X100000", 0, 1ULL << 20 },
	{ "0xaBcD", 0, 0xabcd }, { "0x1G", 0, 1ULL << 30 }, { "0x1e", 0, 0x1e },
	{ "0x1E", 0, 0x1e }, { "0x0", 0, 0 },
	/* octal after a leading 0 */
	{ "010", 0, 8 }, { "00", 0, 0 }, { "0777", 0, 0777 }, { "07k", 0, 7ULL << 10 },
	{ "0100M", 0, 64ULL << 20 },
	/* past 64 bits: saturated, in every base and by a suffix */
	{ "18446744073709551615", 0, MAXED }, { "18446744073709551616", 0, MAXED },
	{ "99999999999999999999", 0, MAXED }, { "99999999999T", 0, MAXED },
	{ "16777216T", 0, MAXED }, { "16E", 0, MAXED }, { "17179869184G", 0, MAXED },
	{ "0xffffffffffffffff", 0, MAXED }, { "0xffffffffffffffffff", 0, MAXED },
	{ "01777777777777777777777", 0, MAXED }, { "02000000000000000000000", 0, MAXED },
	/* blanks around it are stripped, as strstrip() does; 0xa0 is one to the kernel */
	{ " 1G ", 0, 1ULL << 30 }, { "\t1G\n", 0, 1ULL << 30 }, { "1G\n", 0, 1ULL << 30 },
	{ "\v\f\r4k", 0, 4096 }, { "\xa0" "1M\xa0", 0, 1ULL << 20 },
	/* "max", exactly, once stripped */
	{ "max", 0, CGM_SIZE_MAX }, { "max\n", 0, CGM_SIZE_MAX }, { " max ", 0, CGM_SIZE_MAX },
	{ "\tmax\r\n", 0, CGM_SIZE_MAX },
	{ "MAX", -EINVAL, 0 }, { "Max", -EINVAL, 0 }, { "max1", -EINVAL, 0 },
	{ "maxM", -EINVAL, 0 }, { "m ax", -EINVAL, 0 }, { "max max", -EINVAL, 0 },
	/* empty: the kernel's reads 0, ours refuses */
	{ "", -EINVAL, 0 }, { " ", -EINVAL, 0 }, { "\n", -EINVAL, 0 }, { "\t \n", -EINVAL, 0 },
	/* a suffix without a number: the kernel's reads 0, ours refuses */
	{ "M", -EINVAL, 0 }, { "k", -EINVAL, 0 }, { "E", -EINVAL, 0 },
	/* anything after the one suffix */
	{ "1Gx", -EINVAL, 0 }, { "1MB", -EINVAL, 0 }, { "1KK", -EINVAL, 0 },
	{ "1e5", -EINVAL, 0 }, { "1.5G", -EINVAL, 0 }, { "12Q", -EINVAL, 0 },
	/* blanks inside */
	{ "1 G", -EINVAL, 0 }, { "1 2", -EINVAL, 0 }, { "0x1 G", -EINVAL, 0 },
	{ "1M 2M", -EINVAL, 0 },
	/* no sign: simple_strtoull() reads none, so nothing is read */
	{ "-1", -EINVAL, 0 }, { "-5", -EINVAL, 0 }, { "+5", -EINVAL, 0 },
	/* a prefix with no digit, or a digit not of the base */
	{ "0x", -EINVAL, 0 }, { "0xg", -EINVAL, 0 }, { "0x ", -EINVAL, 0 },
	{ "08", -EINVAL, 0 }, { "09", -EINVAL, 0 }, { "0128", -EINVAL, 0 },
	{ "0b101", -EINVAL, 0 }, { "abc", -EINVAL, 0 },
};

START_TEST(test_sizes)
{
	for (size_t i = 0; i < sizeof(size_cases) / sizeof(size_cases[0]); i++) {
		const struct size_case *c = &size_cases[i];
		uint64_t v = 12345;
		int err = cgm_parse_size(c->s, &v);

		ck_assert_msg(err == c->err, "'%s': %d, expected %d", c->s, err, c->err);
		if (!err)
			ck_assert_msg(v == c->v, "'%s': %" PRIu64 ", expected %" PRIu64,
				      c->s, v, c->v);
		else
			ck_assert_msg(v == 12345, "'%s' refused, but changed the value", c->s);
	}
}
END_TEST

/* CGMALLOC_CONF's max= and high= take a size with the same parser. */
START_TEST(test_conf_sizes_are_memory_max_sizes)
{
	struct cgm_config c;
	char text[64];

	for (size_t i = 0; i < sizeof(size_cases) / sizeof(size_cases[0]); i++) {
		const struct size_case *k = &size_cases[i];

		for (int high = 0; high < 2; high++) {
			uint64_t *field = high ? &c.high : &c.max;

			cgm_conf_defaults(&c);
			*field = 12345;
			snprintf(text, sizeof(text), "%s=%s", high ? "high" : "max", k->s);
			ck_assert_msg(cgm_conf_parse(&c, text, true) == (k->err ? 1 : 0), "%s", text);
			ck_assert_msg(*field == (k->err ? 12345 : k->v), "%s: %" PRIu64, text, *field);
		}
	}
}
END_TEST

/* A text, the number read from it, and how many of its bytes were read. */
struct number_case {
	const char *s;
	uint64_t v;
	size_t used;
};

/* @parse gives each case's number and stops where the case says. */
static void check_numbers(uint64_t (*parse)(const char *, const char **),
			  const struct number_case *cases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *end = NULL;
		uint64_t v = parse(cases[i].s, &end);

		ck_assert_msg(v == cases[i].v, "'%s': %" PRIu64, cases[i].s, v);
		ck_assert_msg(end == cases[i].s + cases[i].used, "'%s': read %td, expected %zu",
			      cases[i].s, end - cases[i].s, cases[i].used);
	}
}

/* cgm_memparse() reads a number and a suffix and says where it stopped. */
START_TEST(test_memparse_end)
{
	static const struct number_case cases[] = {
		{ "1G swappiness=5", 1ULL << 30, 2 }, { "1Gx", 1ULL << 30, 2 },
		{ "1KM", 1024, 2 }, { "1e5", 1ULL << 60, 2 }, { "0x1e5", 0x1e5, 5 },
		{ "0x", 0, 1 }, { "0xg", 0, 1 }, { "08", 0, 1 }, { "0b1", 0, 1 },
		{ "16E", UINT64_MAX, 3 }, { "99999999999999999999K", UINT64_MAX, 21 },
		{ "M", 0, 0 }, { "", 0, 0 }, { " 1", 0, 0 }, { "-1", 0, 0 }, { "+1", 0, 0 },
		{ "max", 0, 0 },
	};

	check_numbers(cgm_memparse, cases, sizeof(cases) / sizeof(cases[0]));
	ck_assert_str_eq(cgm_skip_spaces(" \t\n\v\f\r\xa0x "), "x ");
}
END_TEST

/* cgm_parse_decimal() reads digits only, saturates, and says where it stopped. */
START_TEST(test_parse_decimal)
{
	static const struct number_case cases[] = {
		{ "0\n", 0, 1 }, { "17 42", 17, 2 }, { "0-3", 0, 1 }, { "010", 10, 3 },
		{ "0x10", 0, 1 }, { "18446744073709551615", UINT64_MAX, 20 },
		{ "18446744073709551616", UINT64_MAX, 20 }, { "99999999999999999999999", UINT64_MAX, 23 },
		{ "1844674407370955161", 1844674407370955161ULL, 19 },
		{ "", 0, 0 }, { " 1", 0, 0 }, { "-1", 0, 0 }, { "+1", 0, 0 }, { "1K", 1, 1 },
	};

	check_numbers(cgm_parse_decimal, cases, sizeof(cases) / sizeof(cases[0]));
	ck_assert_uint_eq(cgm_parse_decimal("123", NULL), 123);
}
END_TEST

/* CGMALLOC_CONF is read from the environment as it stands, the first definition winning as getenv's. */
START_TEST(test_conf_env)
{
	ck_assert_int_eq(setenv("CGMALLOC_CONFX", "no", 1), 0);
	ck_assert_int_eq(unsetenv("CGMALLOC_CONF"), 0);
	ck_assert_ptr_null(cgm_conf_env());
	ck_assert_int_eq(setenv("CGMALLOC_CONF", "verbose=1,max=1G", 1), 0);
	ck_assert_str_eq(cgm_conf_env(), getenv("CGMALLOC_CONF"));
	ck_assert_int_eq(setenv("CGMALLOC_CONF", "", 1), 0);
	ck_assert_str_eq(cgm_conf_env(), "");
	ck_assert_int_eq(unsetenv("CGMALLOC_CONF"), 0);
	ck_assert_ptr_null(cgm_conf_env());
	{
		char a[] = "CGMALLOC_CON=x", b[] = "CGMALLOC_CONF=first", c[] = "CGMALLOC_CONF=second";
		char *fake[] = { a, b, c, NULL }, **saved = environ;

		environ = fake;
		ck_assert_str_eq(cgm_conf_env(), "first");
		environ = NULL;
		ck_assert_ptr_null(cgm_conf_env());
		environ = saved;
	}
}
END_TEST

/* Strings built in place: what fits is whole, what does not is cut, terminated, and stays cut. */
START_TEST(test_strbuf)
{
	char buf[12];
	size_t at = 0;

	ck_assert(cgm_str_add(buf, sizeof(buf), &at, "/dev"));
	ck_assert(cgm_str_add(buf, sizeof(buf), &at, "/x-"));
	ck_assert(cgm_str_add_u64(buf, sizeof(buf), &at, 1000));
	ck_assert_str_eq(buf, "/dev/x-1000");
	ck_assert_uint_eq(at, 11);
	ck_assert(!cgm_str_add(buf, sizeof(buf), &at, "y"));
	ck_assert_str_eq(buf, "/dev/x-1000");
	ck_assert_uint_eq(at, sizeof(buf));
	ck_assert(!cgm_str_add(buf, sizeof(buf), &at, ""));
	ck_assert_str_eq(buf, "/dev/x-1000");

	at = 0;
	ck_assert(cgm_str_add(buf, sizeof(buf), &at, "abc"));
	ck_assert(!cgm_str_add_u64(buf, sizeof(buf), &at, UINT64_MAX));
	ck_assert_str_eq(buf, "abc18446744");
	at = 0;
	ck_assert(cgm_str_add_u64(buf, sizeof(buf), &at, 0));
	ck_assert_str_eq(buf, "0");
	ck_assert(cgm_str_copy(buf, sizeof(buf), ""));
	ck_assert_str_eq(buf, "");
	ck_assert(cgm_str_copy(buf, sizeof(buf), "hello world"));
	ck_assert(!cgm_str_copy(buf, sizeof(buf), "hello world!"));
	ck_assert_str_eq(buf, "hello world");
	ck_assert(!cgm_str_copy(buf, 1, "x"));
	ck_assert_str_eq(buf, "");
}
END_TEST

/* What is formatted parses back to the same number. */
START_TEST(test_format_parses_back)
{
	static const uint64_t values[] = {
		0, 1, 7, 8, 4096, 1ULL << 63, UINT64_MAX - 1, UINT64_MAX,
	};
	char buf[32];

	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		uint64_t v = 12345;

		ck_assert_int_eq(cgm_parse_size(cgm_format_size(values[i], buf, sizeof(buf)), &v), 0);
		ck_assert_msg(v == values[i], "%s", buf);
	}
}
END_TEST

START_TEST(test_long_strings_refused)
{
	struct cgm_config c;
	char text[CGM_CONF_STR_MAX + 32], err[4096];

	cgm_conf_defaults(&c);
	strcpy(text, "group=/");
	memset(text + 7, 'a', CGM_CONF_STR_MAX);
	text[7 + CGM_CONF_STR_MAX] = '\0';
	ck_assert_int_eq(parse_capture(&c, text, err, sizeof(err)), 1);
	ck_assert_str_eq(c.group, "");
	ck_assert_int_eq(count_lines(err), 1);
}
END_TEST

START_TEST(test_whole_text_too_long)
{
	static char text[CGM_CONF_ENV_MAX + 10];
	struct cgm_config c;
	char err[4096];

	cgm_conf_defaults(&c);
	memset(text, ',', sizeof(text) - 1);
	memcpy(text, "verbose=1", 9);
	ck_assert_int_eq(parse_capture(&c, text, err, sizeof(err)), 1);
	ck_assert(!c.verbose);
	ck_assert_int_eq(count_lines(err), 1);
}
END_TEST

/* A text too long is ignored as a whole, all but a strict= in it. */
START_TEST(test_whole_text_too_long_keeps_strict)
{
	static char text[CGM_CONF_ENV_MAX + 10];
	struct cgm_config c;
	char err[4096];

	cgm_conf_defaults(&c);
	memset(text, ',', sizeof(text) - 1);
	memcpy(text, "verbose=1, strict = on", 22);
	ck_assert_int_eq(parse_capture(&c, text, err, sizeof(err)), 1);
	ck_assert(!c.verbose);
	ck_assert(c.strict);
	ck_assert_int_eq(count_lines(err), 1);
}
END_TEST

/* Messages are one printable line: control bytes '?', bytes not UTF-8 \xNN. */
START_TEST(test_escape_line)
{
	char out[64];

	ck_assert_uint_eq(cgm_escape_line("plain", out, sizeof(out)), 5);
	ck_assert_str_eq(out, "plain");
	cgm_escape_line("a\nb\tc\x7f", out, sizeof(out));
	ck_assert_str_eq(out, "a?b?c?");
	/* UTF-8 passes: e acute, a euro sign, a four-byte emoji. */
	cgm_escape_line("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", out, sizeof(out));
	ck_assert_str_eq(out, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	/* Latin-1, a lone continuation, an overlong '/', a surrogate, a cut sequence. */
	cgm_escape_line("caf\xe9|\x80|\xc0\xaf|\xed\xa0\x80|\xe2\x82", out, sizeof(out));
	ck_assert_str_eq(out, "caf\\xe9|\\x80|\\xc0\\xaf|\\xed\\xa0\\x80|\\xe2\\x82");
	/* It stops whole within the room it has. */
	ck_assert_uint_eq(cgm_escape_line("\xff\xff", out, 6), 4);
	ck_assert_str_eq(out, "\\xff");
}
END_TEST

START_TEST(test_format_roundtrip)
{
	struct cgm_config c, d;
	char val[CGM_CONF_STR_MAX], text[CGM_CONF_STR_MAX + 64];

	cgm_conf_defaults(&c);
	ck_assert_int_eq(cgm_conf_parse(&c, "verbose=1,max=3G,group=/a/b,oom=kill,charge_batch=7", true), 0);
	cgm_conf_defaults(&d);
	for (size_t i = 0; i < cgm_conf_nkeys; i++) {
		cgm_conf_format(&c, &cgm_conf_keys[i], val, sizeof(val));
		snprintf(text, sizeof(text), "%s=%s", cgm_conf_keys[i].name, val);
		if (val[0] == '\0')
			continue;
		ck_assert_msg(cgm_conf_parse(&d, text, true) == 0, "%s", text);
	}
	ck_assert_mem_eq(&c, &d, sizeof(c));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, test_defaults_parse);
	tcase_add_test(tc, test_table_is_well_formed);
	tcase_add_test(tc, test_values_of_every_type);
	tcase_add_test(tc, test_blanks_empty_items_and_bare_bool);
	tcase_add_test(tc, test_bad_value_message);
	tcase_add_test(tc, test_each_error_is_one_line_and_keeps_default);
	tcase_add_test(tc, test_errors_do_not_stop_later_items);
	tcase_add_test(tc, test_sizes);
	tcase_add_test(tc, test_conf_sizes_are_memory_max_sizes);
	tcase_add_test(tc, test_memparse_end);
	tcase_add_test(tc, test_parse_decimal);
	tcase_add_test(tc, test_conf_env);
	tcase_add_test(tc, test_strbuf);
	tcase_add_test(tc, test_format_parses_back);
	tcase_add_test(tc, test_long_strings_refused);
	tcase_add_test(tc, test_whole_text_too_long);
	tcase_add_test(tc, test_whole_text_too_long_keeps_strict);
	tcase_add_test(tc, test_escape_line);
	tcase_add_test(tc, test_format_roundtrip);
	suite_add_tcase(s, tc);
	return check_run(s);
}
