#!/usr/bin/env bash
# Cross toolchain for the aarch64 kernel tiers (neon, dotprod, i8mm), as root on Debian 12: the
# arm64 architecture in dpkg, Debian's Rust 1.96 (`rustc-web`, /usr/bin/rustc) with its aarch64
# standard library, the aarch64 GNU linker and user-mode QEMU (scripts/test-aarch64.sh runs the
# tests under it). rustup cannot add targets here (no download), Debian's packages can.
# Idempotent: when everything is installed it checks and exits in well under a second; apt-get
# update runs only when a package is missing and apt does not know it yet.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

# libc6-dev-arm64-cross: the cross libc's crti.o and libc.so, which linking the aarch64 cdylib
# needs; only a Recommends of gcc-aarch64-linux-gnu, which --no-install-recommends skips (a fresh
# machine failed with "cannot find crti.o").
PACKAGES=(rustc-web libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
me="setup-aarch64.sh"
t0=$(date +%s.%N)
elapsed() { awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# installed PKG: whether dpkg has PKG (name[:arch]) installed.
installed() { [[ $(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) == installed ]]; }

missing=()
for p in "${PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
if ((${#missing[@]} == 0)); then
  echo "$me: cross toolchain present ($(/usr/bin/rustc --version), $(qemu-aarch64 --version | head -1)) ($(elapsed)s)"
  exit 0
fi
[[ $(id -u) == 0 ]] || { echo "$me: error: missing ${missing[*]}; run as root to install" >&2; exit 1; }

if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "$me: dpkg --add-architecture arm64"
  dpkg --add-architecture arm64
fi
# apt must know the arm64 package lists: update only when it does not yet.
if ! apt-cache policy libstd-rust-web-dev:arm64 2>/dev/null | grep -q 'Candidate: [0-9]'; then
  echo "$me: apt-get update"
  apt-get update -q
fi
echo "$me: apt-get install ${missing[*]}"
apt-get install -y -q --no-install-recommends "${missing[@]}"
for p in "${PACKAGES[@]}"; do installed "$p" || { echo "$me: error: $p did not install" >&2; exit 1; }; done
echo "$me: installed ${missing[*]} ($(elapsed)s)"
