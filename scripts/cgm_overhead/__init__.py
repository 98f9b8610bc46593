"""cgm-overhead: run a workload under several allocator configurations,
interleaved, and report what each costs with ministat's statistics.

Run it with scripts/cgm-overhead (a launcher that puts this package on
PYTHONPATH) or `python3 -m cgm_overhead`.  The package is split by concern:
stats (summaries, ministat's verdicts), configs (what each configuration
preloads), measure (one run: wait4 rusage, perf stat), callgrind, schedule
(the interleaved order), progress, report (the table), record (the JSON
file), plot (gnuplot), harness (the whole run) and cli (options and errors).
"""

VERSION = "0.1.0"


class HarnessError(Exception):
    """A problem to report to the user in one line, then exit with status."""

    def __init__(self, message, status=2):
        super().__init__(message)
        self.status = status
