//! Differential target: whatever header `parse_header` accepts and `GgufWriter` can represent must
//! write → parse → write to the same bytes, with the same metadata order, tensors and tensor data.
#![no_main]

use libfuzzer_sys::fuzz_target;
use turboinfer::gguf::{parse_header, GgufHeader, GgufWriter};

/// Rebuilds a writer from a parsed header and the bytes it was parsed from; `None` when the writer
/// refuses something the reader tolerates (e.g. a 64+ byte tensor name, a u64 `general.alignment`).
fn rewrite<'a>(h: &GgufHeader, data: &'a [u8]) -> Option<GgufWriter<'a>> {
    let mut w = GgufWriter::new();
    for k in &h.metadata_order {
        w.add_metadata(k.as_str(), h.metadata[k].clone()).ok()?;
    }
    for t in &h.tensors {
        let bytes = &data[t.offset as usize..(t.offset + t.size) as usize];
        w.add_tensor(t.name.as_str(), t.ty, &t.dims, bytes).ok()?;
    }
    Some(w)
}

fuzz_target!(|data: &[u8]| {
    let Ok(h1) = parse_header(data) else { return };
    let Some(w1) = rewrite(&h1, data) else { return };
    let b1 = w1.to_bytes().expect("writing to a Vec cannot fail");
    let h2 = parse_header(&b1).expect("the writer's output must parse");
    assert_eq!(h2.metadata_order, h1.metadata_order);
    assert_eq!(h2.tensors.len(), h1.tensors.len());
    assert_eq!(h2.alignment, h1.alignment);
    for (a, b) in h1.tensors.iter().zip(&h2.tensors) {
        assert_eq!((&a.name, a.ty, &a.dims, a.size), (&b.name, b.ty, &b.dims, b.size));
        assert_eq!(
            data[a.offset as usize..][..a.size as usize],
            b1[b.offset as usize..][..b.size as usize]
        );
    }
    // Bytes, not values, are compared: NaN metadata is not equal to itself.
    let b2 = rewrite(&h2, &b1).expect("the writer accepts its own output").to_bytes().unwrap();
    assert!(b1 == b2, "write(parse(write(h))) differs from write(h)");
});
