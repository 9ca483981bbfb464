//! Binarizer (`y = x > threshold ? 1 : 0`, module `ml_binarizer_{T}`) and ArrayFeatureExtractor
//! (gathers `x[..., indices]` on the last axis, module `ml_afe`, entry points by element size):
//! plan, CUDA C and CPU kernels. One thread per output element.

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{
    Access, CpuCall, CpuWrite, Dtype, ModuleSource, OpError, OpPlan, PlanRequestExt,
    SourceLanguage, TensorDesc, attr, dtype,
};

use crate::common::{self, Val, dtype_error, get, launch, put};

/// Dtypes Binarizer serves.
pub const BINARIZER_DTYPES: [Dtype; 6] = [
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I32,
    Dtype::I64,
];

pub fn plan_binarizer(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    common::check_domain(req, &[common::ML_DOMAIN])?;
    attr::only(&req.attributes, &["threshold"])?;
    let threshold = attr::float_or(&req.attributes, "threshold", 0.0)?;
    if req.slots() != 1 {
        return Err(OpError::shape("Binarizer: takes one input X"));
    }
    let x = req.required(0)?;
    if !BINARIZER_DTYPES.contains(&x.dtype) {
        return Err(dtype_error(req, "X", x.dtype, &BINARIZER_DTYPES));
    }
    let n = umd_sdk::shape::numel(&x.shape)?;
    umd_sdk::shape::byte_size(&x.shape, x.dtype)?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(n)
        .f64(threshold);
    let name = dtype::name(x.dtype);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("Y", x.shape.clone(), x.dtype)],
        launches: vec![launch(
            req,
            format!("ml_binarizer_{name}"),
            format!("binarizer_{name}"),
            n,
            p,
        )?],
        workspace_bytes: 0,
    })
}

pub fn cuda_binarizer(dt: Dtype) -> ModuleSource {
    let name = dtype::name(dt);
    let mut code = common::cuda_head(&[("T", dt)]);
    code.push_str(&format!(
        "extern \"C\" __global__ void binarizer_{name}(const T* __restrict__ x, T* __restrict__ y, \
         u64 n, double threshold) {{\n  UMD_FOR(i, n) y[i] = st_T(ld_T(x[i]) > threshold ? 1.0 : 0.0);\n}}\n"
    ));
    module(code, vec![format!("binarizer_{name}")])
}

fn binarizer<T: Val>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = umd_sdk::cpu::Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (xb, yb, n, thr) = (r.ptr()?, r.ptr()?, r.u64()?, r.f64()?);
    let bytes = n * std::mem::size_of::<T>() as u64;
    let x = bufs.input(xb, bytes)?;
    let mut y = bufs.output(yb, bytes)?;
    for i in 0..n as usize {
        let v = if get::<T>(x, i).to_f64() > thr {
            1.0
        } else {
            0.0
        };
        put(&mut y.data, i, T::from_f64(v));
    }
    Ok(vec![y])
}

pub fn run_binarizer(call: &CpuCall, dt: Dtype) -> Result<Vec<CpuWrite>, OpError> {
    crate::by_dtype!(
        dt,
        binarizer,
        OpError::internal("binarizer: unknown dtype"),
        call
    )
}

/// ArrayFeatureExtractor: `x` of any dtype (rank ≥ 1), `indices` i64 or i32 of any shape (the
/// values index the last axis of `x`; negative ones count from the end, out-of-range ones give
/// 0). Output `x.shape[..-1] + [len(indices)]`, `[1, len]` for a 1-D `x` (as onnxruntime).
pub fn plan_afe(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    common::check_domain(req, &[common::ML_DOMAIN])?;
    attr::only(&req.attributes, &[])?;
    if req.slots() != 2 {
        return Err(OpError::shape(
            "ArrayFeatureExtractor: takes two inputs X and Y (indices)",
        ));
    }
    let x = req.required(0)?;
    let ind = req.required(1)?;
    if !matches!(ind.dtype, Dtype::I64 | Dtype::I32) {
        return Err(dtype_error(
            req,
            "Y (indices)",
            ind.dtype,
            &[Dtype::I64, Dtype::I32],
        ));
    }
    let size = dtype::size(x.dtype);
    if ![1, 2, 4, 8].contains(&size) || dtype::is_packed(x.dtype) {
        return Err(OpError::dtype(format!(
            "ArrayFeatureExtractor: X is {}; every dtype of 1, 2, 4 or 8 bytes is served",
            dtype::name(x.dtype)
        )));
    }
    let Some((&c, outer_dims)) = x.shape.split_last() else {
        return Err(OpError::shape(
            "ArrayFeatureExtractor: X must have rank 1 or more",
        ));
    };
    let k = umd_sdk::shape::numel(&ind.shape)?;
    let mut shape = if outer_dims.is_empty() {
        vec![1]
    } else {
        outer_dims.to_vec()
    };
    shape.push(k);
    let outer = umd_sdk::shape::numel(outer_dims)?;
    let n = umd_sdk::shape::numel(&shape)?;
    umd_sdk::shape::byte_size(&shape, x.dtype)?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(1, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(outer)
        .u64(c)
        .u64(k)
        .u32((ind.dtype == Dtype::I32) as u32);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("Z", shape, x.dtype)],
        launches: vec![launch(req, "ml_afe".into(), format!("afe_b{size}"), n, p)?],
        workspace_bytes: 0,
    })
}

pub fn cuda_afe() -> ModuleSource {
    let mut code = common::cuda_head(&[]);
    let mut entries = Vec::new();
    for (size, ty) in [
        (1, "unsigned char"),
        (2, "unsigned short"),
        (4, "unsigned int"),
        (8, "unsigned long long"),
    ] {
        code.push_str(&format!(
            "extern \"C\" __global__ void afe_b{size}(const {ty}* __restrict__ x, \
             const void* __restrict__ ind, {ty}* __restrict__ y, u64 outer, u64 c, u64 k, \
             unsigned int ind32) {{\n\
             UMD_FOR(e, outer * k) {{\n\
               u64 o = e / k, j = e % k;\n\
               long long ix = ind32 ? (long long)((const int*)ind)[j] : ((const long long*)ind)[j];\n\
               if (ix < 0) ix += (long long)c;\n\
               y[e] = (ix >= 0 && (u64)ix < c) ? x[o * c + (u64)ix] : ({ty})0;\n\
             }}\n}}\n"
        ));
        entries.push(format!("afe_b{size}"));
    }
    module(code, entries)
}

pub fn run_afe(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let size: usize = call
        .entry_point
        .strip_prefix("afe_b")
        .and_then(|s| s.parse().ok())
        .filter(|s| [1, 2, 4, 8].contains(s))
        .ok_or_else(|| OpError::internal(format!("unknown entry `{}`", call.entry_point)))?;
    let bufs = umd_sdk::cpu::Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (xb, ib, yb) = (r.ptr()?, r.ptr()?, r.ptr()?);
    let (outer, c, k) = (r.u64()? as usize, r.u64()? as usize, r.u64()? as usize);
    let i32s = r.u32()? != 0;
    let x = bufs.input(xb, (outer * c * size) as u64)?;
    let isz = if i32s { 4 } else { 8 };
    let ind = bufs.input(ib, (k * isz) as u64)?;
    let mut y = bufs.output(yb, (outer * k * size) as u64)?;
    let idx: Vec<Option<usize>> = (0..k)
        .map(|j| {
            let mut ix = if i32s {
                get::<i32>(ind, j) as i64
            } else {
                get::<i64>(ind, j)
            };
            if ix < 0 {
                ix += c as i64;
            }
            (ix >= 0 && (ix as usize) < c).then_some(ix as usize)
        })
        .collect();
    for o in 0..outer {
        for (j, ix) in idx.iter().enumerate() {
            if let Some(ix) = ix {
                let src = (o * c + ix) * size;
                let dst = (o * k + j) * size;
                y.data[dst..dst + size].copy_from_slice(&x[src..src + size]);
            }
        }
    }
    Ok(vec![y])
}

/// A CUDA C module of `code` with `entries`.
pub fn module(code: String, entries: Vec<String>) -> ModuleSource {
    ModuleSource {
        language: SourceLanguage::CudaC,
        code,
        entry_points: entries,
        // no fused multiply-adds: the CPU kernels round each product (a label decided by a
        // score's sign must not flip between devices)
        options: vec!["--std=c++17".into(), "--fmad=false".into()],
    }
}
