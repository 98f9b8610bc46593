"""The allocator configurations a workload is run under.

A configuration is what the workload's environment gets: an LD_PRELOAD (none
for glibc) and, for cgmalloc, a CGMALLOC_CONF.  The built-in ones are:

  glibc     no preload: the C library's malloc
  mimalloc  Debian's libmimalloc.so.2 preloaded (cgmalloc's backend, alone)
  jemalloc  Debian's libjemalloc.so.2 preloaded, when installed
  off       cgmalloc, accounting=0
  on        cgmalloc, accounting=1, no limits
  limits    cgmalloc, accounting=1 with high and max above the workload's
            peak (set from the warm-up: high = 2 x peak + 64M,
            max = 4 x peak + 128M), so limits are checked but never hit
  spill     the same high and max as limits, and spill=1: the spiller on
            with nothing to reclaim (its background thread; the pool, its
            libraries and the fault handler wait for a first reclaim), so
            what enabling spilling costs a workload under its
            limit; not where spill=1 is refused (no userfaultfd that serves
            kernel-mode faults), and not under callgrind (valgrind has no
            userfaultfd, so the library refuses spill=1 there)

and the user adds NAME=CGMALLOC_CONF for cgmalloc with any other settings,
or NAME@LIB=CGMALLOC_CONF for another build of cgmalloc (LIB, a path
without commas or '=', preloaded instead of --lib's): bench/run-bench
measures its count-only build (bench/insn.mk) so, in the same rounds.
"""

import os
import re
import shlex
import shutil
import subprocess
import sysconfig

from . import HarnessError

BUILTIN = ("glibc", "mimalloc", "jemalloc", "off", "on", "limits", "spill")
CGMALLOC_CONFS = {
    "off": "accounting=0",
    "on": "accounting=1",
    "limits": None,           # set once the warm-up has measured the peak
    "spill": None,            # the same
}
# Built-in configurations whose CGMALLOC_CONF needs the warm-up's peak.
FROM_PEAK = ("limits", "spill")
DEBIAN_PACKAGE = {"mimalloc": "libmimalloc2.0", "jemalloc": "libjemalloc2"}
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.+-]*$")
# Status with which cgmalloc exits before main when strict=1 and a
# CGMALLOC_CONF item is bad (an unknown key, a malformed value).
STRICT_EXIT = 2
MIB = 1024 * 1024


class Config:
    """One configuration: a name and the environment it adds.

    preload is the library to LD_PRELOAD (None for glibc), conf the
    CGMALLOC_CONF string (None outside cgmalloc); available is False with a
    note saying why when the configuration cannot run on this machine."""

    def __init__(self, name, preload=None, conf=None, builtin=True):
        self.name = name
        self.preload = preload
        self.conf = conf
        self.builtin = builtin
        self.available = True
        self.note = ""

    @property
    def spills(self):
        """True when CGMALLOC_CONF turns spilling on (the last spill= wins)."""
        on = False
        for item in (self.conf or "").split(","):
            key, _, value = item.partition("=")
            if key.strip() == "spill":
                on = value.strip().lower() not in ("", "0", "off", "false", "no")
        return on or (self.builtin and self.name == "spill")

    @property
    def callgrind_note(self):
        """Why callgrind does not count this configuration, or None."""
        if self.spills:
            return ("not counted: valgrind has no userfaultfd, so the library refuses spill=1 "
                    "under it and the count would be that of the same configuration without it")
        return None

    @property
    def cgmalloc(self):
        return self.conf is not None

    def env(self):
        """The variables this configuration adds to the workload's."""
        e = {}
        if self.preload:
            e["LD_PRELOAD"] = self.preload
        if self.conf is not None:
            e["CGMALLOC_CONF"] = self.conf
        return e

    def shell_command(self, argv):
        """The command line that reruns the workload in this configuration."""
        words = ["%s=%s" % (k, shlex.quote(v)) for k, v in self.env().items()]
        return " ".join(["env"] + words + [shlex.join(argv)]) if words else shlex.join(argv)

    def describe(self):
        if not self.preload:
            return "no preload (the C library's malloc)"
        text = "LD_PRELOAD=" + self.preload
        if self.conf is not None:
            text += " CGMALLOC_CONF=" + self.conf
        return text


def _ldconfig_paths(soname):
    """Paths of @soname for this machine's ABI in the ld.so cache."""
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    try:
        out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    abi = "x86-64" if os.uname().machine == "x86_64" else ""
    paths = []
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) \(([^)]*)\) => (\S+)", line)
        if m and m.group(1) == soname and abi in m.group(2):
            paths.append(m.group(3))
    return paths


def find_system_library(soname):
    """Debian's @soname: the multiarch directory first, then the ld.so cache."""
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    candidates = []
    if multiarch:
        candidates += ["/usr/lib/%s/%s" % (multiarch, soname),
                       "/lib/%s/%s" % (multiarch, soname)]
    candidates += _ldconfig_paths(soname)
    candidates += ["/usr/lib64/" + soname, "/usr/lib/" + soname,
                   "/usr/local/lib/" + soname]
    for path in candidates:
        if os.path.isfile(path):
            return path
    return None


def find_cgmalloc(package_parent, given=None):
    """libcgmalloc.so: --lib, else the build directory of the source tree
    the harness is in (scripts/../build), else the one installed with it
    (LIBDIR/cgmalloc/../libcgmalloc.so), else the ld.so cache."""
    if given:
        if not os.path.isfile(given):
            raise HarnessError("--lib %s: no such file" % given)
        return os.path.abspath(given)
    for rel in ("../build/libcgmalloc.so", "../libcgmalloc.so"):
        path = os.path.normpath(os.path.join(package_parent, rel))
        if os.path.isfile(path):
            return path
    return find_system_library("libcgmalloc.so")


def probe_preload(lib, conf=None):
    """Run /bin/true with @lib preloaded (and CGMALLOC_CONF=strict=1,@conf).

    Returns (status, first line of stderr).  ld.so only warns when a preload
    cannot be loaded, so that warning is looked for as well."""
    env = dict(os.environ)
    env["LD_PRELOAD"] = lib
    if conf is not None:
        env["CGMALLOC_CONF"] = "strict=1" + ("," + conf if conf else "")
    else:
        env.pop("CGMALLOC_CONF", None)
    try:
        p = subprocess.run(["/bin/true"], env=env, capture_output=True,
                           text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return 127, str(e)
    err = p.stderr.strip().splitlines()
    if any("cannot be preloaded" in line for line in err):
        return 127, next(line for line in err if "cannot be preloaded" in line)
    return p.returncode, err[0] if err else ""


def limits_conf(peak_kib):
    """accounting=1 with high and max well above a peak max RSS (in KiB)."""
    peak = peak_kib * 1024
    high = 2 * peak + 64 * MIB
    limit = 4 * peak + 128 * MIB
    return "accounting=1,high=%dM,max=%dM" % (-(-high // MIB), -(-limit // MIB))


def peak_conf(name, peak_kib):
    """The CGMALLOC_CONF of built-in configuration @name (one of FROM_PEAK)."""
    conf = limits_conf(peak_kib)
    return conf + ",spill=1" if name == "spill" else conf


def parse_list(items):
    """The configuration names and NAME=CONF items of the -c arguments.

    Each -c argument is split at commas; an item with '=' is a user
    configuration and takes the rest of its argument as its CGMALLOC_CONF,
    which has commas of its own ("-c glibc,on,mine=accounting=1,max=1G")."""
    out = []
    for arg in items:
        parts = arg.split(",")
        for i, part in enumerate(parts):
            part = part.strip()
            if "=" in part:
                name, _, first = part.partition("=")
                conf = ",".join([first] + parts[i + 1:])
                out.append((name.strip(), conf))
                break
            if part:
                out.append((part, None))
    return out


def resolve(items, cgmalloc_lib, builtin_default=True):
    """The Config objects for the parsed -c items (all built-ins if none).

    Raises HarnessError for an unknown name, a bad user name or a user
    CGMALLOC_CONF that cgmalloc rejects."""
    if not items:
        items = [(name, None) for name in BUILTIN] if builtin_default else []
    seen = set()
    configs = []
    for name, conf in items:
        if name in seen:
            continue
        seen.add(name)
        if conf is None:
            if name not in BUILTIN:
                raise HarnessError("unknown configuration '%s' (known: %s; or NAME=CGMALLOC_CONF)"
                                   % (name, ", ".join(BUILTIN)))
            configs.append(_builtin(name, cgmalloc_lib))
        else:
            configs.append(_user(name, conf, cgmalloc_lib))
    return configs


def _need_lib(name, lib):
    if not lib:
        raise HarnessError("configuration '%s' needs libcgmalloc.so, which was not found "
                           "(build it with make, or give --lib PATH)" % name)


def _builtin(name, lib):
    if name == "glibc":
        return Config(name)
    if name in ("mimalloc", "jemalloc"):
        path = find_system_library("lib%s.so.2" % name)
        c = Config(name, preload=path or "lib%s.so.2" % name)
        if not path:
            c.available = False
            c.note = "not available: lib%s.so.2 is not installed (Debian package %s)" % (
                name, DEBIAN_PACKAGE[name])
        else:
            status, err = probe_preload(path)
            if status != 0:
                c.available = False
                c.note = "not available: %s cannot be preloaded: %s" % (path, err)
        return c
    _need_lib(name, lib)
    c = Config(name, preload=lib, conf=CGMALLOC_CONFS[name])
    if name == "spill":
        status, err = probe_preload(lib, "spill=1")
        if status == STRICT_EXIT:
            c.available = False
            c.note = "not available: %s does not accept spill=1" % os.path.basename(lib)
        elif status != 0:
            c.available = False
            c.note = "not available: spill=1 probe failed (status %d): %s" % (status, err)
        elif "spill=1 refused" in err:
            # The library runs on without spilling: measured, it would be limits again.
            c.available = False
            c.note = "not available here: " + err.removeprefix("cgmalloc: ")
    return c


def _user(name, conf, lib):
    name, at, own_lib = name.partition("@")
    if at:
        if not own_lib:
            raise HarnessError("configuration '%s@': no library after '@' (NAME@LIB=CGMALLOC_CONF)"
                               % name)
        if not os.path.isfile(own_lib):
            raise HarnessError("configuration '%s': no such library: %s" % (name, own_lib))
        lib = os.path.abspath(own_lib)
    if not NAME_RE.match(name):
        raise HarnessError("configuration name '%s': use letters, digits and _.+- "
                           "(NAME=CGMALLOC_CONF)" % name)
    if name in BUILTIN:
        raise HarnessError("configuration name '%s' is a built-in one; choose another name "
                           "for NAME=CGMALLOC_CONF" % name)
    _need_lib(name, lib)
    status, err = probe_preload(lib, conf)
    if status == STRICT_EXIT:
        raise HarnessError("configuration '%s': CGMALLOC_CONF '%s' is rejected: %s"
                           % (name, conf, err.removeprefix("cgmalloc: ")))
    if status != 0:
        raise HarnessError("configuration '%s': cannot preload %s (status %d): %s"
                           % (name, lib, status, err))
    return Config(name, preload=lib, conf=conf, builtin=False)
