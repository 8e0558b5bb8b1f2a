//! Row-parallel matrix × activations over quantized weight rows, using the dispatched SIMD kernels.

use rayon::prelude::*;

use crate::kernels::lut::{LutKernel, LUT_ROWS};
use crate::kernels::packed::{PackedDotFn, PACK_ROWS};
use crate::kernels::{TypeKernels, MAX_BATCH};

/// A quantized dot product: `(n, weight_row_bytes, activation_row_bytes) -> f32` over `n` elements
/// (trusts that both slices hold exactly `n` elements; see `crate::kernels`).
pub type VecDotFn = fn(usize, &[u8], &[u8]) -> f32;

/// Weight bytes one parallel task reads: ~64 KiB is ~4 µs of reading at 16 GB/s, large next to
/// rayon's ~1 µs per-task cost, and small enough that the smallest matrices (896x896 Q5_0, 0.6 MB)
/// still split into ~10 tasks for load balancing across threads.
const CHUNK_BYTES: usize = 64 << 10;

/// A weight matrix as quantized rows borrowed from the model file.
#[derive(Clone, Copy)]
pub struct WeightRows<'a> {
    /// `[rows, row_bytes]`
    pub data: &'a [u8],
    pub rows: usize,
    /// Elements per row (the dot-product length).
    pub cols: usize,
    pub row_bytes: usize,
    /// Single-vector and batch dot products of one weight row with activation rows of the matching type.
    pub kernels: TypeKernels,
    /// The same matrix in a packed layout with its kernel, if one is available (bitwise the same results).
    pub packed: Option<PackedRows<'a>>,
}

/// A matrix in a packed layout and the tier's kernel for it: `Q4_K×16` / `Q6_K×16`
/// (`kernels::packed`) or the lookup-table layout `Q2_K×32` (`kernels::lut`).
#[derive(Clone, Copy)]
pub struct PackedRows<'a> {
    /// `[rows / group rows, cols / 256, group rows * block bytes]` packed bytes, as long as the
    /// unpacked matrix.
    pub data: &'a [u8],
    /// The kernel for the layout.
    pub kernel: PackedKernel,
}

/// The kernel of a packed layout.
#[derive(Clone, Copy, Debug)]
pub enum PackedKernel {
    /// Dot products of one 16-row group with activation vectors (`Q4_K×16`, `Q6_K×16`).
    Rows16(PackedDotFn),
    /// Table-lookup GEMV of one 32-row group per activation vector (`Q2_K×32`).
    Lut32(LutKernel),
}

impl std::fmt::Debug for WeightRows<'_> {
    /// Short summary (the weights themselves are not printed).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeightRows").field("rows", &self.rows).field("cols", &self.cols).finish()
    }
}

/// Rows per parallel task for rows of `row_bytes`.
fn rows_per_task(row_bytes: usize) -> usize {
    (CHUNK_BYTES / row_bytes.max(1)).max(1)
}

/// `out[t, r] = dot(w[r], acts[t])` for `n_tok` activation rows.
///
/// - `acts`: `[n_tok, act_row_bytes]`, already quantized to the weight's activation type, as the
///   kernels read it (`kernels::act_row`; `SharedActs` makes them)
/// - `out`: `[n_tok, w.rows]`
///
/// Parallel over weight rows. For several tokens each weight row goes through the batch kernel,
/// which decodes every weight block once and applies it to up to 8 activation rows, so each weight
/// row is read from memory once per batch. Every output is computed by one kernel call on one
/// thread, and the batch kernel equals the single one bitwise, so `out[t]` is bitwise independent
/// of `n_tok`, of the other rows and of the thread count. With `w.packed` set, the packed kernel
/// runs instead (`matmul_packed`), with bitwise the same results. Call inside `Runtime::install`.
pub fn matmul(w: WeightRows<'_>, acts: &[u8], act_row_bytes: usize, n_tok: usize, out: &mut [f32]) {
    assert_eq!(w.data.len(), w.rows * w.row_bytes, "weight bytes do not match shape");
    assert_eq!(acts.len(), n_tok * act_row_bytes, "activation bytes do not match shape");
    assert_eq!(out.len(), n_tok * w.rows, "output shape mismatch");
    match w.packed {
        Some(PackedRows { data, kernel: PackedKernel::Rows16(dot) }) => {
            return matmul_packed(w, data, dot, acts, act_row_bytes, n_tok, out);
        }
        // One token only: for a batch the dot product's batch kernel, which decodes each weight
        // block once for up to eight tokens, is faster than a lookup per token (prompt
        // processing of a Q2_K model ran ~25 % slower through the LUT, `docs/performance.md`).
        Some(PackedRows { data, kernel: PackedKernel::Lut32(k) }) if n_tok == 1 => {
            return matmul_lut(w, data, k, acts, out);
        }
        _ => {}
    }
    let (rb, cols) = (w.row_bytes, w.cols);
    let chunk = rows_per_task(rb);
    if n_tok == 1 {
        let dot = w.kernels.vec_dot;
        out.par_chunks_mut(chunk).enumerate().for_each(|(c, o)| {
            let r0 = c * chunk;
            for (i, y) in o.iter_mut().enumerate() {
                let r = r0 + i;
                *y = dot(cols, &w.data[r * rb..(r + 1) * rb], acts);
            }
        });
        return;
    }
    let batch = w.kernels.vec_dot_batch;
    let tile = token_tile(act_row_bytes);
    let mut tmp = vec![0.0f32; w.rows * n_tok]; // [rows, n_tok]
    tmp.par_chunks_mut(chunk * n_tok).enumerate().for_each(|(c, o)| {
        let r0 = c * chunk;
        // Token tile by token tile: the tile's activations stay in L1 while the task's rows
        // (~64 KB, from L2 after the first tile) are dotted with them.
        for t0 in (0..n_tok).step_by(tile) {
            let nt = tile.min(n_tok - t0);
            let a = &acts[t0 * act_row_bytes..(t0 + nt) * act_row_bytes];
            for (i, orow) in o.chunks_exact_mut(n_tok).enumerate() {
                let r = r0 + i;
                batch(
                    cols,
                    &w.data[r * rb..(r + 1) * rb],
                    a,
                    act_row_bytes,
                    &mut orow[t0..t0 + nt],
                );
            }
        }
    });
    // [rows, n_tok] -> [n_tok, rows]
    out.par_chunks_mut(w.rows).enumerate().for_each(|(t, o)| {
        for (r, y) in o.iter_mut().enumerate() {
            *y = tmp[r * n_tok + t];
        }
    });
}

/// Activation bytes of one token tile of the unpacked batch path: what L1 keeps (32 KiB on the
/// smallest x86 cores here, 48 KiB on Zen 4) beside the weight row being read. Every weight row
/// of a task used to see all of a prompt chunk's activations (64 tokens × 2 KB at 896 columns:
/// 125 KB), streamed from L2 once per row.
const TILE_BYTES: usize = 16 << 10;

/// Tokens per tile of the unpacked batch path for activation rows of `act_row_bytes`: as many
/// whole batch-kernel calls ([`MAX_BATCH`] tokens) as fit `TILE_BYTES`, at least one.
fn token_tile(act_row_bytes: usize) -> usize {
    (TILE_BYTES / act_row_bytes.max(1) / MAX_BATCH).max(1) * MAX_BATCH
}

/// Tokens per packed-kernel call in prompt processing: their activations (64 × ~1.1 bytes per
/// weight column: 110 KB for 1536 columns, 640 KB for 8960) stay in L2 while a task's row groups
/// (~64 KB) are dotted with them, so neither operand streams from memory once per row.
const TOKEN_TILE: usize = 64;

/// [`matmul`] over the `Q4_K×16` layout: parallel over tasks of whole 16-row groups; within a task,
/// token tile by token tile, each group's kernel call applies every decoded weight block to the
/// tile's tokens. Each output is the packed kernel's, bitwise the Q4_K reference (`quant::contract`) of its row and token
/// (like the unpacked SIMD kernels), so the result does not depend on the layout or on `n_tok`.
fn matmul_packed(
    w: WeightRows<'_>,
    data: &[u8],
    dot: PackedDotFn,
    acts: &[u8],
    act_row_bytes: usize,
    n_tok: usize,
    out: &mut [f32],
) {
    assert!(w.rows.is_multiple_of(PACK_ROWS) && data.len() == w.data.len(), "packed matrix shape");
    let gb = PACK_ROWS * w.row_bytes; // bytes per row group
    let per_task = (CHUNK_BYTES / gb).max(1); // groups per parallel task
    let cols = w.cols;
    if n_tok == 1 {
        out.par_chunks_mut(per_task * PACK_ROWS).enumerate().for_each(|(c, o)| {
            for (i, og) in o.chunks_exact_mut(PACK_ROWS).enumerate() {
                let g = c * per_task + i;
                dot(cols, &data[g * gb..(g + 1) * gb], acts, act_row_bytes, og);
            }
        });
        return;
    }
    let mut tmp = vec![0.0f32; w.rows * n_tok]; // [groups, n_tok, 16]
    tmp.par_chunks_mut(per_task * PACK_ROWS * n_tok).enumerate().for_each(|(c, o)| {
        for t0 in (0..n_tok).step_by(TOKEN_TILE) {
            let nt = TOKEN_TILE.min(n_tok - t0);
            let a = &acts[t0 * act_row_bytes..(t0 + nt) * act_row_bytes];
            for (i, og) in o.chunks_exact_mut(PACK_ROWS * n_tok).enumerate() {
                let g = c * per_task + i;
                dot(
                    cols,
                    &data[g * gb..(g + 1) * gb],
                    a,
                    act_row_bytes,
                    &mut og[t0 * PACK_ROWS..(t0 + nt) * PACK_ROWS],
                );
            }
        }
    });
    // [groups, n_tok, 16] -> [n_tok, rows]
    out.par_chunks_mut(w.rows).enumerate().for_each(|(t, o)| {
        for (g, og) in o.chunks_exact_mut(PACK_ROWS).enumerate() {
            og.copy_from_slice(&tmp[(g * n_tok + t) * PACK_ROWS..(g * n_tok + t + 1) * PACK_ROWS]);
        }
    });
}

/// The lookup tables of the last activation vector a LUT product used on this thread. The q, k
/// and v projections read one vector, gate and up another, so each vector's tables are built once
/// and shared by every matrix reading it. Keyed by the whole vector's bytes (compared: ~1.7 KB
/// for 1536 elements, against building ~12 KB of tables) and the table builder, so a hit is
/// always the tables the vector would get.
struct LutTables {
    build: fn(usize, &[u8], &mut [u8]),
    nb: usize,
    /// The activation row the tables were built from.
    act: Vec<u8>,
    /// `[nb, table_bytes]`
    tables: Vec<u8>,
}

thread_local! {
    /// This thread's [`LutTables`] (taken out while in use, so a nested product on the same thread,
    /// e.g. a job rayon runs here while this one waits, builds its own instead of failing).
    static LUT_TABLES: std::cell::Cell<Option<LutTables>> = const { std::cell::Cell::new(None) };
}

/// [`matmul`] of one token over a lookup-table layout (`Q2_K×32`, `kernels::lut`): the token's
/// tables are built once per activation vector ([`LutTables`], on this thread), then tasks of
/// whole 32-row groups run the GEMV of each group. Each output is the LUT kernel's, bitwise the
/// reference dot product of its row (`kernels::lut`), so the result does not depend on the layout.
fn matmul_lut(w: WeightRows<'_>, data: &[u8], k: LutKernel, act: &[u8], out: &mut [f32]) {
    assert!(
        w.rows.is_multiple_of(LUT_ROWS)
            && w.cols.is_multiple_of(k.block)
            && data.len() == w.data.len(),
        "LUT matrix shape"
    );
    let nb = w.cols / k.block;
    let memo = LUT_TABLES
        .take()
        .filter(|m| std::ptr::fn_addr_eq(m.build, k.build_tables) && m.nb == nb && m.act == act);
    let memo = memo.unwrap_or_else(|| {
        let mut tables = vec![0u8; nb * k.table_bytes];
        (k.build_tables)(nb, act, &mut tables);
        LutTables { build: k.build_tables, nb, act: act.to_vec(), tables }
    });
    let tables = &memo.tables;
    let gb = LUT_ROWS * w.row_bytes; // bytes per row group
    let per_task = (CHUNK_BYTES / gb).max(1); // groups per parallel task
    out.par_chunks_mut(per_task * LUT_ROWS).enumerate().for_each(|(c, o)| {
        for (i, og) in o.chunks_exact_mut(LUT_ROWS).enumerate() {
            let g = c * per_task + i;
            let og: &mut [f32; LUT_ROWS] = og.try_into().expect("32 rows");
            (k.gemv)(nb, &data[g * gb..(g + 1) * gb], act, tables, og);
        }
    });
    LUT_TABLES.set(Some(memo));
}

/// `out[t, j] = dot(w[rows[j]], acts[t])`: [`matmul`] restricted to the weight rows listed in
/// `rows` (each `< w.rows`, ascending for memory locality), with the same kernel choice per
/// token count, so every value is bitwise equal to the matching entry of the full product.
///
/// - `acts`: `[n_tok, act_row_bytes]`; `out`: `[n_tok, rows.len()]`
///
/// Rows are dotted in place (no gathering copy): a subset head reads only the selected rows.
pub fn matmul_rows(
    w: WeightRows<'_>,
    acts: &[u8],
    act_row_bytes: usize,
    n_tok: usize,
    rows: &[u32],
    out: &mut [f32],
) {
    assert_eq!(w.data.len(), w.rows * w.row_bytes, "weight bytes do not match shape");
    assert_eq!(acts.len(), n_tok * act_row_bytes, "activation bytes do not match shape");
    assert_eq!(out.len(), n_tok * rows.len(), "output shape mismatch");
    assert!(rows.iter().all(|&r| (r as usize) < w.rows), "row index out of range");
    let (rb, cols, m) = (w.row_bytes, w.cols, rows.len());
    let chunk = rows_per_task(rb);
    let row = |r: u32| &w.data[r as usize * rb..(r as usize + 1) * rb];
    if n_tok == 1 {
        let dot = w.kernels.vec_dot;
        out.par_chunks_mut(chunk).zip(rows.par_chunks(chunk)).for_each(|(o, rs)| {
            for (y, &r) in o.iter_mut().zip(rs) {
                *y = dot(cols, row(r), acts);
            }
        });
        return;
    }
    let batch = w.kernels.vec_dot_batch;
    let mut tmp = vec![0.0f32; m * n_tok]; // [m, n_tok]
    tmp.par_chunks_mut(chunk * n_tok).zip(rows.par_chunks(chunk)).for_each(|(o, rs)| {
        for (orow, &r) in o.chunks_exact_mut(n_tok).zip(rs) {
            batch(cols, row(r), acts, act_row_bytes, orow);
        }
    });
    // [m, n_tok] -> [n_tok, m]
    out.par_chunks_mut(m).enumerate().for_each(|(t, o)| {
        for (j, y) in o.iter_mut().enumerate() {
            *y = tmp[j * n_tok + t];
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{KernelSet, Tier};
    use crate::quant::GgmlType;

    /// f32 values as little-endian bytes.
    fn bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// F32 rows through every available tier, 1 token and batches (incl. more than 8 tokens), many
    /// parallel tasks; small-integer data keeps every sum exact whatever the summation order.
    #[test]
    fn batch_and_single_match_naive_on_every_tier() {
        let (rows, cols) = (4099, 24); // 4099: not a multiple of the task size; several tasks
        let w: Vec<f32> = (0..rows * cols).map(|i| ((i * 7 % 13) as f32) - 6.0).collect();
        let wb = bytes(&w);
        let rt = crate::platform::runtime::Runtime::new(2).unwrap();
        for tier in Tier::ALL {
            let Ok(set) = KernelSet::for_tier(tier) else { continue };
            let kernels = set.get(GgmlType::F32).unwrap();
            let wr =
                WeightRows { data: &wb, rows, cols, row_bytes: cols * 4, kernels, packed: None };
            for n_tok in [1usize, 3, 11] {
                let x: Vec<f32> = (0..n_tok * cols).map(|i| (i % 5) as f32 * 0.5 - 1.0).collect();
                let xb = bytes(&x);
                let mut out = vec![0.0; n_tok * rows];
                rt.install(|| matmul(wr, &xb, cols * 4, n_tok, &mut out));
                for t in 0..n_tok {
                    for r in 0..rows {
                        let want: f32 = (0..cols).map(|c| w[r * cols + c] * x[t * cols + c]).sum();
                        assert_eq!(
                            out[t * rows + r],
                            want,
                            "tier {tier} n_tok {n_tok} t {t} r {r}"
                        );
                    }
                }
            }
        }
    }

    /// Tokens split over several token tiles (the last one partial) give bitwise what each token
    /// gives alone, on every tier.
    #[test]
    fn token_tiles_equal_single_tokens_on_every_tier() {
        let (rows, cols) = (301, 2048); // 8 KB activation rows: tiles of 8 tokens
        assert_eq!(token_tile(cols * 4), MAX_BATCH);
        let w: Vec<f32> = (0..rows * cols).map(|i| ((i * 37 % 101) as f32) * 0.013 - 0.6).collect();
        let wb = bytes(&w);
        let rt = crate::platform::runtime::Runtime::new(2).unwrap();
        let n_tok = 2 * MAX_BATCH + 3;
        let x: Vec<f32> = (0..n_tok * cols).map(|i| (i as f32 * 0.37).sin()).collect();
        let xb = bytes(&x);
        for tier in Tier::ALL {
            let Ok(set) = KernelSet::for_tier(tier) else { continue };
            let kernels = set.get(GgmlType::F32).unwrap();
            let wr =
                WeightRows { data: &wb, rows, cols, row_bytes: cols * 4, kernels, packed: None };
            let mut all = vec![0.0; n_tok * rows];
            rt.install(|| matmul(wr, &xb, cols * 4, n_tok, &mut all));
            for (t, got) in all.chunks_exact(rows).enumerate() {
                let mut one = vec![0.0; rows];
                rt.install(|| {
                    matmul(wr, &xb[t * cols * 4..(t + 1) * cols * 4], cols * 4, 1, &mut one)
                });
                for (r, (g, o)) in got.iter().zip(&one).enumerate() {
                    assert_eq!(g.to_bits(), o.to_bits(), "tier {tier} token {t} row {r}");
                }
            }
        }
    }

    /// The subset product equals the same entries of the full product bit for bit (1 and several tokens).
    #[test]
    fn rows_subset_equals_full_entries() {
        let (rows, cols) = (3001, 40);
        let w: Vec<f32> = (0..rows * cols).map(|i| ((i * 37 % 101) as f32) * 0.013 - 0.6).collect();
        let wb = bytes(&w);
        let rt = crate::platform::runtime::Runtime::new(2).unwrap();
        let set = crate::kernels::kernels();
        let wr = WeightRows {
            data: &wb,
            rows,
            cols,
            row_bytes: cols * 4,
            kernels: set.get(GgmlType::F32).unwrap(),
            packed: None,
        };
        let pick: Vec<u32> = (0..rows as u32).filter(|r| r % 7 == 0 || r % 11 == 3).collect();
        for n_tok in [1usize, 5] {
            let x: Vec<f32> = (0..n_tok * cols).map(|i| (i as f32 * 0.37).sin()).collect();
            let xb = bytes(&x);
            let mut full = vec![0.0; n_tok * rows];
            let mut sub = vec![0.0; n_tok * pick.len()];
            rt.install(|| matmul(wr, &xb, cols * 4, n_tok, &mut full));
            rt.install(|| matmul_rows(wr, &xb, cols * 4, n_tok, &pick, &mut sub));
            for t in 0..n_tok {
                for (j, &r) in pick.iter().enumerate() {
                    assert_eq!(
                        sub[t * pick.len() + j].to_bits(),
                        full[t * rows + r as usize].to_bits(),
                        "n_tok {n_tok} t {t} row {r}"
                    );
                }
            }
        }
    }

    /// Asserts that `other` (the same K-quant matrix as `plain` in a packed layout) gives bitwise
    /// `plain`'s products for one token, a batch, and more tokens than a token tile; activations
    /// `x(i)` quantized to Q8_K.
    fn same_products(
        rt: &crate::platform::runtime::Runtime,
        plain: WeightRows<'_>,
        other: WeightRows<'_>,
        tier: Tier,
        x: impl Fn(usize) -> f32,
    ) {
        let (rows, cols) = (plain.rows, plain.cols);
        let arb = cols / 256 * 292;
        for n_tok in [1usize, 3, 8, TOKEN_TILE + 6] {
            let x: Vec<f32> = (0..n_tok * cols).map(&x).collect();
            let mut xb = vec![0u8; n_tok * arb];
            for (xr, br) in x.chunks_exact(cols).zip(xb.chunks_exact_mut(arb)) {
                crate::quant::quantize_row(GgmlType::Q8_K, xr, br).unwrap();
            }
            let (mut a, mut b) = (vec![0.0; n_tok * rows], vec![1.0; n_tok * rows]);
            rt.install(|| matmul(plain, &xb, arb, n_tok, &mut a));
            rt.install(|| matmul(other, &xb, arb, n_tok, &mut b));
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                assert_eq!(
                    x.to_bits(),
                    y.to_bits(),
                    "tier {tier} n_tok {n_tok}: token {} row {}: {x} vs {y}",
                    i / rows,
                    i % rows
                );
            }
        }
    }

    /// The packed path equals the unpacked one bit for bit on every SIMD tier, for one token, a
    /// batch, and more tokens than a token tile, over several parallel tasks.
    #[test]
    fn packed_equals_unpacked_on_every_simd_tier() {
        use crate::kernels::packed::pack_q4_k;
        let (rows, cols) = (PACK_ROWS * 40, 512); // 40 groups of 4.6 KB: three parallel tasks
        let mut seed = 0x1234_5678u64;
        let mut next = move || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as u32
        };
        let mut wb: Vec<u8> = (0..rows * cols / 256 * 144).map(|_| next() as u8).collect();
        for b in wb.chunks_exact_mut(144) {
            // Finite f16 super-scales (exponent field 8..11: about 2^-7..2^-4).
            b[0..2].copy_from_slice(&(0x2000u16 + (next() % 0x1000) as u16).to_le_bytes());
            b[2..4].copy_from_slice(&(0x2000u16 + (next() % 0x1000) as u16).to_le_bytes());
        }
        let mut packed = vec![0u8; wb.len()];
        pack_q4_k(rows, cols, &wb, &mut packed);
        let rt = crate::platform::runtime::Runtime::new(2).unwrap();
        for tier in Tier::ALL {
            let Ok(set) = KernelSet::for_tier(tier) else { continue };
            let Some(dot) = set.packed_q4_k() else { continue };
            let kernels = set.get(GgmlType::Q4_K).unwrap();
            let plain = WeightRows {
                data: &wb,
                rows,
                cols,
                row_bytes: cols / 256 * 144,
                kernels,
                packed: None,
            };
            let pk = WeightRows {
                packed: Some(PackedRows { data: &packed, kernel: PackedKernel::Rows16(dot) }),
                ..plain
            };
            same_products(&rt, plain, pk, tier, |i| (i as f32 * 0.71).sin() * 3.0);
        }
    }

    /// The lookup-table path (`Q2_K×32`) equals the unpacked Q2_K path bit for bit on every tier
    /// that uses it (`KernelSet::lut`), over several parallel tasks; batches (which take the
    /// unpacked batch kernel) too.
    #[test]
    fn lut_equals_unpacked_on_every_tier_that_uses_it() {
        use crate::kernels::lut::pack_q2_k;
        let (rows, cols) = (LUT_ROWS * 12, 768); // 12 groups of 8 KB: two parallel tasks
        let mut seed = 0x2468_ace0u64;
        let mut next = move || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as u32
        };
        let mut wb: Vec<u8> = (0..rows * cols / 256 * 84).map(|_| next() as u8).collect();
        for b in wb.chunks_exact_mut(84) {
            // Finite f16 d and dmin (exponent field 8..11: about 2^-7..2^-4).
            b[80..82].copy_from_slice(&(0x2000u16 + (next() % 0x1000) as u16).to_le_bytes());
            b[82..84].copy_from_slice(&(0x2000u16 + (next() % 0x1000) as u16).to_le_bytes());
        }
        let mut packed = vec![0u8; wb.len()];
        pack_q2_k(rows, cols, &wb, &mut packed);
        let rt = crate::platform::runtime::Runtime::new(2).unwrap();
        let mut used = 0;
        for tier in Tier::ALL {
            let Ok(set) = KernelSet::for_tier(tier) else { continue };
            let Some(k) = set.lut(GgmlType::Q2_K) else { continue };
            used += 1;
            let plain = WeightRows {
                data: &wb,
                rows,
                cols,
                row_bytes: cols / 256 * 84,
                kernels: set.get(GgmlType::Q2_K).unwrap(),
                packed: None,
            };
            let lut = WeightRows {
                packed: Some(PackedRows { data: &packed, kernel: PackedKernel::Lut32(k) }),
                ..plain
            };
            same_products(&rt, plain, lut, tier, |i| (i as f32 * 0.53).cos() * 2.0);
        }
        // Every x86 SIMD tier this CPU has uses it (`kernels::select::lut_for`).
        #[cfg(target_arch = "x86_64")]
        assert!(
            used > 0 || !crate::kernels::cpu::cpu_features().avx2,
            "no tier used the LUT kernel"
        );
        let _ = used;
    }
}
