//! SwiGLU (opset 28) as one `swiglu_{T}` launch of the module `attention_{T}`, one thread per
//! element: `Y = A · sigmoid(alpha · A) · B` (A the gate, B the value, identical shapes, no
//! broadcasting), computed in f32 for f16/bf16 and rounded once, as the ONNX test generator does.
//!
//! Parameters: `a, b, y, n, alpha (f64)`.

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{Access, CpuCall, CpuWrite, Launch, OpError, OpPlan, PlanRequestExt, TensorDesc};
use umd_sdk::{attr, cpu::Buffers, dtype, dtype::Element, launch, shape};

use crate::cpu::{Real, decode, encode};
use crate::{float_input, module_id, same_dtype};

/// Threads per block.
pub const THREADS: u32 = 256;

/// Plans SwiGLU.
pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["alpha"])?;
    if req.slots() != 2 {
        return Err(OpError::shape(format!(
            "SwiGLU takes 2 inputs (A, B), got {}",
            req.slots()
        )));
    }
    let alpha = attr::float_or(&req.attributes, "alpha", 1.0)?;
    let (a, dt) = float_input(req, 0)?;
    let b = same_dtype(req, 1, dt)?.ok_or_else(|| OpError::shape("SwiGLU: B is required"))?;
    if a.shape != b.shape {
        return Err(OpError::shape(format!(
            "SwiGLU: A {:?} and B {:?} must have identical shapes (no broadcasting)",
            a.shape, b.shape
        )));
    }
    if req.outputs(1) != 1 {
        return Err(OpError::shape("SwiGLU has one output"));
    }
    let n = shape::numel(&a.shape)?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(1, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(n)
        .f64(alpha);
    let limits = &req.target.limits;
    let (grid, block) = launch::linear(n, THREADS, limits)?;
    let (params, relocations) = p.finish(limits.max_param_bytes)?;
    Ok(OpPlan {
        launches: vec![Launch {
            module_id: module_id(dt),
            entry_point: format!("swiglu_{}", dtype::name(dt)),
            grid,
            block,
            shared_memory: 0,
            params,
            relocations,
        }],
        outputs: vec![TensorDesc::new("Y", a.shape.clone(), dt)],
        workspace_bytes: 0,
    })
}

/// The CUDA kernel (in every `attention_{T}` module; `NAME` is the dtype).
pub const KERNEL: &str = r#"
extern "C" __global__ void swiglu_NAME(const T* __restrict__ a, const T* __restrict__ b,
    T* __restrict__ y, u64 n, double alpha) {
  C al = (C)alpha;
  UMD_FOR(i, n) {
    C av = umd_ld(a[i]);
    y[i] = umd_st(av * ((C)1 / ((C)1 + umd_exp(-al * av))) * umd_ld(b[i]));
  }
}
"#;

/// The CPU kernel of `swiglu_{T}`.
pub fn run<T: Element>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError>
where
    T::Compute: Real,
{
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (a, b, y) = (r.ptr()?, r.ptr()?, r.ptr()?);
    let n = r.u64()?;
    let alpha = T::Compute::from_f64(r.f64()?);
    let bytes = n
        .checked_mul(std::mem::size_of::<T>() as u64)
        .ok_or_else(|| OpError::internal("swiglu: size overflows"))?;
    let av = decode::<T>(&bufs.input(a, bytes)?[..bytes as usize]);
    let bv = decode::<T>(&bufs.input(b, bytes)?[..bytes as usize]);
    let one = T::Compute::ONE;
    let out: Vec<T::Compute> = av
        .iter()
        .zip(&bv)
        .map(|(&x, &v)| x * (one / (one + (T::Compute::ZERO - alpha * x).exp())) * v)
        .collect();
    let mut w = bufs.output(y, bytes)?;
    encode::<T>(&out, &mut w.data);
    Ok(vec![w])
}
