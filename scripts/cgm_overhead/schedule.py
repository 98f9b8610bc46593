"""The order of the runs: a warm-up, then interleaved rounds.

Every round runs each configuration once, so a slow drift of the machine
(another job, thermal state, page cache) spreads over all configurations
instead of landing on whichever ran last; the runs of one configuration are
never consecutive blocks.  Orders:

  rotate   A B C, B C A, C A B, ...: also no configuration always follows
           the same one (the default)
  fixed    A B C, A B C, ...
  shuffle  each round in a random order from --seed
"""

import random

ORDERS = ("rotate", "fixed", "shuffle")


def warmup(names, late=()):
    """The warm-up order: every configuration once, those in @late last
    (they need a figure the others' warm-up measures)."""
    return [n for n in names if n not in late] + [n for n in names if n in late]


def rounds(names, runs, order="rotate", seed=0):
    """[(round, name)] for @runs rounds over @names in @order."""
    if order not in ORDERS:
        raise ValueError("unknown order %r" % order)
    rng = random.Random(seed)
    out = []
    k = len(names)
    for r in range(runs):
        if order == "rotate" and k:
            this = names[r % k:] + names[:r % k]
        elif order == "shuffle":
            this = list(names)
            rng.shuffle(this)
        else:
            this = list(names)
        out.extend((r, n) for n in this)
    return out
