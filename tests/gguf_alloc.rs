//! Headers that claim absurd counts or lengths must be refused before anything big is allocated.
//! This test binary installs a counting allocator (per thread, so parallel tests do not mix) and
//! checks the largest single allocation and the total allocated while parsing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use turboinfer::gguf::{parse_header, type_id, GgufError, GgufWriter, MetaArray};
use turboinfer::quant::GgmlType;

/// Passes every call to the system allocator, recording sizes for the current thread.
struct Counting;

thread_local! {
    /// Largest single allocation (bytes) since the last reset.
    static PEAK: Cell<usize> = const { Cell::new(0) };
    /// Sum of all allocation sizes since the last reset.
    static TOTAL: Cell<usize> = const { Cell::new(0) };
}

/// Records one allocation of `size` bytes.
fn record(size: usize) {
    let _ = PEAK.try_with(|p| p.set(p.get().max(size)));
    let _ = TOTAL.try_with(|t| t.set(t.get() + size));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Parses `bytes`, returning the result with the (largest single, total) bytes allocated meanwhile.
fn measured(bytes: &[u8]) -> (Result<(), GgufError>, usize, usize) {
    PEAK.with(|p| p.set(0));
    TOTAL.with(|t| t.set(0));
    let r = parse_header(bytes).map(|_| ());
    (r, PEAK.with(Cell::get), TOTAL.with(Cell::get))
}

/// Magic, version 3 and the two counts.
fn head(n_tensors: u64, n_kv: u64) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&n_tensors.to_le_bytes());
    b.extend_from_slice(&n_kv.to_le_bytes());
    b
}

/// Appends little-endian u32s and u64s given as (value, width) pairs.
fn push(b: &mut Vec<u8>, fields: &[(u64, usize)]) {
    for &(v, w) in fields {
        b.extend_from_slice(&v.to_le_bytes()[..w]);
    }
}

#[test]
fn absurd_counts_allocate_nothing_big() {
    // Each input is < 200 bytes; a parser that trusts a count would try to reserve gigabytes.
    for n in [u64::MAX, 1 << 40, 1 << 32, 1 << 24] {
        let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
        cases.push((format!("{n} tensors"), head(n, 0)));
        cases.push((format!("{n} kv"), head(0, n)));
        for ety in [type_id::U8, type_id::U32, type_id::STRING, type_id::ARRAY, type_id::BOOL] {
            let mut b = head(0, 1);
            push(
                &mut b,
                &[(1, 8), (b'k' as u64, 1), (type_id::ARRAY as u64, 4), (ety as u64, 4), (n, 8)],
            );
            cases.push((format!("array<{ety}> of {n}"), b));
        }
        let mut b = head(0, 1);
        push(&mut b, &[(n, 8)]);
        cases.push((format!("key of {n} bytes"), b));
        let mut b = head(0, 1);
        push(&mut b, &[(1, 8), (b'k' as u64, 1), (type_id::STRING as u64, 4), (n, 8)]);
        cases.push((format!("string of {n} bytes"), b));
        let mut b = head(1, 0);
        push(&mut b, &[(n, 8)]);
        cases.push((format!("tensor name of {n} bytes"), b));
        // A tensor whose dims claim a huge size (refused by the bounds check, never allocated).
        let mut b = head(1, 0);
        push(&mut b, &[(1, 8), (b't' as u64, 1), (2, 4), (n, 8), (n, 8), (0, 4), (0, 8)]);
        b.resize(b.len().div_ceil(32) * 32 + 64, 0);
        cases.push((format!("tensor {n}x{n}"), b));

        for (what, mut bytes) in cases {
            bytes.extend_from_slice(&[0u8; 64]);
            let (r, peak, total) = measured(&bytes);
            assert!(r.is_err(), "{what}: accepted");
            assert!(peak <= 4096, "{what}: allocated {peak} bytes at once");
            assert!(total <= 16 * 1024, "{what}: allocated {total} bytes in all");
        }
    }
}

#[test]
fn allocation_is_bounded_by_input_size() {
    // Even a valid header's in-memory form is a small multiple of its size: the largest single
    // allocation is bounded by what the bytes can hold (e.g. an array of N empty strings, N ≤ len / 8).
    let mut w = GgufWriter::new();
    w.add_metadata("a.empty_strings", MetaArray::String(vec![String::new(); 10_000])).unwrap();
    w.add_metadata("a.bools", MetaArray::Bool(vec![true; 10_000])).unwrap();
    w.add_metadata("a.empty_arrays", MetaArray::Array(vec![MetaArray::U8(vec![]); 5_000])).unwrap();
    w.add_tensor("t", GgmlType::F32, &[16], vec![0u8; 64]).unwrap();
    let bytes = w.to_bytes().unwrap();
    let (r, peak, total) = measured(&bytes);
    r.unwrap();
    println!("{} bytes of header: largest allocation {peak}, total {total}", bytes.len());
    // 24-byte `String`s for 8-byte encoded empty strings: at most 3× the input, plus the map.
    assert!(peak <= 4 * bytes.len(), "peak {peak} for {} input bytes", bytes.len());
    assert!(total <= 16 * bytes.len(), "total {total} for {} input bytes", bytes.len());
}
