/*
 * Tests of the static keys (shim/static_key*.c), compiled into this
 * executable with their own sites: semantics, the bytes of every site,
 * concurrency while another thread toggles, fork, and the fallback modes
 * (asked for by configuration, and forced by a seccomp filter that refuses
 * writable+executable mappings).  Each Check test runs in its own child,
 * so each initialises the keys in the mode its TCase asks for.
 *
 *   test_static_key            run the tests
 *   test_static_key --report   print the site report (for the objdump check)
 */
#include <check.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

#include "cgm/static_key.h"
#include "sk_test.h"
#include "check_run.h"

DEFINE_STATIC_KEY_TRUE(sk_main_true);
DEFINE_STATIC_KEY_FALSE(sk_false);
DEFINE_STATIC_KEY_TRUE(sk_true);
DEFINE_STATIC_KEY_FALSE(sk_conc);

/* Each site in its own function, so the compiler cannot merge them. */
#define SITE_FN(fn, kind, key) \
	__attribute__((noinline)) static bool fn(void) { return kind(&key); }
SITE_FN(false_unlikely, static_branch_unlikely, sk_false)
SITE_FN(false_likely, static_branch_likely, sk_false)
SITE_FN(true_unlikely, static_branch_unlikely, sk_true)
SITE_FN(true_likely, static_branch_likely, sk_true)
SITE_FN(main_true_unlikely, static_branch_unlikely, sk_main_true)
SITE_FN(shared_likely, static_branch_likely, sk_shared_key)
SITE_FN(conc_unlikely, static_branch_unlikely, sk_conc)
SITE_FN(conc_likely, static_branch_likely, sk_conc)

/* Sites of two keys: 0 outer off, 1 outer on, 2 both on. */
DEFINE_STATIC_KEY_FALSE(sk_outer);
DEFINE_STATIC_KEY_FALSE(sk_inner);
DEFINE_STATIC_KEY_FALSE(sk_conc_outer);
__attribute__((noinline)) static int refined(void)
{
	return static_branch_unlikely_refined(&sk_outer, &sk_inner);
}
/* The same keys, the "1" side falling through: JMP, NOP, JMP. */
__attribute__((noinline)) static int likely_refined(void)
{
	return static_branch_likely_refined(&sk_outer, &sk_inner);
}
/* Refines sk_conc: the concurrency tests toggle the inner key of a site. */
__attribute__((noinline)) static int conc_refined(void)
{
	return static_branch_unlikely_refined(&sk_conc_outer, &sk_conc);
}
/* Of the same keys: the toggles move it NOP <-> JMP. */
__attribute__((noinline)) static int conc_likely_refined(void)
{
	return static_branch_likely_refined(&sk_conc_outer, &sk_conc);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

/*
 * Toggles in the concurrency tests: 30,000 for the plain case (enough
 * to hit the patch windows), a third of that for the variants that fork
 * or block SIGTRAP, and thirty under valgrind.  SK_TEST_TOGGLES overrides
 * (make stress-static-key).
 */
static unsigned long toggles(unsigned long full)
{
	const char *env = getenv("SK_TEST_TOGGLES");

	if (env)
		return strtoul(env, NULL, 10);
	/*
	 * valgrind runs one thread at a time: there the run checks memory
	 * and self-modifying code, not volume.  With valgrind's default
	 * lock the spinners took whole time slices around every system call
	 * of a toggle (~0.6 s each: 30 toggles a test took 80-110 s of make
	 * check); with --fair-sched=yes (tests/static_key.mk) the threads
	 * take turns, and 30 take 10 s.
	 * Natively a toggle takes about 0.45 ms with four spinners on two
	 * CPUs: the counts of make check cost it about 22 s of the patched
	 * case (140000 took 63 s); make stress-static-key runs 200000 of each.
	 */
	return RUNNING_ON_VALGRIND ? 30 : full;
}

/* ---- modes: one fixture per TCase ---- */

static enum static_keys_mode expected_mode;

static void setup_patched(void)
{
	expected_mode = STATIC_KEYS_PATCHED;
	ck_assert_int_eq(static_keys_init(true), STATIC_KEYS_PATCHED);
}

static void setup_fallback_conf(void)
{
	const char *reason;

	expected_mode = STATIC_KEYS_FALLBACK;
	ck_assert_int_eq(static_keys_init(false), STATIC_KEYS_FALLBACK);
	static_keys_mode(&reason);
	ck_assert_str_eq(reason, "static_keys=off");
}

/*
 * Refuse mprotect() with PROT_WRITE|PROT_EXEC, as a hardened system
 * (SELinux execmod, PaX MPROTECT) would.
 */
static int deny_wx_mprotect(void)
{
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
#if defined(__x86_64__)
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
#else
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_AARCH64, 1, 0),
#endif
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mprotect, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
		BPF_STMT(BPF_ALU | BPF_AND | BPF_K, PROT_WRITE | PROT_EXEC),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROT_WRITE | PROT_EXEC, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(filter) / sizeof(filter[0]), .filter = filter };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0 ? -errno : 0;
}

static bool seccomp_usable(void)
{
	/* qemu-user and valgrind run our syscalls themselves. */
	return !RUNNING_ON_VALGRIND && !getenv("SK_TEST_UNDER_QEMU");
}

static void setup_fallback_seccomp(void)
{
	const char *reason;

	expected_mode = STATIC_KEYS_FALLBACK;
	if (!seccomp_usable())
		return;
	ck_assert_int_eq(deny_wx_mprotect(), 0);
	ck_assert_int_eq(static_keys_init(true), STATIC_KEYS_FALLBACK);
	static_keys_mode(&reason);
	ck_assert_msg(strstr(reason, "mprotect") && strstr(reason, "refused"),
		      "reason: %s", reason);
}

/* ---- semantics ---- */

/* Every site agrees with its key. */
static void ck_sites_agree(void)
{
	ck_assert_int_eq(false_unlikely(), static_key_enabled(&sk_false));
	ck_assert_int_eq(false_likely(), static_key_enabled(&sk_false));
	ck_assert_int_eq(true_unlikely(), static_key_enabled(&sk_true));
	ck_assert_int_eq(true_likely(), static_key_enabled(&sk_true));
	ck_assert_int_eq(main_true_unlikely(), static_key_enabled(&sk_main_true));
	ck_assert_int_eq(other_tu_main_likely(), static_key_enabled(&sk_main_true));
	ck_assert_int_eq(shared_likely(), static_key_enabled(&sk_shared_key));
	ck_assert_int_eq(other_tu_shared_unlikely(), static_key_enabled(&sk_shared_key));
	ck_assert_int_eq(refined(), !static_key_enabled(&sk_outer) ? 0 :
				    static_key_enabled(&sk_inner) ? 2 : 1);
	ck_assert_int_eq(likely_refined(), refined());
}

START_TEST(test_initial_values)
{
	ck_assert_int_eq(static_keys_mode(NULL), expected_mode);
	ck_assert(!static_key_enabled(&sk_false));
	ck_assert(static_key_enabled(&sk_true));
	ck_assert(!false_unlikely());
	ck_assert(!false_likely());
	ck_assert(true_unlikely());
	ck_assert(true_likely());
	ck_sites_agree();
}
END_TEST

START_TEST(test_enable_disable)
{
	static_branch_enable(&sk_false);
	ck_assert(false_unlikely());
	ck_assert(false_likely());
	static_branch_disable(&sk_true);
	ck_assert(!true_unlikely());
	ck_assert(!true_likely());
	ck_sites_agree();
	/* Set semantics: enabling twice then disabling once gives false. */
	static_branch_enable(&sk_false);
	static_branch_disable(&sk_false);
	ck_assert(!false_unlikely());
	ck_assert_int_eq(static_key_count(&sk_false.key), 0);
	ck_sites_agree();
}
END_TEST

START_TEST(test_refcount)
{
	static_branch_inc(&sk_false);
	static_branch_inc(&sk_false);
	ck_assert_int_eq(static_key_count(&sk_false.key), 2);
	ck_assert(false_unlikely());
	static_branch_dec(&sk_false);
	ck_assert(false_unlikely());		/* still one reference */
	ck_assert(false_likely());
	static_branch_dec(&sk_false);
	ck_assert(!false_unlikely());
	ck_assert(!false_likely());
	/* An unbalanced decrement is refused, not wrapped below zero. */
	static_branch_dec(&sk_false);
	ck_assert_int_eq(static_key_count(&sk_false.key), 0);
	ck_assert(!false_unlikely());
	/* Nested on a true key: it stays true while references remain. */
	static_branch_inc(&sk_true);
	static_branch_dec(&sk_true);
	ck_assert(true_likely());
	static_branch_dec(&sk_true);
	ck_assert(!true_likely());
	ck_sites_agree();
}
END_TEST

START_TEST(test_keys_across_translation_units)
{
	static_branch_enable(&sk_shared_key);
	ck_assert(other_tu_shared_unlikely());
	ck_assert(shared_likely());
	static_branch_disable(&sk_main_true);
	ck_assert(!other_tu_main_likely());
	ck_assert(!main_true_unlikely());
	ck_sites_agree();
	static_branch_disable(&sk_shared_key);
	static_branch_enable(&sk_main_true);
	ck_sites_agree();
}
END_TEST

/* Both kinds of site of sk_outer and sk_inner say @want. */
static void ck_refined(int want)
{
	ck_assert_int_eq(refined(), want);
	ck_assert_int_eq(likely_refined(), want);
}

START_TEST(test_refined_site)
{
	/* The inner key alone changes nothing: the site stays on its "0" side. */
	ck_refined(0);
	static_branch_enable(&sk_inner);
	ck_refined(0);
	ck_sites_agree();
	static_branch_enable(&sk_outer);
	ck_refined(2);
	static_branch_disable(&sk_inner);
	ck_refined(1);
	ck_sites_agree();
	/* Reference counts on the inner key, under the outer one. */
	static_branch_inc(&sk_inner);
	static_branch_inc(&sk_inner);
	static_branch_dec(&sk_inner);
	ck_refined(2);
	static_branch_dec(&sk_inner);
	ck_refined(1);
	/* Outer off wins over inner on. */
	static_branch_enable(&sk_inner);
	static_branch_disable(&sk_outer);
	ck_refined(0);
	ck_sites_agree();
	static_branch_disable(&sk_inner);
	ck_refined(0);
}
END_TEST

/* ---- the bytes of every site ---- */

static const unsigned char x86_nop5[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };

/* A yes side that is only "jmp rel32" is jumped over by the patcher. */
static uintptr_t x86_threaded(uintptr_t target)
{
	const unsigned char *t = (const unsigned char *)target;
	int32_t rel;

	if (t[0] != 0xe9)
		return target;
	memcpy(&rel, t + 1, 4);
	return target + 5 + (uintptr_t)(intptr_t)rel;
}

/* What a site's bytes must be, given the mode and its key. */
static void ck_site_bytes(void)
{
	unsigned int count, size = static_keys_site_size();
	const struct jump_entry *tab = static_keys_table(&count);

	/* 8 sites here, 2 in sk_other_tu.c, and 4 sites of two entries each. */
	ck_assert_uint_eq(count, 18);
	for (unsigned int i = 0; i < count; i++) {
		const struct jump_entry *e = &tab[i];
		const unsigned char *code = (const unsigned char *)jump_entry_code(e);
		/* A refined site: its first entry decides NOP/JMP, the second where to. */
		bool refines = e->refines == 1;
		const struct jump_entry *base = refines ? &tab[i - 1] : e;
		const struct jump_entry *inner = refines ? e :
			i + 1 < count && tab[i + 1].refines == 1 ? &tab[i + 1] : NULL;
		/* The second entry applies while the first one's key is on. */
		bool refined_now = inner && static_key_enabled(jump_entry_key(base)) &&
				   static_key_enabled(jump_entry_key(inner));
		bool jump = refined_now ||
			    static_key_enabled(jump_entry_key(base)) != jump_entry_branch(base);
		const struct jump_entry *to = refined_now ? inner : base;
		uintptr_t dest = expected_mode == STATIC_KEYS_FALLBACK ?
			jump_entry_fallback(e) :
			size == 5 ? x86_threaded(jump_entry_target(to)) : jump_entry_target(to);

		if (refines) {
			ck_assert_uint_eq(jump_entry_code(e), jump_entry_code(base));
			ck_assert_uint_eq(jump_entry_fallback(e), jump_entry_fallback(base));
		}

		ck_assert_ptr_nonnull(jump_entry_key(e)->name);
		if (size == 5) {
			int32_t rel;

			if (expected_mode == STATIC_KEYS_PATCHED && !jump) {
				ck_assert_msg(memcmp(code, x86_nop5, 5) == 0,
					      "site %u of %s: not a NOP", i, jump_entry_key(e)->name);
				continue;
			}
			ck_assert_msg(code[0] == 0xe9, "site %u: %02x is not a jmp", i, code[0]);
			memcpy(&rel, code + 1, 4);
			ck_assert_msg((uintptr_t)code + 5 + (uintptr_t)(intptr_t)rel == dest,
				      "site %u of %s jumps to the wrong place", i,
				      jump_entry_key(e)->name);
		} else if (size == 4) {
			uint32_t insn;

			memcpy(&insn, code, 4);
			if (expected_mode == STATIC_KEYS_PATCHED && !jump) {
				ck_assert_uint_eq(insn, 0xd503201f);
				continue;
			}
			ck_assert_uint_eq(insn >> 26, 0x05);	/* B */
			ck_assert((uintptr_t)code + (uintptr_t)((int64_t)((int32_t)(insn << 6) >> 6) * 4) == dest);
		}
	}
}

START_TEST(test_site_bytes)
{
	ck_site_bytes();
	static_branch_enable(&sk_false);
	static_branch_disable(&sk_true);
	static_branch_enable(&sk_conc);
	ck_site_bytes();
	static_branch_disable(&sk_false);
	static_branch_enable(&sk_outer);
	ck_site_bytes();
	static_branch_enable(&sk_inner);
	ck_site_bytes();
	static_branch_disable(&sk_outer);
	ck_site_bytes();
}
END_TEST

/* ---- concurrency ---- */

/*
 * A seqlock around each toggle: odd while one is in progress.  A thread
 * that read the same even value before and after running a site must have
 * taken the side of that completed toggle: "once a toggle returns, every
 * thread takes the new side".
 */
static unsigned long conc_seq;
static int conc_stop;
static unsigned long conc_progress;	/* site evaluations by all spinners */

struct spinner {
	pthread_t th;
	bool block_sigtrap;
	unsigned long checked, wrong, sides[2];
};

static void *spin(void *arg)
{
	struct spinner *s = arg;

	if (s->block_sigtrap) {
		sigset_t set;

		sigemptyset(&set);
		sigaddset(&set, SIGTRAP);
		pthread_sigmask(SIG_BLOCK, &set, NULL);
	}
	while (!__atomic_load_n(&conc_stop, __ATOMIC_RELAXED)) {
		unsigned long s1 = __atomic_load_n(&conc_seq, __ATOMIC_ACQUIRE), s2;
		bool u = conc_unlikely(), l = conc_likely();
		int r = conc_refined(), rl = conc_likely_refined();

		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&conc_seq, __ATOMIC_ACQUIRE);
		s->sides[u]++;
		__atomic_fetch_add(&conc_progress, 1, __ATOMIC_RELAXED);
		if (s1 == s2 && !(s1 & 1)) {
			bool want = (s1 / 2) & 1;

			s->checked++;
			s->wrong += (u != want) + (l != want) + (r != 1 + (int)want) +
				    (rl != 1 + (int)want);
		}
	}
	return NULL;
}

static void toggle_once(unsigned long k)
{
	unsigned long seen = __atomic_load_n(&conc_progress, __ATOMIC_RELAXED);

	__atomic_store_n(&conc_seq, 2 * k - 1, __ATOMIC_SEQ_CST);
	if (k & 1)
		static_branch_enable(&sk_conc);
	else
		static_branch_disable(&sk_conc);
	__atomic_store_n(&conc_seq, 2 * k, __ATOMIC_SEQ_CST);
	/*
	 * Let the spinners run through the sites in every state: without
	 * this a fallback-mode toggle (a plain store) outruns them all.  A
	 * patched toggle takes long enough on its own -- but not under
	 * valgrind, which runs one thread at a time and may leave a spinner
	 * unscheduled through a whole state.
	 */
	if (expected_mode == STATIC_KEYS_PATCHED && !RUNNING_ON_VALGRIND)
		return;
	for (int i = 0; i < 100000 && __atomic_load_n(&conc_progress, __ATOMIC_RELAXED) < seen + 2; i++) {
		/* valgrind runs one thread at a time: give the spinners the CPU. */
		if (RUNNING_ON_VALGRIND)
			sched_yield();
		else
			cpu_relax();
	}
}

/* In a forked child: every site agrees with its key, and keys still change. */
static int child_check(void)
{
	int bad = 0;

	for (int i = 0; i < 4; i++) {
		bad += conc_unlikely() != static_key_enabled(&sk_conc);
		bad += conc_likely() != static_key_enabled(&sk_conc);
		bad += conc_refined() != 1 + static_key_enabled(&sk_conc);
		bad += conc_likely_refined() != 1 + static_key_enabled(&sk_conc);
		if (static_key_enabled(&sk_conc))
			static_branch_disable(&sk_conc);
		else
			static_branch_enable(&sk_conc);
	}
	return bad;
}

static void *forker(void *arg)
{
	unsigned long *failures = arg;

	while (!__atomic_load_n(&conc_stop, __ATOMIC_RELAXED)) {
		int status;
		pid_t pid = fork();

		if (pid == 0)
			_exit(child_check() ? 1 : 0);
		if (pid < 0 || waitpid(pid, &status, 0) != pid ||
		    !WIFEXITED(status) || WEXITSTATUS(status) != 0)
			(*failures)++;
	}
	return NULL;
}

static void run_concurrency(unsigned long n, bool with_fork, int blockers)
{
	struct spinner sp[4] = { 0 };
	unsigned long fork_failures = 0, checked = 0, sides[2] = { 0 };
	pthread_t fk;

	conc_seq = 0;
	conc_stop = 0;
	conc_progress = 0;
	/*
	 * The refined sites' outer key stays on: the toggles move the
	 * unlikely one JMP <-> JMP, the likely one NOP <-> JMP.
	 */
	static_branch_enable(&sk_conc_outer);
	for (int i = 0; i < 4; i++) {
		sp[i].block_sigtrap = i < blockers;
		pthread_create(&sp[i].th, NULL, spin, &sp[i]);
	}
	while (__atomic_load_n(&conc_progress, __ATOMIC_RELAXED) == 0)
		sched_yield();
	if (with_fork)
		pthread_create(&fk, NULL, forker, &fork_failures);
	for (unsigned long k = 1; k <= n; k++)
		toggle_once(k);
	__atomic_store_n(&conc_stop, 1, __ATOMIC_RELAXED);
	if (with_fork)
		pthread_join(fk, NULL);
	for (int i = 0; i < 4; i++) {
		pthread_join(sp[i].th, NULL);
		ck_assert_msg(sp[i].wrong == 0, "thread %d took the old side %lu times",
			      i, sp[i].wrong);
		checked += sp[i].checked;
		sides[0] += sp[i].sides[0];
		sides[1] += sp[i].sides[1];
	}
	ck_assert_uint_eq(fork_failures, 0);
	/* The spinners really ran through the sites, on both sides. */
	ck_assert_uint_gt(checked, 0);
	ck_assert_uint_gt(sides[0], 0);
	ck_assert_uint_gt(sides[1], 0);
	ck_assert_int_eq(static_key_enabled(&sk_conc), (int)(n & 1));
	ck_assert_int_eq(conc_unlikely(), (int)(n & 1));
	ck_assert_int_eq(conc_refined(), 1 + (int)(n & 1));
	ck_assert_int_eq(conc_likely_refined(), 1 + (int)(n & 1));
	static_branch_disable(&sk_conc_outer);
}

START_TEST(test_concurrent_toggle)
{
	run_concurrency(toggles(30000), false, 0);
}
END_TEST

START_TEST(test_concurrent_toggle_sigtrap_blocked)
{
	/* One spinner blocks SIGTRAP: the rewrite must not use a trap on it. */
	run_concurrency(toggles(10000), false, 1);
}
END_TEST

START_TEST(test_concurrent_toggle_with_fork)
{
	run_concurrency(toggles(10000), true, 0);
}
END_TEST

START_TEST(test_mode_reported)
{
	const char *reason = NULL;

	ck_assert_int_eq(static_keys_mode(&reason), expected_mode);
	ck_assert_ptr_nonnull(reason);
	ck_assert_uint_gt(strlen(reason), 5);
}
END_TEST

static void add_behaviour_tests(TCase *tc)
{
	tcase_add_test(tc, test_initial_values);
	tcase_add_test(tc, test_enable_disable);
	tcase_add_test(tc, test_refcount);
	tcase_add_test(tc, test_keys_across_translation_units);
	tcase_add_test(tc, test_refined_site);
	tcase_add_test(tc, test_site_bytes);
	tcase_add_test(tc, test_mode_reported);
	tcase_add_test(tc, test_concurrent_toggle);
	tcase_add_test(tc, test_concurrent_toggle_sigtrap_blocked);
	tcase_add_test(tc, test_concurrent_toggle_with_fork);
}

int main(int argc, char **argv)
{
	Suite *s = suite_create("static_key");
	TCase *patched = tcase_create("patched");
	TCase *conf = tcase_create("fallback_conf");
	TCase *sec = tcase_create("fallback_seccomp");

	if (argc > 1 && strcmp(argv[1], "--report") == 0) {
		static char buf[1 << 16];

		static_keys_init(true);
		static_keys_report(buf, sizeof(buf));
		fputs(buf, stdout);
		return 0;
	}
	tcase_add_checked_fixture(patched, setup_patched, NULL);
	tcase_add_checked_fixture(conf, setup_fallback_conf, NULL);
	tcase_add_checked_fixture(sec, setup_fallback_seccomp, NULL);
	add_behaviour_tests(patched);
	add_behaviour_tests(conf);
	if (seccomp_usable())
		add_behaviour_tests(sec);
	else
		fprintf(stderr, "test_static_key: seccomp fallback case skipped "
			"(under valgrind or qemu-user)\n");
	tcase_set_timeout(patched, 300);
	tcase_set_timeout(conf, 300);
	tcase_set_timeout(sec, 300);
	suite_add_tcase(s, patched);
	suite_add_tcase(s, conf);
	suite_add_tcase(s, sec);
	return check_run(s);
}
