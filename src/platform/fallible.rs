//! Fallible allocation of the large buffers of a generation (KV cache, forward-pass scratch,
//! logits): the one place that asks the allocator for them.
//!
//! Rust's `vec![0.0; n]` aborts the process when the allocator says no, which inside a
//! PostgreSQL backend is signal 6 and a restart of the whole server. [`try_zeroed`] returns an
//! [`AllocError`] instead, which the callers turn into their module's out-of-memory error.
//!
//! The memory comes from `alloc_zeroed` (calloc), like `vec![0; n]`: large buffers are fresh
//! anonymous mappings that the OS fills lazily, so resident memory still grows with use, while
//! the address space is reserved (and checked against `RLIMIT_AS`) up front.

use std::alloc::{self, Layout};

/// The allocator refused `bytes` bytes (or the size overflows `isize`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("memory allocation of {bytes} bytes failed")]
pub struct AllocError {
    /// Bytes asked for (saturated at `usize::MAX` when the size overflows).
    pub bytes: usize,
}

/// Element types whose all-zero bit pattern is a valid value (`0`, `0.0`).
///
/// # Safety
/// Implementors must be plain numbers: every bit pattern of zeros is a valid, initialised value.
pub unsafe trait Zeroable: Copy {}
// SAFETY: zero bits are 0 / +0.0 for these plain numeric types.
unsafe impl Zeroable for u8 {}
// SAFETY: as above.
unsafe impl Zeroable for u16 {}
// SAFETY: as above.
unsafe impl Zeroable for u32 {}
// SAFETY: as above.
unsafe impl Zeroable for f32 {}
// SAFETY: half::f16 is a transparent u16; zero bits are +0.0.
unsafe impl Zeroable for half::f16 {}

/// A vector of `n` zeros, or the error of an allocator that refused (never aborts).
pub fn try_zeroed<T: Zeroable>(n: usize) -> Result<Vec<T>, AllocError> {
    let too_big = AllocError { bytes: n.saturating_mul(size_of::<T>()) };
    let layout = Layout::array::<T>(n).map_err(|_| too_big)?;
    if layout.size() == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: the layout has a non-zero size. A non-null result is `n` zeroed, hence initialised
    // (`Zeroable`), elements allocated by the global allocator with exactly the layout `Vec<T>`
    // uses for a capacity of `n` (`Layout::array::<T>(n)`), so `Vec` may own and free it.
    unsafe {
        let p = alloc::alloc_zeroed(layout) as *mut T;
        if p.is_null() {
            return Err(too_big);
        }
        Ok(Vec::from_raw_parts(p, n, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_vectors_of_every_size() {
        assert!(try_zeroed::<f32>(0).unwrap().is_empty());
        let v = try_zeroed::<f32>(1000).unwrap();
        assert_eq!(v.len(), 1000);
        assert!(v.iter().all(|&x| x == 0.0));
        let mut h = try_zeroed::<half::f16>(3).unwrap();
        h.push(half::f16::ONE); // an ordinary Vec: it grows and frees as usual
        assert_eq!(h, [half::f16::ZERO, half::f16::ZERO, half::f16::ZERO, half::f16::ONE]);
    }

    #[test]
    fn impossible_sizes_are_errors_not_aborts() {
        assert_eq!(try_zeroed::<f32>(usize::MAX / 2).unwrap_err().bytes, usize::MAX);
        // Fits isize but no allocator can provide it (1 EiB).
        let e = try_zeroed::<u8>(1 << 60).unwrap_err();
        assert_eq!(e.bytes, 1 << 60);
    }
}
