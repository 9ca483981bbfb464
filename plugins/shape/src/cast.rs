//! Cast and CastLike: planning, and the conversion semantics between every pair of umd dtypes
//! (the CPU kernel; `cuda::cast_module` spells the same rules in CUDA C):
//! - float → integer truncates toward zero and saturates; NaN → 0;
//! - integer → integer wraps (two's complement), as numpy does;
//! - anything → bool is `x != 0` (NaN → true); bool → anything is 0 or 1;
//! - to f16/bf16: one round-to-nearest-even from the exact value (f64 and i64 sources go
//!   through f32 rounded to odd, which makes the two roundings equal one).

use half::{bf16, f16};
use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{Access, CpuCall, CpuWrite, Dtype, OpError, OpPlan, PlanRequestExt, attr};

use crate::common::{
    arity, dt_name, make_launch, numel_checked, onnx_dtype, out, plan, unknown_onnx_dtype,
};
use crate::cpu::{read_input, written_buffer};

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

fn cast_to(req: &PlanRequestExt, to: Dtype) -> Result<OpPlan, OpError> {
    let x = req.required(0)?;
    let n = numel_checked(&x.shape, x.dtype)?;
    numel_checked(&x.shape, to)?;
    if x.dtype == to {
        return crate::layout::plain_copy(req, x.shape.clone());
    }
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(n);
    let entry = format!("cast_{}_{}", dt_name(x.dtype), dt_name(to));
    let l = make_launch(req, &module_id(x.dtype), entry, n, p)?;
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

/// A byte-stored element.
trait Elem: Copy {
    const SIZE: usize;
    fn load(b: &[u8]) -> Self;
    fn store(self, out: &mut [u8]);
}

/// How a source element converts to each kind of target.
trait Src: Elem {
    fn to_f32(self) -> f32;
    fn to_f64(self) -> f64;
    fn to_f16(self) -> f16;
    fn to_bf16(self) -> bf16;
    fn to_int<T: IntDst>(self) -> T;
    fn nonzero(self) -> bool;
}

trait Dst: Elem {
    fn from_src<S: Src>(s: S) -> Self;
}

trait IntDst {
    /// From a float: truncate, saturate, NaN → 0 (Rust's `as`).
    fn sat(v: f64) -> Self;
    /// From an integer: two's-complement wrap.
    fn wrap(v: i64) -> Self;
}

#[derive(Clone, Copy)]
struct Bool(u8);

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
prim!(f32, f64, i32, i64, i8, u8);

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

macro_rules! int_dst {
    ($($t:ty),*) => {$(
        impl IntDst for $t {
            #[inline(always)]
            fn sat(v: f64) -> Self { v as $t }
            #[inline(always)]
            fn wrap(v: i64) -> Self { v as $t }
        }
        impl Dst for $t {
            #[inline(always)]
            fn from_src<S: Src>(s: S) -> Self { s.to_int::<$t>() }
        }
    )*};
}
int_dst!(i32, i64, i8, u8);

// Floats narrower than f64 widen to f32 exactly.
macro_rules! f32ish_src {
    ($($t:ty => $to_f32:expr),*) => {$(
        impl Src for $t {
            #[inline(always)]
            fn to_f32(self) -> f32 { ($to_f32)(self) }
            #[inline(always)]
            fn to_f64(self) -> f64 { self.to_f32() as f64 }
            #[inline(always)]
            fn to_f16(self) -> f16 { f16::from_f32(self.to_f32()) }
            #[inline(always)]
            fn to_bf16(self) -> bf16 { bf16::from_f32(self.to_f32()) }
            #[inline(always)]
            fn to_int<T: IntDst>(self) -> T { T::sat(self.to_f32() as f64) }
            #[inline(always)]
            fn nonzero(self) -> bool { self.to_f32() != 0.0 }
        }
    )*};
}
f32ish_src!(f32 => |x: f32| x, f16 => |x: f16| x.to_f32(), bf16 => |x: bf16| x.to_f32());

impl Src for f64 {
    fn to_f32(self) -> f32 {
        self as f32
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn to_f16(self) -> f16 {
        f16::from_f32(f64_to_f32_odd(self))
    }
    fn to_bf16(self) -> bf16 {
        bf16::from_f32(f64_to_f32_odd(self))
    }
    fn to_int<T: IntDst>(self) -> T {
        T::sat(self)
    }
    fn nonzero(self) -> bool {
        self != 0.0
    }
}

macro_rules! int_src {
    ($($t:ty => $wide:expr),*) => {$(
        impl Src for $t {
            #[inline(always)]
            fn to_f32(self) -> f32 { ($wide)(self) as f32 }
            #[inline(always)]
            fn to_f64(self) -> f64 { ($wide)(self) as f64 }
            #[inline(always)]
            fn to_f16(self) -> f16 { f16::from_f32(self.to_f32()) }
            #[inline(always)]
            fn to_bf16(self) -> bf16 { bf16::from_f32(f64_to_f32_odd(self.to_f64())) }
            #[inline(always)]
            fn to_int<T: IntDst>(self) -> T { T::wrap(($wide)(self)) }
            #[inline(always)]
            fn nonzero(self) -> bool { ($wide)(self) != 0 }
        }
    )*};
}
int_src!(i32 => |x: i32| x as i64, i64 => |x: i64| x, i8 => |x: i8| x as i64,
         u8 => |x: u8| x as i64, Bool => |x: Bool| x.0 as i64);

impl Dst for f32 {
    fn from_src<S: Src>(s: S) -> Self {
        s.to_f32()
    }
}
impl Dst for f64 {
    fn from_src<S: Src>(s: S) -> Self {
        s.to_f64()
    }
}
impl Dst for f16 {
    fn from_src<S: Src>(s: S) -> Self {
        s.to_f16()
    }
}
impl Dst for bf16 {
    fn from_src<S: Src>(s: S) -> Self {
        s.to_bf16()
    }
}
impl Dst for Bool {
    fn from_src<S: Src>(s: S) -> Self {
        Bool(s.nonzero() as u8)
    }
}

fn convert<S: Src, D: Dst>(src: &[u8], dst: &mut [u8]) {
    for (o, i) in dst.chunks_exact_mut(D::SIZE).zip(src.chunks_exact(S::SIZE)) {
        D::from_src(S::load(i)).store(o);
    }
}

fn convert_from<S: Src>(to: Dtype, src: &[u8], dst: &mut [u8]) {
    match to {
        Dtype::F32 => convert::<S, f32>(src, dst),
        Dtype::F16 => convert::<S, f16>(src, dst),
        Dtype::Bf16 => convert::<S, bf16>(src, dst),
        Dtype::F64 => convert::<S, f64>(src, dst),
        Dtype::I32 => convert::<S, i32>(src, dst),
        Dtype::I64 => convert::<S, i64>(src, dst),
        Dtype::I8 => convert::<S, i8>(src, dst),
        Dtype::U8 => convert::<S, u8>(src, dst),
        Dtype::Boolean => convert::<S, Bool>(src, dst),
    }
}

/// Converts `src` (elements of `from`) into `dst` (elements of `to`, same count).
pub fn convert_bytes(from: Dtype, to: Dtype, src: &[u8], dst: &mut [u8]) {
    match from {
        Dtype::F32 => convert_from::<f32>(to, src, dst),
        Dtype::F16 => convert_from::<f16>(to, src, dst),
        Dtype::Bf16 => convert_from::<bf16>(to, src, dst),
        Dtype::F64 => convert_from::<f64>(to, src, dst),
        Dtype::I32 => convert_from::<i32>(to, src, dst),
        Dtype::I64 => convert_from::<i64>(to, src, dst),
        Dtype::I8 => convert_from::<i8>(to, src, dst),
        Dtype::U8 => convert_from::<u8>(to, src, dst),
        Dtype::Boolean => convert_from::<Bool>(to, src, dst),
    }
}

/// The CPU kernel `cast_{from}_{to}(src, dst, n)`.
pub fn run_cpu(call: &CpuCall, from: Dtype, to: Dtype) -> Result<Vec<CpuWrite>, OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (src, dst, n) = (r.ptr()?, r.ptr()?, r.u64()?);
    let input = read_input(call, src, n, umd_sdk::dtype::size(from))?;
    let mut w = written_buffer(call, dst)?;
    let bytes = n as usize * umd_sdk::dtype::size(to);
    let out = w.data.get_mut(..bytes).ok_or_else(|| {
        OpError::internal(format!(
            "cast output binding {dst} is smaller than {bytes} bytes"
        ))
    })?;
    convert_bytes(from, to, input, out);
    Ok(vec![w])
}
