//! Planning of the ops that copy windows: Slice (numpy slicing, negative steps, clamping),
//! Concat (one strided copy per non-empty input into its window of the output) and Split (one
//! strided copy per output out of its window of the input).

use umd_sdk::{Access, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype};

use crate::common::{
    arity, dt_name, norm_axes, norm_axis, numel_checked, out, plan, required_ints,
};
use crate::copy::{StridedCopy, strides};

/// Start (in elements, may be -1 or `dim` when empty) and length of `start:end:step` over a dim
/// of extent `dim`, clamped as numpy (and ONNX) do.
pub fn slice_dim(dim: u64, start: i64, end: i64, step: i64) -> (i64, u64) {
    let d = dim as i128;
    let (start, end, step) = (start as i128, end as i128, step as i128);
    let wrap = |v: i128| if v < 0 { v + d } else { v };
    let (s, len) = if step > 0 {
        let (s, e) = (wrap(start).clamp(0, d), wrap(end).clamp(0, d));
        (s, if e > s { (e - s + step - 1) / step } else { 0 })
    } else {
        let (s, e) = (wrap(start).clamp(-1, d - 1), wrap(end).clamp(-1, d - 1));
        (s, if s > e { (s - e - step - 1) / -step } else { 0 })
    };
    (s as i64, len as u64)
}

pub fn slice(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    arity(req, 1, 5)?;
    attr::only(&req.attributes, &["starts", "ends", "axes"])?;
    let x = req.required(0)?;
    let r = x.shape.len();
    let (starts, ends, axes, steps) = if attr::has(&req.attributes, "starts") {
        // opset 1: attributes
        let need = |n: &str| {
            attr::ints_opt(&req.attributes, n)?.ok_or_else(|| {
                OpError::InvalidAttribute(format!("Slice: attribute `{n}` is required"))
            })
        };
        (
            need("starts")?,
            need("ends")?,
            attr::ints_opt(&req.attributes, "axes")?,
            None,
        )
    } else {
        (
            required_ints(req, 1, "starts")?,
            required_ints(req, 2, "ends")?,
            req.ints(3)?,
            req.ints(4)?,
        )
    };
    let k = starts.len();
    let axes = axes.unwrap_or_else(|| (0..k as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; k]);
    if ends.len() != k || axes.len() != k || steps.len() != k {
        return Err(OpError::shape(format!(
            "Slice: starts {starts:?}, ends {ends:?}, axes {axes:?} and steps {steps:?} must have \
             the same length"
        )));
    }
    let axes = norm_axes(req, "axes", &axes, r)?;
    numel_checked(&x.shape, x.dtype)?;
    let in_strides = strides(&x.shape)?;
    let mut shape = x.shape.clone();
    let mut src = in_strides.clone();
    let mut base: i64 = 0;
    for i in 0..k {
        let (a, step) = (axes[i], steps[i]);
        if step == 0 {
            return Err(OpError::shape(format!("Slice: steps {steps:?} contain 0")));
        }
        let (start, len) = slice_dim(x.shape[a], starts[i], ends[i], step);
        shape[a] = len;
        if len == 0 {
            continue;
        }
        // start and start + (len-1)·step both lie inside the dim, so these cannot overflow
        base += start * in_strides[a];
        src[a] = if len > 1 { step * in_strides[a] } else { 0 };
    }
    let c = StridedCopy {
        dst: strides(&shape)?,
        shape: shape.clone(),
        src,
        src_base: base,
        dst_base: 0,
        elem: dtype::size(x.dtype),
    };
    let l = c.launch(req, 0, req.output_binding(0), Access::Write)?;
    Ok(plan(vec![out(req, shape, x.dtype)], vec![l]))
}

/// The present inputs of a variadic op, all required.
fn variadic(req: &PlanRequestExt) -> Result<Vec<&TensorDesc>, OpError> {
    if req.slots() == 0 {
        return Err(OpError::shape(format!(
            "{} needs at least one input",
            req.op
        )));
    }
    (0..req.slots()).map(|i| req.required(i)).collect()
}

pub fn concat(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["axis"])?;
    let inputs = variadic(req)?;
    let first = inputs[0];
    let r = first.shape.len();
    if r == 0 {
        return Err(OpError::shape(
            "Concat: inputs must have rank >= 1".to_string(),
        ));
    }
    let axis = norm_axis(req, "axis", attr::int(&req.attributes, "axis")?, r)?;
    let mut shape = first.shape.clone();
    shape[axis] = 0;
    for t in &inputs {
        if t.dtype != first.dtype {
            return Err(OpError::dtype(format!(
                "Concat: inputs must share one dtype, got {} and {}",
                dt_name(first.dtype),
                dt_name(t.dtype)
            )));
        }
        let same = t.shape.len() == r && (0..r).all(|d| d == axis || t.shape[d] == first.shape[d]);
        if !same {
            return Err(OpError::shape(format!(
                "Concat: shapes {:?} and {:?} differ outside axis {axis}",
                first.shape, t.shape
            )));
        }
        shape[axis] = shape[axis]
            .checked_add(t.shape[axis])
            .ok_or_else(|| OpError::shape("Concat: output shape overflows".to_string()))?;
    }
    numel_checked(&shape, first.dtype)?;
    let out_strides = strides(&shape)?;
    let elem = dtype::size(first.dtype);
    let dst = req.output_binding(0);
    let mut launches = Vec::new();
    let mut offset: i64 = 0;
    for (k, t) in inputs.iter().enumerate() {
        if numel_checked(&t.shape, t.dtype)? > 0 {
            let c = StridedCopy {
                shape: t.shape.clone(),
                src: strides(&t.shape)?,
                dst: out_strides.clone(),
                src_base: 0,
                dst_base: offset * out_strides[axis],
                elem,
            };
            // later windows must keep what earlier launches wrote (the CPU device returns
            // whole buffers)
            let access = if launches.is_empty() {
                Access::Write
            } else {
                Access::ReadWrite
            };
            launches.push(c.launch(req, k as u32, dst, access)?);
        }
        offset += t.shape[axis] as i64;
    }
    if launches.is_empty() {
        launches.push(StridedCopy::plain(0, elem).launch(req, 0, dst, Access::Write)?);
    }
    Ok(plan(vec![out(req, shape, first.dtype)], launches))
}

/// Split sizes: `split` attribute (opset ≤ 11) or input 1 (opset 13), else `num_outputs`
/// (opset 18) or the number of outputs wanted, as equal as ONNX makes them.
fn split_sizes(req: &PlanRequestExt, dim: u64) -> Result<Vec<u64>, OpError> {
    let from_attr = attr::ints_opt(&req.attributes, "split")?;
    let from_input = req.ints(1)?;
    let explicit = match (from_attr, from_input) {
        (Some(_), Some(_)) => {
            return Err(OpError::InvalidAttribute(
                "Split: split given both as attribute and as input 1".into(),
            ));
        }
        (a, b) => a.or(b),
    };
    if let Some(split) = explicit {
        let sizes = split
            .iter()
            .map(|&s| u64::try_from(s))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| OpError::shape(format!("Split: split {split:?} has a negative size")))?;
        if sizes.iter().try_fold(0u64, |a, &s| a.checked_add(s)) != Some(dim) {
            return Err(OpError::shape(format!(
                "Split: split {split:?} does not sum to the axis extent {dim}"
            )));
        }
        return Ok(sizes);
    }
    let n = match attr::int_or(&req.attributes, "num_outputs", 0)? {
        0 if attr::has(&req.attributes, "num_outputs") => 0,
        0 => req.outputs(0) as i64,
        n => n,
    };
    if n <= 0 {
        return Err(OpError::InvalidAttribute(
            "Split: give `split`, `num_outputs` (>= 1) or the number of outputs wanted".into(),
        ));
    }
    let n = n as u64;
    if dim.is_multiple_of(n) {
        return Ok(vec![dim / n; n as usize]);
    }
    let chunk = dim / n + 1;
    let last = dim as i128 - chunk as i128 * (n as i128 - 1);
    if last < 0 {
        return Err(OpError::shape(format!(
            "Split: an extent of {dim} cannot be split into {n} outputs of {chunk}"
        )));
    }
    let mut sizes = vec![chunk; n as usize];
    sizes[n as usize - 1] = last as u64;
    Ok(sizes)
}

pub fn split(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    arity(req, 1, 2)?;
    attr::only(&req.attributes, &["axis", "split", "num_outputs"])?;
    let x = req.required(0)?;
    let r = x.shape.len();
    if r == 0 {
        return Err(OpError::shape(
            "Split: the input must have rank >= 1".to_string(),
        ));
    }
    let axis = norm_axis(req, "axis", attr::int_or(&req.attributes, "axis", 0)?, r)?;
    let sizes = split_sizes(req, x.shape[axis])?;
    if req.outputs_wanted.len() > sizes.len() {
        return Err(OpError::shape(format!(
            "Split: {} outputs wanted, the split makes {}",
            req.outputs_wanted.len(),
            sizes.len()
        )));
    }
    numel_checked(&x.shape, x.dtype)?;
    let in_strides = strides(&x.shape)?;
    let elem = dtype::size(x.dtype);
    let (mut outputs, mut launches) = (Vec::new(), Vec::new());
    let mut offset: i64 = 0;
    for (k, &s) in sizes.iter().enumerate() {
        let mut shape = x.shape.clone();
        shape[axis] = s;
        let c = StridedCopy::gather(
            shape.clone(),
            in_strides.clone(),
            offset * in_strides[axis],
            elem,
        )?;
        launches.push(c.launch(req, 0, req.output_binding(k), Access::Write)?);
        let mut o = out(req, shape, x.dtype);
        o.name = format!("split_out{k}");
        outputs.push(o);
        offset += s as i64;
    }
    Ok(plan(outputs, launches))
}
