#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora (tests/fuzz/corpus/<target>/) from the unit tests'
inputs: loader.conf texts (tests/unit/test_config.c, loader.conf.example), trace targets
(test_tracer_target.c), IL bodies (the BYTES(...) of test_il.c), names for frame names
and UTF-16 (test_framename.c), and EventPipe payloads shaped as test_profiler_parts.c
builds them. Run from the repository root; the output is committed."""
import hashlib, os, re, struct, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests/fuzz/corpus")


def c_literal_groups(src):
    """Adjacent C string literals, concatenated and unescaped."""
    groups, cur, last_end = [], [], None
    for m in re.finditer(r'"((?:[^"\\\n]|\\.)*)"', src):
        between = src[last_end:m.start()] if last_end is not None else "x"
        if cur and not re.fullmatch(r"\s*", between):
            groups.append("".join(cur))
            cur = []
        cur.append(m.group(1))
        last_end = m.end()
    if cur:
        groups.append("".join(cur))
    out = []
    for g in groups:
        try:
            b = g.encode("latin-1").decode("unicode_escape").encode("latin-1")
        except (UnicodeDecodeError, UnicodeEncodeError):
            continue
        out.append(b)
    return out


def write(target, blobs):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    for old in os.listdir(d):
        os.unlink(os.path.join(d, old))
    seen = set()
    for b in blobs:
        h = hashlib.sha1(b).hexdigest()[:16]
        if h in seen or len(b) > 65536:
            continue
        seen.add(h)
        with open(os.path.join(d, h), "wb") as f:
            f.write(b)
    print(f"{target}: {len(seen)} seeds")


def read(p):
    with open(os.path.join(ROOT, p), encoding="utf-8") as f:
        return f.read()


# loader.conf
conf = [b for b in c_literal_groups(read("tests/unit/test_config.c")) if b"[" in b or b"=" in b]
conf.append(read("loader.conf.example").encode())
write("config", conf)

# trace targets
tgt = [b for b in c_literal_groups(read("tests/unit/test_tracer_target.c")) if b"!" in b or b"::" in b]
write("target", tgt)

# IL bodies: BYTES(0x.., ...) lists
il = []
for m in re.finditer(r"BYTES\(([^;]*?)\)", read("tests/unit/test_il.c"), re.S):
    vals = re.findall(r"0x([0-9A-Fa-f]{1,2})\b", m.group(1))
    if vals:
        il.append(bytes(int(v, 16) for v in vals))
write("il", il)

# frame names: type \0 method \0 args..., first byte = split of generic args
names = [b for b in c_literal_groups(read("tests/unit/test_framename.c")) if 0 < len(b) < 200]
fn = []
for i in range(0, len(names) - 1):
    fn.append(bytes([i % 3]) + names[i] + b"\0" + names[i + 1])
    if i + 3 < len(names):
        fn.append(bytes([1]) + b"\0".join(names[i:i + 4]))
write("framename", fn)

# UTF-16: the same names in UTF-16LE, plus surrogates (paired, unpaired) and NULs
u16 = []
for b in names:
    try:
        u16.append(b.decode("utf-8").encode("utf-16-le"))
    except UnicodeDecodeError:
        u16.append(b)
u16 += [struct.pack("<4H", 0xD83D, 0xDE00, 0x41, 0), struct.pack("<3H", 0xDC00, 0xD800, 0x42),
        struct.pack("<2H", 0xD800, 0xD800), "héllo wörld €".encode("utf-16-le"), b"\xff\xfe\x00"]
write("utf16", u16)


# EventPipe payloads (first byte: version), as test_profiler_parts.c builds them
def alloc_tick(amount, amount64, tname, psz=8):
    p = struct.pack("<IIH Q", amount, 0, 7, amount64) + (b"\x10" * psz)
    return p + tname.encode("utf-16-le") + b"\0\0" + struct.pack("<H", 7)


ev = []
for v in range(0, 5):
    ev.append(bytes([v]) + alloc_tick(100123, 5000000000, "Shapes.Blob"))
    ev.append(bytes([v]) + alloc_tick(1, 2, "T", 4))
    ev.append(bytes([v]) + struct.pack("<BHd", 0, 7, 1234.5))
ev.append(bytes([1]) + struct.pack("<BHd", 0, 7, float("nan")))
ev.append(bytes([1]) + struct.pack("<BHd", 0, 7, -5.0))
write("events", ev)


# control requests (tests/unit/test_control.c), each also as a line with its LF and a CR
ctl = [b for b in c_literal_groups(read("tests/unit/test_control.c")) if 0 < len(b) < 300]
ctl += [b + b"\n" for b in ctl[:40]] + [b"status --json\r\n", b"trace add a!B::C\nstatus\n"]
write("ctl", ctl)
