#!/usr/bin/env bash
# Installs the extension into the PostgreSQL (14 to 18) that pg_config names (`make install`).
#
#   scripts/install.sh [--no-build] [--dry-run]
#
# Which PostgreSQL: $PG_CONFIG if set (a path, or a command on PATH); else the first `pg_config`
# on PATH that reports the major of TURBOINFER_PG_MAJOR (default 15; scripts/pgmajor.sh); else
# Debian's /usr/lib/postgresql/MAJOR/bin/pg_config. The major built for is the target's (any of
# 14 to 18). The library is built once against the server headers of $TURBOINFER_BUILD_PG_CONFIG
# (default: Debian's /usr/lib/postgresql/MAJOR/bin/pg_config when installed, the one `cargo pgrx
# init` registered; else the target's), with `cargo pgrx package --features pgMAJOR`, which stages
# the files under target/release/turboinfer-pgMAJOR/; they are then copied into the target's
# `pg_config --pkglibdir` and `--sharedir`/extension. Any PostgreSQL of that major built with the
# usual options loads it (the magic block refuses a mismatch with a clear error). Each file is copied under a temporary name in its destination directory, then renamed
# over the old one: a backend that has the old library mapped keeps it (a copy in place could
# crash it), new backends load the new one.
#   --no-build  use the staged files of the last build (fails if there are none)
#   --dry-run   print the resolved pg_config and the files it would install, change nothing
# Installs no model: `make install` runs `make fetch-model` after this script.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
me="install.sh"
. "$here/pgmajor.sh" # PG_MAJOR: TURBOINFER_PG_MAJOR, the default target's major
export PATH="$HOME/.cargo/bin:$PATH"

die() { echo "$me: error: $*" >&2; exit 1; }
say() { echo "$me: $*" >&2; }

build=1
dry=0
for a in "$@"; do
    case $a in
        --no-build) build=0 ;;
        --dry-run) dry=1 ;;
        *) echo "usage: $0 [--no-build] [--dry-run]" >&2; exit 2 ;;
    esac
done

# debian_pgc MAJOR: Debian's (and scripts/setup-pg.sh's) pg_config of that major.
debian_pgc() { echo "/usr/lib/postgresql/$1/bin/pg_config"; }
# major PG_CONFIG: the major version it reports ("15"), or "" if it cannot run.
major() {
    local v
    v=$("$1" --version 2>/dev/null) || return 0
    [[ $v =~ ^PostgreSQL\ ([0-9]+) ]] && echo "${BASH_REMATCH[1]}"
    return 0
}

# The target pg_config.
pgc=${PG_CONFIG:-}
if [[ -n $pgc ]]; then
    if [[ $pgc != */* ]]; then
        p=$(command -v "$pgc" || true)
        [[ -n $p ]] || die "PG_CONFIG=$pgc: no such command on PATH"
        pgc=$p
    fi
    [[ -x $pgc && -f $pgc ]] || die "PG_CONFIG=$pgc is not an executable file"
    from="PG_CONFIG"
else
    p=$(command -v pg_config || true)
    dpgc=$(debian_pgc "$PG_MAJOR")
    if [[ -n $p && $(major "$p") == "$PG_MAJOR" ]]; then
        pgc=$p
        from="pg_config on PATH"
    elif [[ -x $dpgc ]]; then
        [[ -z $p ]] || say "the pg_config on PATH ($p) is not PostgreSQL $PG_MAJOR: using $dpgc"
        pgc=$dpgc
        from="Debian's PostgreSQL $PG_MAJOR"
    else
        die "no PostgreSQL $PG_MAJOR found: no pg_config on PATH reports $PG_MAJOR and $dpgc is missing; set PG_CONFIG=/path/to/pg_config (or run 'make setup-pg PG_MAJOR=$PG_MAJOR' for Debian's layout)"
    fi
fi
v=$("$pgc" --version 2>&1) || die "$pgc --version failed: $v"
tmajor=$(major "$pgc")
pg_major_valid "$tmajor" || die "$pgc is $v; TurboInfer supports PostgreSQL ${PG_MAJORS_SUPPORTED// /, }"
libdir=$("$pgc" --pkglibdir) || die "$pgc --pkglibdir failed"
extdir=$("$pgc" --sharedir)/extension || die "$pgc --sharedir failed"
say "target: $v ($from: $pgc)"

# The build's pg_config (server headers) and where `cargo pgrx package` stages its files.
bpgc=${TURBOINFER_BUILD_PG_CONFIG:-}
if [[ -z $bpgc ]]; then
    bpgc=$(debian_pgc "$tmajor")
    [[ -x $bpgc ]] || bpgc=$pgc
fi
[[ $(major "$bpgc") == "$tmajor" ]] || die "TURBOINFER_BUILD_PG_CONFIG=$bpgc is not PostgreSQL $tmajor (the target's major)"
stage="$root/target/release/turboinfer-pg$tmajor"
slib="$stage$("$bpgc" --pkglibdir)"
sext="$stage$("$bpgc" --sharedir)/extension"

if [[ $build -eq 1 && $dry -eq 0 ]]; then
    [[ -f $("$bpgc" --includedir-server)/postgres.h ]] ||
        die "no PostgreSQL $tmajor server headers for $bpgc (Debian: apt-get install postgresql-server-dev-$tmajor, or 'make setup-pg PG_MAJOR=$tmajor')"
    say "building with cargo pgrx package --features pg$tmajor (headers of $bpgc)"
    log=$(mktemp)
    if ! (cd "$root" && cargo pgrx package --pg-config "$bpgc" --features "pg$tmajor") >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        rm -f "$log"
        die "cargo pgrx package failed (output above)"
    fi
    rm -f "$log"
fi

files=("$slib/turboinfer.so" "$sext/turboinfer.control")
# The staged version's install script and the upgrade scripts (turboinfer--A--B.sql, from sql/);
# the install script of an older version, left in the stage by an earlier build, is not copied.
version=$(sed -n "s/^default_version = '\([^']*\)'$/\1/p" "$sext/turboinfer.control" 2>/dev/null || true)
shopt -s nullglob
sql=()
[[ -z $version ]] || sql=("$sext"/turboinfer--"$version".sql "$sext"/turboinfer--*--*.sql)
shopt -u nullglob
if [[ $dry -eq 0 || -f ${files[0]} ]]; then
    for f in "${files[@]}" "${sql[0]:-$sext/turboinfer--VERSION.sql}"; do
        [[ -f $f ]] || die "$f is missing: build first (without --no-build)"
    done
fi
files+=("${sql[@]}")

# put SRC DESTDIR: copies SRC into DESTDIR under a temporary name, then renames it into place.
put() {
    local src=$1 dir=$2 base tmp
    base=$(basename "$src")
    tmp="$dir/.$base.tmp.$$"
    install -m 644 "$src" "$tmp" || { rm -f "$tmp"; die "cannot write $tmp"; }
    [[ $base != *.so ]] || chmod 755 "$tmp"
    mv -f "$tmp" "$dir/$base" || { rm -f "$tmp"; die "cannot rename $tmp to $dir/$base"; }
    echo "  $dir/$base"
}

if [[ $dry -eq 1 ]]; then
    echo "would install (pg_config $pgc):"
    echo "  $libdir/turboinfer.so"
    echo "  $extdir/turboinfer.control"
    for f in "${sql[@]}"; do echo "  $extdir/$(basename "$f")"; done
    exit 0
fi

install -d -m 755 "$libdir" "$extdir" || die "cannot create $libdir or $extdir (run as root, or as the owner of that PostgreSQL)"
echo "installed (pg_config $pgc):"
put "$slib/turboinfer.so" "$libdir"
for f in "${files[@]:1}"; do put "$f" "$extdir"; done
