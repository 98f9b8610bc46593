/*
 * A C++ program for the preload test, built without any link to cgmalloc:
 * std::string, std::map, std::unordered_map, std::thread and aligned new,
 * printing results that must be the same with and without the preload.
 * It checks the alignment of its over-aligned objects itself and exits 1
 * (after printing which) when one is wrong.
 */
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

struct alignas(128) Cell {
	std::uint64_t v[4];
};

static int misaligned;

static void check_align(const void *p, std::size_t a, const char *what)
{
	if (reinterpret_cast<std::uintptr_t>(p) % a != 0) {
		std::printf("misaligned %s: %p (alignment %zu)\n", what, p, a);
		misaligned++;
	}
}

static std::uint64_t next(std::uint64_t &s)
{
	s = s * 6364136223846793005ull + 1442695040888963407ull;
	return s >> 33;
}

static std::string word(std::uint64_t &s)
{
	static const char *const syll[] = { "an", "be", "co", "du", "ef", "go", "hi", "ju" };
	std::string w;

	for (std::uint64_t n = 1 + next(s) % 4; n; n--)
		w += syll[next(s) % 8];
	return w;
}

/* One thread's share: count words, build strings, use over-aligned cells. */
static void work(int id, std::map<std::string, long> *out)
{
	std::uint64_t s = 1000 + id;
	std::unordered_map<std::string, long> counts;
	std::vector<Cell> cells(1000 + id);

	check_align(cells.data(), alignof(Cell), "vector<Cell>");
	for (int i = 0; i < 100000; i++)
		counts[word(s)] += i % 7;
	for (auto &c : cells)
		c.v[0] = next(s);
	counts["cells"] = static_cast<long>(std::count_if(cells.begin(), cells.end(),
		[](const Cell &c) { return c.v[0] % 2 == 0; }));
	for (auto &kv : counts)
		(*out)[kv.first] = kv.second;
}

int main()
{
	const int nthreads = 4;
	std::vector<std::map<std::string, long>> parts(nthreads);
	std::vector<std::thread> threads;
	std::map<std::string, long> total;

	for (int i = 0; i < nthreads; i++)
		threads.emplace_back(work, i, &parts[i]);
	for (auto &t : threads)
		t.join();
	for (auto &p : parts)
		for (auto &kv : p)
			total[kv.first] += kv.second;
	std::printf("distinct words: %zu\n", total.size());
	int shown = 0;
	for (auto &kv : total) {
		if (shown++ % 500 == 0)
			std::printf("  %s = %ld\n", kv.first.c_str(), kv.second);
	}

	/* Aligned new in all its forms. */
	std::unique_ptr<Cell[]> cell_array(new Cell[333]);
	auto one = std::make_unique<Cell>();
	void *page = ::operator new(10000, std::align_val_t(4096));
	void *nothrow_page = ::operator new[](5000, std::align_val_t(65536), std::nothrow);

	check_align(cell_array.get(), alignof(Cell), "new Cell[]");
	check_align(one.get(), alignof(Cell), "make_unique<Cell>");
	check_align(page, 4096, "new(align 4096)");
	check_align(nothrow_page, 65536, "new[](align 65536, nothrow)");
	::operator delete(page, std::align_val_t(4096));
	::operator delete[](nothrow_page, std::align_val_t(65536));

	/* Strings that grow, are copied and sorted. */
	std::vector<std::string> lines;
	std::uint64_t s = 7;
	for (int i = 0; i < 50000; i++)
		lines.push_back(word(s) + "-" + std::to_string(i % 977) + std::string(i % 50, 'x'));
	std::sort(lines.begin(), lines.end());
	std::string joined;
	for (std::size_t i = 0; i < lines.size(); i += 997)
		joined += lines[i] + ";";
	std::printf("lines: %zu, first %s, last %s, joined %zu bytes\n", lines.size(),
		    lines.front().c_str(), lines.back().c_str(), joined.size());
	std::printf("misaligned: %d\n", misaligned);
	return misaligned ? 1 : 0;
}
