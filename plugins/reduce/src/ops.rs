//! The op table: every ONNX op this plugin serves, its kernel name and the dtypes it serves.

use umd_sdk::Dtype;

/// A reduction over a set of axes (the `Reduce*` family), all served by one kernel family
/// parametrised by (init, map, combine, finalize).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Red {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    SumSquare,
    LogSum,
    LogSumExp,
}

/// Every reduce op: (ONNX name, op, kernel name).
pub const REDUCE_OPS: [(&str, Red, &str); 10] = [
    ("ReduceSum", Red::Sum, "sum"),
    ("ReduceMean", Red::Mean, "mean"),
    ("ReduceMax", Red::Max, "max"),
    ("ReduceMin", Red::Min, "min"),
    ("ReduceProd", Red::Prod, "prod"),
    ("ReduceL1", Red::L1, "l1"),
    ("ReduceL2", Red::L2, "l2"),
    ("ReduceSumSquare", Red::SumSquare, "sumsq"),
    ("ReduceLogSum", Red::LogSum, "logsum"),
    ("ReduceLogSumExp", Red::LogSumExp, "lse"),
];

/// The index reductions: (ONNX name, kernel name).
pub const ARG_OPS: [(&str, &str); 2] = [("ArgMax", "argmax"), ("ArgMin", "argmin")];

/// Floats: computed in f32 (f16, bf16, f32) or f64.
pub const FLOATS: [Dtype; 4] = [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F64];
/// Floats and the integers of 16 bits and more (arithmetic reductions, CumSum).
pub const NUMERIC: [Dtype; 10] = [
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I32,
    Dtype::I64,
    Dtype::I16,
    Dtype::U16,
    Dtype::U32,
    Dtype::U64,
];
/// Every ordered dtype (ArgMax, ArgMin, TopK).
pub const ORDERED: [Dtype; 12] = [
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I32,
    Dtype::I64,
    Dtype::I8,
    Dtype::U8,
    Dtype::I16,
    Dtype::U16,
    Dtype::U32,
    Dtype::U64,
];
/// ReduceMax and ReduceMin: every ordered dtype and bool.
pub const MAX_MIN: [Dtype; 13] = [
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I32,
    Dtype::I64,
    Dtype::I8,
    Dtype::U8,
    Dtype::I16,
    Dtype::U16,
    Dtype::U32,
    Dtype::U64,
    Dtype::Boolean,
];

impl Red {
    /// The dtypes this reduction serves.
    pub fn dtypes(self) -> &'static [Dtype] {
        match self {
            Red::Max | Red::Min => &MAX_MIN,
            Red::LogSum | Red::LogSumExp => &FLOATS,
            _ => &NUMERIC,
        }
    }

    /// The kernel name (`sum`, `lse`, …).
    pub fn kernel(self) -> &'static str {
        REDUCE_OPS
            .iter()
            .find(|(_, r, _)| *r == self)
            .map(|(_, _, k)| *k)
            .expect("every op is in the table")
    }

    /// The op of a kernel name.
    pub fn from_kernel(k: &str) -> Option<Red> {
        REDUCE_OPS
            .iter()
            .find(|(_, _, n)| *n == k)
            .map(|(_, r, _)| *r)
    }

    /// Whether the result is computed (sums, products, transcendental functions) rather than
    /// selected (Max, Min), i.e. may round differently on every device.
    pub fn arithmetic(self) -> bool {
        !matches!(self, Red::Max | Red::Min)
    }
}

/// Human-readable list of dtypes for error messages (`f32, f16, …`).
pub fn dtype_list(dts: &[Dtype]) -> String {
    dts.iter()
        .map(|d| umd_sdk::dtype::name(*d))
        .collect::<Vec<_>>()
        .join(", ")
}
