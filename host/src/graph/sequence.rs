//! The ONNX sequence and optional ops the host runs itself (they move whole tensors between
//! host-held sequences, no kernel): SequenceEmpty, SequenceConstruct, SequenceInsert,
//! SequenceErase, SequenceAt, SequenceLength, ConcatFromSequence, SplitToSequence, Optional,
//! OptionalHasElement, OptionalGetElement. Also the host-side tensor slicing and joining they
//! need. Knows nothing of devices, plugins or the interpreter's control flow.

use std::sync::Arc;

use super::def::Node;
use super::interpret::{MAX_SEQUENCE, Value, elem_bytes, host_bytes, int_attr};
use super::{GraphError, Tensor};
use crate::tensor::{Dtype, TensorDesc};

/// Runs sequence/optional op `node` on its input slots (`None` = absent).
pub fn run(node: &Node, inputs: &[Option<Value>]) -> Result<Vec<Value>, GraphError> {
    let input = |k: usize| inputs.get(k).cloned().flatten();
    let bad = |m: String| GraphError::Input(format!("node {}: {m}", node.label()));
    let seq = |k: usize| match input(k) {
        Some(Value::Sequence(s)) => Ok(s),
        _ => Err(bad(format!("input {k} must be a sequence"))),
    };
    let tensor = |k: usize| match input(k) {
        Some(Value::Tensor(t)) => Ok(t),
        _ => Err(bad(format!("input {k} must be a tensor"))),
    };
    let position = |k: usize| -> Result<Option<i64>, GraphError> {
        match input(k) {
            None => Ok(None),
            Some(Value::Tensor(t)) if t.desc.shape.iter().any(|&d| d != 1) => {
                Err(bad("`position` must be one i32 or i64".into()))
            }
            Some(Value::Tensor(t)) => match crate::data::decode(t.desc.dtype, &t.data).as_slice() {
                [p] if t.desc.dtype == Dtype::I64 || t.desc.dtype == Dtype::I32 => {
                    Ok(Some(*p as i64))
                }
                _ => Err(bad("`position` must be one i32 or i64".into())),
            },
            Some(_) => Err(bad("`position` must be a tensor".into())),
        }
    };
    let out = match node.op.as_str() {
        "SequenceEmpty" => Value::Sequence(Vec::new()),
        "SequenceConstruct" => {
            let items = (0..inputs.len())
                .map(tensor)
                .collect::<Result<Vec<_>, _>>()?;
            same_dtype(node, &items)?;
            Value::Sequence(bounded(node, items)?)
        }
        "SequenceInsert" => {
            let mut s = seq(0)?;
            let t = tensor(1)?;
            let at = index(node, position(2)?, s.len(), true)?;
            s.insert(at, t);
            same_dtype(node, &s)?;
            Value::Sequence(bounded(node, s)?)
        }
        "SequenceErase" => {
            let mut s = seq(0)?;
            if s.is_empty() {
                return Err(bad("cannot erase from an empty sequence".into()));
            }
            let at = index(node, position(1)?, s.len(), false)?;
            s.remove(at);
            Value::Sequence(s)
        }
        "SequenceAt" => {
            let s = seq(0)?;
            let p = position(1)?.ok_or_else(|| bad("`position` is required".into()))?;
            Value::Tensor(s[index(node, Some(p), s.len(), false)?].clone())
        }
        "SequenceLength" => {
            let n = seq(0)?.len();
            Value::Tensor(Arc::new(Tensor {
                desc: TensorDesc::new("", vec![], Dtype::I64),
                data: (n as i64).to_le_bytes().to_vec(),
            }))
        }
        "ConcatFromSequence" => {
            let s = seq(0)?;
            let axis = int_attr(node, "axis")?
                .ok_or_else(|| bad("attribute `axis` is required".into()))?;
            let new_axis = int_attr(node, "new_axis")?.unwrap_or(0) != 0;
            Value::tensor(concat(node, &s, axis, new_axis)?)
        }
        "SplitToSequence" => {
            let t = tensor(0)?;
            let split = match input(1) {
                Some(Value::Tensor(s)) => Some(crate::data::decode(s.desc.dtype, &s.data)),
                _ => None,
            };
            let axis = int_attr(node, "axis")?.unwrap_or(0);
            let keepdims = int_attr(node, "keepdims")?.unwrap_or(1) != 0;
            Value::Sequence(bounded(node, split_to(node, &t, split, axis, keepdims)?)?)
        }
        "Optional" => input(0).unwrap_or(Value::None),
        "OptionalHasElement" => {
            let has = !matches!(input(0), None | Some(Value::None));
            Value::tensor(Tensor {
                desc: TensorDesc::new("", vec![], Dtype::Bool),
                data: vec![has as u8],
            })
        }
        "OptionalGetElement" => match input(0) {
            None | Some(Value::None) => {
                return Err(bad("the optional has no value".into()));
            }
            Some(v) => v,
        },
        other => {
            return Err(GraphError::Unsupported(format!(
                "node {}: {other} is not a host op",
                node.label()
            )));
        }
    };
    Ok(vec![out])
}

/// A sequence position (negative counts from the end; `insert` allows one past the end);
/// `None` is the end (insert) or the last element.
fn index(node: &Node, p: Option<i64>, len: usize, insert: bool) -> Result<usize, GraphError> {
    let n = len as i64;
    let Some(p) = p else {
        return Ok(if insert { len } else { len.saturating_sub(1) });
    };
    let at = if p < 0 { p + n } else { p };
    let hi = if insert { n } else { n - 1 };
    if at < 0 || at > hi {
        return Err(GraphError::Input(format!(
            "node {}: position {p} is out of range for a sequence of {len}",
            node.label()
        )));
    }
    Ok(at as usize)
}

fn same_dtype(node: &Node, items: &[Arc<Tensor>]) -> Result<(), GraphError> {
    if let Some(t) = items.iter().find(|t| t.desc.dtype != items[0].desc.dtype) {
        return Err(GraphError::Input(format!(
            "node {}: a sequence's tensors share one dtype ({} and {})",
            node.label(),
            items[0].desc.dtype,
            t.desc.dtype
        )));
    }
    Ok(())
}

fn bounded(node: &Node, items: Vec<Arc<Tensor>>) -> Result<Vec<Arc<Tensor>>, GraphError> {
    if items.len() > MAX_SEQUENCE {
        return Err(GraphError::Limit(format!(
            "node {}: a sequence of more than {MAX_SEQUENCE} tensors",
            node.label()
        )));
    }
    Ok(items)
}

/// `axis` normalised into `0..rank`.
fn norm_axis(node: &Node, axis: i64, rank: usize) -> Result<usize, GraphError> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    if a < 0 || a >= rank as i64 {
        return Err(GraphError::Input(format!(
            "node {}: axis {axis} is out of range for rank {rank}",
            node.label()
        )));
    }
    Ok(a as usize)
}

/// The tensors of `s` joined along `axis` (`new_axis`: stacked along a new axis there).
pub(super) fn concat(
    node: &Node,
    s: &[Arc<Tensor>],
    axis: i64,
    new_axis: bool,
) -> Result<Tensor, GraphError> {
    let first = s.first().ok_or_else(|| {
        GraphError::Input(format!(
            "node {}: cannot concatenate an empty sequence",
            node.label()
        ))
    })?;
    let rank = first.desc.shape.len();
    let a = norm_axis(node, axis, rank + new_axis as usize)?;
    let e = elem_bytes(node, &first.desc)?;
    // Each part as (outer, len along a, inner): new_axis views each as having 1 there.
    let dims = |t: &Tensor| -> Vec<u64> {
        let mut d = t.desc.shape.clone();
        if new_axis {
            d.insert(a, 1);
        }
        d
    };
    let d0 = dims(first);
    for t in s {
        let d = dims(t);
        let same = t.desc.dtype == first.desc.dtype
            && d.len() == d0.len()
            && d.iter()
                .zip(&d0)
                .enumerate()
                .all(|(i, (x, y))| i == a || x == y);
        if !same {
            return Err(GraphError::Input(format!(
                "node {}: {} and {} cannot be joined along axis {axis}",
                node.label(),
                first.desc,
                t.desc
            )));
        }
    }
    let total = s
        .iter()
        .try_fold(0u64, |sum, t| sum.checked_add(dims(t)[a]));
    let mut joined = d0.clone();
    joined[a] = total.unwrap_or(u64::MAX);
    // bounded before anything is allocated: parts may repeat one large tensor many times
    let bytes = host_bytes(node, &joined, e)?;
    let total = joined[a];
    let outer: u64 = crate::tensor::elements(&d0[..a]);
    let inner = crate::tensor::elements(&d0[a + 1..]) as usize * e;
    let mut data = Vec::with_capacity(bytes);
    for o in 0..outer as usize {
        for t in s {
            let chunk = dims(t)[a] as usize * inner;
            data.extend_from_slice(&t.data[o * chunk..(o + 1) * chunk]);
        }
    }
    let mut shape = d0;
    shape[a] = total;
    Ok(Tensor {
        desc: TensorDesc::new("", shape, first.desc.dtype),
        data,
    })
}

/// SplitToSequence: `t` cut along `axis` into parts of the lengths `split` says (one length:
/// equal parts, the last shorter; a list: those lengths; none: parts of 1, the axis dropped
/// unless `keepdims`).
fn split_to(
    node: &Node,
    t: &Tensor,
    split: Option<Vec<f64>>,
    axis: i64,
    keepdims: bool,
) -> Result<Vec<Arc<Tensor>>, GraphError> {
    let rank = t.desc.shape.len();
    let a = norm_axis(node, axis, rank)?;
    let len = t.desc.shape[a];
    let bad = |m: String| GraphError::Input(format!("node {}: {m}", node.label()));
    // the number of parts is bounded before their list is made
    let parts = match split.as_deref() {
        None => len,
        Some([n]) if *n >= 1.0 => len.div_ceil(*n as u64),
        Some(v) => v.len() as u64,
    };
    if parts > MAX_SEQUENCE as u64 {
        return Err(GraphError::Limit(format!(
            "node {}: a sequence of {parts} tensors, more than {MAX_SEQUENCE}",
            node.label()
        )));
    }
    let (lengths, drop_axis): (Vec<u64>, bool) = match split.as_deref() {
        None => (vec![1; len as usize], !keepdims),
        Some([n]) if *n >= 1.0 => {
            let n = *n as u64;
            let mut v = vec![n; (len / n) as usize];
            if !len.is_multiple_of(n) {
                v.push(len % n);
            }
            (v, false)
        }
        Some(v) if v.iter().all(|&x| x >= 0.0) && v.iter().sum::<f64>() == len as f64 => {
            (v.iter().map(|&x| x as u64).collect(), false)
        }
        Some(v) => {
            return Err(bad(format!(
                "split {v:?} does not cut axis {a} of length {len}"
            )));
        }
    };
    if lengths.len() > MAX_SEQUENCE {
        return Err(GraphError::Limit(format!(
            "node {}: a sequence of more than {MAX_SEQUENCE} tensors",
            node.label()
        )));
    }
    let e = elem_bytes(node, &t.desc)?;
    let outer: u64 = crate::tensor::elements(&t.desc.shape[..a]);
    let inner = crate::tensor::elements(&t.desc.shape[a + 1..]) as usize * e;
    let row = len as usize * inner;
    let mut start = 0usize;
    let mut parts = Vec::with_capacity(lengths.len());
    for &l in &lengths {
        let l = l as usize;
        let mut data = Vec::with_capacity(outer as usize * l * inner);
        for o in 0..outer as usize {
            let at = o * row + start * inner;
            data.extend_from_slice(&t.data[at..at + l * inner]);
        }
        let mut shape = t.desc.shape.clone();
        if drop_axis {
            shape.remove(a);
        } else {
            shape[a] = l as u64;
        }
        parts.push(Arc::new(Tensor {
            desc: TensorDesc::new("", shape, t.desc.dtype),
            data,
        }));
        start += l;
    }
    Ok(parts)
}
