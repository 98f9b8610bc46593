/*
 * C++ operator new and delete through libcgmalloc.so (shim/new_delete.c).
 *
 * Every variant is checked to be the shim's (dladdr), to return memory of
 * the right alignment from mimalloc, and to fail the way the standard says:
 * the throwing forms throw std::bad_alloc, the nothrow forms return
 * nullptr, and an installed new_handler is called before either and the
 * allocation retried.  The standard library's users of operator new --
 * strings, maps, threads with thread_local destructors, exceptions,
 * containers of over-aligned types -- and a static initialiser that
 * allocates before main() complete the picture.
 *
 * Exits 0 when every check passed; prints each failed check otherwise.
 * Built with -DTEST_NEW_NO_SHIM (for AddressSanitizer, which has operators
 * of its own) it checks the test itself: alignment, sized deletes and the
 * library users, without the shim-specific and exhaustion checks.
 */
#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifndef TEST_NEW_NO_SHIM
#include <mimalloc.h>
#include "cgmalloc.h"
#endif

static int checks, failures;

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		checks++;                                                     \
		if (!(cond)) {                                                \
			failures++;                                           \
			std::fprintf(stderr, "test_new: %s:%d: FAIL: %s: ",   \
				     __FILE__, __LINE__, #cond);              \
			std::fprintf(stderr, __VA_ARGS__);                    \
			std::fputc('\n', stderr);                             \
		}                                                             \
	} while (0)

static bool aligned_to(const void *p, std::size_t a)
{
	return (reinterpret_cast<std::uintptr_t>(p) & (a - 1)) == 0;
}

/* Memory served by mimalloc (the shim), not by glibc. */
static bool from_shim(const void *p)
{
#ifdef TEST_NEW_NO_SHIM
	(void)p;
	return true;
#else
	return mi_is_in_heap_region(p);
#endif
}

/* Keep the compiler from folding sizes it could see. */
static volatile std::size_t vsize;
static std::size_t opaque(std::size_t n)
{
	vsize = n;
	return vsize;
}

static std::size_t count_not(const void *p, std::size_t n, unsigned char v)
{
	const unsigned char *c = static_cast<const unsigned char *>(p);
	std::size_t bad = 0;

	for (std::size_t i = 0; i < n; i++)
		bad += c[i] != v;
	return bad;
}

/* ---- a static initialiser that allocates before main() ---- */

struct alignas(256) Page256 {
	unsigned char b[256];
};

struct EarlyAllocations {
	int *ints;
	std::string *text;
	Page256 *pages;
	void *raw_aligned;
	std::map<int, std::string> names;

	EarlyAllocations()
	{
		ints = new int[1000];
		for (int i = 0; i < 1000; i++)
			ints[i] = i * 3;
		text = new std::string(5000, 'e');
		pages = new Page256[7];		/* aligned new[] */
		std::memset(pages, 0x6b, sizeof(Page256) * 7);
		raw_aligned = ::operator new(300, std::align_val_t(4096));
		std::memset(raw_aligned, 0x6c, 300);
		for (int i = 0; i < 200; i++)
			names[i] = "static initialiser entry " + std::to_string(i);
	}
};

static EarlyAllocations early;

/* Allocation at exit: a static destructor that allocates and frees. */
struct ExitAllocations {
	~ExitAllocations()
	{
		std::vector<std::string> v;

		for (int i = 0; i < 1000; i++)
			v.push_back(std::string(100, 'x') + std::to_string(i));
		Page256 *p = new Page256[3];
		bool ok = aligned_to(p, 256) && v[999].size() == 103;

		delete[] p;
		if (!ok) {
			std::fputs("test_new: FAIL: allocation in a static destructor\n", stderr);
			std::_Exit(3);
		}
	}
};

static ExitAllocations at_exit_user;

static void test_static_initialiser()
{
	std::size_t bad = 0;

	for (int i = 0; i < 1000; i++)
		bad += early.ints[i] != i * 3;
	bad += count_not(early.text->data(), 5000, 'e');
	bad += count_not(early.pages, sizeof(Page256) * 7, 0x6b);
	bad += count_not(early.raw_aligned, 300, 0x6c);
	for (int i = 0; i < 200; i++)
		bad += early.names[i] != "static initialiser entry " + std::to_string(i);
	CHECK(bad == 0, "%zu values changed since the static initialiser", bad);
	CHECK(from_shim(early.ints) && from_shim(early.text) && from_shim(early.pages) &&
	      from_shim(early.raw_aligned), "static initialiser memory not from the shim");
	CHECK(aligned_to(early.pages, 256), "new Page256[] at %p", (void *)early.pages);
	CHECK(aligned_to(early.raw_aligned, 4096), "aligned new at %p", early.raw_aligned);
	delete[] early.ints;
	delete early.text;
	delete[] early.pages;
	::operator delete(early.raw_aligned, std::align_val_t(4096));
}

/* ---- every variant is the shim's ---- */

template <typename F> static void check_symbol_from_shim(F *fn, const char *what)
{
#ifdef TEST_NEW_NO_SHIM
	(void)fn;
	(void)what;
#else
	Dl_info info{};
	bool ok = dladdr(reinterpret_cast<void *>(fn), &info) && info.dli_fname &&
		  std::strstr(info.dli_fname, "libcgmalloc");

	CHECK(ok, "%s is bound to %s, not libcgmalloc.so", what,
	      info.dli_fname ? info.dli_fname : "?");
#endif
}

using std::align_val_t;
using std::nothrow_t;
using std::size_t;

static void *(*const new_plain)(size_t) = &::operator new;
static void *(*const new_array)(size_t) = &::operator new[];
static void *(*const new_nothrow)(size_t, const nothrow_t &) noexcept = &::operator new;
static void *(*const new_array_nothrow)(size_t, const nothrow_t &) noexcept = &::operator new[];
static void *(*const new_aligned)(size_t, align_val_t) = &::operator new;
static void *(*const new_array_aligned)(size_t, align_val_t) = &::operator new[];
static void *(*const new_aligned_nothrow)(size_t, align_val_t, const nothrow_t &) noexcept =
	&::operator new;
static void *(*const new_array_aligned_nothrow)(size_t, align_val_t, const nothrow_t &) noexcept =
	&::operator new[];

static void (*const del_plain)(void *) noexcept = &::operator delete;
static void (*const del_array)(void *) noexcept = &::operator delete[];
static void (*const del_sized)(void *, size_t) noexcept = &::operator delete;
static void (*const del_array_sized)(void *, size_t) noexcept = &::operator delete[];
static void (*const del_nothrow)(void *, const nothrow_t &) noexcept = &::operator delete;
static void (*const del_array_nothrow)(void *, const nothrow_t &) noexcept = &::operator delete[];
static void (*const del_aligned)(void *, align_val_t) noexcept = &::operator delete;
static void (*const del_array_aligned)(void *, align_val_t) noexcept = &::operator delete[];
static void (*const del_sized_aligned)(void *, size_t, align_val_t) noexcept = &::operator delete;
static void (*const del_array_sized_aligned)(void *, size_t, align_val_t) noexcept =
	&::operator delete[];
static void (*const del_aligned_nothrow)(void *, align_val_t, const nothrow_t &) noexcept =
	&::operator delete;
static void (*const del_array_aligned_nothrow)(void *, align_val_t, const nothrow_t &) noexcept =
	&::operator delete[];

static void test_variants_are_the_shims()
{
	check_symbol_from_shim(new_plain, "operator new(size_t)");
	check_symbol_from_shim(new_array, "operator new[](size_t)");
	check_symbol_from_shim(new_nothrow, "operator new(size_t, nothrow_t)");
	check_symbol_from_shim(new_array_nothrow, "operator new[](size_t, nothrow_t)");
	check_symbol_from_shim(new_aligned, "operator new(size_t, align_val_t)");
	check_symbol_from_shim(new_array_aligned, "operator new[](size_t, align_val_t)");
	check_symbol_from_shim(new_aligned_nothrow, "operator new(size_t, align_val_t, nothrow_t)");
	check_symbol_from_shim(new_array_aligned_nothrow,
			       "operator new[](size_t, align_val_t, nothrow_t)");
	check_symbol_from_shim(del_plain, "operator delete(void *)");
	check_symbol_from_shim(del_array, "operator delete[](void *)");
	check_symbol_from_shim(del_sized, "operator delete(void *, size_t)");
	check_symbol_from_shim(del_array_sized, "operator delete[](void *, size_t)");
	check_symbol_from_shim(del_nothrow, "operator delete(void *, nothrow_t)");
	check_symbol_from_shim(del_array_nothrow, "operator delete[](void *, nothrow_t)");
	check_symbol_from_shim(del_aligned, "operator delete(void *, align_val_t)");
	check_symbol_from_shim(del_array_aligned, "operator delete[](void *, align_val_t)");
	check_symbol_from_shim(del_sized_aligned, "operator delete(void *, size_t, align_val_t)");
	check_symbol_from_shim(del_array_sized_aligned,
			       "operator delete[](void *, size_t, align_val_t)");
	check_symbol_from_shim(del_aligned_nothrow,
			       "operator delete(void *, align_val_t, nothrow_t)");
	check_symbol_from_shim(del_array_aligned_nothrow,
			       "operator delete[](void *, align_val_t, nothrow_t)");
}

/* ---- alignment and usable size of every returned pointer ---- */

static const size_t sizes[] = { 0, 1, 7, 8, 9, 15, 16, 17, 100, 1000, 4095, 4096,
				65536, 100000, 1 << 20, (5 << 20) + 3 };

/* What operator new without align_val_t guarantees on x86-64. */
static size_t default_new_align(size_t n)
{
	/* As malloc: 16 for anything that can hold a max_align_t-sized object. */
	return n > 8 ? __STDCPP_DEFAULT_NEW_ALIGNMENT__ : 8;
}

/* Write the whole block, then check it: the memory is really ours. */
static bool usable(void *p, size_t n, unsigned char v)
{
	std::memset(p, v, n);
	return count_not(p, n, v) == 0 && from_shim(p) && malloc_usable_size(p) >= n;
}

static void test_plain_variants()
{
	for (size_t n0 : sizes) {
		size_t n = opaque(n0), a = default_new_align(n);
		void *p;

		p = new_plain(n);
		CHECK(p && aligned_to(p, a) && usable(p, n, 1), "new(%zu) = %p", n, p);
		del_plain(p);
		p = new_array(n);
		CHECK(p && aligned_to(p, a) && usable(p, n, 2), "new[](%zu) = %p", n, p);
		del_array(p);
		p = new_nothrow(n, std::nothrow);
		CHECK(p && aligned_to(p, a) && usable(p, n, 3), "new(%zu, nothrow) = %p", n, p);
		del_nothrow(p, std::nothrow);
		p = new_array_nothrow(n, std::nothrow);
		CHECK(p && aligned_to(p, a) && usable(p, n, 4), "new[](%zu, nothrow) = %p", n, p);
		del_array_nothrow(p, std::nothrow);
		p = new_plain(n);
		CHECK(p && usable(p, n, 5), "new(%zu) = %p", n, p);
		del_sized(p, n);
		p = new_array(n);
		CHECK(p && usable(p, n, 6), "new[](%zu) = %p", n, p);
		del_array_sized(p, n);
	}
	del_plain(nullptr);
	del_array(nullptr);
	del_aligned(nullptr, align_val_t(64));
}

static void test_aligned_variants()
{
	for (size_t shift = 0; shift <= 22; shift++) {
		size_t a = size_t(1) << shift;

		for (size_t n0 : sizes) {
			size_t n = opaque(n0);
			align_val_t al{a};
			void *p;

			p = new_aligned(n, al);
			CHECK(p && aligned_to(p, a) && usable(p, n, 7),
			      "new(%zu, align %zu) = %p", n, a, p);
			del_aligned(p, al);
			p = new_array_aligned(n, al);
			CHECK(p && aligned_to(p, a) && usable(p, n, 8),
			      "new[](%zu, align %zu) = %p", n, a, p);
			del_array_aligned(p, al);
			p = new_aligned_nothrow(n, al, std::nothrow);
			CHECK(p && aligned_to(p, a) && usable(p, n, 9),
			      "new(%zu, align %zu, nothrow) = %p", n, a, p);
			del_aligned_nothrow(p, al, std::nothrow);
			p = new_array_aligned_nothrow(n, al, std::nothrow);
			CHECK(p && aligned_to(p, a) && usable(p, n, 10),
			      "new[](%zu, align %zu, nothrow) = %p", n, a, p);
			del_array_aligned_nothrow(p, al, std::nothrow);
			p = new_aligned(n, al);
			CHECK(p && aligned_to(p, a), "new(%zu, align %zu) = %p", n, a, p);
			del_sized_aligned(p, n, al);
			p = new_array_aligned(n, al);
			CHECK(p && aligned_to(p, a), "new[](%zu, align %zu) = %p", n, a, p);
			del_array_sized_aligned(p, n, al);
		}
	}
}

/* ---- exhaustion: bad_alloc, nullptr, and the new_handler ---- */

#ifndef TEST_NEW_NO_SHIM

static const size_t huge_sizes[] = { SIZE_MAX, SIZE_MAX / 2, size_t(1) << 48 };

template <typename F> static bool throws_bad_alloc(F f)
{
	try {
		void *p = f();

		std::fprintf(stderr, "test_new: no exception, got %p\n", p);
		return false;
	} catch (const std::bad_alloc &) {
		return true;
	} catch (...) {
		return false;
	}
}

static void test_exhaustion()
{
	for (size_t n0 : huge_sizes) {
		size_t n = opaque(n0);
		align_val_t al{64};

		CHECK(throws_bad_alloc([&] { return new_plain(n); }), "new(%zu)", n);
		CHECK(throws_bad_alloc([&] { return new_array(n); }), "new[](%zu)", n);
		CHECK(throws_bad_alloc([&] { return new_aligned(n, al); }), "new(%zu, align)", n);
		CHECK(throws_bad_alloc([&] { return new_array_aligned(n, al); }),
		      "new[](%zu, align)", n);
		CHECK(new_nothrow(n, std::nothrow) == nullptr, "new(%zu, nothrow)", n);
		CHECK(new_array_nothrow(n, std::nothrow) == nullptr, "new[](%zu, nothrow)", n);
		CHECK(new_aligned_nothrow(n, al, std::nothrow) == nullptr,
		      "new(%zu, align, nothrow)", n);
		CHECK(new_array_aligned_nothrow(n, al, std::nothrow) == nullptr,
		      "new[](%zu, align, nothrow)", n);
	}
	/* A new-expression whose array size overflows. */
	CHECK(throws_bad_alloc([] { return new Page256[opaque(SIZE_MAX / 64)]; }),
	      "new Page256[SIZE_MAX / 64]");
}

static int handler_calls;

/* Gives up at once: the allocation must be retried once, then fail. */
static void give_up_handler()
{
	handler_calls++;
	std::set_new_handler(nullptr);
}

static void test_new_handler_then_failure()
{
	size_t n = opaque(SIZE_MAX / 2);

	handler_calls = 0;
	std::set_new_handler(give_up_handler);
	CHECK(throws_bad_alloc([&] { return new_plain(n); }), "new(huge) with a handler");
	CHECK(handler_calls == 1, "handler called %d times", handler_calls);

	handler_calls = 0;
	std::set_new_handler(give_up_handler);
	CHECK(throws_bad_alloc([&] { return new_aligned(n, align_val_t(128)); }),
	      "aligned new(huge) with a handler");
	CHECK(handler_calls == 1, "handler called %d times", handler_calls);

	/* The nothrow forms call the handler too, then return nullptr. */
	handler_calls = 0;
	std::set_new_handler(give_up_handler);
	CHECK(new_nothrow(n, std::nothrow) == nullptr, "new(huge, nothrow) with a handler");
	CHECK(handler_calls == 1, "handler called %d times (nothrow)", handler_calls);

	handler_calls = 0;
	std::set_new_handler(give_up_handler);
	CHECK(new_array_aligned_nothrow(n, align_val_t(32), std::nothrow) == nullptr,
	      "new[](huge, align, nothrow) with a handler");
	CHECK(handler_calls == 1, "handler called %d times (aligned nothrow)", handler_calls);
}

static char *reserve;

/* Frees the reserve so that the retried allocation fits, and steps down. */
static void release_reserve_handler()
{
	handler_calls++;
	delete[] reserve;
	reserve = nullptr;
	malloc_trim(0);		/* give the pages back to the OS now */
	std::set_new_handler(nullptr);
}

static size_t address_space_now()
{
	unsigned long pages = 0;
	std::FILE *f = std::fopen("/proc/self/statm", "r");

	if (f) {
		if (std::fscanf(f, "%lu", &pages) != 1)
			pages = 0;
		std::fclose(f);
	}
	return pages * size_t(sysconf(_SC_PAGESIZE));
}

/*
 * Under an address-space limit, an allocation fails until the handler
 * frees a reserve; the retry then succeeds, for the plain and the aligned
 * forms.
 */
static void test_new_handler_retry_succeeds()
{
	const size_t MiB = size_t(1) << 20;
	struct rlimit old, lim;

	CHECK(getrlimit(RLIMIT_AS, &old) == 0, "getrlimit");
	for (int aligned = 0; aligned < 2; aligned++) {
		void *p = nullptr;

		/* Room for the reserve or the request, not both. */
		lim = old;
		lim.rlim_cur = address_space_now() + 320 * MiB;
		CHECK(setrlimit(RLIMIT_AS, &lim) == 0, "setrlimit");
		reserve = new char[192 * MiB];
		std::memset(reserve, 1, MiB);
		handler_calls = 0;
		std::set_new_handler(release_reserve_handler);
		try {
			p = aligned ? new_aligned(opaque(192 * MiB), align_val_t(4096))
				    : new_plain(opaque(192 * MiB));
		} catch (const std::bad_alloc &) {
			p = nullptr;
		}
		CHECK(setrlimit(RLIMIT_AS, &old) == 0, "restoring RLIMIT_AS");
		std::set_new_handler(nullptr);
		CHECK(handler_calls == 1, "%s: handler called %d times, expected once",
		      aligned ? "aligned" : "plain", handler_calls);
		CHECK(p != nullptr, "%s: the retry after the handler freed the reserve failed",
		      aligned ? "aligned" : "plain");
		if (p) {
			std::memset(p, 2, MiB);
			CHECK(!aligned || aligned_to(p, 4096), "retry result %p", p);
			if (aligned)
				del_aligned(p, align_val_t(4096));
			else
				del_plain(p);
		}
		delete[] reserve;
		reserve = nullptr;
	}
}
#endif

/* ---- the standard library on top of the operators ---- */

struct alignas(64) Line64 {
	double v[3];
};

struct alignas(4096) Page4096 {
	int v;
};

static thread_local std::string thread_name;		/* heap-backed; destroyed at thread exit */
static thread_local std::vector<Line64> thread_lines;

static std::atomic<int> thread_errors;

static void worker(int id)
{
	std::map<std::string, std::vector<int>> m;
	std::size_t total = 0;

	thread_name = "worker number " + std::to_string(id) + std::string(200, '.');
	thread_lines.resize(300 + id);
	if (!aligned_to(thread_lines.data(), 64))
		thread_errors++;
	for (int i = 0; i < 3000; i++) {
		std::string key = "key-" + std::to_string(i * 7919 % 3001) + "-" + std::to_string(id);

		m[key].push_back(i);
	}
	for (auto &kv : m)
		total += kv.second.size() + kv.first.size();
	/* Exceptions allocate their objects with malloc. */
	for (int i = 0; i < 200; i++) {
		try {
			throw std::runtime_error("thrown by worker " + std::to_string(id) +
						 std::string(100, '!'));
		} catch (const std::runtime_error &e) {
			if (std::strncmp(e.what(), "thrown by worker", 16) != 0)
				thread_errors++;
		}
	}
	if (m.size() != 3000 || total == 0)
		thread_errors++;
}

static void test_standard_library()
{
	std::vector<std::thread> threads;
	std::vector<Line64> lines(1000);
	std::vector<Page4096> pages(5);
	std::unique_ptr<Page4096[]> page_array(new Page4096[3]);
	auto shared = std::make_shared<Line64>();
	std::map<int, std::string> big;
	std::string s;

	CHECK(aligned_to(lines.data(), 64), "vector<Line64> at %p", (void *)lines.data());
	CHECK(aligned_to(pages.data(), 4096), "vector<Page4096> at %p", (void *)pages.data());
	CHECK(aligned_to(page_array.get(), 4096), "new Page4096[] at %p", (void *)page_array.get());
	CHECK(aligned_to(shared.get(), 64), "make_shared<Line64> at %p", (void *)shared.get());
	CHECK(from_shim(lines.data()) && from_shim(pages.data()), "container memory not the shim's");
	for (int i = 0; i < 100; i++) {
		lines.resize(lines.size() + 97);
		if (!aligned_to(lines.data(), 64))
			break;
	}
	CHECK(aligned_to(lines.data(), 64), "vector<Line64> after growth at %p",
	      (void *)lines.data());

	for (int i = 0; i < 100000; i++)
		big[i * 7] = std::to_string(i);
	for (int i = 0; i < 20000; i++)
		s += static_cast<char>('a' + i % 26);
	CHECK(big.size() == 100000 && big[7 * 4242] == "4242", "map contents");
	CHECK(s.size() == 20000 && s[12345] == 'a' + 12345 % 26, "string contents");

	for (int i = 0; i < 8; i++)
		threads.emplace_back(worker, i);
	for (auto &t : threads)
		t.join();
	CHECK(thread_errors == 0, "%d errors in the worker threads", thread_errors.load());
}

int main()
{
#ifndef TEST_NEW_NO_SHIM
	CHECK(cgm_initialized() == 1, "the shim is not active");
#endif
	test_static_initialiser();
	test_variants_are_the_shims();
	test_plain_variants();
	test_aligned_variants();
#ifndef TEST_NEW_NO_SHIM
	/* AddressSanitizer's operator new aborts on exhaustion instead. */
	test_exhaustion();
	test_new_handler_then_failure();
	test_new_handler_retry_succeeds();
#endif
	test_standard_library();

	std::printf("test_new: %d passed, %d failed\n", checks - failures, failures);
	return failures ? 1 : 0;
}
