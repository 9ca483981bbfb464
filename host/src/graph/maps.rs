//! Map values and the ONNX-ML ops on them that the host runs itself (a map is not a tensor, so
//! no plugin sees one): ZipMap (a tensor of scores → a sequence of maps, what scikit-learn
//! classifiers converted by skl2onnx return as probabilities), DictVectorizer and CastMap (a
//! map → a tensor). Each as onnxruntime computes it. Knows nothing of devices, plugins or the
//! interpreter's control flow.

use std::cmp::Ordering;
use std::sync::Arc;

use super::def::Node;
use super::interpret::Value;
use super::onnx::MAX_TENSOR_BYTES;
use super::{GraphError, Tensor};
use crate::tensor::{AttrValue, Dtype, TensorDesc};

/// The `ai.onnx.ml` ops the host runs itself.
pub const MAP_OPS: [&str; 3] = ["ZipMap", "DictVectorizer", "CastMap"];
/// The domain of [`MAP_OPS`].
pub const ML_DOMAIN: &str = "ai.onnx.ml";
/// Most maps one ZipMap makes (one per row of its input) or one input gives.
pub const MAX_MAPS: usize = 1 << 18;
/// Most entries of one map.
pub const MAX_ENTRIES: usize = 1 << 20;
/// Largest SPARSE `max_map` of a CastMap (its output's width).
pub const MAX_CAST_MAP: i64 = 1 << 20;

/// A map with scalar values (ONNX `map(K, V)` as the ONNX-ML ops use it): `keys` and `values`
/// are two 1-D tensors of one length, the keys int64 or string, unique and ascending (int64 by
/// value, strings by their bytes: the order of onnxruntime's `std::map`), the values f32, f64,
/// i64 or string. Many maps may share one keys tensor (ZipMap's do).
#[derive(Debug, Clone, PartialEq)]
pub struct MapValue {
    keys: Arc<Tensor>,
    values: Tensor,
}

impl MapValue {
    /// The map of `keys[i] → values[i]`, checked (1-D, same length, dtypes a map may hold, no
    /// key twice) and ordered by key.
    pub fn new(keys: Tensor, values: Tensor) -> Result<MapValue, String> {
        if !matches!(keys.desc.dtype, Dtype::I64 | Dtype::Str) {
            return Err(format!(
                "map keys must be int64 or string, not {}",
                keys.desc.dtype
            ));
        }
        if !matches!(
            values.desc.dtype,
            Dtype::F32 | Dtype::F64 | Dtype::I64 | Dtype::Str
        ) {
            return Err(format!(
                "map values must be float, double, int64 or string, not {}",
                values.desc.dtype
            ));
        }
        let (k, v) = (elements(&keys)?, elements(&values)?);
        if keys.desc.shape.len() != 1 || values.desc.shape.len() != 1 || k.len() != v.len() {
            return Err(format!(
                "a map is two 1-D tensors of one length: keys {:?}, values {:?}",
                keys.desc.shape, values.desc.shape
            ));
        }
        if k.len() > MAX_ENTRIES {
            return Err(format!(
                "a map of {} entries; at most {MAX_ENTRIES}",
                k.len()
            ));
        }
        let mut order: Vec<usize> = (0..k.len()).collect();
        order.sort_by(|&a, &b| key_order(keys.desc.dtype, k[a], k[b]));
        if let Some(w) = order
            .windows(2)
            .find(|w| key_order(keys.desc.dtype, k[w[0]], k[w[1]]) == Ordering::Equal)
        {
            return Err(format!("map key {} is given twice", show(&keys, w[0])));
        }
        Ok(MapValue {
            keys: Arc::new(gather(&keys, &k, &order)),
            values: gather(&values, &v, &order),
        })
    }

    /// The keys, ascending.
    pub fn keys(&self) -> &Tensor {
        &self.keys
    }

    /// The values, in the keys' order.
    pub fn values(&self) -> &Tensor {
        &self.values
    }

    pub fn len(&self) -> usize {
        self.keys.desc.shape[0] as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the map holds (keys and values).
    pub fn bytes(&self) -> usize {
        self.keys.data.len() + self.values.data.len()
    }
}

/// Runs map op `node` on its input slots (`None` = absent).
pub fn run(node: &Node, inputs: &[Option<Value>]) -> Result<Vec<Value>, GraphError> {
    let bad = |m: String| GraphError::Input(format!("node {}: {m}", node.label()));
    let out = match node.op.as_str() {
        "ZipMap" => match inputs.first().cloned().flatten() {
            Some(Value::Tensor(t)) => zip_map(node, &t)?,
            _ => return Err(bad("input 0 must be a tensor".into())),
        },
        op => {
            let map = match inputs.first().cloned().flatten() {
                Some(Value::Map(m)) => m,
                _ => return Err(bad("input 0 must be a map".into())),
            };
            if op == "DictVectorizer" {
                dict_vectorizer(node, &map)?
            } else {
                cast_map(node, &map)?
            }
        }
    };
    Ok(vec![out])
}

/// ZipMap: row `n` of a 1-D or 2-D f32 tensor → the map of label `j` → `x[n, j]`.
fn zip_map(node: &Node, x: &Tensor) -> Result<Value, GraphError> {
    let bad = |m: String| GraphError::Input(format!("node {}: {m}", node.label()));
    let labels = labels(node, "classlabels_int64s", "classlabels_strings")?;
    if x.desc.dtype != Dtype::F32 {
        return Err(GraphError::Unsupported(format!(
            "node {}: ZipMap takes float tensors, not {}",
            node.label(),
            x.desc.dtype
        )));
    }
    let (rows, width) = match x.desc.shape[..] {
        [w] => (1, w),
        [r, w] => (r, w),
        _ => {
            return Err(bad(format!(
                "ZipMap takes a 1-D or 2-D tensor, not {:?}",
                x.desc.shape
            )));
        }
    };
    let keys_len = labels.desc.shape[0];
    if width != keys_len {
        return Err(bad(format!(
            "{width} scores per row for {keys_len} class labels"
        )));
    }
    if x.data.len() as u64 != rows.saturating_mul(width).saturating_mul(4) {
        return Err(bad(format!(
            "{} bytes for a float tensor of shape {:?}",
            x.data.len(),
            x.desc.shape
        )));
    }
    let per_map = labels.data.len() as u64 + 4 * width;
    if rows > MAX_MAPS as u64 || rows.saturating_mul(per_map) > MAX_TENSOR_BYTES {
        return Err(GraphError::Limit(format!(
            "node {}: {rows} maps of {per_map} bytes; at most {MAX_MAPS} maps and \
             {MAX_TENSOR_BYTES} bytes",
            node.label()
        )));
    }
    // One ordering of the labels serves every row; a repeated label keeps its last column's
    // score (onnxruntime assigns each column in turn).
    let lab = elements(&labels).map_err(bad)?;
    let mut order: Vec<usize> = (0..lab.len()).collect();
    order.sort_by(|&a, &b| key_order(labels.desc.dtype, lab[a], lab[b]).then(a.cmp(&b)));
    let mut last: Vec<usize> = Vec::with_capacity(order.len());
    for &j in &order {
        match last.last_mut() {
            Some(l) if key_order(labels.desc.dtype, lab[*l], lab[j]) == Ordering::Equal => *l = j,
            _ => last.push(j),
        }
    }
    let order = last;
    let keys = Arc::new(gather(&labels, &lab, &order));
    let width = width as usize;
    let maps = (0..rows as usize)
        .map(|n| {
            let row = &x.data[4 * n * width..4 * (n + 1) * width];
            let data = order
                .iter()
                .flat_map(|&j| row[4 * j..4 * j + 4].iter().copied())
                .collect();
            Arc::new(MapValue {
                keys: keys.clone(),
                values: Tensor {
                    desc: TensorDesc::new("", vec![order.len() as u64], Dtype::F32),
                    data,
                },
            })
        })
        .collect();
    Ok(Value::Maps(maps))
}

/// DictVectorizer: `[1, V]` of the map's value for each vocabulary entry (the value type's
/// zero — `""` for strings — where the map lacks it).
fn dict_vectorizer(node: &Node, map: &MapValue) -> Result<Value, GraphError> {
    let vocab = labels(node, "int64_vocabulary", "string_vocabulary")?;
    let key_dt = map.keys.desc.dtype;
    if vocab.desc.dtype != key_dt {
        return Err(GraphError::Input(format!(
            "node {}: the vocabulary is {}, the map's keys are {key_dt}",
            node.label(),
            vocab.desc.dtype
        )));
    }
    let keys = elements(&map.keys).map_err(GraphError::Input)?;
    let values = elements(&map.values).map_err(GraphError::Input)?;
    let zero = vec![0u8; map.values.desc.dtype.bytes_for(1).unwrap_or(0) as usize];
    let picked: Vec<&[u8]> = elements(&vocab)
        .map_err(GraphError::Input)?
        .into_iter()
        .map(
            |w| match keys.binary_search_by(|k| key_order(key_dt, k, w)) {
                Ok(i) => values[i],
                Err(_) if map.values.desc.dtype == Dtype::Str => &[][..],
                Err(_) => &zero[..],
            },
        )
        .collect();
    tensor_of(node, map.values.desc.dtype, &picked)
}

/// CastMap: an int64-keyed map's values as a `[1, N]` tensor: DENSE in key order, SPARSE at
/// index = key for keys `0..max_map` (the pad value elsewhere), cast to float, int64 or string.
fn cast_map(node: &Node, map: &MapValue) -> Result<Value, GraphError> {
    let bad = |m: String| GraphError::Input(format!("node {}: {m}", node.label()));
    let text = |name: &str, default: &str| -> Result<String, GraphError> {
        match node.attributes.iter().find(|(n, _)| n == name) {
            None => Ok(default.to_string()),
            Some((_, AttrValue::Text(t))) => Ok(t.clone()),
            Some(_) => Err(attr_error(node, name, "must be a string")),
        }
    };
    if map.keys.desc.dtype != Dtype::I64
        || !matches!(map.values.desc.dtype, Dtype::F32 | Dtype::Str)
    {
        return Err(GraphError::Unsupported(format!(
            "node {}: CastMap takes map(int64, float) or map(int64, string), not map({}, {})",
            node.label(),
            map.keys.desc.dtype,
            map.values.desc.dtype
        )));
    }
    let to = match text("cast_to", "TO_FLOAT")?.as_str() {
        "TO_FLOAT" => Dtype::F32,
        "TO_INT64" => Dtype::I64,
        "TO_STRING" => Dtype::Str,
        t => {
            return Err(attr_error(
                node,
                "cast_to",
                &format!("`{t}` is not TO_FLOAT, TO_INT64 or TO_STRING"),
            ));
        }
    };
    let sparse = match text("map_form", "DENSE")?.as_str() {
        "DENSE" => false,
        "SPARSE" => true,
        f => {
            return Err(attr_error(
                node,
                "map_form",
                &format!("`{f}` is not DENSE or SPARSE"),
            ));
        }
    };
    let max_map = match node.attributes.iter().find(|(n, _)| n == "max_map") {
        None => 1,
        Some((_, AttrValue::Int(v))) => *v,
        Some(_) => return Err(attr_error(node, "max_map", "must be an int")),
    };
    let keys = int64s(&map.keys.data);
    let values = elements(&map.values).map_err(GraphError::Input)?;
    let cast = |v: &[u8]| cast_value(map.values.desc.dtype, to, v).map_err(&bad);
    let pad = match to {
        Dtype::Str => b"0.f".to_vec(),
        _ => vec![0u8; 8],
    };
    let out: Vec<Vec<u8>> = if sparse {
        if !(1..=MAX_CAST_MAP).contains(&max_map) {
            return Err(attr_error(
                node,
                "max_map",
                &format!("must be in 1..={MAX_CAST_MAP} for SPARSE, not {max_map}"),
            ));
        }
        if keys.first().is_some_and(|&k| k < 0) {
            return Err(bad(format!(
                "SPARSE takes no negative key; the map has {}",
                keys[0]
            )));
        }
        let mut out = vec![pad; max_map as usize];
        for (&k, v) in keys.iter().zip(&values).take_while(|(k, _)| **k < max_map) {
            out[k as usize] = cast(v)?;
        }
        out
    } else {
        values.iter().map(|v| cast(v)).collect::<Result<_, _>>()?
    };
    let items: Vec<&[u8]> = out
        .iter()
        .map(|v| match to {
            Dtype::Str => &v[..],
            Dtype::F32 => &v[..4],
            _ => &v[..8],
        })
        .collect();
    tensor_of(node, to, &items)
}

/// One map value of dtype `from` (f32 or string) cast to `to` as onnxruntime's CastMap does
/// (`std::stof`/`std::stoll` from strings, `std::to_string` to them); the result's
/// little-endian bytes (8 for numbers: the first 4 for f32) or text.
fn cast_value(from: Dtype, to: Dtype, v: &[u8]) -> Result<Vec<u8>, String> {
    match (from, to) {
        (Dtype::F32, Dtype::Str) => {
            let x = f32::from_le_bytes(v.try_into().expect("4 bytes"));
            Ok(c_fixed(x as f64).into_bytes())
        }
        (Dtype::F32, Dtype::F32) => Ok([v, &[0; 4]].concat()),
        (Dtype::F32, _) => {
            // x86's cvttss2si: NaN and out-of-range values give i64::MIN
            let x = f32::from_le_bytes(v.try_into().expect("4 bytes"));
            let i = if x.is_nan() || !(-9.223_372e18..9.223_372e18).contains(&x) {
                i64::MIN
            } else {
                x as i64
            };
            Ok(i.to_le_bytes().to_vec())
        }
        (_, Dtype::Str) => Ok(v.to_vec()),
        (_, to) => {
            let s = std::str::from_utf8(v).map_err(|_| "a map value is not UTF-8".to_string())?;
            let not_number = || format!("map value `{s}` is not a number");
            let out_of_range = || format!("map value `{s}` is out of range");
            let t = s.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
            if to == Dtype::I64 {
                let n = c_number_len(t, false).ok_or_else(not_number)?;
                let x: i64 = t[..n].parse().map_err(|_| out_of_range())?;
                return Ok(x.to_le_bytes().to_vec());
            }
            let n = c_number_len(t, true).ok_or_else(not_number)?;
            let x: f32 = t[..n].parse().map_err(|_| not_number())?;
            let numeric = t[..n].bytes().any(|b| b.is_ascii_digit());
            let nonzero = t[..n]
                .split(['e', 'E'])
                .next()
                .is_some_and(|m| m.bytes().any(|b| (b'1'..=b'9').contains(&b)));
            // std::stof throws out_of_range where strtof overflows or underflows to zero
            if numeric && (x.is_infinite() || (x == 0.0 && nonzero)) {
                return Err(out_of_range());
            }
            Ok([x.to_le_bytes(), [0; 4]].concat())
        }
    }
}

/// The length of the number C's `strtoll` (`float`: `strtof`, its decimal forms) reads at the
/// start of `s` (whitespace skipped already): sign, digits, for floats a fraction, an exponent,
/// `inf`, `infinity` or `nan`. `None` when no number starts there.
fn c_number_len(s: &str, float: bool) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    if float {
        let rest = b[i..].to_ascii_lowercase();
        for word in ["infinity", "inf", "nan"] {
            if rest.starts_with(word.as_bytes()) {
                return Some(i + word.len());
            }
        }
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    let mut n = digits(&mut i);
    if float && b.get(i) == Some(&b'.') {
        i += 1;
        n += digits(&mut i);
    }
    if n == 0 {
        return None;
    }
    if float && matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1 + usize::from(matches!(b.get(i + 1), Some(b'+' | b'-')));
        if digits(&mut j) > 0 {
            i = j;
        }
    }
    Some(i)
}

/// `x` as C's `printf("%f")` writes it (six decimals; `inf`, `nan`).
fn c_fixed(x: f64) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.into();
    }
    format!("{x:.6}")
}

/// The label list of `node`: its int64 attribute `ints` or its string attribute `strings`,
/// exactly one of them, as a 1-D tensor.
fn labels(node: &Node, ints: &str, strings: &str) -> Result<Tensor, GraphError> {
    // an empty list counts as absent (onnxruntime reads both and wants exactly one non-empty)
    let get = |n: &str| {
        node.attributes
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v)
            .filter(|v| !matches!(v, AttrValue::Ints(l) if l.is_empty()))
            .filter(|v| !matches!(v, AttrValue::Texts(l) if l.is_empty()))
    };
    let t = match (get(ints), get(strings)) {
        (Some(AttrValue::Ints(v)), None) if !v.is_empty() => Tensor {
            desc: TensorDesc::new("", vec![v.len() as u64], Dtype::I64),
            data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        },
        (None, Some(AttrValue::Texts(v))) if !v.is_empty() => {
            let data = crate::text::encode(v);
            let desc = TensorDesc::new("", vec![v.len() as u64], Dtype::Str)
                .sized(data.len() as u64)
                .map_err(|e| GraphError::Input(e.to_string()))?;
            Tensor { desc, data }
        }
        (None, Some(AttrValue::Text(v))) => {
            let data = crate::text::encode(&[v]);
            let desc = TensorDesc::new("", vec![1], Dtype::Str)
                .sized(data.len() as u64)
                .map_err(|e| GraphError::Input(e.to_string()))?;
            Tensor { desc, data }
        }
        _ => {
            return Err(attr_error(
                node,
                &format!("{ints}/{strings}"),
                "exactly one of the two must be a non-empty list",
            ));
        }
    };
    Ok(t)
}

fn attr_error(node: &Node, name: &str, reason: &str) -> GraphError {
    GraphError::NodeAttribute {
        node: node.label(),
        attribute: name.into(),
        reason: reason.into(),
    }
}

/// The elements of 1-D `t`: each number's bytes, each string's text.
fn elements(t: &Tensor) -> Result<Vec<&[u8]>, String> {
    let n = t.desc.numel().unwrap_or(u64::MAX);
    if n > MAX_ENTRIES as u64 {
        return Err(format!("{n} map entries; at most {MAX_ENTRIES}"));
    }
    if t.desc.dtype == Dtype::Str {
        return crate::text::decode(&t.data, n as usize);
    }
    let e = t.desc.dtype.bytes_for(1).unwrap_or(0) as usize;
    if e == 0 || t.data.len() != e * n as usize {
        return Err(format!(
            "{} bytes for {n} {} elements",
            t.data.len(),
            t.desc.dtype
        ));
    }
    Ok(t.data.chunks_exact(e).collect())
}

/// Little-endian int64s.
fn int64s(data: &[u8]) -> Vec<i64> {
    data.chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect()
}

/// How two keys of dtype `dt` (int64 bytes or string text) order.
fn key_order(dt: Dtype, a: &[u8], b: &[u8]) -> Ordering {
    if dt == Dtype::I64 {
        let v = |x: &[u8]| i64::from_le_bytes(x.try_into().expect("8 bytes"));
        v(a).cmp(&v(b))
    } else {
        a.cmp(b)
    }
}

/// Key `i` of `t` for a message.
fn show(t: &Tensor, i: usize) -> String {
    match elements(t).ok().and_then(|e| e.get(i).copied()) {
        Some(k) if t.desc.dtype == Dtype::I64 => {
            i64::from_le_bytes(k.try_into().expect("8 bytes")).to_string()
        }
        Some(k) => format!("`{}`", String::from_utf8_lossy(k)),
        None => format!("#{i}"),
    }
}

/// The 1-D tensor of `t`'s elements (`items`) in `order`.
fn gather(t: &Tensor, items: &[&[u8]], order: &[usize]) -> Tensor {
    let picked: Vec<&[u8]> = order.iter().map(|&i| items[i]).collect();
    build(t.desc.dtype, vec![picked.len() as u64], &picked)
}

/// A tensor of `dt` of `shape` whose elements are `items` (numbers' bytes or strings' text).
fn build(dt: Dtype, shape: Vec<u64>, items: &[&[u8]]) -> Tensor {
    let data = if dt == Dtype::Str {
        crate::text::encode(items)
    } else {
        items.concat()
    };
    let mut desc = TensorDesc::new("", shape, dt);
    if dt == Dtype::Str {
        desc.text_bytes = (data.len() - 8 * items.len()) as u64;
    }
    Tensor { desc, data }
}

/// The `[1, n]` tensor of `items`, within the host's tensor bound.
fn tensor_of(node: &Node, dt: Dtype, items: &[&[u8]]) -> Result<Value, GraphError> {
    let bytes: usize = items.iter().map(|i| i.len() + 8).sum();
    if bytes as u64 > MAX_TENSOR_BYTES || items.len() > MAX_ENTRIES {
        return Err(GraphError::Limit(format!(
            "node {}: a result of {} elements ({bytes} bytes)",
            node.label(),
            items.len()
        )));
    }
    Ok(Value::tensor(build(dt, vec![1, items.len() as u64], items)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(op: &str, attrs: Vec<(&str, AttrValue)>) -> Node {
        Node {
            name: "n".into(),
            op: op.into(),
            domain: ML_DOMAIN.into(),
            inputs: vec!["x".into()],
            outputs: vec!["y".into()],
            attributes: attrs.into_iter().map(|(k, v)| (k.into(), v)).collect(),
            subgraphs: Vec::new(),
        }
    }

    fn f32s(shape: Vec<u64>, v: &[f32]) -> Tensor {
        Tensor {
            desc: TensorDesc::new("", shape, Dtype::F32),
            data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }

    fn i64s(v: &[i64]) -> Tensor {
        Tensor {
            desc: TensorDesc::new("", vec![v.len() as u64], Dtype::I64),
            data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }

    fn strs(v: &[&str]) -> Tensor {
        build(
            Dtype::Str,
            vec![v.len() as u64],
            &v.iter().map(|s| s.as_bytes()).collect::<Vec<_>>(),
        )
    }

    fn texts(t: &Tensor) -> Vec<String> {
        elements(t)
            .unwrap()
            .iter()
            .map(|b| String::from_utf8(b.to_vec()).unwrap())
            .collect()
    }

    fn floats(t: &Tensor) -> Vec<f32> {
        t.data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn zip_map_orders_each_row_by_label() {
        let n = node(
            "ZipMap",
            vec![(
                "classlabels_strings",
                AttrValue::Texts(vec!["b".into(), "a".into(), "c".into()]),
            )],
        );
        let x = f32s(vec![2, 3], &[0.1, 0.2, 0.7, 0.3, 0.3, 0.4]);
        let out = run(&n, &[Some(Value::tensor(x))]).unwrap();
        let Value::Maps(maps) = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!(maps.len(), 2);
        assert_eq!(texts(maps[0].keys()), ["a", "b", "c"]);
        assert_eq!(floats(maps[0].values()), [0.2, 0.1, 0.7]);
        assert_eq!(floats(maps[1].values()), [0.3, 0.3, 0.4]);
        // one keys tensor serves every map
        assert!(Arc::ptr_eq(&maps[0].keys, &maps[1].keys));
    }

    #[test]
    fn zip_map_refuses_what_onnxruntime_refuses() {
        let ints = |v: Vec<i64>| node("ZipMap", vec![("classlabels_int64s", AttrValue::Ints(v))]);
        let x = f32s(vec![1, 3], &[1.0, 2.0, 3.0]);
        let err = |n: &Node, x: Tensor| run(n, &[Some(Value::tensor(x))]).unwrap_err().to_string();
        assert!(err(&ints(vec![0, 1]), x.clone()).contains("3 scores per row for 2 class labels"));
        // a repeated label keeps its last column's score
        let dup = run(&ints(vec![0, 1, 0]), &[Some(Value::tensor(x.clone()))]).unwrap();
        let Value::Maps(m) = &dup[0] else { panic!() };
        assert_eq!(int64s(&m[0].keys().data), [0, 1]);
        assert_eq!(floats(m[0].values()), [3.0, 2.0]);
        let both = node(
            "ZipMap",
            vec![
                ("classlabels_int64s", AttrValue::Ints(vec![1, 2, 3])),
                ("classlabels_strings", AttrValue::Texts(vec!["a".into()])),
            ],
        );
        assert!(err(&both, x.clone()).contains("exactly one of the two"));
        let x3 = f32s(vec![1, 1, 3], &[1.0, 2.0, 3.0]);
        assert!(err(&ints(vec![0, 1, 2]), x3).contains("1-D or 2-D"));
        let one = run(
            &ints(vec![5, -1, 2]),
            &[Some(Value::tensor(f32s(vec![3], &[1.0, 2.0, 3.0])))],
        )
        .unwrap();
        let Value::Maps(m) = &one[0] else { panic!() };
        assert_eq!(m.len(), 1, "a 1-D input is one row");
        assert_eq!(int64s(&m[0].keys().data), [-1, 2, 5]);
        assert_eq!(floats(m[0].values()), [2.0, 3.0, 1.0]);
    }

    #[test]
    fn dict_vectorizer_picks_the_vocabulary() {
        let map = MapValue::new(strs(&["x", "z"]), f32s(vec![2], &[1.5, -2.0])).unwrap();
        let n = node(
            "DictVectorizer",
            vec![(
                "string_vocabulary",
                AttrValue::Texts(vec!["z".into(), "y".into(), "x".into(), "z".into()]),
            )],
        );
        let out = run(&n, &[Some(Value::Map(Arc::new(map)))]).unwrap();
        let Value::Tensor(t) = &out[0] else { panic!() };
        assert_eq!(t.desc.shape, [1, 4]);
        assert_eq!(floats(t), [-2.0, 0.0, 1.5, -2.0]);
        // int64 keys, string values: a missing key is ""
        let map = MapValue::new(i64s(&[3, 1]), strs(&["three", "one"])).unwrap();
        let n = node(
            "DictVectorizer",
            vec![("int64_vocabulary", AttrValue::Ints(vec![1, 2, 3]))],
        );
        let out = run(&n, &[Some(Value::Map(Arc::new(map.clone())))]).unwrap();
        let Value::Tensor(t) = &out[0] else { panic!() };
        assert_eq!(texts(t), ["one", "", "three"]);
        let wrong = node(
            "DictVectorizer",
            vec![("string_vocabulary", AttrValue::Texts(vec!["a".into()]))],
        );
        let e = run(&wrong, &[Some(Value::Map(Arc::new(map)))])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the vocabulary is string, the map's keys are i64"),
            "{e}"
        );
    }

    #[test]
    fn cast_map_dense_and_sparse() {
        let map = MapValue::new(i64s(&[4, 0, 2]), f32s(vec![3], &[4.5, 0.25, -2.75])).unwrap();
        let m = || Some(Value::Map(Arc::new(map.clone())));
        let attrs = |to: &str, form: &str, max: i64| {
            node(
                "CastMap",
                vec![
                    ("cast_to", AttrValue::Text(to.into())),
                    ("map_form", AttrValue::Text(form.into())),
                    ("max_map", AttrValue::Int(max)),
                ],
            )
        };
        let t = |v: &[Value]| match &v[0] {
            Value::Tensor(t) => t.clone(),
            other => panic!("{other:?}"),
        };
        let dense = t(&run(&attrs("TO_FLOAT", "DENSE", 1), &[m()]).unwrap());
        assert_eq!(dense.desc.shape, [1, 3]);
        assert_eq!(floats(&dense), [0.25, -2.75, 4.5]);
        let sparse = t(&run(&attrs("TO_INT64", "SPARSE", 4), &[m()]).unwrap());
        assert_eq!(int64s(&sparse.data), [0, 0, -2, 0]);
        let s = t(&run(&attrs("TO_STRING", "SPARSE", 3), &[m()]).unwrap());
        assert_eq!(texts(&s), ["0.250000", "0.f", "-2.750000"]);
        let e = run(&attrs("TO_FLOAT", "SPARSE", 0), &[m()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("max_map"), "{e}");
        let e = run(&attrs("TO_HEX", "DENSE", 1), &[m()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("TO_HEX"), "{e}");
        // strings parse as C's strtof/strtoll read them
        let sm = MapValue::new(i64s(&[1, 2]), strs(&[" 2.5e1xyz", "-7"])).unwrap();
        let out = t(&run(
            &attrs("TO_INT64", "DENSE", 1),
            &[Some(Value::Map(Arc::new(sm.clone())))],
        )
        .unwrap());
        assert_eq!(int64s(&out.data), [2, -7]);
        let out = t(&run(
            &attrs("TO_FLOAT", "DENSE", 1),
            &[Some(Value::Map(Arc::new(sm)))],
        )
        .unwrap());
        assert_eq!(floats(&out), [25.0, -7.0]);
        let bad = MapValue::new(i64s(&[1]), strs(&["abc"])).unwrap();
        let e = run(
            &attrs("TO_FLOAT", "DENSE", 1),
            &[Some(Value::Map(Arc::new(bad)))],
        )
        .unwrap_err();
        assert!(e.to_string().contains("`abc` is not a number"), "{e}");
    }

    #[test]
    fn strings_read_as_c_reads_them() {
        let f = |s: &str| cast_value(Dtype::Str, Dtype::F32, s.as_bytes());
        let i = |s: &str| cast_value(Dtype::Str, Dtype::I64, s.as_bytes());
        let as_f = |v: Vec<u8>| f32::from_le_bytes(v[..4].try_into().unwrap());
        let as_i = |v: Vec<u8>| i64::from_le_bytes(v[..8].try_into().unwrap());
        assert_eq!(as_f(f(" \t+3.5e+1xyz").unwrap()), 35.0);
        assert_eq!(as_f(f("-.5e").unwrap()), -0.5);
        assert_eq!(as_f(f(&format!("{}5", "0".repeat(70))).unwrap()), 5.0);
        assert_eq!(as_f(f("-Infinity").unwrap()), f32::NEG_INFINITY);
        assert!(f("1e40").unwrap_err().contains("out of range"));
        assert!(f("1e-50").unwrap_err().contains("out of range"));
        assert!(f(".e1").unwrap_err().contains("not a number"));
        assert_eq!(as_i(i("-42.9").unwrap()), -42);
        assert!(
            i("9223372036854775808")
                .unwrap_err()
                .contains("out of range")
        );
        assert_eq!(as_i(i("9223372036854775807").unwrap()), i64::MAX);
        assert!(
            i("\u{a0}7").unwrap_err().contains("not a number"),
            "C skips ASCII space only"
        );
        let g = |x: f32| as_i(cast_value(Dtype::F32, Dtype::I64, &x.to_le_bytes()).unwrap());
        assert_eq!((g(-2.9), g(f32::NAN), g(1e20)), (-2, i64::MIN, i64::MIN));
    }

    #[test]
    fn a_map_is_checked_when_made() {
        let e = MapValue::new(i64s(&[1, 1]), f32s(vec![2], &[0.0, 1.0])).unwrap_err();
        assert!(e.contains("map key 1 is given twice"), "{e}");
        let e = MapValue::new(f32s(vec![1], &[1.0]), f32s(vec![1], &[1.0])).unwrap_err();
        assert!(e.contains("keys must be int64 or string"), "{e}");
        let e = MapValue::new(i64s(&[1, 2]), f32s(vec![1], &[1.0])).unwrap_err();
        assert!(e.contains("two 1-D tensors of one length"), "{e}");
        let m = MapValue::new(strs(&["b", "a"]), i64s(&[2, 1])).unwrap();
        assert_eq!(texts(m.keys()), ["a", "b"]);
        assert_eq!(int64s(&m.values().data), [1, 2]);
    }

    #[test]
    fn c_fixed_is_printf_f() {
        assert_eq!(c_fixed(0.0078125), "0.007812");
        assert_eq!(c_fixed(1e20), "100000000000000000000.000000");
        assert_eq!(c_fixed(f64::NEG_INFINITY), "-inf");
        assert_eq!(c_fixed(f64::NAN), "nan");
    }
}
