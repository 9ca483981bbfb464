//! ONNX loading: a `ModelProto` (types generated from `proto/onnx/onnx.proto` by prost) →
//! [`GraphDef`]. Owns the mapping of ONNX element types, tensors (raw, typed fields and external
//! data files next to the model), attributes and declared value types. Refuses what umd cannot
//! represent with an error naming the node, value or attribute.

use std::collections::HashMap;
use std::path::{Component, Path};
use std::sync::Arc;

use prost::Message;

use super::GraphError;
use super::def::{Constant, Dim, GraphDef, Node, Subgraph, ValueDecl, ValueKind};
use crate::tensor::{AttrValue, Dtype, MAX_RANK, TensorDesc};

/// The generated ONNX protobuf types.
#[allow(clippy::all, missing_docs)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
}

/// Largest model file accepted (protobuf itself stops at 2 GiB).
pub const MAX_MODEL_BYTES: usize = 2 << 30;
/// Largest single tensor (initializer, input, external data) a graph may hold: 1 GiB.
pub const MAX_TENSOR_BYTES: u64 = 1 << 30;

/// The umd dtype of an ONNX `TensorProto.DataType` number.
pub fn dtype_of(elem_type: i32) -> Option<Dtype> {
    Some(match elem_type {
        1 => Dtype::F32,
        2 => Dtype::U8,
        3 => Dtype::I8,
        6 => Dtype::I32,
        7 => Dtype::I64,
        9 => Dtype::Bool,
        10 => Dtype::F16,
        11 => Dtype::F64,
        16 => Dtype::Bf16,
        4 => Dtype::U16,
        5 => Dtype::I16,
        12 => Dtype::U32,
        13 => Dtype::U64,
        17 => Dtype::F8e4m3fn,
        18 => Dtype::F8e4m3fnuz,
        19 => Dtype::F8e5m2,
        20 => Dtype::F8e5m2fnuz,
        24 => Dtype::F8e8m0,
        21 => Dtype::U4,
        22 => Dtype::I4,
        23 => Dtype::F4e2m1,
        25 => Dtype::U2,
        26 => Dtype::I2,
        8 => Dtype::Str,
        _ => return None,
    })
}

/// The ONNX `TensorProto.DataType` number of a umd dtype.
pub fn elem_type_of(d: Dtype) -> i32 {
    (1..=26)
        .find(|&e| dtype_of(e) == Some(d))
        .expect("every umd dtype has an ONNX element type")
}

/// A tensor value as ONNX protobuf (raw data; strings as `string_data`), its size checked.
pub(crate) fn tensor_proto(desc: &TensorDesc, data: &[u8]) -> Result<proto::TensorProto, String> {
    let size = desc
        .byte_size()
        .ok_or_else(|| format!("tensor `{}` of {}: size overflows", desc.name, desc.dtype))?;
    if size != data.len() as u64 {
        return Err(format!(
            "tensor `{}` has {} bytes of data; its description takes {size}",
            desc.name,
            data.len()
        ));
    }
    let mut t = proto::TensorProto {
        name: Some(desc.name.clone()),
        dims: desc.shape.iter().map(|&d| d as i64).collect(),
        data_type: Some(elem_type_of(desc.dtype)),
        ..Default::default()
    };
    if desc.dtype == Dtype::Str {
        let n = desc.numel().ok_or("string count overflows")? as usize;
        t.string_data = crate::text::decode(data, n)?
            .into_iter()
            .map(<[u8]>::to_vec)
            .collect();
    } else {
        t.raw_data = Some(data.to_vec());
    }
    Ok(t)
}

fn type_name(elem_type: i32) -> String {
    proto::tensor_proto::DataType::try_from(elem_type)
        .map(|d| d.as_str_name().to_string())
        .unwrap_or_else(|_| elem_type.to_string())
}

/// Parses ONNX model bytes; `base_dir` is where external data files are looked up (`None`:
/// external data is refused).
pub fn parse(bytes: &[u8], base_dir: Option<&Path>) -> Result<GraphDef, GraphError> {
    parse_with(bytes, base_dir, &super::functions::NoExpansions)
}

/// [`parse`], nodes with graph attributes expanded by `expander` where it offers to.
pub fn parse_with(
    bytes: &[u8],
    base_dir: Option<&Path>,
    expander: &dyn super::functions::Expander,
) -> Result<GraphDef, GraphError> {
    if bytes.len() > MAX_MODEL_BYTES {
        return Err(GraphError::Limit(format!(
            "model of {} bytes; at most {MAX_MODEL_BYTES}",
            bytes.len()
        )));
    }
    let mut model = proto::ModelProto::decode(bytes)
        .map_err(|e| GraphError::Malformed(format!("not an ONNX ModelProto: {e}")))?;
    super::functions::inline(&mut model, expander)?;
    let graph = model
        .graph
        .ok_or_else(|| GraphError::Malformed("the model has no graph".into()))?;
    let mut opsets = HashMap::new();
    for o in &model.opset_import {
        let d = match o.domain() {
            "ai.onnx" => "",
            d => d,
        };
        opsets.insert(d.to_string(), o.version().clamp(0, u32::MAX as i64) as u32);
    }
    if model.opset_import.is_empty() {
        // IR version 2 models predate opset imports: opset 1.
        opsets.insert(String::new(), 1);
    }
    let mut def = graph_def(&graph, base_dir, &opsets, 0)?;
    let read: std::collections::HashSet<String> = def
        .nodes
        .iter()
        .flat_map(|n| n.reads().cloned())
        .chain(def.outputs.iter().map(|o| o.name.clone()))
        .collect();
    for n in &mut def.nodes {
        inference_dropout(n, &read);
    }
    Ok(def)
}

/// Most levels of subgraphs (a Loop body holding an If…) a model may nest.
pub const MAX_DEPTH: usize = 8;

/// A graph (the model's, or a subgraph at `depth`) with the model's opset imports.
fn graph_def(
    graph: &proto::GraphProto,
    base_dir: Option<&Path>,
    opsets: &HashMap<String, u32>,
    depth: usize,
) -> Result<GraphDef, GraphError> {
    if depth > MAX_DEPTH {
        return Err(GraphError::Limit(format!(
            "subgraphs nested more than {MAX_DEPTH} deep"
        )));
    }
    let mut constants = HashMap::new();
    for t in &graph.initializer {
        let c = tensor(t, base_dir)
            .map_err(|e| GraphError::Malformed(format!("initializer `{}`: {e}", t.name())))?;
        constants.insert(t.name().to_string(), c);
    }
    if !graph.sparse_initializer.is_empty() {
        return Err(GraphError::Malformed(
            "sparse initializers are not supported".into(),
        ));
    }
    let mut kinds = HashMap::new();
    let mut decls = |vs: Vec<&proto::ValueInfoProto>| -> Result<Vec<ValueDecl>, GraphError> {
        vs.into_iter()
            .map(|v| {
                let (d, kind) = value_decl_kind(v)?;
                if let Some(k) = kind {
                    kinds.insert(d.name.clone(), k);
                }
                Ok(d)
            })
            .collect()
    };
    let inputs = decls(
        graph
            .input
            .iter()
            .filter(|v| !constants.contains_key(v.name()))
            .collect(),
    )?;
    let outputs = decls(graph.output.iter().collect())?;
    let nodes = graph
        .node
        .iter()
        .map(|n| node(n, base_dir, opsets, depth))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(GraphDef {
        name: graph.name().to_string(),
        nodes,
        inputs,
        outputs,
        constants,
        opsets: opsets.clone(),
        kinds,
    })
}

/// A subgraph attribute (see [`Subgraph::new`]).
fn subgraph(
    g: &proto::GraphProto,
    base_dir: Option<&Path>,
    opsets: &HashMap<String, u32>,
    depth: usize,
) -> Result<Subgraph, GraphError> {
    Subgraph::new(graph_def(g, base_dir, opsets, depth + 1)?)
}

/// A declared value and, for a sequence or an optional, its kind (its element type's dtype in
/// the declaration; dims unknown).
fn value_decl_kind(
    v: &proto::ValueInfoProto,
) -> Result<(ValueDecl, Option<ValueKind>), GraphError> {
    use proto::type_proto::Value;
    let tensor_of = |t: Option<&proto::TypeProto>| match t.and_then(|t| t.value.as_ref()) {
        Some(Value::TensorType(t)) => Some(t.elem_type()),
        _ => None,
    };
    // map(K, tensor(V)): its kind (with K's dtype) and V's element type
    let map_of = |t: Option<&proto::TypeProto>, seq: bool| match t.and_then(|t| t.value.as_ref()) {
        Some(Value::MapType(m)) => {
            let key = dtype_of(m.key_type()).filter(|k| matches!(k, Dtype::I64 | Dtype::Str));
            let key = key.ok_or_else(|| {
                GraphError::Unsupported(format!(
                    "graph value `{}`: map keys of type {} (umd's maps have int64 or string keys)",
                    v.name(),
                    type_name(m.key_type())
                ))
            })?;
            let kind = if seq {
                ValueKind::MapSequence(key)
            } else {
                ValueKind::Map(key)
            };
            Ok::<_, GraphError>(Some((kind, tensor_of(m.value_type.as_deref()))))
        }
        _ => Ok(None),
    };
    let wrapped = match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(Value::MapType(_)) => map_of(v.r#type.as_ref(), false)?,
        Some(Value::SequenceType(s)) => match map_of(s.elem_type.as_deref(), true)? {
            Some(m) => Some(m),
            None => Some((ValueKind::Sequence, tensor_of(s.elem_type.as_deref()))),
        },
        Some(Value::OptionalType(o)) => match o.elem_type.as_deref().and_then(|t| t.value.as_ref())
        {
            Some(Value::TensorType(t)) => Some((ValueKind::OptionalTensor, Some(t.elem_type()))),
            Some(Value::SequenceType(s)) => Some((
                ValueKind::OptionalSequence,
                tensor_of(s.elem_type.as_deref()),
            )),
            _ => None,
        },
        _ => None,
    };
    if let Some((kind, elem)) = wrapped {
        let elem = elem.ok_or_else(|| {
            GraphError::Unsupported(format!(
                "graph value `{}`: only sequences and optionals of tensors, maps of scalars and \
                 sequences of maps are supported",
                v.name()
            ))
        })?;
        let dtype = match elem {
            0 => None,
            e => Some(dtype_of(e).ok_or_else(|| {
                GraphError::Unsupported(format!(
                    "graph value `{}` holds element type {}, which umd does not have",
                    v.name(),
                    type_name(e)
                ))
            })?),
        };
        let decl = ValueDecl {
            name: v.name().to_string(),
            dtype,
            dims: None,
        };
        return Ok((decl, Some(kind)));
    }
    value_decl_tensor(v).map(|d| (d, None))
}

fn value_decl_tensor(v: &proto::ValueInfoProto) -> Result<ValueDecl, GraphError> {
    use proto::type_proto::Value;
    let mut decl = ValueDecl {
        name: v.name().to_string(),
        dtype: None,
        dims: None,
    };
    let Some(t) = v.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return Ok(decl);
    };
    let Value::TensorType(t) = t else {
        return Err(GraphError::Unsupported(format!(
            "graph value `{}` is not a tensor (sequences, maps and optionals are not supported)",
            v.name()
        )));
    };
    if t.elem_type.is_some() && t.elem_type() != 0 {
        decl.dtype = Some(dtype_of(t.elem_type()).ok_or_else(|| {
            GraphError::Unsupported(format!(
                "graph value `{}` has element type {}, which umd does not have",
                v.name(),
                type_name(t.elem_type())
            ))
        })?);
    }
    if let Some(shape) = &t.shape {
        use proto::tensor_shape_proto::dimension::Value as D;
        if shape.dim.len() > MAX_RANK {
            return Err(GraphError::Limit(format!(
                "graph value `{}` has rank {}; at most {MAX_RANK}",
                v.name(),
                shape.dim.len()
            )));
        }
        let dims = shape
            .dim
            .iter()
            .map(|d| match &d.value {
                Some(D::DimValue(n)) if *n >= 0 => Ok(Dim::Fixed(*n as u64)),
                Some(D::DimValue(n)) => Err(GraphError::Malformed(format!(
                    "graph value `{}` has a negative dimension {n}",
                    v.name()
                ))),
                Some(D::DimParam(p)) => Ok(Dim::Dynamic(p.chars().take(64).collect())),
                None => Ok(Dim::Dynamic(String::new())),
            })
            .collect::<Result<Vec<_>, _>>()?;
        decl.dims = Some(dims);
    }
    Ok(decl)
}

fn node(
    n: &proto::NodeProto,
    base_dir: Option<&Path>,
    opsets: &HashMap<String, u32>,
    depth: usize,
) -> Result<Node, GraphError> {
    let mut out = Node {
        name: n.name().to_string(),
        op: n.op_type().to_string(),
        domain: match n.domain() {
            "ai.onnx" => String::new(),
            d => d.to_string(),
        },
        inputs: n.input.clone(),
        outputs: n.output.clone(),
        attributes: Vec::new(),
        subgraphs: Vec::new(),
    };
    if out.op.is_empty() {
        return Err(GraphError::Malformed(format!(
            "node {} has no op_type",
            out.label()
        )));
    }
    for a in &n.attribute {
        if a.r#type() == proto::attribute_proto::AttributeType::Graph
            || (a.r#type() == proto::attribute_proto::AttributeType::Undefined && a.g.is_some())
        {
            let g = a.g.as_ref().ok_or_else(|| GraphError::NodeAttribute {
                node: out.label(),
                attribute: a.name().to_string(),
                reason: "of type GRAPH holds no graph".into(),
            })?;
            let at = format!("node {}: subgraph `{}`: ", out.label(), a.name());
            let body = subgraph(g, base_dir, opsets, depth).map_err(|e| match e {
                GraphError::Unsupported(m) => GraphError::Unsupported(at + &m),
                GraphError::Limit(m) => GraphError::Limit(at + &m),
                e => GraphError::Malformed(at + &e.to_string()),
            })?;
            out.subgraphs.push((a.name().to_string(), body));
            continue;
        }
        // Optional's `type` (a TypeProto) only types an empty optional: the host's values
        // need no type.
        if out.op == "Optional"
            && out.domain.is_empty()
            && a.r#type() == proto::attribute_proto::AttributeType::TypeProto
        {
            continue;
        }
        let v = attribute(a, base_dir).map_err(|reason| GraphError::NodeAttribute {
            node: out.label(),
            attribute: a.name().to_string(),
            reason,
        })?;
        out.attributes.push((a.name().to_string(), v));
    }
    out.attributes.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// A `Dropout` run for inference (no `training_mode` input, a `mask` output that nothing in
/// `read` reads) is the identity, as onnxruntime runs it: rewritten to `Identity` (a zero-copy
/// view) here, since no plugin serves Dropout. One with `training_mode` or a read mask is left
/// to be refused.
fn inference_dropout(n: &mut Node, read: &std::collections::HashSet<String>) {
    let training = n.inputs.get(2).is_some_and(|i| !i.is_empty());
    let mask = n.outputs.get(1).is_some_and(|o| read.contains(o));
    if n.op == "Dropout" && n.domain.is_empty() && !training && !mask && !n.inputs.is_empty() {
        n.op = "Identity".into();
        n.inputs.truncate(1);
        n.outputs.truncate(1);
        n.attributes.clear();
    }
}

pub(crate) fn attribute(
    a: &proto::AttributeProto,
    base_dir: Option<&Path>,
) -> Result<AttrValue, String> {
    use proto::attribute_proto::AttributeType as T;
    if !a.ref_attr_name().is_empty() {
        return Err(format!(
            "refers to attribute `{}` of a function, outside any model-local function",
            a.ref_attr_name()
        ));
    }
    // Old models leave `type` unset: infer it from the field that is set.
    let ty = match a.r#type() {
        T::Undefined if a.f.is_some() => T::Float,
        T::Undefined if a.i.is_some() => T::Int,
        T::Undefined if a.s.is_some() => T::String,
        T::Undefined if a.t.is_some() => T::Tensor,
        T::Undefined if !a.ints.is_empty() => T::Ints,
        T::Undefined if !a.floats.is_empty() => T::Floats,
        T::Undefined if !a.strings.is_empty() => T::Strings,
        t => t,
    };
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Ok(match ty {
        T::Float => AttrValue::Float(a.f() as f64),
        T::Int => AttrValue::Int(a.i()),
        T::String => AttrValue::Text(text(a.s())),
        T::Floats => AttrValue::Floats(a.floats.iter().map(|&f| f as f64).collect()),
        T::Ints => AttrValue::Ints(a.ints.clone()),
        T::Strings => AttrValue::Texts(a.strings.iter().map(|s| text(s)).collect()),
        T::Tensor => {
            let t = a.t.as_ref().ok_or("a TENSOR attribute without a tensor")?;
            let c = tensor(t, base_dir)?;
            let mut desc = c.desc;
            desc.name = a.name().chars().take(64).collect();
            AttrValue::Tensor(desc, Arc::unwrap_or_clone(c.data))
        }
        other => {
            return Err(format!(
                "of type {} is not supported (subgraphs, sparse tensors and type protos are not)",
                other.as_str_name()
            ));
        }
    })
}

/// A `TensorProto` as a constant: raw data, typed fields or an external file.
pub fn tensor(t: &proto::TensorProto, base_dir: Option<&Path>) -> Result<Constant, String> {
    let dtype = dtype_of(t.data_type()).ok_or_else(|| {
        format!(
            "element type {} is not one umd has",
            type_name(t.data_type())
        )
    })?;
    if t.dims.len() > MAX_RANK {
        return Err(format!("rank {}; at most {MAX_RANK}", t.dims.len()));
    }
    let shape = t
        .dims
        .iter()
        .map(|&d| u64::try_from(d).map_err(|_| format!("negative dimension {d}")))
        .collect::<Result<Vec<_>, _>>()?;
    let desc = TensorDesc::new(t.name().chars().take(64).collect::<String>(), shape, dtype);
    if dtype.is_string() {
        return strings(t, desc);
    }
    let bytes = desc
        .byte_size()
        .filter(|&b| b <= MAX_TENSOR_BYTES)
        .ok_or_else(|| {
            format!(
                "shape {:?} of {dtype} is larger than {MAX_TENSOR_BYTES} bytes",
                desc.shape
            )
        })?;
    let n = desc.numel().unwrap_or(0) as usize;
    let data = if t.data_location() == proto::tensor_proto::DataLocation::External {
        external(t, base_dir, bytes)?
    } else if let Some(raw) = &t.raw_data {
        raw.clone()
    } else {
        typed(t, dtype, n)?
    };
    if data.len() as u64 != bytes {
        return Err(format!(
            "holds {} bytes of data; {dtype}{:?} needs {bytes}",
            data.len(),
            desc.shape
        ));
    }
    Ok(Constant {
        desc,
        data: Arc::new(data),
    })
}

/// A STRING tensor (`string_data`, never raw or external) in umd's string layout.
fn strings(t: &proto::TensorProto, desc: TensorDesc) -> Result<Constant, String> {
    let n = desc.numel().unwrap_or(u64::MAX);
    if t.string_data.len() as u64 != n {
        return Err(format!(
            "string_data has {} elements; the shape needs {n}",
            t.string_data.len()
        ));
    }
    let data = crate::text::encode(&t.string_data);
    if data.len() as u64 > MAX_TENSOR_BYTES {
        return Err(format!(
            "{} bytes of strings; at most {MAX_TENSOR_BYTES}",
            data.len()
        ));
    }
    let desc = desc.with_size(data.len() as u64).ok_or("size overflows")?;
    Ok(Constant {
        desc,
        data: Arc::new(data),
    })
}

/// The typed-field encoding (`float_data`, `int32_data`, …) as little-endian bytes.
fn typed(t: &proto::TensorProto, dtype: Dtype, n: usize) -> Result<Vec<u8>, String> {
    let want = |len: usize, field: &str| {
        if len == n {
            Ok(())
        } else {
            Err(format!("{field} has {len} elements; the shape needs {n}"))
        }
    };
    Ok(match dtype {
        // The packed types travel as their packed bytes, one per int32_data entry.
        Dtype::I4 | Dtype::U4 | Dtype::I2 | Dtype::U2 | Dtype::F4e2m1 => {
            let bytes = dtype.bytes_for(n as u64).unwrap_or(0) as usize;
            if t.int32_data.len() != bytes {
                return Err(format!(
                    "int32_data has {} entries; the shape needs {bytes} packed bytes",
                    t.int32_data.len()
                ));
            }
            t.int32_data.iter().map(|&v| v as u8).collect()
        }
        Dtype::F32 => {
            want(t.float_data.len(), "float_data")?;
            t.float_data.iter().flat_map(|v| v.to_le_bytes()).collect()
        }
        Dtype::F64 => {
            want(t.double_data.len(), "double_data")?;
            t.double_data.iter().flat_map(|v| v.to_le_bytes()).collect()
        }
        Dtype::I64 => {
            want(t.int64_data.len(), "int64_data")?;
            t.int64_data.iter().flat_map(|v| v.to_le_bytes()).collect()
        }
        Dtype::I32 => {
            want(t.int32_data.len(), "int32_data")?;
            t.int32_data.iter().flat_map(|v| v.to_le_bytes()).collect()
        }
        // 16-bit floats travel as their bit patterns in int32_data.
        Dtype::F16 | Dtype::Bf16 => {
            want(t.int32_data.len(), "int32_data")?;
            t.int32_data
                .iter()
                .flat_map(|&v| (v as u16).to_le_bytes())
                .collect()
        }
        Dtype::I16 | Dtype::U16 => {
            want(t.int32_data.len(), "int32_data")?;
            t.int32_data
                .iter()
                .flat_map(|&v| (v as u16).to_le_bytes())
                .collect()
        }
        Dtype::U32 | Dtype::U64 => {
            want(t.uint64_data.len(), "uint64_data")?;
            let size = dtype.size();
            t.uint64_data
                .iter()
                .flat_map(|&v| v.to_le_bytes()[..size].to_vec())
                .collect()
        }
        // bool, 8-bit integers and the 8-bit floats (as their codes) travel in int32_data.
        Dtype::I8
        | Dtype::U8
        | Dtype::Bool
        | Dtype::F8e4m3fn
        | Dtype::F8e4m3fnuz
        | Dtype::F8e5m2
        | Dtype::F8e5m2fnuz
        | Dtype::F8e8m0 => {
            want(t.int32_data.len(), "int32_data")?;
            t.int32_data.iter().map(|&v| v as u8).collect()
        }
        Dtype::Str => unreachable!("strings are read by `strings`"),
    })
}

/// Reads external data: `location` relative to the model's folder (never outside it),
/// `offset` and `length`, exactly the tensor's size.
fn external(
    t: &proto::TensorProto,
    base_dir: Option<&Path>,
    bytes: u64,
) -> Result<Vec<u8>, String> {
    let base = base_dir.ok_or("external data, but the model was not loaded from a file")?;
    let mut location = None;
    let mut offset = 0u64;
    let mut length = None;
    for kv in &t.external_data {
        let parse = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("bad external {} `{v}`", kv.key()))
        };
        match kv.key() {
            "location" => location = Some(kv.value().to_string()),
            "offset" => offset = parse(kv.value())?,
            "length" => length = Some(parse(kv.value())?),
            _ => {}
        }
    }
    let location = location.ok_or("external data without a location")?;
    let rel = Path::new(&location);
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(format!(
            "external data location `{location}` must be a plain path inside the model's folder"
        ));
    }
    if length.is_some_and(|l| l != bytes) {
        return Err(format!(
            "external data length {} does not match the {bytes} bytes of its shape",
            length.unwrap_or(0)
        ));
    }
    // Symbolic links are followed (a Hugging Face snapshot links its data into `../../blobs`):
    // the CLI reads with its user's own rights, and the gRPC service takes no external data.
    let path = base.join(rel);
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let size = f.metadata().map_err(|e| e.to_string())?.len();
    if offset.checked_add(bytes).is_none_or(|end| end > size) {
        return Err(format!(
            "{}: {bytes} bytes at offset {offset} lie outside its {size} bytes",
            path.display()
        ));
    }
    f.seek(SeekFrom::Start(offset)).map_err(|e| e.to_string())?;
    let mut data = vec![0u8; bytes as usize];
    f.read_exact(&mut data)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(data)
}
