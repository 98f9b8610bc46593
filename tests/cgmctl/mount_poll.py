"""poll() on a file of cgmctl mount, for tests/cgmctl/test_mount_poll.sh.

  mount_poll.py wait VIA FILE TIMEOUT [--unread] [--settle] [CMD...]
      Open FILE, read it (not with --unread), start CMD, and wait up to
      TIMEOUT seconds for POLLPRI through VIA (poll, select or epoll).
      Woken: poll again at once without reading (kernfs still says
      changed: "again pri"), read from offset 0 and print the new text
      (or "read ERRNO"); with --settle, poll 0.5 s more, which should not
      wake ("settle none").
  mount_poll.py trigger FILE SPEC TIMEOUT [CMD...]
      Open FILE read-write, write the trigger SPEC, write it again (the
      errno: "second EBUSY"), read the text from offset 0, start CMD and
      wait up to TIMEOUT seconds for POLLPRI.
  mount_poll.py arm FILE SPEC
      Write SPEC to FILE, opened read-write: "arm ok" or "arm ERRNO".

Prints "key value" lines: result (woke or timeout), elapsed (seconds
from CMD's start, or from the wait's), revents and the ones above.
CMD is killed before it exits.
"""
import errno
import os
import select
import subprocess
import sys
import time


def wait_pri(fd, via, timeout):
    """POLLPRI on fd within timeout seconds: the events seen, or 0."""
    if via == "poll":
        p = select.poll()
        p.register(fd, select.POLLPRI)
        for _, ev in p.poll(timeout * 1000):
            if ev & select.POLLPRI:
                return ev
        return 0
    if via == "select":
        _, _, x = select.select([], [], [fd], timeout)
        return select.POLLPRI if x else 0
    ep = select.epoll()
    try:
        ep.register(fd, select.EPOLLPRI)
        for _, ev in ep.poll(timeout):
            if ev & select.EPOLLPRI:
                return ev
        return 0
    finally:
        ep.close()


def reread(fd):
    """The text from offset 0, or "read ERRNO" (a removed group's file)."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return os.read(fd, 4096).decode()
    except OSError as e:
        return "read %s\n" % errno.errorcode[e.errno]


def start(cmd):
    return subprocess.Popen(cmd) if cmd else None


def finish(child):
    if child:
        child.kill()
        child.wait()


def cmd_wait(args):
    via, path, timeout = args[0], args[1], float(args[2])
    opts, cmd = set(), args[3:]
    while cmd and cmd[0].startswith("--"):
        opts.add(cmd.pop(0))
    unread, settle = "--unread" in opts, "--settle" in opts
    fd = os.open(path, os.O_RDONLY)
    if not unread:
        os.read(fd, 4096)
    t0 = time.monotonic()
    child = start(cmd)
    try:
        ev = wait_pri(fd, via, timeout)
        elapsed = time.monotonic() - t0
        if not ev:
            print("result timeout")
            return
        again = wait_pri(fd, via, 0)
        sys.stdout.write(reread(fd))
        print("result woke")
        print("elapsed %.3f" % elapsed)
        print("revents %#x" % ev)
        print("again %s" % ("pri" if again else "none"))
        if settle:
            print("settle %s" % ("pri" if wait_pri(fd, via, 0.5) else "none"))
    finally:
        finish(child)


def write_errno(fd, spec):
    try:
        os.write(fd, spec.encode())
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]


def cmd_trigger(args):
    path, spec, timeout, cmd = args[0], args[1], float(args[2]), args[3:]
    fd = os.open(path, os.O_RDWR)
    print("first %s" % write_errno(fd, spec))
    print("second %s" % write_errno(fd, spec))
    text = reread(fd)
    # "some avg10=...": the PSI text, whatever the figures.
    print("text %s" % text.split("=")[0].replace(" ", "_"))
    t0 = time.monotonic()
    child = start(cmd)
    try:
        ev = wait_pri(fd, "poll", timeout)
        print("result %s" % ("woke" if ev else "timeout"))
        print("elapsed %.3f" % (time.monotonic() - t0))
        print("revents %#x" % ev)
    finally:
        finish(child)


def cmd_arm(args):
    fd = os.open(args[0], os.O_RDWR)
    print("arm %s" % write_errno(fd, args[1]))


if __name__ == "__main__":
    {"wait": cmd_wait, "trigger": cmd_trigger, "arm": cmd_arm}[sys.argv[1]](sys.argv[2:])
