# Shared by the script tests (sourced, after setting `me` to the script's name): counters and
# the messages every test prints. `ok`/`bad` count checks; the script ends with its own summary.
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
