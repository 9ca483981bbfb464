//! (ABI 1.9) Weights packed once for the CPU device's matrix unit. A product one of whose
//! operands is a bound, frozen buffer (a compiled model's weights, named resident by the
//! device) and whose other operand is small — a late CNN layer's few positions, a transformer's
//! tokens — multiplies against a copy of the frozen operand packed for the register kernel on
//! the first call and kept in a process-wide, bounded cache ([`cached`]) under the buffer's
//! resident name (never reused: a name always means the same bytes). `matrixmultiply` packs
//! both operands on every call: against few rows, packing a large weight costs as much as the
//! product (measured in BENCHMARKS.md). Own register kernels, AVX-512F (8 × 32) and AVX2 + FMA
//! (6 × 16), on `x86_64`; elsewhere, or without either, the matrix unit stays on
//! `matrixmultiply` ([`Isa::detect`] is `None`).
//!
//! Owns the cache and the kernels; reads only the views it is handed; touches no device state.
//! The device forgets a name's packed copies when its buffer is freed ([`forget`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, OnceLock};

use parking_lot::Mutex;

/// Depth of one pass of the register kernel (a packed block of the frozen operand).
const KC: usize = 256;
/// Rows of the small operand packed at a time (its block stays in L2 while the strips pass).
const MC: usize = 128;
/// Most bytes of packed copies the cache holds (least recently used ones go first).
const MAX_BYTES: usize = 512 << 20;
/// Most packed copies the cache holds.
const MAX_ENTRIES: usize = 4096;

/// The register kernel this CPU runs. Only [`Isa::detect`] makes one, so holding an `Isa`
/// means the CPU has its features (what the kernels' safety rests on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Isa(Kernel);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kernel {
    Avx512,
    Avx2,
}

impl Isa {
    /// The widest kernel this CPU has, detected once; `None` without AVX2 + FMA (or off
    /// `x86_64`).
    pub fn detect() -> Option<Isa> {
        static DETECTED: OnceLock<Option<Isa>> = OnceLock::new();
        *DETECTED.get_or_init(|| Self::all().last().copied())
    }

    /// Every kernel this CPU has, narrowest first (tests run each).
    fn all() -> Vec<Isa> {
        #[allow(unused_mut)]
        let mut all = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                all.push(Isa(Kernel::Avx2));
            }
            if is_x86_feature_detected!("avx512f") {
                all.push(Isa(Kernel::Avx512));
            }
        }
        all
    }

    /// The register tile: rows of the small operand, columns of the packed one.
    fn tile(self) -> (usize, usize) {
        match self.0 {
            Kernel::Avx512 => (8, 32),
            Kernel::Avx2 => (6, 16),
        }
    }
}

/// A strided f32 matrix: element `(i, j)` at `data[i * rs + j * cs]` (the caller checked
/// that every element it reads lies in `data`).
#[derive(Clone, Copy)]
pub struct Mat<'a> {
    pub data: &'a [f32],
    pub rs: usize,
    pub cs: usize,
}

impl Mat<'_> {
    #[inline(always)]
    fn at(&self, i: usize, j: usize) -> f32 {
        self.data[i * self.rs + j * self.cs]
    }
}

/// The right operand (`k × n`) of `C = X · P`, packed: [`KC`]-deep blocks, each of strips of
/// the tile's width (zero padded); block `k0`, strip `s` at `k0 * strips * nr + s * kc * nr`.
pub struct Packed {
    k: usize,
    n: usize,
    isa: Isa,
    data: Vec<f32>,
}

impl Packed {
    /// Packs `b` (`k × n`) for `isa`'s kernel.
    pub fn pack(b: Mat, k: usize, n: usize, isa: Isa) -> Packed {
        let nr = isa.tile().1;
        let strips = n.div_ceil(nr);
        let len = Self::len(k, n, isa).expect("a packed copy's size fits usize");
        let mut data = vec![0f32; len];
        for k0 in (0..k).step_by(KC) {
            let kc = KC.min(k - k0);
            for s in 0..strips {
                let block = &mut data[k0 * strips * nr + s * kc * nr..][..kc * nr];
                let cols = nr.min(n - s * nr);
                for (p, row) in block.chunks_exact_mut(nr).enumerate() {
                    for (j, v) in row[..cols].iter_mut().enumerate() {
                        *v = b.at(k0 + p, s * nr + j);
                    }
                }
            }
        }
        Packed { k, n, isa, data }
    }

    fn bytes(&self) -> usize {
        self.data.len() * 4
    }

    /// Elements of the packed copy of a `k × n` operand for `isa` (its strips zero padded to
    /// the tile's width); `None` past `usize`.
    pub fn len(k: usize, n: usize, isa: Isa) -> Option<usize> {
        let nr = isa.tile().1;
        n.div_ceil(nr).checked_mul(nr)?.checked_mul(k)
    }
}

/// `c` (overwritten) = `x` (`m × p.k`) · `p`: row-major `m × p.n`, or with `transposed` its
/// transpose (row-major `p.n × m`).
pub fn multiply(x: Mat, m: usize, p: &Packed, c: &mut [f32], transposed: bool) {
    let (k, n) = (p.k, p.n);
    assert_eq!(c.len(), m * n, "the product's size");
    if k == 0 {
        c.fill(0.0);
        return;
    }
    let (mr, nr) = p.isa.tile();
    let strips = n.div_ceil(nr);
    let (mut xp, mut tile) = (Vec::new(), [0f32; 256]);
    for k0 in (0..k).step_by(KC) {
        let kc = KC.min(k - k0);
        for m0 in (0..m).step_by(MC) {
            let mc = MC.min(m - m0);
            pack_rows(x, m0..m0 + mc, k0..k0 + kc, mr, &mut xp);
            for s in 0..strips {
                let strip = &p.data[k0 * strips * nr + s * kc * nr..][..kc * nr];
                let cols = nr.min(n - s * nr);
                for (r, panel) in xp.chunks_exact(kc * mr).enumerate() {
                    micro(p.isa, kc, panel, strip, &mut tile);
                    let (row0, rows) = (m0 + r * mr, mr.min(mc - r * mr));
                    let first = k0 == 0;
                    if transposed {
                        // column j of the tile is a run of `rows` in row j of `c`
                        for j in 0..cols {
                            let out = &mut c[(s * nr + j) * m + row0..][..rows];
                            let t = tile[j..].iter().step_by(nr);
                            store(out, t, first);
                        }
                    } else {
                        for i in 0..rows {
                            let out = &mut c[(row0 + i) * n + s * nr..][..cols];
                            store(out, tile[i * nr..][..cols].iter(), first);
                        }
                    }
                }
            }
        }
    }
}

/// Stores (`first` depth block) or adds a run of a tile into `out`.
#[inline(always)]
fn store<'t>(out: &mut [f32], t: impl Iterator<Item = &'t f32>, first: bool) {
    if first {
        out.iter_mut().zip(t).for_each(|(o, v)| *o = *v);
    } else {
        out.iter_mut().zip(t).for_each(|(o, v)| *o += v);
    }
}

/// Packs rows `rows` of `x`, depths `ks`, into panels of `mr` rows (depth-major, zero padded).
fn pack_rows(
    x: Mat,
    rows: std::ops::Range<usize>,
    ks: std::ops::Range<usize>,
    mr: usize,
    out: &mut Vec<f32>,
) {
    let kc = ks.len();
    out.clear();
    out.resize(rows.len().div_ceil(mr) * kc * mr, 0.0);
    for (r, panel) in out.chunks_exact_mut(kc * mr).enumerate() {
        let row0 = rows.start + r * mr;
        let live = mr.min(rows.end - row0);
        for (p, group) in panel.chunks_exact_mut(mr).enumerate() {
            let kk = ks.start + p;
            if x.rs == 1 {
                // rows contiguous at each depth (a transposed operand, a conv's input planes)
                group[..live].copy_from_slice(&x.data[row0 + kk * x.cs..][..live]);
            } else {
                for (i, v) in group[..live].iter_mut().enumerate() {
                    *v = x.at(row0 + i, kk);
                }
            }
        }
    }
}

/// `tile` (row-major `mr × nr`) = `panel` (`kc` groups of `mr`) · `strip` (`kc` rows of `nr`)
/// on `isa`'s kernel.
fn micro(isa: Isa, kc: usize, panel: &[f32], strip: &[f32], tile: &mut [f32; 256]) {
    #[cfg(target_arch = "x86_64")]
    match isa.0 {
        // SAFETY: an `Isa` exists only once `Isa::detect` (or `all`) saw avx512f on this CPU.
        Kernel::Avx512 => unsafe { x86::micro_avx512(kc, panel, strip, tile) },
        // SAFETY: likewise, avx2 and fma.
        Kernel::Avx2 => unsafe { x86::micro_avx2(kc, panel, strip, tile) },
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, kc, panel, strip, tile);
        unreachable!("no Isa exists off x86_64")
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// The 8 × 32 AVX-512 tile: 16 accumulators, two vectors of the strip per depth.
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn micro_avx512(kc: usize, panel: &[f32], strip: &[f32], tile: &mut [f32; 256]) {
        assert!(panel.len() >= kc * 8 && strip.len() >= kc * 32);
        let (a, b) = (panel.as_ptr(), strip.as_ptr());
        let mut c = [_mm512_setzero_ps(); 16];
        for p in 0..kc {
            // SAFETY: p < kc, and the strip holds kc rows of 32 (asserted above)
            let (b0, b1) = unsafe {
                (
                    _mm512_loadu_ps(b.add(p * 32)),
                    _mm512_loadu_ps(b.add(p * 32 + 16)),
                )
            };
            for i in 0..8 {
                // SAFETY: p < kc, and the panel holds kc groups of 8 (asserted above)
                let av = _mm512_set1_ps(unsafe { *a.add(p * 8 + i) });
                c[2 * i] = _mm512_fmadd_ps(av, b0, c[2 * i]);
                c[2 * i + 1] = _mm512_fmadd_ps(av, b1, c[2 * i + 1]);
            }
        }
        for (i, v) in c.iter().enumerate() {
            // SAFETY: 16 vectors of 16 fill the tile's 256 elements exactly
            unsafe { _mm512_storeu_ps(tile.as_mut_ptr().add(i * 16), *v) };
        }
    }

    /// The 6 × 16 AVX2 tile: 12 accumulators, two vectors of the strip per depth.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn micro_avx2(kc: usize, panel: &[f32], strip: &[f32], tile: &mut [f32; 256]) {
        assert!(panel.len() >= kc * 6 && strip.len() >= kc * 16);
        let (a, b) = (panel.as_ptr(), strip.as_ptr());
        let mut c = [_mm256_setzero_ps(); 12];
        for p in 0..kc {
            // SAFETY: p < kc, and the strip holds kc rows of 16 (asserted above)
            let (b0, b1) = unsafe {
                (
                    _mm256_loadu_ps(b.add(p * 16)),
                    _mm256_loadu_ps(b.add(p * 16 + 8)),
                )
            };
            for i in 0..6 {
                // SAFETY: p < kc, and the panel holds kc groups of 6 (asserted above)
                let av = _mm256_set1_ps(unsafe { *a.add(p * 6 + i) });
                c[2 * i] = _mm256_fmadd_ps(av, b0, c[2 * i]);
                c[2 * i + 1] = _mm256_fmadd_ps(av, b1, c[2 * i + 1]);
            }
        }
        for (i, v) in c.iter().enumerate() {
            // SAFETY: 12 vectors of 8 fill the tile's first 96 elements (6 rows of 16)
            unsafe { _mm256_storeu_ps(tile.as_mut_ptr().add(i * 8), *v) };
        }
    }
}

/// What a packed copy is of: the frozen buffer's resident name and the view of it (in f32s),
/// for a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    pub name: u64,
    pub offset: u64,
    pub rs: u64,
    pub cs: u64,
    pub k: usize,
    pub n: usize,
    pub isa: Isa,
}

#[derive(Default)]
struct Cache {
    /// Each copy and when it was last used.
    entries: HashMap<Key, (Arc<Packed>, u64)>,
    /// Keys by last use (a clock), least recent first.
    order: BTreeMap<u64, Key>,
    /// Bytes of copies held, in all and per resident name.
    bytes: usize,
    by_name: HashMap<u64, usize>,
    clock: u64,
}

impl Cache {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn remove(&mut self, key: &Key) {
        if let Some((p, used)) = self.entries.remove(key) {
            self.order.remove(&used);
            self.bytes -= p.bytes();
            if let Some(b) = self.by_name.get_mut(&key.name) {
                *b -= p.bytes();
                if *b == 0 {
                    self.by_name.remove(&key.name);
                }
            }
        }
    }
}

static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(Mutex::default);

/// The packed copy under `key`, packed by `pack` (outside the cache's lock) when there is
/// none; kept when it fits the cache (evicting the least recently used copies) and the copies
/// of its name stay within `name_budget` bytes — so that views without end of one buffer
/// cannot fill the cache: such a copy serves its call only.
pub fn cached(key: Key, name_budget: usize, pack: impl FnOnce() -> Packed) -> Arc<Packed> {
    {
        let mut c = CACHE.lock();
        let now = c.tick();
        if let Some((p, used)) = c.entries.get_mut(&key) {
            let (p, was) = (p.clone(), std::mem::replace(used, now));
            c.order.remove(&was);
            c.order.insert(now, key);
            return p;
        }
    }
    let packed = Arc::new(pack());
    let size = packed.bytes();
    let mut c = CACHE.lock();
    if let Some((p, _)) = c.entries.get(&key) {
        return p.clone(); // packed meanwhile by another thread
    }
    let of_name = c.by_name.get(&key.name).copied().unwrap_or(0);
    if size > MAX_BYTES / 4 || of_name + size > name_budget {
        return packed;
    }
    while c.bytes + size > MAX_BYTES || c.entries.len() >= MAX_ENTRIES {
        let Some((_, old)) = c.order.pop_first() else {
            break;
        };
        c.remove(&old);
    }
    let now = c.tick();
    c.bytes += size;
    *c.by_name.entry(key.name).or_default() += size;
    c.order.insert(now, key);
    c.entries.insert(key, (packed.clone(), now));
    packed
}

/// Drops every packed copy of the buffer named `name` (its buffer is being freed).
pub fn forget(name: u64) {
    let mut c = CACHE.lock();
    if !c.by_name.contains_key(&name) {
        return;
    }
    let keys: Vec<Key> = c
        .entries
        .keys()
        .filter(|k| k.name == name)
        .copied()
        .collect();
    for k in keys {
        c.remove(&k);
    }
}

/// Packed copies held, and their bytes (host memory, beside the devices' buffers).
pub fn held_total() -> (usize, usize) {
    let c = CACHE.lock();
    (c.entries.len(), c.bytes)
}

/// Packed copies held of the buffer named `name`.
#[cfg(test)]
pub fn held(name: u64) -> usize {
    CACHE
        .lock()
        .entries
        .keys()
        .filter(|k| k.name == name)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: Mat, b: Mat, (m, n, k): (usize, usize, usize)) -> Vec<f32> {
        let mut c = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|p| a.at(i, p) * b.at(p, j)).sum();
            }
        }
        c
    }

    #[test]
    fn every_kernel_matches_a_naive_product_on_ragged_shapes_and_layouts() {
        if Isa::all().is_empty() {
            eprintln!("SKIPPED: this CPU has neither AVX2+FMA nor AVX-512F: no packed kernel");
            return;
        }
        // small integers: sums exact in any order; extents not multiples of any tile or block
        for isa in Isa::all() {
            for &(m, n, k) in &[
                (1, 1, 1),
                (7, 33, 300),
                (130, 17, 513),
                (9, 70, 256),
                (3, 5, 0),
            ] {
                let ad: Vec<f32> = (0..m * k + 3).map(|i| (i % 7) as f32 - 3.0).collect();
                let bd: Vec<f32> = (0..k * n + 5).map(|i| (i % 5) as f32 - 2.0).collect();
                // A row-major and transposed, B row-major and transposed
                for (a, b) in [
                    (
                        Mat {
                            data: &ad,
                            rs: k,
                            cs: 1,
                        },
                        Mat {
                            data: &bd,
                            rs: n,
                            cs: 1,
                        },
                    ),
                    (
                        Mat {
                            data: &ad,
                            rs: 1,
                            cs: m,
                        },
                        Mat {
                            data: &bd,
                            rs: 1,
                            cs: k,
                        },
                    ),
                ] {
                    let p = Packed::pack(b, k, n, isa);
                    let want = naive(a, b, (m, n, k));
                    let mut c = vec![f32::NAN; m * n];
                    multiply(a, m, &p, &mut c, false);
                    assert_eq!(c, want, "{isa:?} {m}x{n}x{k}");
                    let mut t = vec![f32::NAN; m * n];
                    multiply(a, m, &p, &mut t, true);
                    let tt: Vec<f32> = (0..m * n).map(|e| t[(e % n) * m + e / n]).collect();
                    assert_eq!(tt, want, "{isa:?} {m}x{n}x{k} transposed");
                }
            }
        }
    }

    #[test]
    fn the_cache_keeps_packs_by_name_within_its_budget_and_forgets_them() {
        let Some(isa) = Isa::detect() else {
            eprintln!("SKIPPED: this CPU has neither AVX2+FMA nor AVX-512F: no packed kernel");
            return;
        };
        let bd: Vec<f32> = (0..64).map(|i| i as f32).collect();
        let b = Mat {
            data: &bd,
            rs: 8,
            cs: 1,
        };
        let name = u64::MAX - 7; // a name no other test uses
        let key = |offset| Key {
            name,
            offset,
            rs: 8,
            cs: 1,
            k: 8,
            n: 8,
            isa,
        };
        let size = Packed::len(8, 8, isa).unwrap() * 4;
        let packs = std::cell::Cell::new(0);
        let pack = || {
            packs.set(packs.get() + 1);
            Packed::pack(b, 8, 8, isa)
        };
        // room for two copies of this name
        let budget = 2 * size;
        let first = cached(key(0), budget, pack);
        let again = cached(key(0), budget, pack);
        assert!(Arc::ptr_eq(&first, &again), "kept under its key");
        assert_eq!(packs.get(), 1);
        // another view of the same buffer is another copy, kept while the name has room
        let other = cached(key(1), budget, pack);
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!((held(name), packs.get()), (2, 2));
        // past the name's budget: packed for its call, not kept
        let third = cached(key(2), budget, pack);
        let fourth = cached(key(2), budget, pack);
        assert!(!Arc::ptr_eq(&third, &fourth), "packed again");
        assert_eq!((held(name), packs.get()), (2, 4));
        forget(name);
        assert_eq!(held(name), 0, "forgotten");
        let c = CACHE.lock();
        let sum = c.entries.values().map(|(p, _)| p.bytes()).sum::<usize>();
        assert_eq!(c.bytes, sum, "the byte count follows the copies");
        assert_eq!(
            c.order.len(),
            c.entries.len(),
            "one place in the order per copy"
        );
        assert!(!c.by_name.contains_key(&name));
    }
}
