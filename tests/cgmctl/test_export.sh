#!/bin/sh
# cgmctl export --prometheus, and what libcgroup's users look for: the
# exposition parses under a strict checker of the text format (0.0.4)
# and says what `cgmctl cat` says of groups with a running preloaded
# python3; a hierarchy path with a quote, a backslash and a newline is
# escaped in its label; --textfile replaces DIR/cgmalloc.prom atomically
# and leaves no temporary file.  Then rmdir -r (a tree; refused while a
# process is attached), cat of several files and of all of them, move of
# several pids.
# Run by `make check-cgmctl-export`, which sets CGMCTL and CGM_LIB.
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

# ---- a strict checker of the exposition format ----
# check(text) raises ValueError at the first fault; main: check FILE and
# dump {family: {"type", "help", "samples": [[labels, value]]}} as JSON.
cat >"$T/prom.py" <<'EOF'
import json, re, sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
VALUE = re.compile(r"([+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]Inf|NaN)\Z")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")

def unescape(s, allowed):
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\":
            if i + 1 >= len(s) or s[i + 1] not in allowed:
                raise ValueError("bad escape in %r" % s)
            out.append("\n" if s[i + 1] == "n" else s[i + 1])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)

def labels(s, i):
    """Parse '{a="b",...}' from s[i] == '{': (dict, index after '}')."""
    got = {}
    i += 1
    while s[i] != "}":
        m = LABEL.match(s, i)
        if not m or s[m.end():m.end() + 2] != '="':
            raise ValueError("bad label at %r" % s[i:])
        name, i = m.group(), m.end() + 2
        if name in got or name.startswith("__"):
            raise ValueError("label %s repeated or reserved" % name)
        j = i
        while s[j] != '"':
            if s[j] == "\n":
                raise ValueError("raw newline in a label value")
            j += 2 if s[j] == "\\" else 1
        got[name] = unescape(s[i:j], '\\"n')
        i = j + 1
        if s[i] == ",":
            i += 1
        elif s[i] != "}":
            raise ValueError("expected , or } at %r" % s[i:])
    return got, i + 1

def check(text):
    if not text.endswith("\n"):
        raise ValueError("no newline at the end")
    fams, cur, seen = {}, None, set()
    for n, line in enumerate(text[:-1].split("\n"), 1):
        try:
            if line.startswith("# HELP ") or line.startswith("# TYPE "):
                kind, rest = line[2:6], line[7:]
                name, _, arg = rest.partition(" ")
                if not NAME.match(name):
                    raise ValueError("bad family name %r" % name)
                f = fams.setdefault(name, {"samples": []})
                if f["samples"] or kind.lower() in f:
                    raise ValueError("%s of %s after its samples or twice" % (kind, name))
                if kind == "TYPE" and arg not in TYPES:
                    raise ValueError("bad type %r" % arg)
                f[kind.lower()] = unescape(arg, "\\n") if kind == "HELP" else arg
                cur = name
                continue
            if not line or line.startswith("#"):
                raise ValueError("empty line or stray comment")
            m = NAME.match(line.split("{")[0].split(" ")[0])
            name = m and m.group()
            if not name or name != cur or "help" not in fams[cur] or "type" not in fams[cur]:
                raise ValueError("sample of %r outside its family (HELP and TYPE first)" % name)
            i = len(name)
            lab = {}
            if line[i] == "{":
                lab, i = labels(line, i)
            if line[i] != " ":
                raise ValueError("no space before the value")
            value = line[i + 1:]
            if not VALUE.match(value):
                raise ValueError("bad value %r (a timestamp is refused too)" % value)
            if fams[cur]["type"] == "counter" and (value == "NaN" or float(value) < 0):
                raise ValueError("negative counter")
            key = (name, tuple(sorted(lab.items())))
            if key in seen:
                raise ValueError("sample repeated")
            seen.add(key)
            fams[cur]["samples"].append([lab, value])
        except (ValueError, IndexError) as e:
            raise ValueError("line %d: %s: %r" % (n, e, line))
    return fams

if __name__ == "__main__":
    try:
        fams = check(open(sys.argv[1], encoding="utf-8").read())
    except ValueError as e:
        sys.exit("not a valid exposition: %s" % e)
    if len(sys.argv) > 2:
        json.dump(fams, open(sys.argv[2], "w"))
EOF
# prom FILE: check it, the families in $T/fams.json.
prom() {
	"$PY" "$T/prom.py" "$1" "$T/fams.json" || fail "export: $1 is not a valid exposition"
	CHECKS=$((CHECKS + 1))
}

# The checker refuses what it must: each of these is one fault.
good='# HELP a_total x \\\\ y\n# TYPE a_total counter\na_total{l="q\\"b\\\\s\\nn",m="2"} 1.5e3\n'
printf "$good" >"$T/good.prom"
"$PY" "$T/prom.py" "$T/good.prom" || fail "the checker refuses a good exposition"
for bad in 'a 1\n' \
	'# HELP a x\na 1\n' \
	'# HELP a x\n# TYPE a gauge\na{l="x"y"} 1\n' \
	'# HELP a x\n# TYPE a gauge\na{l="\\q"} 1\n' \
	'# HELP a x\n# TYPE a gauge\na{l="x"} one\n' \
	'# HELP a x\n# TYPE a gauge\na{l="x"} max\n' \
	'# HELP a x\n# TYPE a gauge\na{l="x"} 1 1700000000\n' \
	'# HELP a x\n# TYPE a gauge\na 1\n# HELP b x\n# TYPE b gauge\nb 1\na 2\n' \
	'# HELP a x\n# TYPE a gauge\na 1\na 2\n' \
	'# HELP a-b x\n# TYPE a-b gauge\na-b 1\n' \
	'# HELP a x\n# TYPE a counter\na -1\n' \
	'# HELP a x\n# TYPE a gauge\na 1'; do
	printf "$bad" >"$T/bad.prom"
	"$PY" "$T/prom.py" "$T/bad.prom" 2>/dev/null && fail "the checker takes: $bad"
done
CHECKS=$((CHECKS + 1))

# ---- groups, one with a running preloaded python3 ----
ok ctl mkdir /x/z
ok ctl set /x memory.max 1G
ok ctl set /x memory.low 1M
ok ctl set /x memory.min 64K
ok ctl set /x/z memory.high 256M
HOLD='import sys, time
b = bytearray(16 << 20)
open(sys.argv[1], "w").write("ready")
time.sleep(60)'
hold() {
	"$CGMCTL" --hierarchy "$H" run -g "$1" -- "$PY" -c "$HOLD" "$T/ready.$2" 2>"$T/hold.$2.err" &
	PIDS="$PIDS $!"
	eval "$2=\$!"
	wait_for test -s "$T/ready.$2"
}
hold /x/y py1

# ---- the exposition says what cat says ----
ok ctl export --prometheus
cp "$T/out" "$T/all.prom"
prom "$T/all.prom"
# The reference: `cat GROUP` of every group, just after the export.
for g in / /x /x/y /x/z; do
	ok ctl cat "$g"
	cp "$T/out" "$T/cat$(echo "$g" | tr / _)"
done
"$PY" - "$T/fams.json" "$T" <<'EOF' || fail "export and cat disagree"
import json, sys
fams, d = json.load(open(sys.argv[1])), sys.argv[2]

def cat(g):
    """{file: text} of `cgmctl cat GROUP`'s "==> FILE <==" sections."""
    files, cur = {}, None
    for line in open(d + "/cat" + g.replace("/", "_")).read().split("\n"):
        if line.startswith("==> ") and line.endswith(" <=="):
            cur = line[4:-4]
            files[cur] = []
        elif cur:
            files[cur].append(line)
    return {f: [l for l in v if l] for f, v in files.items()}

def samples(fam, **want):
    f = fams[fam]
    return {s[0]["cgroup"]: s[1] for s in f["samples"]
            if all(s[0].get(k) == v for k, v in want.items())}

errors = []
def same(what, got, want):
    if got != want:
        errors.append("%s: export %r, cat %r" % (what, got, want))

groups = ["/", "/x", "/x/y", "/x/z"]
cats = {g: cat(g) for g in groups}
for g in groups:
    c = cats[g]
    for f, fam in [("memory.current", "current"), ("memory.peak", "peak"), ("memory.max", "max"),
                   ("memory.high", "high"), ("memory.low", "low"), ("memory.min", "min")]:
        want = c.get(f)
        want = None if want is None else ("+Inf" if want[0] == "max" else want[0])
        same("%s %s" % (g, f), samples("cgmalloc_memory_%s_bytes" % fam).get(g), want)
    same("%s procs" % g, samples("cgmalloc_cgroup_procs").get(g), str(len(c["cgroup.procs"])))
    for line in c["memory.stat"]:
        k, v = line.split(" ")
        if k == "throttle_usec":
            fam, v = "cgmalloc_memory_stat_throttle_seconds_total", "%d.%06d" % divmod(int(v), 10**6)
        else:
            fam = [n for n in fams if n.startswith("cgmalloc_memory_stat_" + k + "_")
                   and n[len("cgmalloc_memory_stat_" + k):] in ("_bytes", "_total")]
            if len(fam) != 1:
                errors.append("memory.stat %s: families %s" % (k, fam))
                continue
            fam = fam[0]
        if fams[fam]["type"] not in ("gauge", "counter"):
            errors.append("%s is %s" % (fam, fams[fam]["type"]))
        same("%s memory.stat %s" % (g, k), samples(fam).get(g), v)
    for line in c["memory.events"]:
        k, v = line.split(" ")
        same("%s memory.events %s" % (g, k), samples("cgmalloc_memory_events_total", event=k).get(g), v)

# Names and types as documented: levels are gauges, counts counters.
for name, t in [("cgmalloc_memory_stat_anon_bytes", "gauge"), ("cgmalloc_memory_stat_heap_free_bytes", "gauge"),
                ("cgmalloc_memory_stat_mapped_anon_bytes", "gauge"), ("cgmalloc_memory_stat_heap_live_bytes", "gauge"),
                ("cgmalloc_memory_stat_allocs_total", "counter"), ("cgmalloc_memory_stat_frees_total", "counter"),
                ("cgmalloc_memory_stat_alloc_bytes_total", "counter"),
                ("cgmalloc_memory_stat_free_bytes_total", "counter"),
                ("cgmalloc_memory_stat_alloc_size_le_8_total", "counter"),
                ("cgmalloc_memory_events_total", "counter"), ("cgmalloc_memory_max_bytes", "gauge")]:
    same(name, fams.get(name, {}).get("type"), t)
for n, f in fams.items():
    if f["type"] == "counter" and not n.endswith("_total"):
        errors.append("counter %s does not end in _total" % n)
# The process is there, so the values compared are not all zero.
if int(samples("cgmalloc_memory_current_bytes")["/x/y"]) < 16 << 20:
    errors.append("/x/y holds less than the 16 MiB of its process")
same("/x/y procs", samples("cgmalloc_cgroup_procs")["/x/y"], "1")
same("/x memory.max", samples("cgmalloc_memory_max_bytes")["/x"], str(1 << 30))
same("/x/y memory.max", samples("cgmalloc_memory_max_bytes")["/x/y"], "+Inf")
if errors:
    sys.exit("\n".join(errors[:10]))
EOF
CHECKS=$((CHECKS + 1))

# help export lists exactly the families written.
ok "$CGMCTL" help export
"$PY" -c 'import json, sys
fams = set(json.load(open(sys.argv[1])))
listed = {l.split()[0] for l in open(sys.argv[2]) if l.startswith("cgmalloc_")}
assert fams == listed | {"cgmalloc_hierarchy_info"}, (fams ^ listed)
' "$T/fams.json" "$T/out" || fail "help export does not list the families export writes"

# A subtree: GROUP and the groups below it, nothing else.
ok ctl export --prometheus /x
prom "$T/out"
"$PY" -c 'import json, sys
g = {s[0]["cgroup"] for s in json.load(open(sys.argv[1]))["cgmalloc_memory_current_bytes"]["samples"]}
assert g == {"/x", "/x/y", "/x/z"}, g
' "$T/fams.json" || fail "export /x: not the subtree of /x"

# Group names cannot hold a quote, a backslash or a newline
# (group_path_rules); the hierarchy's path, a label too, can.
WEIRD="$T/a \"quoted\" back\\slash
newline"
mkdir "$WEIRD"
ok "$CGMCTL" --hierarchy "$WEIRD/h" mkdir /q
ok "$CGMCTL" --hierarchy "$WEIRD/h" export --prometheus
grep -q '^cgmalloc_hierarchy_info{hierarchy=".*a \\"quoted\\" back\\\\slash\\nnewline/h"} 1$' "$T/out" ||
	fail "the hierarchy's path is not escaped as a label value"
prom "$T/out"
"$PY" -c 'import json, sys
s = json.load(open(sys.argv[1]))["cgmalloc_hierarchy_info"]["samples"]
assert s == [[{"hierarchy": sys.argv[2]}, "1"]], s
' "$T/fams.json" "$WEIRD/h" || fail "the escaped hierarchy label does not read back as its path"

# ---- --textfile: replaced atomically, nothing left behind ----
TF=$T/textfile
mkdir "$TF"
echo "old" >"$TF/cgmalloc.prom"
ln "$TF/cgmalloc.prom" "$T/old-link"
(umask 022 && ctl export --prometheus --textfile "$TF") >"$T/out" 2>"$T/err" ||
	fail "export --textfile: exit $?"
[ ! -s "$T/out" ] && [ ! -s "$T/err" ] || fail "export --textfile wrote on stdout or stderr"
prom "$TF/cgmalloc.prom"
[ "$(cat "$T/old-link")" = old ] || fail "export --textfile wrote into the old file, not a new one"
[ "$(ls -A "$TF")" = cgmalloc.prom ] || fail "export --textfile left: $(ls -A "$TF" | tr '\n' ' ')"
[ "$(stat -c %a "$TF/cgmalloc.prom")" = 644 ] ||
	fail "cgmalloc.prom has mode $(stat -c %a "$TF/cgmalloc.prom"), expected 644 (umask 022)"
CHECKS=$((CHECKS + 1))
# A reader never sees a part: read it over and over while it is rewritten.
"$PY" - "$T/prom.py" "$CGMCTL" "$H" "$TF" <<'EOF' || fail "a reader saw a partial cgmalloc.prom"
import runpy, subprocess, sys, threading
check = runpy.run_path(sys.argv[1])["check"]
cmd = [sys.argv[2], "--hierarchy", sys.argv[3], "export", "--prometheus", "--textfile", sys.argv[4]]
status = []
def writer():
    for i in range(30):
        status.append(subprocess.run(cmd).returncode)
t = threading.Thread(target=writer)
t.start()
reads = 0
while t.is_alive() or reads == 0:
    text = open(sys.argv[4] + "/cgmalloc.prom").read()
    fams = check(text)
    assert fams["cgmalloc_memory_events_total"]["samples"], "no events: cut short"
    reads += 1
t.join()
assert status == [0] * 30, status
print("%d reads" % reads, file=sys.stderr)
EOF
[ "$(ls -A "$TF")" = cgmalloc.prom ] || fail "export --textfile left: $(ls -A "$TF" | tr '\n' ' ')"
CHECKS=$((CHECKS + 1))
# Failures say so in one line and leave nothing behind either.
bad 1 "export: cannot create a file in $T/nodir" ctl export --prometheus --textfile "$T/nodir"
mkdir "$T/taken" "$T/taken/cgmalloc.prom"
bad 1 "export: cannot write $T/taken/cgmalloc.prom: Is a directory" \
	ctl export --prometheus --textfile "$T/taken"
[ "$(ls -A "$T/taken")" = cgmalloc.prom ] || fail "a failed export left: $(ls -A "$T/taken")"

# ---- export: bad command lines ----
bad 2 "export: which format\? --prometheus" ctl export
bad 2 "export: --json is no export format" ctl --json export --prometheus
bad 2 "expected at most 1 argument" ctl export --prometheus /x /x/y
bad 2 "bad group path" ctl export --prometheus x
bad 2 "needs a value" ctl export --prometheus --textfile
bad 1 "export: no group /nope" ctl export --prometheus /nope
bad 2 "bad option '--prometheus'" ctl ls --prometheus

# ---- cat of several files, and of all ----
ok ctl cat /x memory.max memory.high memory.oom.group
printf '==> memory.max <==\n%s\n\n==> memory.high <==\n%s\n\n==> memory.oom.group <==\n%s\n' \
	"$(ctl cat /x memory.max)" "$(ctl cat /x memory.high)" "$(ctl cat /x memory.oom.group)" >"$T/want"
cmp -s "$T/out" "$T/want" || fail "cat of three files is not each under its ==> FILE <== line"
CHECKS=$((CHECKS + 1))
# All the files a group can show: not the write-only ones, and / has no limits.
"$CGMCTL" help files | awk 'NR > 1 && $2 !~ /^write-only/ { print $1 }' >"$T/readable"
"$CGMCTL" help files | awk 'NR > 1 && $2 !~ /^write-only/ && !/not on \// { print $1 }' >"$T/readable.root"
ok ctl cat /x
sed -n 's/^==> \(.*\) <==$/\1/p' "$T/out" | cmp -s - "$T/readable" ||
	fail "cat /x: files $(sed -n 's/^==> \(.*\) <==$/\1/p' "$T/out" | tr '\n' ' ')"
awk '/^==> memory.max <==$/ { getline; print; exit }' "$T/out" | grep -qx 1073741824 ||
	fail "cat /x: memory.max's section is not its value"
ok ctl cat /
sed -n 's/^==> \(.*\) <==$/\1/p' "$T/out" | cmp -s - "$T/readable.root" ||
	fail "cat /: files $(sed -n 's/^==> \(.*\) <==$/\1/p' "$T/out" | tr '\n' ' ')"
ok ctl --json cat /x memory.max memory.stat cgroup.procs
json_ok
"$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert d["group"] == "/x" and d["files"]["memory.max"] == 1 << 30, d
assert isinstance(d["files"]["memory.stat"]["anon"], int) and d["files"]["cgroup.procs"] == [], d
' "$T/out" || fail "cat --json of several files"
ok ctl --json cat /x/y
json_ok
bad 1 "cat: no file 'memory.nope'" ctl cat /x memory.max memory.nope
# A file the group lacks: the others shown, one line for it, status 1.
run ctl cat / memory.current memory.max
[ "$ST" = 1 ] && [ "$(wc -l <"$T/err")" = 1 ] || fail "cat / memory.current memory.max: exit $ST"
grep -q "^cgmctl: cat: / memory.max: No such file or directory$" "$T/err" || fail "cat /: $(cat "$T/err")"
[ "$(head -1 "$T/out")" = "==> memory.current <==" ] || fail "cat /: memory.current not shown"
CHECKS=$((CHECKS + 1))

# ---- rmdir -r ----
ok ctl mkdir /t/a/b
ok ctl mkdir /t/a/c
ok ctl mkdir /t/d
ok ctl set /t/a memory.max 10M
ok ctl rmdir -r /t
bad 1 "ls: no group /t" ctl ls /t
ok ctl rmdir -r /x/z
bad 1 "ls: no group /x/z" ctl ls /x/z
ok ctl mkdir /x/z/deep
bad 1 "rmdir: /x: /x/y has 1 attached process; nothing was removed" ctl rmdir -r /x
ok ctl ls -r /x
[ "$(awk 'NR > 1 { print $1 }' "$T/out" | tr '\n' ' ')" = "/x /x/y /x/z /x/z/deep " ] ||
	fail "a refused rmdir -r removed something: $(awk 'NR > 1 { print $1 }' "$T/out" | tr '\n' ' ')"
bad 1 "rmdir: the root group cannot be removed" ctl rmdir -r /
bad 1 "rmdir: no group /nope" ctl rmdir -r /nope
bad 2 "expected 1 argument" ctl rmdir -r
bad 2 "unknown option '-r'" ctl mkdir -r /q

# ---- move of several pids ----
hold /m1 py2
hold /m1 py3
ok ctl mkdir /m2
ok ctl move "$py2" "$py3" /m2
ok ctl cat /m2 cgroup.procs
[ "$(sort -n "$T/out" | tr '\n' ' ')" = "$(printf '%s\n' "$py2" "$py3" | sort -n | tr '\n' ' ')" ] ||
	fail "move of two pids: /m2 has $(tr '\n' ' ' <"$T/out")"
ok ctl cat /m1 cgroup.procs
out_is ""
# One line per pid that could not be moved; the others are moved.
run ctl move 999999999 "$py2" abc /m1
[ "$ST" = 1 ] && [ ! -s "$T/out" ] || fail "move with bad pids: exit $ST"
[ "$(wc -l <"$T/err")" = 2 ] || fail "move with two bad pids: $(wc -l <"$T/err") lines on stderr"
grep -q "^cgmctl: move: /m1 cgroup.procs: no process 999999999 is attached" "$T/err" &&
	grep -q "^cgmctl: move: /m1 cgroup.procs: bad value 'abc'" "$T/err" ||
	fail "move with bad pids: $(cat "$T/err")"
CHECKS=$((CHECKS + 1))
ok ctl cat /m1 cgroup.procs
out_is "$py2"
bad 1 "move: no group /nope" ctl move "$py2" "$py3" /nope

# Once its process is gone, the tree goes.
kill -9 "$py1"
wait "$py1" 2>/dev/null || true
ok ctl rmdir -r /x
bad 1 "ls: no group /x" ctl ls /x

echo "$TEST_NAME: $CHECKS checks passed"
