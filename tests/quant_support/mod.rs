//! Helpers shared by the `quant_*` integration tests: a deterministic PRNG, random weight rows and
//! activations, and the committed fixtures of `tests/fixtures/quant/` (written by tools/gen_quant_fixtures.py).
#![allow(dead_code)]

use std::path::PathBuf;
use turboinfer::quant::GgmlType;

/// The engine's SplitMix64, with helpers to generate test data (no `rand` dependency).
pub struct Rng(turboinfer::generate::sampler::SplitMix64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(turboinfer::generate::sampler::SplitMix64::new(seed))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f32 {
        // 24 random bits: exactly representable in f32.
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Approximately standard normal (Box–Muller).
    pub fn normal(&mut self) -> f32 {
        let u1 = self.uniform().max(1e-7);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
    }
}

/// LLM-like activations: normal values with a per-64 magnitude drift and a few large outliers.
pub fn activations(rng: &mut Rng, n: usize) -> Vec<f32> {
    let mut x: Vec<f32> = (0..n).map(|_| rng.normal()).collect();
    for chunk in x.chunks_mut(64) {
        let s = 10f32.powf(rng.uniform() * 2.0 - 1.0);
        chunk.iter_mut().for_each(|v| *v *= s);
    }
    // Outliers (~1 in 100, 20x): what real residual streams look like, and the worst case for per-block scales.
    for _ in 0..n / 100 {
        let i = (rng.next_u64() % n as u64) as usize;
        x[i] *= 20.0;
    }
    x
}

/// A random but valid weight row of `n` elements of `ty`: random quant bits, sane finite scales.
pub fn random_row(rng: &mut Rng, ty: GgmlType, n: usize) -> Vec<u8> {
    let bytes = ty.row_bytes(n as u64).expect("whole blocks") as usize;
    let mut w: Vec<u8> = (0..bytes).map(|_| rng.next_u64() as u8).collect();
    let f16 = |v: f32| half::f16::from_f32(v).to_le_bytes();
    let bs = ty.type_size();
    match ty {
        GgmlType::F32 => {
            for c in w.chunks_exact_mut(4) {
                c.copy_from_slice(&(rng.normal() * 0.05).to_le_bytes());
            }
        }
        GgmlType::F16 => {
            for c in w.chunks_exact_mut(2) {
                c.copy_from_slice(&f16(rng.normal() * 0.05));
            }
        }
        GgmlType::BF16 => {
            for c in w.chunks_exact_mut(2) {
                c.copy_from_slice(&half::bf16::from_f32(rng.normal() * 0.05).to_le_bytes());
            }
        }
        _ => {
            // Scale fields (f16) at the offsets ggml's block structs put them; everything else is quant bits.
            let fields: &[usize] = match ty {
                GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[0],
                GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
                GgmlType::Q2_K => &[80, 82],
                GgmlType::Q3_K => &[108],
                GgmlType::Q6_K => &[208],
                other => panic!("no random rows for {other}"),
            };
            for b in w.chunks_exact_mut(bs) {
                for (k, &off) in fields.iter().enumerate() {
                    // d ~ 1e-3..1e-2 like real weights; the second field (min / dmin) is negative for
                    // Q4_1/Q5_1 (m is the block minimum) and positive for Q2_K/Q4_K/Q5_K (value = … - dmin*m).
                    let mag = 0.001 + 0.01 * rng.uniform();
                    let k_quant = matches!(ty, GgmlType::Q2_K | GgmlType::Q4_K | GgmlType::Q5_K);
                    let v = if k == 1 && !k_quant { -mag * 8.0 } else { mag };
                    b[off..off + 2].copy_from_slice(&f16(v));
                }
            }
        }
    }
    w
}

/// One dequant fixture from tests/fixtures/quant/manifest.json.
pub struct Fixture {
    pub name: String,
    pub ty: GgmlType,
    pub row_len: usize,
    pub rows: usize,
    /// [rows, row_bytes]
    pub raw: Vec<u8>,
    /// [rows, row_len] as gguf-py's numpy code produced them
    pub values: Vec<f32>,
}

/// Directory of the committed quantization fixtures.
pub fn quant_fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests").join("fixtures").join("quant")
}

/// Maps ggml's type name (as written by the generator) back to the type.
pub fn type_by_name(name: &str) -> GgmlType {
    (0..64)
        .filter_map(GgmlType::from_id)
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("unknown type name {name}"))
}

/// Reads little-endian f32s.
pub fn read_f32s(path: &std::path::Path) -> Vec<f32> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Loads the fixtures listed under `section` ("dequant" or "quantize") of the manifest.
pub fn load_fixtures(section: &str) -> Vec<Fixture> {
    let dir = quant_fixtures_dir();
    let text = std::fs::read_to_string(dir.join("manifest.json")).expect("manifest.json");
    let manifest: serde_json::Value = serde_json::from_str(&text).expect("manifest parses");
    manifest[section]
        .as_array()
        .expect("section present")
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap_or_else(|| panic!("field {k}")).to_string();
            let u = |k: &str| f[k].as_u64().unwrap_or_else(|| panic!("field {k}")) as usize;
            Fixture {
                name: s("name"),
                ty: type_by_name(&s("type")),
                row_len: u("row_len"),
                rows: u("rows"),
                raw: std::fs::read(dir.join(s("raw"))).expect("raw file"),
                values: read_f32s(&dir.join(s("f32"))),
            }
        })
        .collect()
}

/// Exact f64 dot product.
pub fn dot_f64(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum()
}

/// Sum of |a_i * b_i| in f64: the natural scale for dot-product error tolerances (robust to cancellation).
pub fn abs_dot_f64(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| (x as f64 * y as f64).abs()).sum()
}

/// The f64 reference of `vec_dot(weight, n, w, act)`: the dot of the dequantized row with the dequantized
/// activations, plus, for Q8_1 pairings (Q4_1/Q5_1), ggml's deliberate use of the stored block sum `s`
/// (f16, computed from the unrounded scale) in place of `d * sum(q)` for the offset term:
/// `+ sum_b m_b * (s_b - d_b * sum(q_b))`. Returns (reference, sum|w_i * a_i|).
pub fn reference_dot(weight: GgmlType, n: usize, w: &[u8], act: &[u8]) -> (f64, f64) {
    use turboinfer::quant;
    let act_ty = quant::activation_type(weight);
    let mut wf = vec![0f32; n];
    let mut af = vec![0f32; n];
    quant::dequantize_row(weight, w, &mut wf).unwrap();
    quant::dequantize_row(act_ty, act, &mut af).unwrap();
    let mut r = dot_f64(&wf, &af);
    let scale = abs_dot_f64(&wf, &af);
    if act_ty == GgmlType::Q8_1 {
        let f16 = |b: &[u8]| half::f16::from_le_bytes([b[0], b[1]]).to_f32() as f64;
        for (wb, ab) in w.chunks_exact(weight.type_size()).zip(act.chunks_exact(act_ty.type_size()))
        {
            let m = f16(&wb[2..4]);
            let (d, s) = (f16(&ab[0..2]), f16(&ab[2..4]));
            let sum_q: i32 = ab[4..].iter().map(|&q| q as i8 as i32).sum();
            r += m * (s - d * sum_q as f64);
        }
    }
    (r, scale)
}

/// Activations whose every float operation is exact (24-bit uniforms, −0.5, power-of-two scales), so
/// tools/gen_quant_fixtures.py (`det_activations`) produces the same bits: lets the ggml fixtures store
/// only results, not inputs. Per element: at each 32-boundary a scale 2^(r%8 − 4), then u, then a
/// 1-in-64 ×16 outlier draw — the same sequence of SplitMix64 calls as the Python side.
pub fn det_activations(seed: u64, n: usize) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let mut scale = 1.0f32;
    (0..n)
        .map(|i| {
            if i % 32 == 0 {
                scale = 2f32.powi((rng.next_u64() % 8) as i32 - 4);
            }
            let u = rng.uniform();
            let mut v = (u - 0.5) * scale;
            if rng.next_u64().is_multiple_of(64) {
                v *= 16.0;
            }
            v
        })
        .collect()
}
