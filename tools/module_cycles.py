#!/usr/bin/env python3
"""Import circles between the crate's modules (`make lint` fails on any).

A module is a directory under src/ or a file directly in it (`src/nl2sql/`, `src/generate.rs`), and,
one level down, each file of such a directory (`nl2sql/engine`). An edge A -> B is a `crate::B` or
`super::B` path named in A's code (comments and string literals are ignored). Prints each strongly
connected group of more than one module, at the top level and inside each directory; exits 1 if any.
Usage: tools/module_cycles.py [src-dir]
"""
import os, re, sys

src = sys.argv[1] if len(sys.argv) > 1 else "src"

def strip(code):
    # Drop comments and string literals so that prose naming a module is no dependency.
    code = re.sub(r"//[^\n]*", "", code)
    code = re.sub(r"/\*.*?\*/", "", code, flags=re.S)
    code = re.sub(r'r#*"(?:.|\n)*?"#*', '""', code)
    code = re.sub(r'"(?:\\.|[^"\\])*"', '""', code)
    return code

def files():
    for root, _, names in os.walk(src):
        for n in names:
            if n.endswith(".rs"):
                yield os.path.relpath(os.path.join(root, n), src)

def top(rel):
    p = rel.split(os.sep)
    return p[0][:-3] if len(p) == 1 else p[0]

def sub(rel):
    # `nl2sql/engine.rs` -> ("nl2sql", "engine"); `nl2sql/draft/x.rs` -> ("nl2sql", "draft")
    p = rel.split(os.sep)
    if len(p) < 2:
        return None
    leaf = p[1][:-3] if len(p) == 2 else p[1]
    return (p[0], leaf)

top_edges, sub_edges = {}, {}
tops = {top(f) for f in files()}
for f in files():
    code = strip(open(os.path.join(src, f), encoding="utf-8").read())
    # `use crate::{a, b::c}` groups: expand the first level.
    names = set(re.findall(r"crate::(\w+)", code))
    for grp in re.findall(r"crate::\{([^}]*)\}", code):
        names |= set(re.findall(r"(?:^|,)\s*(\w+)", grp))
    a = top(f)
    for b in names:
        if b in tops and b != a:
            top_edges.setdefault(a, set()).add(b)
    s = sub(f)
    if s:
        d, leaf = s
        subs = {sub(g)[1] for g in files() if sub(g) and sub(g)[0] == d}
        refs = set(re.findall(r"crate::%s::(\w+)" % re.escape(d), code))
        for grp in re.findall(r"crate::%s::\{([^}]*)\}" % re.escape(d), code):
            refs |= set(re.findall(r"(?:^|,)\s*(\w+)", grp))
        if leaf != "mod":
            refs |= set(re.findall(r"super::(\w+)", code))
        for b in refs:
            if b in subs and b != leaf and b != "mod":
                sub_edges.setdefault((d, leaf), set()).add((d, b))

def sccs(edges):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    nodes = set(edges) | {b for v in edges.values() for b in v}
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(sorted(comp))
    sys.setrecursionlimit(10000)
    for v in sorted(nodes, key=str):
        if v not in index: visit(v)
    return out

found = 0
for c in sccs(top_edges):
    found += 1
    print("circle: " + " <-> ".join(c))
for c in sccs(sub_edges):
    found += 1
    print("circle: " + " <-> ".join("%s/%s" % x for x in c))
if found:
    sys.exit(1)
print("no import circles between modules")
