#!/usr/bin/env bash
# `make install` into a PostgreSQL that is not Debian's (issue 15, "Install anywhere"), as root, for
# the major of TURBOINFER_PG_MAJOR (default 15; scripts/pgmajor.sh):
#   1. which pg_config scripts/install.sh picks (--dry-run): PG_CONFIG given, the first pg_config
#      on PATH, Debian's by default; a missing one or another major version is a clear error;
#   2. `make install PG_CONFIG=<copy>/pg_config` copies the built files into that installation's
#      pkglibdir and sharedir/extension (byte for byte the staged build) and prints the psql lines;
#   3. a fresh cluster of that installation (its own initdb and postgres, port
#      $TURBOINFER_INSTALLTEST_PORT (default 54342, 54542 for 17), socket only, temporary directory): CREATE
#      EXTENSION loads the library from there, and a question is answered with nothing set;
#   4. the upgrade from each released version (every tests/upgrade/turboinfer--<v>.sql):
#      ALTER EXTENSION UPDATE gives the same objects as a fresh CREATE EXTENSION, and answers.
# The other installation is a private copy, in a temporary directory, of Debian's layout of that
# major (/usr/lib/postgresql/MAJOR and /usr/share/postgresql/MAJOR: PostgreSQL finds its
# directories relative to its binaries, so the copy is a PostgreSQL of its own), or of the `usr`
# tree of a relocated PostgreSQL of that major at $TURBOINFER_OTHER_PG; the source is only read, and the copy holds no
# turboinfer file. Everything is removed afterwards, also on failure.
# Needs: a build for that major staged by `make install` or `cargo pgrx package` (no build here:
# --no-build), the
# default model qwen2.5-coder-1.5b (make install fetches it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
SRC=${TURBOINFER_OTHER_PG:-}
DEFAULT_MODEL=qwen2.5-coder-1.5b
me="test-install.sh"
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh" # and pgmajor.sh: PG_MAJOR
PORT=${TURBOINFER_INSTALLTEST_PORT:-$(pg_port 54342)}
M=$PG_MAJOR
stage=$root/target/release/turboinfer-pg$M

[[ $(id -u) -eq 0 ]] || die "run as root (initdb runs as postgres)"
[[ $PORT =~ ^[0-9]+$ ]] || die "TURBOINFER_INSTALLTEST_PORT must be a number, not '$PORT'"
if [[ -n $SRC ]]; then
    [[ -x $SRC/lib/postgresql/$M/bin/pg_config ]] ||
        die "no relocated PostgreSQL $M at $SRC ($SRC/lib/postgresql/$M/bin/pg_config missing); check TURBOINFER_OTHER_PG"
else
    [[ -x /usr/lib/postgresql/$M/bin/pg_config && -d /usr/share/postgresql/$M ]] ||
        die "PostgreSQL $M is missing (/usr/lib/postgresql/$M/bin/pg_config); run make setup-pg PG_MAJOR=$M"
fi
[[ -f /var/lib/turboinfer/models/$DEFAULT_MODEL.gguf ]] ||
    die "the default model $DEFAULT_MODEL is not installed; run: make fetch-model"
[[ -f $stage/usr/lib/postgresql/$M/lib/turboinfer.so ]] ||
    die "no staged build in target/release/turboinfer-pg$M; run make install PG_MAJOR=$M (or cargo pgrx package) first"

work=$(mktemp -d /tmp/turboinfer-installtest.XXXXXX)
chmod 755 "$work"
other=$work/pg/usr
bin=$other/lib/postgresql/$M/bin
data=$work/data
run=$work/run
log=$work/log/postgresql.log
pc_bin=$bin pc_dir=$work pc_port=$PORT # the private cluster (testlib.sh)
cleanup() {
    local rc=$?
    pc_stop
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT

# -----------------------------------------------------------------------------------------------
mkdir -p "$work/pg"
if [[ -n $SRC ]]; then
    cp -a "$SRC" "$work/pg/"
else
    SRC="PostgreSQL $M in Debian's layout"
    mkdir -p "$work/pg/usr/lib/postgresql" "$work/pg/usr/share/postgresql"
    cp -a "/usr/lib/postgresql/$M" "$work/pg/usr/lib/postgresql/"
    cp -a "/usr/share/postgresql/$M" "$work/pg/usr/share/postgresql/"
fi
# scripts/setup-pg.sh's layout of a relocatable build (14, 16) links $prefix/share and
# $prefix/include to /usr/share/... and /usr/include/...: pointed into the copy, or the copy would
# install into the source's share directory.
for l in "$other/lib/postgresql/$M"/*; do
    [[ -L $l && $(readlink "$l") == /usr/* ]] || continue
    mkdir -p "$work/pg$(readlink "$l")"
    ln -sfn "$work/pg$(readlink "$l")" "$l"
done
rm -f "$other/lib/postgresql/$M/lib/turboinfer.so" "$other/share/postgresql/$M/extension/turboinfer"*
libdir=$("$bin/pg_config" --pkglibdir)
extdir=$("$bin/pg_config" --sharedir)/extension
if [[ $(realpath "$libdir") == "$other/lib/postgresql/$M/lib" && $(realpath -m "$extdir") == "$other/share/postgresql/$M/extension" ]]; then
    ok "private copy of $SRC: its pg_config reports $libdir"
else
    bad "the copy's pg_config reports $libdir and $extdir (not relocated)"
fi

# install.sh's choice of pg_config.
out=$(PG_CONFIG="$bin/pg_config" "$here/install.sh" --dry-run 2>&1) || true
if [[ $out == *"(PG_CONFIG: $bin/pg_config)"* && $out == *"  $libdir/turboinfer.so"* && $out == *"  $extdir/turboinfer.control"* ]]; then
    ok "PG_CONFIG=<copy>/pg_config: installs into the copy"
else
    bad "PG_CONFIG=<copy>" "$out"
fi
out=$(env -u PG_CONFIG PATH="$bin:$PATH" "$here/install.sh" --dry-run 2>&1) || true
if [[ $out == *"(pg_config on PATH: $bin/pg_config)"* && $out == *"  $libdir/turboinfer.so"* ]]; then
    ok "no PG_CONFIG, the copy's bin first on PATH: installs into the copy"
else
    bad "pg_config on PATH" "$out"
fi
out=$(env -u PG_CONFIG "$here/install.sh" --dry-run 2>&1) || true
if [[ $out == *"  /usr/lib/postgresql/$M/lib/turboinfer.so"* ]]; then
    ok "no PG_CONFIG, usual PATH: Debian's PostgreSQL $M ($(sed -n 's/^install.sh: target: //p' <<<"$out"))"
else
    bad "default pg_config" "$out"
fi
# PG_CONFIG of another installed major wins over TURBOINFER_PG_MAJOR: the major built for is the
# target's (its staged build, its pkglibdir).
for o in $PG_MAJORS_SUPPORTED; do
    [[ $o != "$M" && -x /usr/lib/postgresql/$o/bin/pg_config ]] || continue
    out=$(PG_CONFIG=/usr/lib/postgresql/$o/bin/pg_config "$here/install.sh" --dry-run 2>&1) || true
    if [[ $out == *"target: PostgreSQL $o."* && $out == *"  /usr/lib/postgresql/$o/lib/turboinfer.so"* ]]; then
        ok "PG_CONFIG of PostgreSQL $o with TURBOINFER_PG_MAJOR=$M: installs for $o"
    else
        bad "PG_CONFIG of PostgreSQL $o" "$out"
    fi
    break
done
rc=0
out=$(PG_CONFIG=/nonexistent/pg_config "$here/install.sh" --dry-run 2>&1) || rc=$?
if [[ $rc -ne 0 && $out == *"PG_CONFIG=/nonexistent/pg_config is not an executable file"* ]]; then
    ok "PG_CONFIG naming no file: clear error"
else
    bad "PG_CONFIG=/nonexistent (rc $rc)" "$out"
fi
printf '#!/bin/sh\necho "PostgreSQL 13.16"\n' >"$work/pg_config13"
chmod 755 "$work/pg_config13"
rc=0
out=$(PG_CONFIG="$work/pg_config13" "$here/install.sh" --dry-run 2>&1) || rc=$?
if [[ $rc -ne 0 && $out == *"supports PostgreSQL 14, 15, 16, 17, 18"* ]]; then
    ok "a PostgreSQL 13 pg_config: clear error"
else
    bad "PG_CONFIG of PostgreSQL 13 (rc $rc)" "$out"
fi

# make install PG_CONFIG=<copy>: the staged files, copied into the copy.
out=$(cd "$root" && make --no-print-directory install PG_CONFIG="$bin/pg_config" INSTALL_ARGS=--no-build INSTALL_FETCH=no 2>&1) || true
same=1
for f in lib/postgresql/$M/lib/turboinfer.so share/postgresql/$M/extension/turboinfer.control; do
    cmp -s "$stage/usr/$f" "$other/$f" || same=0
done
shopt -s nullglob
sqls=("$extdir"/turboinfer--*.sql)
shopt -u nullglob
if [[ $same -eq 1 && ${#sqls[@]} -gt 0 && $out == *"CREATE EXTENSION turboinfer;"* && $out == *'\gexec'* ]]; then
    ok "make install PG_CONFIG=<copy>: .so, control and SQL in the copy, psql lines printed"
else
    bad "make install PG_CONFIG=<copy>" "$out"
fi
leftovers=$(find "$libdir" "$extdir" -name '.turboinfer*' -print)
[[ -z $leftovers ]] && ok "no temporary file left" || bad "temporary files left" "$leftovers"

# A cluster of that installation: the library loads from its pkglibdir, an answer with nothing set.
pc_init
pc_start
q() { pc_psql "$@"; }
q -c "CREATE TABLE users (id int PRIMARY KEY, name text NOT NULL)" \
    -c "INSERT INTO users SELECT g, 'user ' || g FROM generate_series(1, 7) g"
t=$(date +%s.%N)
out=$(q -c "CREATE EXTENSION turboinfer" -c "SELECT setting FROM pg_config WHERE name = 'PKGLIBDIR'" \
    -c "SELECT nl2sql('how many users are there?')" 2>&1) || true
secs=$(awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
if [[ $out == "$libdir"$'\n'SELECT*users* ]]; then
    ok "fresh cluster of the copy: CREATE EXTENSION, answer with nothing set: ${out#*$'\n'} (${secs}s)"
else
    bad "CREATE EXTENSION / nl2sql in the copy's cluster" "$out"
fi
res=$(q -c "${out#*$'\n'}" 2>&1) || true
[[ $res == 7 ]] && ok "the answer runs and counts 7 users" || bad "running the answer gave '$res'"
# Reinstalling while a backend has the library mapped: the new file replaces the old one by
# rename, so that backend keeps mapping the old (now deleted) file and goes on working.
coproc HOLD { "$bin/psql" -X -q -At -h "$run" -p "$PORT" -U postgres 2>&1; }
# Bash unsets HOLD_PID as soon as the coproc has exited, which under `set -u` made the final
# `wait` fail when psql quit quickly: keep the pid.
hold_pid=$HOLD_PID
echo "SELECT pg_backend_pid(), turboinfer_version() IS NOT NULL;" >&"${HOLD[1]}"
line=""
read -t 60 -r line <&"${HOLD[0]}" || true
bpid=${line%%|*}
if [[ $line =~ ^[0-9]+\|t$ ]]; then
    out=$(cd "$root" && make --no-print-directory install PG_CONFIG="$bin/pg_config" INSTALL_ARGS=--no-build INSTALL_FETCH=no 2>&1) ||
        bad "make install again" "$out"
    maps=$(cat "/proc/$bpid/maps" 2>/dev/null || true)
    mapped=$(grep -F "$libdir/turboinfer.so" <<<"$maps" | head -n 1 || true)
    echo "SELECT turboinfer_version() IS NOT NULL, nl2sql('how many users are there?') LIKE 'SELECT%';" >&"${HOLD[1]}"
    line=""
    read -t 120 -r line <&"${HOLD[0]}" || true
    if [[ $mapped == *"(deleted)"* && $line == "t|t" ]]; then
        ok "make install while a backend has the library loaded: it keeps the old (deleted) file and answers"
    else
        bad "backend after make install: mapping '${mapped:-none}', answer '$line'"
    fi
else
    bad "holding session did not start" "$line"
fi
exec {HOLD[1]}>&-
wait "$hold_pid" 2>/dev/null || true

# Upgrade from each released version: its install script (tests/upgrade/, frozen as released)
# next to this version's; CREATE EXTENSION ... VERSION '<from>' in one database (every C symbol
# it names must still exist in the new library), ALTER EXTENSION UPDATE, and the objects the
# extension then owns must be those of a fresh CREATE EXTENSION in another database, down to
# each function's definition (arguments, defaults, result, volatility, strictness, security,
# parallel safety, cost, C symbol), each table's columns, row-level security and policies, each
# event trigger's event, function and state,
# comments, privileges and the tables pg_dump dumps (extconfig).
version=$(awk -F'"' '/^\[/ { sect = $0 } sect == "[package]" && /^version *=/ { print $2; exit }' "$root/Cargo.toml")
# Every released version: those whose install script is frozen in tests/upgrade/.
mapfile -t releases < <(ls "$root"/tests/upgrade/turboinfer--*.sql | sed 's|.*/turboinfer--||; s|\.sql$||' | sort -V)
[[ ${#releases[@]} -gt 0 ]] || die "no frozen install script in tests/upgrade/"
for r in "${releases[@]}"; do install -m 644 "$root/tests/upgrade/turboinfer--$r.sql" "$extdir/"; done
objects="SELECT pg_describe_object(d.classid, d.objid, d.objsubid) || E'\n' || coalesce(
    CASE d.classid
      WHEN 'pg_proc'::regclass THEN (SELECT pg_get_functiondef(p.oid) || E'\n' || coalesce(p.proacl::text, 'default privileges')
                                     FROM pg_proc p WHERE p.oid = d.objid)
      WHEN 'pg_class'::regclass THEN (SELECT c.relkind::text || E'\n' || coalesce(pg_get_viewdef(c.oid), '') || E'\n' ||
                                       (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
                                        FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) || E'\n' ||
                                       coalesce(c.relacl::text, 'default privileges') || E'\n' ||
                                       'row security ' || c.relrowsecurity::text || coalesce(E'\n' ||
                                       (SELECT string_agg(pol.polname || ' ' || pol.polcmd::text || ' ' || coalesce(pg_get_expr(pol.polqual, pol.polrelid), '-')
                                                          || ' ' || coalesce(pg_get_expr(pol.polwithcheck, pol.polrelid), '-'), E'\n' ORDER BY pol.polname)
                                        FROM pg_policy pol WHERE pol.polrelid = c.oid), '')
                                     FROM pg_class c WHERE c.oid = d.objid)
      WHEN 'pg_event_trigger'::regclass THEN (SELECT t.evtevent || ' ' || t.evtfoid::regprocedure::text || ' enabled ' || t.evtenabled::text
                                              || ' tags ' || coalesce(t.evttags::text, 'all') FROM pg_event_trigger t WHERE t.oid = d.objid)
    END, '') || E'\n' || coalesce('comment: ' || obj_description(d.objid, d.classid::regclass::name), 'no comment')
  FROM pg_depend d JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
  WHERE e.extname = 'turboinfer' AND d.deptype = 'e'
  UNION ALL SELECT 'extension ' || extname || ' ' || extversion || ' in schema ' || extnamespace::regnamespace
                   || ', dumps ' || coalesce(extconfig::regclass[]::text, 'no table') FROM pg_extension WHERE extname = 'turboinfer'
  ORDER BY 1"
q -c "CREATE DATABASE fresh"
fresh=$(q -d fresh -c "CREATE EXTENSION turboinfer" -c "$objects" 2>&1) || true
n=$(grep -c '^function ' <<<"$fresh" || true)
for i in "${!releases[@]}"; do
    from=${releases[$i]}
    # The path PostgreSQL must find: every later release in turn, then this version.
    chain=$(IFS=-; echo "${releases[*]:$i}" | sed 's/-/--/g')--$version
    out=$(q -c "SELECT source || ' -> ' || target || ': ' || coalesce(path, 'none') FROM pg_extension_update_paths('turboinfer') WHERE source = '$from' AND target = '$version'" 2>&1) || true
    [[ $out == "$from -> $version: $chain" ]] && ok "pg_extension_update_paths: $out" || bad "update path $from -> $version" "$out"
    db="upgraded_${from//./_}"
    q -c "CREATE DATABASE $db"
    out=$(q -d "$db" -c "CREATE EXTENSION turboinfer VERSION '$from'" -c "SELECT extversion FROM pg_extension WHERE extname = 'turboinfer'" \
        -c "ALTER EXTENSION turboinfer UPDATE" -c "SELECT extversion FROM pg_extension WHERE extname = 'turboinfer'" 2>&1) || true
    [[ $out == "$from"$'\n'"$version" ]] && ok "CREATE EXTENSION turboinfer VERSION '$from', then ALTER EXTENSION turboinfer UPDATE: $version" ||
        bad "CREATE EXTENSION VERSION '$from' + ALTER EXTENSION UPDATE" "$out"
    upgraded=$(q -d "$db" -c "$objects" 2>&1) || true
    if [[ $upgraded == "$fresh" && $n -gt 0 && $fresh == *"function nl2sql_run(text,integer,boolean)"* && $fresh == *"function nl2sql_learn(text,text)"* \
          && $fresh == *"nl2sql_examples_access *"* && $fresh == *"event trigger turboinfer_examples_dropped"* && $fresh == *"dumps {nl2sql_examples,nl2sql_examples_id_seq}"* ]]; then
        ok "updated from $from and freshly created: the same $n functions and other objects, definitions, policies, comments and privileges"
    else
        bad "objects after ALTER EXTENSION UPDATE from $from differ from a fresh CREATE EXTENSION ($n functions)" "$(diff <(echo "$upgraded") <(echo "$fresh") || true)"
    fi
    q -d "$db" -c "CREATE TABLE users (id int PRIMARY KEY, name text NOT NULL)" \
        -c "INSERT INTO users SELECT g, 'user ' || g FROM generate_series(1, 7) g"
    out=$(q -d "$db" -c "SELECT nl2sql('how many users are there?')" -c "SELECT * FROM nl2sql_run('how many users are there?')" \
        -c "SELECT nl2sql_learn('count the users', 'SELECT count(*) FROM users') > 0" 2>&1) || true
    if [[ $out =~ ^SELECT.*users.*$'\n'\{\"[a-z_()]+\":\ 7\}$'\n't$ ]]; then
        ok "after the update from $from: nl2sql and nl2sql_run answer, nl2sql_learn stores (${out//$'\n'/ -> })"
    else
        bad "nl2sql / nl2sql_run / nl2sql_learn after ALTER EXTENSION UPDATE from $from" "$out"
    fi
    # A release with approved examples: an example over a relation dropped before the update has
    # that OID cleared by the update (0, shown as '-'), and one dropped after by the event trigger.
    if grep -q 'CREATE TABLE nl2sql_examples' "$root/tests/upgrade/turboinfer--$from.sql"; then
        q -c "CREATE DATABASE dropped_${from//./_}"
        out=$(q -d "dropped_${from//./_}" -c "CREATE EXTENSION turboinfer VERSION '$from'" \
            -c "CREATE TABLE kept (n int)" -c "CREATE TABLE gone (n int)" \
            -c "INSERT INTO nl2sql_examples (question, sql, relations) VALUES ('both', 'SELECT * FROM kept, gone', '{kept,gone}')" \
            -c "DROP TABLE gone" -c "ALTER EXTENSION turboinfer UPDATE" -c "SELECT relations FROM nl2sql_examples" \
            -c "DROP TABLE kept" -c "SELECT relations FROM nl2sql_examples" 2>&1) || true
        [[ $out == $'{kept,-}\n{-,-}' ]] && ok "an example over a table dropped before the update from $from: cleared by the update, and its other table by the event trigger ($(tr '\n' ' ' <<<"$out"))" ||
            bad "dropped relations in examples across the update from $from" "$out"
    fi
    # The newest release: a DBA's REVOKE from PUBLIC and GRANT on the signatures 0.4.0 replaces
    # carry over to the new ones, and pg_dump still dumps them as the DBA's (not as the
    # extension's initial privileges).
    if [[ $from == "${releases[-1]}" ]]; then
        g="grants_${from//./_}"
        q -c "CREATE DATABASE $g" -c "CREATE ROLE ti_app" -c "CREATE ROLE ti_other"
        out=$(q -d "$g" -c "CREATE EXTENSION turboinfer VERSION '$from'" \
            -c "REVOKE EXECUTE ON FUNCTION nl2sql(text) FROM PUBLIC" -c "GRANT EXECUTE ON FUNCTION nl2sql(text) TO ti_app" \
            -c "ALTER EXTENSION turboinfer UPDATE" \
            -c "SELECT has_function_privilege('ti_app', 'nl2sql(text,boolean)', 'EXECUTE') || ' ' ||
                       has_function_privilege('ti_other', 'nl2sql(text,boolean)', 'EXECUTE') || ' ' ||
                       has_function_privilege('ti_other', 'nl2sql_run(text,integer,boolean)', 'EXECUTE') || ' ' ||
                       (SELECT count(*) FROM pg_init_privs WHERE objoid = 'nl2sql(text,boolean)'::regprocedure)" 2>&1) || true
        dump=$("$bin/pg_dump" -h "$pc_run" -p "$pc_port" -U postgres -s "$g" 2>&1 | grep -E '^(GRANT|REVOKE) .*FUNCTION [a-z_.]*nl2sql\(' || true)
        if [[ $(tail -n 1 <<<"$out") == "true false true 0" \
              && $dump == *"REVOKE ALL ON FUNCTION"*"nl2sql(question text, follow_up boolean) FROM PUBLIC"* \
              && $dump == *"GRANT ALL ON FUNCTION"*"nl2sql(question text, follow_up boolean) TO ti_app"* ]]; then
            ok "the update from $from carries REVOKE FROM PUBLIC and GRANT on nl2sql(text) over to nl2sql(text, boolean), and pg_dump dumps them"
        else
            bad "privileges on the old signature after the update from $from" "$out"$'\n'"pg_dump: $dump"
        fi
    fi
done

loglines=$(cat "$log")
if grep -Eq 'terminated by signal|PANIC' <<<"$loglines"; then bad "server log reports a crash"; else ok "no crash in the copy's server log"; fi

echo "$me: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
