#!/usr/bin/env python3
"""The refusal check's question "is this about these tables?" answered by meaning: for each
question of some run records, the largest cosine similarity between its sentence embedding and
that of each table of its database (the table's name and its columns' names, split into words),
through `turboinfer_embed` in the bench cluster; then how the refusals would change if the no-match
bar (check/refusal.rs, NO_MATCH_ALLOWANCE) applied only to questions below a similarity.

    benches/sqleval/refusal_meaning.py --on RUN.jsonl... --off RUN.jsonl... [--unanswerable RUN.jsonl...]

--on: records of on-topic questions (`run`, `run --set2`); --off: `run offtopic`; --unanswerable:
`run offtopic --questions benches/sqleval/unanswerable.csv`. The databases are sqleval_<db> of the
bench cluster (scripts/cluster.sh psql: TURBOINFER_PG* choose another). The margins are the
records' (`refusal_check`, or the refused call's reason), so no model is asked. Measured on
2026-12-07 (docs/nl2sql-accuracy.md, "Refusals"): not part of the product.
"""

import argparse
import json
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
A_SIDE = {"broker", "car_dealership", "chinook"}  # the split by database of verdict.py
THRESHOLD, ALLOWANCE = -2.1, 0.9  # check/refusal.rs: DEFAULT_MARGIN, NO_MATCH_ALLOWANCE


def psql(db, query):
    out = subprocess.run([os.path.join(ROOT, "scripts", "cluster.sh"), "psql", "-X", "-At", "-d", db, "-c", query],
                         capture_output=True, text=True)
    return out.stdout.strip()


def lit(s):
    return "'" + s.replace("'", "''") + "'"


TABLES = {}


def table_texts(db):
    """Each table of db as words: `name: column, column, ...`, CamelCase and `_` split."""
    if db not in TABLES:
        out = psql(db, "SELECT c.relname || ': ' || string_agg(a.attname, ', ' ORDER BY a.attnum) FROM pg_class c "
                       "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = c.oid "
                       "AND a.attnum > 0 AND NOT a.attisdropped WHERE c.relkind IN ('r', 'v', 'm', 'p') "
                       "AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND c.relname NOT LIKE 'nl2sql%' "
                       "GROUP BY c.relname")
        TABLES[db] = [re.sub(r"(?<=[a-z])(?=[A-Z])", " ", line).replace("_", " ").lower()
                      for line in out.splitlines() if line.strip()]
    return TABLES[db]


def similarity(db, question):
    tables = table_texts(db)
    if not tables:
        return None
    values = ",".join(f"({lit(t)})" for t in tables)
    out = psql(db, f"WITH q AS (SELECT turboinfer_embed({lit(question)}) e) SELECT max((SELECT sum(x::float8 * y) "
                   f"FROM unnest(q.e, turboinfer_embed(t.t)) AS u(x, y))) FROM q, (VALUES {values}) t(t)")
    return float(out) if out else None


def load(paths, kind):
    out = []
    for p in paths:
        for line in open(p):
            r = json.loads(line)
            check = r.get("refusal_check") or {}
            margin, matched = check.get("margin"), check.get("matched_words")
            why = f"{r.get('reason') or ''} {r.get('refusal') or ''}"
            if margin is None:
                m = re.search(r"log-odds of no against yes (-?[\d.]+)", why)
                margin = float(m.group(1)) if m else None
            if matched is None and "none of the question" in why:
                matched = 0
            refused = bool(r.get("refused")) or "refused" in str(r.get("reason") or "")
            out.append(dict(kind=kind, db=r["db"], id=r["id"], margin=margin, matched=matched, refused=refused,
                            sim=similarity("sqleval_" + r["db"], r["question"])))
    # one record per question, the last file's
    return list({(x["db"], x["id"]): x for x in out}.values())


def refused(r, bar_below):
    """Refused when the no-match bar applies only below similarity `bar_below` (None: always)."""
    if r["margin"] is None:
        return r["refused"]
    low = r["sim"] is None or bar_below is None or r["sim"] < bar_below
    bar = THRESHOLD - ALLOWANCE if r["matched"] == 0 and low else THRESHOLD
    return r["margin"] > bar


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--on", nargs="+", required=True)
    ap.add_argument("--off", nargs="+", required=True)
    ap.add_argument("--unanswerable", nargs="*", default=[])
    args = ap.parse_args()
    recs = load(args.on, "on") + load(args.off, "off") + load(args.unanswerable, "unanswerable")
    for kind in ("on", "off", "unanswerable"):
        xs = sorted(r["sim"] for r in recs if r["kind"] == kind and r["sim"] is not None)
        if xs:
            print(f"{kind}: {len(xs)} questions, similarity min {xs[0]:.2f}, median {xs[len(xs) // 2]:.2f}, max {xs[-1]:.2f}")
    print("\n| no-match bar applies below | side | on-topic refused | off-topic refused | unanswerable refused |")
    print("|---|---|---|---|---|")
    for below in (None, 0.35, 0.3, 0.25, 0.2, 0.15):
        for side in ("A", "B"):
            rs = [r for r in recs if (r["db"] in A_SIDE) == (side == "A")]
            cell = lambda k: f"{sum(refused(r, below) for r in rs if r['kind'] == k)}/{sum(1 for r in rs if r['kind'] == k)}"
            print(f"| {'always (today)' if below is None else below} | {side} | {cell('on')} | {cell('off')} | {cell('unanswerable')} |")


if __name__ == "__main__":
    main()
