//! Det (opset 11): the determinant of each square matrix of `[*, M, M]`, by LU decomposition
//! with partial pivoting (as LAPACK's `getrf` behind `numpy.linalg.det`), in f64, one thread per
//! matrix working on its copy in the workspace.

use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype, shape};

use crate::common::{self, FLOATS, cuda_header, input_of, linear_launch};

pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &[])?;
    common::at_most_inputs(req, 1)?;
    let x = input_of(req, 0, &FLOATS)?;
    let r = x.shape.len();
    if r < 2 || x.shape[r - 1] != x.shape[r - 2] {
        return Err(OpError::shape(format!(
            "Det: the input must be [*, M, M], got {:?}",
            x.shape
        )));
    }
    let m = x.shape[r - 1];
    let batch = shape::numel(&x.shape[..r - 2])?;
    let ws = shape::byte_size(&[batch, m, m], umd_sdk::Dtype::F64)?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.output_binding(1), Access::Write)
        .ptr(req.output_binding(0), Access::Write)
        .u64(batch)
        .u64(m);
    let name = dtype::name(x.dtype);
    let launch = linear_launch(
        req,
        format!("misc_det_{name}"),
        format!("det_{name}"),
        batch,
        p,
    )?;
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("y", x.shape[..r - 2].to_vec(), x.dtype)],
        launches: vec![launch],
        workspace_bytes: ws.max(8),
    })
}

const CUDA: &str = r#"
extern "C" __global__ void det_NAME(const T* __restrict__ x, double* __restrict__ ws,
    T* __restrict__ y, unsigned long long batch, unsigned long long m) {
  UMD_FOR(b, batch) {
    double* a = ws + b * m * m;
    const T* src = x + b * m * m;
    for (unsigned long long i = 0; i < m * m; ++i) a[i] = (double)LD(src[i]);
    double det = 1.0;
    for (unsigned long long k = 0; k < m; ++k) {
      unsigned long long piv = k;
      double best = fabs(a[k * m + k]);
      for (unsigned long long i = k + 1; i < m; ++i)
        if (fabs(a[i * m + k]) > best) { best = fabs(a[i * m + k]); piv = i; }
      if (piv != k) {
        for (unsigned long long j = 0; j < m; ++j) {
          double t = a[k * m + j]; a[k * m + j] = a[piv * m + j]; a[piv * m + j] = t;
        }
        det = -det;
      }
      double d = a[k * m + k];
      det *= d;
      if (d == 0.0) break;
      for (unsigned long long i = k + 1; i < m; ++i) {
        double f = a[i * m + k] / d;
        for (unsigned long long j = k + 1; j < m; ++j) a[i * m + j] -= f * a[k * m + j];
      }
    }
    y[b] = ST((C)det);
  }
}
"#;

pub fn cuda(dt: umd_sdk::Dtype) -> Result<(String, Vec<String>), OpError> {
    let name = dtype::name(dt);
    Ok((
        format!("{}{}", cuda_header(dt)?, CUDA.replace("NAME", name)),
        vec![format!("det_{name}")],
    ))
}

/// The determinant of the row-major `m`×`m` matrix `a` (overwritten).
pub fn det(a: &mut [f64], m: usize) -> f64 {
    let mut det = 1.0;
    for k in 0..m {
        let mut piv = k;
        for i in k + 1..m {
            if a[i * m + k].abs() > a[piv * m + k].abs() {
                piv = i;
            }
        }
        if piv != k {
            for j in 0..m {
                a.swap(k * m + j, piv * m + j);
            }
            det = -det;
        }
        let d = a[k * m + k];
        det *= d;
        if d == 0.0 {
            break;
        }
        for i in k + 1..m {
            let f = a[i * m + k] / d;
            for j in k + 1..m {
                a[i * m + j] -= f * a[k * m + j];
            }
        }
    }
    det
}

pub fn run_cpu(
    call: &umd_sdk::CpuCall,
    dt: umd_sdk::Dtype,
) -> Result<Vec<umd_sdk::CpuWrite>, OpError> {
    let mut c = common::Call::new(call);
    let (xb, wsb, yb) = (c.r.ptr()?, c.r.ptr()?, c.r.ptr()?);
    let (batch, m) = (c.r.u64()?, c.r.u64()?);
    let mm = m
        .checked_mul(m)
        .ok_or_else(|| OpError::internal("Det: size overflows"))?;
    let xs = c.read_f64(xb, batch * mm, dt)?;
    // the workspace (scratch of the CUDA kernel) comes back zeroed
    let ws = c.bufs.output(wsb, (batch * mm * 8).max(8))?;
    let ys: Vec<f64> = xs
        .chunks(mm.max(1) as usize)
        .take(batch as usize)
        .map(|a| det(&mut a.to_vec(), m as usize))
        .collect();
    Ok(vec![c.write_f64(yb, &ys, dt)?, ws])
}
