//! Bounds-checked little-endian readers of the fixed-width fields of the engine's file formats.
//!
//! Each returns `None` when the field does not lie wholly inside the bytes (a short or truncated
//! file), so a reader turns that into its own error instead of panicking.

/// The `N` bytes at `at`, if they are all inside `b`.
fn array_at<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// The little-endian u32 at `at`.
#[inline]
pub fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    array_at(b, at).map(u32::from_le_bytes)
}

/// The little-endian u64 at `at`.
pub fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    array_at(b, at).map(u64::from_le_bytes)
}

/// The little-endian f32 at `at`.
pub fn f32_at(b: &[u8], at: usize) -> Option<f32> {
    array_at(b, at).map(f32::from_le_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fields are read little-endian at any offset, however aligned.
    #[test]
    fn reads_little_endian_at_any_offset() {
        let b = [0xAA, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(u32_at(&b, 1), Some(1));
        assert_eq!(u64_at(&b, 5), Some(2));
        assert_eq!(f32_at(&1.5f32.to_le_bytes(), 0), Some(1.5));
    }

    /// A field that runs past the end, or whose offset overflows, is `None`, not a panic.
    #[test]
    fn a_field_past_the_end_is_none() {
        let b = [0u8; 7];
        assert_eq!(u32_at(&b, 3), Some(0));
        assert_eq!(u32_at(&b, 4), None);
        assert_eq!(u64_at(&b, 0), None);
        assert_eq!(f32_at(&b, 100), None);
        assert_eq!(u32_at(&b, usize::MAX - 1), None);
        assert_eq!(u32_at(&[], 0), None);
    }
}
