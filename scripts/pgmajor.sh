# Which PostgreSQL major version a script works on (sourced, after setting `me`, by cluster.sh,
# install.sh, build-package.sh, regress.sh and the script tests). One place for it:
#
#   TURBOINFER_PG_MAJOR   14, 15, 16, 17 or 18; default 15 (Debian 12's own PostgreSQL, the one
#                         the project's cluster always ran). The Makefile passes PG_MAJOR as it.
#
# Sourcing it validates the major (one-line error otherwise) and sets
#   PG_MAJOR   the major
#   PGBIN      its binaries: $TURBOINFER_PGBIN, else Debian's /usr/lib/postgresql/$PG_MAJOR/bin
#              (where Debian, apt.postgresql.org and scripts/setup-pg.sh put every major)
#   PG_SUFFIX  "" for 15, "-$PG_MAJOR" for another major: the project's paths of 15 stay where
#              they always were, another major's sit beside them
# and defines pg_cluster (the project's cluster of this major) and pg_port (test ports).

# The majors TurboInfer builds for (pgrx 0.18's features pg14..pg18 in Cargo.toml).
PG_MAJORS_SUPPORTED="14 15 16 17 18"

# pg_major_valid M: true when M is one of PG_MAJORS_SUPPORTED.
pg_major_valid() { [[ " $PG_MAJORS_SUPPORTED " == *" $1 "* ]]; }

PG_MAJOR=${TURBOINFER_PG_MAJOR:-15}
pg_major_valid "$PG_MAJOR" || {
    echo "${me:-pgmajor.sh}: error: TURBOINFER_PG_MAJOR (PG_MAJOR) must be one of $PG_MAJORS_SUPPORTED, not '$PG_MAJOR'" >&2
    exit 1
}
PGBIN=${TURBOINFER_PGBIN:-/usr/lib/postgresql/$PG_MAJOR/bin}
if [[ $PG_MAJOR == 15 ]]; then PG_SUFFIX=""; else PG_SUFFIX="-$PG_MAJOR"; fi

# pg_cluster: the project's cluster of PG_MAJOR (scripts/cluster.sh), each overridable by its
# TURBOINFER_PG* variable: DATA, RUN (socket directory), LOG, PORT. 15: /var/lib/turboinfer/cluster,
# run, log/postgresql.log, port 54329 (as always); another major NN: cluster-NN, run-NN,
# log/postgresql-NN.log, port 54300 + NN (54317 for 17), so that clusters of two majors can run
# at the same time.
pg_cluster() {
    local base=/var/lib/turboinfer port=54329
    [[ $PG_MAJOR == 15 ]] || port=$((54300 + PG_MAJOR))
    DATA=${TURBOINFER_PGDATA:-$base/cluster$PG_SUFFIX}
    RUN=${TURBOINFER_PGRUN:-$base/run$PG_SUFFIX}
    LOG=${TURBOINFER_PGLOG:-$base/log/postgresql$PG_SUFFIX.log}
    PORT=${TURBOINFER_PGPORT:-$port}
}

# pg_port BASE: the port of a test's private server (BASE is 15's) for PG_MAJOR: BASE + 100 per
# major above 15 (54341 -> 54541 for 17), so that the same test can run for two majors at once
# without a clash, and clear of the project's clusters (54314-54318, 54329).
pg_port() { echo $(($1 + 100 * (PG_MAJOR - 15))); }
