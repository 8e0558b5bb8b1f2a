fn main() {
    let f = turboinfer::gguf::GgufFile::open(std::env::args().nth(1).unwrap()).unwrap();
    let h = f.header();
    println!("v{} tensors {} data_off {} align {}", h.version, h.tensors.len(), h.data_offset, h.alignment);
    for k in &h.metadata_order { let v = &h.metadata[k]; match v { turboinfer::gguf::MetaValue::Array(a) => println!("{k}: array[{}]", a.len()), _ => println!("{k}: {v:?}") } }
    let mut types = std::collections::BTreeMap::new();
    for t in f.tensors() { *types.entry(t.ty.name()).or_insert(0) += 1; }
    println!("{types:?}");
    for t in f.tensors().iter().take(14) { println!("{} {:?} {}", t.name, t.dims, t.ty); }
}
