#!/usr/bin/env bash
# Conversations behind a real PgBouncer (issue 80): Debian's pgbouncer (1.18 on Debian 12,
# installed here with apt-get when missing) in front of a private cluster, two psql clients of
# the same role driven by scripts/pgbouncer-clients.py:
#   1. session mode, PgBouncer's default server_reset_query (DISCARD ALL), one server connection:
#      a client's follow-ups (nl2sql_explain(q, follow_up => true)) are answered after its own
#      turns; a call that fails while nl2sql_run executes it, and one cancelled there (psql's
#      cancel request, through PgBouncer), enter nothing; the next client, on the same backend
#      (same pg_backend_pid()), sees no turn of the first;
#   2. transaction mode, default_pool_size = 1 (two clients, one server connection): the two
#      clients interleave conversations with nl2sql_converse(question, previous), each follow-up
#      answered from its own client's turns only (follow_up.turns), none from the other's; a
#      cancelled (statement_timeout) or failed (invalid token) call returns no token and enters
#      nothing; the server keeps no turn of them for the session-local form.
# PgBouncer runs as the postgres OS user on 127.0.0.1:$TURBOINFER_PGBOUNCER_PORT (default 54347)
# with its own ini, userlist (SCRAM) and log in a temporary directory; the cluster (port
# TURBOINFER_PGBOUNCERTEST_PORT, default 54346; +100 per major above 15) listens on its socket
# only. Both are stopped and removed afterwards, also on failure.
# Needs: the extension installed into the PostgreSQL of TURBOINFER_PG_MAJOR (default 15) with
# nl2sql_converse (0.4.0), model $TURBOINFER_PGBOUNCER_MODEL (default qwen2.5-coder-1.5b). About
# a minute and a half on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
me="test-pgbouncer.sh"
. "$here/testlib.sh" # and pgmajor.sh: PGBIN of TURBOINFER_PG_MAJOR
PORT=${TURBOINFER_PGBOUNCERTEST_PORT:-$(pg_port 54346)}
BPORT=${TURBOINFER_PGBOUNCER_PORT:-$(pg_port 54347)}
MODEL=${TURBOINFER_PGBOUNCER_MODEL:-qwen2.5-coder-1.5b}
DB=pbtest
[[ $BPORT =~ ^[0-9]+$ && $BPORT != "$PORT" ]] || die "TURBOINFER_PGBOUNCER_PORT must be a number other than the cluster's port"
[[ $(id -u) -eq 0 ]] || die "run as root (installs pgbouncer, runs it and the cluster as postgres)"

# PgBouncer from Debian (scripts/setup.sh installs it too); the package's own service is not
# started (policy-rc.d) nor used: this test runs its own instance.
if ! command -v pgbouncer >/dev/null 2>&1; then
    say "apt-get install pgbouncer"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends pgbouncer >/tmp/turboinfer-pgbouncer-apt.log 2>&1 || {
        apt-get update -q >>/tmp/turboinfer-pgbouncer-apt.log 2>&1 || true
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends pgbouncer >>/tmp/turboinfer-pgbouncer-apt.log 2>&1 ||
            die "apt-get install pgbouncer failed (see /tmp/turboinfer-pgbouncer-apt.log)"
    }
fi
(exec 3<>"/dev/tcp/127.0.0.1/$BPORT") 2>/dev/null && die "port $BPORT on 127.0.0.1 is busy; set TURBOINFER_PGBOUNCER_PORT"

pc_temp pgbouncer "$MODEL" # the private cluster (testlib.sh): $work, removed at exit
bdir=$work/pgbouncer
bpid=""
cleanup() {
    local rc=$?
    if [[ -n $bpid ]] && kill -0 "$bpid" 2>/dev/null; then
        kill -TERM "$bpid" 2>/dev/null || true # SIGTERM: PgBouncer's immediate shutdown
        for _ in $(seq 1 50); do kill -0 "$bpid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$bpid" 2>/dev/null || true
    fi
    if [[ $rc -ne 0 || $fail -ne 0 ]]; then
        [[ -f $bdir/pgbouncer.log ]] && { echo "$me: last lines of PgBouncer's log:"; tail -n 15 "$bdir/pgbouncer.log" | sed 's/^/     | /'; }
        [[ -f ${pc_log:-/nonexistent} ]] && { echo "$me: last lines of the cluster's log:"; tail -n 15 "$pc_log" | sed 's/^/     | /'; }
    fi
    pc_stop
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

pc_init
pc_start
pm_pid=$(head -n 1 "$pc_data/postmaster.pid")
say "private cluster on port $PORT (socket $pc_run), $MODEL"

# The database: two tables a conversation is about, and two whose row-level security makes the
# execution of any query over them fail (audit_log) or wait (shipments) for the client's role, so
# that nl2sql_run accepts an answer and then fails or is cancelled while executing it.
pc_psql >/dev/null <<SQL
SET client_min_messages = warning;
CREATE ROLE pb_app LOGIN;
CREATE ROLE pb_admin LOGIN SUPERUSER;
CREATE DATABASE $DB;
ALTER DATABASE $DB SET turboinfer.model = '$MODEL';
\\c $DB
CREATE EXTENSION turboinfer;
CREATE TABLE customers (id integer PRIMARY KEY, name text NOT NULL, country text);
CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer REFERENCES customers,
                     amount numeric(10,2), status text, ordered_at date);
CREATE TABLE audit_log (id integer PRIMARY KEY, note text);
CREATE TABLE shipments (id integer PRIMARY KEY, carrier text);
INSERT INTO customers VALUES (1, 'Ann', 'France'), (2, 'Bob', 'Spain'), (3, 'Cy', 'France');
INSERT INTO orders VALUES (1, 1, 10.00, 'shipped', '2024-01-03'), (2, 1, 25.50, 'pending', '2024-02-11'),
                          (3, 2, 7.25, 'shipped', '2024-02-20'), (4, 3, 40.00, 'cancelled', '2024-03-01');
INSERT INTO audit_log VALUES (1, 'created');
INSERT INTO shipments VALUES (1, 'post');
CREATE FUNCTION audit_sealed() RETURNS boolean LANGUAGE plpgsql VOLATILE AS
  \$\$BEGIN RAISE EXCEPTION 'audit_log is sealed' USING ERRCODE = 'P0001'; END\$\$;
CREATE FUNCTION shipments_slow() RETURNS boolean LANGUAGE sql VOLATILE AS
  \$\$SELECT pg_catalog.pg_sleep(120) IS NOT NULL\$\$;
ALTER TABLE audit_log ENABLE ROW LEVEL SECURITY;
ALTER TABLE shipments ENABLE ROW LEVEL SECURITY;
CREATE POLICY sealed ON audit_log USING (audit_sealed());
CREATE POLICY slow ON shipments USING (shipments_slow());
GRANT SELECT ON customers, orders, audit_log, shipments TO pb_app;
ANALYZE;
SQL

# PgBouncer: one instance, two pools of the same database and role, each one server connection:
# pb_session in session mode (server_reset_query left at its default, DISCARD ALL), pb_tx in
# transaction mode. SCRAM for the clients (passwords in the userlist), trust to the server's socket.
install -d -m 700 -o postgres -g postgres "$bdir"
cat >"$bdir/pgbouncer.ini" <<EOF
[databases]
pb_session = host=$pc_run port=$PORT dbname=$DB pool_mode=session pool_size=1
pb_tx = host=$pc_run port=$PORT dbname=$DB pool_mode=transaction pool_size=1

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $BPORT
unix_socket_dir =
auth_type = scram-sha-256
auth_file = $bdir/userlist.txt
admin_users = pb_admin
default_pool_size = 1
max_client_conn = 20
logfile = $bdir/pgbouncer.log
pidfile = $bdir/pgbouncer.pid
EOF
cat >"$bdir/userlist.txt" <<EOF
"pb_app" "app-secret"
"pb_admin" "admin-secret"
EOF
chown postgres:postgres "$bdir/pgbouncer.ini" "$bdir/userlist.txt"
chmod 600 "$bdir/userlist.txt"
runuser -u postgres -- pgbouncer -d "$bdir/pgbouncer.ini" >"$bdir/start.out" 2>&1 ||
    die "pgbouncer failed to start: $(cat "$bdir/start.out") $(tail -n 5 "$bdir/pgbouncer.log" 2>/dev/null)"
for _ in $(seq 1 50); do [[ -s $bdir/pgbouncer.pid ]] && break; sleep 0.1; done
bpid=$(cat "$bdir/pgbouncer.pid" 2>/dev/null || true)
[[ -n $bpid ]] || die "pgbouncer wrote no pid file"
for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$BPORT") 2>/dev/null && break; sleep 0.1; done
say "$(pgbouncer --version | head -n 1) on 127.0.0.1:$BPORT (pid $bpid, $bdir)"

# The session pool's reset is PgBouncer's default (nothing set in the ini).
reset=$(PGPASSWORD=admin-secret "$PGBIN/psql" -X -At -h 127.0.0.1 -p "$BPORT" -U pb_admin -d pgbouncer \
    -c "SHOW CONFIG" 2>&1 | awk -F'|' '$1 == "server_reset_query" { print $2 }') || true
[[ $reset == "DISCARD ALL" ]] && ok "PgBouncer's server_reset_query is its default: $reset" ||
    bad "PgBouncer's server_reset_query: '$reset', expected the default DISCARD ALL"

# The clients (Python 3, standard library, two psql processes): ok/FAIL lines, counted here.
export PSQL=$PGBIN/psql BPORT PGHOST_DIRECT=$pc_run PGPORT_DIRECT=$PORT DB
out=$(python3 "$here/pgbouncer-clients.py" 2>&1) || true
echo "$out"
pass=$((pass + $(grep -c '^ok ' <<<"$out" || true)))
fail=$((fail + $(grep -c '^FAIL ' <<<"$out" || true)))
grep -q '^clients: done$' <<<"$out" || bad "the clients' script did not finish"

# PgBouncer kept one server connection per pool, and nothing crashed.
pools=$(PGPASSWORD=admin-secret "$PGBIN/psql" -X -At -h 127.0.0.1 -p "$BPORT" -U pb_admin -d pgbouncer \
    -c "SHOW SERVERS" 2>&1 | awk -F'|' '$2 == "pb_app" { print $3 }' | sort | uniq -c | awk '{ printf "%s:%s ", $2, $1 }') || true
if [[ $pools == "pb_session:1 pb_tx:1 " || $pools == "pb_tx:1 " || $pools == "pb_session:1 " ]]; then
    ok "PgBouncer's server connections of pb_app at the end: ${pools:-none} (one per pool at most)"
else
    bad "PgBouncer's server connections of pb_app: '$pools'"
fi
pc_no_crash "$pm_pid"
