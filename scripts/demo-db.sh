#!/usr/bin/env bash
# (Re)creates the demo shop database (default turboinfer_demo) from demo/schema.sql + demo/data.sql.
# Idempotent: drops the database (disconnecting sessions) and loads it again; the data is
# deterministic, so every load gives the same rows. Needs the cluster running.
set -euo pipefail
db=${1:-turboinfer_demo}
[[ $db =~ ^[a-z_][a-z0-9_]*$ ]] || { echo "demo-db.sh: error: bad database name '$db'" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
export PGOPTIONS="-c client_min_messages=warning"
psql=("$root/scripts/cluster.sh" psql -X -q -v ON_ERROR_STOP=1)
"${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
"${psql[@]}" -d "$db" -f "$root/demo/schema.sql" -f "$root/demo/data.sql"
"${psql[@]}" -d "$db" -At -c "
    SELECT format('%s: %s tables, %s users, %s products, %s orders, %s order items, %s reviews', current_database(),
                  (SELECT count(*) FROM pg_tables WHERE schemaname = 'public'),
                  (SELECT count(*) FROM users), (SELECT count(*) FROM products),
                  (SELECT count(*) FROM orders), (SELECT count(*) FROM order_items),
                  (SELECT count(*) FROM reviews))"
