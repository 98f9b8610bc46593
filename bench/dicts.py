"""dicts: a dict-heavy CPython workload for the allocator benchmark.

CPython serves objects up to 512 bytes from its own pymalloc arenas but
takes dict tables, long strings and lists from malloc; a workload of
building, merging and discarding many dicts therefore reaches malloc often,
the way a real Python service does.

Usage: python3 bench/dicts.py [RECORDS]   (default 120000)
"""
import sys


def records(n):
    """n small dicts of mixed value types, like rows parsed from JSON."""
    for i in range(n):
        yield {
            "id": i,
            "name": "user-%d" % i,
            "group": "g%d" % (i % 113),
            "tags": ["t%d" % (i % 7), "t%d" % (i % 11)],
            "score": (i * 7919) % 1000 / 10.0,
        }


def main():
    try:
        n = int(sys.argv[1]) if len(sys.argv) > 1 else 120000
        if n <= 0:
            raise ValueError
    except ValueError:
        print("dicts.py: RECORDS must be a positive integer", file=sys.stderr)
        return 2

    by_id = {}
    by_group = {}
    for rec in records(n):
        by_id[rec["id"]] = rec
        by_group.setdefault(rec["group"], []).append(rec)

    # Derived indexes that are built and dropped: large dict tables
    # come from malloc and go back to it.
    totals = {g: sum(r["score"] for r in rs) for g, rs in by_group.items()}
    names = {r["name"]: r for r in by_id.values() if r["score"] > 50}
    merged = {**by_id, **{k + n: dict(v, copy=True) for k, v in by_id.items() if k % 2}}
    for i in range(0, n, 2):
        del by_id[i]
    words = {}
    for rec in merged.values():
        for t in rec["tags"]:
            words[t] = words.get(t, 0) + 1

    expect = n // 2
    if len(by_id) != expect or len(merged) != n + expect:
        print("dicts.py: wrong dict sizes", file=sys.stderr)
        return 1
    print("dicts: %d records, %d groups, %d names, %d tags, total %.1f"
          % (n, len(totals), len(names), len(words), sum(totals.values())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
