"""dicts: a dict-heavy CPython workload for the allocator benchmark.

CPython serves objects up to 512 bytes from its own pymalloc arenas and
only larger blocks from malloc, so small dicts never reach the allocator
under test.  The records here are the size of real parsed JSON documents:
dicts of 20 to 40 fields (hash tables past 512 bytes), strings and lists
past 512 bytes, merged and discarded in a sliding window — so the dicts'
tables, the strings and the list arrays come from malloc and go back to it.

Usage: python3 bench/dicts.py [RECORDS]   (default 120000)
"""
import sys

WINDOW = 2000
# Field names of documents with 20..40 fields, made once: the work per
# record is then mostly in C (dict construction, copies, merges), where
# the allocation share is high, not in interpreting Python bytecode.
FIELDS = [tuple("field_%d" % k for k in range(n)) for n in range(20, 41)]


def record(i):
    """A parsed-JSON-like document with 20..40 fields."""
    rec = dict.fromkeys(FIELDS[i % 21], i)
    rec["id"] = i
    rec["name"] = "user-" * (100 + i % 150)
    rec["tags"] = [i] * (70 + i % 50)
    return rec


def main():
    try:
        n = int(sys.argv[1]) if len(sys.argv) > 1 else 120000
        if n <= 0:
            raise ValueError
    except ValueError:
        print("dicts.py: RECORDS must be a positive integer", file=sys.stderr)
        return 2

    window = {}
    by_tag = {}
    total = 0
    for i in range(n):
        rec = record(i)
        window[i] = rec
        # A merged copy and a derived index, built and dropped again.
        merged = {**rec, "copy": True, "name": rec["name"] + "!"}
        copies = [dict(rec) for _ in range(4)]
        total += len(merged) + len(merged["name"]) + len(copies)
        by_tag.setdefault(i % 97, {})[i] = rec
        if i >= WINDOW:
            old = window.pop(i - WINDOW)
            del by_tag[old["id"] % 97][old["id"]]

    live = sum(len(d) for d in by_tag.values())
    if len(window) != min(n, WINDOW) or live != len(window):
        print("dicts.py: wrong sizes (%d in the window, %d indexed)" % (len(window), live),
              file=sys.stderr)
        return 1
    print("dicts: %d records, %d in the window, checksum %d" % (n, len(window), total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
