#!/usr/bin/env bash
# TurboInfer's own PostgreSQL cluster for the demo and the tests, one per major version.
#
#   scripts/cluster.sh start|stop|status|psql [psql args...]
#
# The major: $TURBOINFER_PG_MAJOR (default 15; scripts/pgmajor.sh), its binaries in
# /usr/lib/postgresql/MAJOR/bin. 15's cluster: data /var/lib/turboinfer/cluster, socket directory
# /var/lib/turboinfer/run, log /var/lib/turboinfer/log/postgresql.log, port 54329; another major
# NN's: cluster-NN, run-NN, log/postgresql-NN.log, port 54300 + NN (54317 for 17), so both can run
# at once. TURBOINFER_PGDATA, TURBOINFER_PGRUN, TURBOINFER_PGLOG, TURBOINFER_PGPORT and
# TURBOINFER_PGBIN override each.
# The server runs as the `postgres` OS user (PostgreSQL refuses to run as root); when invoked as
# root this script switches with `runuser`. It listens on 127.0.0.1 only, on a port away from the
# usual 5432.
# Authentication is `trust` for local connections only: it is a development/test cluster.
# start and stop are idempotent; start waits until the server accepts connections.
# TURBOINFER_PG_ULIMIT_V (optional, KiB, as `ulimit -v`): start the server with that address-space
# limit (RLIMIT_AS, inherited by every backend); scripts/test-memory-limit.sh uses it.
# TURBOINFER_BACKGROUND_PREPARE (default off): turboinfer.background_prepare for this cluster. Off
# here because the tests and benches create the extension and tables in many databases, and each
# change would start a background worker prefilling with the default model beside what they
# measure; the nl2sql_prepare suite turns it on for its database. A DBA's server has it on.
set -euo pipefail

BASE=/var/lib/turboinfer
ULIMIT_V=${TURBOINFER_PG_ULIMIT_V:-}
PREPARE=${TURBOINFER_BACKGROUND_PREPARE:-off}
me="cluster.sh"
. "$(dirname "${BASH_SOURCE[0]}")/pgmajor.sh"
pg_cluster # DATA RUN LOG PORT

die() { echo "$me: error: $*" >&2; exit 1; }
say() { echo "$me: $*" >&2; }

# as_pg CMD...: runs CMD as the postgres OS user (directly if we already are postgres).
as_pg() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    elif [[ $(id -un) == postgres ]]; then
        "$@"
    else
        die "run as root (or as the postgres user)"
    fi
}

[[ -x $PGBIN/pg_ctl ]] || die "PostgreSQL $PG_MAJOR is not installed ($PGBIN/pg_ctl missing); run 'make setup-pg PG_MAJOR=$PG_MAJOR'"
id postgres >/dev/null 2>&1 || die "the 'postgres' OS user does not exist; run 'make setup'"
[[ $PORT =~ ^[0-9]+$ ]] || die "TURBOINFER_PGPORT must be a number, not '$PORT'"
[[ -z $ULIMIT_V || $ULIMIT_V =~ ^[0-9]+$ ]] || die "TURBOINFER_PG_ULIMIT_V must be a number of KiB, not '$ULIMIT_V'"

# running: true when our cluster's postmaster is alive.
running() {
    [[ -f $DATA/PG_VERSION ]] && as_pg "$PGBIN/pg_ctl" status -D "$DATA" >/dev/null 2>&1
}

# running_port: the port our running cluster listens on (line 4 of postmaster.pid).
running_port() {
    as_pg sed -n 4p "$DATA/postmaster.pid" 2>/dev/null || true
}

# port_busy: true when something accepts TCP connections on 127.0.0.1:$PORT.
port_busy() {
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null
}

init_cluster() {
    install -d -m 755 "$BASE"
    # A data directory of another major (TURBOINFER_PGDATA pointing at the wrong one) would fail
    # in pg_ctl with a less direct message.
    local v
    v=$(cat "$DATA/PG_VERSION" 2>/dev/null || true)
    [[ -z $v || $v == "$PG_MAJOR" ]] || die "$DATA holds a PostgreSQL $v cluster, not $PG_MAJOR (TURBOINFER_PG_MAJOR); set TURBOINFER_PGDATA"
    install -d -m 700 -o postgres -g postgres "$DATA"
    if [[ ! -f $DATA/PG_VERSION ]]; then
        say "initdb $DATA"
        # C locale: deterministic sort order for the regression tests; UTF8 for text.
        as_pg "$PGBIN/initdb" -D "$DATA" -U postgres --auth=trust --encoding=UTF8 --locale=C \
            >"$BASE/initdb$PG_SUFFIX.log" 2>&1 || die "initdb failed; see $BASE/initdb$PG_SUFFIX.log"
    fi
}

start() {
    if running; then
        local p
        p=$(running_port)
        [[ $p == "$PORT" ]] || die "cluster already running on port $p, not $PORT; stop it first"
        say "already running (port $PORT, socket $RUN)"
        return 0
    fi
    port_busy && die "port $PORT on 127.0.0.1 is busy (another server listens there); set TURBOINFER_PGPORT"
    init_cluster
    install -d -m 755 -o postgres -g postgres "$RUN"
    install -d -m 755 -o postgres -g postgres "$(dirname "$LOG")"
    say "starting PostgreSQL $PG_MAJOR on 127.0.0.1:$PORT (data $DATA, log $LOG)${ULIMIT_V:+, address space limited to $ULIMIT_V KiB}"
    # The server must not inherit our open files beyond stdio: started inside
    # `flock /tmp/turboinfer-pg.lock ...`, it would otherwise hold the lock for as long as it runs.
    local fd
    for fd in $(ls /proc/$$/fd); do
        (( fd > 2 && fd < 255 )) && eval "exec $fd>&-" 2>/dev/null
    done
    # With TURBOINFER_PG_ULIMIT_V, the limit is set in a shell of the postgres user right before
    # pg_ctl, so that it is what the postmaster (and every backend) inherits.
    local limit=()
    [[ -n $ULIMIT_V ]] && limit=(bash -c 'ulimit -v "$0" && exec "$@"' "$ULIMIT_V")
    if ! as_pg "${limit[@]}" "$PGBIN/pg_ctl" start -D "$DATA" -l "$LOG" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $PORT -k $RUN -c turboinfer.background_prepare=$PREPARE" >/dev/null; then
        tail -n 5 "$LOG" >&2 || true
        die "PostgreSQL failed to start; see $LOG"
    fi
    # pg_ctl -w returns once the server accepts connections; double-check through the socket.
    for _ in $(seq 1 50); do
        "$PGBIN/pg_isready" -q -h "$RUN" -p "$PORT" && { say "ready"; return 0; }
        sleep 0.2
    done
    die "PostgreSQL started but is not accepting connections on $RUN port $PORT; see $LOG"
}

stop() {
    if ! running; then
        say "not running"
        return 0
    fi
    as_pg "$PGBIN/pg_ctl" stop -D "$DATA" -m fast -w -t 60 >/dev/null || die "pg_ctl stop failed; see $LOG"
    say "stopped"
}

status() {
    if running; then
        echo "running: port $(running_port), socket $RUN, data $DATA (PostgreSQL $PG_MAJOR)"
    else
        echo "not running (PostgreSQL $PG_MAJOR, data $DATA, port $PORT)"
        return 3
    fi
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    psql)
        shift
        running || die "the cluster of PostgreSQL $PG_MAJOR is not running; run 'make cluster-start PG_MAJOR=$PG_MAJOR'"
        exec "$PGBIN/psql" -h "$RUN" -p "$PORT" -U postgres "$@"
        ;;
    *) echo "usage: $0 start|stop|status|psql [psql args...]" >&2; exit 2 ;;
esac
