"""One run of the workload, measured from the rusage wait4 returns.

The run is spawned in its own process group with stdin from a file
(default /dev/null), stdout to /dev/null and stderr kept (its last lines are
reported when the run fails).  The workload is started by the small helper
cgm-overhead-spawn (spawn.c), which measures wall time around fork and
wait4 and reports wait4's rusage of the workload alone: a child of this
Python process would report the harness's own RSS as its max RSS.  Without
the helper (not built), the run is measured here and max RSS includes about
10 MB of the harness, which the report notes.
"""

import os
import signal
import tempfile
import time

# (key, title, unit) of the measures every run has.
RUSAGE_MEASURES = (
    ("wall", "wall time", "s"),
    ("user", "user CPU", "s"),
    ("sys", "system CPU", "s"),
    # Less disturbed than wall time by other jobs on a shared machine.
    ("cpu", "user + system CPU", "s"),
    ("maxrss", "max RSS", "KiB"),
    ("minflt", "minor page faults", ""),
    ("majflt", "major page faults", ""),
    ("nvcsw", "voluntary context switches", ""),
    ("nivcsw", "involuntary context switches", ""),
)
STDERR_TAIL_LINES = 5
# The descriptor on which cgm-overhead-spawn writes its report.
REPORT_FD = 3


def describe_status(status):
    """'exit status 3', 'killed by signal 11 (SIGSEGV)', 'timed out after 5 s'."""
    if status.get("timed_out"):
        return "timed out after %g s" % status["timeout"]
    if status.get("signal") is not None:
        sig = status["signal"]
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = "?"
        return "killed by signal %d (%s)" % (sig, name)
    return "exit status %d" % status["exit"]


def _tail(f):
    f.seek(0)
    data = f.read()[-8192:].decode("utf-8", "replace")
    return "\n".join(data.strip().splitlines()[-STDERR_TAIL_LINES:])


HELPER = "cgm-overhead-spawn"


def find_helper(dirs):
    """The first executable cgm-overhead-spawn in @dirs, or None."""
    for d in dirs:
        path = os.path.join(d, HELPER)
        if d and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def command(argv, settings, helper, outer=(), inner=(), env_path="/usr/bin/env"):
    """The argv to spawn for one run, and whether the helper reports it.

    @settings ({VAR: VALUE}: the configuration's LD_PRELOAD, CGMALLOC_CONF)
    must reach the workload (or @inner, valgrind) but not @outer (perf).
    With the helper: OUTER helper 3 VAR=VALUE... -- INNER ARGV.  Without it,
    env(1) carries them when there is an outer command."""
    words = ["%s=%s" % kv for kv in settings.items()]
    if helper:
        return list(outer) + [helper, str(REPORT_FD)] + words + ["--"] + list(inner) + list(argv)
    if outer and words:
        return list(outer) + [env_path] + words + list(inner) + list(argv)
    return list(outer) + list(inner) + list(argv)


def _status_dict(status, timed_out, timeout):
    st = {"exit": None, "signal": None, "timed_out": timed_out, "timeout": timeout}
    if os.WIFSIGNALED(status):
        st["signal"] = os.WTERMSIG(status)
    else:
        st["exit"] = os.WEXITSTATUS(status)
    return st


def _parse_report(f):
    """The helper's line: (wait status, values) or raises OSError for a
    command that could not be executed; None when there is no line (the
    helper itself was killed)."""
    f.seek(0)
    fields = f.read().decode("ascii", "replace").split()
    if len(fields) >= 2 and fields[0] == "exec-error":
        err = int(fields[1])
        raise OSError(err, os.strerror(err))
    if len(fields) != 10 or fields[0] != "ok":
        return None
    n = [int(x) for x in fields[1:]]
    return n[0], _values(n[1] / 1e9, n[2] / 1e6, n[3] / 1e6, n[4:9])


def _values(wall, user, sys_, counts):
    """The measures of a run; @counts: maxrss, minflt, majflt, nvcsw, nivcsw."""
    v = {"wall": wall, "user": user, "sys": sys_, "cpu": user + sys_}
    v.update(zip(("maxrss", "minflt", "majflt", "nvcsw", "nivcsw"), counts))
    return v


def run(argv, env, settings, stdin="/dev/null", timeout=None, helper=None,
        outer=(), inner=()):
    """One run of the workload @argv (argv[0] resolved) in @env plus the
    configuration's @settings; see command() for @outer and @inner.

    Returns {"ok", "status", "values", "stderr_tail"}; values holds the
    measures whether or not the run succeeded.  Raises OSError when the
    command cannot be executed.  KeyboardInterrupt kills the run's process
    group and propagates."""
    full = command(argv, settings, helper, outer, inner)
    if not helper and not outer:
        env = dict(env, **settings)
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as rep:
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, stdin, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_DUP2, err.fileno(), 2),
            (os.POSIX_SPAWN_DUP2, rep.fileno(), REPORT_FD),
        ]
        alarm = {"pid": None, "fired": False}

        def on_alarm(signum, frame):
            # Kill from the handler and let wait4 (retried after the
            # signal, PEP 475) reap the run as usual.
            alarm["fired"] = True
            try:
                os.killpg(alarm["pid"], signal.SIGKILL)
            except OSError:
                pass

        old = signal.signal(signal.SIGALRM, on_alarm) if timeout else None
        start = time.perf_counter()
        pid = os.posix_spawn(full[0], full, env, file_actions=actions, setpgroup=0)
        alarm["pid"] = pid
        try:
            if timeout:
                signal.setitimer(signal.ITIMER_REAL, timeout)
            _, status, ru = os.wait4(pid, 0)
        except BaseException:
            _kill_and_reap(pid)
            raise
        finally:
            if timeout:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
        wall = time.perf_counter() - start
        timed_out = (alarm["fired"] and os.WIFSIGNALED(status)
                     and os.WTERMSIG(status) == signal.SIGKILL)
        values = _values(wall, ru.ru_utime, ru.ru_stime,
                         (ru.ru_maxrss, ru.ru_minflt, ru.ru_majflt, ru.ru_nvcsw, ru.ru_nivcsw))
        report = _parse_report(rep) if helper else None
        if report and not (outer and os.WIFEXITED(status) and os.WEXITSTATUS(status)):
            status, values = report
        st = _status_dict(status, timed_out, timeout)
        ok = not timed_out and st["exit"] == 0
        return {"ok": ok, "status": st, "values": values,
                "stderr_tail": "" if ok else _tail(err)}


def _kill_and_reap(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except OSError:
        pass
