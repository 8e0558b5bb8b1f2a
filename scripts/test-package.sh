#!/usr/bin/env bash
# The Debian package end to end (issue 15, "A package" and "Install anywhere"), as root, for the
# major of TURBOINFER_PG_MAJOR (default 15; scripts/pgmajor.sh): postgresql-MAJOR-turboinfer and
# the tools' package turboinfer it depends on.
#   1. `make package` (scripts/build-package.sh MAJOR): contents (the extension's package holds
#      files of that major only, so that two majors' install side by side), Depends, no model, no
#      maintainer script;
#   2. `dpkg -i` of both on this machine: the files land in Debian's layout of PostgreSQL MAJOR
#      and /usr/bin, the fetcher runs;
#   3. a fresh cluster that is not the project's (initdb as postgres into a temporary directory,
#      port $TURBOINFER_PKGTEST_PORT (default 54341, 54541 for 17), socket only, in its own directory):
#      CREATE EXTENSION, then a question answered without setting anything else (the default
#      model, turboinfer.model's default), which nl2sql_explain() and turboinfer_info() report;
#   4. the documented ways to set things cluster-wide (docs/install.md): ALTER SYSTEM fails before
#      the library is loaded (the documented pitfall), works after LOAD 'turboinfer'; a mistyped
#      turboinfer.modle is an ERROR (42602); ALTER ROLE / ALTER DATABASE ... SET reach a
#      non-superuser's session; with shared_preload_libraries = 'turboinfer' (restart) ALTER SYSTEM
#      works without LOAD, the postmaster has started no thread, and answers still come;
#   5. the cluster is stopped and removed, `dpkg -r` removes every file of both packages.
# Files of the package that existed before (e.g. from `make install`) are backed up first and put
# back at the end, also on failure, each by copy to a temporary name in its directory then rename
# (a backend that has turboinfer.so mapped keeps its old copy). Refuses to run if either package
# is already installed (it would remove someone's installation).
# Needs: models qwen2.5-coder-1.5b (the default; make install fetches it) and smollm2-135m.
# With no default model the step "answer without settings" uses smollm2-135m via ALTER SYSTEM,
# said in the output.
#   scripts/test-package.sh [--no-build]     (--no-build: package the last build's files)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
MODELS=/var/lib/turboinfer/models
DEFAULT_MODEL=qwen2.5-coder-1.5b
SMALL=smollm2-135m
me="test-package.sh"
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh" # and pgmajor.sh: PG_MAJOR, PGBIN
PORT=${TURBOINFER_PKGTEST_PORT:-$(pg_port 54341)}
PKG=postgresql-$PG_MAJOR-turboinfer
TOOLS=turboinfer # the CLI and fetcher, shared by every major's package (build-package.sh)
# elapsed T0: seconds since T0 (date +%s.%N), one decimal.
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

build_arg=()
case "${1:-}" in
    "") ;;
    --no-build) build_arg=(--no-build) ;;
    *) echo "usage: $0 [--no-build]" >&2; exit 2 ;;
esac
[[ $(id -u) -eq 0 ]] || die "run as root (dpkg -i, initdb as postgres)"
[[ $PORT =~ ^[0-9]+$ ]] || die "TURBOINFER_PKGTEST_PORT must be a number, not '$PORT'"
[[ -x $PGBIN/initdb ]] || die "PostgreSQL $PG_MAJOR is not installed ($PGBIN/initdb missing); run 'make setup-pg PG_MAJOR=$PG_MAJOR'"
[[ -f $MODELS/$SMALL.gguf ]] || die "model $SMALL is not installed; run: scripts/turboinfer-fetch-model $SMALL"
for p in "$PKG" "$TOOLS"; do
    status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
    [[ $status != i* ]] ||
        die "$p is already installed (status '$status'): this test installs and removes it; dpkg -r $p first"
done

work=$(mktemp -d /tmp/turboinfer-pkgtest.XXXXXX)
chmod 755 "$work"
data=$work/data
run=$work/run
log=$work/log/postgresql.log
backup=$work/backup
mkdir -p "$backup"
pc_bin=$PGBIN pc_dir=$work pc_port=$PORT # the private cluster (testlib.sh)
installed=0
backed=()

# q [psql args...]: psql on the test cluster as postgres (tuples only, unaligned).
q() { pc_psql "$@"; }
# qv: as q, errors with their SQLSTATE (VERBOSITY verbose), stderr merged, never fails.
qv() { "$PGBIN/psql" -X -q -At -v VERBOSITY=verbose -h "$run" -p "$PORT" -U postgres "$@" 2>&1 || true; }

# put_back SRC DEST: SRC copied next to DEST under a temporary name, then renamed over DEST.
put_back() {
    local src=$1 dest=$2 tmp
    tmp="$(dirname "$dest")/.$(basename "$dest").restore.$$"
    cp -a "$src" "$tmp" && mv -f "$tmp" "$dest"
}

cleanup() {
    local rc=$?
    pc_stop
    if [[ $installed -eq 1 ]]; then
        dpkg -r "$PKG" "$TOOLS" >"$work/dpkg-r.log" 2>&1 || { say "cleanup: dpkg -r $PKG $TOOLS failed:"; cat "$work/dpkg-r.log" >&2; }
    fi
    local f
    for f in "${backed[@]}"; do
        put_back "$backup$f" "$f" || say "cleanup: could not restore $f (a copy is in $backup$f)"
    done
    if [[ -z $(find "$backup" -type f -print -quit) || $rc -eq 0 ]]; then rm -rf "$work"; else say "kept $work"; fi
    exit "$rc"
}
trap cleanup EXIT

# -----------------------------------------------------------------------------------------------
t=$(date +%s.%N)
debs=$("$here/build-package.sh" "${build_arg[@]}" "$PG_MAJOR") || die "make package failed"
mapfile -t debs <<<"$debs"
tdeb=${debs[0]:-} deb=${debs[1]:-}
[[ ${#debs[@]} -eq 2 && -f $tdeb && -f $deb ]] || die "build-package.sh printed '${debs[*]}', not the paths of two .deb files"
ok "make package: $(basename "$tdeb") ($(du -h "$tdeb" | cut -f1)), $(basename "$deb") ($(du -h "$deb" | cut -f1)) ($(elapsed "$t")s)"

# files_of DEB: the regular files the package installs, one absolute path a line.
files_of() { dpkg-deb -c "$1" | awk '$1 ~ /^-/ { sub(/^\./, "", $6); print $6 }'; }
pfiles=$(files_of "$deb")
files=$(printf '%s\n' "$pfiles" "$(files_of "$tdeb")")
want=("/usr/lib/postgresql/$PG_MAJOR/lib/turboinfer.so" "/usr/share/postgresql/$PG_MAJOR/extension/turboinfer.control"
    /usr/bin/turboinfer /usr/bin/turboinfer-fetch-model)
version=$(awk -F'"' '/^\[/ { s = $0 } s == "[package]" && /^version *=/ { print $2; exit }' "$root/Cargo.toml")
want+=("/usr/share/postgresql/$PG_MAJOR/extension/turboinfer--$version.sql")
missing=()
for f in "${want[@]}"; do grep -qxF "$f" <<<"$files" || missing+=("$f"); done
if [[ ${#missing[@]} -eq 0 ]]; then ok "package holds the .so, control, SQL, CLI and fetcher"; else bad "package lacks ${missing[*]}" "$files"; fi
if grep -Eq '\.(gguf|kx16|sparse)$' <<<"$files"; then bad "package holds a model file" "$files"; else ok "package holds no model"; fi
# Another major's package installs beside this one only if no path is in both.
others=$(grep -Ev "^/usr/(lib/postgresql/$PG_MAJOR|share/postgresql/$PG_MAJOR|share/doc/$PKG)/" <<<"$pfiles" || true)
if [[ -z $others ]]; then
    ok "$PKG holds files of PostgreSQL $PG_MAJOR only (beside another major's package)"
else
    bad "$PKG holds files outside PostgreSQL $PG_MAJOR's directories (another major's package would conflict)" "$others"
fi
ctl=$(dpkg-deb -f "$deb" Package Version Depends)
tctl=$(dpkg-deb -f "$tdeb" Package Version Depends)
if grep -qx "Package: $PKG" <<<"$ctl" && grep -qx "Version: $version-1" <<<"$ctl" &&
    grep -q "^Depends: postgresql-$PG_MAJOR, $TOOLS (= $version-1)," <<<"$ctl" &&
    grep -qx "Package: $TOOLS" <<<"$tctl" && grep -qx "Version: $version-1" <<<"$tctl" && grep -q 'python3-pip' <<<"$tctl"; then
    ok "control: $(tr '\n' ';' <<<"$ctl") / $(tr '\n' ';' <<<"$tctl")"
else
    bad "control fields" "$ctl"$'\n'"$tctl"
fi
info=$(dpkg-deb -I "$deb"; dpkg-deb -I "$tdeb")
if grep -Eq '(preinst|postinst|prerm|postrm)' <<<"$info"; then bad "package has maintainer scripts" "$info"; else ok "no maintainer scripts (installing downloads nothing)"; fi

# -----------------------------------------------------------------------------------------------
for f in $files; do
    if [[ -e $f ]]; then
        mkdir -p "$backup$(dirname "$f")"
        cp -a "$f" "$backup$f"
        backed+=("$f")
    fi
done
say "backed up ${#backed[@]} existing file(s): ${backed[*]:-none}"
t=$(date +%s.%N)
installed=1
out=$(dpkg -i "$tdeb" "$deb" 2>&1) || { bad "dpkg -i" "$out"; exit 1; }
status=$(dpkg-query -W -f='${db:Status-Abbrev} ' "$PKG" "$TOOLS" 2>/dev/null || true)
if [[ $status == "ii  ii  " ]]; then ok "dpkg -i $TOOLS $PKG: status '$status' ($(elapsed "$t")s)"; else bad "dpkg -i: status '$status'" "$out"; fi
miss=()
for f in $files; do [[ -f $f ]] || miss+=("$f"); done
if [[ ${#miss[@]} -eq 0 ]]; then ok "every file of the package is installed"; else bad "not installed: ${miss[*]}"; fi
out=$(/usr/bin/turboinfer-fetch-model --list 2>&1) || true
if grep -q "^$SMALL .*installed" <<<"$out"; then ok "turboinfer-fetch-model --list runs from /usr/bin"; else bad "turboinfer-fetch-model --list" "$out"; fi

# -----------------------------------------------------------------------------------------------
t=$(date +%s.%N)
pc_init
pc_start
pm=$(as_pg head -n 1 "$data/postmaster.pid")
ok "fresh cluster: initdb + start on port $PORT, socket $run ($(elapsed "$t")s)"
q -c "CREATE DATABASE shop"
q -d shop -c "CREATE TABLE users (id int PRIMARY KEY, name text NOT NULL, country text)" \
    -c "INSERT INTO users SELECT g, 'user ' || g, 'FR' FROM generate_series(1, 10) g"
out=$(q -d shop -c "CREATE EXTENSION turboinfer" -c "SELECT extversion FROM pg_extension WHERE extname = 'turboinfer'" 2>&1) || true
if [[ $out == "$version" ]]; then ok "CREATE EXTENSION turboinfer (version $out)"; else bad "CREATE EXTENSION" "$out"; fi

# Without any setting: the default model, if installed (else the small one, said so).
question='how many users are there?'
if [[ -f $MODELS/$DEFAULT_MODEL.gguf ]]; then
    expect_model=$DEFAULT_MODEL
else
    say "the default model $DEFAULT_MODEL is not installed: this step uses $SMALL through ALTER SYSTEM (turboinfer-fetch-model installs the default)"
    expect_model=$SMALL
    q -d shop -c "LOAD 'turboinfer'" -c "ALTER SYSTEM SET turboinfer.model = '$SMALL'" -c "SELECT pg_reload_conf()" >/dev/null
fi
t=$(date +%s.%N)
sql=$(q -d shop -c "SELECT nl2sql('$question')" 2>&1) || true
secs=$(elapsed "$t")
if [[ $sql =~ ^SELECT && $sql == *users* ]]; then ok "nl2sql('$question') with nothing set: $sql (${secs}s, $expect_model)"; else bad "nl2sql with nothing set" "$sql"; fi
if [[ $expect_model == "$DEFAULT_MODEL" ]]; then
    res=$(q -d shop -c "$sql" 2>&1) || true
    if [[ $res == 10 ]]; then ok "the answer runs and counts 10 users"; else bad "running the answer gave '$res'" "$sql"; fi
    out=$(q -d shop -c "SELECT e->>'model', e->>'model_default' FROM nl2sql_explain('$question') e" \
        -c "SELECT i->>'model_setting', i->>'model_default' FROM turboinfer_info() i" 2>&1) || true
    if [[ $out == "$MODELS/$DEFAULT_MODEL.gguf|true"$'\n'"$DEFAULT_MODEL|true" ]]; then
        ok "nl2sql_explain and turboinfer_info say the default model is used"
    else
        bad "nl2sql_explain / turboinfer_info model report" "$out"
    fi
    out=$(q -d shop -c "LOAD 'turboinfer'" -c "SELECT boot_val || '|' || source FROM pg_settings WHERE name = 'turboinfer.model'" 2>&1) || true
    if [[ $out == "$DEFAULT_MODEL|default" ]]; then ok "pg_settings: turboinfer.model defaults to $DEFAULT_MODEL"; else bad "pg_settings turboinfer.model" "$out"; fi
fi

# ALTER SYSTEM before the session has loaded the library: refused up to PostgreSQL 16 (42704, the
# documented pitfall), accepted from 17 (which writes unrecognized custom settings into
# postgresql.auto.conf); after LOAD 'turboinfer' (the documented step) accepted on every major, in
# force after pg_reload_conf().
out=$(qv -d shop -c "ALTER SYSTEM SET turboinfer.model = '$SMALL'")
if [[ $PG_MAJOR -le 16 ]]; then
    if [[ $out == *'42704'*'unrecognized configuration parameter "turboinfer.model"'* ]]; then
        ok "ALTER SYSTEM before LOAD: 42704 unrecognized (the documented pitfall of PostgreSQL $PG_MAJOR)"
    else
        bad "ALTER SYSTEM before LOAD was expected to fail with 42704 on PostgreSQL $PG_MAJOR" "$out"
    fi
elif [[ -z $out ]]; then
    ok "ALTER SYSTEM before LOAD: accepted (PostgreSQL $PG_MAJOR takes unrecognized custom settings)"
    q -d shop -c "ALTER SYSTEM RESET turboinfer.model"
else
    bad "ALTER SYSTEM before LOAD was expected to succeed on PostgreSQL $PG_MAJOR" "$out"
fi
out=$(q -d shop -c "LOAD 'turboinfer'" -c "ALTER SYSTEM SET turboinfer.model = '$SMALL'" -c "SELECT pg_reload_conf()" 2>&1) || true
out2=$(q -d shop -c "SELECT i->>'model_setting', i->>'model_default', i->>'model_path' FROM turboinfer_info() i" 2>&1) || true
if [[ $out == t && $out2 == "$SMALL|false|$MODELS/$SMALL.gguf" ]]; then
    ok "LOAD 'turboinfer'; ALTER SYSTEM SET turboinfer.model; pg_reload_conf(): a new session uses $SMALL"
else
    bad "ALTER SYSTEM after LOAD" "$out"$'\n'"$out2"
fi
q -d shop -c "LOAD 'turboinfer'" -c "ALTER SYSTEM RESET turboinfer.model" -c "SELECT pg_reload_conf()" >/dev/null

# A mistyped name under the reserved prefix (PostgreSQL 15 and later) is an ERROR once the library
# is loaded: SET and ALTER DATABASE ... SET say 42602 (reserved prefix); ALTER SYSTEM says 42704
# (unrecognized) up to 16, 42602 from 17 (it checks custom names as SET does).
invalid='invalid configuration parameter name "turboinfer.modle"'
unrecognized='unrecognized configuration parameter "turboinfer.modle"'
if [[ $PG_MAJOR -ge 17 ]]; then sys_state=42602 sys_msg=$invalid; else sys_state=42704 sys_msg=$unrecognized; fi
out=$(qv -d shop -c "LOAD 'turboinfer'" -c "SET turboinfer.modle = 'x'")
out2=$(qv -d shop -c "LOAD 'turboinfer'" -c "ALTER DATABASE shop SET turboinfer.modle = 'x'")
out3=$(qv -d shop -c "LOAD 'turboinfer'" -c "ALTER SYSTEM SET turboinfer.modle = 'x'")
if [[ $PG_MAJOR -eq 14 ]]; then
    say "PostgreSQL 14 has no reserved prefixes (MarkGUCPrefixReserved is 15's): a mistyped turboinfer.* name is a placeholder there, not checked"
    # Those placeholders were stored: removed, or every later session warns about them at LOAD.
    q -d shop -c "ALTER DATABASE shop RESET turboinfer.modle" -c "ALTER SYSTEM RESET turboinfer.modle" \
        -c "SELECT pg_reload_conf()" >/dev/null
elif [[ $out == *42602*"$invalid"* && $out2 == *42602*"$invalid"* && $out3 == *"$sys_state"*"$sys_msg"* ]]; then
    ok "turboinfer.modle: SET and ALTER DATABASE SET fail with 42602 (reserved prefix), ALTER SYSTEM SET with $sys_state"
else
    bad "mistyped turboinfer.modle was expected to fail (42602, 42602, $sys_state)" "$out"$'\n'"$out2"$'\n'"$out3"
fi

# ALTER ROLE / ALTER DATABASE ... SET reach a non-superuser's session (no LOAD needed).
q -d shop -c "CREATE ROLE app LOGIN" -c "GRANT SELECT ON users TO app" \
    -c "ALTER ROLE app SET turboinfer.model = '$SMALL'" -c "ALTER DATABASE shop SET turboinfer.max_new_tokens = 100"
out=$("$PGBIN/psql" -X -q -At -h "$run" -p "$PORT" -U app -d shop \
    -c "SELECT i->>'model_setting' FROM turboinfer_info() i" -c "SHOW turboinfer.max_new_tokens" 2>&1) || true
if [[ $out == "$SMALL"$'\n'100 ]]; then
    ok "ALTER ROLE app SET turboinfer.model, ALTER DATABASE shop SET turboinfer.max_new_tokens: in app's session"
else
    bad "ALTER ROLE / DATABASE settings in a non-superuser session" "$out"
fi
q -d shop -c "ALTER ROLE app RESET turboinfer.model" -c "ALTER DATABASE shop RESET turboinfer.max_new_tokens"

# shared_preload_libraries (documented alternative): safe to load in the postmaster (no thread,
# no model at load), then every session knows the settings: ALTER SYSTEM without LOAD.
t=$(date +%s.%N)
q -c "ALTER SYSTEM SET shared_preload_libraries = 'turboinfer'"
pc_stop
pc_start
pm=$(as_pg head -n 1 "$data/postmaster.pid")
threads=$(awk '/^Threads:/ { print $2 }' "/proc/$pm/status")
out=$(q -d shop -c "SHOW shared_preload_libraries" -c "ALTER SYSTEM SET turboinfer.threads = 1" -c "SELECT pg_reload_conf()" 2>&1) || true
out2=$(qv -d shop -c "SET turboinfer.modle = 'x'")
# (PostgreSQL 14: no reserved prefix, so no typo error; see above.)
if [[ $threads == 1 && $out == turboinfer$'\n't && ($out2 == *42602* || $PG_MAJOR -eq 14) ]]; then
    ok "shared_preload_libraries = 'turboinfer': restart ok, postmaster has 1 thread, ALTER SYSTEM without LOAD, typo is 42602 ($(elapsed "$t")s)"
else
    bad "shared_preload_libraries (postmaster threads: $threads)" "$out"$'\n'"$out2"
fi
t=$(date +%s.%N)
out=$(q -d shop -c "SHOW turboinfer.threads" -c "SELECT nl2sql('$question')" 2>&1) || true
if [[ $out == 1$'\n'SELECT*users* ]]; then ok "preloaded: turboinfer.threads = 1 in force, nl2sql answers ($(elapsed "$t")s)"; else bad "preloaded answer" "$out"; fi
threads=$(awk '/^Threads:/ { print $2 }' "/proc/$pm/status")
[[ $threads == 1 ]] && ok "postmaster still has 1 thread after answers" || bad "postmaster has $threads threads after answers"

loglines=$(cat "$log")
if grep -Eq 'terminated by signal|PANIC|server process .* was terminated' <<<"$loglines"; then
    bad "server log reports a crash" "$(grep -E 'terminated by signal|PANIC' <<<"$loglines")"
else
    ok "no backend crash in the server log"
fi

# -----------------------------------------------------------------------------------------------
pc_stop
rm -rf "$data"
[[ ! -e $data ]] && ok "test cluster stopped and removed" || bad "test cluster data directory left behind"
t=$(date +%s.%N)
out=$(dpkg -r "$PKG" "$TOOLS" 2>&1) || bad "dpkg -r" "$out"
installed=0
status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$PKG" "$TOOLS" 2>/dev/null || true)
left=()
for f in $files; do [[ ! -e $f ]] || left+=("$f"); done
if [[ $status != *ii* && ${#left[@]} -eq 0 ]]; then
    ok "dpkg -r $PKG $TOOLS: every file of the packages is gone (status '${status:-none}', $(elapsed "$t")s)"
else
    bad "dpkg -r left ${left[*]:-nothing} (status '$status')"
fi
[[ -f $MODELS/$SMALL.gguf ]] && ok "models are not touched by dpkg -r" || bad "dpkg -r removed a model"

# The files that were there before (e.g. from make install), back in place and unchanged.
diffs=()
for f in "${backed[@]}"; do
    put_back "$backup$f" "$f" || die "could not restore $f (a copy is in $backup$f)"
    cmp -s "$backup$f" "$f" || diffs+=("$f")
done
if [[ ${#diffs[@]} -eq 0 ]]; then ok "restored ${#backed[@]} file(s) that were there before"; else bad "restored files differ: ${diffs[*]}"; fi
backed=()

echo "$me: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
