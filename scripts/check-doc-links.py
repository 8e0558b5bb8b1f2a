#!/usr/bin/env python3
"""Checks the repository's relative markdown links: every `](path)` and `](path#anchor)` in a
tracked *.md file must name a file or directory that exists, and an anchor must be the GitHub
slug of a heading of the target (or of the same file for `](#anchor)`). Also checks the
`docs/*.md#anchor` links written into source files (the settings table in src/pg/gucs/ renders
into docs/sql-reference.md, so its links are relative to docs/). Prints one line per broken link
and exits 1 if there is any. Python 3 standard library only.

  scripts/check-doc-links.py [ROOT]     # the whole repository (git ls-files), or another checkout
"""

import os
import re
import subprocess
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK = re.compile(r'\]\(([^)\s]+)\)')
FENCE = re.compile(r'^ {0,3}(`{3,}|~{3,})(.*)$')


def slug(heading):
    """GitHub's anchor for a heading: inline markup dropped, lowercased, punctuation other than
    '-' and '_' removed, spaces to hyphens."""
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', heading)  # [text](link) -> text
    text = text.strip().lower()
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in ' -' or ch == '_' or cat[0] in 'LNM':
            out.append('-' if ch == ' ' else ch)
    return ''.join(out)


def outside_fences(lines):
    """The lines outside fenced code blocks (CommonMark: a backtick fence's info string has no
    backtick; the closing fence is the same character, at least as long, nothing after it)."""
    fence = None
    for number, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if fence is None:
            if m and not (m.group(1)[0] == '`' and '`' in m.group(2)):
                fence = m.group(1)
                continue
            yield number, line
        elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                and not m.group(2).strip():
            fence = None


_anchors = {}


def anchors(path):
    if path not in _anchors:
        found, seen = set(), {}
        with open(path, encoding='utf-8') as f:
            lines = f.read().split('\n')
        for _, line in outside_fences(lines):
            m = re.match(r'^(#{1,6})\s+(.*?)\s*#*\s*$', line)
            if m:
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else '%s-%d' % (base, n))
            for a in re.findall(r'<a (?:name|id)="([^"]+)"', line):
                found.add(a)
        _anchors[path] = found
    return _anchors[path]


def check(source, target, base_dir, where, problems):
    if re.match(r'^[a-z][a-z0-9+.-]*:', target) or target.startswith('<'):
        return  # http:, https:, mailto:, ...
    path, _, anchor = target.partition('#')
    full = os.path.normpath(os.path.join(base_dir, path)) if path else source
    if not os.path.exists(full):
        problems.append('%s: %s: no such file' % (where, target))
        return
    if anchor and full.endswith('.md') and os.path.isfile(full):
        if anchor.lower() not in anchors(full):
            problems.append('%s: %s: no heading with that anchor in %s'
                            % (where, target, os.path.relpath(full, ROOT)))


def main():
    global ROOT
    if len(sys.argv) > 1:
        ROOT = os.path.abspath(sys.argv[1])
    files = subprocess.run(['git', 'ls-files'], cwd=ROOT, check=True, capture_output=True,
                           text=True).stdout.split('\n')
    problems = []
    links = 0
    for rel in files:
        if not rel:
            continue
        full = os.path.join(ROOT, rel)
        if not os.path.isfile(full):
            continue
        if rel.endswith('.md'):
            with open(full, encoding='utf-8') as f:
                lines = f.read().split('\n')
            for number, line in outside_fences(lines):
                line = re.sub(r'`[^`]*`', '', line)  # links inside inline code are not links
                for target in LINK.findall(line):
                    links += 1
                    check(full, target, os.path.dirname(full), '%s:%d' % (rel, number), problems)
        elif rel.startswith('src/') and rel.endswith('.rs'):
            with open(full, encoding='utf-8') as f:
                for number, line in enumerate(f, 1):
                    for target in LINK.findall(line):
                        if '.md' in target and not target.startswith('http'):
                            links += 1
                            check(full, target, os.path.join(ROOT, 'docs'),
                                  '%s:%d' % (rel, number), problems)
    for p in problems:
        print(p)
    print('%d relative links checked, %d broken' % (links, len(problems)), file=sys.stderr)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
