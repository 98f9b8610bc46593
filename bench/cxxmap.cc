/*
 * cxxmap: a C++ workload of std::map<std::string, std::string>.
 *
 * Node-based containers with heap strings: operator new/delete of tree
 * nodes (about 100 bytes) and of string buffers longer than the small-string
 * buffer, inserted, looked up, erased and reinserted in rounds — the
 * allocation pattern of much real C++ code, through the shim's new/delete.
 *
 * Usage: cxxmap [KEYS] [ROUNDS]   (default 100000 keys, 4 rounds)
 */
#include <cstdio>
#include <map>
#include <string>

#include "bench_common.h"

/* Keys and values longer than libstdc++'s 15-byte small-string buffer, so
 * that every string owns a heap block. */
static std::string key_of(unsigned long i)
{
	return "key-" + std::to_string(i * 2654435761ul % 1000003ul) + "-of-the-benchmark";
}

int main(int argc, char **argv)
{
	unsigned long keys = bench_arg(argc, argv, 1, 100000, "KEYS");
	unsigned long rounds = bench_arg(argc, argv, 2, 4, "ROUNDS");
	std::map<std::string, std::string> m;
	unsigned long found = 0;

	for (unsigned long r = 0; r < rounds; r++) {
		for (unsigned long i = 0; i < keys; i++)
			m[key_of(i)] = "value-" + std::to_string(i + r) + "-with-some-padding";
		for (unsigned long i = 0; i < keys; i += 3)
			found += m.count(key_of(i));
		/* Erase about half, so the next round reallocates nodes. */
		for (auto it = m.begin(); it != m.end();)
			it = (it->second.size() & 1) ? m.erase(it) : std::next(it);
	}
	if (found != rounds * ((keys + 2) / 3)) {
		std::fprintf(stderr, "%s: lookups found %lu keys, expected %lu\n", argv[0],
			     found, rounds * ((keys + 2) / 3));
		return BENCH_FAILED;
	}
	std::printf("cxxmap: %lu keys x %lu rounds, %zu left\n", keys, rounds, m.size());
	return 0;
}
