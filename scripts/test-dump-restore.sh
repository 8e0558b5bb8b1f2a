#!/usr/bin/env bash
# pg_dump/pg_restore of a database with TurboInfer and approved examples (issue 80): the demo shop
# with examples that different roles see differently (the extension's row-level security, a
# dropped table, a restrictive policy of the DBA's own: scripts/dbalib.sh) in a private
# PostgreSQL 15 cluster, dumped (-Fc) and restored as docs/install.md, "Moving a database
# (pg_dump/pg_restore)", says:
#   A. with 15's pg_dump into a new database of the same cluster (pg_restore -d);
#   B. with 17's pg_dump (the newer major's client reads the older server) into a private
#      PostgreSQL 17 cluster, the roles first (pg_dumpall --roles-only), the database created by
#      pg_restore -C with its settings;
# with the DBA's own policies on nl2sql_examples saved before pg_dump and re-created after
# pg_restore (pg_dump dumps an extension table's rows and privileges, not its policies: a note says
# how many were there before that step), and after each, the documented `vacuumdb --analyze-only`
# (a dump holds no planner statistics before 18, and nl2sql's prompt shows their values):
#   - pg_restore exits 0 and writes nothing to stderr (no error, no warning);
#   - the same examples (every row, relations by name), policies (the extension's and the DBA's),
#     privileges, row security, dumped tables and identity sequence (a new example gets the next id);
#   - every role of the fixture sees exactly the examples it saw in the source;
#   - nl2sql_explain answers the demo questions with the same SQL and shows the same examples,
#     role by role;
#   - the example over a dropped table holds 0 for it (the extension's event trigger cleared the
#     OID at the DROP), in the source and both copies: no example holds a dropped relation's OID;
#   - B: that example stays hidden in the restored cluster; were the OID still there, a table of
#     its own takes that OID (large objects use up the OIDs before it) and it must stay hidden;
#   - no crash in either cluster's log.
# When the newer major here is an older minor release than the source's (17.11 and 15.20), its
# pg_dump's archive is restored into a scratch database to report the errors (a note), and the
# source's own pg_dump makes the archive B restores (scripts/dbalib.sh, pg_attver).
# Both clusters live in a temporary directory (sockets only, ports TURBOINFER_DUMPTEST_PORT,
# default 54349, and that + 200), removed afterwards, also on failure.
#   TURBOINFER_DUMP_FROM (15), TURBOINFER_DUMP_TO (17): the majors; the extension must be
#   installed in both, the same version, and the default model qwen2.5-coder-1.5b. About 4 minutes
#   on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
me="test-dump-restore.sh"
. "$here/testlib.sh"
. "$here/dbalib.sh"
FROM=${TURBOINFER_DUMP_FROM:-15}
TO=${TURBOINFER_DUMP_TO:-17}
SPORT=${TURBOINFER_DUMPTEST_PORT:-54349}
DB=shop
[[ $(id -u) -eq 0 ]] || die "run as root (the clusters run as postgres)"
[[ -f /var/lib/turboinfer/models/$SHOP_MODEL.gguf ]] || die "model $SHOP_MODEL is not installed (make fetch-model)"
for m in "$FROM" "$TO"; do
    pgc=/usr/lib/postgresql/$m/bin/pg_config
    [[ -x $pgc ]] || die "PostgreSQL $m is not installed (make setup-pg PG_MAJOR=$m)"
    [[ -f $("$pgc" --pkglibdir)/turboinfer.so ]] || die "the extension is not installed into PostgreSQL $m (make install PG_MAJOR=$m INSTALL_FETCH=no)"
done

work=$(mktemp -d /tmp/turboinfer-dumptest.XXXXXX)
chmod 755 "$work"
cleanup() {
    local rc=$?
    if [[ $rc -ne 0 || $fail -ne 0 ]]; then
        for n in src dst; do
            [[ -f $work/$n/log/postgresql.log ]] && { echo "$me: last lines of the $n cluster's log:"; tail -n 10 "$work/$n/log/postgresql.log" | sed 's/^/     | /'; }
        done
    fi
    cl_stop_all
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
t_all=$(date +%s)
settings="turboinfer.background_prepare = off" # the calls here measure answers, not a worker's prefill
install -d -m 755 -o postgres -g postgres "$work/dumps"

cl_init src "$FROM" "$SPORT"
echo "$settings" >>"$work/src/data/postgresql.conf"
cl_start src
say "source cluster: $(cl_psql src -c 'SHOW server_version'); loading the shop"
shop_create src "$DB" >/dev/null
# The event trigger cleared the dropped table's OID from example 5 (0, shown as '-'); no example
# holds the OID of a relation that does not exist, here and in every restored copy (dangling).
dangling() {
    cl_psql "$1" -d "$2" -c "SELECT (SELECT relations::text FROM nl2sql_examples WHERE id = 5) || ' dangling ' || count(*)
        FROM nl2sql_examples e, unnest(e.relations::oid[]) r
        WHERE r <> 0 AND NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = r)"
}
out=$(dangling src "$DB")
[[ $out == "{-} dangling 0" ]] && ok "source: the dropped table's OID cleared from example 5 by the event trigger ($out)" ||
    bad "source: example 5 over the dropped table" "$out"
state0=$(examples_state src "$DB")
vis0=$(visibility src "$DB")
[[ $vis0 == "$SHOP_VISIBLE" ]] && ok "source: the roles see different examples: $vis0" ||
    bad "source: the fixture's roles see '$vis0', expected '$SHOP_VISIBLE'"
ans0=$(answers src "$DB")
if grep -q '|no SQL\|ERROR' <<<"$ans0"; then bad "source: every question answered" "$ans0"
else ok "source: ${#SHOP_QUESTIONS[@]} questions answered, e.g. $(head -n 1 <<<"$ans0")"; fi

# as_client MAJOR TOOL ARGS...: a client tool of that major, as postgres, its stderr in $err.
err=$work/dumps/stderr
# From $work (0755): the clone's directory may be one the postgres user cannot enter (a
# mktemp -d, /root), and the client tools then warn "could not change directory" on stderr.
as_client() { local m=$1 tool=$2; shift 2; (cd "$work" && as_pg "/usr/lib/postgresql/$m/bin/$tool" "$@") 2>"$err"; }
# restored LABEL CLUSTER DB: the checks on a restored database (after its vacuumdb).
restored() {
    local label=$1 c=$2 db=$3 out
    local state vis ans next
    # The DBA's own policies on nl2sql_examples are not in the dump: re-created from the file
    # saved before pg_dump (docs/install.md).
    local mine=$(grep -c '^CREATE POLICY' "$work/dumps/policies.sql" || true)
    local there=$(cl_psql "$c" -d "$db" -c "SELECT count(*) FROM pg_policies WHERE tablename = 'nl2sql_examples' AND policyname <> 'nl2sql_examples_access'")
    echo "note $label: after pg_restore, $there of the $mine policies the DBA added to nl2sql_examples are there (pg_dump dumps an extension table's privileges, not its policies)"
    out=$(cl_psql "$c" -d "$db" -f "$work/dumps/policies.sql" 2>&1) && ok "$label: the DBA's $mine own policies re-created from the file saved before pg_dump" ||
        bad "$label: psql -f policies.sql" "$out"
    state=$(examples_state "$c" "$db")
    [[ $state == "$state0" ]] && ok "$label: the same examples ($(grep -c '^row [0-9]' <<<"$state") rows), policies, privileges, row security, dumped tables, sequence" ||
        bad "$label: the store differs from the source's" "$(diff <(echo "$state0") <(echo "$state") || true)"
    vis=$(visibility "$c" "$db")
    [[ $vis == "$vis0" ]] && ok "$label: every role sees exactly the examples it saw in the source: $vis" ||
        bad "$label: the examples each role sees changed" "source:   $vis0
restored: $vis"
    out=$(dangling "$c" "$db")
    [[ $out == "{-} dangling 0" ]] && ok "$label: no example holds a dropped relation's OID ($out)" || bad "$label: dropped relations in the examples" "$out"
    next=$(learn_next "$c" "$db")
    [[ $next == 7 ]] && ok "$label: nl2sql_learn gets the next id (7)" || bad "$label: nl2sql_learn: '$next', expected id 7" "$next"
    ans=$(answers "$c" "$db")
    [[ $ans == "$ans0" ]] && ok "$label: the same SQL, examples shown and schema prefix for all ${#SHOP_QUESTIONS[@]} questions, role by role" ||
        bad "$label: other answers than the source's" "$(diff <(echo "$ans0") <(echo "$ans") || true)"
}
# pg_restore_checked LABEL MAJOR ARGS...: pg_restore of that major; exit 0 and nothing on stderr.
pg_restore_checked() {
    local label=$1 m=$2 rc=0
    shift 2
    as_client "$m" pg_restore "$@" || rc=$?
    if [[ $rc -eq 0 && ! -s $err ]]; then
        ok "$label: pg_restore exit 0, nothing on stderr"
    else
        bad "$label: pg_restore exit $rc" "$(cat "$err")"
    fi
}

# A. Same major, a new database of the same cluster (the roles are there). A dump holds the
# database's settings only for pg_restore -C (same name): set again for the new name.
S=(-h "$work/src/run" -p "$SPORT" -U postgres)
own_policies src "$DB" >"$work/dumps/policies.sql"
[[ $(grep -c '^CREATE POLICY' "$work/dumps/policies.sql") -ge 1 ]] && ok "the DBA's own policies on nl2sql_examples saved before pg_dump: $(tr '\n' ' ' <"$work/dumps/policies.sql")" ||
    bad "no policy of the DBA's saved" "$(cat "$work/dumps/policies.sql")"
as_client "$FROM" pg_dump "${S[@]}" -Fc -f "$work/dumps/shop-$FROM.dump" "$DB" || bad "pg_dump ($FROM) exit $?" "$(cat "$err")"
[[ -s $err ]] && bad "pg_dump ($FROM) wrote to stderr" "$(cat "$err")"
cl_psql src -c "CREATE DATABASE shop_copy TEMPLATE template0" -c "ALTER DATABASE shop_copy SET turboinfer.model = '$SHOP_MODEL'"
pg_restore_checked "A ($FROM -> $FROM, new database)" "$FROM" "${S[@]}" -d shop_copy "$work/dumps/shop-$FROM.dump"
as_client "$FROM" vacuumdb "${S[@]}" --analyze-only -d shop_copy >/dev/null || bad "vacuumdb --analyze-only" "$(cat "$err")"
restored "A ($FROM -> $FROM)" src shop_copy

# B. Into the newer major's cluster, with its client tools: roles, then the database (-C).
cl_init dst "$TO" "$((SPORT + 200))"
echo "$settings" >>"$work/dst/data/postgresql.conf"
cl_start dst
D=(-h "$work/dst/run" -p "$((SPORT + 200))" -U postgres)
as_client "$TO" pg_dumpall "${S[@]}" --roles-only -f "$work/dumps/roles.sql" || bad "pg_dumpall --roles-only exit $?" "$(cat "$err")"
# The role postgres exists in every cluster: its CREATE ROLE fails, which psql reports and skips.
out=$(as_client "$TO" psql -X -q "${D[@]}" -d postgres -f "$work/dumps/roles.sql" 2>&1; cat "$err")
[[ -z $(grep -v 'role "postgres" already exists' <<<"$out") ]] && ok "B: roles restored into $TO (pg_dumpall --roles-only)" ||
    bad "B: pg_dumpall --roles-only | psql" "$out"
# The newer major's pg_dump, unless it is an older minor release that does not know the old
# server's column option pg_attver (scripts/dbalib.sh): then what its dump gives is reported and
# the old server's own pg_dump is used.
dumper=$TO
as_client "$TO" pg_dump "${S[@]}" -Fc -f "$work/dumps/shop-$TO.dump" "$DB" || bad "pg_dump ($TO) exit $?" "$(cat "$err")"
[[ -s $err ]] && bad "pg_dump ($TO) of the $FROM server wrote to stderr" "$(cat "$err")"
if attver_known "$FROM" && ! attver_known "$TO"; then
    cl_psql dst -c "CREATE DATABASE attver_probe"
    rc=0
    as_client "$TO" pg_restore "${D[@]}" -d attver_probe "$work/dumps/shop-$TO.dump" || rc=$?
    echo "note pg_dump $TO ($("${cl_bin[dst]}/postgres" --version | awk '{print $3}')) of the $FROM server ($(cl_psql src -c 'SHOW server_version' | awk '{print $1}')): pg_restore exit $rc, $(grep -c 'ERROR: ' "$err") errors, $(grep -c 'unrecognized parameter "pg_attver"' "$err") of them 'unrecognized parameter \"pg_attver\"'; dumped with pg_dump $FROM instead"
    cl_psql dst -c "DROP DATABASE attver_probe"
    dumper=$FROM
    as_client "$FROM" pg_dump "${S[@]}" -Fc -f "$work/dumps/shop-$TO.dump" "$DB" || bad "pg_dump ($FROM) exit $?" "$(cat "$err")"
fi
pg_restore_checked "B ($FROM -> $TO, pg_dump $dumper, pg_restore $TO -C)" "$TO" "${D[@]}" -C -d postgres "$work/dumps/shop-$TO.dump"
setting=$(cl_psql dst -c "SELECT array_to_string(setconfig, ',') FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase WHERE d.datname = '$DB' AND s.setrole = 0")
[[ $setting == "turboinfer.model=$SHOP_MODEL" ]] && ok "B: the database's settings came with -C: $setting" || bad "B: the database's settings: '$setting'"
as_client "$TO" vacuumdb "${D[@]}" --analyze-only -d "$DB" >/dev/null || bad "vacuumdb --analyze-only" "$(cat "$err")"
restored "B ($FROM -> $TO)" dst "$DB"
# Example 5 reads a table dropped in the source: shown to nobody there. Restored, its relations
# hold the dropped table's OID as a number; a table that later takes that OID in the new cluster
# must not make it visible.
out=$(stale_oid_probe dst "$DB" 2>&1) || true
[[ $out == *"already names"* ]] && echo "note B: the dropped table's OID that example 5 holds names another relation of the restored cluster: $(grep -o 'already names.*' <<<"$out")"
if [[ $out == *"dba_analyst sees: 1,2,3,4,6" ]]; then
    ok "B: the example over a dropped table stays hidden for dba_analyst, with a table of its own at that OID if it was free ($(grep '^oid' <<<"$out"))"
else
    bad "B: the example over a dropped table became visible in the restored cluster" "$out"
fi

dba_finish src dst
