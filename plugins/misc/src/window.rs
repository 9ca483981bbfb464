//! HannWindow, HammingWindow and BlackmanWindow (opset 17): `size` (a scalar input whose value
//! is needed when planning), `periodic` (default 1), `output_datatype` (default float). Computed
//! in f64 (CUDA and CPU alike) as the ONNX reference does, then stored.

use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, Dtype, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype};

use crate::common::{self, FLOATS, at_most_inputs, cuda_header, linear_launch};

/// Output dtypes served.
pub const OUT: [Dtype; 6] = [
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I32,
    Dtype::I64,
];

/// (ONNX name, kernel index) of the window ops.
pub const OPS: [(&str, u32); 3] = [
    ("HannWindow", 0),
    ("HammingWindow", 1),
    ("BlackmanWindow", 2),
];

/// Window `kind` at `i` of `size` (the f64 formula of the reference).
pub fn value(kind: u32, i: f64, n1: f64) -> f64 {
    let pi = std::f64::consts::PI;
    match kind {
        0 => (i * pi / n1).sin().powi(2),
        1 => {
            let alpha = 25.0 / 46.0;
            alpha - (i * pi * 2.0 / n1).cos() * (1.0 - alpha)
        }
        _ => (i * (pi * 2.0) / n1).cos() * -0.5 + (i * (pi * 4.0) / n1).cos() * 0.08 + 0.42,
    }
}

pub fn plan(req: &PlanRequestExt, kind: u32) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["periodic", "output_datatype"])?;
    at_most_inputs(req, 1)?;
    let size = match req.ints(0)? {
        Some(v) if v.len() == 1 => v[0],
        Some(_) => {
            return Err(OpError::shape(format!(
                "{}: `size` must be a scalar",
                req.op
            )));
        }
        None => {
            return Err(OpError::shape(format!(
                "{}: input 0 (`size`) is required",
                req.op
            )));
        }
    };
    if size < 0 {
        return Err(OpError::shape(format!(
            "{}: `size` must be ≥ 0, got {size}",
            req.op
        )));
    }
    let periodic = attr::int_or(&req.attributes, "periodic", 1)?;
    if periodic != 0 && periodic != 1 {
        return Err(OpError::InvalidAttribute(format!(
            "{}: `periodic` must be 0 or 1, got {periodic}",
            req.op
        )));
    }
    let odt_n = attr::int_or(&req.attributes, "output_datatype", 1)?;
    let odt = common::onnx_dtype(odt_n)
        .filter(|d| OUT.contains(d))
        .ok_or_else(|| {
            OpError::InvalidAttribute(format!(
                "{}: `output_datatype` = {odt_n} is not served (served: {})",
                req.op,
                common::names(&OUT)
            ))
        })?;
    let n = size as u64;
    let n1 = if periodic == 1 { size } else { size - 1 } as f64;
    let mut p = ParamPacker::new();
    p.ptr(req.output_binding(0), Access::Write)
        .u64(n)
        .f64(n1)
        .u32(kind);
    let name = dtype::name(odt);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("y", vec![n], odt)],
        launches: vec![linear_launch(
            req,
            format!("misc_window_{name}"),
            format!("window_{name}"),
            n,
            p,
        )?],
        workspace_bytes: 0,
    })
}

const CUDA: &str = r#"
extern "C" __global__ void window_NAME(T* __restrict__ y, unsigned long long n, double n1,
    unsigned int kind) {
  const double pi = 3.14159265358979323846;
  UMD_FOR(i, n) {
    double x = (double)i, v;
    if (kind == 0) { double s = sin(x * pi / n1); v = s * s; }
    else if (kind == 1) { double a = 25.0 / 46.0; v = a - cos(x * pi * 2.0 / n1) * (1.0 - a); }
    else { v = cos(x * (pi * 2.0) / n1) * -0.5 + cos(x * (pi * 4.0) / n1) * 0.08 + 0.42; }
    y[i] = ST((C)v);
  }
}
"#;

pub fn cuda(dt: Dtype) -> Result<(String, Vec<String>), OpError> {
    let name = dtype::name(dt);
    Ok((
        format!("{}{}", cuda_header(dt)?, CUDA.replace("NAME", name)),
        vec![format!("window_{name}")],
    ))
}

pub fn run_cpu(call: &umd_sdk::CpuCall, dt: Dtype) -> Result<Vec<umd_sdk::CpuWrite>, OpError> {
    let mut c = common::Call::new(call);
    let (y, n, n1, kind) = (c.r.ptr()?, c.r.u64()?, c.r.f64()?, c.r.u32()?);
    let vals: Vec<f64> = (0..n)
        .map(|i| {
            let v = value(kind, i as f64, n1);
            if FLOATS.contains(&dt) { v } else { v.trunc() }
        })
        .collect();
    Ok(vec![c.write_f64(y, &vals, dt)?])
}
