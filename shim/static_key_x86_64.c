/*
 * Static keys on x86-64: rewriting a 5-byte site between
 *	NOP	0f 1f 44 00 00
 *	JMP	e9 <rel32 to the yes side>
 * (and, as compiled, e9 <rel32 to the fallback>) while other threads may
 * be executing it.
 *
 * A 5-byte instruction cannot be replaced in one store that every core is
 * guaranteed to fetch whole, so the rewrite follows the kernel's
 * text_poke_bp(): put a guard on the first byte, serialise every core,
 * write the other four bytes, serialise, write the first byte, serialise.
 * The guard is int3: a thread that reaches it traps, and our SIGTRAP
 * handler moves it to where the new instruction would have sent it.
 *
 * A thread that has SIGTRAP blocked cannot be sent to a handler: the
 * kernel would reset the action to the default and kill the process.  When
 * any thread blocks SIGTRAP (read from /proc/self/task/<tid>/status) the
 * guard is instead "jmp ." (eb fe), written as one 2-byte store: a thread
 * that reaches it spins until the final write releases it.
 *
 * A JMP goes straight to the final destination when the yes side is only
 * a tail call, direct or through a GOT slot that can no longer change
 * (see thread_jump()).
 *
 * Serialising every core is membarrier(PRIVATE_EXPEDITED_SYNC_CORE),
 * registered in sk_arch_init(); without it there is no patching.
 */
#if defined(__x86_64__) && !defined(CGM_STATIC_KEYS_GENERIC)

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/membarrier.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

#include "cgm/log.h"
#include "cgm/sk_arch.h"

#define INSN_SIZE 5
#define OP_INT3 0xcc
#define OP_JMP32 0xe9
/* jmp *rel32(%rip): ff 25 <rel32 to the slot>, 6 bytes */
#define OP_JMP_IND0 0xff
#define OP_JMP_IND1 0x25
#define JMP_IND_SIZE 6

static const unsigned char nop5[INSN_SIZE] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };
static const unsigned char jmp_self[2] = { 0xeb, 0xfe };

const unsigned int sk_arch_insn_size = INSN_SIZE;

/*
 * The batch being written, for the SIGTRAP handler.  Published with
 * release before the first int3 is written and withdrawn after the last
 * byte is in place.
 */
static struct sk_poke *volatile trap_pokes;
static volatile unsigned int trap_npokes;

static struct sigaction prev_trap;
static void sk_trap(int sig, siginfo_t *si, void *ctx);

static bool is_site(uintptr_t addr)
{
	unsigned int count;
	const struct jump_entry *tab = static_keys_table(&count);

	for (unsigned int i = 0; i < count; i++)
		if (jump_entry_code(&tab[i]) == addr)
			return true;
	return false;
}

/* Pass a SIGTRAP that is not ours to whatever the program had installed. */
static void chain_trap(int sig, siginfo_t *si, void *ctx)
{
	if (prev_trap.sa_flags & SA_SIGINFO) {
		if (prev_trap.sa_sigaction)
			prev_trap.sa_sigaction(sig, si, ctx);
		return;
	}
	if (prev_trap.sa_handler == SIG_IGN)
		return;
	if (prev_trap.sa_handler != SIG_DFL) {
		prev_trap.sa_handler(sig);
		return;
	}
	/* Default action: terminate as if we had never been there. */
	sigaction(SIGTRAP, &(struct sigaction){ .sa_handler = SIG_DFL }, NULL);
	raise(SIGTRAP);
}

static void sk_trap(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	/* int3 is a trap: the saved RIP is just past the 0xcc byte. */
	uintptr_t ip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	struct sk_poke *pokes = __atomic_load_n(&trap_pokes, __ATOMIC_ACQUIRE);
	unsigned int n = trap_npokes;

	for (unsigned int i = 0; pokes && i < n; i++) {
		if ((uintptr_t)pokes[i].addr + 1 != ip)
			continue;
		/* Do what the new instruction will do. */
		uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(pokes[i].jump ?
			pokes[i].target : (uintptr_t)pokes[i].addr + INSN_SIZE);
		return;
	}
	/*
	 * A thread that trapped on a site and was only scheduled into this
	 * handler after the rewrite finished -- or after it finished and the
	 * next one put its guard there again, a window that reading the
	 * guard byte here cannot close -- runs the site again: a whole
	 * instruction runs, a guard traps it back here until its rewrite is
	 * done.  Only an int3 that is not at a site is the program's.
	 */
	if (is_site(ip - 1)) {
		uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(ip - 1);
		return;
	}
	chain_trap(sig, si, ctx);
}

/* (Re)install our SIGTRAP handler in front of the program's. */
static int install_trap_handler(void)
{
	struct sigaction sa, cur;

	if (sigaction(SIGTRAP, NULL, &cur) < 0)
		return -errno;
	if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == sk_trap)
		return 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = sk_trap;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
	sigfillset(&sa.sa_mask);
	if (sigaction(SIGTRAP, &sa, &prev_trap) < 0)
		return -errno;
	return 0;
}

/*
 * This image's RELRO range: the loader makes it read-only once it has
 * relocated the image, so a GOT slot in it holds its final value (the
 * library's calls into mimalloc go through such slots, -fno-plt).  Read
 * from the image's own program headers (the linker's __ehdr_start), not
 * dl_iterate_phdr(): its callback would be one more function at start-up,
 * outside the code the library keeps together (tests/test_text_rss.c).
 */
extern const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));
static uintptr_t relro_lo, relro_hi;

static inline void find_relro(void)
{
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)((const char *)&__ehdr_start + __ehdr_start.e_phoff);

	/*
	 * The header is at the image's address 0 in a shared object or a PIE,
	 * so its address is the load bias.  (In an executable linked at a
	 * fixed address the range comes out beyond the image: no slot is in
	 * it, and sites are threaded through none.)
	 */
	for (unsigned int i = 0; i < __ehdr_start.e_phnum; i++)
		if (ph[i].p_type == PT_GNU_RELRO) {
			relro_lo = (uintptr_t)&__ehdr_start + ph[i].p_vaddr;
			relro_hi = relro_lo + ph[i].p_memsz;
		}
}

/*
 * The SIGTRAP handler is installed by the first batch that needs the trap
 * protocol (another thread may run the sites), not here: a program that
 * never has two threads when a key changes makes no sigaction call.
 */
int sk_arch_init(const char **reason)
{
	if (sk_sync_register(reason) < 0)
		return -ENOSYS;
	find_relro();
	return 0;
}

/*
 * Where a jump from @code to @target ends up: when the yes side of a site
 * is only a tail call, the site jumps straight to its destination and the
 * enabled path saves an instruction.  That is a jmp rel32, or a jmp
 * through a GOT slot of this image (jmp *rel32(%rip)), such as
 * accounting off's tail call into mimalloc, when the slot is read-only
 * and its destination within a jmp rel32's reach of the site.
 */
static uintptr_t thread_jump(uintptr_t code, uintptr_t target)
{
	const unsigned char *t = (const unsigned char *)target;
	int32_t rel;

	if (t[0] == OP_JMP32) {
		memcpy(&rel, t + 1, sizeof(rel));
		return target + INSN_SIZE + (uintptr_t)(intptr_t)rel;
	}
	if (t[0] == OP_JMP_IND0 && t[1] == OP_JMP_IND1) {
		uintptr_t slot, dest;
		int64_t reach;

		memcpy(&rel, t + 2, sizeof(rel));
		slot = target + JMP_IND_SIZE + (uintptr_t)(intptr_t)rel;
		if (slot - relro_lo >= relro_hi - relro_lo || relro_hi - slot < sizeof(dest))
			return target;
		memcpy(&dest, (const void *)slot, sizeof(dest));
		reach = (int64_t)(dest - (code + INSN_SIZE));
		if (dest != 0 && reach == (int32_t)reach)
			return dest;
	}
	return target;
}

void sk_arch_make_insn(uintptr_t code, uintptr_t target, bool jump,
		       struct sk_poke *poke)
{
	poke->addr = (uint8_t *)code;
	poke->jump = jump;
	poke->target = thread_jump(code, target);
	if (jump) {
		int32_t rel = (int32_t)(poke->target - (code + INSN_SIZE));

		poke->insn[0] = OP_JMP32;
		memcpy(&poke->insn[1], &rel, sizeof(rel));
	} else {
		memcpy(poke->insn, nop5, INSN_SIZE);
	}
}

/* Parse the hex SigBlk mask out of a /proc/<tid>/status text. */
static bool status_blocks_sigtrap(const char *text)
{
	const char *p = text;
	unsigned long long mask;

	while (*p && strncmp(p, "\nSigBlk:", 8) != 0)
		p++;
	if (!*p)
		return true;	/* cannot tell: assume the worst */
	mask = strtoull(p + 8, NULL, 16);
	return mask & (1ULL << (SIGTRAP - 1));
}

/*
 * Does any thread of this process but the caller block SIGTRAP?  *@alone
 * says whether the caller is the only thread.  Read without allocating
 * (raw getdents64, stack buffers): this runs while keys change, possibly
 * from inside malloc.
 */
static bool some_thread_blocks_sigtrap(bool *alone)
{
	char buf[4096], path[320], status[4096];
	bool blocked = false;
	long n, me = (long)syscall(SYS_gettid);
	int dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	unsigned int threads = 0;
	bool saw_me = false;

	*alone = false;
	if (dir < 0)
		return true;
	while (!blocked && (n = syscall(SYS_getdents64, dir, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n && !blocked;) {
			struct dirent64 *d = (struct dirent64 *)(buf + off);
			ssize_t len;
			int fd;

			off += d->d_reclen;
			if (d->d_name[0] == '.')
				continue;
			threads++;
			/*
			 * The caller's own mask does not matter: it never runs a
			 * site while it rewrites them (its signals are blocked).
			 */
			if ((long)strtoull(d->d_name, NULL, 10) == me) {
				saw_me = true;
				continue;
			}
			snprintf(path, sizeof(path), "/proc/self/task/%s/status", d->d_name);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				continue;	/* the thread has exited */
			len = read(fd, status, sizeof(status) - 1);
			close(fd);
			if (len <= 0)
				continue;
			status[len] = '\0';
			blocked = status_blocks_sigtrap(status);
		}
	}
	close(dir);
	/* Only the caller: nobody can be running the sites (or start a thread that would). */
	*alone = !blocked && threads == 1 && saw_me;
	return blocked;
}

static void write_bytes(uint8_t *dst, const unsigned char *src, size_t n)
{
	volatile uint8_t *d = dst;

	for (size_t i = 0; i < n; i++)
		d[i] = src[i];
	VALGRIND_DISCARD_TRANSLATIONS(dst, n);
}

/* One 2-byte store, which x86 makes atomic within a cache line. */
static void write_head2(uint8_t *dst, const unsigned char *src)
{
	uint16_t v;

	memcpy(&v, src, 2);
	__atomic_store_n((uint16_t *)dst, v, __ATOMIC_RELEASE);
	VALGRIND_DISCARD_TRANSLATIONS(dst, 2);
}

static bool head2_in_one_line(const uint8_t *addr)
{
	return ((uintptr_t)addr & 63) != 63;
}

void sk_arch_poke(struct sk_poke *pokes, unsigned int n)
{
	bool alone, spin_guard;
	sigset_t all, old;
	unsigned int i;

	if (n == 0)
		return;
	/* At start-up glibc's word for it spares reading /proc/self/task. */
	if (__atomic_load_n(&sk_at_startup, __ATOMIC_RELAXED) && __libc_single_threaded) {
		alone = true;
		spin_guard = false;
	} else {
		spin_guard = some_thread_blocks_sigtrap(&alone);
	}
	/*
	 * No signal handler of ours may run into a site we are rewriting:
	 * with the spin guard it would wait for us forever.
	 */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	if (alone) {
		/*
		 * The only thread (start-up, usually): no other core runs
		 * these bytes, so they are written whole, without the trap
		 * protocol; the return from here is the jump that makes this
		 * core fetch them anew.
		 */
		for (i = 0; i < n; i++)
			write_bytes(pokes[i].addr, pokes[i].insn, INSN_SIZE);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return;
	}
	/* Installed now, in front of the program's (which may have replaced ours since). */
	if (install_trap_handler() < 0)
		cgm_log("static keys: cannot install the SIGTRAP handler");
	trap_npokes = n;
	__atomic_store_n(&trap_pokes, pokes, __ATOMIC_RELEASE);

	/* 1: the guard on the first byte(s). */
	for (i = 0; i < n; i++) {
		static const unsigned char int3 = OP_INT3;

		if (spin_guard && head2_in_one_line(pokes[i].addr))
			write_head2(pokes[i].addr, jmp_self);
		else
			write_bytes(pokes[i].addr, &int3, 1);
	}
	sk_arch_sync_cores();

	/* 2: the bytes behind the guard. */
	for (i = 0; i < n; i++) {
		size_t guard = pokes[i].addr[0] == jmp_self[0] ? 2 : 1;

		write_bytes(pokes[i].addr + guard, pokes[i].insn + guard,
			    INSN_SIZE - guard);
	}
	sk_arch_sync_cores();

	/* 3: the first byte(s): the new instruction is whole. */
	for (i = 0; i < n; i++) {
		if (pokes[i].addr[0] == jmp_self[0])
			write_head2(pokes[i].addr, pokes[i].insn);
		else
			write_bytes(pokes[i].addr, pokes[i].insn, 1);
	}
	sk_arch_sync_cores();

	__atomic_store_n(&trap_pokes, NULL, __ATOMIC_RELEASE);
	for (i = 0; i < n; i++) {
		if (memcmp(pokes[i].addr, pokes[i].insn, INSN_SIZE) != 0)
			cgm_log("static keys: site %p did not take its new bytes",
				(void *)pokes[i].addr);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

#endif /* __x86_64__ */
