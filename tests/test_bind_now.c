/*
 * Binding a lazily bound library's slots at once (shim/bind_now.c), in
 * tests/bind_lib.c's library: before, slots are pending; after, none is,
 * and the functions called through them are the right ones.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bind_lib.h"
#include "cgm/bind_now.h"
#include "check_run.h"

START_TEST(test_binds_every_slot)
{
	struct cgm_bind_count n;
	mode_t old;

	/* LD_BIND_NOW makes the loader bind them all before main. */
	if (!getenv("LD_BIND_NOW"))
		ck_assert_int_ge(cgm_bind_pending(), 2);
	ck_assert_int_eq(cgm_bind_now(&n), 0);
	ck_assert_int_ge(n.slots, 2);
	ck_assert_int_eq(n.failed, 0);
	if (!getenv("LD_BIND_NOW"))
		ck_assert_int_ge(n.bound, 2);
	ck_assert_int_eq(cgm_bind_pending(), 0);

	/* The bound slots lead to the functions the resolver would pick. */
	ck_assert_int_eq(bind_lib_getppid(), getppid());
	old = bind_lib_umask(027);
	ck_assert_int_eq(umask(old), 027);

	/* Nothing left to write the second time. */
	ck_assert_int_eq(cgm_bind_now(&n), 0);
	ck_assert_int_eq(n.bound, 0);
}
END_TEST

/*
 * The loader's own resolver, run by a first call, writes into a slot what
 * cgm_bind_now() would have: the two slots it binds leave the pending
 * count.  (Each test runs in a fresh fork: no slot of the library was
 * bound by the test before.)
 */
START_TEST(test_resolver_agrees)
{
	const char *fork_mode = getenv("CK_FORK");
	int before, after;
	mode_t old;

	if (getenv("LD_BIND_NOW") || (fork_mode && strcmp(fork_mode, "no") == 0))
		return;
	before = cgm_bind_pending();
	ck_assert_int_eq(bind_lib_getppid(), getppid());
	old = bind_lib_umask(027);
	umask(old);
	after = cgm_bind_pending();
	ck_assert_int_eq(after, before - 2);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bind_now");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_binds_every_slot);
	tcase_add_test(tc, test_resolver_agrees);
	suite_add_tcase(s, tc);
	return check_run(s);
}
