//! The op table: every op's ONNX name, kernel name, dtype class, attributes (with their ONNX
//! defaults, passed to the kernel as `a` and `b`), CUDA C expression and Rust body. Planning,
//! the CUDA templates and the CPU kernels all read this one list.
//!
//! A CUDA expression computes on `x` (the loaded element in the compute type `cT`) and the
//! attributes `a`, `b` (also `cT`), through the overloaded helpers of [`crate::cuda::HELPERS`].
//! The Rust body is the same formula over [`Real`]/[`Num`]/[`Int`], compiled into one monomorphic
//! loop per op and dtype.

use umd_sdk::Dtype;
use umd_sdk::dtype::Element;

use crate::cpu::{map, map_bool, map_pred};
#[allow(unused_imports)] // the bodies call trait methods
use crate::math::{Int, Num, Real};

/// Which dtypes an op serves and what it outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// f32, f16, bf16 (computing in f32) and f64; output of the input dtype.
    Float,
    /// The floats and every integer (wrapping integer arithmetic).
    Num,
    /// Every integer: i8, u8, i16, u16, i32, u32, i64, u64.
    Int,
    /// Floats in, bool out.
    Pred,
    /// bool in, bool out.
    Logic,
    /// Clip: like `Num`, with min/max from inputs or attributes (its own kernel signature).
    Clip,
}

const FLOATS: [Dtype; 4] = [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F64];
const NUMS: [Dtype; 12] = [
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I8,
    Dtype::U8,
    Dtype::I32,
    Dtype::I64,
    Dtype::I16,
    Dtype::U16,
    Dtype::U32,
    Dtype::U64,
];
const INTS: [Dtype; 8] = [
    Dtype::I8,
    Dtype::U8,
    Dtype::I32,
    Dtype::I64,
    Dtype::I16,
    Dtype::U16,
    Dtype::U32,
    Dtype::U64,
];

impl Class {
    /// The input dtypes served.
    pub fn dtypes(self) -> &'static [Dtype] {
        match self {
            Class::Float | Class::Pred => &FLOATS,
            Class::Num | Class::Clip => &NUMS,
            Class::Int => &INTS,
            Class::Logic => &[Dtype::Boolean],
        }
    }
    /// The output dtype for input dtype `dt`.
    pub fn output(self, dt: Dtype) -> Dtype {
        match self {
            Class::Pred => Dtype::Boolean,
            _ => dt,
        }
    }
}

/// One row of the table.
#[derive(Debug)]
pub struct OpDef {
    /// ONNX spelling (two rows share `Gelu`: its `approximate` attribute picks the kernel).
    pub onnx: &'static str,
    /// Kernel name: entry points are `{kernel}_{dtype}`.
    pub kernel: &'static str,
    pub class: Class,
    /// Float attributes with their defaults, passed as `a` and `b` (at most two).
    pub attrs: &'static [(&'static str, f64)],
    /// Whether results depend on the math library (a tolerance applies) rather than being exact.
    pub approx: bool,
    /// The CUDA C expression (empty for Clip, whose kernel is written out in [`crate::cuda`]).
    pub cuda: &'static str,
}

/// Clip: min/max from inputs 1 and 2 (opset 11+) or from attributes (opset 6).
pub const CLIP: OpDef = OpDef {
    onnx: "Clip",
    kernel: "clip",
    class: Class::Clip,
    attrs: &[],
    approx: false,
    cuda: "",
};

/// Every row: the generated ones and Clip.
pub fn all() -> impl Iterator<Item = &'static OpDef> {
    ROWS.iter().chain(std::iter::once(&CLIP))
}

/// The row of kernel `kernel`.
pub fn by_kernel(kernel: &str) -> Option<&'static OpDef> {
    all().find(|d| d.kernel == kernel)
}

macro_rules! approx {
    (approx) => {
        true
    };
    (exact) => {
        false
    };
}

macro_rules! unary_ops {
    (
        float<$R:ident> { $( $fo:literal $fk:ident [$($fan:literal = $fad:expr),*] $ft:ident $fc:literal
            => |$fx:ident, $fa:ident, $fb:ident| $fbody:expr; )* }
        num<$N:ident> { $( $no:literal $nk:ident $nc:literal => |$nx:ident| $nbody:expr; )* }
        int<$I:ident> { $( $io:literal $ik:ident $ic:literal => |$ix:ident| $ibody:expr; )* }
        pred<$P:ident> { $( $po:literal $pk:ident [$($pan:literal = $pad:expr),*] $pc:literal
            => |$px:ident, $pa:ident, $pb:ident| $pbody:expr; )* }
        logic { $( $lo:literal $lk:ident $lc:literal => |$lx:ident| $lbody:expr; )* }
    ) => {
        /// The generated rows (see [`all`] for every op).
        pub const ROWS: &[OpDef] = &[
            $( OpDef { onnx: $fo, kernel: stringify!($fk), class: Class::Float,
                       attrs: &[$(($fan, $fad)),*], approx: approx!($ft), cuda: $fc }, )*
            $( OpDef { onnx: $no, kernel: stringify!($nk), class: Class::Num,
                       attrs: &[], approx: false, cuda: $nc }, )*
            $( OpDef { onnx: $io, kernel: stringify!($ik), class: Class::Int,
                       attrs: &[], approx: false, cuda: $ic }, )*
            $( OpDef { onnx: $po, kernel: stringify!($pk), class: Class::Pred,
                       attrs: &[$(($pan, $pad)),*], approx: false, cuda: $pc }, )*
            $( OpDef { onnx: $lo, kernel: stringify!($lk), class: Class::Logic,
                       attrs: &[], approx: false, cuda: $lc }, )*
        ];

        /// One generic function per op, the Rust twin of its CUDA expression.
        #[allow(unused_variables, clippy::neg_cmp_op_on_partial_ord)]
        mod body {
            use super::*;
            $( #[inline(always)] pub fn $fk<$R: Real>($fx: $R, $fa: $R, $fb: $R) -> $R { $fbody } )*
            $( #[inline(always)] pub fn $nk<$N: Num>($nx: $N) -> $N { $nbody } )*
            $( #[inline(always)] pub fn $ik<$I: Int>($ix: $I) -> $I { $ibody } )*
            $( #[inline(always)] pub fn $pk<$P: Real>($px: $P, $pa: $P, $pb: $P) -> bool { $pbody } )*
            $( #[inline(always)] pub fn $lk($lx: bool) -> bool { $lbody } )*
        }

        /// Runs float op `kernel` on `x` into `out` (attributes `a`, `b`); false: not a float op.
        pub fn run_float<T: Element>(kernel: &str, x: &[u8], out: &mut [u8], a: f64, b: f64) -> bool
        where
            T::Compute: Real,
        {
            let (a, b) = (<T::Compute as Real>::c(a), <T::Compute as Real>::c(b));
            match kernel {
                $( k if k == stringify!($fk) => map::<T>(x, out, |v| body::$fk(v, a, b)), )*
                _ => return false,
            }
            true
        }

        /// Runs numeric op `kernel`; false: not one.
        pub fn run_num<T: Element>(kernel: &str, x: &[u8], out: &mut [u8]) -> bool
        where
            T::Compute: Num,
        {
            match kernel {
                $( k if k == stringify!($nk) => map::<T>(x, out, body::$nk), )*
                _ => return false,
            }
            true
        }

        /// Runs integer op `kernel`; false: not one.
        pub fn run_int<T: Element>(kernel: &str, x: &[u8], out: &mut [u8]) -> bool
        where
            T::Compute: Int,
        {
            match kernel {
                $( k if k == stringify!($ik) => map::<T>(x, out, body::$ik), )*
                _ => return false,
            }
            true
        }

        /// Runs predicate `kernel` (bool output); false: not one.
        pub fn run_pred<T: Element>(kernel: &str, x: &[u8], out: &mut [u8], a: f64, b: f64) -> bool
        where
            T::Compute: Real,
        {
            let (a, b) = (<T::Compute as Real>::c(a), <T::Compute as Real>::c(b));
            match kernel {
                $( k if k == stringify!($pk) => map_pred::<T>(x, out, |v| body::$pk(v, a, b)), )*
                _ => return false,
            }
            true
        }

        /// Runs boolean op `kernel`; false: not one.
        pub fn run_logic(kernel: &str, x: &[u8], out: &mut [u8]) -> bool {
            match kernel {
                $( k if k == stringify!($lk) => map_bool(x, out, body::$lk), )*
                _ => return false,
            }
            true
        }
    };
}

unary_ops! {
    float<R> {
        "Exp" exp [] approx "umd_exp(x)" => |x, a, b| x.exp();
        "Log" log [] approx "umd_log(x)" => |x, a, b| x.ln();
        "Sqrt" sqrt [] approx "umd_sqrt(x)" => |x, a, b| x.sqrt();
        "Reciprocal" reciprocal [] approx "(cT)1 / x" => |x, a, b| R::ONE / x;
        "Sin" sin [] approx "umd_sin(x)" => |x, a, b| x.sin();
        "Cos" cos [] approx "umd_cos(x)" => |x, a, b| x.cos();
        "Tan" tan [] approx "umd_tan(x)" => |x, a, b| x.tan();
        "Tanh" tanh [] approx "umd_tanh(x)" => |x, a, b| x.tanh();
        "Asin" asin [] approx "umd_asin(x)" => |x, a, b| x.asin();
        "Acos" acos [] approx "umd_acos(x)" => |x, a, b| x.acos();
        "Atan" atan [] approx "umd_atan(x)" => |x, a, b| x.atan();
        "Sinh" sinh [] approx "umd_sinh(x)" => |x, a, b| x.sinh();
        "Cosh" cosh [] approx "umd_cosh(x)" => |x, a, b| x.cosh();
        "Asinh" asinh [] approx "umd_asinh(x)" => |x, a, b| x.asinh();
        "Acosh" acosh [] approx "umd_acosh(x)" => |x, a, b| x.acosh();
        "Atanh" atanh [] approx "umd_atanh(x)" => |x, a, b| x.atanh();
        "Erf" erf [] approx "umd_erf(x)" => |x, a, b| x.erf();
        "Sigmoid" sigmoid [] approx "umd_sigmoid(x)" => |x, a, b| x.sigmoid();
        "HardSigmoid" hard_sigmoid ["alpha" = 0.2, "beta" = 0.5] approx
            "umd_clamp01(a * x + b)" => |x, a, b| (a * x + b).clamp01();
        "HardSwish" hard_swish [] approx "x * umd_clamp01(x * (cT)(1.0 / 6.0) + (cT)0.5)"
            => |x, a, b| x * (x * R::c(1.0 / 6.0) + R::c(0.5)).clamp01();
        "LeakyRelu" leaky_relu ["alpha" = 0.01] approx "(x > (cT)0 ? x : a * x)"
            => |x, a, b| if x > R::ZERO { x } else { a * x };
        "Elu" elu ["alpha" = 1.0] approx "(x > (cT)0 ? x : a * umd_expm1(x))"
            => |x, a, b| if x > R::ZERO { x } else { a * x.exp_m1() };
        // ONNX's float32 defaults (1.67326319217681884765625, 1.05070102214813232421875)
        "Selu" selu ["alpha" = 1.673_263_2_f32 as f64, "gamma" = 1.050_701_f32 as f64]
            approx "b * (x > (cT)0 ? x : a * umd_expm1(x))"
            => |x, a, b| b * if x > R::ZERO { x } else { a * x.exp_m1() };
        // max(0, x) + min(0, a (e^(x/a) - 1)), which is this for every a != 0 (NaN stays NaN)
        "Celu" celu ["alpha" = 1.0] approx "(x > (cT)0 ? x : a * umd_expm1(x / a))"
            => |x, a, b| if x > R::ZERO { x } else { a * (x / a).exp_m1() };
        "ThresholdedRelu" thresholded_relu ["alpha" = 1.0] exact "(x > a ? x : (cT)0)"
            => |x, a, b| if x > a { x } else { R::ZERO };
        // Shrink: NaN compares false both ways and gives 0, as the ONNX reference does
        "Shrink" shrink ["lambd" = 0.5, "bias" = 0.0] exact "(x < -a ? x + b : (x > a ? x - b : (cT)0))"
            => |x, a, b| if x < R::ZERO - a { x + b } else if x > a { x - b } else { R::ZERO };
        "Gelu" gelu [] approx "(cT)0.5 * x * ((cT)1 + umd_erf(x * (cT)0.70710678118654752440))"
            => |x, a, b| R::c(0.5) * x * (R::ONE + (x * R::c(std::f64::consts::FRAC_1_SQRT_2)).erf());
        "Gelu" gelu_tanh [] approx
            "(cT)0.5 * x * ((cT)1 + umd_tanh((cT)0.79788456080286535588 * (x + (cT)0.044715 * x * x * x)))"
            => |x, a, b| R::c(0.5) * x
                * (R::ONE + (R::c(0.797_884_560_802_865_4) * (x + R::c(0.044715) * x * x * x)).tanh());
        "Softplus" softplus [] approx "umd_softplus(x)" => |x, a, b| x.softplus();
        "Softsign" softsign [] approx "x / ((cT)1 + umd_abs(x))" => |x, a, b| x / (R::ONE + x.abs_());
        "Mish" mish [] approx "x * umd_tanh(umd_softplus(x))" => |x, a, b| x * x.softplus().tanh();
        "Swish" swish ["alpha" = 1.0] approx "x * umd_sigmoid(a * x)" => |x, a, b| x * (a * x).sigmoid();
        "Floor" floor [] exact "umd_floor(x)" => |x, a, b| x.floor();
        "Ceil" ceil [] exact "umd_ceil(x)" => |x, a, b| x.ceil();
        "Round" round [] exact "umd_rint(x)" => |x, a, b| x.rint();
    }
    num<N> {
        "Abs" abs "umd_abs(x)" => |x| x.abs_();
        "Neg" neg "umd_neg(x)" => |x| x.neg_();
        "Sign" sign "(x > (cT)0 ? (cT)1 : (x < (cT)0 ? (cT)-1 : x))"
            => |x| if x > N::ZERO { N::ONE } else if x < N::ZERO { N::MINUS_ONE } else { x };
        "Relu" relu "(x < (cT)0 ? (cT)0 : x)" => |x| if x < N::ZERO { N::ZERO } else { x };
    }
    int<I> {
        "BitwiseNot" bitwise_not "~x" => |x| !x;
    }
    pred<P> {
        "IsNaN" is_nan [] "umd_isnan(x)" => |x, a, b| x.is_nan();
        "IsInf" is_inf ["detect_positive" = 1.0, "detect_negative" = 1.0]
            "(umd_isinf(x) && (x > (cT)0 ? a != (cT)0 : b != (cT)0))"
            => |x, a, b| x.is_inf() && if x > P::ZERO { a != P::ZERO } else { b != P::ZERO };
    }
    logic {
        "Not" not "!x" => |x| !x;
    }
}
