//! ScatterElements (and its opset-9/11 name Scatter) and ScatterND: planning and CPU kernels.
//!
//! A plan is two launches: `copy_s{S}` (output = data), then one scatter launch over the
//! updates that reads and writes the output. Reduction `none` moves elements (movement module);
//! `add`/`mul`/`max`/`min` compute in the dtype (module `gather_scatter_{dtype}`; f16/bf16 in f32
//! rounded per update, integers wrap, max/min propagate NaN as numpy's maximum/minimum do).
//!
//! Indices: i32 or i64, negative values count from the end; an update whose index is out of
//! range after that is skipped (never written out of bounds). On the CPU updates apply in
//! row-major order, so duplicate indices behave as the ONNX reference (last write wins for
//! `none`). On the GPU duplicates with `none` race (ONNX leaves that undefined) and reductions
//! use atomic read-modify-write loops, so float sums may round in a different order.

use umd_sdk::cpu::Buffers;
use umd_sdk::dtype::{self, Element};
use umd_sdk::half::{bf16, f16};
use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::shape::{self, MAX_RANK};
use umd_sdk::{
    Access, CpuCall, CpuWrite, Dtype, OpError, OpPlan, PlanRequestExt, TensorDesc, attr,
};

use crate::common::{self, by_size, copy_elem, decode_indices, norm_index};

/// Scatter reductions (ONNX attribute `reduction`).
pub const REDUCTIONS: [&str; 4] = ["add", "mul", "max", "min"];

/// Parameters of `scatter_elements_*`: out[i with i[axis] = idx[i]] op= upd[i].
///
/// CUDA: `(const void* idx, const T* upd, T* out, u64 n, u32 rank, u32 axis, u32 idx64,
/// umd_dims idims, umd_dims ostrides, u64 axis_dim)`.
pub struct ElementsParams {
    pub n: u64,
    pub rank: u32,
    pub axis: u32,
    pub idx64: bool,
    pub idims: [u64; MAX_RANK],
    pub ostrides: [u64; MAX_RANK],
    pub axis_dim: u64,
}

/// Parameters of `scatter_nd_*`: out[idx[t, 0..k], s] op= upd[t, s].
///
/// CUDA: `(const void* idx, const T* upd, T* out, u64 n, u64 slice, u64 k, u32 idx64,
/// umd_dims odims, umd_dims ostrides)`.
pub struct NdParams {
    pub n: u64,
    pub slice: u64,
    pub k: u64,
    pub idx64: bool,
    pub odims: [u64; MAX_RANK],
    pub ostrides: [u64; MAX_RANK],
}

/// The `reduction` attribute (absent before opset 16; Scatter has none).
fn reduction(req: &PlanRequestExt, data: &TensorDesc) -> Result<Option<&'static str>, OpError> {
    let red = attr::text_or(&req.attributes, "reduction", "none")?;
    if red == "none" {
        return Ok(None);
    }
    let Some(red) = REDUCTIONS.iter().find(|r| **r == red) else {
        return Err(OpError::InvalidAttribute(format!(
            "{}: attribute `reduction` = \"{red}\" is not one of none, add, mul, max, min",
            req.op
        )));
    };
    common::check_dtype(&req.op, data, &common::NUMERIC_DTYPES)?;
    Ok(Some(red))
}

/// The copy launch and the scatter launch's module and entry.
fn launches(
    req: &PlanRequestExt,
    data: &TensorDesc,
    kind: &str,
    red: Option<&str>,
    n_upd: u64,
    tail: ParamPacker,
) -> Result<OpPlan, OpError> {
    let size = dtype::size(data.dtype);
    let out = req.output_binding(0);
    let numel = common::out_numel(&data.shape, data.dtype)?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read).ptr(out, Access::Write).u64(numel);
    let copy = common::make_launch(
        req,
        common::move_module(size),
        common::move_entry("copy", size),
        numel,
        p,
    )?;
    let (module, entry) = match red {
        None => (common::move_module(size), common::move_entry(kind, size)),
        Some(r) => {
            let dt = dtype::name(data.dtype);
            (format!("gather_scatter_{dt}"), format!("{kind}_{r}_{dt}"))
        }
    };
    let scatter = common::make_launch(req, module, entry, n_upd, tail)?;
    Ok(common::one_output(
        TensorDesc::new("output", data.shape.clone(), data.dtype),
        vec![copy, scatter],
    ))
}

fn check_inputs(
    req: &PlanRequestExt,
) -> Result<(&TensorDesc, &TensorDesc, &TensorDesc, bool), OpError> {
    let (data, idx, upd) = (req.required(0)?, req.required(1)?, req.required(2)?);
    let idx64 = common::index_is_i64(req, 1)?;
    common::same_dtype(&req.op, data, upd)?;
    common::check_rank(&req.op, data)?;
    Ok((data, idx, upd, idx64))
}

fn head(p: &mut ParamPacker, req: &PlanRequestExt) {
    p.ptr(1, Access::Read)
        .ptr(2, Access::Read)
        .ptr(req.output_binding(0), Access::ReadWrite);
}

/// Plans ScatterElements / Scatter (`axis`, `reduction`).
pub fn plan_elements(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    let legacy = req.op.eq_ignore_ascii_case("Scatter");
    attr::only(
        &req.attributes,
        if legacy {
            &["axis"]
        } else {
            &["axis", "reduction"]
        },
    )?;
    let (data, idx, upd, idx64) = check_inputs(req)?;
    let red = reduction(req, data)?;
    let r = data.shape.len();
    if r == 0 || idx.shape.len() != r || upd.shape != idx.shape {
        return Err(OpError::shape(format!(
            "{}: data {:?}, indices {:?} and updates {:?} must have one rank >= 1, \
             updates the shape of indices",
            req.op, data.shape, idx.shape, upd.shape
        )));
    }
    let axis = common::norm_axis(
        &req.op,
        "axis",
        attr::int_or(&req.attributes, "axis", 0)?,
        r,
    )?;
    for d in 0..r {
        if d != axis && idx.shape[d] > data.shape[d] {
            return Err(OpError::shape(format!(
                "{}: indices {:?} exceed data {:?} in dimension {d}",
                req.op, idx.shape, data.shape
            )));
        }
    }
    let prm = ElementsParams {
        n: shape::numel(&idx.shape)?,
        rank: r as u32,
        axis: axis as u32,
        idx64,
        idims: common::dims8(&idx.shape, 1)?,
        ostrides: common::dims8(&common::strides(&data.shape), 0)?,
        axis_dim: data.shape[axis],
    };
    let mut p = ParamPacker::new();
    head(&mut p, req);
    p.u64(prm.n)
        .u32(prm.rank)
        .u32(prm.axis)
        .u32(prm.idx64 as u32)
        .u64_array(&prm.idims)
        .u64_array(&prm.ostrides)
        .u64(prm.axis_dim);
    launches(req, data, "scatter_elements", red, prm.n, p)
}

/// Plans ScatterND (`reduction`).
pub fn plan_nd(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["reduction"])?;
    let (data, idx, upd, idx64) = check_inputs(req)?;
    let red = reduction(req, data)?;
    let (r, q) = (data.shape.len(), idx.shape.len());
    if r == 0 || q == 0 {
        return Err(OpError::shape("ScatterND: data and indices need rank >= 1"));
    }
    let k = idx.shape[q - 1] as usize;
    if k < 1 || k > r {
        return Err(OpError::shape(format!(
            "ScatterND: indices' last dimension {k} must be in [1, {r}]"
        )));
    }
    let mut want = idx.shape[..q - 1].to_vec();
    want.extend_from_slice(&data.shape[k..]);
    if upd.shape != want {
        return Err(OpError::shape(format!(
            "ScatterND: updates {:?} must have shape {want:?}",
            upd.shape
        )));
    }
    let ostr = common::strides(&data.shape);
    let prm = NdParams {
        n: shape::numel(&upd.shape)?,
        slice: shape::numel(&data.shape[k..])?,
        k: k as u64,
        idx64,
        odims: common::dims8(&data.shape[..k], 1)?,
        ostrides: common::dims8(&ostr[..k], 0)?,
    };
    let mut p = ParamPacker::new();
    head(&mut p, req);
    p.u64(prm.n)
        .u64(prm.slice)
        .u64(prm.k)
        .u32(prm.idx64 as u32)
        .u64_array(&prm.odims)
        .u64_array(&prm.ostrides);
    launches(req, data, "scatter_nd", red, prm.n, p)
}

/// How one update lands: `store(out, dst_elem, upd, src_elem)`.
trait Apply {
    fn apply(&self, out: &mut [u8], dst: usize, upd: &[u8], src: usize);
}

/// Reduction `none`: copy `S` bytes.
struct Move<const S: usize>;
impl<const S: usize> Apply for Move<S> {
    #[inline(always)]
    fn apply(&self, out: &mut [u8], dst: usize, upd: &[u8], src: usize) {
        copy_elem::<S>(out, dst, upd, src);
    }
}

/// Arithmetic of the reductions in a compute type (wrapping integers, NaN-propagating max/min).
pub trait Reduce: Copy {
    fn add(a: Self, b: Self) -> Self;
    fn mul(a: Self, b: Self) -> Self;
    fn max(a: Self, b: Self) -> Self;
    fn min(a: Self, b: Self) -> Self;
}

macro_rules! float_reduce {
    ($t:ty) => {
        impl Reduce for $t {
            fn add(a: $t, b: $t) -> $t {
                a + b
            }
            fn mul(a: $t, b: $t) -> $t {
                a * b
            }
            fn max(a: $t, b: $t) -> $t {
                if a.is_nan() || b.is_nan() {
                    a + b
                } else if a >= b {
                    a
                } else {
                    b
                }
            }
            fn min(a: $t, b: $t) -> $t {
                if a.is_nan() || b.is_nan() {
                    a + b
                } else if a <= b {
                    a
                } else {
                    b
                }
            }
        }
    };
}
float_reduce!(f32);
float_reduce!(f64);

macro_rules! int_reduce {
    ($t:ty) => {
        impl Reduce for $t {
            fn add(a: $t, b: $t) -> $t {
                a.wrapping_add(b)
            }
            fn mul(a: $t, b: $t) -> $t {
                a.wrapping_mul(b)
            }
            fn max(a: $t, b: $t) -> $t {
                Ord::max(a, b)
            }
            fn min(a: $t, b: $t) -> $t {
                Ord::min(a, b)
            }
        }
    };
}
int_reduce!(i32);
int_reduce!(i64);
int_reduce!(i8);
int_reduce!(u8);
int_reduce!(i16);
int_reduce!(u16);
int_reduce!(u32);
int_reduce!(u64);

/// A reduction in dtype `T`.
struct Arith<T: Element>(fn(T::Compute, T::Compute) -> T::Compute);
impl<T: Element> Apply for Arith<T> {
    #[inline(always)]
    fn apply(&self, out: &mut [u8], dst: usize, upd: &[u8], src: usize) {
        let s = std::mem::size_of::<T>();
        let a = T::load(&out[dst * s..dst * s + s]).to_compute();
        let b = T::load(&upd[src * s..src * s + s]).to_compute();
        T::from_compute((self.0)(a, b)).store(&mut out[dst * s..dst * s + s]);
    }
}

fn arith<T: Element>(red: &str) -> Option<Arith<T>>
where
    T::Compute: Reduce,
{
    Some(Arith::<T>(match red {
        "add" => Reduce::add,
        "mul" => Reduce::mul,
        "max" => Reduce::max,
        "min" => Reduce::min,
        _ => return None,
    }))
}

/// Runs a `scatter_elements`/`scatter_nd` launch with reduction `none` (movement module).
pub fn run_move(call: &CpuCall, base: &str, size: usize) -> Result<Vec<CpuWrite>, OpError> {
    fn go<const S: usize>(call: &CpuCall, base: &str) -> Result<Vec<CpuWrite>, OpError> {
        run_with(call, base, S, &Move::<S>)
    }
    by_size!(size, go(call, base))
}

/// Runs an entry `{kind}_{red}_{dtype}` of module `gather_scatter_{dtype}`.
pub fn run_reduce(call: &CpuCall, dt: Dtype) -> Result<Vec<CpuWrite>, OpError> {
    let e = call.entry_point.as_str();
    let unknown = || common::unknown_entry(&call.module_id, e);
    let rest = e
        .strip_suffix(&format!("_{}", dtype::name(dt)))
        .ok_or_else(unknown)?;
    let (kind, red) = rest.rsplit_once('_').ok_or_else(unknown)?;
    fn go<T: Element>(
        call: &CpuCall,
        kind: &str,
        red: &str,
    ) -> Option<Result<Vec<CpuWrite>, OpError>>
    where
        T::Compute: Reduce,
    {
        let a = arith::<T>(red)?;
        Some(run_with(call, kind, std::mem::size_of::<T>(), &a))
    }
    let r = match dt {
        Dtype::F32 => go::<f32>(call, kind, red),
        Dtype::F16 => go::<f16>(call, kind, red),
        Dtype::Bf16 => go::<bf16>(call, kind, red),
        Dtype::F64 => go::<f64>(call, kind, red),
        Dtype::I32 => go::<i32>(call, kind, red),
        Dtype::I64 => go::<i64>(call, kind, red),
        Dtype::I8 => go::<i8>(call, kind, red),
        Dtype::U8 => go::<u8>(call, kind, red),
        Dtype::I16 => go::<i16>(call, kind, red),
        Dtype::U16 => go::<u16>(call, kind, red),
        Dtype::U32 => go::<u32>(call, kind, red),
        Dtype::U64 => go::<u64>(call, kind, red),
        _ => None,
    };
    r.ok_or_else(unknown)?
}

fn run_with(
    call: &CpuCall,
    kind: &str,
    s: usize,
    f: &impl Apply,
) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (idx, upd, out) = (r.ptr()?, r.ptr()?, r.ptr()?);
    let mut w = bufs.output(out, 0)?;
    w.data = bufs.input(out, 0)?.to_vec();
    let olen = w.data.len() / s;
    match kind {
        "scatter_elements" => {
            let p = ElementsParams {
                n: r.u64()?,
                rank: r.u32()?,
                axis: r.u32()?,
                idx64: r.u32()? != 0,
                idims: r.u64_array()?,
                ostrides: r.u64_array()?,
                axis_dim: r.u64()?,
            };
            let (rank, axis) = (p.rank as usize, p.axis as usize);
            if p.n == 0 || rank == 0 || rank > MAX_RANK || axis >= rank {
                return Ok(vec![w]);
            }
            let isz = if p.idx64 { 8 } else { 4 };
            let idx = decode_indices(bufs.input(idx, p.n * isz)?, p.idx64, p.n as usize);
            let upd = bufs.input(upd, p.n * s as u64)?;
            let mut coord = [0u64; MAX_RANK];
            let mut base = 0u64;
            for (i, &k) in idx.iter().enumerate() {
                if let Some(k) = norm_index(k, p.axis_dim) {
                    let dst = (base + k * p.ostrides[axis]) as usize;
                    if dst < olen {
                        f.apply(&mut w.data, dst, upd, i);
                    }
                }
                for d in (0..rank).rev() {
                    coord[d] += 1;
                    if d != axis {
                        base += p.ostrides[d];
                    }
                    if coord[d] < p.idims[d] {
                        break;
                    }
                    if d != axis {
                        base -= p.ostrides[d] * coord[d];
                    }
                    coord[d] = 0;
                }
            }
        }
        "scatter_nd" => {
            let p = NdParams {
                n: r.u64()?,
                slice: r.u64()?,
                k: r.u64()?,
                idx64: r.u32()? != 0,
                odims: r.u64_array()?,
                ostrides: r.u64_array()?,
            };
            if p.n == 0 || p.slice == 0 || p.k as usize > MAX_RANK {
                return Ok(vec![w]);
            }
            let (k, slice) = (p.k as usize, p.slice as usize);
            let tuples = p.n as usize / slice;
            let isz = if p.idx64 { 8 } else { 4 };
            let idx = bufs.input(idx, (tuples * k) as u64 * isz)?;
            let idx = decode_indices(idx, p.idx64, tuples * k);
            let upd = bufs.input(upd, p.n * s as u64)?;
            'tuple: for t in 0..tuples {
                let mut dst = 0u64;
                for j in 0..k {
                    match norm_index(idx[t * k + j], p.odims[j]) {
                        Some(v) => dst += v * p.ostrides[j],
                        None => continue 'tuple,
                    }
                }
                let dst = dst as usize;
                if dst + slice > olen {
                    continue;
                }
                for e in 0..slice {
                    f.apply(&mut w.data, dst + e, upd, t * slice + e);
                }
            }
        }
        _ => return Err(common::unknown_entry(&call.module_id, &call.entry_point)),
    }
    Ok(vec![w])
}
