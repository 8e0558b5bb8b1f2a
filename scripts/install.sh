#!/usr/bin/env bash
# Installs the extension into the PostgreSQL 15 that pg_config names (`make install`).
#
#   scripts/install.sh [--no-build] [--dry-run]
#
# Which PostgreSQL: $PG_CONFIG if set (a path, or a command on PATH); else the first `pg_config`
# on PATH that reports PostgreSQL 15; else Debian's /usr/lib/postgresql/15/bin/pg_config. The
# library is built once against the server headers of $TURBOINFER_BUILD_PG_CONFIG (default:
# Debian's PostgreSQL 15 when installed, the one `cargo pgrx init` registered; else $PG_CONFIG),
# with `cargo pgrx package`, which stages the files under target/release/turboinfer-pg15/; they are
# then copied into the target's `pg_config --pkglibdir` and `--sharedir`/extension. Any PostgreSQL
# 15 built with the usual options loads it (the magic block refuses a mismatch with a clear
# error). Each file is copied under a temporary name in its destination directory, then renamed
# over the old one: a backend that has the old library mapped keeps it (a copy in place could
# crash it), new backends load the new one.
#   --no-build  use the staged files of the last build (fails if there are none)
#   --dry-run   print the resolved pg_config and the files it would install, change nothing
# Installs no model: `make install` runs `make fetch-model` after this script.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
me="install.sh"
DEBIAN_PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
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
    if [[ -n $p && $(major "$p") == 15 ]]; then
        pgc=$p
        from="pg_config on PATH"
    elif [[ -x $DEBIAN_PG_CONFIG ]]; then
        [[ -z $p ]] || say "the pg_config on PATH ($p) is not PostgreSQL 15: using $DEBIAN_PG_CONFIG"
        pgc=$DEBIAN_PG_CONFIG
        from="Debian's PostgreSQL 15"
    else
        die "no PostgreSQL 15 found: no pg_config on PATH reports 15 and $DEBIAN_PG_CONFIG is missing; set PG_CONFIG=/path/to/pg_config (or run 'make setup' for Debian's)"
    fi
fi
v=$("$pgc" --version 2>&1) || die "$pgc --version failed: $v"
[[ $(major "$pgc") == 15 ]] || die "$pgc is $v; this build of TurboInfer supports PostgreSQL 15 only"
libdir=$("$pgc" --pkglibdir) || die "$pgc --pkglibdir failed"
extdir=$("$pgc" --sharedir)/extension || die "$pgc --sharedir failed"
say "target: $v ($from: $pgc)"

# The build's pg_config (server headers) and where `cargo pgrx package` stages its files.
bpgc=${TURBOINFER_BUILD_PG_CONFIG:-}
if [[ -z $bpgc ]]; then
    if [[ -x $DEBIAN_PG_CONFIG ]]; then bpgc=$DEBIAN_PG_CONFIG; else bpgc=$pgc; fi
fi
[[ $(major "$bpgc") == 15 ]] || die "TURBOINFER_BUILD_PG_CONFIG=$bpgc is not PostgreSQL 15"
stage="$root/target/release/turboinfer-pg15"
slib="$stage$("$bpgc" --pkglibdir)"
sext="$stage$("$bpgc" --sharedir)/extension"

if [[ $build -eq 1 && $dry -eq 0 ]]; then
    [[ -f $("$bpgc" --includedir-server)/postgres.h ]] ||
        die "no PostgreSQL 15 server headers for $bpgc (Debian: apt-get install postgresql-server-dev-15, or 'make setup')"
    say "building with cargo pgrx package (headers of $bpgc)"
    log=$(mktemp)
    if ! (cd "$root" && cargo pgrx package --pg-config "$bpgc" --features pg15) >"$log" 2>&1; then
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
