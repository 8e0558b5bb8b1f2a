#!/usr/bin/env bash
# Builds the Debian packages of TurboInfer for one PostgreSQL major (PGDG naming) with dpkg-deb
# (`make package` runs it for every installed major).
#
#   scripts/build-package.sh [--no-build] [MAJOR]      prints the two .deb paths on stdout
#
# MAJOR: 14 to 18, default TURBOINFER_PG_MAJOR (default 15; scripts/pgmajor.sh). Two packages:
#   postgresql-MAJOR-turboinfer   the extension (turboinfer.so, turboinfer.control,
#                                 turboinfer--VERSION.sql and the upgrade scripts
#                                 turboinfer--OLD--VERSION.sql, the same for every major) staged by
#                                 `cargo pgrx package --features pgMAJOR`, in Debian's layout of that
#                                 major (/usr/lib/postgresql/MAJOR, /usr/share/postgresql/MAJOR: as
#                                 Debian, apt.postgresql.org and scripts/setup-pg.sh lay it out);
#                                 Depends: postgresql-MAJOR (Debian's server package, or what
#                                 Provides it) and turboinfer of the same version;
#   turboinfer                    the CLI (/usr/bin/turboinfer: inspect, pack, run models) and the
#                                 model fetcher (/usr/bin/turboinfer-fetch-model, python3 + pip at
#                                 run time), whatever the major: the packages of two majors (a
#                                 server upgraded with pg_upgrade) then install side by side.
# No model (fetched separately: turboinfer-fetch-model) and no maintainer scripts: installing the
# packages downloads nothing and starts nothing. Version: Cargo.toml's, Debian revision 1.
# Output: target/debian/turboinfer_VERSION-1_ARCH.deb and
# target/debian/postgresql-MAJOR-turboinfer_VERSION-1_ARCH.deb, printed in that order.
#   --no-build  package the files of the last build (fails if there are none)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
me="build-package.sh"
# dpkg-deb compression (TURBOINFER_DEB_COMPRESS): gzip by default, 15 s and 20 MB on the project
# machine, against 50 s and 13 MB for xz (use xz for a release).
COMPRESS=${TURBOINFER_DEB_COMPRESS:-gzip}
export PATH="$HOME/.cargo/bin:$PATH"

die() { echo "$me: error: $*" >&2; exit 1; }
say() { echo "$me: $*" >&2; }

build=1
for a in "$@"; do
    case $a in
        --no-build) build=0 ;;
        [0-9]*) export TURBOINFER_PG_MAJOR=$a ;;
        *) echo "usage: $0 [--no-build] [MAJOR]" >&2; exit 2 ;;
    esac
done
. "$here/pgmajor.sh" # PG_MAJOR (validated)
PG_CONFIG=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config
PKG=postgresql-$PG_MAJOR-turboinfer
# The tools' package, shared by every major's (see below).
TOOLS=turboinfer
[[ -x $PG_CONFIG ]] || die "$PG_CONFIG is missing (the package is for Debian's layout of PostgreSQL $PG_MAJOR); run 'make setup-pg PG_MAJOR=$PG_MAJOR'"
[[ $("$PG_CONFIG" --version) == "PostgreSQL $PG_MAJOR."* ]] || die "$PG_CONFIG reports $("$PG_CONFIG" --version), not PostgreSQL $PG_MAJOR"
[[ $COMPRESS =~ ^(gzip|xz|zstd|none)$ ]] || die "TURBOINFER_DEB_COMPRESS must be gzip, xz, zstd or none, not '$COMPRESS'"
command -v dpkg-deb >/dev/null || die "dpkg-deb is missing (apt-get install dpkg)"

version=$(awk -F'"' '/^\[/ { sect = $0 } sect == "[package]" && /^version *=/ { print $2; exit }' "$root/Cargo.toml")
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]] || die "cannot read the version from $root/Cargo.toml (got '$version')"
arch=$(dpkg --print-architecture)
debver="$version-1"

if [[ $build -eq 1 ]]; then
    log=$(mktemp)
    say "cargo pgrx package --features pg$PG_MAJOR (extension) and cargo build --release --bin turboinfer (CLI)"
    if ! (cd "$root" && cargo pgrx package --pg-config "$PG_CONFIG" --features "pg$PG_MAJOR" &&
        cargo build --release --bin turboinfer) >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        rm -f "$log"
        die "build failed (output above)"
    fi
    rm -f "$log"
fi

# Staged by cargo pgrx package under the build's pg_config paths; packaged under Debian's (and
# apt.postgresql.org's) for this major, which a PyPI build of 14 or 16 reports otherwise
# (/usr/lib/postgresql/NN/share, through a link: scripts/setup-pg.sh).
stage="$root/target/release/turboinfer-pg$PG_MAJOR"
slibdir=$stage$("$PG_CONFIG" --pkglibdir)
sextdir=$stage$("$PG_CONFIG" --sharedir)/extension
libdir=/usr/lib/postgresql/$PG_MAJOR/lib
extdir=/usr/share/postgresql/$PG_MAJOR/extension
so="$slibdir/turboinfer.so"
control="$sextdir/turboinfer.control"
sql="$sextdir/turboinfer--$version.sql"
cli="$root/target/release/turboinfer"
fetch="$here/turboinfer-fetch-model"
for f in "$so" "$control" "$sql" "$cli" "$fetch"; do
    [[ -f $f ]] || die "$f is missing: build first (without --no-build)"
done
grep -q "^default_version = '$version'" "$control" || die "$control does not say default_version = '$version'"

out="$root/target/debian"
install -d -m 755 "$out"

# new_tree NAME: an empty package tree for NAME (its doc directory with the copyright file).
new_tree() {
    local tree="$out/${1}_${debver}_$arch"
    rm -rf "$tree"
    install -d -m 755 "$tree/DEBIAN" "$tree/usr/share/doc/$1"
    cat >"$tree/usr/share/doc/$1/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: turboinfer
Files: *
License: PostgreSQL
 Permission to use, copy, modify, and distribute this software and its documentation for any
 purpose, without fee, and without a written agreement is hereby granted, provided that the above
 copyright notice and this paragraph and the following two paragraphs appear in all copies.
EOF
    chmod 644 "$tree/usr/share/doc/$1/copyright"
    echo "$tree"
}
# glibc_of FILE...: the newest GLIBC symbol version the binaries use (for libc6 (>= it)).
glibc_of() {
    local v
    v=$(objdump -T "$@" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1 || true)
    [[ -n $v ]] || die "cannot read the GLIBC versions $* need (objdump -T, package binutils)"
    echo "$v"
}
# build_deb TREE NAME DEPENDS DESCRIPTION...: control file (DESCRIPTION: the summary line, then
# the long description's lines), md5sums, dpkg-deb; prints the .deb's path.
build_deb() {
    local tree=$1 name=$2 depends=$3 summary=$4 size log line
    shift 4
    size=$(du -sk --exclude=DEBIAN "$tree" | cut -f1)
    {
        printf '%s\n' "Package: $name" "Version: $debver" "Architecture: $arch" \
            "Maintainer: TurboInfer developers <turboinfer@localhost>" "Installed-Size: $size" \
            "Depends: $depends" "${fields[@]}" "Section: database" "Priority: optional" "Description: $summary"
        for line in "$@"; do echo " $line"; done
    } >"$tree/DEBIAN/control"
    (cd "$tree" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$tree/DEBIAN/md5sums"
    chmod 644 "$tree/DEBIAN/control" "$tree/DEBIAN/md5sums"
    log=$(mktemp)
    if ! dpkg-deb --root-owner-group -Z"$COMPRESS" --build "$tree" "$tree.deb" >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        die "dpkg-deb --build $tree failed"
    fi
    rm -f "$log" && rm -rf "$tree"
    say "built $tree.deb ($(du -h "$tree.deb" | cut -f1))"
    echo "$tree.deb"
}

about=("TurboInfer runs a small LLM on the server's CPU, inside the backend:"
    "SELECT nl2sql('how many users?') returns a SQL query over the tables the"
    "caller may read. No external server, no GPU." ".")

# The tools: one package whatever the major, so that the packages of two majors (a server being
# upgraded with pg_upgrade) install side by side; each of them depends on it.
# Up to 0.3.0 the tools were in postgresql-15-turboinfer (the only package then): Replaces lets
# dpkg move /usr/bin/turboinfer and the fetcher from an installed 0.3.0 to this package when
# both new packages are installed over it, Breaks makes the old one be upgraded with it.
fields=("Replaces: postgresql-15-turboinfer (<< 0.4.0)" "Breaks: postgresql-15-turboinfer (<< 0.4.0)")
tree=$(new_tree "$TOOLS")
install -d -m 755 "$tree/usr/bin"
install -m 755 "$cli" "$tree/usr/bin/turboinfer"
install -m 755 "$fetch" "$tree/usr/bin/turboinfer-fetch-model"
[[ ! -f $root/docs/install.md ]] || install -m 644 "$root/docs/install.md" "$tree/usr/share/doc/$TOOLS/install.md"
build_deb "$tree" "$TOOLS" "libc6 (>= $(glibc_of "$cli")), libgcc-s1, python3 (>= 3.9), python3-pip" \
    "TurboInfer's command-line tool and model fetcher" "${about[@]}" \
    "This package holds the turboinfer command-line tool (inspect, pack and" \
    "run models) and turboinfer-fetch-model, which installs models into" \
    "/var/lib/turboinfer/models (run it once, as root; models are not part of" \
    "the package). The extension is in postgresql-NN-turboinfer, one per" \
    "PostgreSQL major."

# The extension for this major: files under its directories only.
fields=()
tree=$(new_tree "$PKG")
install -d -m 755 "$tree$libdir" "$tree$extdir"
install -m 755 "$so" "$tree$libdir/turboinfer.so"
install -m 644 "$control" "$sql" "$tree$extdir/"
# The upgrade scripts (sql/turboinfer--A--B.sql, staged by cargo pgrx package): ALTER EXTENSION
# turboinfer UPDATE after installing a newer package.
shopt -s nullglob
upgrades=("$sextdir"/turboinfer--*--*.sql)
shopt -u nullglob
[[ ${#upgrades[@]} -eq 0 ]] || install -m 644 "${upgrades[@]}" "$tree$extdir/"
# libgcc-s1 for Rust's unwinding.
build_deb "$tree" "$PKG" "postgresql-$PG_MAJOR, $TOOLS (= $debver), libc6 (>= $(glibc_of "$so")), libgcc-s1" \
    "CPU language model inside PostgreSQL $PG_MAJOR: nl2sql() and friends" "${about[@]}" \
    "This package holds the extension for PostgreSQL $PG_MAJOR (CREATE EXTENSION" \
    "turboinfer); the command-line tool and the model fetcher are in $TOOLS."
