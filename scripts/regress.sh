#!/usr/bin/env bash
# Runs the SQL regression tests with PostgreSQL's own pg_regress against TurboInfer's cluster of
# TURBOINFER_PG_MAJOR (default 15; scripts/pgmajor.sh).
#
#   scripts/regress.sh TEST...      (tests are tests/pg_regress/sql/TEST.sql + expected/TEST.out)
#
# Needs: the extension installed (make install) and the cluster running (scripts/cluster.sh start).
# pg_regress creates the database turboinfer_regress afresh. The inputs are copied to a directory
# the postgres OS user can read (the clone may live under /root) and the results go to
# /var/lib/turboinfer/regress/out (regress-NN/out for another major NN). Where a major prints
# differently, expected/TEST_1.out is its alternative (pg_regress takes whichever matches).
# Prints the diffs on failure and ends with "N passed, N failed".
set -euo pipefail

me="regress.sh"
. "$(dirname "${BASH_SOURCE[0]}")/pgmajor.sh"
pg_cluster # DATA RUN LOG PORT: the project's cluster of TURBOINFER_PG_MAJOR
# pg_regress of the same major (PGXS's copy, under pkglibdir: Debian's postgresql-server-dev-NN).
PG_REGRESS=${PG_REGRESS:-$PGBIN/../lib/pgxs/src/test/regress/pg_regress}
WORK=${TURBOINFER_REGRESS_DIR:-/var/lib/turboinfer/regress$PG_SUFFIX}

die() { echo "$me: error: $*" >&2; exit 1; }

[[ $# -gt 0 ]] || die "usage: $0 TEST..."
[[ -x $PG_REGRESS ]] || die "pg_regress of PostgreSQL $PG_MAJOR not found at $PG_REGRESS (Debian: postgresql-server-dev-$PG_MAJOR); run 'make setup-pg PG_MAJOR=$PG_MAJOR'"
"$PGBIN/pg_isready" -q -h "$RUN" -p "$PORT" || die "cluster not ready on $RUN port $PORT; run 'make cluster-start PG_MAJOR=$PG_MAJOR'"

src=$(cd "$(dirname "$0")/../tests/pg_regress" && pwd)
for t in "$@"; do
    [[ -f $src/sql/$t.sql ]] || die "no test $t: $src/sql/$t.sql is missing"
    [[ -f $src/expected/$t.out ]] || die "no expected output for $t: $src/expected/$t.out is missing"
done

# Fresh, postgres-readable copy of the inputs; a postgres-writable output dir.
rm -rf "$WORK"
install -d -m 755 "$WORK" "$WORK/in"
cp -r "$src/sql" "$src/expected" "$WORK/in/"
# Shared SQL fixtures, included by suites as \i :abs_srcdir/fixtures/NAME.sql (pg_regress sets
# PG_ABS_SRCDIR to the input directory).
install -d -m 755 "$WORK/in/fixtures"
cp "$src/../fixtures/"*.sql "$WORK/in/fixtures/"
# PostgreSQL 14's pg_regress sets no PG_ABS_SRCDIR and its psql has no \getenv (both came in 15):
# there the suites' one line that finds the fixtures becomes a \set of the same directory, in the
# copies of sql/ and expected/ alike (psql echoes it), so that the expected files stay the same.
if ((PG_MAJOR < 15)); then
    sed -i "s|^\\\\getenv abs_srcdir PG_ABS_SRCDIR\$|\\\\set abs_srcdir '$WORK/in'|" "$WORK/in/sql/"*.sql "$WORK/in/expected/"*.out
fi
chmod -R a+rX "$WORK/in"
install -d -m 755 -o postgres -g postgres "$WORK/out" 2>/dev/null || install -d -m 755 "$WORK/out"

# Roles are the cluster's, not the database's: a run stopped mid-suite (Ctrl-C, a killed job)
# leaves the roles its suite created, and the next run's CREATE ROLE fails. pg_regress recreates
# only the database; drop it here first (it holds everything those roles may own), then every role
# the suites about to run create.
roles=$(for t in "$@"; do sed -nE 's/^CREATE ROLE ([a-z_][a-z0-9_]*).*/\1/p' "$src/sql/$t.sql"; done | sort -u)
if [[ -n $roles ]]; then
    {
        echo "SET client_min_messages = warning;"
        echo "DROP DATABASE IF EXISTS turboinfer_regress;"
        for r in $roles; do echo "DROP ROLE IF EXISTS $r;"; done
    } | "$PGBIN/psql" -X -q -h "$RUN" -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 \
        || die "could not drop the roles a previous run left ($(echo $roles)); drop them by hand"
fi

# A backend that crashes makes the postmaster restart every session (and pg_regress may still
# pass the suites that ran before): the run fails if the postmaster's pid changed or its log
# reports a process terminated by a signal.
pm_before=$(head -n 1 "$DATA/postmaster.pid" 2>/dev/null || true)
log_from=$(($(stat -c %s "$LOG" 2>/dev/null || echo 0) + 1))

# The background preparation (turboinfer.background_prepare) would start a worker after every
# suite's CREATE EXTENSION and DDL, loading the server's default model and computing prefixes
# beside the suites (their timings and their cache files): scripts/cluster.sh starts the server
# with it off, and the suite that tests it (nl2sql_prepare) turns it on for its database. (Not
# through PGOPTIONS: a superuser-only setting there warns in every non-superuser session.)

rc=0
"$PG_REGRESS" --host="$RUN" --port="$PORT" --user=postgres --bindir="$PGBIN" \
    --inputdir="$WORK/in" --outputdir="$WORK/out" --dbname=turboinfer_regress "$@" \
    2>&1 | tee "$WORK/out/pg_regress.log" || rc=$?

# pg_regress up to 15 prints "test NAME ... ok"/"... FAILED", from 16 on TAP lines ("ok 3 - NAME",
# "not ok 3 - NAME").
passed=$(grep -Ec '\.\.\. +ok|^ok +[0-9]+ ' "$WORK/out/pg_regress.log" || true)
failed=$(grep -Ec '\.\.\. +FAILED|^not ok +[0-9]+ ' "$WORK/out/pg_regress.log" || true)
if [[ $rc -ne 0 || $failed -ne 0 ]]; then
    if [[ -s $WORK/out/regression.diffs ]]; then
        echo "---------------- regression.diffs ($WORK/out/regression.diffs) ----------------"
        cat "$WORK/out/regression.diffs"
    fi
    [[ $failed -ne 0 ]] || failed=$(($# - passed))
fi
echo "pg_regress: $passed passed, $failed failed"
pm_after=$(head -n 1 "$DATA/postmaster.pid" 2>/dev/null || true)
if [[ -n $pm_before && $pm_after != "$pm_before" ]]; then
    echo "$me: the postmaster's pid changed during the run ($pm_before -> ${pm_after:-none}): the server restarted"; rc=1
fi
if [[ -f $LOG ]] && grep -q "terminated by signal" <<<"$(tail -c +"$log_from" "$LOG")"; then
    echo "$me: the server log reports a process terminated by a signal:"; tail -c +"$log_from" "$LOG" | grep "terminated by signal"; rc=1
fi
[[ $rc -eq 0 && $failed -eq 0 ]]
