#!/usr/bin/env python3
"""The verdict's calibration (src/nl2sql/api/verdict.rs): from sqleval run records, per database and
per side of a split by database, the precision of *sure* (sure answers that are right) and its
coverage (sure answers among the answers given to the on-topic questions), for the rule in force
and for the rule chosen on each side and judged on the other.

    benches/sqleval/verdict.py RUN.jsonl... [--side-a DB,DB] [--target 0.85] [--rule-only] [--reasons] [--logprob] [--values]

A question in several files counts once, as the last file has it. --reasons: how often each
reason of the rule in force fires on right and on wrong answers; --logprob: the grid includes a
bar on the answer's mean log p (records of builds that report answer_logprob); --values: for
records of builds before the value lookup (src/pg/verdict.rs), look the values up here: each
`column = 'value'` of the answer whose column is a text column of the record's database
(sqleval_<db>, through scripts/cluster.sh psql, as a superuser) and that no row holds. A build
that reports `value_not_found` needs no lookup: its records say it. --values also looks, for
those records, for the joins that repeat rows (`repeated_rows`): an INNER JOIN of a table the
query (without DISTINCT) uses only in its ON condition, on columns no unique index of that table
covers (an approximation of src/pg/facts.rs's walk, on the SQL text).

RUN.jsonl: target/sqleval/<label>.jsonl of `benches/sqleval/run` (any number: sql-eval's 104
questions, the sample databases' set, ...). Each record carries what nl2sql_explain reported
(attempts, candidates, refusal_check) and the executed result's row count (`rows`); the signals
are read off them exactly as `Signals::of` reads them off an Outcome (kept in step by hand: the
records of a build that reports `verdict` are checked against it, see `check_recorded`).

Two views: `explain` (the answer not executed: what nl2sql() and nl2sql_explain() know) and
`run` (the row count known: what nl2sql_run() knows). The rule is chosen on the `explain` view of
one side (the largest coverage whose precision reaches --target there; ties: the simpler rule)
and judged on the other side, both ways.

No rule here names a database's question, table, column or value: the grid is of the generic
signals only.
"""

import argparse
import itertools
import json
import math
import os
import re
import subprocess
import sys
from collections import OrderedDict

# The rule in force: DEFAULT_RULE of src/nl2sql/api/verdict.rs (kept in step by hand).
DEFAULT_RULE = dict(repaired=True, rewritten=False, min_words=1, min_opening=-math.inf, min_refusal_gap=0.0,
                    min_answer_logprob=-math.inf, dates=True, ratio=False, max_joins=99, nested=True,
                    and_or=True)

# Side A of the default split: sql-eval's half A and the first sample database; side B the rest.
DEFAULT_SIDE_A = "broker,car_dealership,chinook"

# The grid the rule is chosen from: each flag on or off, and each bar over the range the
# development records span (matched words 0-4; the fence's log p -1.5..-0.1 in 0.1, where it is
# read at all when above the skip's bar, -0.4; the refusal check's distance from its bar 0..3),
# and the SQL shapes. 0 / -inf / 0 / 99 switch a bar off.
GRID = dict(
    repaired=[True, False],
    rewritten=[True, False],
    min_words=[0, 1, 2, 3, 4],
    min_opening=[-math.inf] + [round(-1.5 + 0.1 * i, 1) for i in range(15)],
    min_refusal_gap=[0.0, 0.5, 1.0, 1.5, 2.0, 3.0],
    min_answer_logprob=[-math.inf],
    dates=[False, True],
    ratio=[False, True],
    max_joins=[99, 3, 2, 1],
    nested=[False, True],
    and_or=[False, True],
)
# The answer's mean log p per token (answer_logprob, reported by builds after the verdict's):
# searched only over records that have it (--logprob), -0.5..-0.02.
LOGPROB_GRID = [-math.inf] + [round(-0.5 + 0.02 * i, 2) for i in range(25)]


# SQL shapes the small model often gets wrong (docs/nl2sql-accuracy.md: date functions, ratios,
# joins invented), as Shape::of in verdict.rs reads them off the statement's tokens: words that
# compute with dates, a division, the number of JOINs, a nested SELECT.
DATE_WORDS = {"extract", "date_trunc", "date_part", "interval", "now", "current_date", "current_timestamp",
              "to_char", "to_date", "to_timestamp", "age", "make_date", "make_interval", "localtimestamp"}
TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/|[A-Za-z_][A-Za-z0-9_$]*|\d+(?:\.\d*)?|[-+*/<>=~!@#%^&|`?]+|\S", re.S)


# Words that end one condition and start another clause (or a CASE's branch) at their depth.
CLAUSE_WORDS = {"select", "from", "where", "on", "join", "group", "order", "having", "limit", "when", "then",
                "else", "case", "end", "union", "using"}


def mixes_and_or(low):
    """AND and OR in one condition at the same parenthesis depth (BETWEEN's AND aside), as
    verdict.rs's mixes_and_or reads the tokens."""
    stack = [[False, False, False]]
    for t in low:
        if t == "(":
            stack.append([False, False, False])
            continue
        if t == ")":
            if len(stack) > 1:
                stack.pop()
            continue
        top = stack[-1]
        if t == "between":
            top[2] = True
        elif t == "and":
            if top[2]:
                top[2] = False
            else:
                top[0] = True
        elif t == "or":
            top[1] = True
        elif t in CLAUSE_WORDS:
            top[:] = [False, False, False]
        if top[0] and top[1]:
            return True
    return False


def shape(sql):
    """(dates, ratio, joins, nested, and_or) of a statement: a date word, a `/` operator, JOIN
    count, a SELECT inside parentheses, AND and OR side by side without parentheses."""
    toks = [t for t in TOKEN.findall(sql or "") if not t.startswith(("--", "/*"))]
    low = [t.lower() if not t.startswith(("'", '"')) else t for t in toks]
    dates = any(t in DATE_WORDS for t in low)
    ratio = "/" in low
    joins = sum(1 for t in low if t == "join")
    nested = any(low[i] == "(" and low[i + 1] == "select" for i in range(len(low) - 1))
    return dates, ratio, joins, nested, mixes_and_or(low)


def _name_char(c):
    """A character of a name, as check/numbers.rs's name_byte reads UTF-8 bytes: an ASCII letter,
    digit or `_`, or any non-ASCII character."""
    return c.isascii() and (c.isalnum() or c == "_") or not c.isascii()


def _digits_end(t, i):
    while i < len(t) and t[i] in "0123456789":
        i += 1
    return i


def _number(whole, fraction):
    """check/numbers.rs's Number, as text: no leading zeros, no trailing zeros of the fraction."""
    w = whole.lstrip("0") or "0"
    f = fraction.rstrip("0")
    return w + ("." + f if f else "")


def question_numbers(text):
    """(number, percent) of each number `text` writes in digits, as check/numbers.rs's question_numbers."""
    out, i = [], 0
    while i < len(text):
        if text[i] not in "0123456789" or (i > 0 and _name_char(text[i - 1])):
            i += 1
            continue
        start = i
        i = _digits_end(text, i)
        whole = text[start:i]
        while i < len(text) and text[i] == "," and _digits_end(text, i + 1) == i + 4:
            whole += text[i + 1:i + 4]
            i += 4
        fraction = ""
        if i + 1 < len(text) and text[i] == "." and text[i + 1] in "0123456789":
            end = _digits_end(text, i + 1)
            fraction, i = text[i + 1:end], end
        if i < len(text) and _name_char(text[i]):
            while i < len(text) and _name_char(text[i]):
                i += 1
            continue
        rest = text[i:].lstrip()
        percent = rest.startswith("%") or rest[:7].lower() == "percent"
        out.append((whole, fraction, percent))
    return out


def unused_numbers(question, sql):
    """The question's numbers that the SQL writes nowhere (`number_not_used`), as check/numbers.rs's
    unused_numbers: every digit run of the SQL and every `digits.digits` count."""
    in_sql, i = set(), 0
    while i < len(sql):
        if sql[i] not in "0123456789":
            i += 1
            continue
        start = i
        i = _digits_end(sql, i)
        in_sql.add(_number(sql[start:i], ""))
        if i + 1 < len(sql) and sql[i] == "." and sql[i + 1] in "0123456789":
            in_sql.add(_number(sql[start:i], sql[i + 1:_digits_end(sql, i + 1)]))
    out = []
    for whole, fraction, percent in question_numbers(question or ""):
        n = _number(whole, fraction)
        padded = whole.lstrip("0").rjust(3, "0")
        hundredth = _number(padded[:-2], padded[-2:] + fraction.rstrip("0"))
        used = n in in_sql or (percent and hundredth in in_sql)
        if not used and n not in out:
            out.append(n)
    return out


def signals(rec):
    """The verdict's signals of an accepted answer's record (None for a refused, invalid or
    failed call: no answer, no verdict), as Signals::of reads them."""
    if rec.get("refused") or not rec.get("valid") or not rec.get("sql") or str(rec.get("error") or "").startswith("nl2sql_error"):
        return None
    sql = rec["sql"]
    attempts = rec.get("attempts") or []
    answer = max((i for i, a in enumerate(attempts) if a.get("sql") == sql), default=None)
    cands = rec.get("candidates") or []
    chosen = next((c for c in cands if c.get("chosen")), None)
    rescued = chosen is not None and (chosen.get("branch_at") is not None or chosen.get("sample") is not None) and answer is None
    line = attempts[: (answer + 1) if answer is not None else len(attempts)]
    repair_rounds = sum(1 for a in line[1:] if a.get("rewritten") is None)
    rewritten = next((a["rewritten"] for a in reversed(line) if a.get("rewritten")), None)
    doubt = None
    if answer is not None and not rescued and attempts[answer].get("advisory"):
        doubt = attempts[answer].get("error")
    # Candidates the engine executed (turboinfer.candidate_execution): the records keep the
    # bench's result key of each, the engine's digest compares the same values.
    executed = [c.get("result_key") for c in cands if c.get("executed") and c.get("error") is None and c.get("result_key")]
    agreement = None
    if chosen is not None and chosen.get("executed") and chosen.get("result_key") and len(executed) >= 2:
        agreement = (sum(1 for k in executed if k == chosen["result_key"]), len(executed))
    check = rec.get("refusal_check") or None
    gap = None
    if check and check.get("margin") is not None and check.get("bar") is not None:
        gap = check["margin"] - check["bar"]
    lp = rec.get("answer_logprob")
    if lp is None and chosen is not None and cands:
        lp = chosen.get("mean_logprob")  # the same figure, for builds before answer_logprob
    if lp is not None and not math.isfinite(lp):
        lp = None
    dates, ratio, joins, nested, and_or = shape(sql)
    recorded = rec.get("verdict")
    codes = [x.get("code") for x in recorded.get("reasons") or []] if isinstance(recorded, dict) else []
    return dict(
        missing_value="value_not_found" in codes,
        repeated_rows="repeated_rows" in codes,
        needless_join="needless_join" in codes,
        self_join="self_join" in codes,
        unused_numbers=unused_numbers(rec.get("text") or rec.get("question") or "", sql),
        filters_nothing="filters_nothing" in codes,
        dates=dates, ratio=ratio, joins=joins, nested=nested, and_or=and_or,
        answer_logprob=lp,
        repair_rounds=repair_rounds, rewritten=rewritten, rescued=rescued, doubt=doubt, agreement=agreement,
        matched_words=check.get("matched_words") if check else None,
        opening_logprob=check.get("opening_logprob") if check else None,
        refusal_gap=gap, rows=rec.get("rows"),
    )


def reasons(rule, s, executed):
    """The codes of the reasons the answer with signals s is unsure under rule (Rule::judge);
    `executed`: the row count is known (nl2sql_run)."""
    out = []
    if executed and s["rows"] == 0:
        out.append("no_rows")
    # The checks without a parameter, in Rule::judge's order: (signal, reason code).
    for signal, code in (("missing_value", "value_not_found"), ("repeated_rows", "repeated_rows"),
                         ("needless_join", "needless_join"), ("self_join", "self_join"),
                         ("unused_numbers", "number_not_used"), ("filters_nothing", "filters_nothing")):
        if s[signal]:
            out.append(code)
    if s["doubt"] is not None:
        out.append("doubt")
    if rule["repaired"] and (s["repair_rounds"] > 0 or s["rescued"]):
        out.append("repaired")
    if rule["rewritten"] and s["rewritten"]:
        out.append("rewritten")
    if s["agreement"] is not None and s["agreement"][0] < s["agreement"][1]:
        out.append("candidates_disagree")
    if s["matched_words"] is not None and s["matched_words"] < rule["min_words"]:
        out.append("few_schema_words")
    if s["opening_logprob"] is not None and s["opening_logprob"] <= rule["min_opening"]:
        out.append("unsure_opening")
    if s["refusal_gap"] is not None and s["refusal_gap"] > -rule["min_refusal_gap"]:
        out.append("near_refusal")
    if s["answer_logprob"] is not None and s["answer_logprob"] <= rule["min_answer_logprob"]:
        out.append("unsure_wording")
    if rule["dates"] and s["dates"]:
        out.append("dates")
    if rule["ratio"] and s["ratio"]:
        out.append("ratio")
    if s["joins"] > rule["max_joins"]:
        out.append("joins")
    if rule["nested"] and s["nested"]:
        out.append("subquery")
    if rule["and_or"] and s["and_or"]:
        out.append("and_or")
    return out


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# `column = 'value'` as the model writes it (qualified or not, quoted or not): the approximation
# of the server's parse analysis (src/pg/facts.rs) that records of older builds need.
VALUE_FILTER = re.compile(r'(?:(?:\w+|"[^"]+")\.)?("[^"]+"|\b\w+)\s*=\s*\'((?:[^\']|\'\')*)\'')


def psql(db, query):
    out = subprocess.run([os.path.join(ROOT, "scripts", "cluster.sh"), "psql", "-X", "-At", "-d", db, "-c", query],
                         capture_output=True, text=True)
    return out.stdout.strip()


def lookup_values(recs):
    """--values: `_missing_values` of each accepted answer of a record without a reported
    value lookup: the values it compares a text column with that no row of that column holds
    (a column name found in several tables counts as found when any holds the value)."""
    columns = {}
    for r in recs:
        if r.get("_signals") is None or r["_signals"]["missing_value"]:
            continue
        db = "sqleval_" + str(r.get("db"))
        if db not in columns:
            cols = {}
            for line in psql(db, "SELECT table_schema || '|' || table_name || '|' || column_name FROM information_schema.columns "
                                 "WHERE data_type IN ('text', 'character varying', 'character') "
                                 "AND table_schema NOT IN ('pg_catalog', 'information_schema')").splitlines():
                sc, t, c = line.split("|")
                cols.setdefault(c.lower(), []).append((sc, t, c))
            columns[db] = cols
        missing = []
        for m in VALUE_FILTER.finditer(r["sql"]):
            col, value = m.group(1), m.group(2).replace("''", "'")
            name = col[1:-1] if col.startswith('"') else col.lower()
            found = [x for x in columns[db].get(name.lower(), []) if col.startswith('"') and x[2] == name or not col.startswith('"')]
            if not found:
                continue
            lit = "'" + value.replace("'", "''") + "'"
            probe = " OR ".join(f'EXISTS (SELECT 1 FROM "{sc}"."{t}" WHERE "{c}" = {lit})' for sc, t, c in found)
            if psql(db, "SELECT " + probe) == "f":
                missing.append(f"{value!r} in {name}")
        if missing:
            r["_missing_values"] = missing
            r["_signals"]["missing_value"] = True
        if not r["_signals"]["repeated_rows"] and not r["_signals"]["needless_join"]:
            unique = unused_join(db, r["sql"])
            r["_signals"]["repeated_rows"] = unique is False
            r["_signals"]["needless_join"] = unique is True
        if not r["_signals"]["self_join"] and self_join(r["sql"]):
            r["_signals"]["self_join"] = True
        if not r["_signals"]["filters_nothing"] and always_true(db, r["sql"]):
            r["_signals"]["filters_nothing"] = True


# `[INNER] JOIN table [AS] alias ON condition` up to the next clause (not a LEFT/RIGHT/FULL join).
JOIN_CLAUSE = re.compile(r'(?<!LEFT )(?<!RIGHT )(?<!FULL )(?<!OUTER )\bJOIN\s+((?:"[^"]+"|\w+)(?:\.(?:"[^"]+"|\w+))?)'
                         r'(?:\s+(?:AS\s+)?(?!ON\b)("[^"]+"|\w+))?\s+ON\s+(.*?)'
                         r'(?=\b(?:JOIN|INNER|LEFT|RIGHT|FULL|CROSS|WHERE|GROUP|ORDER|HAVING|LIMIT|UNION)\b|\)|;|$)', re.I | re.S)


# `FROM table [AS] alias [INNER] JOIN`: the left side of the first join of a statement.
FIRST_JOIN = re.compile(r'\bFROM\s+((?:"[^"]+"|\w+)(?:\.(?:"[^"]+"|\w+))?)(?:\s+(?:AS\s+)?(?!(?:INNER|JOIN)\b)("[^"]+"|\w+))?'
                        r'\s+(?:INNER\s+)?JOIN\b', re.I)
# `[alias.]column IS NOT NULL`.
NOT_NULL_TEST = re.compile(r'(?:("[^"]+"|\w+)\.)?("[^"]+"|\w+)\s+IS\s+NOT\s+NULL\b', re.I)


def always_true(db, sql):
    """Whether `sql` tests a column declared NOT NULL with IS NOT NULL, in a statement without
    outer joins (`filters_nothing`; an approximation of src/pg/facts.rs's `not_null_tests` on
    the SQL text, for records of builds before it): an unqualified column counts when every
    table of the statement that has it declares it NOT NULL."""
    if re.search(r'\b(?:LEFT|RIGHT|FULL)\b', sql, re.I):
        return False
    name = sql_name
    table_of = tables_by_alias(sql)
    for m in NOT_NULL_TEST.finditer(sql):
        col = name(m.group(2))
        tables = [table_of[name(m.group(1))]] if m.group(1) and name(m.group(1)) in table_of else sorted(set(table_of.values()))
        arr = ", ".join("'" + t.replace("'", "''") + "'" for t in tables) or "''"
        got = psql(db, "SELECT string_agg(a.attnotnull::text, ',') FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
                       "WHERE c.relname IN (" + arr + ") AND c.relkind = 'r' AND NOT a.attisdropped "
                       "AND a.attname = '" + col.replace("'", "''") + "'")
        if got and all(x == "true" for x in got.split(",")):
            return True
    return False


def unused_join(db, sql):
    """Whether `sql` inner-joins a table it uses only in that join's ON condition (top query
    without DISTINCT; see --values): False when on columns no unique index of the table covers
    (`repeated_rows`; the first such join decides), True when one covers them
    (`needless_join`), None when there is no such join."""
    if re.match(r'\s*SELECT\s+DISTINCT\b', sql, re.I):
        return None
    needless = None
    joins = [(m.group(1), m.group(2) or m.group(1).split(".")[-1], m.group(3)) for m in JOIN_CLAUSE.finditer(sql)]
    # The left side of the first join too (`FROM a JOIN b ON ...`: a), with that join's ON,
    # unless a COUNT(*) counts its rows.
    first = FIRST_JOIN.search(sql)
    if first and joins and not re.search(r'\bcount\s*\(\s*\*\s*\)', sql, re.I):
        joins.append((first.group(1), first.group(2) or first.group(1).split(".")[-1], joins[0][2]))
    for table, alias, on in joins:
        ref = re.compile(r'(?<![\w"])' + re.escape(alias) + r'\.("[^"]+"|\w+)', re.I)
        if not ref.search(on) or len(ref.findall(sql)) != len(ref.findall(on)):
            continue
        cols = sorted({c[1:-1] if c.startswith('"') else c.lower() for c in ref.findall(on)})
        name = ".".join(p if p.startswith('"') else p.lower() for p in table.split("."))
        # A column of the table written unqualified outside the ON condition uses it.
        rest = sql.replace(on, " ")
        own = psql(db, "SELECT string_agg(attname, '|') FROM pg_attribute WHERE attrelid = to_regclass($n$" + name + "$n$) "
                       "AND attnum > 0 AND NOT attisdropped").split("|")
        if any(re.search(r'(?<![\w."])' + re.escape(c) + r'(?![\w"])', rest, re.I) for c in own if c):
            continue
        arr = ", ".join("'" + c.replace("'", "''") + "'" for c in cols)
        q = ("SELECT EXISTS (SELECT FROM pg_index i WHERE i.indrelid = to_regclass($n$" + name + "$n$) AND i.indisunique "
             "AND i.indpred IS NULL AND i.indexprs IS NULL AND (SELECT array_agg(a.attname::text) FROM unnest(i.indkey) k "
             "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k) <@ ARRAY[" + arr + "]::text[])")
        found = psql(db, q)
        if found == "f":
            return False
        if found == "t":
            needless = True
    return needless


# `FROM|JOIN table [AS] alias`: the entries of a statement (an approximation of parse analysis).
ENTRY = re.compile(r'\b(?:FROM|JOIN)\s+((?:"[^"]+"|\w+)(?:\.(?:"[^"]+"|\w+))?)(?:\s+(?:AS\s+)?(?!(?:ON|JOIN|WHERE|INNER|LEFT|'
                   r'RIGHT|FULL|CROSS|GROUP|ORDER|LIMIT|HAVING|UNION)\b)("[^"]+"|\w+))?', re.I)
# `a.x = b.y` between two qualified columns.
COLUMN_EQUALITY = re.compile(r'("[^"]+"|\w+)\.("[^"]+"|\w+)\s*=\s*("[^"]+"|\w+)\.("[^"]+"|\w+)')


def sql_name(x):
    """A name as PostgreSQL reads it: quoted as written, else folded to lower case."""
    return x[1:-1] if x.startswith('"') else x.lower()


def tables_by_alias(sql):
    """The table of each alias (or unaliased table name) of `sql`'s FROM and JOIN entries."""
    table_of = {}
    for m in ENTRY.finditer(sql):
        table = sql_name(m.group(1).split(".")[-1])
        table_of[sql_name(m.group(2)) if m.group(2) else table] = table
    return table_of


def self_join(sql):
    """Whether `sql` equates columns of two aliases of one table (`self_join`; an approximation
    of src/pg/facts.rs's `self_joins` on the SQL text, for records of builds before it)."""
    name = sql_name
    table_of = tables_by_alias(sql)
    for m in COLUMN_EQUALITY.finditer(sql):
        a, b = name(m.group(1)), name(m.group(3))
        if a != b and a in table_of and b in table_of and table_of[a] == table_of[b]:
            return True
    return False


def load(paths):
    """The records of the runs, one per question (a later file's record of the same id wins)."""
    recs = OrderedDict()
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if line:
                    r = json.loads(line)
                    r["_signals"] = signals(r)
                    recs[(r.get("set", ""), r.get("db"), r.get("id"))] = r
    return list(recs.values())


def score(rule, recs, executed):
    """(questions, answered, right answers, sure, sure and right) over recs."""
    n = ans = right = sure = sure_right = 0
    for r in recs:
        n += 1
        s = r.get("_signals")
        if s is None:
            continue
        ans += 1
        right += bool(r.get("correct"))
        if not reasons(rule, s, executed):
            sure += 1
            sure_right += bool(r.get("correct"))
    return n, ans, right, sure, sure_right


def fmt_score(t):
    n, ans, right, sure, sr = t
    prec = f"{100 * sr / sure:.0f} %" if sure else "-"
    cov = f"{100 * sure / ans:.0f} %" if ans else "-"
    return f"{sr}/{sure} ({prec}) | {sure}/{ans} ({cov}) | {right}/{ans}"


def rule_str(rule):
    bits = [k for k in ("repaired", "rewritten") if rule[k]]
    bits.append(f"words>={rule['min_words']}")
    if rule["min_opening"] != -math.inf:
        bits.append(f"opening>{rule['min_opening']}")
    if rule["min_refusal_gap"]:
        bits.append(f"gap>={rule['min_refusal_gap']}")
    if rule["min_answer_logprob"] != -math.inf:
        bits.append(f"answer_logprob>{rule['min_answer_logprob']}")
    bits += [k for k in ("dates", "ratio", "nested", "and_or") if rule[k]]
    if rule["max_joins"] < 99:
        bits.append(f"joins<={rule['max_joins']}")
    return " ".join(bits)


def complexity(rule):
    """Fewer signals switched on, and laxer bars, first (a tie on coverage goes to the simpler)."""
    return (rule["repaired"] + rule["rewritten"] + (rule["min_words"] > 0) + (rule["min_opening"] != -math.inf)
            + (rule["min_refusal_gap"] > 0) + (rule["min_answer_logprob"] != -math.inf)
            + rule["dates"] + rule["ratio"] + rule["nested"] + rule["and_or"] + (rule["max_joins"] < 99),
            rule["min_words"],
            -rule["min_opening"], rule["min_refusal_gap"], -rule["min_answer_logprob"])


def component_masks(recs):
    """Per grid key and value, the bitmask (bit i: recs[i]) of the answers that component alone
    makes unsure (explain view); and the masks of the answered and of the right answers. A
    rule's unsure answers are the OR of its components' and of the reasons always weighed."""
    answered = right = always = 0
    masks = {k: {v: 0 for v in vals} for k, vals in GRID.items()}
    off = dict(repaired=False, rewritten=False, min_words=0, min_opening=-math.inf, min_refusal_gap=0.0,
               min_answer_logprob=-math.inf, dates=False, ratio=False, max_joins=99, nested=False,
               and_or=False)
    for i, r in enumerate(recs):
        s = r.get("_signals")
        if s is None:
            continue
        bit = 1 << i
        answered |= bit
        if r.get("correct"):
            right |= bit
        if reasons(off, s, False):
            always |= bit
        for k, vals in GRID.items():
            for v in vals:
                if reasons(dict(off, **{k: v}), s, False):
                    masks[k][v] |= bit
    return answered, right, always, masks


def choose(recs, target):
    """The rule of GRID with the largest coverage whose precision on recs (explain view) reaches
    target; the simpler on a tie; None when none does."""
    answered, right, always, masks = component_masks(recs)
    best = None
    keys = list(GRID)
    for values in itertools.product(*GRID.values()):
        unsure = always
        for k, v in zip(keys, values):
            unsure |= masks[k][v]
        sure = answered & ~unsure
        n = bin(sure).count("1")
        if not n:
            continue
        sr = bin(sure & right).count("1")
        if sr < target * n:
            continue
        rule = dict(zip(keys, values))
        key = (n, sr, tuple(-x for x in complexity(rule)))
        if best is None or key > best[0]:
            best = (key, rule)
    return best[1] if best else None


def check_recorded(recs):
    """Records of a build that reports `verdict` (nl2sql_explain): the reasons recomputed here
    must be the reported ones (the mirror of Signals::of and Rule::judge is in step)."""
    bad = 0
    seen = 0
    for r in recs:
        v = r.get("verdict")
        s = signals(r)
        if not isinstance(v, dict) or s is None:
            continue
        seen += 1
        mine = reasons(DEFAULT_RULE, s, False)
        theirs = [x.get("code") for x in v.get("reasons") or []]
        if mine != theirs:
            bad += 1
            print(f"  mismatch {r.get('db')} {r.get('id')}: recomputed {mine}, reported {theirs}", file=sys.stderr)
    return seen, bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="run records (target/sqleval/<label>.jsonl)")
    ap.add_argument("--side-a", default=DEFAULT_SIDE_A, help="databases of side A (the rest is side B)")
    ap.add_argument("--target", type=float, default=0.85, help="precision of sure the rule must reach where it is chosen")
    ap.add_argument("--rule-only", action="store_true", help="only the rule in force, no search")
    ap.add_argument("--reasons", action="store_true", help="how often each reason fires, right and wrong answers")
    ap.add_argument("--logprob", action="store_true", help="search the answer's mean log p too (records with answer_logprob)")
    ap.add_argument("--values", action="store_true", help="look up the filtered values of records of builds before the value lookup")
    args = ap.parse_args()
    if args.logprob:
        GRID["min_answer_logprob"] = LOGPROB_GRID
    recs = load(args.runs)
    if args.values:
        lookup_values(recs)
    side_a = {d.strip().lower() for d in args.side_a.split(",") if d.strip()}
    side = lambda r: "A" if str(r.get("db", "")).lower() in side_a else "B"
    sides = OrderedDict((k, [r for r in recs if side(r) == k]) for k in ("A", "B"))
    dbs = OrderedDict()
    for r in recs:
        dbs.setdefault(r.get("db"), []).append(r)

    seen, bad = check_recorded(recs)
    if seen:
        print(f"recorded verdicts: {seen}, recomputed differently: {bad}\n")

    def table(title, rule):
        print(f"### {title}: {rule_str(rule)}\n")
        print("| databases | side | sure right (precision), explain | sure (coverage), explain | right | sure right (precision), run | sure (coverage), run |")
        print("|---|---|---|---|---|---|---|")
        rows = [(db, side(rs[0]), rs) for db, rs in dbs.items()]
        rows += [(f"side {k}", k, v) for k, v in sides.items()] + [("all", "", recs)]
        for name, sd, rs in rows:
            e = fmt_score(score(rule, rs, False)).split(" | ")
            x = fmt_score(score(rule, rs, True)).split(" | ")
            print(f"| {name} | {sd} | {e[0]} | {e[1]} | {e[2]} | {x[0]} | {x[1]} |")
        print()

    table("The rule in force (verdict.rs DEFAULT_RULE)", DEFAULT_RULE)
    if args.reasons:
        print("| reason | fires on right answers | fires on wrong answers |\n|---|---|---|")
        counts = OrderedDict()
        for r in recs:
            s = r.get("_signals")
            if s is None:
                continue
            for code in reasons(DEFAULT_RULE, s, True):
                c = counts.setdefault(code, [0, 0])
                c[0 if r.get("correct") else 1] += 1
        for code, (ok, wrong) in counts.items():
            print(f"| {code} | {ok} | {wrong} |")
        print()
    if args.rule_only:
        return 0
    for tune, judge in (("A", "B"), ("B", "A")):
        rule = choose(sides[tune], args.target)
        if rule is None:
            print(f"### tuned on side {tune}: no rule reaches {args.target:.0%} there\n")
            continue
        t = fmt_score(score(rule, sides[tune], False)).split(" | ")
        j = fmt_score(score(rule, sides[judge], False)).split(" | ")
        jr = fmt_score(score(rule, sides[judge], True)).split(" | ")
        print(f"tuned on {tune}: {rule_str(rule)}; tune side precision {t[0]}, coverage {t[1]}; "
              f"judged on {judge}: precision {j[0]}, coverage {j[1]} (with rows: {jr[0]}, {jr[1]})\n")
        table(f"Tuned on side {tune}, judged on side {judge}", rule)
    return 0


if __name__ == "__main__":
    sys.exit(main())
