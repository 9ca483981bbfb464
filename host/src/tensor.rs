//! Host-side tensor descriptions, dtypes and attribute values: what requests are made of.
//!
//! Owns parsing of the many spellings clients use (`float32`, `f32`, `torch.float32`, …) and the
//! request-level limits (rank, element count). Knows nothing of plugins or devices.

use std::fmt;
use std::str::FromStr;

use crate::error::RequestError;

/// Highest rank a request may use.
pub const MAX_RANK: usize = 8;
/// Largest element count of one tensor a request may describe (2^40).
pub const MAX_ELEMENTS: u64 = 1 << 40;

/// Element type. The discriminant is the command-buffer code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Dtype {
    F32 = 1,
    F16 = 2,
    Bf16 = 3,
    F64 = 4,
    I32 = 5,
    I64 = 6,
    I8 = 7,
    U8 = 8,
    Bool = 9,
    /// (ABI 1.2) 16-bit and unsigned integers, and the ONNX 8-bit floats.
    I16 = 10,
    U16 = 11,
    U32 = 12,
    U64 = 13,
    F8e4m3fn = 14,
    F8e4m3fnuz = 15,
    F8e5m2 = 16,
    F8e5m2fnuz = 17,
    F8e8m0 = 18,
    /// (ABI 1.4) The packed sub-byte types of ONNX: INT4, UINT4 (two per byte), INT2, UINT2
    /// (four per byte), FLOAT4E2M1 (two per byte); element `i` in byte `i * bits / 8`, the first
    /// element of a byte in its lowest bits.
    I4 = 19,
    U4 = 20,
    I2 = 21,
    U2 = 22,
    F4e2m1 = 23,
    /// (ABI 1.5) ONNX STRING. A string tensor of `n` elements is `n` little-endian u64 *end*
    /// offsets then the UTF-8 text (element `i` is `text[end(i-1) .. end(i)]`): its size is
    /// `8 x n + text_bytes`, so every [`TensorDesc`] of one carries its `text_bytes`.
    Str = 24,
}

impl Dtype {
    pub const ALL: [Dtype; 24] = [
        Dtype::F32,
        Dtype::F16,
        Dtype::Bf16,
        Dtype::F64,
        Dtype::I32,
        Dtype::I64,
        Dtype::I8,
        Dtype::U8,
        Dtype::Bool,
        Dtype::I16,
        Dtype::U16,
        Dtype::U32,
        Dtype::U64,
        Dtype::F8e4m3fn,
        Dtype::F8e4m3fnuz,
        Dtype::F8e5m2,
        Dtype::F8e5m2fnuz,
        Dtype::F8e8m0,
        Dtype::I4,
        Dtype::U4,
        Dtype::I2,
        Dtype::U2,
        Dtype::F4e2m1,
        Dtype::Str,
    ];

    /// Bits per element: 8 x [`Dtype::size`], except 4 for `I4`/`U4`/`F4e2m1`, 2 for `I2`/`U2`.
    pub fn bits(self) -> u32 {
        match self {
            Dtype::I4 | Dtype::U4 | Dtype::F4e2m1 => 4,
            Dtype::I2 | Dtype::U2 => 2,
            other => 8 * other.size() as u32,
        }
    }

    /// Whether several elements share a byte (ABI 1.4's packed types).
    pub fn is_packed(self) -> bool {
        self.bits() < 8
    }

    /// Bytes of `n` elements (packed types round up to whole bytes); `None` on overflow.
    pub fn bytes_for(self, n: u64) -> Option<u64> {
        Some(n.checked_mul(self.bits() as u64)?.div_ceil(8))
    }

    /// Bytes per element; 1 for the packed types (their storage unit: size tensors with
    /// [`Dtype::bytes_for`]); 8 for strings (the offset of each element: the text comes on top,
    /// see [`TensorDesc::byte_size`]).
    pub fn size(self) -> usize {
        match self {
            Dtype::Str => 8,
            Dtype::I4 | Dtype::U4 | Dtype::I2 | Dtype::U2 | Dtype::F4e2m1 => 1,
            Dtype::F64 | Dtype::I64 | Dtype::U64 => 8,
            Dtype::F32 | Dtype::I32 | Dtype::U32 => 4,
            Dtype::F16 | Dtype::Bf16 | Dtype::I16 | Dtype::U16 => 2,
            Dtype::I8
            | Dtype::U8
            | Dtype::Bool
            | Dtype::F8e4m3fn
            | Dtype::F8e4m3fnuz
            | Dtype::F8e5m2
            | Dtype::F8e5m2fnuz
            | Dtype::F8e8m0 => 1,
        }
    }

    /// Canonical short name (`f32`, `bf16`, `bool`, …).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::F64 => "f64",
            Dtype::I32 => "i32",
            Dtype::I64 => "i64",
            Dtype::I8 => "i8",
            Dtype::U8 => "u8",
            Dtype::Bool => "bool",
            Dtype::I16 => "i16",
            Dtype::U16 => "u16",
            Dtype::U32 => "u32",
            Dtype::U64 => "u64",
            Dtype::F8e4m3fn => "f8e4m3fn",
            Dtype::F8e4m3fnuz => "f8e4m3fnuz",
            Dtype::F8e5m2 => "f8e5m2",
            Dtype::F8e5m2fnuz => "f8e5m2fnuz",
            Dtype::F8e8m0 => "f8e8m0",
            Dtype::I4 => "i4",
            Dtype::U4 => "u4",
            Dtype::I2 => "i2",
            Dtype::U2 => "u2",
            Dtype::F4e2m1 => "f4e2m1",
            Dtype::Str => "string",
        }
    }

    /// Whether a 1.0/1.1 plugin can be told about this dtype.
    pub fn in_abi_1_1(self) -> bool {
        (self as u8) <= Dtype::Bool as u8
    }

    /// Whether a 1.2/1.3 plugin (`dtype-ext`) can be told about this dtype.
    pub fn in_abi_1_2(self) -> bool {
        (self as u8) <= Dtype::F8e8m0 as u8
    }

    /// Whether a 1.4 plugin (`dtype2`) can be told about this dtype (all but strings).
    pub fn in_abi_1_4(self) -> bool {
        (self as u8) <= Dtype::F4e2m1 as u8
    }

    /// Whether elements are variable-length strings (ABI 1.5).
    pub fn is_string(self) -> bool {
        self == Dtype::Str
    }

    /// The dtype of a command-buffer code.
    pub fn from_code(code: u8) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|d| *d as u8 == code)
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            Dtype::F32
                | Dtype::F16
                | Dtype::Bf16
                | Dtype::F64
                | Dtype::F8e4m3fn
                | Dtype::F8e4m3fnuz
                | Dtype::F8e5m2
                | Dtype::F8e5m2fnuz
                | Dtype::F8e8m0
                | Dtype::F4e2m1
        )
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Dtype {
    type Err = RequestError;

    /// Accepts numpy, torch, ONNX and short spellings, case-insensitively:
    /// `float32`, `f32`, `torch.float32`, `float`, `FLOAT`, `half`, `bfloat16`, `int32`, …
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        let bare = lower
            .strip_prefix("torch.")
            .or_else(|| lower.strip_prefix("np."))
            .or_else(|| lower.strip_prefix("numpy."))
            .or_else(|| lower.strip_prefix("tensorproto."))
            .unwrap_or(&lower);
        Ok(match bare {
            "f32" | "float32" | "float" | "fp32" => Dtype::F32,
            "f16" | "float16" | "half" | "fp16" => Dtype::F16,
            "bf16" | "bfloat16" => Dtype::Bf16,
            "f64" | "float64" | "double" | "fp64" => Dtype::F64,
            "i32" | "int32" | "int" => Dtype::I32,
            "i64" | "int64" | "long" => Dtype::I64,
            "i8" | "int8" => Dtype::I8,
            "u8" | "uint8" => Dtype::U8,
            "bool" | "boolean" => Dtype::Bool,
            "i16" | "int16" | "short" => Dtype::I16,
            "u16" | "uint16" => Dtype::U16,
            "u32" | "uint32" => Dtype::U32,
            "u64" | "uint64" => Dtype::U64,
            "f8e4m3fn" | "float8e4m3fn" | "float8_e4m3fn" => Dtype::F8e4m3fn,
            "f8e4m3fnuz" | "float8e4m3fnuz" | "float8_e4m3fnuz" => Dtype::F8e4m3fnuz,
            "f8e5m2" | "float8e5m2" | "float8_e5m2" => Dtype::F8e5m2,
            "f8e5m2fnuz" | "float8e5m2fnuz" | "float8_e5m2fnuz" => Dtype::F8e5m2fnuz,
            "f8e8m0" | "float8e8m0" | "float8_e8m0fnu" => Dtype::F8e8m0,
            "i4" | "int4" => Dtype::I4,
            "u4" | "uint4" => Dtype::U4,
            "i2" | "int2" => Dtype::I2,
            "u2" | "uint2" => Dtype::U2,
            "f4e2m1" | "float4e2m1" | "float4_e2m1fn" => Dtype::F4e2m1,
            "string" | "str" => Dtype::Str,
            // Echo a bounded prefix: the spelling is the client's and may be huge.
            _ => return Err(RequestError::UnknownDtype(s.chars().take(64).collect())),
        })
    }
}

/// A tensor description: name, row-major shape, dtype.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TensorDesc {
    pub name: String,
    pub shape: Vec<u64>,
    pub dtype: Dtype,
    /// (ABI 1.5) For a string tensor, the bytes of its text after the offsets; 0 for every other
    /// dtype (checked by [`TensorDesc::validate`]).
    pub text_bytes: u64,
}

/// Elements of `shape`: 0 when a dim is 0, else the product, saturating (for shapes of values
/// that exist, which cannot overflow it, and of zero-size ones, whose other dims may be huge).
pub fn elements(shape: &[u64]) -> u64 {
    if shape.contains(&0) {
        return 0;
    }
    shape.iter().fold(1u64, |a, &d| a.saturating_mul(d))
}

impl TensorDesc {
    pub fn new(name: impl Into<String>, shape: impl Into<Vec<u64>>, dtype: Dtype) -> Self {
        TensorDesc {
            name: name.into(),
            shape: shape.into(),
            dtype,
            text_bytes: 0,
        }
    }

    /// Element count, refusing overflow (a shape with a 0 has none, whatever its other dims).
    pub fn numel(&self) -> Option<u64> {
        if self.shape.contains(&0) {
            return Some(0);
        }
        self.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
    }

    /// Size in bytes (packed types round up to whole bytes; strings: offsets and text),
    /// refusing overflow.
    pub fn byte_size(&self) -> Option<u64> {
        self.dtype
            .bytes_for(self.numel()?)?
            .checked_add(self.text_bytes)
    }

    /// This description with the `text_bytes` a string tensor of `bytes` bytes has (`None`: too
    /// small for its offsets). Other dtypes are returned unchanged.
    pub fn with_size(mut self, bytes: u64) -> Option<TensorDesc> {
        if self.dtype.is_string() {
            self.text_bytes = bytes.checked_sub(self.dtype.bytes_for(self.numel()?)?)?;
        }
        Some(self)
    }

    /// [`TensorDesc::with_size`], refusing a string tensor too small for its offsets with a
    /// message naming it.
    pub fn sized(self, bytes: u64) -> Result<TensorDesc, RequestError> {
        let shown = format!("`{}` {self}", self.name);
        self.with_size(bytes).ok_or_else(|| {
            RequestError::Shape(format!(
                "string tensor {shown} needs 8 bytes per element for its offsets; it has {bytes}"
            ))
        })
    }

    /// Checks rank and element count against the request limits.
    pub fn validate(&self) -> Result<(), RequestError> {
        let max = crate::cmdbuf::limits::MAX_STRING;
        if self.name.len() > max {
            return Err(RequestError::Shape(format!(
                "tensor name `{:.32}…` has {} bytes, the maximum is {max}",
                self.name,
                self.name.len()
            )));
        }
        if self.shape.len() > MAX_RANK {
            return Err(RequestError::Shape(format!(
                "tensor `{}` has rank {}, the maximum is {MAX_RANK}",
                self.name,
                self.shape.len()
            )));
        }
        if self.text_bytes != 0 && !self.dtype.is_string() {
            return Err(RequestError::Shape(format!(
                "tensor `{}` is {}, but says it has {} bytes of text (only string tensors do)",
                self.name, self.dtype, self.text_bytes
            )));
        }
        if self.numel().is_some_and(|n| n <= MAX_ELEMENTS) && self.byte_size().is_none() {
            return Err(RequestError::Shape(format!(
                "string tensor `{}` says it has {} bytes of text: its size overflows",
                self.name, self.text_bytes
            )));
        }
        match self.numel() {
            Some(n) if n <= MAX_ELEMENTS => Ok(()),
            _ => Err(RequestError::Shape(format!(
                "tensor `{}` of shape {:?} has more than {MAX_ELEMENTS} elements",
                self.name, self.shape
            ))),
        }
    }
}

impl fmt::Display for TensorDesc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{:?}", self.dtype, self.shape)
    }
}

/// Parses `f32[64,128]`, `name:f32[64,128]` or `f32[]` (a scalar).
impl FromStr for TensorDesc {
    type Err = RequestError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || RequestError::Shape(format!("`{s}` is not a tensor like f32[64,128]"));
        let (name, rest) = match s.split_once(':') {
            Some((n, r)) => (n.to_string(), r),
            None => (String::new(), s),
        };
        let (dt, dims) = rest.split_once('[').ok_or_else(bad)?;
        let dims = dims.strip_suffix(']').ok_or_else(bad)?;
        let shape = dims
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(|d| d.parse::<u64>().map_err(|_| bad()))
            .collect::<Result<Vec<_>, _>>()?;
        let desc = TensorDesc::new(name, shape, dt.parse()?);
        desc.validate()?;
        Ok(desc)
    }
}

/// A typed attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Int(i64),
    Float(f64),
    Text(String),
    Ints(Vec<i64>),
    Floats(Vec<f64>),
    Bool(bool),
    /// (ABI 1.2) A list of strings (ONNX `STRINGS`).
    Texts(Vec<String>),
    /// (ABI 1.2) A tensor value (ONNX `TENSOR`), e.g. ConstantOfShape's `value`.
    Tensor(TensorDesc, Vec<u8>),
}

impl AttrValue {
    /// Parses the string form clients send (`3`, `0.5`, `true`, `[1,2]`, `[0.5,1]`, anything else
    /// is text).
    pub fn parse(s: &str) -> AttrValue {
        let t = s.trim();
        if let Ok(v) = t.parse::<i64>() {
            return AttrValue::Int(v);
        }
        if let Ok(v) = t.parse::<f64>() {
            return AttrValue::Float(v);
        }
        match t {
            "true" | "True" => return AttrValue::Bool(true),
            "false" | "False" => return AttrValue::Bool(false),
            _ => {}
        }
        if let Some(inner) = t.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            let items: Vec<&str> = inner
                .split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .collect();
            if let Ok(v) = items
                .iter()
                .map(|x| x.parse::<i64>())
                .collect::<Result<Vec<_>, _>>()
            {
                return AttrValue::Ints(v);
            }
            if let Ok(v) = items
                .iter()
                .map(|x| x.parse::<f64>())
                .collect::<Result<Vec<_>, _>>()
            {
                return AttrValue::Floats(v);
            }
        }
        AttrValue::Text(s.to_string())
    }

    /// Hashes the value (floats by bits) for the translation cache.
    pub(crate) fn hash_into(&self, h: &mut impl std::hash::Hasher) {
        use std::hash::Hash;
        std::mem::discriminant(self).hash(h);
        match self {
            AttrValue::Int(v) => v.hash(h),
            AttrValue::Float(v) => v.to_bits().hash(h),
            AttrValue::Text(v) => v.hash(h),
            AttrValue::Ints(v) => v.hash(h),
            AttrValue::Floats(v) => v.iter().for_each(|x| x.to_bits().hash(h)),
            AttrValue::Bool(v) => v.hash(h),
            AttrValue::Texts(v) => v.hash(h),
            AttrValue::Tensor(d, v) => {
                d.hash(h);
                v.hash(h)
            }
        }
    }

    /// Bytes this value holds (for request size limits).
    pub fn byte_len(&self) -> usize {
        match self {
            AttrValue::Int(_) | AttrValue::Float(_) | AttrValue::Bool(_) => 8,
            AttrValue::Text(v) => v.len(),
            AttrValue::Ints(v) => v.len() * 8,
            AttrValue::Floats(v) => v.len() * 8,
            AttrValue::Texts(v) => v.iter().map(|s| s.len() + 8).sum(),
            AttrValue::Tensor(d, v) => d.name.len() + d.shape.len() * 8 + v.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_spellings() {
        for s in [
            "float32",
            "f32",
            "torch.float32",
            "FLOAT",
            "np.float32",
            "TensorProto.FLOAT",
        ] {
            assert_eq!(s.parse::<Dtype>().unwrap(), Dtype::F32, "{s}");
        }
        assert_eq!("torch.bfloat16".parse::<Dtype>().unwrap(), Dtype::Bf16);
        assert_eq!("half".parse::<Dtype>().unwrap(), Dtype::F16);
        let e = "float33".parse::<Dtype>().unwrap_err();
        assert!(e.to_string().contains("float33"));
        for d in Dtype::ALL {
            assert_eq!(Dtype::from_code(d as u8), Some(d));
            assert_eq!(d.name().parse::<Dtype>().unwrap(), d);
        }
    }

    #[test]
    fn tensor_parsing_and_limits() {
        let t: TensorDesc = "x:f16[2, 3]".parse().unwrap();
        assert_eq!(
            (t.name.as_str(), t.shape.clone(), t.dtype),
            ("x", vec![2, 3], Dtype::F16)
        );
        assert_eq!(
            "f32[]".parse::<TensorDesc>().unwrap().shape,
            Vec::<u64>::new()
        );
        assert!("f32[2,-1]".parse::<TensorDesc>().is_err());
        assert!(
            "f32[1099511627777]".parse::<TensorDesc>().is_err(),
            "over MAX_ELEMENTS"
        );
        assert!(
            "f32[1,1,1,1,1,1,1,1,1]".parse::<TensorDesc>().is_err(),
            "rank 9"
        );
        assert!("f32(2)".parse::<TensorDesc>().is_err());
    }

    #[test]
    fn attribute_strings_become_typed() {
        assert_eq!(AttrValue::parse("3"), AttrValue::Int(3));
        assert_eq!(AttrValue::parse("0.5"), AttrValue::Float(0.5));
        assert_eq!(AttrValue::parse("true"), AttrValue::Bool(true));
        assert_eq!(AttrValue::parse("[1, 2]"), AttrValue::Ints(vec![1, 2]));
        assert_eq!(
            AttrValue::parse("[1, 2.5]"),
            AttrValue::Floats(vec![1.0, 2.5])
        );
        assert_eq!(AttrValue::parse("NCHW"), AttrValue::Text("NCHW".into()));
    }
}
