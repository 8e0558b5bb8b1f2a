# Shared by the script tests (sourced, after setting `me` to the script's name): counters and
# the messages every test prints. `ok`/`bad` count checks; the script ends with its own summary.
# The PostgreSQL major under test (TURBOINFER_PG_MAJOR): PG_MAJOR, PGBIN, pg_cluster, pg_port.
. "$(dirname "${BASH_SOURCE[0]}")/pgmajor.sh"
pass=0
fail=0

die() { echo "$me: error: $*" >&2; exit 1; }
say() { echo "$me: $*" >&2; }
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { # bad MESSAGE [OUTPUT]
    echo "FAIL $1"
    [[ -z ${2:-} ]] || sed -n '1,20s/^/     | /p' <<<"$2"
    fail=$((fail + 1))
}

# A private throw-away cluster (test-install, test-package): set pc_bin (the bin directory of the
# PostgreSQL to use), pc_dir (an empty work directory, 0755) and pc_port, then `pc_init`,
# `pc_start`, `pc_stop` (a no-op when not running: safe in an EXIT trap), `pc_psql ARGS...`.
# Socket only (listen_addresses=''), trust authentication, as the postgres OS user.
pc_started=0
as_pg() { runuser -u postgres -- "$@"; }
pc_init() {
    pc_data=$pc_dir/data pc_run=$pc_dir/run pc_log=$pc_dir/log/postgresql.log
    mkdir -p "$pc_run" "$pc_dir/log"
    chown postgres:postgres "$pc_run" "$pc_dir/log"
    install -d -m 700 -o postgres -g postgres "$pc_data"
    say "private cluster: $("$pc_bin/postgres" --version) ($pc_bin), port $pc_port, in $pc_dir"
    as_pg "$pc_bin/initdb" -D "$pc_data" -U postgres --auth=trust --encoding=UTF8 --locale=C \
        >"$pc_dir/initdb.log" 2>&1 || { cat "$pc_dir/initdb.log" >&2; die "initdb with $pc_bin failed"; }
}
pc_start() {
    as_pg "$pc_bin/pg_ctl" start -D "$pc_data" -l "$pc_log" -w -t 60 \
        -o "-c listen_addresses='' -p $pc_port -k $pc_run" >/dev/null ||
        { tail -n 5 "$pc_log" >&2 || true; die "the test cluster failed to start; see $pc_log"; }
    pc_started=1
}
pc_stop() {
    [[ $pc_started -eq 1 ]] || return 0
    as_pg "$pc_bin/pg_ctl" stop -D "$pc_data" -m fast -w -t 60 >/dev/null || true
    pc_started=0
}
# pc_psql [psql args...]: psql on the test cluster as postgres (tuples only, unaligned).
pc_psql() { "$pc_bin/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$pc_run" -p "$pc_port" -U postgres "$@"; }
# pc_temp NAME MODEL: checks for PostgreSQL at $PGBIN and the installed MODEL, makes the work
# directory $work (0755; the cluster is stopped and $work removed at exit) and points pc_bin,
# pc_dir and pc_port ($PORT) at it. Then `pc_init`.
pc_temp() {
    [[ -x $PGBIN/initdb ]] || die "no PostgreSQL at $PGBIN"
    [[ -f /var/lib/turboinfer/models/$2.gguf ]] || die "model $2 is not installed (make fetch-model MODEL=$2)"
    work=$(mktemp -d "/tmp/turboinfer-$1.XXXXXX")
    chmod 755 "$work"
    pc_bin=$PGBIN pc_dir=$work pc_port=$PORT
    trap 'pc_stop; rm -rf "$work"' EXIT
}
# pc_set NAME VALUE: NAME = VALUE in postgresql.conf (replacing an earlier line), the cluster
# (re)started.
pc_set() {
    pc_stop
    sed -i "/^$1 = /d" "$pc_data/postgresql.conf"
    echo "$1 = $2" >>"$pc_data/postgresql.conf"
    pc_start
}
# pc_no_crash PM_PID: a check that the postmaster is still PM_PID (no crash restart) and that no
# process was terminated by a signal; then the script's summary line and exit status.
pc_no_crash() {
    if [[ $(head -n 1 "$pc_data/postmaster.pid") == "$1" ]] && ! grep -q 'terminated by signal' "$pc_log"; then
        ok "no backend crashed (postmaster $1)"
    else
        bad "the postmaster restarted or a process was terminated by a signal" "$(grep -E 'terminated|PANIC|FATAL' "$pc_log" || true)"
    fi
    echo "$me: $pass passed, $fail failed"
    [[ $fail -eq 0 ]]
}
