# python3 forking workers that read the parent's heap, for
# test_spill_programs.sh: under spill=1 and a memory.high below what the
# parent builds, some of its records are in the pool when it forks, and
# each worker (multiprocessing, fork start method) reads its share of
# them, as inherited, and builds a heap of its own.  The parent reads
# every record again after the workers end.  The output depends on the
# records' bytes alone, so a byte lost or torn in the parent or in a
# child changes it.
import multiprocessing
import zlib

N = 150000
PARTS = 6


def record(i):
    return "%07d %s %d" % (i, "abcdefghij" * (3 + i % 7), i * 7919 % 100003)


RECORDS = [record(i) for i in range(N)]


def check(part):
    lo, hi = part
    crc = 0
    for i in range(lo, hi):
        crc = zlib.crc32(RECORDS[i].encode(), crc)
    own = {i: RECORDS[i][::-1] for i in range(lo, hi, 3)}
    return lo, hi, crc, sum(len(v) for v in own.values())


if __name__ == "__main__":
    ctx = multiprocessing.get_context("fork")
    parts = [(k * N // PARTS, (k + 1) * N // PARTS) for k in range(PARTS)]
    with ctx.Pool(3) as pool:
        for lo, hi, crc, own in pool.map(check, parts):
            print("records %d..%d: crc32 %08x, %d bytes of the worker's own" % (lo, hi, crc, own))
    total = 0
    for r in RECORDS:
        total = zlib.crc32(r.encode(), total)
    print("parent: %d records, crc32 %08x" % (len(RECORDS), total))
