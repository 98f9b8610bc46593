/*
 * The end of every Check test program's main(): run all of a suite's
 * cases and turn the outcome into the program's exit status.
 */
#ifndef CGM_CHECK_RUN_H
#define CGM_CHECK_RUN_H

#include <check.h>
#include <stdlib.h>

static inline int check_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif /* CGM_CHECK_RUN_H */
