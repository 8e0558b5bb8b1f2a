//! The bounds checks of the SIMD tiers' safe entry points (`x86`, `aarch64`): every kernel call is
//! validated here before its raw-pointer body runs, so no call can read or write out of bounds.

use super::packed::PACK_ROWS;
use crate::quant::{block_bytes, QK_K};

/// Block geometry of a (weight, activation) pairing.
#[derive(Clone, Copy)]
pub(crate) struct Geometry {
    /// Elements per block.
    pub(crate) qk: usize,
    /// Weight bytes per block.
    pub(crate) wb: usize,
    /// Activation bytes per block.
    pub(crate) ab: usize,
}

/// Validates one kernel call and returns the number of blocks: `n` whole blocks, `w` at least
/// `nb*wb` bytes, and `count` activation vectors of `nb*ab` bytes at `stride` inside `acts_len` bytes.
pub(crate) fn check(
    n: usize,
    g: Geometry,
    w_len: usize,
    acts_len: usize,
    stride: usize,
    count: usize,
) -> usize {
    let Geometry { qk, wb, ab } = g;
    assert!(n.is_multiple_of(qk), "row length {n} is not a whole number of {qk}-element blocks");
    let nb = n / qk;
    assert!(nb.checked_mul(wb).is_some_and(|b| b <= w_len), "weight row too short");
    if count > 0 {
        let need = stride.checked_mul(count - 1).and_then(|s| s.checked_add(nb * ab));
        assert!(need.is_some_and(|b| b <= acts_len), "activation buffer too short");
    }
    nb
}

/// Validates one weighted-sum call: `hd` lanes out, `p.len()` rows of `hd` elements of `size` bytes in `v`.
pub(crate) fn check_wsum(hd: usize, n: usize, size: usize, v_len: usize, out_len: usize) {
    assert_eq!(out_len, hd, "weighted sum output length");
    assert!(
        n.checked_mul(hd).and_then(|e| e.checked_mul(size)).is_some_and(|b| b <= v_len),
        "weighted sum rows too short"
    );
}

/// Validates one packed-group call and returns the number of super-blocks: `n` whole 256-element
/// blocks, `w` exactly one group of `block`-byte packed blocks, `out` whole 16-row outputs, every
/// vector inside `acts`.
pub(crate) fn check_packed(
    n: usize,
    block: usize,
    w_len: usize,
    acts_len: usize,
    stride: usize,
    out_len: usize,
) -> usize {
    assert!(
        n.is_multiple_of(QK_K) && out_len.is_multiple_of(PACK_ROWS),
        "packed call: row length {n}, outputs {out_len}"
    );
    let nb = n / QK_K;
    assert!(nb.checked_mul(block) == Some(w_len), "packed group size");
    let count = out_len / PACK_ROWS;
    if count > 0 {
        let need =
            stride.checked_mul(count - 1).and_then(|s| s.checked_add(nb * block_bytes::Q8_K));
        assert!(need.is_some_and(|b| b <= acts_len), "activation buffer too short");
    }
    nb
}
