# What the DBA tests share (sourced after testlib.sh by test-pg-upgrade.sh and
# test-dump-restore.sh): private clusters of any installed major side by side, the demo shop
# database with approved examples that different roles see differently, and the measurements
# compared before and after a move (examples per role, answers, policies, privileges).
#
# Clusters: `cl_init NAME MAJOR PORT` makes $work/NAME (initdb as postgres, C locale, UTF8, trust,
# socket $work/NAME/run only: no TCP), `cl_start NAME`, `cl_stop NAME` (no-op when stopped),
# `cl_psql NAME [psql args]` (tuples only, unaligned, ON_ERROR_STOP), `cl_stop_all` (EXIT trap).
# Needs $work (0755) and `as_pg` (testlib.sh).

declare -A cl_bin cl_port cl_up
cl_names=()
cl_init() { # cl_init NAME MAJOR PORT
    local name=$1 major=$2 port=$3 dir=$work/$1
    cl_bin[$name]=/usr/lib/postgresql/$major/bin cl_port[$name]=$port cl_up[$name]=0
    cl_names+=("$name")
    [[ -x ${cl_bin[$name]}/initdb ]] || die "PostgreSQL $major is not installed (make setup-pg PG_MAJOR=$major)"
    install -d -m 755 -o postgres -g postgres "$dir" "$dir/run" "$dir/log"
    install -d -m 700 -o postgres -g postgres "$dir/data"
    as_pg "${cl_bin[$name]}/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 --locale=C \
        >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb of $name ($major) failed"; }
    # The port and socket in the configuration (pg_upgrade starts the clusters itself).
    cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = ''
port = $port
unix_socket_directories = '$dir/run'
EOF
}
cl_start() {
    local name=$1 dir=$work/$1
    # As cluster.sh: the server must not inherit our open files beyond stdio (make's jobserver).
    (
        for fd in $(ls /proc/$BASHPID/fd); do (( fd > 2 && fd < 255 )) && eval "exec $fd>&-" 2>/dev/null; done
        as_pg "${cl_bin[$name]}/pg_ctl" start -D "$dir/data" -l "$dir/log/postgresql.log" -w -t 120 >/dev/null
    ) || { tail -n 5 "$dir/log/postgresql.log" >&2 || true; die "cluster $name failed to start"; }
    cl_up[$name]=1
}
cl_stop() {
    local name=$1
    [[ ${cl_up[$name]:-0} -eq 1 ]] || return 0
    as_pg "${cl_bin[$name]}/pg_ctl" stop -D "$work/$name/data" -m fast -w -t 120 >/dev/null || true
    cl_up[$name]=0
}
cl_stop_all() { local n; for n in "${cl_names[@]}"; do cl_stop "$n"; done; }
cl_psql() {
    local name=$1
    shift
    "${cl_bin[$name]}/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$work/$name/run" -p "${cl_port[$name]}" -U postgres "$@"
}
# cl_crashed NAME: the lines of its log that tell of a crash (none: empty).
cl_crashed() { grep -E 'terminated by signal|PANIC' "$work/$1/log/postgresql.log" || true; }

# ---------------------------------------------------------------------------------------------
# The shop: demo/schema.sql + demo/data.sql in database $2 of cluster $1, the extension, the
# model for the database (ALTER DATABASE, as make demo does), then the examples (fixture below).
SHOP_MODEL=qwen2.5-coder-1.5b
shop_create() { # shop_create CLUSTER DB
    local root
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    cl_psql "$1" -c "CREATE DATABASE $2" -c "ALTER DATABASE $2 SET turboinfer.model = '$SHOP_MODEL'"
    PGOPTIONS="-c client_min_messages=warning" cl_psql "$1" -d "$2" -f "$root/demo/schema.sql" -f "$root/demo/data.sql"
    cl_psql "$1" -d "$2" -c "CREATE EXTENSION turboinfer"
    cl_psql "$1" -d "$2" <<'SQL'
SET client_min_messages = warning;
-- Teams that may read different tables, and so see different examples.
CREATE ROLE dba_sales;
CREATE ROLE dba_support;
CREATE ROLE dba_analyst;
CREATE ROLE dba_outsider;
CREATE ROLE dba_teacher;
CREATE ROLE dba_contractor;
GRANT SELECT ON orders, order_items, products, categories, payments TO dba_sales;
GRANT SELECT ON users, countries, addresses, reviews, shipments TO dba_support;
GRANT SELECT ON countries, users, addresses, categories, products, orders, order_items, payments, shipments, reviews
    TO dba_analyst, dba_teacher, dba_contractor;
GRANT INSERT, DELETE ON nl2sql_examples TO dba_teacher, dba_contractor;
-- A table an example reads, dropped afterwards: that example is shown to nobody. Its OID is put
-- 5000 past the others (large objects created and removed take them), so that a restored cluster,
-- whose OID counter starts again, has not reached it (stale_oid_probe below).
SELECT count(lo_unlink(lo_create(0))) FROM generate_series(1, 5000);
CREATE TABLE promo_notes (id integer PRIMARY KEY, note text);
GRANT SELECT ON promo_notes TO dba_sales, dba_support, dba_analyst, dba_teacher;
SET ROLE dba_teacher;
SELECT nl2sql_learn('How many orders were refunded?', $$SELECT count(*) FROM orders WHERE status = 'refunded'$$);
SELECT nl2sql_learn('What is the revenue of each product?',
    $$SELECT p.name, sum(oi.quantity * oi.unit_price) AS revenue FROM order_items oi JOIN products p ON p.product_id = oi.product_id GROUP BY p.name$$);
SELECT nl2sql_learn('How many users closed their account?', $$SELECT count(*) FROM users WHERE NOT is_active$$);
SELECT nl2sql_learn('How many orders did the users of each country place?',
    $$SELECT u.country_code, count(*) FROM orders o JOIN users u ON u.user_id = o.user_id GROUP BY u.country_code$$);
SELECT nl2sql_learn('How many promo notes are there?', $$SELECT count(*) FROM promo_notes$$);
RESET ROLE;
SET ROLE dba_contractor;
SELECT nl2sql_learn('How many reviews gave one star?', $$SELECT count(*) FROM reviews WHERE rating = 1$$);
RESET ROLE;
DROP TABLE promo_notes;
-- The DBA's own rule on top of the extension's policy: the support team is not shown the
-- contractor's examples.
CREATE POLICY dba_support_no_contractor ON nl2sql_examples AS RESTRICTIVE FOR SELECT TO dba_support
    USING (added_by <> 'dba_contractor');
ANALYZE;
SQL
}
# What the fixture's roles must see (ids as learned above: 5 reads the dropped table, 6 is the
# contractor's); postgres, a superuser, bypasses row-level security.
SHOP_ROLES="dba_sales dba_support dba_analyst dba_outsider dba_teacher postgres"
SHOP_VISIBLE="dba_sales:1,2 dba_support:3 dba_analyst:1,2,3,4,6 dba_outsider: dba_teacher:1,2,3,4,6 postgres:1,2,3,4,5,6"

# visibility CLUSTER DB: "role:ids" for each role of SHOP_ROLES, the example ids it sees.
visibility() {
    local r out=()
    for r in $SHOP_ROLES; do
        out+=("$r:$(cl_psql "$1" -d "$2" -c "SET ROLE $r" -c "SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM nl2sql_examples")")
    done
    echo "${out[*]}"
}
# examples_state CLUSTER DB: the store as a DBA would compare it: every row (relations as names),
# the table's policies, each role's privileges on it (not the ACL: 17 adds MAINTAIN to the
# owner's), row security, the extension's version and its dumped tables, the identity sequence.
examples_state() {
    cl_psql "$1" -d "$2" <<'SQL'
SELECT 'row ' || id || '|' || question || '|' || sql || '|' || relations::text || '|' || added_by || '|' || added_at
  FROM nl2sql_examples ORDER BY id;
SELECT 'policy ' || policyname || '|' || permissive || '|' || roles::text || '|' || cmd || '|' || coalesce(qual, '-') || '|' || coalesce(with_check, '-')
  FROM pg_policies WHERE tablename = 'nl2sql_examples' ORDER BY policyname;
SELECT 'privileges ' || string_agg(r || '=' || concat_ws(',',
           CASE WHEN has_table_privilege(r, 'nl2sql_examples', 'SELECT') THEN 'SELECT' END,
           CASE WHEN has_table_privilege(r, 'nl2sql_examples', 'INSERT') THEN 'INSERT' END,
           CASE WHEN has_table_privilege(r, 'nl2sql_examples', 'UPDATE') THEN 'UPDATE' END,
           CASE WHEN has_table_privilege(r, 'nl2sql_examples', 'DELETE') THEN 'DELETE' END), ' ' ORDER BY r)
  FROM unnest(ARRAY['dba_sales', 'dba_support', 'dba_analyst', 'dba_outsider', 'dba_teacher', 'dba_contractor']) r;
SELECT 'row security ' || relrowsecurity || ' forced ' || relforcerowsecurity FROM pg_class WHERE relname = 'nl2sql_examples';
SELECT 'extension ' || extversion || ' dumps ' || coalesce(extconfig::regclass[]::text, 'none') FROM pg_extension WHERE extname = 'turboinfer';
SELECT 'next id ' || (SELECT last_value FROM nl2sql_examples_id_seq) || ' called ' || (SELECT is_called FROM nl2sql_examples_id_seq);
SQL
}
# The questions whose answers must not change (role|question): the scorecard's demo questions,
# and questions close to a stored example for the roles that see it (the example is in the prompt).
SHOP_QUESTIONS=(
    "postgres|How many users are there?"
    "postgres|How many orders are there for each status?"
    "dba_sales|How many orders were cancelled?"
    "dba_support|How many users are still active?"
    "dba_analyst|How many users live in Germany?"
)
# answers CLUSTER DB: one line per SHOP_QUESTIONS entry: role|question|the SQL (newlines as
# spaces)|the examples shown (ids)|the schema prefix's fingerprint (what the prompt shows before
# the examples: tables, columns, comments, values from pg_stats), from nl2sql_explain; an error
# in place of the SQL.
answers() {
    local entry role q
    for entry in "${SHOP_QUESTIONS[@]}"; do
        role=${entry%%|*} q=${entry#*|}
        printf '%s|%s|%s\n' "$role" "$q" "$(cl_psql "$1" -d "$2" -v q="$q" 2>&1 <<SQL | tr '\n' ' ' | sed 's/ $//'
SET ROLE $role;
SELECT coalesce(replace(e->>'sql', E'\n', ' '), 'no SQL: ' || coalesce(e->>'error', '?')) || '|examples ' || jsonb_path_query_array(e->'examples', '\$[*].id')::text
       || '|schema prefix ' || left(e->>'fingerprint', 16)
  FROM nl2sql_explain(:'q') e;
SQL
)"
    done
}
# learn_next CLUSTER DB: the id a new example gets (learned as dba_teacher, then forgotten).
learn_next() {
    cl_psql "$1" -d "$2" 2>&1 <<'SQL'
SET ROLE dba_teacher;
SELECT id || CASE WHEN nl2sql_forget(id) THEN '' ELSE ' (not forgotten)' END
  FROM nl2sql_learn('How many payments are there?', 'SELECT count(*) FROM payments') id;
SQL
}
# own_policies CLUSTER DB: CREATE POLICY statements for the policies a DBA added to
# nl2sql_examples (all but the extension's nl2sql_examples_access), the query of docs/install.md:
# pg_dump dumps only the privileges of an extension's tables, not their policies.
own_policies() {
    cl_psql "$1" -d "$2" <<'SQL'
SELECT format('CREATE POLICY %I ON %I.%I AS %s FOR %s TO %s%s%s;', p.policyname, p.schemaname, p.tablename,
              p.permissive, p.cmd,
              (SELECT string_agg(CASE WHEN r = 'public' THEN 'PUBLIC' ELSE quote_ident(r) END, ', ') FROM unnest(p.roles) r),
              ' USING (' || p.qual || ')', ' WITH CHECK (' || p.with_check || ')')
  FROM pg_policies p
 WHERE p.tablename = 'nl2sql_examples' AND p.policyname <> 'nl2sql_examples_access'
 ORDER BY p.policyname;
SQL
}
# stale_oid_probe CLUSTER DB: example 5 reads a table dropped in the source; its relations hold
# that table's old OID, which pg_dump writes as a number and pg_restore reads back as is. In a
# restored cluster the OID counter is behind it: large objects take OIDs up to the one before,
# then a new table takes that OID, readable by dba_analyst. Prints "oid N: table T; dba_analyst
# sees: IDS" (or why the probe could not take the OID).
stale_oid_probe() {
    cl_psql "$1" -d "$2" <<'SQL'
SET client_min_messages = warning;
DO $$
DECLARE
    stale oid := (SELECT relations[1]::oid FROM nl2sql_examples WHERE id = 5);
    got oid;
    los oid[] := '{}';
BEGIN
    IF EXISTS (SELECT FROM pg_class WHERE oid = stale) THEN
        RAISE WARNING 'probe: % already names %', stale, stale::regclass;
        RETURN;
    END IF;
    LOOP
        got := lo_create(0);
        los := los || got;
        EXIT WHEN got::bigint >= stale::bigint - 1 OR cardinality(los) > 100000;
    END LOOP;
    IF got::bigint = stale::bigint - 1 THEN
        CREATE TABLE public.stale_probe (id integer);
        GRANT SELECT ON public.stale_probe TO dba_analyst;
    END IF;
    PERFORM lo_unlink(l) FROM unnest(los) l;
END $$;
SELECT 'oid ' || (SELECT relations[1]::oid FROM nl2sql_examples WHERE id = 5) || ': table ' ||
       coalesce((SELECT relations[1]::text FROM nl2sql_examples WHERE id = 5 AND EXISTS (SELECT FROM pg_class c WHERE c.oid = relations[1])), 'none');
SET ROLE dba_analyst;
SELECT 'dba_analyst sees: ' || coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM nl2sql_examples;
SQL
}

# The column option pg_attver. PostgreSQL 15.20 (a minor release of November 2026) records it on
# every column; 17.11 (this machine's 17: Debian's pool serves no newer one) does not know it, so
# its pg_dump copies it and its server refuses it (ERROR: unrecognized parameter "pg_attver"):
# pg_upgrade fails at "Restoring database schemas", and so does a restore of 17.11's pg_dump.
# A server's pg_dump knows the option when the server records it (15.20's leaves it out of dumps).
# attver_known MAJOR: true when that major's release here knows pg_attver.
attver_known() { grep -qa 'pg_attver' "/usr/lib/postgresql/$1/bin/pg_dump"; }
# attver_strip CLUSTER: removes pg_attver from the user columns of every database of the cluster
# (a superuser's UPDATE of pg_attribute: the option cannot be RESET), so that an older minor
# release of the new major can take them. A work-around for this machine, not a documented step.
attver_strip() {
    local db n=0
    for db in $(cl_psql "$1" -c "SELECT datname FROM pg_database WHERE datallowconn"); do
        n=$((n + $(cl_psql "$1" -d "$db" -c "WITH u AS (UPDATE pg_attribute SET attoptions = (SELECT array_agg(o) FROM unnest(attoptions) o WHERE o NOT LIKE 'pg_attver=%') WHERE attrelid >= 16384 AND attoptions::text LIKE '%pg_attver=%' RETURNING 1) SELECT count(*) FROM u")))
    done
    echo "$n"
}
# dba_finish CLUSTER...: no crash in each cluster's log, then the count line; the exit status is
# the test's (0 when nothing failed).
dba_finish() {
    local n crash
    for n in "$@"; do
        crash=$(cl_crashed "$n")
        [[ -z $crash ]] && ok "no crash in the $n cluster's log" || bad "the $n cluster's log tells of a crash" "$crash"
    done
    echo "$me: $pass passed, $fail failed ($(($(date +%s) - t_all)) s)"
    [[ $fail -eq 0 ]]
}
