"""A python3 program with cold data, for bench/spill_workload.sh.

It builds a dict of ENTRIES records (int key -> str of about 200
characters: a serial number, words, a random hex tail), then works on the
keys of one contiguous fifth of them -- the first fifth built, so that
under a limit they are as old as the rest when the work starts -- and
never reads the other four fifths again until it checks them at the end.
The work is OPS lookups spread over the hot keys by a multiplicative hash;
every fourth one replaces the value with an equal new string (an update
that frees one block and allocates another).  The work is timed with
perf_counter and printed; the driver reads the group's figures between
the phases.

Protocol (stdin/stdout, line by line): it prints a marker and waits for a
line on stdin before it goes on:
    ready                              before anything is built
    built ENTRIES HOT                  the dict is built
    done WORK_S FIRST_HALF_S SECOND_HALF_S
    verified|CORRUPT ...               after the last line: all records read back
Usage: spill_dict.py [ENTRIES] [OPS]
"""
import random
import sys
import time
import zlib

WORDS = ("memory", "cgroup", "page", "cold", "hot", "reclaim", "spill",
         "python", "dict", "entry", "record", "value", "high", "limit",
         "resident", "pool", "compress", "refault", "working", "set",
         "the", "of", "and", "a", "to", "in", "is", "it", "that", "for")


def wait(marker):
    print(marker, flush=True)
    if not sys.stdin.readline():
        sys.exit("spill_dict: stdin closed")


def build(entries):
    """The dict and the sum of the crc32 of every value."""
    r = random.Random(1)
    chunks = []
    for _ in range(1024):
        s = ""
        while len(s) < 160:
            s += r.choice(WORDS) + " "
        chunks.append(s[:160])
    d = {}
    crc = 0
    bits = r.getrandbits
    for i in range(entries):
        v = "%09d|%s|%032x" % (i, chunks[bits(10)], bits(128))
        d[i] = v
        crc += zlib.crc32(v.encode())
    return d, crc


def work(d, hot, ops):
    """OPS lookups over keys 0..hot-1, one in four an update; seconds of each half."""
    n = 0
    halves = []
    j = 0
    for end in (ops // 2, ops):
        t0 = time.perf_counter()
        while j < end:
            k = (j * 2654435761) % hot
            v = d[k]
            n += len(v)
            if j & 3 == 0:
                d[k] = v[:100] + v[100:]
            j += 1
        halves.append(time.perf_counter() - t0)
    return halves, n


def main():
    entries = int(sys.argv[1]) if len(sys.argv) > 1 else 1100000
    ops = int(sys.argv[2]) if len(sys.argv) > 2 else 6000000
    hot = entries // 5
    wait("ready")
    d, crc = build(entries)
    wait("built %d %d" % (entries, hot))
    (h1, h2), _ = work(d, hot, ops)
    wait("done %.4f %.4f %.4f" % (h1 + h2, h1, h2))
    check = sum(zlib.crc32(v.encode()) for v in d.values())
    if check != crc or len(d) != entries:
        print("CORRUPT crc %d, expected %d; %d entries" % (check, crc, len(d)), flush=True)
        sys.exit(1)
    print("verified %d entries" % len(d), flush=True)


main()
