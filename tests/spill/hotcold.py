"""A workload with cold data and a hot part (tests/spill, tests/policy).

usage: hotcold.py SECONDS [COLD_STRINGS]

Makes COLD_STRINGS (150000) strings of 448 characters it never touches
again -- about 80 MB, in python's own arenas -- then a dict of 20000 small
lists, says "ready" on stderr, and for SECONDS keeps writing to the
lists: the hot part, written between any two passes of a clock.
"""
import os
import sys
import time

cold = [os.urandom(32).hex() * 7 for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 150000)]
hot = {i: [i] * 20 for i in range(20000)}
print("ready", file=sys.stderr, flush=True)
t = time.time()
while time.time() - t < float(sys.argv[1]):
    for i in range(0, 20000, 7):
        hot[i][0] += 1
