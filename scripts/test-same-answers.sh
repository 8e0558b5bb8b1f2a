#!/usr/bin/env bash
# The same answers on two PostgreSQL majors (issue #61): the demo questions of the scorecard
# (benches/scorecard/questions.json, 27 questions over demo/schema.sql + demo/data.sql) asked with
# nl2sql() and the default model on the project's cluster of PostgreSQL 15 and on that of
# TURBOINFER_PG_MAJOR (the Makefile's PG_MAJOR): every generated SQL must be byte for byte the
# same. The engine computes the same bits whatever the server (docs/numerics.md); what a major
# could change is the prompt (catalog reads, privileges, comments, statistics) and the
# validation and repair around the model (parse analysis, privileges): a different SQL on the
# other major is a real difference of ours.
#
#   scripts/test-same-answers.sh          (both clusters running: make cluster-start [PG_MAJOR=NN])
#
# Each cluster gets the database turboinfer_same (dropped first, left for inspection), with the
# extension and turboinfer.model = qwen2.5-coder-1.5b. About 2 minutes on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
me="test-same-answers.sh"
. "$here/testlib.sh"
DB=turboinfer_same
MODEL=qwen2.5-coder-1.5b
REFERENCE=15
other=$PG_MAJOR # TURBOINFER_PG_MAJOR, through testlib.sh (scripts/pgmajor.sh)
[[ $other != "$REFERENCE" ]] || die "TURBOINFER_PG_MAJOR (PG_MAJOR) names the major to compare with $REFERENCE: set it to another one"
[[ -f /var/lib/turboinfer/models/$MODEL.gguf ]] || die "model $MODEL is not installed (make fetch-model)"
work=$(mktemp -d /tmp/turboinfer-same.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The questions, one per line (the file is the scorecard's; none spans lines).
python3 -c 'import json, sys
for q in json.load(open(sys.argv[1]))["questions"]:
    print(q["question"])' "$root/benches/scorecard/questions.json" >"$work/questions"
n=$(wc -l <"$work/questions")
[[ $n -gt 0 ]] || die "no questions in benches/scorecard/questions.json"

# answers MAJOR: the demo database on that major's cluster, then one line per question:
# the generated SQL with its newlines as \n (or the error).
answers() {
    local major=$1 q t0
    local psql=(env TURBOINFER_PG_MAJOR="$major" "$here/cluster.sh" psql -X -q -At -d "$DB")
    env TURBOINFER_PG_MAJOR="$major" "$here/demo-db.sh" "$DB" >/dev/null ||
        die "cannot load the demo database into PostgreSQL $major's cluster (make cluster-start PG_MAJOR=$major)"
    "${psql[@]}" -v ON_ERROR_STOP=1 -c "CREATE EXTENSION turboinfer" \
        -c "ALTER DATABASE $DB SET turboinfer.model = '$MODEL'" >/dev/null
    t0=$(date +%s)
    while IFS= read -r q; do
        printf "SELECT replace(nl2sql(:'q'), E'\\\\n', '\\\\n');\n" |
            "${psql[@]}" -v q="$q" 2>&1 | tr '\n' ' ' | sed 's/ $//'
        echo
    done <"$work/questions" >"$work/answers-$major"
    say "PostgreSQL $major: $n answers in $(($(date +%s) - t0)) s ($("${psql[@]}" -c 'SHOW server_version'))"
}

answers "$REFERENCE"
answers "$other"
if grep -q 'ERROR' "$work/answers-$REFERENCE"; then
    bad "PostgreSQL $REFERENCE answered every demo question" "$(grep -n 'ERROR' "$work/answers-$REFERENCE")"
else
    ok "PostgreSQL $REFERENCE answered every demo question ($n)"
fi
if cmp -s "$work/answers-$REFERENCE" "$work/answers-$other"; then
    ok "PostgreSQL $other generated the same SQL as $REFERENCE for all $n demo questions"
else
    bad "PostgreSQL $other generated other SQL than $REFERENCE" \
        "$(diff <(paste -d'|' "$work/questions" "$work/answers-$REFERENCE") <(paste -d'|' "$work/questions" "$work/answers-$other") || true)"
fi
echo "$me: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
