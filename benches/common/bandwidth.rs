//! The machine's read bandwidth, measured the same way by every benchmark that reports against it:
//! `threads` scoped threads each sum their share of one buffer with the widest loads available.

use std::time::Instant;

/// A buffer of `len` bytes (a multiple of 256) with every page written, so reads hit real memory.
pub fn buffer(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31) as u8).collect()
}

/// GB/s of one pass over `buf` split across `threads` threads (after one warm-up pass).
pub fn read_gbs(buf: &[u8], threads: usize) -> f64 {
    let pass = || {
        let per = buf.len() / threads;
        let total: u64 = std::thread::scope(|s| {
            let hs: Vec<_> = buf.chunks(per).map(|c| s.spawn(move || sum_bytes(c))).collect();
            hs.into_iter().map(|h| h.join().unwrap()).fold(0, u64::wrapping_add)
        });
        std::hint::black_box(total);
    };
    pass();
    let t = Instant::now();
    pass();
    buf.len() as f64 / t.elapsed().as_secs_f64() / 1e9
}

/// Sum of a byte buffer as u64 lanes, with AVX-512 loads when available (4 independent accumulators).
fn sum_bytes(b: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F was detected just above.
            return unsafe { sum_avx512(b) };
        }
    }
    b.chunks_exact(8).fold(0u64, |s, c| s.wrapping_add(u64::from_le_bytes(c.try_into().unwrap())))
}

/// AVX-512 body of `sum_bytes` (the length is a multiple of 256 here; the tail is ignored).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn sum_avx512(b: &[u8]) -> u64 {
    use std::arch::x86_64::*;
    let mut acc = [_mm512_setzero_si512(); 4];
    let p = b.as_ptr();
    let mut i = 0;
    while i + 256 <= b.len() {
        for (k, a) in acc.iter_mut().enumerate() {
            *a = _mm512_add_epi64(*a, _mm512_loadu_si512(p.add(i + 64 * k) as *const _));
        }
        i += 256;
    }
    let s = _mm512_add_epi64(_mm512_add_epi64(acc[0], acc[1]), _mm512_add_epi64(acc[2], acc[3]));
    _mm512_reduce_add_epi64(s) as u64
}
