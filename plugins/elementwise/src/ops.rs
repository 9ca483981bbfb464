//! The tables that drive planning, the CPU kernels and the CUDA templates: the kernels (what a
//! launch computes, per dtype), the ONNX ops (which kernels they plan, on which dtypes, with
//! which attributes), and the names of entry points and modules.

use crate::bcast::Mode;
use umd_sdk::{Dtype, dtype};

/// Float dtypes (f16/bf16 compute in f32).
pub const FLOATS: &[Dtype] = &[Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F64];
/// The arithmetic dtypes every arithmetic op serves.
pub const ARITH: &[Dtype] = &[
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I32,
    Dtype::I64,
];
/// Every numeric dtype (arithmetic plus the 8/16-bit and unsigned integers).
pub const NUMERIC: &[Dtype] = &[
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
/// Every numeric dtype and bool (Equal).
pub const NUMERIC_BOOL: &[Dtype] = &[
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I32,
    Dtype::I64,
    Dtype::I8,
    Dtype::U8,
    Dtype::Boolean,
    Dtype::I16,
    Dtype::U16,
    Dtype::U32,
    Dtype::U64,
];
/// Every dtype, the 8-bit floats included (Where moves bytes).
pub const ALL: &[Dtype] = &dtype::ALL;
/// Integer dtypes (bitwise ops and shifts).
pub const INTS: &[Dtype] = &[
    Dtype::I32,
    Dtype::I64,
    Dtype::I8,
    Dtype::U8,
    Dtype::I16,
    Dtype::U16,
    Dtype::U32,
    Dtype::U64,
];
/// Boolean only (logic ops).
pub const BOOL: &[Dtype] = &[Dtype::Boolean];

/// A group of kernels compiled together: one CUDA module per (group, dtype).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// Arithmetic: result in the input dtype.
    Arith,
    /// Bitwise and shifts on integers.
    Bits,
    /// Comparisons: bool result.
    Cmp,
    /// And/Or/Xor on bool.
    Logic,
    /// Pow: base of the module's dtype, exponent of any numeric dtype.
    Pow,
    /// Where: bool condition, values moved as they are.
    Where,
}

pub const GROUPS: [Group; 6] = [
    Group::Arith,
    Group::Bits,
    Group::Cmp,
    Group::Logic,
    Group::Pow,
    Group::Where,
];

impl Group {
    pub fn name(self) -> &'static str {
        match self {
            Group::Arith => "arith",
            Group::Bits => "bits",
            Group::Cmp => "cmp",
            Group::Logic => "logic",
            Group::Pow => "pow",
            Group::Where => "where",
        }
    }
}

/// One kernel: `arity` tensor inputs broadcast to the output, computed per element.
#[derive(Debug)]
pub struct Kernel {
    /// Entry-point prefix (no `_`).
    pub name: &'static str,
    pub group: Group,
    pub arity: usize,
    /// The dtypes it is instantiated for (the first input's; Where: the values').
    pub dtypes: &'static [Dtype],
    /// Takes a trailing `u64` parameter (Mean's divisor).
    pub extra: bool,
}

const fn k(name: &'static str, group: Group, arity: usize, dtypes: &'static [Dtype]) -> Kernel {
    Kernel {
        name,
        group,
        arity,
        dtypes,
        extra: false,
    }
}

/// Every kernel of the plugin.
pub const KERNELS: &[Kernel] = &[
    k("add", Group::Arith, 2, NUMERIC),
    k("sub", Group::Arith, 2, NUMERIC),
    k("mul", Group::Arith, 2, NUMERIC),
    k("div", Group::Arith, 2, NUMERIC),
    k("mod", Group::Arith, 2, NUMERIC),
    k("fmod", Group::Arith, 2, NUMERIC),
    k("max", Group::Arith, 2, NUMERIC),
    k("min", Group::Arith, 2, NUMERIC),
    k("prelu", Group::Arith, 2, ARITH),
    k("copy", Group::Arith, 1, NUMERIC),
    Kernel {
        extra: true,
        ..k("divn", Group::Arith, 1, ARITH)
    },
    k("band", Group::Bits, 2, INTS),
    k("bor", Group::Bits, 2, INTS),
    k("bxor", Group::Bits, 2, INTS),
    k("shl", Group::Bits, 2, INTS),
    k("shr", Group::Bits, 2, INTS),
    k("eq", Group::Cmp, 2, NUMERIC_BOOL),
    k("lt", Group::Cmp, 2, NUMERIC),
    k("gt", Group::Cmp, 2, NUMERIC),
    k("le", Group::Cmp, 2, NUMERIC),
    k("ge", Group::Cmp, 2, NUMERIC),
    k("and", Group::Logic, 2, BOOL),
    k("or", Group::Logic, 2, BOOL),
    k("xor", Group::Logic, 2, BOOL),
    k("pow", Group::Pow, 2, ARITH),
    k("where", Group::Where, 3, ALL),
];

/// The kernel named `name`.
pub fn kernel(name: &str) -> Option<&'static Kernel> {
    KERNELS.iter().find(|k| k.name == name)
}

/// Exponent dtypes of Pow (any numeric).
pub const POW_EXPONENTS: &[Dtype] = NUMERIC;

impl Kernel {
    /// Dtypes of the inputs for main dtype `dt` (and Pow's exponent dtype `ydt`).
    pub fn input_dtypes(&self, dt: Dtype, ydt: Option<Dtype>) -> Vec<Dtype> {
        match self.group {
            Group::Where => vec![Dtype::Boolean, dt, dt],
            Group::Pow => vec![dt, ydt.unwrap_or(dt)],
            _ => vec![dt; self.arity],
        }
    }

    /// Dtype of the output for main dtype `dt`.
    pub fn output_dtype(&self, dt: Dtype) -> Dtype {
        match self.group {
            Group::Cmp | Group::Logic => Dtype::Boolean,
            _ => dt,
        }
    }

    /// The entry point: `{name}_{dt}[_{ydt}][_bcast|_bcast64]`.
    pub fn entry(&self, dt: Dtype, ydt: Option<Dtype>, mode: Mode) -> String {
        let mut s = format!("{}_{}", self.name, dtype::name(dt));
        if let Some(y) = ydt {
            s.push('_');
            s.push_str(dtype::name(y));
        }
        s.push_str(mode.suffix());
        s
    }

    /// The module holding this kernel for `dt`.
    pub fn module(&self, dt: Dtype) -> String {
        module_id(self.group, dt)
    }
}

/// `elementwise_{group}_{dtype}`.
pub fn module_id(group: Group, dt: Dtype) -> String {
    format!("elementwise_{}_{}", group.name(), dtype::name(dt))
}

/// The (group, dtype) of a module id this plugin hands out.
pub fn parse_module(id: &str) -> Option<(Group, Dtype)> {
    let rest = id.strip_prefix("elementwise_")?;
    let (g, d) = rest.split_once('_')?;
    let group = GROUPS.into_iter().find(|x| x.name() == g)?;
    let dt = dtype::from_name(d)?;
    KERNELS
        .iter()
        .any(|k| k.group == group && k.dtypes.contains(&dt))
        .then_some((group, dt))
}

/// A parsed entry point.
#[derive(Debug)]
pub struct Entry {
    pub kernel: &'static Kernel,
    pub dt: Dtype,
    pub ydt: Option<Dtype>,
    pub mode: Mode,
}

impl Entry {
    pub fn parse(s: &str) -> Option<Entry> {
        let mut parts = s.split('_');
        let kernel = kernel(parts.next()?)?;
        let dt = dtype::from_name(parts.next()?).filter(|d| kernel.dtypes.contains(d))?;
        let ydt = if kernel.group == Group::Pow {
            Some(dtype::from_name(parts.next()?).filter(|d| POW_EXPONENTS.contains(d))?)
        } else {
            None
        };
        let mode = match parts.next() {
            None => Mode::Flat,
            Some("bcast") => Mode::Strided32,
            Some("bcast64") => Mode::Strided64,
            Some(_) => return None,
        };
        parts.next().is_none().then_some(Entry {
            kernel,
            dt,
            ydt,
            mode,
        })
    }
}

/// How an ONNX op is planned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// Two inputs, multidirectional broadcast, one kernel.
    Binary(&'static str),
    /// Mod: `mod` or `fmod` by attribute.
    Mod,
    /// BitShift: `shl` or `shr` by `direction`.
    BitShift,
    /// Pow: mixed dtypes.
    Pow,
    /// 1..N inputs folded with a kernel; `mean` divides by N at the end.
    Variadic { kernel: &'static str, mean: bool },
    /// PRelu: slope broadcast to X.
    PRelu,
    /// Where: three-way broadcast.
    Where,
}

/// One ONNX op.
#[derive(Debug)]
pub struct OnnxOp {
    pub name: &'static str,
    pub form: Form,
    /// Dtypes of the first input (Where: of X and Y).
    pub dtypes: &'static [Dtype],
    /// Attributes accepted.
    pub attrs: &'static [&'static str],
}

/// Legacy (opset < 7) broadcasting attributes of binary ops.
const LEGACY: &[&str] = &["broadcast", "axis", "consumed_inputs"];

const fn op(
    name: &'static str,
    form: Form,
    dtypes: &'static [Dtype],
    attrs: &'static [&'static str],
) -> OnnxOp {
    OnnxOp {
        name,
        form,
        dtypes,
        attrs,
    }
}

/// Every ONNX op of the plugin.
pub const ONNX_OPS: &[OnnxOp] = &[
    op("Add", Form::Binary("add"), NUMERIC, LEGACY),
    op("Sub", Form::Binary("sub"), NUMERIC, LEGACY),
    op("Mul", Form::Binary("mul"), NUMERIC, LEGACY),
    op("Div", Form::Binary("div"), NUMERIC, LEGACY),
    op("Mod", Form::Mod, NUMERIC, &["fmod"]),
    op("Pow", Form::Pow, ARITH, &["broadcast", "axis"]),
    op("Max", var("max", false), NUMERIC, &["consumed_inputs"]),
    op("Min", var("min", false), NUMERIC, &["consumed_inputs"]),
    op("Sum", var("add", false), ARITH, &["consumed_inputs"]),
    op("Mean", var("add", true), ARITH, &["consumed_inputs"]),
    op(
        "Equal",
        Form::Binary("eq"),
        NUMERIC_BOOL,
        &["broadcast", "axis"],
    ),
    op("Less", Form::Binary("lt"), NUMERIC, &["broadcast", "axis"]),
    op(
        "Greater",
        Form::Binary("gt"),
        NUMERIC,
        &["broadcast", "axis"],
    ),
    op("LessOrEqual", Form::Binary("le"), NUMERIC, &[]),
    op("GreaterOrEqual", Form::Binary("ge"), NUMERIC, &[]),
    op("And", Form::Binary("and"), BOOL, &["broadcast", "axis"]),
    op("Or", Form::Binary("or"), BOOL, &["broadcast", "axis"]),
    op("Xor", Form::Binary("xor"), BOOL, &["broadcast", "axis"]),
    op("BitShift", Form::BitShift, INTS, &["direction"]),
    op("BitwiseAnd", Form::Binary("band"), INTS, &[]),
    op("BitwiseOr", Form::Binary("bor"), INTS, &[]),
    op("BitwiseXor", Form::Binary("bxor"), INTS, &[]),
    op("PRelu", Form::PRelu, ARITH, &["consumed_inputs"]),
    op("Where", Form::Where, ALL, &[]),
];

const fn var(kernel: &'static str, mean: bool) -> Form {
    Form::Variadic { kernel, mean }
}

/// The ONNX op named `name` (case-insensitively).
pub fn onnx_op(name: &str) -> Option<&'static OnnxOp> {
    ONNX_OPS.iter().find(|o| o.name.eq_ignore_ascii_case(name))
}

/// `f32, f16, …` for error messages.
pub fn dtype_list(dts: &[Dtype]) -> String {
    dts.iter()
        .map(|d| dtype::name(*d))
        .collect::<Vec<_>>()
        .join(", ")
}
