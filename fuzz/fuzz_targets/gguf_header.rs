//! Fuzzes the GGUF header parser: any byte string must give `Ok` or a typed `Err`, never a panic,
//! an out-of-bounds read, an overflow or an unbounded allocation (libFuzzer's -rss_limit_mb and
//! -malloc_limit_mb catch the last one).
#![no_main]

use libfuzzer_sys::fuzz_target;
use turboinfer::gguf::{parse_header, MetaValue};

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = parse_header(data) {
        // What the reader promises about a header it accepted.
        assert!(h.alignment.is_power_of_two());
        assert_eq!(h.data_offset % h.alignment, 0);
        assert_eq!(h.metadata.len(), h.metadata_order.len());
        for k in &h.metadata_order {
            let v: &MetaValue = &h.metadata[k];
            let _ = v.type_name();
        }
        for t in &h.tensors {
            assert!(t.offset >= h.data_offset);
            assert!(t.offset + t.size <= data.len() as u64, "tensor {} out of bounds", t.name);
            assert_eq!(t.size, t.row_bytes() as u64 * t.n_rows() as u64);
            // The range is sliceable.
            let _ = &data[t.offset as usize..(t.offset + t.size) as usize];
        }
    }
});
