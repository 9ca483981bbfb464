//! Planning of the ops that rearrange one tensor: Identity, Reshape, Flatten, Squeeze,
//! Unsqueeze (a plain copy under a new shape), Transpose, Expand and Tile (strided copies).

use umd_sdk::{Access, Dtype, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype, shape};

use crate::common::{arity, dim, norm_axes, numel_checked, out, plan, required_ints};
use crate::copy::{StridedCopy, strides};

/// Copies input 0 unchanged into an output of `shape` (same element count).
pub fn plain_copy(req: &PlanRequestExt, shape: Vec<u64>) -> Result<OpPlan, OpError> {
    let x = req.required(0)?;
    let n = numel_checked(&x.shape, x.dtype)?;
    if numel_checked(&shape, x.dtype)? != n {
        return Err(OpError::shape(format!(
            "{}: cannot view {:?} ({n} elements) as {shape:?}",
            req.op, x.shape
        )));
    }
    // A packed tensor (ABI 1.4) moves as its bytes: a view never splits one. So does a string
    // tensor (ABI 1.5): its offsets, then its text; a view keeps both as they are.
    let copy = if dtype::is_packed(x.dtype) || x.dtype == Dtype::String {
        let bytes = shape::byte_size(&x.shape, x.dtype)?
            .checked_add(x.text_bytes)
            .ok_or_else(|| OpError::shape(format!("{}: size overflows", req.op)))?;
        StridedCopy::plain(bytes, 1)
    } else {
        StridedCopy::plain(n, dtype::size(x.dtype))
    };
    let l = copy.launch(
        req,
        req.binding(0).unwrap_or(0),
        req.output_binding(0),
        Access::Write,
    )?;
    let y = TensorDesc {
        text_bytes: x.text_bytes,
        ..out(req, shape, x.dtype)
    };
    Ok(plan(vec![y], vec![l]))
}

pub fn identity(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    arity(req, 1, 1)?;
    attr::only(&req.attributes, &[])?;
    plain_copy(req, req.required(0)?.shape.clone())
}

pub fn reshape(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    arity(req, 1, 2)?;
    attr::only(&req.attributes, &["allowzero", "shape", "consumed_inputs"])?;
    let x = req.required(0)?;
    let allowzero = attr::int_or(&req.attributes, "allowzero", 0)? != 0;
    let target = match req.ints(1)? {
        Some(v) => v,
        None => attr::ints_opt(&req.attributes, "shape")?
            .ok_or_else(|| OpError::shape("Reshape: input 1 (`shape`) is required".to_string()))?,
    };
    let shape = reshape_dims(&x.shape, &target, allowzero)
        .map_err(|m| OpError::shape(format!("Reshape: {m}")))?;
    plain_copy(req, shape)
}

/// ONNX Reshape's output shape: 0 copies the input dim (unless `allowzero`), one -1 is inferred.
pub fn reshape_dims(input: &[u64], target: &[i64], allowzero: bool) -> Result<Vec<u64>, String> {
    let total: u64 = input
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or("overflow")?;
    let mut out = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &t) in target.iter().enumerate() {
        match t {
            -1 if infer.is_none() => {
                infer = Some(i);
                out.push(1);
            }
            -1 => return Err(format!("shape {target:?} has more than one -1")),
            0 if !allowzero => out.push(*input.get(i).ok_or_else(|| {
                format!(
                    "shape {target:?}: 0 at position {i} but the input {input:?} has no dim {i}"
                )
            })?),
            t if t < 0 => return Err(format!("shape {target:?} has a negative dimension {t}")),
            t => out.push(t as u64),
        }
    }
    if allowzero && infer.is_some() && target.contains(&0) {
        return Err(format!("shape {target:?}: allowzero=1 with both 0 and -1"));
    }
    let known: u64 = out
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or("overflow")?;
    if let Some(i) = infer {
        if known == 0 || !total.is_multiple_of(known) {
            return Err(format!(
                "cannot infer the -1 of {target:?} for an input of shape {input:?}"
            ));
        }
        out[i] = total / known;
    } else if known != total {
        return Err(format!(
            "shape {target:?} has {known} elements, the input {input:?} has {total}"
        ));
    }
    Ok(out)
}

pub fn flatten(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    arity(req, 1, 1)?;
    attr::only(&req.attributes, &["axis"])?;
    let x = req.required(0)?;
    let r = x.shape.len();
    let axis = attr::int_or(&req.attributes, "axis", 1)?;
    if axis < -(r as i64) || axis > r as i64 {
        return Err(OpError::InvalidAttribute(format!(
            "Flatten: axis {axis} is out of range [-{r}, {r}]"
        )));
    }
    let axis = if axis < 0 { axis + r as i64 } else { axis } as usize;
    numel_checked(&x.shape, x.dtype)?;
    let outer = x.shape[..axis].iter().product();
    let inner = x.shape[axis..].iter().product();
    plain_copy(req, vec![outer, inner])
}

/// Axes from attribute `axes` (older opsets) or input 1 (opset 13), never both.
fn axes_of(req: &PlanRequestExt) -> Result<Option<Vec<i64>>, OpError> {
    let from_attr = attr::ints_opt(&req.attributes, "axes")?;
    let from_input = req.ints(1)?;
    match (from_attr, from_input) {
        (Some(_), Some(_)) => Err(OpError::InvalidAttribute(format!(
            "{}: axes given both as attribute and as input 1",
            req.op
        ))),
        (a, b) => Ok(a.or(b)),
    }
}

pub fn squeeze(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    arity(req, 1, 2)?;
    attr::only(&req.attributes, &["axes"])?;
    let x = req.required(0)?;
    let shape = match axes_of(req)? {
        None => x.shape.iter().copied().filter(|&d| d != 1).collect(),
        Some(axes) => {
            let axes = norm_axes(req, "axes", &axes, x.shape.len())?;
            if let Some(&a) = axes.iter().find(|&&a| x.shape[a] != 1) {
                return Err(OpError::shape(format!(
                    "Squeeze: axis {a} of {:?} is not 1",
                    x.shape
                )));
            }
            (0..x.shape.len())
                .filter(|d| !axes.contains(d))
                .map(|d| x.shape[d])
                .collect()
        }
    };
    plain_copy(req, shape)
}

pub fn unsqueeze(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    arity(req, 1, 2)?;
    attr::only(&req.attributes, &["axes"])?;
    let x = req.required(0)?;
    let axes = axes_of(req)?
        .ok_or_else(|| OpError::InvalidAttribute("Unsqueeze: `axes` is required".into()))?;
    let rank = x.shape.len() + axes.len();
    let axes = norm_axes(req, "axes", &axes, rank)?;
    let mut rest = x.shape.iter();
    let shape = (0..rank)
        .map(|d| {
            if axes.contains(&d) {
                1
            } else {
                *rest.next().expect("rank - |axes| dims remain")
            }
        })
        .collect();
    plain_copy(req, shape)
}

pub fn transpose(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    arity(req, 1, 1)?;
    attr::only(&req.attributes, &["perm"])?;
    let x = req.required(0)?;
    let r = x.shape.len();
    let default: Vec<i64> = (0..r as i64).rev().collect();
    let perm = attr::ints_or(&req.attributes, "perm", &default)?;
    let bad = || {
        OpError::InvalidAttribute(format!(
            "Transpose: perm {perm:?} is not a permutation of 0..{r}"
        ))
    };
    if perm.len() != r {
        return Err(bad());
    }
    let perm = norm_axes(req, "perm", &perm, r).map_err(|_| bad())?;
    numel_checked(&x.shape, x.dtype)?;
    let s = strides(&x.shape)?;
    let shape: Vec<u64> = perm.iter().map(|&p| x.shape[p]).collect();
    let src = perm.iter().map(|&p| s[p]).collect();
    let c = StridedCopy::gather(shape.clone(), src, 0, dtype::size(x.dtype))?;
    let l = c.launch(req, 0, req.output_binding(0), Access::Write)?;
    Ok(plan(vec![out(req, shape, x.dtype)], vec![l]))
}

/// Source strides of `input` read as `out` (numpy broadcasting): 0 on broadcast dims.
fn broadcast_src(input: &[u64], out: &[u64]) -> Result<Vec<i64>, OpError> {
    let own = strides(input)?;
    let lead = out.len() - input.len();
    Ok((0..out.len())
        .map(|i| {
            if i < lead || input[i - lead] == 1 {
                0
            } else {
                own[i - lead]
            }
        })
        .collect())
}

pub fn expand(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    arity(req, 2, 2)?;
    attr::only(&req.attributes, &[])?;
    let x = req.required(0)?;
    let target = required_ints(req, 1, "shape")?
        .iter()
        .map(|&v| dim(req, "shape", v))
        .collect::<Result<Vec<_>, _>>()?;
    let shape = umd_sdk::shape::broadcast(&x.shape, &target)?;
    numel_checked(&shape, x.dtype)?;
    let c = StridedCopy::gather(
        shape.clone(),
        broadcast_src(&x.shape, &shape)?,
        0,
        dtype::size(x.dtype),
    )?;
    let l = c.launch(req, 0, req.output_binding(0), Access::Write)?;
    Ok(plan(vec![out(req, shape, x.dtype)], vec![l]))
}

pub fn tile(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    arity(req, 2, 2)?;
    attr::only(&req.attributes, &[])?;
    let x = req.required(0)?;
    let reps = required_ints(req, 1, "repeats")?;
    if reps.len() != x.shape.len() {
        return Err(OpError::shape(format!(
            "Tile: repeats {reps:?} must have one entry per dim of {:?}",
            x.shape
        )));
    }
    let reps = reps
        .iter()
        .map(|&v| dim(req, "repeats", v))
        .collect::<Result<Vec<_>, _>>()?;
    let shape: Vec<u64> = x
        .shape
        .iter()
        .zip(&reps)
        .map(|(&d, &r)| d.checked_mul(r))
        .collect::<Option<_>>()
        .ok_or_else(|| OpError::shape("Tile: output shape overflows".to_string()))?;
    numel_checked(&shape, x.dtype)?;
    // The output viewed as [rep0, d0, rep1, d1, ...]: the source ignores the rep dims.
    let s = strides(&x.shape)?;
    let mut space = Vec::with_capacity(2 * shape.len());
    let mut src = Vec::with_capacity(2 * shape.len());
    for d in 0..shape.len() {
        space.extend([reps[d], x.shape[d]]);
        src.extend([0, s[d]]);
    }
    let c = StridedCopy::gather(space, src, 0, dtype::size(x.dtype))?;
    let l = c.launch(req, 0, req.output_binding(0), Access::Write)?;
    Ok(plan(vec![out(req, shape, x.dtype)], vec![l]))
}
