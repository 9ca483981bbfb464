//! Dropout (inference semantics, and training mode reproducing the ONNX reference's
//! `RandomState(seed)` stream) and BitCast: byte copies (by element size 1/2/4/8), a mask fill,
//! and the training-mode kernel in [`crate::mt`]. The module also holds the index-map kernels of
//! [`crate::layout`].

use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, Dtype, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype, shape};

use crate::common::{self, FLOATS, at_most_inputs, linear_launch};

/// Module of the byte-moving kernels (no dtype: they dispatch on element size).
pub const MODULE: &str = "misc_copy";

/// CUDA source of [`MODULE`].
pub fn cuda() -> (String, Vec<String>) {
    // `UMD_FOR`, the grid-stride loop.
    let mut code = String::from(umd_sdk::cuda::HELPERS);
    code.push_str(crate::layout::CUDA);
    let mut entries = Vec::new();
    for (size, t) in [
        (1, "unsigned char"),
        (2, "unsigned short"),
        (4, "unsigned int"),
        (8, "unsigned long long"),
    ] {
        code.push_str(&format!(
            "extern \"C\" __global__ void copy_{size}(const {t}* __restrict__ x, {t}* __restrict__ y, \
             unsigned long long n) {{ UMD_FOR(i, n) y[i] = x[i]; }}\n"
        ));
        entries.push(format!("copy_{size}"));
        let (c, e) = crate::layout::cuda_entries(size, t);
        code.push_str(&c);
        entries.extend(e);
    }
    code.push_str(
        "extern \"C\" __global__ void fill_true(unsigned char* __restrict__ m, unsigned long long n) \
         { UMD_FOR(i, n) m[i] = 1; }\n",
    );
    entries.push("fill_true".into());
    (code, entries)
}

/// A copy of `n` elements of `size` bytes from binding `x` to binding `y`.
fn copy_launch(
    req: &PlanRequestExt,
    x: u32,
    y: u32,
    n: u64,
    size: usize,
) -> Result<umd_sdk::Launch, OpError> {
    let mut p = ParamPacker::new();
    p.ptr(x, Access::Read).ptr(y, Access::Write).u64(n);
    linear_launch(req, MODULE.into(), format!("copy_{size}"), n, p)
}

/// BitCast: the same bytes as another dtype of the same width.
pub fn plan_bitcast(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["to"])?;
    at_most_inputs(req, 1)?;
    let x = req.required(0)?;
    let to_n = attr::int(&req.attributes, "to")?;
    let to = common::onnx_dtype(to_n).ok_or_else(|| {
        OpError::InvalidAttribute(format!("BitCast: `to` = {to_n} is not a dtype umd has"))
    })?;
    let (a, b) = (dtype::size(x.dtype), dtype::size(to));
    if a != b {
        return Err(OpError::InvalidAttribute(format!(
            "BitCast: `to` ({}, {b} bytes) must have the width of the input ({}, {a} bytes)",
            dtype::name(to),
            dtype::name(x.dtype)
        )));
    }
    let n = shape::numel(&x.shape)?;
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("y", x.shape.clone(), to)],
        launches: vec![copy_launch(req, 0, req.output_binding(0), n, a)?],
        workspace_bytes: 0,
    })
}

/// Dropout, every opset: `ratio` as attribute (≤ 11) or input 1 (12+), `training_mode` input 2
/// (12+), the mask output. Inference (or a ratio of 0) copies; training mode draws the mask as
/// the ONNX reference does (`RandomState(seed).uniform(0, 1, shape) >= ratio`, seed 0 when not
/// given) and scales the kept values by `1 / (1 - ratio)`.
pub fn plan_dropout(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["ratio", "seed", "is_test"])?;
    at_most_inputs(req, 3)?;
    let x = req.required(0)?;
    let training = match req.ints(2)? {
        None => false,
        Some(v) if v.len() == 1 => v[0] != 0,
        Some(v) => {
            return Err(OpError::shape(format!(
                "Dropout: `training_mode` must hold one value, got {}",
                v.len()
            )));
        }
    };
    let ratio = match (req.input(1), attr::has(&req.attributes, "ratio")) {
        (Some(_), true) => {
            return Err(OpError::InvalidAttribute(
                "Dropout: `ratio` given both as an attribute and as input 1".into(),
            ));
        }
        // The ratio only matters in training mode: its value is needed then only.
        (Some(_), false) if training => match req.floats(1)? {
            Some(v) if v.len() == 1 => v[0],
            _ => return Err(OpError::shape("Dropout: `ratio` must hold one value")),
        },
        (Some(_), false) => 0.5,
        (None, _) => attr::float_or(&req.attributes, "ratio", 0.5)?,
    };
    if !(0.0..1.0).contains(&ratio) {
        return Err(OpError::InvalidAttribute(format!(
            "Dropout: `ratio` must be in [0, 1), got {ratio}"
        )));
    }
    let seed = attr::int_or(&req.attributes, "seed", 0)?;
    let n = shape::numel(&x.shape)?;
    let mask = req.outputs(1) >= 2;
    if req.outputs(1) > 2 {
        return Err(OpError::shape("Dropout has at most 2 outputs"));
    }
    let mut outputs = vec![TensorDesc::new("output", x.shape.clone(), x.dtype)];
    if mask {
        outputs.push(TensorDesc::new("mask", x.shape.clone(), Dtype::Boolean));
    }
    let (y, m) = (req.output_binding(0), req.output_binding(1));
    let mut launches = Vec::new();
    if training && ratio > 0.0 {
        if !FLOATS.contains(&x.dtype) {
            return Err(OpError::dtype(format!(
                "Dropout (training mode): dtype {} is not served (served: {})",
                dtype::name(x.dtype),
                common::names(&FLOATS)
            )));
        }
        if !(0..=u32::MAX as i64).contains(&seed) {
            return Err(OpError::InvalidAttribute(format!(
                "Dropout: `seed` must be in [0, 2^32) for the reference's generator, got {seed}"
            )));
        }
        launches.push(crate::mt::dropout_launch(
            req,
            x.dtype,
            n,
            ratio,
            seed as u32,
            mask,
        )?);
    } else {
        launches.push(copy_launch(req, 0, y, n, dtype::size(x.dtype))?);
        if mask {
            let mut p = ParamPacker::new();
            p.ptr(m, Access::Write).u64(n);
            launches.push(linear_launch(req, MODULE.into(), "fill_true".into(), n, p)?);
        }
    }
    Ok(OpPlan {
        outputs,
        launches,
        workspace_bytes: 0,
    })
}

/// CPU kernels of [`MODULE`].
pub fn run_cpu(call: &umd_sdk::CpuCall) -> Result<Vec<umd_sdk::CpuWrite>, OpError> {
    let mut c = common::Call::new(call);
    if call.entry_point == "fill_true" {
        let (m, n) = (c.r.ptr()?, c.r.u64()?);
        let mut w = c.bufs.output(m, n)?;
        w.data.fill(1);
        return Ok(vec![w]);
    }
    let bad = || OpError::internal(format!("unknown entry point `{}`", call.entry_point));
    let (kernel, size) = call.entry_point.rsplit_once('_').ok_or_else(bad)?;
    let size: u64 = match size {
        "1" => 1,
        "2" => 2,
        "4" => 4,
        "8" => 8,
        _ => return Err(bad()),
    };
    match kernel {
        "copy" => {}
        "crop_pad" | "reverse_seq" | "compress" | "zero" | "unpool" => {
            return crate::layout::run_cpu(call, kernel, size as usize);
        }
        _ => return Err(bad()),
    }
    let (x, y, n) = (c.r.ptr()?, c.r.ptr()?, c.r.u64()?);
    let bytes = n
        .checked_mul(size)
        .ok_or_else(|| OpError::internal("size overflows"))?;
    let src = c.bufs.input(x, bytes)?;
    let mut w = c.bufs.output(y, bytes)?;
    w.data.copy_from_slice(&src[..bytes as usize]);
    Ok(vec![w])
}
