#!/usr/bin/env python3
"""The house rules of src/nl2sql/ that `make lint` checks (scripts/lint.sh); exits 1 on a breach.

  stages     the stages `Engine::answer` runs (src/nl2sql/engine.rs), in order, against the stage
             table of docs/nl2sql.md ("The pipeline in the code"): the same names, the same order.
  fn-length  no function of src/nl2sql/ longer than MAX_FN_LINES lines (from its `fn` line to its
             closing brace).
  rooms      no upward arrow inside src/nl2sql/: a room (a directory of it) names only rooms
             before it in the order of src/nl2sql/mod.rs's "Rooms, in order:" line (the root,
             engine.rs and mod.rs, has its place there too).
Usage: tools/nl2sql_house.py [stages|fn-length|rooms]... (all three without arguments)
"""
import os, re, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
NL2SQL = os.path.join(ROOT, "src", "nl2sql")
# A function a reader takes in at once: longer ones become data (a check list) or one small
# function per step (issue 79).
MAX_FN_LINES = 100


def strip(code):
    """`code` with comments, string and char literals blanked (line breaks kept)."""
    out, i, n = [], 0, len(code)
    while i < n:
        c = code[i]
        if code.startswith("//", i):
            j = code.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif code.startswith("/*", i):
            j = code.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", code[i:j])); i = j
        elif re.match(r'(b?r#*")', code[i:i + 8]):
            m = re.match(r'b?r(#*)"', code[i:])
            end = '"' + m.group(1)
            j = code.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", code[i:j])); i = j
        elif c == '"':
            j = i + 1
            while j < n and code[j] != '"':
                j += 2 if code[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", code[i:j])); i = j
        elif c == "'":
            # A char literal ('a', '\n', '\u{..}', '{'), not a lifetime ('a without a closing ').
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", code[i:])
            if m:
                out.append(" " * m.end()); i += m.end()
            else:
                out.append(c); i += 1
        else:
            out.append(c); i += 1
    return "".join(out)


def rs_files(top):
    for root, _, names in os.walk(top):
        for n in sorted(names):
            if n.endswith(".rs"):
                yield os.path.join(root, n)


def check_stages():
    code = open(os.path.join(NL2SQL, "engine.rs"), encoding="utf-8").read()
    m = re.search(r"pub fn answer\(.*?\n    \}\n", code, re.S)
    if not m:
        return ["src/nl2sql/engine.rs: no `pub fn answer(` found"]
    in_code = re.findall(r"stages::(\w+)::run\(", m.group(0))
    doc = open(os.path.join(ROOT, "docs", "nl2sql.md"), encoding="utf-8").read()
    sec = doc.split("## The pipeline in the code", 1)
    if len(sec) < 2:
        return ["docs/nl2sql.md: no section \"The pipeline in the code\""]
    rows = re.findall(r"^\|\s*\d+\s*\|\s*(\w+)\s*\|\s*`stages/(\w+)\.rs`", sec[1].split("\n## ")[0], re.M)
    names, files = [r[0] for r in rows], [r[1] for r in rows]
    errs = []
    if names != in_code:
        errs.append("docs/nl2sql.md's stage table %s != Engine::answer's stages %s" % (names, in_code))
    if files != in_code:
        errs.append("docs/nl2sql.md's stage files %s != Engine::answer's stages %s" % (files, in_code))
    if len(m.group(0).split("\n")) > 31:
        errs.append("Engine::answer is over 30 lines: the pipeline no longer fits one screen")
    return errs


def functions(path):
    """(name, first line, lines) of every function with a body in `path`."""
    code = strip(open(path, encoding="utf-8").read())
    lines = code.split("\n")
    out = []
    for m in re.finditer(r"\bfn\s+(\w+)", code):
        # The body: the first `{` after the signature, unless a `;` ends it first (a trait item).
        i, depth = m.end(), 0
        while i < len(code) and code[i] not in "{;":
            i += 1
        if i >= len(code) or code[i] == ";":
            continue
        j = i
        while j < len(code):
            if code[j] == "{":
                depth += 1
            elif code[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, j) + 1
        out.append((m.group(1), first, last - first + 1))
    return out


def check_fn_length():
    errs = []
    for f in rs_files(NL2SQL):
        for name, line, n in functions(f):
            if n > MAX_FN_LINES:
                errs.append("%s:%d: fn %s is %d lines (at most %d)" % (os.path.relpath(f, ROOT), line, name, n, MAX_FN_LINES))
    return errs


def check_rooms():
    doc = open(os.path.join(NL2SQL, "mod.rs"), encoding="utf-8").read()
    m = re.search(r"^//! Rooms, in order: (.*?)\.$", doc, re.M | re.S)
    if not m:
        return ["src/nl2sql/mod.rs: no \"Rooms, in order:\" line"]
    text = m.group(1).replace("\n//!", " ")
    # The rooms in order; the root (engine.rs, mod.rs) takes its place where the line says so.
    order = re.findall(r"`(\w+)/`|(the root)", text)
    rooms = [a or "(root)" for a, b in order]
    rank = {r: k for k, r in enumerate(rooms)}
    # Each top-level name of nl2sql/ (a room, or a file of the root) -> its room; any other name
    # after `crate::nl2sql::` is one of the root's re-exports.
    where = {}
    for f in rs_files(NL2SQL):
        rel = os.path.relpath(f, NL2SQL).split(os.sep)
        where[rel[0]] = rel[0] if len(rel) > 1 else "(root)"
    where = {k[:-3] if k.endswith(".rs") else k: v for k, v in where.items()}
    errs = []
    for f in rs_files(NL2SQL):
        rel = os.path.relpath(f, NL2SQL).split(os.sep)
        room = rel[0] if len(rel) > 1 else "(root)"
        if rel == ["mod.rs"]:
            continue  # declares the rooms and re-exports from them
        if room not in rank:
            errs.append("src/nl2sql/%s/ is not among the rooms of src/nl2sql/mod.rs" % room)
            continue
        code = strip(open(f, encoding="utf-8").read())
        # Unit tests may borrow fixtures from anywhere; the rule is for the code.
        code = re.sub(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s*)?mod tests\b.*", "", code, flags=re.S)
        named = set(re.findall(r"crate::nl2sql::(\w+)", code))
        for grp in re.findall(r"crate::nl2sql::\{([^}]*)\}", code):
            named |= set(re.findall(r"(?:^|,)\s*(\w+)", grp))
        # `super::` chains: shorter than the file's depth they stay in its room; as long, they
        # name a top-level module of nl2sql/ (a room, or the root's).
        depth = len(rel) - (rel[-1] == "mod.rs")  # the module's depth under nl2sql/
        for chain, b in re.findall(r"\b((?:super::)+)(\w+)", code):
            if chain.count("super::") >= depth:
                named.add(b)
        for b in sorted(named):
            other = where.get(b, "(root)")
            if rank[other] > rank[room]:
                errs.append("%s (room %s) names the later room %s (%s)" % (os.path.relpath(f, ROOT), room, other, b))
    return errs


def main(args):
    checks = {"stages": check_stages, "fn-length": check_fn_length, "rooms": check_rooms}
    errs = []
    for a in args or list(checks):
        errs += checks[a]()
    for e in errs:
        print("nl2sql house: " + e, file=sys.stderr)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
