/*
 * A second translation unit for tests/test_static_key.c: it defines one
 * key and has its own sites on the key the test file defines.
 */
#include "cgm/static_key.h"
#include "sk_test.h"

DEFINE_STATIC_KEY_FALSE(sk_shared_key);

__attribute__((noinline)) bool other_tu_shared_unlikely(void)
{
	return static_branch_unlikely(&sk_shared_key);
}

__attribute__((noinline)) bool other_tu_main_likely(void)
{
	return static_branch_likely(&sk_main_true);
}
