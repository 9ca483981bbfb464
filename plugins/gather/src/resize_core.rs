//! The Resize index-mapping core: the parameter block, the per-axis coordinate math of ONNX's
//! reference (`onnx/reference/ops/op_resize.py`, separable form), and the per-level tap tables
//! and nested sum the CPU kernels ([`crate::inplace`]) compute with. The CUDA kernels
//! (`cuda_resize.rs`) repeat this math operation for operation, in f64, without FMA
//! contraction, so both devices pick the same source pixels and weights.
//!
//! Per resized axis ("level", in processing order: the `axes` attribute's order, else 0..r) an
//! output coordinate `y` maps to a source coordinate `x` ([`x_ori`]); `x` selects a window of
//! `n` taps ([`window`]) whose weights are the mode's coefficients ([`coeff`]), normalized for
//! antialiasing and `exclude_outside` ([`axis_taps`]). Tap indices are clamped into the axis
//! (edge padding). The value is the nested sum of the reference's separable passes: the first
//! level innermost, each level's partial sum multiplied by its weight and added in tap order.
//! A level whose `x` falls outside the input with `tf_crop_and_resize` has the value
//! `extrapolation_value` (and hides the levels inside it).
//!
//! Nearest mode moves elements (entry `resize_nearest_s{S}`, any dtype): per level the tap with
//! weight 1 is copied; `exclude_outside` with that tap outside gives 0. Linear and cubic
//! (`resize_interp_{dtype}`) accumulate in f64 and store as numpy's `saturate_cast` does
//! (floats clipped to the dtype's finite range; integers rounded half to even, then clipped).

use umd_sdk::OpError;
use umd_sdk::dtype::Element;
use umd_sdk::half::{bf16, f16};
use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::shape::MAX_RANK;

/// Coordinate transformation modes, by kernel code.
pub const COORD_MODES: [&str; 7] = [
    "half_pixel",
    "asymmetric",
    "align_corners",
    "pytorch_half_pixel",
    "tf_crop_and_resize",
    "half_pixel_symmetric",
    "tf_half_pixel_for_nn",
];
/// `tf_crop_and_resize`'s code.
pub const TF_CROP: u32 = 4;
/// Nearest modes, by kernel code.
pub const NEAREST_MODES: [&str; 4] = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"];
/// Interpolation kinds.
pub const NEAREST: u32 = 0;
pub const LINEAR: u32 = 1;
pub const CUBIC: u32 = 2;

/// The parameter block of both Resize kernels (arrays indexed by data axis, except `levaxis`,
/// the data axis of each level).
///
/// CUDA: `(const T* x, T* out, u64 n, u32 rank, u32 nlev, u32 cmode, u32 kind, u32 nmode,
/// u32 exclude, u32 antialias, umd_dims odims, umd_dims idims, umd_dims levaxis, umd_dims taps,
/// umd_f64s scale, umd_f64s roi_d, umd_f64s roi_b, umd_f64s roi_half, double cubic_a, double ev,
/// u64 ev_bits)`.
#[derive(Clone, Debug, Default)]
pub struct ResizeParams {
    pub n: u64,
    pub rank: u32,
    pub nlev: u32,
    pub cmode: u32,
    pub kind: u32,
    pub nmode: u32,
    pub exclude: bool,
    pub antialias: bool,
    pub odims: [u64; MAX_RANK],
    pub idims: [u64; MAX_RANK],
    pub levaxis: [u64; MAX_RANK],
    pub taps: [u64; MAX_RANK],
    pub scale: [f64; MAX_RANK],
    pub roi_d: [f64; MAX_RANK],
    pub roi_b: [f64; MAX_RANK],
    pub roi_half: [f64; MAX_RANK],
    pub cubic_a: f64,
    pub ev: f64,
    pub ev_bits: u64,
}

fn f64s(v: &[f64; MAX_RANK]) -> [u64; MAX_RANK] {
    v.map(f64::to_bits)
}

impl ResizeParams {
    /// Packs everything after the two pointers.
    pub fn pack(&self, p: &mut ParamPacker) {
        p.u64(self.n)
            .u32(self.rank)
            .u32(self.nlev)
            .u32(self.cmode)
            .u32(self.kind)
            .u32(self.nmode)
            .u32(self.exclude as u32)
            .u32(self.antialias as u32)
            .u64_array(&self.odims)
            .u64_array(&self.idims)
            .u64_array(&self.levaxis)
            .u64_array(&self.taps)
            .u64_array(&f64s(&self.scale))
            .u64_array(&f64s(&self.roi_d))
            .u64_array(&f64s(&self.roi_b))
            .u64_array(&f64s(&self.roi_half))
            .f64(self.cubic_a)
            .f64(self.ev)
            .u64(self.ev_bits);
    }

    /// Reads what [`ResizeParams::pack`] wrote.
    pub fn read(r: &mut ParamReader) -> Result<Self, OpError> {
        let f = |a: [u64; MAX_RANK]| a.map(f64::from_bits);
        let p = ResizeParams {
            n: r.u64()?,
            rank: r.u32()?,
            nlev: r.u32()?,
            cmode: r.u32()?,
            kind: r.u32()?,
            nmode: r.u32()?,
            exclude: r.u32()? != 0,
            antialias: r.u32()? != 0,
            odims: r.u64_array()?,
            idims: r.u64_array()?,
            levaxis: r.u64_array()?,
            taps: r.u64_array()?,
            scale: f(r.u64_array()?),
            roi_d: f(r.u64_array()?),
            roi_b: f(r.u64_array()?),
            roi_half: f(r.u64_array()?),
            cubic_a: r.f64()?,
            ev: r.f64()?,
            ev_bits: r.u64()?,
        };
        let ok = p.rank as usize <= MAX_RANK
            && p.nlev <= p.rank
            && p.levaxis[..p.nlev as usize]
                .iter()
                .all(|&a| a < p.rank as u64)
            && p.taps.iter().all(|&t| t <= 1 << 24);
        if !ok {
            return Err(OpError::internal("resize: malformed parameter block"));
        }
        Ok(p)
    }
}

/// The source coordinate of output coordinate `y` along axis `d` (reference `_compute_x_ori`).
pub fn x_ori(p: &ResizeParams, d: usize, y: u64) -> f64 {
    let yf = y as f64;
    let s = p.scale[d];
    let w = p.idims[d] as f64;
    let ow = s * w;
    match p.cmode {
        1 => yf / s,
        2 => {
            if ow == 1.0 {
                0.0
            } else {
                yf * (w - 1.0) / (ow - 1.0)
            }
        }
        3 => {
            if ow == 1.0 {
                -0.5
            } else {
                (yf + 0.5) / s - 0.5
            }
        }
        4 => {
            let x = if ow == 1.0 {
                p.roi_half[d]
            } else {
                yf * p.roi_d[d] * (w - 1.0) / (ow - 1.0)
            };
            x + p.roi_b[d]
        }
        5 => {
            let adjustment = p.odims[d] as f64 / ow;
            let center = w / 2.0;
            let offset = center * (1.0 - adjustment);
            offset + (yf + 0.5) / s - 0.5
        }
        6 => (yf + 0.5) / s,
        _ => (yf + 0.5) / s - 0.5,
    }
}

/// The first tap of a window of `n` taps around `x`, and the ratio the coefficients take
/// (in (0, 1]: an integer `x` has ratio 1, preferring the pixel on its left).
pub fn window(x: f64, n: u64) -> (i64, f64) {
    let xi = x.floor();
    let ratio = if x == xi { 1.0 } else { x - xi };
    let n = n as i64;
    let pad = (n + 1) / 2;
    let xp = x + pad as f64;
    let pf = xp.floor();
    let frac = xp - pf;
    let off = if n % 2 == 0 {
        if frac == 0.0 { -(n / 2) } else { -(n / 2) + 1 }
    } else {
        let base = -((n - 1) / 2);
        if frac <= 0.5 { base } else { base + 1 }
    };
    (pf as i64 + off - pad, ratio)
}

/// Taps of a level: 2 for nearest and linear, 4 for cubic; antialiased downscaling widens them
/// to cover `1/scale` (linear) or `2/scale` (cubic) on each side.
pub fn tap_count(kind: u32, antialias: bool, scale: f64) -> u64 {
    match (kind, antialias) {
        (LINEAR, true) => (2 - 2 * aa_start(1.0, scale)) as u64,
        (CUBIC, true) => (2 - 2 * aa_start(2.0, scale)) as u64,
        (CUBIC, false) => 4,
        _ => 2,
    }
}

/// `int(floor(-support / min(scale, 1)) + 1)`: the first tap offset of an antialiased window.
pub fn aa_start(support: f64, scale: f64) -> i64 {
    let s = scale.min(1.0);
    ((-support / s).floor() + 1.0) as i64
}

/// Coefficient `j` of the mode's filter at `ratio` (before normalization).
pub fn coeff(p: &ResizeParams, scale: f64, ratio: f64, j: u64) -> f64 {
    let a = p.cubic_a;
    match (p.kind, p.antialias) {
        (NEAREST, _) => {
            let hit1 = if ratio == 1.0 {
                true
            } else {
                match p.nmode {
                    1 => ratio >= 0.5,
                    2 => false,
                    3 => true,
                    _ => ratio > 0.5,
                }
            };
            ((j == 1) == hit1) as u8 as f64
        }
        (LINEAR, false) => {
            if j == 0 {
                1.0 - ratio
            } else {
                ratio
            }
        }
        (CUBIC, false) => {
            let r = ratio;
            match j {
                0 => ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                1 => ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                2 => ((a + 2.0) * (1.0 - r) - (a + 3.0)) * (1.0 - r) * (1.0 - r) + 1.0,
                _ => {
                    let q = (1.0 - r) + 1.0;
                    ((a * q - 5.0 * a) * q + 8.0 * a) * q - 4.0 * a
                }
            }
        }
        (LINEAR, true) => {
            let s = scale.min(1.0);
            let i = (aa_start(1.0, scale) + j as i64) as f64;
            let x = (i - ratio) * s;
            (1.0 - x.abs()).clamp(0.0, 1.0)
        }
        _ => {
            let s = scale.min(1.0);
            let i = (aa_start(2.0, scale) + j as i64) as f64;
            let x = (s * (i - ratio)).abs();
            let (x2, x3) = (x * x, x * (x * x));
            if x <= 1.0 {
                (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0
            } else if x < 2.0 {
                a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a
            } else {
                0.0
            }
        }
    }
}

/// numpy's `add.reduce` of a contiguous f64 run: sequential below 8 elements, else 8 running
/// partial sums combined pairwise (blocks of up to 128; longer runs split in halves).
pub fn np_sum(v: &[f64]) -> f64 {
    let n = v.len();
    if n < 8 {
        let mut s = 0.0;
        for &x in v {
            s += x;
        }
        s
    } else if n <= 128 {
        let mut r = [0.0f64; 8];
        r.copy_from_slice(&v[..8]);
        let mut i = 8;
        while i < n - n % 8 {
            for k in 0..8 {
                r[k] += v[i + k];
            }
            i += 8;
        }
        let mut s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        while i < n {
            s += v[i];
            i += 1;
        }
        s
    } else {
        let half = (n / 2) - (n / 2) % 8;
        np_sum(&v[..half]) + np_sum(&v[half..])
    }
}

/// One level at one output coordinate: extrapolated, or a window start and its weights.
pub struct Taps {
    pub extrapolated: bool,
    pub start: i64,
    pub weights: Vec<f64>,
}

/// The taps of output coordinate `y` along axis `d` (reference `_interpolate_1d_along_axis`).
pub fn axis_taps(p: &ResizeParams, d: usize, y: u64) -> Taps {
    let w = p.idims[d];
    let x = x_ori(p, d, y);
    let extrapolated = p.cmode == TF_CROP && (x < 0.0 || x > w as f64 - 1.0);
    let n = p.taps[d];
    let (start, ratio) = window(x, n);
    let mut weights: Vec<f64> = (0..n).map(|j| coeff(p, p.scale[d], ratio, j)).collect();
    if p.antialias {
        let mut sum = 0.0;
        for &c in &weights {
            sum += c;
        }
        weights.iter_mut().for_each(|c| *c /= sum);
    }
    if p.exclude {
        for (j, c) in weights.iter_mut().enumerate() {
            let i = start + j as i64;
            if i < 0 || i >= w as i64 {
                *c = 0.0;
            }
        }
        let mut sum = np_sum(&weights);
        if sum == 0.0 {
            sum = 1.0;
        }
        weights.iter_mut().for_each(|c| *c /= sum);
    }
    Taps {
        extrapolated,
        start,
        weights,
    }
}

/// Clamps a tap index into an axis of `w` elements.
#[inline(always)]
pub fn clamp_index(i: i64, w: u64) -> u64 {
    i.clamp(0, w as i64 - 1) as u64
}

/// The nearest-mode pick of one level at `y`.
pub enum Pick {
    Index(u64),
    Zero,
    Extrapolated,
}

/// Which input coordinate nearest mode copies for output coordinate `y` along axis `d`.
pub fn nearest_pick(p: &ResizeParams, d: usize, y: u64) -> Pick {
    let w = p.idims[d];
    let x = x_ori(p, d, y);
    if p.cmode == TF_CROP && (x < 0.0 || x > w as f64 - 1.0) {
        return Pick::Extrapolated;
    }
    let (start, ratio) = window(x, 2);
    let i = start + coeff(p, p.scale[d], ratio, 1) as i64;
    if p.exclude && (i < 0 || i >= w as i64) {
        return Pick::Zero;
    }
    Pick::Index(clamp_index(i, w))
}

/// The input offset of the axes that are not resized (their coordinate passes through).
pub(crate) fn identity_base(p: &ResizeParams, c: &[u64; MAX_RANK], istr: &[u64]) -> u64 {
    let lev = &p.levaxis[..p.nlev as usize];
    (0..p.rank as usize)
        .filter(|d| !lev.contains(&(*d as u64)))
        .map(|d| c[d] * istr[d])
        .sum()
}

/// How an f64 result is stored in a dtype (numpy's `saturate_cast`).
pub trait Saturate: Element {
    fn saturate(v: f64) -> Self;
    fn to_f64(self) -> f64;
}

macro_rules! saturate_float {
    ($t:ty, $max:expr, $from:expr, $to:expr) => {
        impl Saturate for $t {
            fn saturate(v: f64) -> $t {
                let m: f64 = $max;
                let v = if v < -m {
                    -m
                } else if v > m {
                    m
                } else {
                    v
                };
                $from(v)
            }
            fn to_f64(self) -> f64 {
                $to(self)
            }
        }
    };
}
saturate_float!(f32, f32::MAX as f64, |v: f64| v as f32, |x: f32| x as f64);
saturate_float!(f64, f64::MAX, |v: f64| v, |x: f64| x);
saturate_float!(f16, f16::MAX.to_f64(), f16::from_f64, |x: f16| x.to_f64());
// ml_dtypes converts f64 to bfloat16 through f32 (two roundings), as the CUDA kernel does
saturate_float!(
    bf16,
    bf16::MAX.to_f64(),
    |v: f64| bf16::from_f32(v as f32),
    |x: bf16| x.to_f64()
);

macro_rules! saturate_int {
    ($t:ty) => {
        impl Saturate for $t {
            fn saturate(v: f64) -> $t {
                let v = v.round_ties_even();
                let (lo, hi) = (<$t>::MIN as f64, <$t>::MAX as f64);
                (if v < lo {
                    lo
                } else if v > hi {
                    hi
                } else {
                    v
                }) as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    };
}
saturate_int!(i32);
saturate_int!(i64);
saturate_int!(i8);
saturate_int!(u8);
saturate_int!(i16);
saturate_int!(u16);
saturate_int!(u32);
saturate_int!(u64);

/// One level's taps for every output coordinate, flattened.
pub(crate) struct LevelTable {
    pub axis: usize,
    pub n: usize,
    pub extrapolated: Vec<bool>,
    /// clamped input index of tap j at coordinate y: `index[y * n + j]`
    pub index: Vec<u64>,
    pub weight: Vec<f64>,
}

/// Every level's taps, in level order.
pub(crate) fn level_tables(p: &ResizeParams) -> Vec<LevelTable> {
    (0..p.nlev as usize)
        .map(|l| {
            let d = p.levaxis[l] as usize;
            let n = p.taps[d] as usize;
            let mut t = LevelTable {
                axis: d,
                n,
                extrapolated: Vec::new(),
                index: Vec::new(),
                weight: Vec::new(),
            };
            for y in 0..p.odims[d] {
                let taps = axis_taps(p, d, y);
                t.extrapolated.push(taps.extrapolated);
                for (j, wt) in taps.weights.iter().enumerate() {
                    t.index.push(clamp_index(taps.start + j as i64, p.idims[d]));
                    t.weight.push(*wt);
                }
            }
            t
        })
        .collect()
}

/// The nested weighted sum over `levels` (innermost first), as the separable passes compute it.
pub(crate) fn nested_sum(
    levels: &[LevelTable],
    c: &[u64; MAX_RANK],
    istr: &[u64],
    base: u64,
    leaf: impl Fn(u64) -> f64,
) -> f64 {
    let k = levels.len();
    let mut j = [0usize; MAX_RANK];
    let mut acc = [0f64; MAX_RANK];
    let row = |l: usize| c[levels[l].axis] as usize * levels[l].n;
    let off = |l: usize, j: usize| levels[l].index[row(l) + j] * istr[levels[l].axis];
    let wt = |l: usize, j: usize| levels[l].weight[row(l) + j];
    let mut offs = [0u64; MAX_RANK];
    for (l, o) in offs.iter_mut().enumerate().take(k) {
        *o = off(l, 0);
    }
    loop {
        let src = base + offs[..k].iter().sum::<u64>();
        acc[0] += leaf(src) * wt(0, j[0]);
        let mut l = 0;
        loop {
            j[l] += 1;
            if j[l] < levels[l].n {
                offs[l] = off(l, j[l]);
                break;
            }
            if l == k - 1 {
                return acc[l];
            }
            j[l] = 0;
            offs[l] = off(l, 0);
            acc[l + 1] += acc[l] * wt(l + 1, j[l + 1]);
            acc[l] = 0.0;
            l += 1;
        }
    }
}
