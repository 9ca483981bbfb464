//! String-tensor op semantics: the value types, the [`run`] entry point and the op table.
//!
//! Each op family lives in its own module; [`common`] holds the attribute and input readers,
//! the broadcasting and shape arithmetic (overflow-checked) and the output-size budget.
//!
//! - StringNormalizer: [`normalizer`];
//! - StringConcat and Equal on strings (NumPy broadcasting): [`binary`];
//! - StringSplit: [`split`];
//! - RegexFullMatch (RE2 syntax on the `regex` crate): [`regex_match`]; RE2's leftmost-longest
//!   search: [`longest`];
//! - com.microsoft Tokenizer: [`tokenizer`];
//! - ai.onnx.ml LabelEncoder (opsets 2 to 4): [`label_encoder`]; CategoryMapper:
//!   [`category_mapper`];
//! - Cast to and from STRING: [`cast`].

pub mod binary;
pub mod cast;
pub mod category_mapper;
pub mod common;
pub mod feature_extractor;
pub mod label_encoder;
pub mod longest;
pub mod normalizer;
pub mod regex_match;
pub mod split;
pub mod tokenizer;

use std::fmt;

/// A tensor value: row-major data and shape (empty shape = scalar).
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor<T> {
    pub shape: Vec<u64>,
    pub data: Vec<T>,
}

impl<T> Tensor<T> {
    /// A tensor from its shape and row-major data (lengths are checked by the ops, not here).
    pub fn new(shape: Vec<u64>, data: Vec<T>) -> Self {
        Tensor { shape, data }
    }
}

/// Attribute values as the host gives them (ONNX attribute types).
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    Int(i64),
    Float(f64),
    Text(String),
    Ints(Vec<i64>),
    Floats(Vec<f64>),
    Texts(Vec<String>),
    Tensor(Value),
}

/// A value of any dtype the text ops touch (`I16` because LabelEncoder-4 tensors may be int16).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(Tensor<String>),
    I64(Tensor<i64>),
    I32(Tensor<i32>),
    I16(Tensor<i16>),
    F32(Tensor<f32>),
    F64(Tensor<f64>),
    Bool(Tensor<bool>),
}

impl Value {
    /// The ONNX name of the element type, for messages.
    pub fn dtype_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::I64(_) => "int64",
            Value::I32(_) => "int32",
            Value::I16(_) => "int16",
            Value::F32(_) => "float",
            Value::F64(_) => "double",
            Value::Bool(_) => "bool",
        }
    }

    /// The shape, whatever the dtype.
    pub fn shape(&self) -> &[u64] {
        match self {
            Value::Str(t) => &t.shape,
            Value::I64(t) => &t.shape,
            Value::I32(t) => &t.shape,
            Value::I16(t) => &t.shape,
            Value::F32(t) => &t.shape,
            Value::F64(t) => &t.shape,
            Value::Bool(t) => &t.shape,
        }
    }

    /// The number of stored elements, whatever the dtype.
    pub fn len(&self) -> usize {
        match self {
            Value::Str(t) => t.data.len(),
            Value::I64(t) => t.data.len(),
            Value::I32(t) => t.data.len(),
            Value::I16(t) => t.data.len(),
            Value::F32(t) => t.data.len(),
            Value::F64(t) => t.data.len(),
            Value::Bool(t) => t.data.len(),
        }
    }

    /// Whether no element is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Errors: `Invalid(msg)` for bad attributes/shapes/inputs (the message names the attribute or
/// input and what is wrong), `Unsupported(msg)` for a valid request this plugin does not serve
/// (e.g. a dtype combination).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpError {
    Invalid(String),
    Unsupported(String),
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpError::Invalid(m) => write!(f, "invalid: {m}"),
            OpError::Unsupported(m) => write!(f, "unsupported: {m}"),
        }
    }
}

impl std::error::Error for OpError {}

/// A string value from literals (unit tests).
#[cfg(test)]
pub(crate) fn s(shape: &[u64], v: &[&str]) -> Value {
    Value::Str(Tensor::new(
        shape.to_vec(),
        v.iter().map(|x| x.to_string()).collect(),
    ))
}

/// The ops [`run`] serves: (ONNX name, domain: "" or "ai.onnx.ml").
pub const OPS: &[(&str, &str)] = &[
    ("StringNormalizer", ""),
    ("StringConcat", ""),
    ("StringSplit", ""),
    ("RegexFullMatch", ""),
    ("Equal", ""),
    ("LabelEncoder", "ai.onnx.ml"),
    ("Cast", ""),
    ("CategoryMapper", "ai.onnx.ml"),
    ("ArrayFeatureExtractor", "ai.onnx.ml"),
    ("Gather", ""),
    ("Tokenizer", "com.microsoft"),
];

/// For each op of [`OPS`], in the same order: (name, min inputs, max inputs, outputs).
pub const OP_IO: &[(&str, usize, usize, usize)] = &[
    ("StringNormalizer", 1, 1, 1),
    ("StringConcat", 2, 2, 1),
    ("StringSplit", 1, 1, 2),
    ("RegexFullMatch", 1, 1, 1),
    ("Equal", 2, 2, 1),
    ("LabelEncoder", 1, 1, 1),
    ("Cast", 1, 1, 1),
    ("CategoryMapper", 1, 1, 1),
    ("ArrayFeatureExtractor", 2, 2, 1),
    ("Gather", 2, 2, 1),
    ("Tokenizer", 1, 1, 1),
];

/// Entry point: run op `op` (ONNX name, exact case) with inputs (None = absent optional input)
/// and attributes (name → value). Returns one value per output (all outputs, in ONNX order).
pub fn run(
    op: &str,
    inputs: &[Option<Value>],
    attrs: &[(String, Attr)],
) -> Result<Vec<Value>, OpError> {
    let &(_, min, max, _) = OP_IO.iter().find(|(name, ..)| *name == op).ok_or_else(|| {
        OpError::Unsupported(format!("op {op:?} is not served by the text plugin"))
    })?;
    if inputs.len() < min || inputs.len() > max {
        return Err(OpError::Invalid(format!(
            "{op} takes {min} to {max} inputs, got {}",
            inputs.len()
        )));
    }
    let ins = common::required_inputs(op, inputs)?;
    match op {
        "StringNormalizer" => normalizer::string_normalizer(ins[0], attrs),
        "StringConcat" => binary::string_concat(ins[0], ins[1], attrs),
        "StringSplit" => split::string_split(ins[0], attrs),
        "RegexFullMatch" => regex_match::regex_full_match(ins[0], attrs),
        "Equal" => binary::equal(ins[0], ins[1], attrs),
        "LabelEncoder" => label_encoder::label_encoder(ins[0], attrs),
        "Cast" => cast::cast(ins[0], attrs),
        "CategoryMapper" => category_mapper::category_mapper(ins[0], attrs),
        "ArrayFeatureExtractor" => {
            feature_extractor::array_feature_extractor(ins[0], ins[1], attrs)
        }
        "Gather" => feature_extractor::gather(ins[0], ins[1], attrs),
        "Tokenizer" => tokenizer::tokenizer(ins[0], attrs),
        _ => Err(OpError::Unsupported(format!(
            "op {op:?} has no dispatch entry"
        ))),
    }
}
