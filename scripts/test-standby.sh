#!/usr/bin/env bash
# nl2sql on a hot standby (issue 16, item 1): a read-only function must assign no transaction id and
# write no WAL, so it answers on a read replica ("cannot assign TransactionIds during recovery" was
# the bug). Takes a base backup of the running test cluster (pg_basebackup -R), starts it as a
# streaming hot standby on its own port and socket directory, creates a test database with the
# extension and a small table on the primary, waits for replay, then on the standby checks:
#   - pg_is_in_recovery() and a streaming WAL receiver;
#   - nl2sql() answers a SELECT with the search path and with ARRAY['public']; the answer runs there;
#   - nl2sql_explain() works, a second call in the same backend hits the in-memory schema prefix;
#   - cache files (outside WAL): the first backend writes the prefix's file into the standby's
#     turboinfer.cache_dir, a new backend loads it (cache "file"); if that directory is the
#     primary's (same machine, absolute cache_dir), sharing it breaks nothing;
#   - no ERROR at all in those sessions (an xid assignment would be one), the standby's postmaster
#     kept its pid and its log has no "terminated by signal".
# The primary's cache files copied by the backup are removed, so the first call is a cache miss.
# The standby, its data directory and the test database are removed afterwards, also on failure.
# Needs: extension installed, cluster running, model smollm2-135m. Honors the TURBOINFER_PG* vars
# (the primary is the project's cluster of TURBOINFER_PG_MAJOR, scripts/pgmajor.sh);
# TURBOINFER_STANDBY_PORT (default 54339 for 15, 54539 for 17), TURBOINFER_STANDBY_PGDATA,
# TURBOINFER_STANDBY_PGRUN and TURBOINFER_STANDBY_PGLOG place the standby (default
# /var/lib/turboinfer/standby, run-standby, log/standby.log; with -NN for another major NN).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cluster="$here/cluster.sh"
me="test-standby.sh"
. "$here/testlib.sh" # and pgmajor.sh
pg_cluster # DATA RUN LOG PORT: the primary, the project's cluster of TURBOINFER_PG_MAJOR
SPORT=${TURBOINFER_STANDBY_PORT:-$(pg_port 54339)}
SDATA=${TURBOINFER_STANDBY_PGDATA:-/var/lib/turboinfer/standby$PG_SUFFIX}
SRUN=${TURBOINFER_STANDBY_PGRUN:-/var/lib/turboinfer/run-standby$PG_SUFFIX}
SLOG=${TURBOINFER_STANDBY_PGLOG:-$(dirname "$LOG")/standby$PG_SUFFIX.log}
DB=turboinfer_standby
MODEL=smollm2-135m
Q='how many rows are in the table?'
as_pg() { # as cluster.sh: PostgreSQL refuses to run as root
    if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"
    elif [[ $(id -un) == postgres ]]; then "$@"
    else die "run as root (or as the postgres user)"; fi
}
sb() { "$PGBIN/psql" -X -q -At -h "$SRUN" -p "$SPORT" -U postgres "$@"; }  # psql on the standby
pri() { "$cluster" psql -X -q -At "$@"; }                                  # psql on the primary
sb_pid() { as_pg head -n 1 "$SDATA/postmaster.pid" 2>/dev/null || true; }
# wait_for WHAT SECONDS CMD...: polls CMD every 0.2 s until it succeeds.
wait_for() {
    local what=$1 n=$(($2 * 5))
    shift 2
    for _ in $(seq 1 "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
    say "timed out waiting for $what"
    return 1
}

[[ -x $PGBIN/pg_basebackup ]] || die "$PGBIN/pg_basebackup missing"
[[ $SPORT =~ ^[0-9]+$ ]] || die "TURBOINFER_STANDBY_PORT must be a number, not '$SPORT'"
[[ $SPORT != "$PORT" ]] || die "TURBOINFER_STANDBY_PORT ($SPORT) is the primary's port"
[[ $(realpath -m "$SDATA") != "$(realpath -m "$DATA")" ]] || die "the standby data dir is the primary's ($DATA)"
"$PGBIN/pg_isready" -q -h "$RUN" -p "$PORT" || die "cluster not ready on $RUN port $PORT; run 'make cluster-start PG_MAJOR=$PG_MAJOR'"

# A leftover standby (or base backup) of an interrupted run is stopped and removed; a directory
# holding anything else is refused, never deleted.
remove_standby() {
    [[ -e $SDATA ]] || return 0
    if [[ -n $(ls -A "$SDATA") ]] && ! as_pg bash -c 'for f in standby.signal backup_manifest backup_label \
            backup_label.old; do [[ -f $0/$f ]] && exit 0; done; exit 1' "$SDATA"; then
        die "$SDATA is neither empty nor a base backup; not removing it (set TURBOINFER_STANDBY_PGDATA)"
    fi
    if as_pg "$PGBIN/pg_ctl" status -D "$SDATA" >/dev/null 2>&1; then
        as_pg "$PGBIN/pg_ctl" stop -D "$SDATA" -m fast -w -t 60 >/dev/null 2>&1 ||
            as_pg "$PGBIN/pg_ctl" stop -D "$SDATA" -m immediate -w -t 60 >/dev/null 2>&1 || true
    fi
    rm -rf "$SDATA"
}
shared_file=""
cleanup() {
    local rc=$?
    if [[ $rc -ne 0 || $fail -ne 0 ]] && [[ -f $SLOG ]]; then
        echo "$me: last lines of the standby's log ($SLOG):"; tail -n 15 "$SLOG" | sed 's/^/     | /'
    fi
    remove_standby 2>&1 | sed "s/^/$me: /" || true
    rmdir "$SRUN" 2>/dev/null || true
    [[ -z $shared_file ]] || rm -f "$shared_file"
    pri -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true
    exit $rc
}
remove_standby
(exec 3<>"/dev/tcp/127.0.0.1/$SPORT") 2>/dev/null && die "port $SPORT on 127.0.0.1 is busy; set TURBOINFER_STANDBY_PORT"
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The standby: a base backup with primary_conninfo and standby.signal (-R), streamed WAL (-X stream).
install -d -m 755 -o postgres -g postgres "$SRUN" "$(dirname "$SLOG")"
install -d -m 700 -o postgres -g postgres "$SDATA"
rm -f "$SLOG"
say "pg_basebackup -R of port $PORT into $SDATA"
as_pg "$PGBIN/pg_basebackup" -h "$RUN" -p "$PORT" -U postgres -D "$SDATA" -R -X stream -c fast ||
    die "pg_basebackup failed"
# The backup copied the primary's cache files (default turboinfer.cache_dir, in the data directory):
# dropped, so the standby starts without any and its first call must compute and write the prefix.
rm -rf "$SDATA/turboinfer_cache"
say "starting the standby on 127.0.0.1:$SPORT (socket $SRUN, log $SLOG)"
# As cluster.sh: the server must not inherit our open files beyond stdio (a flock, make's jobserver).
(
    for fd in $(ls /proc/$BASHPID/fd); do (( fd > 2 && fd < 255 )) && eval "exec $fd>&-" 2>/dev/null; done
    as_pg "$PGBIN/pg_ctl" start -D "$SDATA" -l "$SLOG" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $SPORT -k $SRUN -c hot_standby=on" >/dev/null
) || die "the standby failed to start; see $SLOG"
pid0=$(sb_pid)
wait_for "the standby to accept connections" 60 "$PGBIN/pg_isready" -q -h "$SRUN" -p "$SPORT" -U postgres || exit 1
wait_for "the standby to stream from the primary" 60 \
    bash -c '[[ $("$0" -X -At -h "$1" -p "$2" -U postgres -c "SELECT status FROM pg_stat_wal_receiver") == streaming ]]' \
    "$PGBIN/psql" "$SRUN" "$SPORT" || exit 1

# On the primary: the test database (created after the base backup: the standby gets it by replay).
pri -v ON_ERROR_STOP=1 >/dev/null <<SQL
SET client_min_messages = warning;
DROP DATABASE IF EXISTS $DB;
CREATE DATABASE $DB;
ALTER DATABASE $DB SET turboinfer.model = '$MODEL';
ALTER DATABASE $DB SET turboinfer.threads = 1;
\\c $DB
CREATE EXTENSION turboinfer;
CREATE TABLE public.items (id integer PRIMARY KEY, name text NOT NULL, price numeric(8,2));
COMMENT ON TABLE public.items IS 'Items for sale';
INSERT INTO public.items VALUES (1, 'pen', 1.50), (2, 'book', 12.00), (3, 'lamp', 30.00);
SQL
lsn=$(pri -c "SELECT pg_current_wal_lsn()")
replayed() { [[ $(sb -c "SELECT pg_last_wal_replay_lsn() >= '$lsn'::pg_lsn") == t ]]; }
if wait_for "replay of $lsn on the standby" 60 replayed; then
    ok "standby streams from the primary and replayed the test database (up to $lsn)"
else
    bad "standby did not replay up to $lsn"
    exit 1
fi

# explain LABEL: SQL printing nl2sql_explain's fields as lines LABEL.KEY=VALUE (one line each).
explain() {
    echo "SELECT '$1.' || k || '=' || replace(v, E'\n', ' ')
          FROM (SELECT nl2sql_explain('$Q') e) s,
               LATERAL (SELECT key, value FROM jsonb_each_text(e)
                        UNION ALL SELECT 'cache_file_ms',
                               round((e #>> '{timings_ms,cache_file}')::numeric, 1)::text) t(k, v);"
}
field() { sed -n "s/^${1//./\\.}=//p" <<<"$2" | head -n 1; }  # field NAME OUTPUT: the line NAME=...
# psql's error lines and the DETAIL/HINT that follow them (a NOTICE's HINT, such as the verdict's
# on an unsure answer, is not an error).
errors() { grep -E -A3 '^(psql:[^ ]*: )?(ERROR|FATAL|PANIC):' <<<"$1"; }
is_select() { grep -Eiq '^[[:space:]]*(\(?[[:space:]]*select|with)[[:space:]]' <<<"$1"; }
resolve() { # resolve DATADIR SETTING: the directory a turboinfer.cache_dir setting names
    case $2 in "") echo "$1/turboinfer_cache" ;; /*) echo "$2" ;; *) echo "$1/$2" ;; esac
}

# Session 1 on the standby: recovery, explain (computes the prefix, writes its file), explain again
# (memory hit), nl2sql with the search path and with ARRAY['public'].
out1=$(sb -d "$DB" 2>&1 <<SQL || true
SELECT 'recovery=' || pg_is_in_recovery();
$(explain e1)
$(explain e2)
SELECT 'plain=' || replace(nl2sql('$Q'), E'\n', ' ');
SELECT 'public=' || replace(nl2sql('$Q', ARRAY['public']), E'\n', ' ');
SELECT 'cache_dir=' || current_setting('turboinfer.cache_dir');
SQL
)
# Cache files live outside WAL: the standby's backends write them into the standby's own cache dir,
# or into the primary's when an absolute turboinfer.cache_dir makes them one directory.
sdir=$(resolve "$SDATA" "$(field cache_dir "$out1")")
pset=$(pri -d "$DB" -c "LOAD 'turboinfer'" -c "SHOW turboinfer.cache_dir" 2>/dev/null) || pset=""
pdir=$(resolve "$DATA" "$pset")
shared=false
[[ $(realpath -m "$sdir") != "$(realpath -m "$pdir")" ]] || shared=true

if errors "$out1" >/dev/null; then bad "standby session 1 raised errors:" "$(errors "$out1")"; fi
[[ $(field recovery "$out1") == true ]] && ok "standby: pg_is_in_recovery() is true" ||
    bad "standby: pg_is_in_recovery() is not true" "$(errors "$out1" || head -n 5 <<<"$out1")"
for v in plain public; do
    sql=$(field $v "$out1")
    what="nl2sql('$Q'$([[ $v == public ]] && echo ", ARRAY['public']" || true))"
    if is_select "$sql"; then ok "standby: $what = $sql"
    else bad "standby: $what did not answer a SELECT" "${sql:-$(errors "$out1" || head -n 5 <<<"$out1")}"; fi
done
fp=$(field e1.fingerprint "$out1")
c1=$(field e1.cache "$out1")
c2=$(field e2.cache "$out1")
if is_select "$(field e1.sql "$out1")" && [[ $(field e1.valid "$out1") == true && -n $fp ]]; then
    ok "standby: nl2sql_explain works (cache $c1, prefill $(field e1.prefill_tokens "$out1") tokens, fingerprint ${fp:0:12}...)"
else
    bad "standby: nl2sql_explain did not answer a valid SELECT" "$(errors "$out1" || grep '^e1\.' <<<"$out1" | head -n 20)"
fi
# A shared directory may hold the file of an earlier run that could not clean up: then "file".
if [[ ($c1 == miss || ($shared == true && $c1 == file)) && $c2 == hit && $(field e2.fingerprint "$out1") == "$fp" ]]; then
    ok "standby: the second call reuses the schema prefix from memory (cache $c1, then $c2)"
else
    bad "standby: expected cache miss then hit, got '$c1' then '$c2'"
fi
file=$(ls "$sdir/$fp".*.tikv 2>/dev/null | head -n 1) || file=""
if [[ -z $fp ]]; then
    bad "standby cache file: no fingerprint to look for"
elif [[ -z $file ]]; then
    bad "standby cache file: no $fp.*.tikv in $sdir" "$(ls -la "$sdir" 2>&1)"
elif [[ $shared == true ]]; then
    shared_file=$file
    ok "standby cache file: written into the cache dir it shares with the primary ($file)"
else
    ok "standby cache file: written into its own cache dir ($file)"
    [[ ! -e $pdir/$(basename "$file") ]] && ok "primary cache dir untouched: no $(basename "$file") in $pdir" ||
        bad "the standby's prefix file also appeared in the primary's cache dir $pdir"
fi

# Session 2 (a new backend): the prefix comes from the file; the answer runs on the standby.
out2=$(sb -d "$DB" 2>&1 <<SQL || true
$(explain e3)
SELECT 'sql=' || replace(nl2sql('$Q', ARRAY['public']), E'\n', ' ');
SQL
)
if errors "$out2" >/dev/null; then bad "standby session 2 raised errors:" "$(errors "$out2")"; fi
c3=$(field e3.cache "$out2")
if [[ $c3 == file && $(field e3.fingerprint "$out2") == "$fp" ]]; then
    ok "standby: a new backend loads the schema prefix from the cache file (cache file, $(field e3.cache_file_ms "$out2") ms)"
else
    bad "standby: a new backend got cache '$c3', expected 'file'" "$(errors "$out2" || grep '^e3\.' <<<"$out2" | head -n 20)"
fi
sql=$(field sql "$out2")
if is_select "$sql"; then
    res=$(sb -d "$DB" -v ON_ERROR_STOP=1 -c "$sql" 2>&1) &&
        ok "standby: the answer runs on the standby: $sql -> $(tr '\n' ' ' <<<"$res")" ||
        bad "standby: the answer failed on the standby" "$res"
else
    bad "standby: nl2sql in a new backend did not answer a SELECT" "${sql:-$(errors "$out2" || head -n 5 <<<"$out2")}"
fi

# The standby survived: same postmaster, no backend killed by a signal.
pid1=$(sb_pid)
[[ -n $pid0 && $pid1 == "$pid0" ]] && ok "standby postmaster still pid $pid0" ||
    bad "standby postmaster pid changed ('$pid0' -> '$pid1')"
if grep -q 'terminated by signal' "$SLOG"; then
    bad "standby log has 'terminated by signal'" "$(grep 'terminated by signal' "$SLOG")"
else
    ok "standby log: no process terminated by signal"
fi

echo "standby tests: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
