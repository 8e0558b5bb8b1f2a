#!/usr/bin/env bash
# Builds the Debian package postgresql-MAJOR-turboinfer (PGDG naming) for one PostgreSQL major with
# dpkg-deb (`make package` runs it for every installed major).
#
#   scripts/build-package.sh [--no-build] [MAJOR]      prints the .deb's path on stdout
#
# MAJOR: 14 to 18, default TURBOINFER_PG_MAJOR (default 15; scripts/pgmajor.sh). The package is
# built against, and installs into, Debian's layout of that major (/usr/lib/postgresql/MAJOR,
# /usr/share/postgresql/MAJOR), as Debian, apt.postgresql.org and scripts/setup-pg.sh lay it out.
#
# Contents: the extension (turboinfer.so, turboinfer.control, turboinfer--VERSION.sql and the upgrade
# scripts turboinfer--OLD--VERSION.sql) staged by
# `cargo pgrx package --features pgMAJOR` for that PostgreSQL, the CLI (/usr/bin/turboinfer: inspect, pack,
# run models) and the model fetcher (/usr/bin/turboinfer-fetch-model, python3 + pip at run time).
# No model (fetched separately: turboinfer-fetch-model) and no maintainer scripts: installing the
# package downloads nothing and starts nothing. Version: Cargo.toml's, Debian revision 1.
# Depends: postgresql-MAJOR (Debian's server package, or what Provides it). Every major's package
# holds the same SQL scripts (install and upgrades, from sql/).
# Output: target/debian/postgresql-MAJOR-turboinfer_VERSION-1_ARCH.deb.
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

stage="$root/target/release/turboinfer-pg$PG_MAJOR"
libdir=$("$PG_CONFIG" --pkglibdir)
extdir=$("$PG_CONFIG" --sharedir)/extension
so="$stage$libdir/turboinfer.so"
control="$stage$extdir/turboinfer.control"
sql="$stage$extdir/turboinfer--$version.sql"
cli="$root/target/release/turboinfer"
fetch="$here/turboinfer-fetch-model"
for f in "$so" "$control" "$sql" "$cli" "$fetch"; do
    [[ -f $f ]] || die "$f is missing: build first (without --no-build)"
done
grep -q "^default_version = '$version'" "$control" || die "$control does not say default_version = '$version'"

out="$root/target/debian"
tree="$out/${PKG}_${debver}_$arch"
deb="$tree.deb"
rm -rf "$tree"
install -d -m 755 "$tree/DEBIAN" "$tree$libdir" "$tree$extdir" "$tree/usr/bin" "$tree/usr/share/doc/$PKG"
install -m 755 "$so" "$tree$libdir/turboinfer.so"
install -m 644 "$control" "$sql" "$tree$extdir/"
# The upgrade scripts (sql/turboinfer--A--B.sql, staged by cargo pgrx package): ALTER EXTENSION
# turboinfer UPDATE after installing a newer package.
shopt -s nullglob
upgrades=("$stage$extdir"/turboinfer--*--*.sql)
shopt -u nullglob
[[ ${#upgrades[@]} -eq 0 ]] || install -m 644 "${upgrades[@]}" "$tree$extdir/"
install -m 755 "$cli" "$tree/usr/bin/turboinfer"
install -m 755 "$fetch" "$tree/usr/bin/turboinfer-fetch-model"
[[ ! -f $root/docs/install.md ]] || install -m 644 "$root/docs/install.md" "$tree/usr/share/doc/$PKG/install.md"
cat >"$tree/usr/share/doc/$PKG/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: turboinfer
Files: *
License: PostgreSQL
 Permission to use, copy, modify, and distribute this software and its documentation for any
 purpose, without fee, and without a written agreement is hereby granted, provided that the above
 copyright notice and this paragraph and the following two paragraphs appear in all copies.
EOF
chmod 644 "$tree/usr/share/doc/$PKG/copyright"

# libc6 (>= the newest GLIBC symbol version the binaries use); libgcc-s1 for Rust's unwinding.
glibc=$(objdump -T "$tree$libdir/turboinfer.so" "$tree/usr/bin/turboinfer" 2>/dev/null |
    grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1 || true)
[[ -n $glibc ]] || die "cannot read the GLIBC versions the binaries need (objdump -T, package binutils)"
size=$(du -sk --exclude=DEBIAN "$tree" | cut -f1)
cat >"$tree/DEBIAN/control" <<EOF
Package: $PKG
Version: $debver
Architecture: $arch
Maintainer: TurboInfer developers <turboinfer@localhost>
Installed-Size: $size
Depends: postgresql-$PG_MAJOR, libc6 (>= $glibc), libgcc-s1, python3 (>= 3.9), python3-pip
Section: database
Priority: optional
Description: CPU language model inside PostgreSQL $PG_MAJOR: nl2sql() and friends
 TurboInfer runs a small LLM on the server's CPU, inside the backend:
 SELECT nl2sql('how many users?') returns a SQL query over the tables the
 caller may read. No external server, no GPU.
 .
 This package holds the extension (CREATE EXTENSION turboinfer), the
 turboinfer command-line tool and turboinfer-fetch-model, which installs
 models into /var/lib/turboinfer/models (run it once, as root; models are
 not part of the package).
EOF
(cd "$tree" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$tree/DEBIAN/md5sums"
chmod 644 "$tree/DEBIAN/control" "$tree/DEBIAN/md5sums"

log=$(mktemp)
if ! dpkg-deb --root-owner-group -Z"$COMPRESS" --build "$tree" "$deb" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    die "dpkg-deb --build failed"
fi
rm -f "$log"
rm -rf "$tree"
say "built $deb ($(du -h "$deb" | cut -f1))"
echo "$deb"
