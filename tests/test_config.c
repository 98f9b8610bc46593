/*
 * Unit tests of the CGMALLOC_CONF parser (shim/config.c) and its table
 * (shim/config_table.c).  Linked with those files directly, not with the
 * shim, so they also run under AddressSanitizer.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgm/config.h"
#include "cgm/log.h"
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

		ck_assert_ptr_nonnull(k->help);
		ck_assert_uint_gt(strlen(k->help), 10);
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
		"max=99999999999999999999", "max=17179869184G", "oom=maybe",
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

START_TEST(test_sizes)
{
	struct { const char *s; int err; uint64_t v; } cases[] = {
		{ "0", 0, 0 }, { "1", 0, 1 }, { "4096", 0, 4096 }, { "1k", 0, 1024 },
		{ "1K", 0, 1024 }, { "3M", 0, 3 << 20 }, { "2G", 0, 2ULL << 30 },
		{ "1T", 0, 1ULL << 40 }, { "max", 0, CGM_SIZE_MAX },
		{ "16777215T", 0, 16777215ULL << 40 },
		{ "16777216T", -ERANGE, 0 }, { "18446744073709551615", -ERANGE, 0 },
		{ "18446744073709551616", -ERANGE, 0 }, { "", -EINVAL, 0 },
		{ "M", -EINVAL, 0 }, { "1MB", -EINVAL, 0 }, { " 1", -EINVAL, 0 },
		{ "MAX", -EINVAL, 0 }, { "1.5G", -EINVAL, 0 }, { "-5", -EINVAL, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 12345;
		int err = cgm_parse_size(cases[i].s, &v);

		ck_assert_msg(err == cases[i].err, "'%s': %d", cases[i].s, err);
		if (!err)
			ck_assert_uint_eq(v, cases[i].v);
		else
			ck_assert_uint_eq(v, 12345);
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
	tcase_add_test(tc, test_long_strings_refused);
	tcase_add_test(tc, test_whole_text_too_long);
	tcase_add_test(tc, test_whole_text_too_long_keeps_strict);
	tcase_add_test(tc, test_escape_line);
	tcase_add_test(tc, test_format_roundtrip);
	suite_add_tcase(s, tc);
	return check_run(s);
}
