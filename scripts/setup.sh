#!/usr/bin/env bash
# One-time machine set-up for TurboInfer on Debian 12 (bookworm), as root. Idempotent: every step
# checks first and is skipped when already done, so a second run takes about a second.
#
# Steps: Debian packages (PostgreSQL 15 + server headers, clang for bindgen, build tools, pip,
# binutils and dpkg for `make package`, pgbouncer for `make test-pgbouncer`), Rust toolchain (>= 1.95, via rustup only if cargo is
# missing), cargo-pgrx 0.18.0, `cargo pgrx init` against Debian's PostgreSQL 15. Each step prints its wall time; a failure prints one line
# naming the step and exits 1.
set -euo pipefail

PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
PGRX_VERSION=0.18.0
RUST_MIN=1.95
PACKAGES=(postgresql-15 postgresql-server-dev-15 libclang-dev clang pkg-config gcc libc6-dev make
    ca-certificates curl python3 binutils dpkg pgbouncer)
export PATH="$HOME/.cargo/bin:$PATH"
export DEBIAN_FRONTEND=noninteractive

me="setup.sh"
step_name=""
step_t0=0

# step NAME: starts a timed step.
step() { step_name=$1; step_t0=$(date +%s.%N); echo "$me: [$step_name] ..."; }
# fail MSG: one-line error naming the step.
fail() { echo "$me: error: step '$step_name' failed: $*" >&2; exit 1; }

# elapsed T0: seconds since T0 (from date +%s.%N), one decimal.
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
# done_step MSG: ends the current step, printing its wall time.
done_step() { echo "$me: [$step_name] $1 ($(elapsed "$step_t0")s)"; }

t_all=$(date +%s.%N)

# ---------------------------------------------------------------------------------------------
step "debian packages"
missing=()
installed=$(dpkg-query -W -f='${db:Status-Abbrev}|${Package}\n' "${PACKAGES[@]}" 2>/dev/null |
    awk -F'|' '$1 ~ /^ii/ { print $2 }' || true)
for p in "${PACKAGES[@]}"; do
    grep -qxF "$p" <<<"$installed" || missing+=("$p")
done
# pip is needed by the model fetcher; any pip that `python3 -m pip` finds will do.
if ! python3 -m pip --version >/dev/null 2>&1; then missing+=(python3-pip); fi
if [[ ${#missing[@]} -eq 0 ]]; then
    done_step "already installed"
else
    [[ $(id -u) -eq 0 ]] || fail "missing packages (${missing[*]}) and not root; run as root"
    # Refresh the package lists only when there are none or they are older than a day.
    if [[ -z $(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mtime -1 -print -quit 2>/dev/null) ]]; then
        echo "$me: [$step_name] apt-get update"
        apt-get update -q >/tmp/turboinfer-apt.log 2>&1 || fail "apt-get update (see /tmp/turboinfer-apt.log)"
    fi
    echo "$me: [$step_name] apt-get install ${missing[*]}"
    if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >>/tmp/turboinfer-apt.log 2>&1; then
        # Stale lists can name package versions that are gone: refresh once and retry.
        apt-get update -q >>/tmp/turboinfer-apt.log 2>&1 || fail "apt-get update (see /tmp/turboinfer-apt.log)"
        apt-get install -y -q --no-install-recommends "${missing[@]}" >>/tmp/turboinfer-apt.log 2>&1 ||
            fail "apt-get install ${missing[*]} (see /tmp/turboinfer-apt.log)"
    fi
    done_step "installed ${missing[*]}"
fi
[[ -x $PG_CONFIG ]] || fail "$PG_CONFIG is missing after installing postgresql-server-dev-15"

# ---------------------------------------------------------------------------------------------
step "rust toolchain"
if command -v cargo >/dev/null 2>&1; then
    have=$(rustc --version | awk '{print $2}')
    if [[ $(printf '%s\n%s\n' "$RUST_MIN" "$have" | sort -V | head -n1) != "$RUST_MIN" ]]; then
        if command -v rustup >/dev/null 2>&1; then
            rustup toolchain install stable --profile minimal >/tmp/turboinfer-rustup.log 2>&1 &&
                rustup default stable >>/tmp/turboinfer-rustup.log 2>&1 ||
                fail "rustc $have is older than $RUST_MIN and rustup update failed (see /tmp/turboinfer-rustup.log)"
        else
            fail "rustc $have is older than $RUST_MIN; install Rust with rustup (https://rustup.rs)"
        fi
    fi
    done_step "rustc $(rustc --version | awk '{print $2}')"
else
    curl -sSf https://sh.rustup.rs -o /tmp/turboinfer-rustup.sh || fail "download of rustup from https://sh.rustup.rs"
    sh /tmp/turboinfer-rustup.sh -y --profile minimal >/tmp/turboinfer-rustup.log 2>&1 ||
        fail "rustup install (see /tmp/turboinfer-rustup.log)"
    done_step "installed rustc $(rustc --version | awk '{print $2}') with rustup"
fi
# `make lint` needs rustfmt and clippy (part of rustup's default profile, not of the minimal one).
for comp in rustfmt clippy; do
    if ! cargo "${comp/rustfmt/fmt}" --version >/dev/null 2>&1; then
        command -v rustup >/dev/null 2>&1 && rustup component add "$comp" >>/tmp/turboinfer-rustup.log 2>&1 ||
            fail "cargo ${comp/rustfmt/fmt} is missing and 'rustup component add $comp' failed (see /tmp/turboinfer-rustup.log)"
    fi
done

# ---------------------------------------------------------------------------------------------
step "cargo-pgrx $PGRX_VERSION"
if [[ $(cargo pgrx --version 2>/dev/null) == "cargo-pgrx $PGRX_VERSION" ]]; then
    done_step "already installed"
else
    echo "$me: [$step_name] cargo install cargo-pgrx --version $PGRX_VERSION --locked (about 5 minutes on 2 cores)"
    cargo install cargo-pgrx --version "$PGRX_VERSION" --locked >/tmp/turboinfer-cargo-pgrx.log 2>&1 ||
        fail "cargo install cargo-pgrx (see /tmp/turboinfer-cargo-pgrx.log)"
    done_step "installed"
fi

# ---------------------------------------------------------------------------------------------
step "cargo pgrx init"
if grep -qs '^pg15 *=' "${PGRX_HOME:-$HOME/.pgrx}/config.toml"; then
    done_step "already initialised ($(grep '^pg15' "${PGRX_HOME:-$HOME/.pgrx}/config.toml"))"
else
    # Uses Debian's PostgreSQL 15 (downloads nothing). /usr/bin/pg_config is a wrapper: give the real one.
    cargo pgrx init --pg15 "$PG_CONFIG" >/tmp/turboinfer-pgrx-init.log 2>&1 ||
        fail "cargo pgrx init --pg15 $PG_CONFIG (see /tmp/turboinfer-pgrx-init.log)"
    done_step "initialised with $PG_CONFIG"
fi

echo "$me: set-up complete ($(elapsed "$t_all")s)"
