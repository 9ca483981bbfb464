//! Shared helpers: attribute and input readers, overflow-checked shape arithmetic, NumPy
//! broadcasting, and the output-size budget every op charges before it allocates.

use super::{Attr, OpError, Tensor, Value};

/// Result of every op helper.
pub type OpResult<T> = Result<T, OpError>;

/// The most bytes one call may produce over all its outputs: string bytes plus, per element,
/// the element's in-memory size (a `String` header for strings).
pub const MAX_OUTPUT_BYTES: usize = 64 << 20;

/// Shorthand for an [`OpError::Invalid`].
pub fn invalid<T>(msg: impl Into<String>) -> OpResult<T> {
    Err(OpError::Invalid(msg.into()))
}

/// Counts the bytes a call's outputs take and refuses past [`MAX_OUTPUT_BYTES`].
#[derive(Debug)]
pub struct Budget {
    left: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            left: MAX_OUTPUT_BYTES,
        }
    }
}

impl Budget {
    /// Charges `bytes`; Invalid once the total passes the limit.
    pub fn charge(&mut self, bytes: usize) -> OpResult<()> {
        match self.left.checked_sub(bytes) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => invalid(format!("the outputs would exceed {MAX_OUTPUT_BYTES} bytes")),
        }
    }

    /// Charges `count` elements of type `T` (e.g. `bool`, `i64`, or `String` headers).
    pub fn charge_elems<T>(&mut self, count: usize) -> OpResult<()> {
        let bytes = count.checked_mul(size_of::<T>());
        self.charge(bytes.unwrap_or(usize::MAX))
    }

    /// Charges one output string of `len` bytes (its header and its text).
    pub fn charge_str(&mut self, len: usize) -> OpResult<()> {
        self.charge(len.saturating_add(size_of::<String>()))
    }
}

/// All inputs of an op with only required inputs, each present.
pub fn required_inputs<'a>(op: &str, inputs: &'a [Option<Value>]) -> OpResult<Vec<&'a Value>> {
    inputs
        .iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_ref()
                .ok_or_else(|| OpError::Invalid(format!("{op}: input {i} is required but absent")))
        })
        .collect()
}

/// Refuses attribute names outside `known` and names given twice.
pub fn check_attrs(op: &str, attrs: &[(String, Attr)], known: &[&str]) -> OpResult<()> {
    for (i, (name, _)) in attrs.iter().enumerate() {
        if !known.contains(&name.as_str()) {
            return invalid(format!("{op}: unknown attribute {name:?}"));
        }
        if attrs[..i].iter().any(|(n, _)| n == name) {
            return invalid(format!("{op}: attribute {name:?} is given twice"));
        }
    }
    Ok(())
}

/// The attribute called `name`, if given.
pub fn attr<'a>(attrs: &'a [(String, Attr)], name: &str) -> Option<&'a Attr> {
    attrs.iter().find(|(n, _)| n == name).map(|(_, a)| a)
}

fn wrong_type<T>(name: &str, want: &str, got: &Attr) -> OpResult<T> {
    invalid(format!("attribute {name:?} must be {want}, got {got:?}"))
}

macro_rules! attr_getter {
    ($(#[$doc:meta])* $fn:ident, $variant:ident, $ty:ty, $want:literal) => {
        $(#[$doc])*
        pub fn $fn<'a>(attrs: &'a [(String, Attr)], name: &str) -> OpResult<Option<&'a $ty>> {
            match attr(attrs, name) {
                None => Ok(None),
                Some(Attr::$variant(v)) => Ok(Some(v)),
                Some(other) => wrong_type(name, $want, other),
            }
        }
    };
}

attr_getter!(/// An INT attribute.
    attr_int, Int, i64, "an int");
attr_getter!(/// A FLOAT attribute.
    attr_float, Float, f64, "a float");
attr_getter!(/// A STRING attribute.
    attr_text, Text, String, "a string");
attr_getter!(/// An INTS attribute.
    attr_ints, Ints, Vec<i64>, "a list of ints");
attr_getter!(/// A FLOATS attribute.
    attr_floats, Floats, Vec<f64>, "a list of floats");
attr_getter!(/// A STRINGS attribute.
    attr_texts, Texts, Vec<String>, "a list of strings");
attr_getter!(/// A TENSOR attribute.
    attr_tensor, Tensor, Value, "a tensor");

/// The element count of `shape`, refusing overflow of `usize`.
pub fn numel(shape: &[u64]) -> OpResult<usize> {
    shape.iter().try_fold(1usize, |acc, &d| {
        usize::try_from(d)
            .ok()
            .and_then(|d| acc.checked_mul(d))
            .ok_or_else(|| OpError::Invalid(format!("shape {shape:?} has too many elements")))
    })
}

/// Checks that a value's data holds exactly as many elements as its shape says.
pub fn check_value(what: &str, v: &Value) -> OpResult<()> {
    let n = numel(v.shape())?;
    if n != v.len() {
        return invalid(format!(
            "{what}: shape {:?} holds {n} elements but {} are given",
            v.shape(),
            v.len()
        ));
    }
    Ok(())
}

/// The string tensor in `v` (checked against its shape); Invalid naming `what` otherwise.
pub fn str_input<'a>(what: &str, v: &'a Value) -> OpResult<&'a Tensor<String>> {
    check_value(what, v)?;
    match v {
        Value::Str(t) => Ok(t),
        other => invalid(format!(
            "{what} must be a string tensor, got {}",
            other.dtype_name()
        )),
    }
}

/// The NumPy broadcast of two shapes; Invalid naming both when they do not broadcast.
pub fn broadcast_shape(a: &[u64], b: &[u64]) -> OpResult<Vec<u64>> {
    let rank = a.len().max(b.len());
    let dim = |s: &[u64], i: usize| {
        if i + s.len() < rank {
            1
        } else {
            s[i + s.len() - rank]
        }
    };
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Ok(x),
            (1, y) => Ok(y),
            (x, 1) => Ok(x),
            _ => invalid(format!("shapes {a:?} and {b:?} do not broadcast")),
        })
        .collect()
}

/// Row-major strides of `shape` seen in an output of rank `rank`, 0 on broadcast axes.
fn broadcast_strides(shape: &[u64], out: &[u64]) -> Vec<usize> {
    let mut strides = vec![0usize; out.len()];
    let mut step = 1usize;
    for (i, &d) in shape.iter().enumerate().rev() {
        let o = i + out.len() - shape.len();
        if d != 1 {
            strides[o] = step;
        }
        // Cannot overflow: the product of `shape` was checked by `numel` on the input.
        step = step.saturating_mul(d as usize);
    }
    strides
}

/// For every element of the broadcast of `a` and `b` (row-major), calls `f` with the flat
/// indices into `a` and `b`. Both input shapes must have passed [`numel`].
pub fn broadcast_for_each(
    a: &[u64],
    b: &[u64],
    mut f: impl FnMut(usize, usize) -> OpResult<()>,
) -> OpResult<Vec<u64>> {
    let out = broadcast_shape(a, b)?;
    let total = numel(&out)?;
    let (sa, sb) = (broadcast_strides(a, &out), broadcast_strides(b, &out));
    let mut idx = vec![0u64; out.len()];
    let (mut ia, mut ib) = (0usize, 0usize);
    for _ in 0..total {
        f(ia, ib)?;
        // Advance the multi-index like an odometer, keeping the flat indices in step.
        for ax in (0..out.len()).rev() {
            idx[ax] += 1;
            ia += sa[ax];
            ib += sb[ax];
            if idx[ax] < out[ax] {
                break;
            }
            ia -= sa[ax] * out[ax] as usize;
            ib -= sb[ax] * out[ax] as usize;
            idx[ax] = 0;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_shapes_and_indices() {
        assert_eq!(broadcast_shape(&[2, 1, 3], &[4, 1]).unwrap(), vec![2, 4, 3]);
        assert_eq!(broadcast_shape(&[], &[5]).unwrap(), vec![5]);
        assert_eq!(broadcast_shape(&[0], &[1]).unwrap(), vec![0]);
        assert!(matches!(
            broadcast_shape(&[2], &[3]),
            Err(OpError::Invalid(_))
        ));
        let mut pairs = vec![];
        let out = broadcast_for_each(&[2, 1], &[3], |a, b| {
            pairs.push((a, b));
            Ok(())
        })
        .unwrap();
        assert_eq!(out, vec![2, 3]);
        assert_eq!(pairs, vec![(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]);
    }

    #[test]
    fn overflow_and_budget_are_refused() {
        assert!(numel(&[u64::MAX, 2]).is_err());
        assert!(numel(&[1 << 40, 1 << 40]).is_err());
        assert_eq!(numel(&[]).unwrap(), 1);
        let mut b = Budget::default();
        assert!(b.charge(MAX_OUTPUT_BYTES).is_ok());
        assert!(b.charge(1).is_err());
        assert!(
            Budget::default()
                .charge_elems::<String>(usize::MAX / 2)
                .is_err()
        );
    }

    #[test]
    fn attrs_are_checked() {
        let attrs = vec![
            ("a".to_string(), Attr::Int(3)),
            ("b".to_string(), Attr::Text("x".into())),
        ];
        assert_eq!(attr_int(&attrs, "a").unwrap(), Some(&3));
        assert_eq!(attr_int(&attrs, "c").unwrap(), None);
        let err = attr_int(&attrs, "b").unwrap_err();
        assert!(
            matches!(&err, OpError::Invalid(m) if m.contains("\"b\"")),
            "{err:?}"
        );
        assert!(check_attrs("Op", &attrs, &["a", "b"]).is_ok());
        assert!(check_attrs("Op", &attrs, &["a"]).is_err());
        let twice = vec![attrs[0].clone(), attrs[0].clone()];
        assert!(check_attrs("Op", &twice, &["a"]).is_err());
    }
}
