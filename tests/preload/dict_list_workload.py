# A dict- and list-heavy workload for python3 under the preload: builds,
# mutates and discards many small objects, and prints deterministic results
# (run with PYTHONHASHSEED=0; nothing depends on set or id order).
import collections
import json


def lcg(seed):
    while True:
        seed = (seed * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        yield seed >> 33


def words(n, rng):
    syll = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "zu"]
    return ["".join(syll[next(rng) % 10] for _ in range(1 + next(rng) % 4)) for _ in range(n)]


rng = lcg(42)
ws = words(200000, rng)

counts = {}
for w in ws:
    counts[w] = counts.get(w, 0) + 1
top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
print("distinct words:", len(counts))
print("top:", top)

# Nested dicts and lists, rebuilt and thrown away.
index = collections.defaultdict(list)
for i, w in enumerate(ws):
    index[w[:2]].append(i)
print("prefixes:", sorted((k, len(v)) for k, v in index.items()))

records = [{"id": i, "word": w, "tags": [w[:1], w[-1:], str(i % 7)]} for i, w in enumerate(ws[:50000])]
for r in records[::3]:
    r["tags"].extend([t.upper() for t in r["tags"]])
    r["extra"] = {"len": len(r["word"]), "twice": r["word"] * 2}
blob = json.dumps(records[:2000], sort_keys=True)
back = json.loads(blob)
print("json bytes:", len(blob), "roundtrip:", back == records[:2000])
del records, back

# Lists that grow, shrink and are sliced.
acc = []
for i in range(300000):
    acc.append(i * i % 1009)
    if i % 1000 == 999:
        acc = acc[::2] + acc[1::2]
        del acc[: len(acc) // 3]
print("list len:", len(acc), "sum:", sum(acc), "max:", max(acc))

# A dict of lists of tuples, sorted by a key built from strings.
groups = {}
for i in range(100000):
    groups.setdefault(i % 1013, []).append((str(i)[::-1], i))
checksum = 0
for k in sorted(groups):
    g = sorted(groups[k])
    checksum = (checksum * 31 + g[0][1] + len(g)) % (1 << 61)
print("groups:", len(groups), "checksum:", checksum)

s = "".join(str(x) for x in range(100000))
print("string:", len(s), s.count("99"), hash(s) & 0xFFFF)
