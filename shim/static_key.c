/*
 * Static keys: the table of sites, reference counting, and the rewriting
 * of sites when a key changes (architecture-neutral part).
 *
 * Every image (libcgmalloc.so, or a test executable that compiles this
 * file in) finds its own sites between the hidden __start_/__stop_ symbols
 * of __cgm_jump_table.  Rewriting takes one global mutex, makes the pages
 * of the affected sites writable while keeping them executable, lets the
 * architecture write the new instructions safely, and restores R-X.
 * Nothing here allocates: keys may change while malloc is running.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cgm/compiler.h"
#include "cgm/log.h"
#include "cgm/sk_arch.h"
#include "cgm/static_key.h"

extern const struct jump_entry __start___cgm_jump_table[]
	__attribute__((visibility("hidden"), weak));
extern const struct jump_entry __stop___cgm_jump_table[]
	__attribute__((visibility("hidden"), weak));

/* Sites rewritten per batch; a key with more sites takes several. */
#define SK_BATCH 64

static pthread_mutex_t sk_lock = PTHREAD_MUTEX_INITIALIZER;
/*
 * Whether the calling thread holds sk_lock: fork() from a signal handler
 * that interrupted a rewrite must not wait for the lock its own thread
 * holds (the prefork handler takes it).
 */
static CGM_TLS bool sk_lock_mine;
/* The prefork handler took sk_lock (and the postfork ones release it). */
static bool sk_fork_locked;

static void sk_lock_take(void)
{
	pthread_mutex_lock(&sk_lock);
	sk_lock_mine = true;
}

static void sk_lock_give(void)
{
	sk_lock_mine = false;
	pthread_mutex_unlock(&sk_lock);
}
static enum static_keys_mode sk_mode = STATIC_KEYS_FALLBACK;
static const char *sk_reason = "not initialised yet";
static char sk_reason_buf[160];
static bool sk_initialised;
static struct sk_poke sk_batch[SK_BATCH];

uintptr_t jump_entry_code(const struct jump_entry *e)
{
	return (uintptr_t)&e->code + (uintptr_t)(intptr_t)e->code;
}

uintptr_t jump_entry_target(const struct jump_entry *e)
{
	return (uintptr_t)&e->target + (uintptr_t)(intptr_t)e->target;
}

uintptr_t jump_entry_fallback(const struct jump_entry *e)
{
	return (uintptr_t)&e->fallback + (uintptr_t)(intptr_t)e->fallback;
}

struct static_key *jump_entry_key(const struct jump_entry *e)
{
	uintptr_t k = (uintptr_t)&e->key + (uintptr_t)e->key;

	return (struct static_key *)(k & ~(uintptr_t)1);
}

bool jump_entry_branch(const struct jump_entry *e)
{
	return ((uintptr_t)&e->key + (uintptr_t)e->key) & 1;
}

const struct jump_entry *static_keys_table(unsigned int *count)
{
	const struct jump_entry *start = __start___cgm_jump_table;

	*count = start ? (unsigned int)(__stop___cgm_jump_table - start) : 0;
	return start;
}

unsigned int static_keys_site_size(void)
{
	return sk_arch_insn_size;
}

enum static_keys_mode static_keys_mode(const char **reason)
{
	enum static_keys_mode mode;

	sk_lock_take();
	mode = sk_mode;
	if (reason)
		*reason = sk_reason;
	sk_lock_give();
	return mode;
}

static uintptr_t page_of(uintptr_t a)
{
	return a & ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1);
}

/*
 * Change the protection of the pages under [addr, addr + len).  Execute
 * permission is never dropped: another thread may be running there.
 */
static int protect_range(uintptr_t addr, size_t len, int prot)
{
	uintptr_t start = page_of(addr);
	uintptr_t end = page_of(addr + len - 1) + (uintptr_t)sysconf(_SC_PAGESIZE);

	return mprotect((void *)start, end - start, prot) ? -errno : 0;
}

#define PROT_RX		(PROT_READ | PROT_EXEC)
#define PROT_RWX	(PROT_READ | PROT_WRITE | PROT_EXEC)

/*
 * Write a batch of sites: pages writable, arch poke, pages back to R-X.
 * Every site is in this library's text, one mapping: the pages from the
 * lowest site to the highest change together, two mprotect calls a batch
 * instead of two a site.
 */
static void flush_batch(unsigned int n)
{
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	int err;

	if (n == 0)
		return;
	for (unsigned int i = 0; i < n; i++) {
		uintptr_t a = (uintptr_t)sk_batch[i].addr;

		lo = a < lo ? a : lo;
		hi = a + sk_arch_insn_size > hi ? a + sk_arch_insn_size : hi;
	}
	err = protect_range(lo, hi - lo, PROT_RWX);
	if (err) {
		/*
		 * The mapping was writable at init; this is rare (e.g. the
		 * map count limit).  The sites keep their previous form.
		 */
		cgm_log("static keys: mprotect(PROT_WRITE|PROT_EXEC) failed: %s; "
			"%u site(s) not rewritten", cgm_strerror(-err), n);
		return;
	}
	sk_arch_poke(sk_batch, n);
	protect_range(lo, hi - lo, PROT_RX);
}

/*
 * A refined site has two entries, the second with refines = 1 (see
 * static_branch_unlikely_refined() and static_branch_likely_refined()).
 * The entry that decides a site: its base entry, or the refining one
 * while both keys are on.
 */
static bool entry_refines(const struct jump_entry *tab, unsigned int i)
{
	return i > 0 && tab[i].refines == 1 &&
	       jump_entry_code(&tab[i]) == jump_entry_code(&tab[i - 1]);
}

/* The other entry of entry @i's site, or NULL for a site of one key. */
static const struct jump_entry *site_partner(const struct jump_entry *tab, unsigned int count,
					     unsigned int i)
{
	if (entry_refines(tab, i))
		return &tab[i - 1];
	return i + 1 < count && entry_refines(tab, i + 1) ? &tab[i + 1] : NULL;
}

static bool entry_jumps(const struct jump_entry *e)
{
	return (static_key_count(jump_entry_key(e)) > 0) != jump_entry_branch(e);
}

/* The form site @i (a base entry) should have now. */
static void site_form(const struct jump_entry *tab, unsigned int count,
		      unsigned int i, struct sk_poke *poke)
{
	const struct jump_entry *e = &tab[i];
	const struct jump_entry *inner = site_partner(tab, count, i);
	bool jump = entry_jumps(e);

	/*
	 * The refining entry applies while the base key is on, whichever
	 * way the base entry's branch goes: an unlikely site then jumps
	 * anyway, a likely one would fall through.
	 */
	if (inner && static_key_count(jump_entry_key(e)) > 0 && entry_jumps(inner)) {
		e = inner;
		jump = true;
	}
	sk_arch_make_insn(jump_entry_code(e), jump_entry_target(e), jump, poke);
}

/*
 * Bring every site of @key (all keys if NULL) to the form its keys ask
 * for.  Caller holds sk_lock and the mode is STATIC_KEYS_PATCHED.
 */
static void update_sites(const struct static_key *key)
{
	unsigned int count, n = 0;
	const struct jump_entry *tab = static_keys_table(&count);

	for (unsigned int i = 0; i < count; i++) {
		struct sk_poke *poke = &sk_batch[n];
		unsigned int base = i;

		if (entry_refines(tab, i)) {
			/* Visited through its base entry when every site is. */
			if (!key)
				continue;
			base = i - 1;
		}
		if (key && jump_entry_key(&tab[i]) != key)
			continue;
		site_form(tab, count, base, poke);
		if (memcmp(poke->addr, poke->insn, sk_arch_insn_size) == 0)
			continue;
		if (++n == SK_BATCH) {
			flush_batch(n);
			n = 0;
		}
	}
	flush_batch(n);
}

/* Set @key to @value (caller holds sk_lock) and rewrite its sites. */
static void key_set(struct static_key *key, int value)
{
	bool was = key->enabled > 0;

	/*
	 * The value is published before the sites change, so that a site
	 * still in fallback form, or one a thread crosses mid-rewrite, sees
	 * the new value.
	 */
	__atomic_store_n(&key->enabled, value, __ATOMIC_RELEASE);
	if (sk_mode == STATIC_KEYS_PATCHED && was != (value > 0))
		update_sites(key);
}

void static_key_slow_inc(struct static_key *key)
{
	sk_lock_take();
	key_set(key, key->enabled + 1);
	sk_lock_give();
}

void static_key_slow_dec(struct static_key *key)
{
	static int warned;

	sk_lock_take();
	if (key->enabled <= 0)
		cgm_log_once(&warned, "static key %s: more decrements than increments (ignored)",
			     key->name ? key->name : "?");
	else
		key_set(key, key->enabled - 1);
	sk_lock_give();
}

void static_key_enable(struct static_key *key)
{
	sk_lock_take();
	if (key->enabled == 0)
		key_set(key, 1);
	sk_lock_give();
}

void static_key_disable(struct static_key *key)
{
	sk_lock_take();
	if (key->enabled != 0)
		key_set(key, 0);
	sk_lock_give();
}

/*
 * No key changes across fork(): the child never inherits a half-written
 * site -- unless this very thread is in the middle of one (a signal
 * handler that forks), where waiting would deadlock; the child then
 * inherits the rewrite half done, and the trap handler finishes it.
 */
static void sk_prefork(void)
{
	sk_fork_locked = !sk_lock_mine;
	if (sk_fork_locked)
		pthread_mutex_lock(&sk_lock);
}

static void sk_postfork_parent(void)
{
	if (sk_fork_locked)
		pthread_mutex_unlock(&sk_lock);
}

static void sk_postfork_child(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

	/* membarrier registration belongs to the address space, not inherited. */
	if (sk_mode == STATIC_KEYS_PATCHED)
		sk_arch_after_fork();
	/* The child's only thread: whoever held the lock is not here. */
	sk_lock = fresh;
	sk_lock_mine = false;
}

/* Can this process make a site's page writable and executable? */
static int probe_patching(const char **reason)
{
	unsigned int count;
	const struct jump_entry *tab = static_keys_table(&count);
	uintptr_t site;
	int err;

	if (count == 0)
		return 0;
	site = jump_entry_code(&tab[0]);
	err = protect_range(site, sk_arch_insn_size, PROT_RWX);
	if (err) {
		snprintf(sk_reason_buf, sizeof(sk_reason_buf),
			 "mprotect(PROT_WRITE|PROT_EXEC) refused: %s", cgm_strerror(-err));
		*reason = sk_reason_buf;
		return err;
	}
	protect_range(site, sk_arch_insn_size, PROT_RX);
	return 0;
}

bool sk_at_startup = true;

void static_keys_startup_done(void)
{
	__atomic_store_n(&sk_at_startup, false, __ATOMIC_RELAXED);
}

enum static_keys_mode static_keys_init(bool want_patching)
{
	const char *reason = NULL;
	enum static_keys_mode mode;

	sk_lock_take();
	if (sk_initialised)
		goto out;
	sk_initialised = true;
	pthread_atfork(sk_prefork, sk_postfork_parent, sk_postfork_child);
	if (sk_arch_insn_size == 0) {
		sk_reason = "no site patching on this architecture";
		goto out;
	}
	if (!want_patching) {
		sk_reason = "static_keys=off";
		goto out;
	}
	if (sk_arch_init(&reason) < 0 || probe_patching(&reason) < 0) {
		sk_reason = reason;
		goto out;
	}
	sk_mode = STATIC_KEYS_PATCHED;
	sk_reason = "sites are patched NOP/JMP";
	update_sites(NULL);
out:
	mode = sk_mode;
	sk_lock_give();
	return mode;
}

/*
 * Describe the mode and every site of this image, offsets relative to the
 * image's load address (what objdump -d of the file shows), one line each:
 *   site <code> target <yes side> fallback <fallback> key <name> branch <0|1>
 *        state <nop|jmp|jmp-other|fallback|?> refines <0|1>
 * (jmp-other: a refined site jumping to its other entry's target).
 * Returns the length the whole text needs (like snprintf).
 */
size_t static_keys_report(char *buf, size_t len)
{
	unsigned int count;
	const struct jump_entry *tab = static_keys_table(&count);
	const char *reason;
	enum static_keys_mode mode = static_keys_mode(&reason);
	uintptr_t base = 0;
	size_t n = 0;
	Dl_info info;

	if (count && dladdr(tab, &info) && info.dli_fbase)
		base = (uintptr_t)info.dli_fbase;
#define OUT(...) (n += (size_t)snprintf(buf + (n < len ? n : len), \
				       n < len ? len - n : 0, __VA_ARGS__))
	OUT("mode %s (%s), %u site(s)\n",
	    mode == STATIC_KEYS_PATCHED ? "patched" : "fallback", reason, count);
	for (unsigned int i = 0; i < count; i++) {
		const struct jump_entry *e = &tab[i];
		const struct static_key *k = jump_entry_key(e);
		uintptr_t code = jump_entry_code(e);
		struct sk_poke want_jmp, want_nop, want_other;
		const char *state = "?";

		bool refines = entry_refines(tab, i);
		const struct jump_entry *other = site_partner(tab, count, i);

		sk_arch_make_insn(code, jump_entry_target(e), true, &want_jmp);
		sk_arch_make_insn(code, jump_entry_target(e), false, &want_nop);
		if (other)
			sk_arch_make_insn(code, jump_entry_target(other), true, &want_other);
		if (sk_arch_insn_size && memcmp((void *)code, want_nop.insn, sk_arch_insn_size) == 0)
			state = "nop";
		else if (sk_arch_insn_size && memcmp((void *)code, want_jmp.insn, sk_arch_insn_size) == 0)
			state = "jmp";
		else if (sk_arch_insn_size && other &&
			 memcmp((void *)code, want_other.insn, sk_arch_insn_size) == 0)
			state = "jmp-other";
		else if (sk_arch_insn_size)
			state = "fallback";
		OUT("site %#lx target %#lx fallback %#lx key %s branch %d state %s refines %d\n",
		    (unsigned long)(code - base),
		    (unsigned long)(jump_entry_target(e) - base),
		    (unsigned long)(jump_entry_fallback(e) - base),
		    k->name ? k->name : "?", jump_entry_branch(e), state, refines);
	}
#undef OUT
	return n;
}
