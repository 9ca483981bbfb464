//! Planning of the matrix-pattern ops: EyeLike (`eye_b*`: ones on diagonal k of a 2-D output)
//! and Trilu (`trilu_b*`: keep the upper or lower triangle of the last two dims, zero the rest);
//! every dtype with a zero (all but E8M0).

use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, Dtype, OpError, OpPlan, PlanRequestExt, attr, dtype};

use crate::common::{arity, make_launch, numel_checked, onnx_dtype, out, plan, unknown_onnx_dtype};
use crate::copy::MOVE_MODULE;

/// Clamps a diagonal offset to `[-rows, cols]`: beyond, every element is on the same side.
fn clamp_k(k: i64, rows: u64, cols: u64) -> i64 {
    let lo = -(rows.min(i64::MAX as u64) as i64);
    k.clamp(lo, cols.min(i64::MAX as u64) as i64)
}

/// E8M0 has no zero (code 0 is 2^-127): EyeLike and Trilu serve every other dtype.
fn has_zero(req: &PlanRequestExt, dt: Dtype) -> Result<(), OpError> {
    if dt == Dtype::F8e8m0 {
        return Err(OpError::UnsupportedDtype(format!(
            "{}: f8e8m0 has no zero; every other dtype is served",
            req.op
        )));
    }
    Ok(())
}

pub fn eye_like(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    arity(req, 1, 1)?;
    attr::only(&req.attributes, &["dtype", "k"])?;
    let x = req.required(0)?;
    let [rows, cols] = x.shape[..] else {
        return Err(OpError::shape(format!(
            "EyeLike: the input must be 2-D, got {:?}",
            x.shape
        )));
    };
    let dt = match attr::int_or(&req.attributes, "dtype", -1)? {
        -1 => x.dtype,
        code => onnx_dtype(code).ok_or_else(|| unknown_onnx_dtype(req, "dtype", code))?,
    };
    has_zero(req, dt)?;
    let k = clamp_k(attr::int_or(&req.attributes, "k", 0)?, rows, cols);
    let n = numel_checked(&x.shape, dt)?;
    let one = umd_sdk::dtype::encode(dt, &[1.0]).expect("every dtype encodes");
    let mut p = ParamPacker::new();
    p.ptr(req.output_binding(0), Access::Write)
        .u64(rows)
        .u64(cols)
        .i64(k)
        .u64(crate::consts::element_bits(&one));
    let l = make_launch(req, MOVE_MODULE, format!("eye_b{}", dtype::size(dt)), n, p)?;
    Ok(plan(vec![out(req, vec![rows, cols], dt)], vec![l]))
}

pub fn trilu(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    arity(req, 1, 2)?;
    attr::only(&req.attributes, &["upper"])?;
    let x = req.required(0)?;
    let r = x.shape.len();
    if r < 2 {
        return Err(OpError::shape(format!(
            "Trilu: the input must have rank >= 2, got {:?}",
            x.shape
        )));
    }
    has_zero(req, x.dtype)?;
    let upper = attr::int_or(&req.attributes, "upper", 1)? != 0;
    let k = match req.ints(1)?.as_deref() {
        None => 0,
        Some([k]) => *k,
        Some(v) => {
            return Err(OpError::shape(format!(
                "Trilu: k must be a scalar, got {} values",
                v.len()
            )));
        }
    };
    let (rows, cols) = (x.shape[r - 2], x.shape[r - 1]);
    let n = numel_checked(&x.shape, x.dtype)?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(n)
        .u64(rows)
        .u64(cols)
        .i64(clamp_k(k, rows, cols))
        .u32(upper as u32);
    let l = make_launch(
        req,
        MOVE_MODULE,
        format!("trilu_b{}", dtype::size(x.dtype)),
        n,
        p,
    )?;
    Ok(plan(vec![out(req, x.shape.clone(), x.dtype)], vec![l]))
}
