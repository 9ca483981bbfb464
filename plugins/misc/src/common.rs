//! Shared helpers of the `misc` plugin: dtype tables, ONNX dtype numbers, the CUDA header of a
//! dtype, launch assembly and CPU buffer access (values decoded to f64 and encoded back).

use umd_sdk::dtype::{self, CUDA_PRELUDE};
use umd_sdk::params::ParamPacker;
use umd_sdk::{Dim3, Dtype, Launch, OpError, PlanRequestExt, TensorDesc};

/// The float dtypes (compute in f32, f64 in f64).
pub const FLOATS: [Dtype; 4] = [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F64];

/// The dtype of ONNX `TensorProto` element type number `n` (those umd has, whole-byte ones:
/// misc serves no packed dtype).
pub fn onnx_dtype(n: i64) -> Option<Dtype> {
    dtype::from_onnx(n).filter(|d| !dtype::is_packed(*d))
}

/// Names of `dts` for error messages.
pub fn names(dts: &[Dtype]) -> String {
    dts.iter()
        .map(|d| dtype::name(*d))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Input `i`, required, of one of `dts`.
pub fn input_of<'a>(
    req: &'a PlanRequestExt,
    i: usize,
    dts: &[Dtype],
) -> Result<&'a TensorDesc, OpError> {
    let x = req.required(i)?;
    if !dts.contains(&x.dtype) {
        return Err(OpError::dtype(format!(
            "{}: input {i} of dtype {} is not served (served: {})",
            req.op,
            dtype::name(x.dtype),
            names(dts)
        )));
    }
    Ok(x)
}

/// Refuses more than `n` input slots.
pub fn at_most_inputs(req: &PlanRequestExt, n: usize) -> Result<(), OpError> {
    if req.slots() > n {
        return Err(OpError::shape(format!(
            "{} takes at most {n} inputs, got {}",
            req.op,
            req.slots()
        )));
    }
    Ok(())
}

/// Refuses a rank over [`umd_sdk::shape::MAX_RANK`].
pub fn check_rank(op: &str, shape: &[u64]) -> Result<(), OpError> {
    if shape.len() > umd_sdk::shape::MAX_RANK {
        return Err(OpError::shape(format!(
            "{op}: rank {} exceeds {}",
            shape.len(),
            umd_sdk::shape::MAX_RANK
        )));
    }
    Ok(())
}

/// A 1-D grid-stride launch over `n` items of module `module`, entry `entry`.
pub fn linear_launch(
    req: &PlanRequestExt,
    module: String,
    entry: String,
    n: u64,
    p: ParamPacker,
) -> Result<Launch, OpError> {
    let limits = &req.target.limits;
    let (grid, block): (Dim3, Dim3) = umd_sdk::launch::linear(n, 256, limits)?;
    let (params, relocations) = p.finish(limits.max_param_bytes)?;
    Ok(Launch {
        module_id: module,
        entry_point: entry,
        grid,
        block,
        shared_memory: 0,
        params,
        relocations,
    })
}

/// The CUDA header of a module computing on `dt`: the prelude, `T` (storage), `C` (compute:
/// float for the halves and f32, double for f64, the type itself for integers), `LD`/`ST`, and
/// `umd_dims` (8 u64, by value), and the SDK's helpers (`UMD_FOR`: a grid-stride loop).
pub fn cuda_header(dt: Dtype) -> Result<String, OpError> {
    let ct = dtype::cuda_type(dt)
        .ok_or_else(|| OpError::internal(format!("no CUDA type for {}", dtype::name(dt))))?;
    Ok(format!(
        "{CUDA_PRELUDE}{}\ntypedef {} T;\ntypedef {} C;\n#define LD(X) {}\n#define ST(X) {}\n\
         struct umd_dims {{ unsigned long long v[8]; }};\n",
        umd_sdk::cuda::HELPERS,
        ct.storage,
        ct.compute,
        ct.load.replace('X', "(X)"),
        ct.store.replace('X', "(X)")
    ))
}

/// Parses a module id `misc_{family}_{dtype}` (the dtype part may be absent: `None`).
pub fn parse_module(id: &str) -> Option<(&str, Option<Dtype>)> {
    let rest = id.strip_prefix("misc_")?;
    match rest.split_once('_') {
        Some((family, dt)) => Some((family, Some(dtype::from_name(dt)?))),
        None => Some((rest, None)),
    }
}

/// Reads a CPU launch: the buffers and the parameter block.
pub struct Call<'a> {
    pub bufs: umd_sdk::cpu::Buffers<'a>,
    pub r: umd_sdk::params::ParamReader<'a>,
}

impl<'a> Call<'a> {
    pub fn new(call: &'a umd_sdk::CpuCall) -> Self {
        Call {
            bufs: umd_sdk::cpu::Buffers::new(call),
            r: umd_sdk::params::ParamReader::new(&call.params, &call.relocations),
        }
    }
    /// `n` elements of `dt` from binding `b`, as f64.
    pub fn read_f64(&self, b: u32, n: u64, dt: Dtype) -> Result<Vec<f64>, OpError> {
        let bytes = n
            .checked_mul(dtype::size(dt) as u64)
            .ok_or_else(|| OpError::internal("size overflows"))?;
        let data = self.bufs.input(b, bytes)?;
        Ok(dtype::decode_f64(dt, &data[..bytes as usize]))
    }
    /// Writes `values` (encoded as `dt`) as the whole of binding `b`.
    pub fn write_f64(
        &self,
        b: u32,
        values: &[f64],
        dt: Dtype,
    ) -> Result<umd_sdk::CpuWrite, OpError> {
        let bytes = (values.len() * dtype::size(dt)) as u64;
        let mut w = self.bufs.output(b, bytes)?;
        let enc = dtype::encode(dt, values).ok_or_else(|| OpError::internal("encode"))?;
        w.data.copy_from_slice(&enc);
        Ok(w)
    }
}

/// Rounds `v` as the CUDA kernel's compute type does for `dt` (f32 for the halves and f32).
pub fn compute_round(dt: Dtype, v: f64) -> f64 {
    match dt {
        Dtype::F64 => v,
        _ => v as f32 as f64,
    }
}
