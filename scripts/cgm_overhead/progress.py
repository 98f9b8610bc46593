"""The progress line on stderr: run i of N, configuration, elapsed time and
an estimate of the time left.

On a terminal the line is rewritten in place; otherwise (make, a log file)
a line is printed at most every few seconds, so a log stays short.
"""

import sys
import time

LOG_INTERVAL = 10.0


def hms(seconds):
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return "%d:%02d:%02d" % (h, m, s) if h else "%d:%02d" % (m, s)


class Progress:
    def __init__(self, stream=None, quiet=False, prefix="cgm-overhead"):
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.prefix = prefix
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = time.monotonic()
        self.last = None
        self.width = 0

    def line(self, phase, i, total, config, eta):
        """The text of the progress line (without any terminal control)."""
        text = "%s: %s %d of %d, %s, elapsed %s" % (
            self.prefix, phase, i, total, config, hms(time.monotonic() - self.start))
        if eta is not None:
            text += ", ETA %s" % hms(eta)
        return text

    def update(self, phase, i, total, config, eta=None):
        if self.quiet:
            return
        now = time.monotonic()
        text = self.line(phase, i, total, config, eta)
        if self.tty:
            pad = max(0, self.width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self.width = len(text)
        elif self.last is None or now - self.last >= LOG_INTERVAL or i == total:
            self.stream.write(text + "\n")
        else:
            return
        self.last = now
        self.stream.flush()

    def done(self):
        if self.quiet or not self.tty or not self.width:
            return
        self.stream.write("\r" + " " * self.width + "\r")
        self.stream.flush()
        self.width = 0


class Eta:
    """Time left, from the mean duration of each configuration's runs so
    far (wall time, or callgrind's own durations for callgrind runs)."""

    def __init__(self):
        self.durations = {}

    def add(self, key, seconds):
        self.durations.setdefault(key, []).append(seconds)

    def mean(self, key):
        d = self.durations.get(key)
        if d:
            return sum(d) / len(d)
        every = [x for v in self.durations.values() for x in v]
        return sum(every) / len(every) if every else None

    def left(self, keys):
        total = 0.0
        for k in keys:
            m = self.mean(k)
            if m is None:
                return None
            total += m
        return total
