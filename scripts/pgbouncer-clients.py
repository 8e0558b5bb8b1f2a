#!/usr/bin/env python3
"""The clients of scripts/test-pgbouncer.sh: psql processes of one role (pb_app) talking to PgBouncer,
driven turn by turn so that their conversations interleave as this script says.

Environment (set by test-pgbouncer.sh): PSQL (psql binary), BPORT (PgBouncer's port on
127.0.0.1, pools pb_session and pb_tx), PGHOST_DIRECT/PGPORT_DIRECT (the cluster's socket, for
the superuser's side channel: pg_stat_activity, pg_cancel_backend), DB (the database).
Prints one "ok ..." or "FAIL ..." line per check (test-pgbouncer.sh counts them), "note ..." lines
for what is reported and not checked, and "clients: done" at the end. Standard library only.
"""
import json
import os
import signal
import subprocess
import time

PSQL = os.environ["PSQL"]
BPORT = os.environ["BPORT"]
DB = os.environ["DB"]
DIRECT = ["-h", os.environ["PGHOST_DIRECT"], "-p", os.environ["PGPORT_DIRECT"], "-U", "postgres", "-d", DB]
# The whole run is bounded: a hung client must fail the test, not CI (about 1.5 min expected).
signal.alarm(900)


def ok(msg):
    print("ok   " + msg, flush=True)


def bad(msg, detail=""):
    print("FAIL " + msg, flush=True)
    for line in str(detail).splitlines()[:20]:
        print("     | " + line, flush=True)


def lit(value):
    """A SQL literal (standard_conforming_strings is on) or NULL."""
    return "NULL" if value is None else "'" + value.replace("'", "''") + "'"


class Client:
    """A psql process connected through PgBouncer; errors do not end it (each answer is checked)."""

    def __init__(self, name, pool):
        env = dict(os.environ, PGPASSWORD="app-secret", PGAPPNAME=name)
        self.name = name
        self.p = subprocess.Popen(
            [PSQL, "-X", "-q", "-At", "-h", "127.0.0.1", "-p", BPORT, "-U", "pb_app", "-d", pool],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, env=env)

    def send(self, text):
        self.p.stdin.write(text + "\n\\echo @@STATE :SQLSTATE\n\\echo @@END\n")
        self.p.stdin.flush()

    def read(self):
        """(rows, sqlstate of the last statement, other lines: notices and errors)."""
        rows, other, state = [], [], None
        while True:
            line = self.p.stdout.readline()
            if line == "":
                raise RuntimeError(f"{self.name}: psql ended: " + "\n".join(other))
            line = line.rstrip("\n")
            if line == "@@END":
                return rows, state, other
            if line.startswith("@@STATE "):
                state = line[len("@@STATE "):]
            elif line.startswith("R|"):
                rows.append(line[2:])
            else:
                other.append(line)

    def run(self, text):
        self.send(text)
        return self.read()

    def pid(self):
        rows, _, _ = self.run("SELECT 'R|' || pg_backend_pid();")
        return int(rows[0])

    def close(self):
        self.p.stdin.close()
        self.p.wait(30)


def direct(sql):
    """The superuser's side channel, straight to the cluster's socket (not through PgBouncer)."""
    return subprocess.run([PSQL, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", *DIRECT, "-c", sql],
                          capture_output=True, text=True, check=True).stdout.strip()


def questions(follow_up):
    return [t.get("question") for t in (follow_up or {}).get("turns") or []]


def explain(c, q):
    """nl2sql_explain(q, follow_up => true) in c: (the jsonb, sqlstate, other lines)."""
    rows, state, other = c.run(
        f"SELECT 'R|' || json_build_object('pid', pg_backend_pid(), 'e', e)::text "
        f"FROM nl2sql_explain({lit(q)}, follow_up => true) e;")
    return (json.loads(rows[0]) if rows else None), state, other


# ---------------------------------------------------------------------------------------------
# 1. Session mode: one server connection, PgBouncer's server_reset_query (DISCARD ALL) between
#    clients.
Q1 = "How many orders are there?"
c1 = Client("client1", "pb_session")
pid1 = c1.pid()
rows, state, other = c1.run(f"SELECT 'R|' || replace(nl2sql({lit(Q1)}), E'\\n', ' ');")
mine = []  # the questions that entered client 1's conversation, in order
if state == "00000" and rows and rows[0].upper().startswith(("SELECT", "WITH")):
    ok(f"session mode, client 1 (backend {pid1}): nl2sql('{Q1}') = {rows[0]}")
    mine.append(Q1)
else:
    bad(f"session mode, client 1: nl2sql('{Q1}') ({state})", "\n".join(rows + other))


# A follow-up is shown the newest turboinfer.follow_up_turns turns.
keep = int(c1.run("SELECT 'R|' || current_setting('turboinfer.follow_up_turns');")[0][0])


def follow(c, q, who, expected):
    """A session-local follow-up in c: its turns must be the newest `keep` of `expected`;
    returns whether it entered the conversation (answered)."""
    expected = expected[-keep:]
    r, state, other = explain(c, q)
    got = questions(r["e"].get("follow_up")) if r else None
    if r and got == expected:
        ok(f"{who}: the follow-up '{q}' is answered after {expected} (backend {r['pid']})")
    else:
        bad(f"{who}: the follow-up '{q}' followed {got}, expected {expected} ({state})",
            json.dumps(r["e"].get("follow_up")) if r else "\n".join(other))
    return bool(r and r["e"].get("valid") and r["e"].get("sql"))


if follow(c1, "by status?", "session mode, client 1", list(mine)):
    mine.append("by status?")

# A call whose answer fails while nl2sql_run executes it (row-level security of audit_log raises
# for pb_app): it enters nothing.
QF = "How many audit log entries are there?"
rows, state, other = c1.run(f"SELECT 'R|' || r::text FROM nl2sql_run({lit(QF)}, follow_up => true) r;")
if state == "P0001" and any("audit_log is sealed" in line for line in other):
    ok(f"session mode, client 1: nl2sql_run('{QF}', follow_up => true) failed while executing (P0001, audit_log is sealed)")
else:
    bad(f"session mode, client 1: nl2sql_run('{QF}') was to fail while executing, got {state}", "\n".join(rows + other))
if follow(c1, "and by customer?", "session mode, client 1, after the failed call", list(mine)):
    mine.append("and by customer?")

# A call cancelled while nl2sql_run executes its answer (shipments' policy sleeps): the superuser
# cancels it from the side channel once the backend sleeps there; it enters nothing.
QC = "How many shipments are there?"
c1.send(f"SELECT 'R|' || r::text FROM nl2sql_run({lit(QC)}, follow_up => true) r;")
waited = None
for i in range(600):  # 0.5 s apart: generation takes seconds, then the execution sleeps
    if direct(f"SELECT count(*) FROM pg_stat_activity WHERE pid = {pid1} AND wait_event = 'PgSleep'") == "1":
        waited = i / 2
        direct(f"SELECT pg_cancel_backend({pid1})")
        break
    time.sleep(0.5)
rows, state, other = c1.read()
if waited is not None and state == "57014":
    ok(f"session mode, client 1: nl2sql_run('{QC}', follow_up => true) cancelled while executing (57014, after {waited:.1f} s)")
else:
    bad(f"session mode, client 1: nl2sql_run('{QC}') was to be cancelled while executing (sleeping: {waited}), got {state}",
        "\n".join(rows + other))
if follow(c1, "sorted by amount", "session mode, client 1, after the cancelled call", list(mine)):
    mine.append("sorted by amount")
c1.close()

# The next client gets the same backend (one server connection), reset with DISCARD ALL.
c2 = Client("client2", "pb_session")
pid2 = c2.pid()
if pid2 == pid1:
    ok(f"session mode, client 2 is on client 1's backend ({pid2})")
else:
    bad(f"session mode, client 2 is on backend {pid2}, not client 1's {pid1}")
r, state, other = explain(c2, "by status?")
fu = r["e"].get("follow_up") if r else None
if r and questions(fu) == [] and fu.get("dropped"):
    ok(f"session mode, client 2: a follow-up on that backend sees no turn of client 1 (dropped: {fu.get('dropped')})")
else:
    bad(f"session mode, client 2 saw {questions(fu)} of client 1's {mine} ({state})", json.dumps(fu) if r else "\n".join(other))
c2.close()

# ---------------------------------------------------------------------------------------------
# 2. Transaction mode, one server connection for two clients, nl2sql_converse: each follow-up
#    names its conversation with the token its own client holds.
a = Client("client_a", "pb_tx")
b = Client("client_b", "pb_tx")
rows, _, _ = a.run("SELECT 'R|' || count(*) FROM pg_proc WHERE proname = 'nl2sql_converse';")
has_converse = rows == ["1"]
if not has_converse:
    bad("transaction mode: this database has no nl2sql_converse(question, previous): its checks did not run")

def transaction_mode():
    """The checks of nl2sql_converse in transaction mode (clients a and b)."""
    pids = set()

    def converse(c, q, token):
        """nl2sql_converse(q, token) in c: (the row as a dict, sqlstate, other lines)."""
        rows, state, other = c.run(
            f"SELECT 'R|' || json_build_object('pid', pg_backend_pid(), 'sql', c.sql, 'conversation', c.conversation, "
            f"'follow_up', c.follow_up)::text FROM nl2sql_converse({lit(q)}, {lit(token)}) c;")
        r = json.loads(rows[0]) if rows else None
        if r:
            pids.add(r["pid"])
        return r, state, other


    held = {"a": None, "b": None}  # the token each client holds
    asked = {"a": [], "b": []}  # the questions that entered each client's conversation
    clients = {"a": a, "b": b}
    script = [
        ("a", "How many orders are there?"), ("b", "How many customers are there?"),
        ("a", "by status?"), ("b", "in France?"),
        ("a", "only the shipped ones"), ("b", "sorted by name"),
    ]


    def turn(who, q):
        other = "b" if who == "a" else "a"
        r, state, lines = converse(clients[who], q, held[who])
        got = questions(r["follow_up"]) if r else None
        leaked = [x for x in (got or []) if x in asked[other]]
        if r and r.get("conversation") and got == asked[who] and not leaked:
            ok(f"transaction mode, client {who} (backend {r['pid']}): '{q}' answered after its own turns {got}: {r['sql']}")
            held[who] = r["conversation"]
            asked[who].append(q)
        else:
            bad(f"transaction mode, client {who}: '{q}' followed {got}, expected {asked[who]}"
                f"{' (client ' + other + ' turns: ' + str(leaked) + ')' if leaked else ''} ({state})",
                json.dumps(r) if r else "\n".join(lines))


    for who, q in script[:4]:
        turn(who, q)

    # Client a's call cancelled by statement_timeout (SET LOCAL: a transaction-mode pooler keeps
    # settings only within the transaction): no token comes back; a keeps the one it held.
    rows, state, lines = a.run(
        "BEGIN;\nSET LOCAL statement_timeout = '100ms';\n"
        f"SELECT 'R|' || c.conversation FROM nl2sql_converse('sorted by amount', {lit(held['a'])}) c;")
    a.run("ROLLBACK;")
    if state == "57014" and not rows:
        ok("transaction mode, client a: a call cancelled by statement_timeout (57014) returns no token")
    else:
        bad(f"transaction mode, client a: the call with statement_timeout = 100ms gave {state}", "\n".join(rows + lines))
    # Client b's failed calls: a token that is not one (altered), and a question that is refused.
    rows, state, lines = b.run(f"SELECT 'R|' || c.sql FROM nl2sql_converse('in Spain?', {lit((held['b'] or 'x')[:-4] + 'AAAA')}) c;")
    if state not in ("00000", None) and not state.startswith("XX") and not rows:
        ok(f"transaction mode, client b: an altered token is refused ({state}: {' '.join(lines)[:160]})")
    else:
        bad(f"transaction mode, client b: an altered token gave {state}, expected an ERROR with a SQLSTATE", "\n".join(rows + lines))
    rows, state, lines = b.run("SELECT 'R|' || c.sql FROM nl2sql_converse('Who painted the Mona Lisa?') c;")
    if state not in ("00000", None) and not rows:
        ok(f"transaction mode, client b: a refused question returns no token ({state})")
    else:
        bad(f"transaction mode, client b: 'Who painted the Mona Lisa?' gave {state}", "\n".join(rows + lines))

    for who, q in script[4:]:
        turn(who, q)
    if len(pids) == 1:
        ok(f"transaction mode: both clients' calls ran on one server connection (backend {pids.pop()})")
    else:
        bad(f"transaction mode: the calls ran on backends {sorted(pids)}, expected one (pool_size = 1)")

    # The server kept nothing of those conversations for the session-local form of that backend.
    r, state, other = explain(a, "by status?")
    fu = r["e"].get("follow_up") if r else None
    if r and questions(fu) == []:
        ok(f"transaction mode: nl2sql_converse left no turn in the backend (a session-local follow-up: dropped: {fu.get('dropped')})")
    else:
        bad(f"transaction mode: a session-local follow-up after nl2sql_converse saw {questions(fu)}", json.dumps(fu) if r else "\n".join(other))

if has_converse:
    transaction_mode()
# What the session-local form does in transaction mode (reported, not checked: docs/install.md).
a.run("SELECT 'R|' || nl2sql('How many orders are there?');")
r, state, other = explain(b, "by status?")
fu = r["e"].get("follow_up") if r else None
print(f"note transaction mode, session-local form: client b's follow-up after client a's question on the shared backend followed "
      f"{questions(fu)} (dropped: {fu.get('dropped') if fu else None})", flush=True)
a.close()
b.close()
print("clients: done", flush=True)
