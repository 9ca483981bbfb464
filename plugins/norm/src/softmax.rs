//! Planning Softmax, LogSoftmax and Hardmax over the axis view `(outer, len, inner)`.
//!
//! Opset < 13 coerces the input to 2-D at `axis` (default 1): rows are everything from `axis`
//! on (`inner` = 1). Opset ≥ 13 works along the one axis `axis` (default -1). Contiguous rows
//! (`inner` = 1) get one block per row (`softmax_{T}_rows`); strided ones one thread per row
//! (`softmax_{T}_cols`, coalesced across neighbouring rows). Both read the same parameters:
//! `x, y, outer, len, inner, mode` (see [`mode`]).
//!
//! Softmax of f16 and bf16 rounds where the ONNX reference (numpy in the input's type) rounds:
//! `x - max`, `exp` and the quotient to the storage type, and the sum as numpy's reduction forms
//! it — numpy sums a contiguous float16 row in float32 (its pairwise summation) and rounds once, and adds strided float16
//! columns and every `ml_dtypes` bfloat16 reduction element by element in the storage type. So a
//! model gets the same probabilities whether it holds Attention or its function body (the
//! attention plugin's softmax rounds at the same points), and the ONNX tests' expected data.

use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, Dtype, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype};

use crate::plan::{float_input, group_launch, linear_launch, max_inputs, norm_axis, prod};

/// The kernel mode of `op` on `dt` over rows (`inner` = 1) or strided columns: 0 Softmax,
/// 1 LogSoftmax, 2 Hardmax; 3 and 4 Softmax in a half type with its rounding points, the sum
/// rounded once (3) or after every addition (4).
pub fn mode(op: &str, dt: Dtype, inner: u64) -> u32 {
    match (op, dt) {
        ("Softmax", Dtype::F16) if inner == 1 => 3,
        ("Softmax", Dtype::F16 | Dtype::Bf16) => 4,
        ("Softmax", _) => 0,
        ("LogSoftmax", _) => 1,
        _ => 2,
    }
}

/// The `(outer, len, inner)` view of `shape` for these ops under `opset`.
pub fn view(shape: &[u64], axis: Option<i64>, opset: u32) -> Result<(u64, u64, u64), OpError> {
    let rank = shape.len();
    if opset < 13 {
        // coerced to 2-D: [prod(dims[..axis]), prod(dims[axis..])]; axis = rank is accepted
        let a = axis.unwrap_or(1);
        let a = if a < 0 { a + rank as i64 } else { a };
        if a < 0 || a > rank as i64 {
            return Err(OpError::InvalidAttribute(format!(
                "attribute `axis` = {} is out of range for rank {rank}",
                axis.unwrap_or(1)
            )));
        }
        let a = a as usize;
        Ok((prod(&shape[..a]), prod(&shape[a..]), 1))
    } else {
        let a = norm_axis(axis.unwrap_or(-1), rank, "axis")?;
        Ok((prod(&shape[..a]), shape[a], prod(&shape[a + 1..])))
    }
}

/// Plans `op` (Softmax, LogSoftmax or Hardmax).
pub fn plan(req: &PlanRequestExt, op: &str) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["axis"])?;
    max_inputs(req, 1)?;
    let (x, dt) = float_input(req, 0)?;
    let axis = attr::has(&req.attributes, "axis")
        .then(|| attr::int(&req.attributes, "axis"))
        .transpose()?;
    let (outer, len, inner) = view(&x.shape, axis, req.opset_or(13))?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(outer)
        .u64(len)
        .u64(inner)
        .u32(mode(op, dt, inner));
    let groups = outer * inner;
    let name = dtype::name(dt);
    let launch = if inner == 1 {
        group_launch(req, dt, format!("softmax_{name}_rows"), groups, len, p)?
    } else {
        linear_launch(req, dt, format!("softmax_{name}_cols"), groups, p)?
    };
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("y", x.shape.clone(), dt)],
        launches: vec![launch],
        workspace_bytes: 0,
    })
}
