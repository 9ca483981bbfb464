//! CPU kernels: a blocked GEMM (packed, zero-padded panels of B and A in the accumulation type,
//! a 4×8 register micro-kernel, contiguous inner loops), shared by `matmul_{T}` (MatMul and
//! Gemm, every served dtype) and `matmulint_{TA}_{TB}` (MatMulInteger), reading the parameter
//! blocks of [`crate::plan`]. On wasm32 the drivers are compiled with SIMD128.

use half::{bf16, f16};
use umd_sdk::cpu::Buffers;
use umd_sdk::dtype::{self, Element};
use umd_sdk::params::ParamReader;
use umd_sdk::{CpuCall, CpuWrite, Dtype, OpError};

use crate::plan::Geometry;

/// Rows and columns of the register micro-tile; depth and width of the packed B block.
const MR: usize = 4;
const NR: usize = 8;
const KC: usize = 256;
const NC: usize = 256;

/// What products accumulate in: f32 (f32, f16, bf16), f64, and wrapping i32/i64.
pub trait Acc: Copy + Send + Sync + 'static {
    const ZERO: Self;
    /// `self + a * b` (wrapping for integers).
    fn mul_add(self, a: Self, b: Self) -> Self;
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    /// Gemm's alpha/beta in this type (integers: whole numbers, checked when planning).
    fn from_f64(v: f64) -> Self;
}

macro_rules! float_acc {
    ($t:ty) => {
        impl Acc for $t {
            const ZERO: Self = 0.0;
            #[inline(always)]
            fn mul_add(self, a: Self, b: Self) -> Self {
                self + a * b
            }
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self + o
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self * o
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
        }
    };
}
float_acc!(f32);
float_acc!(f64);

macro_rules! int_acc {
    ($t:ty) => {
        impl Acc for $t {
            const ZERO: Self = 0;
            #[inline(always)]
            fn mul_add(self, a: Self, b: Self) -> Self {
                self.wrapping_add(a.wrapping_mul(b))
            }
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn from_f64(v: f64) -> Self {
                v as i64 as $t
            }
        }
    };
}
int_acc!(i32);
int_acc!(i64);

/// Reusable packing and accumulation buffers.
pub struct Scratch<A> {
    bpack: Vec<A>,
    apack: Vec<A>,
    cbuf: Vec<A>,
}

impl<A: Acc> Scratch<A> {
    pub fn new() -> Self {
        Scratch {
            bpack: Vec::new(),
            apack: vec![A::ZERO; MR * KC],
            cbuf: Vec::new(),
        }
    }
}

/// `Y = A · B` for an `m × k` operand `a(i, kk)` and a `k × n` operand `b(kk, j)`; every row
/// segment of Y is handed to `emit(i, j0, values of columns j0..)`, each exactly once.
#[inline(always)]
pub fn gemm<A: Acc>(
    (m, n, k): (usize, usize, usize),
    a: impl Fn(usize, usize) -> A,
    b: impl Fn(usize, usize) -> A,
    s: &mut Scratch<A>,
    mut emit: impl FnMut(usize, usize, &[A]),
) {
    if m == 0 || n == 0 {
        return;
    }
    let mut j0 = 0;
    while j0 < n {
        let nc = NC.min(n - j0);
        let strips = nc.div_ceil(NR);
        s.cbuf.clear();
        s.cbuf.resize(m * nc, A::ZERO);
        let mut k0 = 0;
        while k0 < k {
            let kc = KC.min(k - k0);
            // B block: strips of NR columns, each kc rows of NR contiguous values (zero padded)
            s.bpack.clear();
            s.bpack.resize(strips * kc * NR, A::ZERO);
            for (st, strip) in s.bpack.chunks_exact_mut(kc * NR).enumerate() {
                let cols = NR.min(nc - st * NR);
                for (kk, row) in strip.chunks_exact_mut(NR).enumerate() {
                    for (c, v) in row[..cols].iter_mut().enumerate() {
                        *v = b(k0 + kk, j0 + st * NR + c);
                    }
                }
            }
            let mut i0 = 0;
            while i0 < m {
                let rows = MR.min(m - i0);
                // A block: kc columns of MR contiguous rows (zero padded)
                for (kk, col) in s.apack.chunks_exact_mut(MR).take(kc).enumerate() {
                    for (r, v) in col.iter_mut().enumerate() {
                        *v = if r < rows {
                            a(i0 + r, k0 + kk)
                        } else {
                            A::ZERO
                        };
                    }
                }
                for (st, strip) in s.bpack.chunks_exact(kc * NR).enumerate() {
                    let tile = micro(kc, &s.apack, strip);
                    let cols = NR.min(nc - st * NR);
                    for (r, trow) in tile.iter().enumerate().take(rows) {
                        let at = (i0 + r) * nc + st * NR;
                        for (c, v) in s.cbuf[at..at + cols].iter_mut().zip(trow) {
                            *c = c.add(*v);
                        }
                    }
                }
                i0 += MR;
            }
            k0 += kc;
        }
        for (i, row) in s.cbuf.chunks_exact(nc).enumerate() {
            emit(i, j0, row);
        }
        j0 += nc;
    }
}

/// The MR×NR tile `Σ_kk apack[kk][r] · bpack[kk][c]` (accumulators stay in registers).
#[inline(always)]
fn micro<A: Acc>(kc: usize, apack: &[A], bpack: &[A]) -> [[A; NR]; MR] {
    let mut acc = [[A::ZERO; NR]; MR];
    for (av, bv) in apack.chunks_exact(MR).zip(bpack.chunks_exact(NR)).take(kc) {
        let av: &[A; MR] = av.try_into().expect("MR rows");
        let bv: &[A; NR] = bv.try_into().expect("NR columns");
        for r in 0..MR {
            for c in 0..NR {
                acc[r][c] = acc[r][c].mul_add(av[r], bv[c]);
            }
        }
    }
    acc
}

/// Runs one launch.
pub fn run(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let unknown = || OpError::internal(format!("unknown entry point `{}`", call.entry_point));
    let mut parts = call.entry_point.split('_');
    let kernel = parts.next();
    let mut dt = || parts.next().and_then(dtype::from_name).ok_or_else(unknown);
    match kernel {
        Some("matmul") => match dt()? {
            Dtype::F32 => matmul::<f32>(call),
            Dtype::F16 => matmul::<f16>(call),
            Dtype::Bf16 => matmul::<bf16>(call),
            Dtype::F64 => matmul::<f64>(call),
            Dtype::I32 => matmul::<i32>(call),
            Dtype::I64 => matmul::<i64>(call),
            _ => Err(unknown()),
        },
        Some("matmulint") => match (dt()?, dt()?) {
            (Dtype::U8, Dtype::U8) => matmul_int::<u8, u8>(call),
            (Dtype::U8, Dtype::I8) => matmul_int::<u8, i8>(call),
            (Dtype::I8, Dtype::U8) => matmul_int::<i8, u8>(call),
            (Dtype::I8, Dtype::I8) => matmul_int::<i8, i8>(call),
            _ => Err(unknown()),
        },
        _ => Err(unknown()),
    }
}

/// Defines `$name`, which runs `$body` (an `#[inline(always)]` function) compiled with SIMD128
/// on wasm32 (part of the feature set the host's engine runs plugins with), plainly natively.
macro_rules! simd_entry {
    ($name:ident <$($g:ident: $b:path),*> => $body:ident $(where $($w:tt)*)?) => {
        fn $name<$($g: $b),*>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError>
        $(where $($w)*)?
        {
            #[cfg(target_arch = "wasm32")]
            {
                #[target_feature(enable = "simd128")]
                fn with_simd<$($g: $b),*>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError>
                $(where $($w)*)?
                {
                    $body::<$($g),*>(call)
                }
                // (wasm features are safe to call: a missing one fails validation at load)
                with_simd::<$($g),*>(call)
            }
            #[cfg(not(target_arch = "wasm32"))]
            $body::<$($g),*>(call)
        }
    };
}
simd_entry!(matmul<T: Element> => matmul_body where T::Compute: Acc);
simd_entry!(matmul_int<TA: Int8, TB: Int8> => matmul_int_body);

/// Element `i` of a buffer of `T`s in its compute type.
#[inline(always)]
fn load<T: Element>(buf: &[u8], i: usize) -> T::Compute {
    let s = std::mem::size_of::<T>();
    T::load(&buf[i * s..i * s + s]).to_compute()
}

/// The operand buffers of a launch, checked to cover every element the geometry reads.
fn operands<'a>(
    bufs: &Buffers<'a>,
    (a, b): (u32, u32),
    g: &Geometry,
    (sa, sb): (usize, usize),
) -> Result<(&'a [u8], &'a [u8]), OpError> {
    let (ea, eb) = g.extents();
    Ok((
        bufs.input(a, ea * sa as u64)?,
        bufs.input(b, eb * sb as u64)?,
    ))
}

/// `matmul_{T}`: MatMul and Gemm.
#[inline(always)]
fn matmul_body<T: Element>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError>
where
    T::Compute: Acc,
{
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let flags = r.u32()?;
    let (a, b) = (r.ptr()?, r.ptr()?);
    let c = if flags & 1 != 0 {
        Some(r.ptr()?)
    } else {
        r.u64()?;
        None
    };
    let y = r.ptr()?;
    let (alpha, beta, scm, scn) = (r.f64()?, r.f64()?, r.u64()?, r.u64()?);
    let g = Geometry::read(&mut r)?;
    let s = std::mem::size_of::<T>();
    let (a, b) = operands(&bufs, (a, b), &g, (s, s))?;
    let (m, n, k) = (g.m as usize, g.n as usize, g.k as usize);
    let c = match c {
        Some(c) if m > 0 && n > 0 => {
            let last = (m as u64 - 1) * scm + (n as u64 - 1) * scn + 1;
            Some(bufs.input(c, last * s as u64)?)
        }
        _ => None,
    };
    let per = m * n;
    let mut out = bufs.output(y, g.batch() * g.m * g.n * s as u64)?;
    let (alpha_c, beta_c) = (
        <T::Compute as Acc>::from_f64(alpha),
        <T::Compute as Acc>::from_f64(beta),
    );
    let (sam, sak, sbk, sbn) = (
        g.sam as usize,
        g.sak as usize,
        g.sbk as usize,
        g.sbn as usize,
    );
    let (scm, scn) = (scm as usize, scn as usize);
    let mut scratch = Scratch::new();
    for z in 0..g.batch() {
        let (oa, ob) = g.batch_offsets(z);
        let (oa, ob) = (oa as usize, ob as usize);
        let base = z as usize * per;
        let data = &mut out.data;
        gemm(
            (m, n, k),
            |i, kk| load::<T>(a, oa + i * sam + kk * sak),
            |kk, j| load::<T>(b, ob + kk * sbk + j * sbn),
            &mut scratch,
            |i, j0, row| {
                for (j, &v) in row.iter().enumerate() {
                    let mut v = if alpha == 1.0 { v } else { alpha_c.mul(v) };
                    if let Some(c) = c {
                        let cv = load::<T>(c, i * scm + (j0 + j) * scn);
                        v = v.add(beta_c.mul(cv));
                    }
                    let at = (base + i * n + j0 + j) * s;
                    T::from_compute(v).store(&mut data[at..at + s]);
                }
            },
        );
    }
    Ok(vec![out])
}

/// An 8-bit MatMulInteger operand element.
trait Int8: Element {
    fn widen(self) -> i32;
}
impl Int8 for u8 {
    #[inline(always)]
    fn widen(self) -> i32 {
        self as i32
    }
}
impl Int8 for i8 {
    #[inline(always)]
    fn widen(self) -> i32 {
        self as i32
    }
}

/// `matmulint_{TA}_{TB}`: `(A - a_zero_point) · (B - b_zero_point)` in wrapping i32.
#[inline(always)]
fn matmul_int_body<TA: Int8, TB: Int8>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let flags = r.u32()?;
    let (a, b) = (r.ptr()?, r.ptr()?);
    let mut zp = |bit: u32| -> Result<Option<u32>, OpError> {
        if flags & bit != 0 {
            r.ptr().map(Some)
        } else {
            r.u64().map(|_| None)
        }
    };
    let (az, bz) = (zp(1)?, zp(2)?);
    let y = r.ptr()?;
    let (azs, bzs) = (r.u64()? as usize, r.u64()? as usize);
    let g = Geometry::read(&mut r)?;
    let (a, b) = operands(&bufs, (a, b), &g, (1, 1))?;
    let (m, n, k) = (g.m as usize, g.n as usize, g.k as usize);
    // zero points, widened once (absent: zeros)
    let zeros = |z: Option<u32>, count: usize, stride: usize, widen: fn(u8) -> i32| {
        let count = if stride == 0 { 1 } else { count };
        match z {
            Some(z) => bufs
                .input(z, count as u64)
                .map(|d| d[..count].iter().map(|&v| widen(v)).collect()),
            None => Ok(vec![0; count]),
        }
    };
    let za: Vec<i32> = zeros(az, m, azs, |v| TA::load(&[v]).widen())?;
    let zb: Vec<i32> = zeros(bz, n, bzs, |v| TB::load(&[v]).widen())?;
    let per = m * n;
    let mut out = bufs.output(y, g.batch() * g.m * g.n * 4)?;
    let (sam, sak, sbk, sbn) = (
        g.sam as usize,
        g.sak as usize,
        g.sbk as usize,
        g.sbn as usize,
    );
    let mut scratch = Scratch::new();
    for z in 0..g.batch() {
        let (oa, ob) = g.batch_offsets(z);
        let (oa, ob) = (oa as usize, ob as usize);
        let base = z as usize * per;
        let data = &mut out.data;
        gemm(
            (m, n, k),
            |i, kk| TA::load(&a[oa + i * sam + kk * sak..][..1]).widen() - za[i * azs],
            |kk, j| TB::load(&b[ob + kk * sbk + j * sbn..][..1]).widen() - zb[j * bzs],
            &mut scratch,
            |i, j0, row| {
                let at = (base + i * n + j0) * 4;
                for (o, v) in data[at..at + row.len() * 4].chunks_exact_mut(4).zip(row) {
                    o.copy_from_slice(&v.to_le_bytes());
                }
            },
        );
    }
    Ok(vec![out])
}
