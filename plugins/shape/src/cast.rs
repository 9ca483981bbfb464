//! Cast and CastLike: planning, and the conversion semantics between every pair of umd dtypes
//! (the CPU kernel; `cuda::cast_module` spells the same rules in CUDA C):
//! - float → integer truncates toward zero and saturates; NaN → 0;
//! - integer → integer wraps (two's complement), as numpy does;
//! - anything → bool is `x != 0` (NaN → true); bool → anything is 0 or 1;
//! - to f16/bf16/E4M3/E5M2: one round-to-nearest-even from the exact value (f64 and wide
//!   integer sources go through f32 rounded to odd, which makes the two roundings equal one);
//!   the 8-bit floats follow `saturate` (see [`crate::f8`]);
//! - to E8M0: through f32 (round to nearest even, as the ONNX reference), then `round_mode`.
//!
//! Every kernel takes `mode`: bit 0 `saturate`, bits 1-2 the E8M0 [`Round`].

use half::{bf16, f16};
use umd_sdk::kernel::{self, Memory};
use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{Access, Dtype, KernelCall, OpError, OpPlan, PlanRequestExt, attr};

use crate::common::{
    arity, dt_name, make_launch, numel_checked, onnx_dtype, out, plan, unknown_onnx_dtype,
};
use crate::cpu::check_holds;
use crate::f8::{self, Round};

/// The module of casts from `from`.
pub fn module_id(from: Dtype) -> String {
    format!("shape_cast_{}", dt_name(from))
}

pub fn cast(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    arity(req, 1, 1)?;
    attr::only(&req.attributes, &["to", "saturate", "round_mode"])?;
    let code = attr::int(&req.attributes, "to")?;
    let to = onnx_dtype(code).ok_or_else(|| unknown_onnx_dtype(req, "to", code))?;
    cast_to(req, to)
}

pub fn cast_like(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    arity(req, 2, 2)?;
    attr::only(&req.attributes, &["saturate", "round_mode"])?;
    let to = req.required(1)?.dtype;
    cast_to(req, to)
}

/// The `mode` word of the cast kernels from `saturate` (default 1) and `round_mode` ("up").
fn mode(req: &PlanRequestExt) -> Result<u32, OpError> {
    let sat = attr::int_or(&req.attributes, "saturate", 1)?;
    if sat != 0 && sat != 1 {
        return Err(OpError::InvalidAttribute(format!(
            "{}: saturate {sat} must be 0 or 1",
            req.op
        )));
    }
    let rm = attr::text_or(&req.attributes, "round_mode", "up")?;
    let round = Round::parse(&rm).ok_or_else(|| {
        OpError::InvalidAttribute(format!(
            "{}: round_mode `{rm}` must be \"up\", \"down\" or \"nearest\"",
            req.op
        ))
    })?;
    Ok(sat as u32 | (round as u32) << 1)
}

fn cast_to(req: &PlanRequestExt, to: Dtype) -> Result<OpPlan, OpError> {
    let mode = mode(req)?;
    let x = req.required(0)?;
    let n = numel_checked(&x.shape, x.dtype)?;
    numel_checked(&x.shape, to)?;
    if x.dtype == to {
        return crate::layout::plain_copy(req, x.shape.clone());
    }
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(n)
        .u32(mode);
    let entry = format!("cast_{}_{}", dt_name(x.dtype), dt_name(to));
    // A packed output is written a byte (several elements) per thread.
    let threads = if umd_sdk::dtype::is_packed(to) {
        umd_sdk::shape::byte_size(&x.shape, to)?
    } else {
        n
    };
    let l = make_launch(req, &module_id(x.dtype), entry, threads, p)?;
    Ok(plan(vec![out(req, x.shape.clone(), to)], vec![l]))
}

/// f64 → f32 rounded to odd: exact values stay, inexact ones get the last bit set, so a later
/// round-to-nearest-even to a narrower type rounds as if from the f64 directly.
pub fn f64_to_f32_odd(d: f64) -> f32 {
    let f = d as f32;
    if d.is_nan() || f as f64 == d {
        return f;
    }
    let mut bits = f.to_bits();
    if (f as f64).abs() > d.abs() {
        bits -= 1; // toward zero (f is not 0 here: |f| > |d| >= 0)
    }
    f32::from_bits(bits | 1)
}

/// The value of a source element: the exact value of a float, or an integer (bools are 0/1).
#[derive(Clone, Copy)]
enum V {
    F(f64),
    I(i128),
}

/// Saturation and E8M0 rounding.
#[derive(Clone, Copy)]
struct Mode {
    sat: bool,
    round: Round,
}

/// A byte-stored element.
trait Elem: Copy {
    const SIZE: usize;
    fn load(b: &[u8]) -> Self;
    fn store(self, out: &mut [u8]);
}

trait Src: Elem {
    fn val(self) -> V;
}

trait Dst: Elem {
    fn from_val(v: V, m: Mode) -> Self;
}

#[derive(Clone, Copy)]
struct Bool(u8);

/// An E4M3/E5M2 byte; `K` indexes [`F8_TYPES`].
#[derive(Clone, Copy)]
struct F8<const K: usize>(u8);

#[derive(Clone, Copy)]
struct E8m0(u8);

const F8_TYPES: [Dtype; 4] = [
    Dtype::F8e4m3fn,
    Dtype::F8e4m3fnuz,
    Dtype::F8e5m2,
    Dtype::F8e5m2fnuz,
];

fn f8_fmt<const K: usize>() -> f8::Fmt {
    f8::fmt(F8_TYPES[K]).expect("an E4M3/E5M2 type")
}

macro_rules! prim {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline(always)]
            fn load(b: &[u8]) -> Self { <$t>::from_le_bytes(b.try_into().expect("element")) }
            #[inline(always)]
            fn store(self, out: &mut [u8]) { out.copy_from_slice(&self.to_le_bytes()) }
        }
    )*};
}
prim!(f32, f64, i8, u8, i16, u16, i32, u32, i64, u64);

macro_rules! half_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const SIZE: usize = 2;
            #[inline(always)]
            fn load(b: &[u8]) -> Self { <$t>::from_bits(u16::from_le_bytes(b.try_into().expect("element"))) }
            #[inline(always)]
            fn store(self, out: &mut [u8]) { out.copy_from_slice(&self.to_bits().to_le_bytes()) }
        }
    )*};
}
half_elem!(f16, bf16);

macro_rules! byte_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const SIZE: usize = 1;
            #[inline(always)]
            fn load(b: &[u8]) -> Self { Self(b[0]) }
            #[inline(always)]
            fn store(self, out: &mut [u8]) { out[0] = self.0; }
        }
    )*};
}
byte_elem!(E8m0);

impl Elem for Bool {
    const SIZE: usize = 1;
    #[inline(always)]
    fn load(b: &[u8]) -> Self {
        Bool((b[0] != 0) as u8)
    }
    #[inline(always)]
    fn store(self, out: &mut [u8]) {
        out[0] = self.0;
    }
}

impl<const K: usize> Elem for F8<K> {
    const SIZE: usize = 1;
    #[inline(always)]
    fn load(b: &[u8]) -> Self {
        Self(b[0])
    }
    #[inline(always)]
    fn store(self, out: &mut [u8]) {
        out[0] = self.0;
    }
}

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl Src for $t {
            #[inline(always)]
            fn val(self) -> V { V::I(self as i128) }
        }
        impl Dst for $t {
            /// From a float: truncate, saturate, NaN → 0 (Rust's `as`); from an integer: wrap.
            #[inline(always)]
            fn from_val(v: V, _: Mode) -> Self {
                match v {
                    V::F(d) => d as $t,
                    V::I(i) => i as $t,
                }
            }
        }
    )*};
}
int_elem!(i8, u8, i16, u16, i32, u32, i64, u64);

impl Src for Bool {
    fn val(self) -> V {
        V::I(self.0 as i128)
    }
}
impl Dst for Bool {
    fn from_val(v: V, _: Mode) -> Self {
        Bool(match v {
            V::F(d) => d != 0.0,
            V::I(i) => i != 0,
        } as u8)
    }
}

impl Src for f32 {
    fn val(self) -> V {
        V::F(self as f64)
    }
}
impl Src for f64 {
    fn val(self) -> V {
        V::F(self)
    }
}
impl Src for f16 {
    fn val(self) -> V {
        V::F(self.to_f64())
    }
}
impl Src for bf16 {
    fn val(self) -> V {
        V::F(self.to_f64())
    }
}
impl<const K: usize> Src for F8<K> {
    fn val(self) -> V {
        V::F(f8::decode(self.0, f8_fmt::<K>()) as f64)
    }
}
impl Src for E8m0 {
    fn val(self) -> V {
        V::F(f8::decode_e8m0(self.0) as f64)
    }
}

/// The value rounded to odd in f32 (exact when it fits): a later round-to-nearest-even to a
/// type of at most 22 significant bits then equals one rounding of the exact value.
#[inline(always)]
fn odd32(v: V) -> f32 {
    match v {
        V::F(d) => f64_to_f32_odd(d),
        V::I(i) => i128_to_f32_odd(i),
    }
}

/// The value rounded to nearest even in f32 (as numpy's `astype(float32)`).
#[inline(always)]
fn rne32(v: V) -> f32 {
    match v {
        V::F(d) => d as f32,
        V::I(i) => i as f32,
    }
}

impl Dst for f32 {
    fn from_val(v: V, _: Mode) -> Self {
        rne32(v)
    }
}
impl Dst for f64 {
    fn from_val(v: V, _: Mode) -> Self {
        match v {
            V::F(d) => d,
            V::I(i) => i as f64,
        }
    }
}
impl Dst for f16 {
    fn from_val(v: V, _: Mode) -> Self {
        f16::from_f32(odd32(v))
    }
}
impl Dst for bf16 {
    fn from_val(v: V, _: Mode) -> Self {
        bf16::from_f32(odd32(v))
    }
}
impl<const K: usize> Dst for F8<K> {
    fn from_val(v: V, m: Mode) -> Self {
        F8(f8::encode(odd32(v), f8_fmt::<K>(), m.sat))
    }
}
impl Dst for E8m0 {
    fn from_val(v: V, m: Mode) -> Self {
        E8m0(f8::encode_e8m0(rne32(v), m.sat, m.round))
    }
}

/// An integer (|i| ≤ 2^64) → f32 rounded to odd.
pub fn i128_to_f32_odd(i: i128) -> f32 {
    let f = i as f32;
    let back = f as i128; // exact: |f| ≤ 2^64
    if back == i {
        return f;
    }
    let mut bits = f.to_bits();
    if back.unsigned_abs() > i.unsigned_abs() {
        bits -= 1; // toward zero (f is not 0: |f| > |i|)
    }
    f32::from_bits(bits | 1)
}

fn convert<S: Src, D: Dst>(src: &[u8], dst: &mut [u8], m: Mode) {
    for (o, i) in dst.chunks_exact_mut(D::SIZE).zip(src.chunks_exact(S::SIZE)) {
        D::from_val(S::load(i).val(), m).store(o);
    }
}

fn convert_from<S: Src>(to: Dtype, src: &[u8], dst: &mut [u8], m: Mode) {
    match to {
        Dtype::F32 => convert::<S, f32>(src, dst, m),
        Dtype::F16 => convert::<S, f16>(src, dst, m),
        Dtype::Bf16 => convert::<S, bf16>(src, dst, m),
        Dtype::F64 => convert::<S, f64>(src, dst, m),
        Dtype::I32 => convert::<S, i32>(src, dst, m),
        Dtype::I64 => convert::<S, i64>(src, dst, m),
        Dtype::I8 => convert::<S, i8>(src, dst, m),
        Dtype::U8 => convert::<S, u8>(src, dst, m),
        Dtype::Boolean => convert::<S, Bool>(src, dst, m),
        Dtype::I16 => convert::<S, i16>(src, dst, m),
        Dtype::U16 => convert::<S, u16>(src, dst, m),
        Dtype::U32 => convert::<S, u32>(src, dst, m),
        Dtype::U64 => convert::<S, u64>(src, dst, m),
        Dtype::F8e4m3fn => convert::<S, F8<0>>(src, dst, m),
        Dtype::F8e4m3fnuz => convert::<S, F8<1>>(src, dst, m),
        Dtype::F8e5m2 => convert::<S, F8<2>>(src, dst, m),
        Dtype::F8e5m2fnuz => convert::<S, F8<3>>(src, dst, m),
        Dtype::F8e8m0 => convert::<S, E8m0>(src, dst, m),
        // Packed destinations go through `crate::packed`, which calls this with whole bytes.
        Dtype::I4 | Dtype::U4 | Dtype::I2 | Dtype::U2 | Dtype::F4e2m1 => {
            unreachable!("packed casts go through crate::packed")
        }
        // Never planned: `umd_sdk::plan_checked` declines string tensors for this plugin.
        Dtype::String => unreachable!("string casts are not served"),
    }
}

/// Converts `src` (elements of `from`) into `dst` (elements of `to`, same count) with the kernel
/// `mode` word.
pub fn convert_bytes(from: Dtype, to: Dtype, mode: u32, src: &[u8], dst: &mut [u8]) {
    let m = Mode {
        sat: mode & 1 != 0,
        round: Round::from_bits((mode >> 1) & 3),
    };
    match from {
        Dtype::F32 => convert_from::<f32>(to, src, dst, m),
        Dtype::F16 => convert_from::<f16>(to, src, dst, m),
        Dtype::Bf16 => convert_from::<bf16>(to, src, dst, m),
        Dtype::F64 => convert_from::<f64>(to, src, dst, m),
        Dtype::I32 => convert_from::<i32>(to, src, dst, m),
        Dtype::I64 => convert_from::<i64>(to, src, dst, m),
        Dtype::I8 => convert_from::<i8>(to, src, dst, m),
        Dtype::U8 => convert_from::<u8>(to, src, dst, m),
        Dtype::Boolean => convert_from::<Bool>(to, src, dst, m),
        Dtype::I16 => convert_from::<i16>(to, src, dst, m),
        Dtype::U16 => convert_from::<u16>(to, src, dst, m),
        Dtype::U32 => convert_from::<u32>(to, src, dst, m),
        Dtype::U64 => convert_from::<u64>(to, src, dst, m),
        Dtype::F8e4m3fn => convert_from::<F8<0>>(to, src, dst, m),
        Dtype::F8e4m3fnuz => convert_from::<F8<1>>(to, src, dst, m),
        Dtype::F8e5m2 => convert_from::<F8<2>>(to, src, dst, m),
        Dtype::F8e5m2fnuz => convert_from::<F8<3>>(to, src, dst, m),
        Dtype::F8e8m0 => convert_from::<E8m0>(to, src, dst, m),
        Dtype::I4 | Dtype::U4 | Dtype::I2 | Dtype::U2 | Dtype::F4e2m1 => {
            unreachable!("packed casts go through crate::packed")
        }
        // Never planned: `umd_sdk::plan_checked` declines string tensors for this plugin.
        Dtype::String => unreachable!("string casts are not served"),
    }
}

/// The casts between f32 and f16/bf16 as one direct conversion per element (the bytes
/// [`convert_bytes`] gives: from f32 the value is exact, so rounding to odd first changes
/// nothing, and f16/bf16 widen exactly); false for every other pair.
pub fn convert_fast(from: Dtype, to: Dtype, src: &[u8], dst: &mut [u8]) -> bool {
    fn map<const A: usize, const B: usize>(
        src: &[u8],
        dst: &mut [u8],
        f: impl Fn([u8; A]) -> [u8; B],
    ) {
        for (o, i) in dst.chunks_exact_mut(B).zip(src.chunks_exact(A)) {
            o.copy_from_slice(&f(i.try_into().expect("element")));
        }
    }
    match (from, to) {
        (Dtype::F32, Dtype::F16) => map::<4, 2>(src, dst, |b| {
            f16::from_f32(f32::from_le_bytes(b)).to_bits().to_le_bytes()
        }),
        (Dtype::F32, Dtype::Bf16) => map::<4, 2>(src, dst, |b| {
            bf16::from_f32(f32::from_le_bytes(b))
                .to_bits()
                .to_le_bytes()
        }),
        (Dtype::F16, Dtype::F32) => map::<2, 4>(src, dst, |b| {
            f16::from_bits(u16::from_le_bytes(b)).to_f32().to_le_bytes()
        }),
        (Dtype::Bf16, Dtype::F32) => map::<2, 4>(src, dst, |b| {
            bf16::from_bits(u16::from_le_bytes(b))
                .to_f32()
                .to_le_bytes()
        }),
        _ => return false,
    }
    true
}

/// The CPU kernel `cast_{from}_{to}(src, dst, n, mode)`, in place: a block range converts its
/// share of the groups of 8 elements (whole bytes of every packed type, so ranges never share
/// a byte), a chunk at a time.
pub fn run_kernel(
    call: &KernelCall,
    mem: &mut dyn Memory,
    from: Dtype,
    to: Dtype,
) -> Result<(), OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (src, dst, n, mode) = (r.ptr()?, r.ptr()?, r.u64()?, r.u32()?);
    let bytes_of = |dt, n| {
        umd_sdk::dtype::byte_len(dt, n)
            .ok_or_else(|| OpError::internal(format!("{n} elements overflow")))
    };
    check_holds(call, src, Some(bytes_of(from, n)?), "cast")?;
    check_holds(call, dst, Some(bytes_of(to, n)?), "cast")?;
    let packed = umd_sdk::dtype::is_packed(from) || umd_sdk::dtype::is_packed(to);
    // Bytes of 8 elements.
    let (g_in, g_out) = (
        umd_sdk::dtype::bits(from) as u64,
        umd_sdk::dtype::bits(to) as u64,
    );
    let step = (kernel::CHUNK_BYTES as u64 / g_in.max(g_out)).max(1);
    let mut out = Vec::new();
    kernel::chunks(call.share(n.div_ceil(8)), step, |lo, hi| {
        let (e0, e1) = (lo * 8, (hi * 8).min(n));
        let count = e1 - e0;
        let x = mem.read(src, lo * g_in, bytes_of(from, count)? as usize)?;
        out.clear();
        out.resize(bytes_of(to, count)? as usize, 0);
        if packed {
            crate::packed::convert(from, to, mode, count as usize, &x, &mut out);
        } else if !convert_fast(from, to, &x, &mut out) {
            convert_bytes(from, to, mode, &x, &mut out);
        }
        mem.write(dst, lo * g_out, &out)
    })
}
