#!/usr/bin/env bash
# The documentation against the code (issue 26). Fast, no dotnet:
#   - every key each loader.conf parser accepts (src/loader/config.c's handler for [loader] and
#     [child NAME], src/tracer/config.c and src/profiler/config.c for the built-in children;
#     read from their key comparisons and the profiler's table of booleans) is documented in
#     its section of docs/configuration.md (a "- `key`" entry) and appears as a key, set or
#     commented, in its part of loader.conf.example and of packaging/loader.conf (the
#     installed etc/loader.conf, which says it lists every key); the check is also run on a
#     copy of docs/configuration.md with one entry deleted, which it must catch;
#   - the command lines of the ```sh / ```bash blocks of README.md and docs/*.md reference
#     only clrmux subcommands, options and ctl commands the launcher's usage lists
#     (build/clrmux --help, else its source), make targets the Makefile has, files of the
#     source tree, and files `make install` puts under its PREFIX;
#   - every relative link of README.md, docs/*.md, bench/README.md and src/profiler/README.md
#     points to an existing file (and heading, for a #fragment);
#   - README.md links every page of docs/.
# Prints one line per check and "docs: N passed, N failed"; exits 1 on a failure.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
exec python3 - "$ROOT" <<'PY'
import fnmatch, glob, os, re, shlex, subprocess, sys

ROOT = sys.argv[1]
PASS = FAIL = 0

def ok(msg):
    global PASS
    PASS += 1
    print("ok   - " + msg)

def bad(msg):
    global FAIL
    FAIL += 1
    print("FAIL - " + msg)

def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()

# ---- the keys each parser accepts ----------------------------------------------------------
CMP = r'\bstr(?:n?case)?n?cmp\(\s*%s\s*,\s*"([A-Za-z0-9_]+)"'

def keys_in(text, var):
    return sorted(set(re.findall(CMP % re.escape(var), text)))

def parser_keys():
    """{section: (source, [keys])}, or None after a FAIL line when a parser's shape changed."""
    out = {}
    src = read("src/loader/config.c")
    m = re.search(r"static int handler\(void \*user.*?\n}\n", src, re.S)
    start = m and m.group(0).find("if (p->sec == SEC_LOADER)")
    split = m and m.group(0).find("struct clrmux_child_conf *c = p->child;")
    if not m or start < 0 or split < start:
        bad("src/loader/config.c: handler()'s [loader] branch and child branch not found; teach tests/docs.sh the parser's new shape")
        return None
    body = m.group(0)
    out["[loader]"] = ("src/loader/config.c", keys_in(body[start:split], "name"))
    out["[child NAME]"] = ("src/loader/config.c", keys_in(body[split:], "name"))
    out["builtin = tracer"] = ("src/tracer/config.c", keys_in(read("src/tracer/config.c"), "kv->key"))
    prof = read("src/profiler/config.c")
    table = re.findall(r'\{"([A-Za-z0-9_]+)",\s*offsetof\(struct prof_config', prof)
    out["builtin = profiler"] = ("src/profiler/config.c", sorted(set(keys_in(prof, "kv->key") + table)))
    # anchors: a key every version of each parser has; an empty or anchorless set means the
    # extraction no longer sees the parser's comparisons
    anchors = {"[loader]": "log_level", "[child NAME]": "path", "builtin = tracer": "trace",
               "builtin = profiler": "cpu"}
    for sec, (srcf, keys) in out.items():
        if anchors[sec] not in keys:
            bad("%s: the keys of %s were not found (got %s); teach tests/docs.sh the parser's new shape"
                % (srcf, sec, ", ".join(keys) or "none"))
            return None
    return out

# ---- docs/configuration.md -----------------------------------------------------------------
def md_sections(text):
    """{'## heading text': body} for the level-2 headings of a markdown text."""
    secs, cur = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            cur = line[3:].strip()
            secs[cur] = []
        elif cur is not None:
            secs[cur].append(line)
    return {k: "\n".join(v) for k, v in secs.items()}

def missing_in_doc(text, keys_by_sec):
    """[(section, key)] of the keys without a '- `key`' entry in their section."""
    secs = md_sections(text)
    miss = []
    for sec, (_, keys) in keys_by_sec.items():
        body = secs.get(sec)
        for k in keys:
            if body is None or not re.search(r"^- `%s(\s*=[^`]*)?`" % re.escape(k), body, re.M):
                miss.append((sec, k))
    return miss

def check_doc(keys_by_sec):
    path = "docs/configuration.md"
    text = read(path)
    secs = md_sections(text)
    for sec in keys_by_sec:
        if sec not in secs:
            bad("%s has no section '## %s'" % (path, sec))
    miss = missing_in_doc(text, keys_by_sec)
    for sec, k in miss:
        bad("%s: key '%s' of %s (%s) is not documented in '## %s'" % (path, k, sec, keys_by_sec[sec][0], sec))
    if not miss:
        n = sum(len(v[1]) for v in keys_by_sec.values())
        ok("%s documents all %d keys the three parsers accept (%s)" % (path, n, "; ".join(
            "%s: %d" % (s, len(v[1])) for s, v in keys_by_sec.items())))
    # the check itself must be able to fail: a copy without one entry
    sec, (_, keys) = next(iter(keys_by_sec.items()))
    victim = keys[0]
    copy = re.sub(r"^- `%s(\s*=[^`]*)?`.*$" % re.escape(victim), "", text, count=1, flags=re.M)
    if (sec, victim) in missing_in_doc(copy, keys_by_sec):
        ok("the key check catches a copy of %s without '%s'" % (path, victim))
    else:
        bad("the key check does not catch a copy of %s without '%s'" % (path, victim))

# ---- loader.conf.example, packaging/loader.conf --------------------------------------------
def conf_keys(lines):
    """Key names of 'key = ...' lines, set or commented ('; key = ...', '; a, b = ...')."""
    names = set()
    for line in lines:
        s = line.strip().lstrip(";#").strip()
        if "=" not in s or s.startswith("["):
            continue
        for part in s.split("=", 1)[0].split(","):
            part = part.strip()
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part):
                names.add(part)
    return names

def check_conf(path, keys_by_sec):
    text = read(path)
    paras = re.split(r"\n\s*\n", text)
    def para_with(pattern):
        return [p for p in paras if re.search(pattern, p, re.M)]
    where = {"[loader]": r"^\[loader\]", "builtin = tracer": r"^builtin\s*=\s*tracer\b",
             "builtin = profiler": r"^builtin\s*=\s*profiler\b", "[child NAME]": None}
    missing = 0
    for sec, (srcf, keys) in keys_by_sec.items():
        if where[sec] is None:
            scope = paras  # path, clsid, builtin, enabled: anywhere in the file
        else:
            scope = para_with(where[sec])
            if not scope:
                bad("%s has no paragraph with a '%s' line (the part for %s)" % (path, where[sec], sec))
                missing += 1
                continue
        have = conf_keys("\n".join(scope).splitlines())
        for k in keys:
            if k not in have:
                bad("%s: key '%s' of %s (%s) is missing from its part" % (path, k, sec, srcf))
                missing += 1
    if not missing:
        ok("%s lists every key of [loader], [child NAME], the tracer and the profiler in its part" % path)

# ---- the launcher's usage, make targets, the installed tree --------------------------------
def c_string(src, name):
    m = re.search(r"%s\s*=\s*((?:\s*\"(?:[^\"\\]|\\.)*\")+)\s*;" % re.escape(name), src)
    if not m:
        return ""
    parts = re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1))
    return "".join(p.encode().decode("unicode_escape") for p in parts)

def launcher_usage():
    exe = os.path.join(ROOT, "build/clrmux")
    if os.access(exe, os.X_OK):
        try:
            main = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=10).stdout
            ctl = subprocess.run([exe, "ctl", "--help"], capture_output=True, text=True, timeout=10).stdout
            if "clrmux run" in main and "status" in ctl:
                return main, ctl, "build/clrmux --help"
        except (OSError, subprocess.SubprocessError):
            pass
    return (c_string(read("src/cli/clrmux.c"), "usage_text"), c_string(read("src/cli/ctl.c"), "ctl_usage"),
            "src/cli/clrmux.c and src/cli/ctl.c (build/clrmux is not built)")

def parse_usage(main, ctl):
    subs = {}  # subcommand -> set of options
    cur = None
    for line in main.splitlines():
        m = re.match(r"\s*clrmux (\w[\w-]*)", line)
        if m:
            cur = m.group(1)
            subs.setdefault(cur, set())
        elif not line.strip() or not line.startswith(" "):
            cur = None
        if cur:
            subs[cur].update(re.findall(r"--[a-z][a-z0-9-]*", line))
    cmds = {}  # ctl command -> (set of sub-words, set of options)
    for line in ctl.splitlines():
        m = re.match(r"  ([a-z][a-z-]*)(?: ([a-z|]+)(?=\s|$))?", line)
        if not m or line.startswith("usage"):
            continue
        words, opts = cmds.setdefault(m.group(1), (set(), set()))
        if m.group(2):
            words.update(m.group(2).split("|"))
        opts.update(re.findall(r"--[a-z][a-z0-9-]*", line))
    return subs, cmds

def make_targets():
    mk = read("Makefile")
    targets = set()
    for m in re.finditer(r"^([A-Za-z0-9_.%/$()-]+(?:\s+[A-Za-z0-9_.%/$()-]+)*)\s*:(?!=)", mk, re.M):
        targets.update(m.group(1).split())
    for m in re.finditer(r"^\.PHONY:(.*)$", mk, re.M):
        targets.update(m.group(1).split())
    return targets

def install_layout():
    """(prefix, files, dirs) that `make install` writes, read from the Makefile's recipe."""
    mk = read("Makefile")
    prefix = re.search(r"^PREFIX\s*\?=\s*(\S+)", mk, re.M).group(1)
    m = re.search(r"^install:.*\n((?:\t.*\n)+)", mk, re.M)
    recipe = m.group(1).replace("\\\n", " ") if m else ""
    files, dirs = set(), set()
    dest = lambda t: t.replace("$(DESTDIR)$(PREFIX)", "")
    for line in recipe.splitlines():
        for cmd in re.split(r";|\bthen\b|\bfi\b", line):
            toks = cmd.split()
            if not toks:
                continue
            redir = re.search(r">\s*(\$\(DESTDIR\)\$\(PREFIX\)\S+)", cmd)
            if redir:
                files.add(dest(redir.group(1)))
            if toks[0] == "install":
                args, i = [], 1
                while i < len(toks):
                    if toks[i] == "-m":
                        i += 2
                        continue
                    if toks[i] != "-d":
                        args.append(toks[i])
                    i += 1
                if "-d" in toks:
                    dirs.update(dest(a) for a in args)
                elif len(args) >= 2:
                    d = dest(args[-1])
                    if d.endswith("/"):
                        for s in args[:-1]:
                            srcs = glob.glob(os.path.join(ROOT, s)) if "*" in s else [s]
                            files.update(d + os.path.basename(x) for x in srcs)
                    else:
                        files.add(d)
            elif toks[0] == "ln":
                files.add(dest(toks[-1]))
    for f in list(files):
        p = os.path.dirname(f)
        while p not in ("", "/"):
            dirs.add(p)
            p = os.path.dirname(p)
    return prefix, files, {d.rstrip("/") for d in dirs}

# ---- command lines of ```sh / ```bash blocks ----------------------------------------------
def sh_blocks(text):
    """[(line number, command line)]: comments and continuation lines joined, quotes balanced."""
    out, lang, buf, start = [], None, "", 0
    for n, line in enumerate(text.splitlines(), 1):
        fence = re.match(r"^```\s*(\w*)", line)
        if fence:
            lang = None if lang is not None else fence.group(1)
            buf = ""
            continue
        if lang not in ("sh", "bash"):
            continue
        if not buf:
            start = n
        buf += line + "\n"
        if line.rstrip().endswith("\\"):
            continue
        try:
            shlex.split(buf, comments=True)
        except ValueError:
            continue  # an open quote: the command goes on on the next line
        out.append((start, buf))
        buf = ""
    return out

def simple_commands(line):
    line = re.sub(r"\$\([^()]*\)", "SUBST", line)
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lex.whitespace_split = True
    lex.commenters = "#"
    cmd = []
    for tok in lex:
        if tok and set(tok) <= set(";&|"):
            if cmd:
                yield cmd
            cmd = []
        else:
            cmd.append(tok)
    if cmd:
        yield cmd

def check_commands(path, subs, cmds, targets, prefix, files, dirs):
    text = read(path)
    top = set(os.listdir(ROOT)) - {"build", ".git"}
    problems, count = [], 0

    def check_path(tok, where):
        for m in re.finditer(re.escape(prefix) + r"(/[^\s'\":;,)]*)?", tok):
            rel = (m.group(1) or "").rstrip("/")
            if rel and rel not in dirs and not any(fnmatch.fnmatch(f, rel) for f in files):
                problems.append("%s: %s is not installed by `make install`" % (where, m.group(0)))
        t = tok.rstrip(".,:)")
        if "=" in t or "://" in t or t.startswith(("-", "$", "/", "'", "{")):
            return
        first = t.split("/")[0]
        if first == "build" and "/" in t:
            rest = t.split("/", 1)[1]
            if "$(BUILD)/" + rest not in read("Makefile") and not os.path.exists(os.path.join(ROOT, t)):
                problems.append("%s: %s is neither in the tree nor made by the Makefile" % (where, t))
        elif first in top and not glob.glob(os.path.join(ROOT, t)):
            problems.append("%s: %s does not exist" % (where, t))

    def check_clrmux(args, where):
        if not args:
            return
        sub = args[0]
        if sub in ("--help", "-h", "help", "--version"):
            return
        if sub not in subs:
            problems.append("%s: `clrmux %s` is not a subcommand of the launcher (%s)" % (where, sub, ", ".join(sorted(subs))))
            return
        rest = args[1:]
        if "--" in rest:
            i = rest.index("--")
            check_one(rest[i + 1:], where)
            rest = rest[:i]
        if sub == "ctl":
            if len(rest) < 2:
                problems.append("%s: `clrmux ctl` without PID and command" % where)
                return
            c = rest[1]
            if c not in cmds:
                problems.append("%s: `clrmux ctl PID %s` is not a ctl command (%s)" % (where, c, ", ".join(sorted(cmds))))
                return
            words, opts = cmds[c]
            if words and (len(rest) < 3 or rest[2] not in words):
                problems.append("%s: `clrmux ctl PID %s %s` is not one of %s" % (where, c, rest[2] if len(rest) > 2 else "", "|".join(sorted(words))))
            for t in rest[2:]:
                if t.startswith("--") and t.split("=")[0] not in opts:
                    problems.append("%s: `clrmux ctl PID %s` has no option %s" % (where, c, t))
            return
        for t in rest:
            if t.startswith("--") and t.split("=")[0] not in subs[sub] | {"--help"}:
                problems.append("%s: `clrmux %s` has no option %s" % (where, sub, t))
            else:
                check_path(t, where)

    def check_one(cmd, where):
        while cmd and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", cmd[0]):
            check_path(cmd[0], where)
            cmd = cmd[1:]
        while cmd and cmd[0] in ("sudo", "env", "exec", "time"):
            cmd = cmd[1:]
            while cmd and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", cmd[0]):
                cmd = cmd[1:]
        if not cmd or cmd[0] in ("export", "set", "unset", "rem"):
            return
        word = cmd[0]
        if word == "clrmux" or word.endswith("/clrmux"):
            check_path(word, where) if "/" in word else None
            check_clrmux(cmd[1:], where)
            return
        if word == "make":
            for t in cmd[1:]:
                if t.startswith("-") or "=" in t:
                    continue
                if t not in targets:
                    problems.append("%s: `make %s`: no such target in the Makefile" % (where, t))
            return
        for t in cmd:
            check_path(t, where)

    for n, line in sh_blocks(text):
        count += 1
        for cmd in simple_commands(line):
            check_one(cmd, "%s:%d" % (path, n))
    for p in problems:
        bad(p)
    if not problems and count:
        ok("%s: %d command line(s) name existing clrmux subcommands, options, make targets and files" % (path, count))

# ---- relative links ----------------------------------------------------------------------
def slug(heading):
    s = re.sub(r"`", "", heading.strip().lower())
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")

def anchors(path):
    text = read(path)
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.*)$", text, re.M)}

def check_links(path):
    text = read(path)
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    broken, n = [], 0
    for m in re.finditer(r"\[[^\]]*\]\(([^)\s]+)\)", text):
        target = m.group(1)
        if re.match(r"^[a-z]+:", target):
            continue
        n += 1
        file, _, frag = target.partition("#")
        rel = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.exists(os.path.join(ROOT, rel)):
            broken.append("%s: link to %s: no such file" % (path, target))
        elif frag and rel.endswith(".md") and frag not in anchors(rel):
            broken.append("%s: link to %s: %s has no heading #%s" % (path, target, rel, frag))
    for b in broken:
        bad(b)
    if not broken:
        ok("%s: %d relative link(s) point to existing files and headings" % (path, n))

# ---- run ---------------------------------------------------------------------------------
keys = parser_keys()
if keys:
    check_doc(keys)
    for conf in ("loader.conf.example", "packaging/loader.conf"):
        check_conf(conf, keys)

main, ctl, usage_from = launcher_usage()
subs, cmds = parse_usage(main, ctl)
if {"run", "check", "attach", "ctl"} <= set(subs) and {"status", "trace", "profile", "log-level"} <= set(cmds):
    ok("launcher usage read from %s: subcommands %s; ctl commands %s" % (usage_from, ", ".join(sorted(subs)), ", ".join(sorted(cmds))))
else:
    bad("launcher usage from %s not understood (subcommands %s, ctl commands %s)" % (usage_from, sorted(subs), sorted(cmds)))
targets = make_targets()
prefix, files, dirs = install_layout()
if "/lib/libclrmux.so" in files and "/share/clrmux/instrument.sh" in files:
    ok("`make install` layout read from the Makefile: %d files under %s" % (len(files), prefix))
else:
    bad("`make install` layout not understood from the Makefile's install recipe (%s)" % sorted(files))

docs = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
pages = ["README.md"] + [os.path.relpath(d, ROOT) for d in docs]
for page in pages:
    check_commands(page, subs, cmds, targets, prefix, files, dirs)
for page in pages + ["bench/README.md", "src/profiler/README.md"]:
    if os.path.exists(os.path.join(ROOT, page)):
        check_links(page)

readme = read("README.md")
unlinked = [p for p in pages[1:] if "](%s)" % p not in readme and "](%s#" % p not in readme]
for p in unlinked:
    bad("README.md does not link %s" % p)
if not unlinked:
    ok("README.md links every page of docs/ (%d)" % (len(pages) - 1))

print("docs: %d passed, %d failed" % (PASS, FAIL))
sys.exit(1 if FAIL else 0)
PY
