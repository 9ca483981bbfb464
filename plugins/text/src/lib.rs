//! The `text` plugin: ONNX string-tensor operators.
//!
//! This crate holds the op semantics only, as plain Rust over owned tensors ([`ops::Tensor`],
//! [`ops::Value`]) with no dependency on the umd SDK or ABI; the plugin glue that moves string
//! tensors across the ABI lives beside it and calls [`ops::run`].
//!
//! Served ops ([`ops::OPS`]): StringNormalizer, StringConcat, StringSplit, RegexFullMatch,
//! Equal (string inputs only) and ai.onnx.ml LabelEncoder (whenever the input or the values are
//! strings).

pub mod ops;
