/*
 * The descriptors the library keeps (base/own_fds.c) and the guards of
 * close(), close_range(), closefrom(), dup2() and dup3() (shim/fd_guard.c,
 * linked into this program, so its calls go through them).
 *
 * What closes everything runs in a forked child: Check's own descriptors
 * must survive for the result to reach the runner.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgm/own_fds.h"

static bool is_open(int fd)
{
	return fcntl(fd, F_GETFD) != -1;
}

static int devnull(void)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	return fd;
}

START_TEST(test_keep_moves_high)
{
	int fd = devnull();
	int k = cgm_fd_keep(fd);
	struct rlimit rl;

	ck_assert_int_gt(k, fd);
	/* High: 960 and up under the usual soft limit of 1024, below 1024 always. */
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur >= 1024)
		ck_assert_int_ge(k, 960);
	ck_assert_int_lt(k, 1024);
	ck_assert(!is_open(fd));		/* moved, not copied */
	ck_assert_int_eq(fcntl(k, F_GETFD), FD_CLOEXEC);
	ck_assert(cgm_fd_kept(k));
	ck_assert_uint_eq(cgm_fd_kept_count(), 1);
	ck_assert_int_eq(cgm_fd_kept_from(0), k);
	ck_assert_int_eq(cgm_fd_kept_from((unsigned int)k + 1), -1);
	cgm_fd_close(k);
	ck_assert(!is_open(k));
	ck_assert(!cgm_fd_kept(k));
	ck_assert_uint_eq(cgm_fd_kept_count(), 0);
	ck_assert_int_eq(cgm_fd_keep(-1), -1);
}
END_TEST

START_TEST(test_close_leaves_kept)
{
	int k = cgm_fd_keep(devnull()), other = devnull();

	ck_assert_int_eq(close(k), 0);
	ck_assert(is_open(k));
	ck_assert_int_eq(close(other), 0);
	ck_assert(!is_open(other));
	errno = 0;
	ck_assert_int_eq(close(other), -1);
	ck_assert_int_eq(errno, EBADF);
	/* Forgotten, the number is the program's again. */
	cgm_fd_forget(k);
	ck_assert_int_eq(close(k), 0);
	ck_assert(!is_open(k));
}
END_TEST

/* In a child: open @n descriptors, keep two, run @how, and exit 0 if exactly the kept ones stay. */
static void close_all_in_child(int how)
{
	pid_t pid = fork();
	int st;

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fds[8], k1 = cgm_fd_keep(devnull()), k2 = cgm_fd_keep(devnull()), bad = 0;

		for (int i = 0; i < 8; i++)
			fds[i] = devnull();
		if (how == 0)
			bad |= close_range(3, ~0U, 0) != 0;
		else if (how == 1)
			closefrom(3);
		else
			for (int fd = 3; fd < 1024; fd++)
				close(fd);
		for (int i = 0; i < 8; i++)
			bad |= is_open(fds[i]) << 1;
		bad |= !is_open(k1) << 2;
		bad |= !is_open(k2) << 3;
		_exit(bad);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st));
	ck_assert_msg(WEXITSTATUS(st) == 0, "way %d: status %d (2: one of the program's "
		      "stayed open, 4 or 8: a kept one was closed)", how, WEXITSTATUS(st));
}

/*
 * A vfork() child (python3's subprocess) shares the table but not the
 * descriptors: its close() and close_range() close its own copies, and
 * the parent's stay open and kept.  @how: 0 close(), 1 close_range().
 */
static void vfork_child_closes(int how)
{
	int k = cgm_fd_keep(devnull()), st;
	pid_t pid = vfork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int r = how ? close_range((unsigned int)k, (unsigned int)k, 0) : close(k);

		_exit(r != 0 || is_open(k));
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "way %d: the vfork child's copy stayed open (status %#x)", how, st);
	ck_assert(is_open(k));
	ck_assert(cgm_fd_kept(k));
	ck_assert_int_eq(close(k), 0);
	ck_assert(is_open(k));
	cgm_fd_close(k);
}

START_TEST(test_vfork_child_close)
{
	vfork_child_closes(0);
}
END_TEST

START_TEST(test_vfork_child_close_range)
{
	vfork_child_closes(1);
}
END_TEST

START_TEST(test_close_range_skips_kept)
{
	close_all_in_child(0);
}
END_TEST

START_TEST(test_closefrom_skips_kept)
{
	close_all_in_child(1);
}
END_TEST

START_TEST(test_close_loop_skips_kept)
{
	close_all_in_child(2);
}
END_TEST

/* Setting close-on-exec on a range closes nothing: passed through whole. */
START_TEST(test_close_range_cloexec)
{
	int k = cgm_fd_keep(devnull()), fd = open("/dev/null", O_RDONLY);

	ck_assert_int_eq(close_range((unsigned int)fd, (unsigned int)k, CLOSE_RANGE_CLOEXEC), 0);
	ck_assert_int_eq(fcntl(fd, F_GETFD), FD_CLOEXEC);
	ck_assert(is_open(k));
	close(fd);
	cgm_fd_close(k);
}
END_TEST

START_TEST(test_dup2_onto_kept_refused)
{
	int k = cgm_fd_keep(devnull()), pipefd[2], other;
	struct stat before, after;

	ck_assert_int_eq(pipe(pipefd), 0);
	ck_assert_int_eq(fstat(k, &before), 0);
	errno = 0;
	ck_assert_int_eq(dup2(pipefd[0], k), -1);
	ck_assert_int_eq(errno, EBUSY);
	errno = 0;
	ck_assert_int_eq(dup3(pipefd[0], k, O_CLOEXEC), -1);
	ck_assert_int_eq(errno, EBUSY);
	ck_assert_int_eq(fstat(k, &after), 0);
	ck_assert(before.st_ino == after.st_ino && before.st_dev == after.st_dev);
	/* Elsewhere, and onto itself, as ever. */
	other = dup2(pipefd[0], k - 1);
	ck_assert_int_eq(other, k - 1);
	ck_assert_int_eq(dup2(k, k), k);
	close(other);
	close(pipefd[0]);
	close(pipefd[1]);
	cgm_fd_close(k);
}
END_TEST

/* A full table: the descriptor is still moved and usable, just not guarded. */
START_TEST(test_table_full)
{
	int k[CGM_OWN_FDS_MAX + 1];

	for (int i = 0; i <= CGM_OWN_FDS_MAX; i++)
		k[i] = cgm_fd_keep(devnull());
	ck_assert_uint_eq(cgm_fd_kept_count(), CGM_OWN_FDS_MAX);
	ck_assert(is_open(k[CGM_OWN_FDS_MAX]));
	ck_assert(!cgm_fd_kept(k[CGM_OWN_FDS_MAX]));
	for (int i = 0; i <= CGM_OWN_FDS_MAX; i++)
		cgm_fd_close(k[i]);
	ck_assert_uint_eq(cgm_fd_kept_count(), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("own_fds");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_keep_moves_high);
	tcase_add_test(tc, test_close_leaves_kept);
	tcase_add_test(tc, test_vfork_child_close);
	tcase_add_test(tc, test_vfork_child_close_range);
	tcase_add_test(tc, test_close_range_skips_kept);
	tcase_add_test(tc, test_closefrom_skips_kept);
	tcase_add_test(tc, test_close_loop_skips_kept);
	tcase_add_test(tc, test_close_range_cloexec);
	tcase_add_test(tc, test_dup2_onto_kept_refused);
	tcase_add_test(tc, test_table_full);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
