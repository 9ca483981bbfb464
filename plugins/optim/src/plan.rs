//! Planning Adagrad, Adam and Momentum (domain `ai.onnx.preview.training`, opset 1): inputs
//! `R, T` (scalars: learning rate f32/f64, step count i64) then the groups `X…, G…, S1…[, S2…]`
//! of N parameter tensors; outputs `X_new…, S1_new…[, S2_new…]`. One launch per parameter
//! tensor, one thread per element; `R` and `T` are read by the kernel through pointers.
//!
//! Every launch has the same parameter block (whichever the op):
//! `flags, r, t, x, g, s1, s2 (or null), x_new, s1_new, s2_new (or null), n, c0..c4`
//! with the coefficients `c` as f64:
//! - Adagrad (`S1` = H): `decay_factor, epsilon, norm_coefficient`;
//! - Adam (`S1` = V, `S2` = H): `alpha, beta, epsilon, norm_coefficient, norm_coefficient_post`;
//! - Momentum (`S1` = V): `alpha, beta, norm_coefficient` ([`NESTEROV`] for `mode` nesterov).

use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, Dtype, Launch, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype};

use crate::{DTYPES, module_id};

/// `R` is f64 (else f32).
pub const R_F64: u32 = 1;
/// Momentum's `mode` is `nesterov`.
pub const NESTEROV: u32 = 2;

/// Threads per block.
pub const THREADS: u32 = 256;

/// The optimizers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Adagrad,
    Adam,
    Momentum,
}

impl Kind {
    pub fn of(op: &str) -> Option<Kind> {
        [Kind::Adagrad, Kind::Adam, Kind::Momentum]
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(op))
    }
    pub fn name(self) -> &'static str {
        match self {
            Kind::Adagrad => "Adagrad",
            Kind::Adam => "Adam",
            Kind::Momentum => "Momentum",
        }
    }
    /// The entry-point prefix (`{kernel}_{dtype}`).
    pub fn kernel(self) -> &'static str {
        match self {
            Kind::Adagrad => "adagrad",
            Kind::Adam => "adam",
            Kind::Momentum => "momentum",
        }
    }
    /// Tensors per parameter: X, G and the states.
    fn group(self) -> usize {
        match self {
            Kind::Adam => 4,
            _ => 3,
        }
    }
    /// Names of the state tensors (in input and output order).
    fn states(self) -> &'static [&'static str] {
        match self {
            Kind::Adagrad => &["H"],
            Kind::Adam => &["V", "H"],
            Kind::Momentum => &["V"],
        }
    }
}

/// The domain of the training ops.
pub const DOMAIN: &str = "ai.onnx.preview.training";

/// One element of `slot`, of one of `dts`: a scalar (rank 0) or a one-element tensor.
fn scalar<'a>(
    req: &'a PlanRequestExt,
    slot: usize,
    what: &str,
    dts: &[Dtype],
    served: &str,
) -> Result<&'a TensorDesc, OpError> {
    let d = req.required(slot)?;
    if !dts.contains(&d.dtype) {
        return Err(OpError::dtype(format!(
            "{}: input {what} is {}; {served} is served",
            req.op,
            dtype::name(d.dtype)
        )));
    }
    if umd_sdk::shape::numel(&d.shape)? != 1 {
        return Err(OpError::shape(format!(
            "{}: input {what} must be a scalar, got shape {:?}",
            req.op, d.shape
        )));
    }
    Ok(d)
}

/// Plans one of the optimizers.
pub fn plan(req: &PlanRequestExt, kind: Kind) -> Result<OpPlan, OpError> {
    if !req.domain.is_empty() && req.domain != DOMAIN {
        return Err(OpError::UnsupportedOp(format!(
            "op `{}` of domain `{}` is not provided by this plugin (it serves `{DOMAIN}`)",
            req.op, req.domain
        )));
    }
    let a = &req.attributes;
    let mut flags = 0;
    let coefs: [f64; 5] = match kind {
        Kind::Adagrad => {
            attr::only(a, &["decay_factor", "epsilon", "norm_coefficient"])?;
            [
                attr::float_or(a, "decay_factor", 0.0)?,
                attr::float_or(a, "epsilon", 1e-6)?,
                attr::float_or(a, "norm_coefficient", 0.0)?,
                0.0,
                0.0,
            ]
        }
        Kind::Adam => {
            attr::only(
                a,
                &[
                    "alpha",
                    "beta",
                    "epsilon",
                    "norm_coefficient",
                    "norm_coefficient_post",
                ],
            )?;
            [
                attr::float_or(a, "alpha", 0.9)?,
                attr::float_or(a, "beta", 0.999)?,
                attr::float_or(a, "epsilon", 1e-6)?,
                attr::float_or(a, "norm_coefficient", 0.0)?,
                attr::float_or(a, "norm_coefficient_post", 0.0)?,
            ]
        }
        Kind::Momentum => {
            attr::only(a, &["alpha", "beta", "mode", "norm_coefficient"])?;
            let need = |name: &str| {
                if attr::has(a, name) {
                    attr::float_or(a, name, 0.0)
                } else {
                    Err(OpError::InvalidAttribute(format!(
                        "Momentum: attribute `{name}` is required"
                    )))
                }
            };
            match attr::text_or(a, "mode", "")?.as_str() {
                "standard" => {}
                "nesterov" => flags |= NESTEROV,
                "" => {
                    return Err(OpError::InvalidAttribute(
                        "Momentum: attribute `mode` is required".into(),
                    ));
                }
                m => {
                    return Err(OpError::InvalidAttribute(format!(
                        "Momentum: attribute `mode` = {m:?} must be \"standard\" or \"nesterov\""
                    )));
                }
            }
            [
                need("alpha")?,
                need("beta")?,
                need("norm_coefficient")?,
                0.0,
                0.0,
            ]
        }
    };

    let group = kind.group();
    let slots = req.slots();
    if slots < 2 + group || !(slots - 2).is_multiple_of(group) {
        return Err(OpError::shape(format!(
            "{}: takes R, T and {group} tensors per parameter ({}), got {slots} inputs",
            req.op,
            ["X", "G"]
                .iter()
                .chain(kind.states())
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let n = (slots - 2) / group;
    let count = (group - 1) * n;
    if req.outputs(count) != count {
        return Err(OpError::shape(format!(
            "{}: {n} parameters give {count} outputs, {} were asked for",
            req.op,
            req.outputs(count)
        )));
    }
    let r = scalar(req, 0, "R", &[Dtype::F32, Dtype::F64], "f32 or f64")?;
    if r.dtype == Dtype::F64 {
        flags |= R_F64;
    }
    scalar(req, 1, "T", &[Dtype::I64], "i64")?;

    let limits = &req.target.limits;
    let mut launches = Vec::with_capacity(n);
    let mut outputs = vec![TensorDesc::new("", vec![], Dtype::F32); (group - 1) * n];
    for i in 0..n {
        let x = req.required(2 + i)?;
        let dt = x.dtype;
        if !DTYPES.contains(&dt) {
            return Err(OpError::dtype(format!(
                "{}: X is {}; served dtypes are f32, f16, bf16 and f64",
                req.op,
                dtype::name(dt)
            )));
        }
        let numel = umd_sdk::shape::numel(&x.shape)?;
        umd_sdk::shape::byte_size(&x.shape, dt)?;
        // slots of this parameter's tensors: X, G, states…
        let slot = |k: usize| 2 + k * n + i;
        for k in 1..group {
            let t = req.required(slot(k))?;
            if t.dtype != dt || t.shape != x.shape {
                return Err(OpError::shape(format!(
                    "{}: input `{}` ({} {:?}) must have the dtype and shape of X ({} {:?})",
                    req.op,
                    t.name,
                    dtype::name(t.dtype),
                    t.shape,
                    dtype::name(dt),
                    x.shape
                )));
            }
        }
        let bind = |k: usize| req.binding(slot(k)).expect("every slot is required");
        let mut p = ParamPacker::new();
        p.u32(flags)
            .ptr(req.binding(0).expect("R"), Access::Read)
            .ptr(req.binding(1).expect("T"), Access::Read)
            .ptr(bind(0), Access::Read)
            .ptr(bind(1), Access::Read)
            .ptr(bind(2), Access::Read);
        if group == 4 {
            p.ptr(bind(3), Access::Read);
        } else {
            p.u64(0);
        }
        // outputs: X_new at i, the states' at (k + 1) * n + i
        let out = |k: usize| req.output_binding(k * n + i);
        p.ptr(out(0), Access::Write).ptr(out(1), Access::Write);
        if group == 4 {
            p.ptr(out(2), Access::Write);
        } else {
            p.u64(0);
        }
        p.u64(numel);
        for c in coefs {
            p.f64(c);
        }
        let (grid, block) = umd_sdk::launch::linear(numel, THREADS, limits)?;
        let (params, relocations) = p.finish(limits.max_param_bytes)?;
        launches.push(Launch {
            module_id: module_id(dt),
            entry_point: format!("{}_{}", kind.kernel(), dtype::name(dt)),
            grid,
            block,
            shared_memory: 0,
            params,
            relocations,
        });
        outputs[i] = TensorDesc::new(format!("X_new{i}"), x.shape.clone(), dt);
        for (k, s) in kind.states().iter().enumerate() {
            outputs[(k + 1) * n + i] = TensorDesc::new(format!("{s}_new{i}"), x.shape.clone(), dt);
        }
    }
    Ok(OpPlan {
        launches,
        outputs,
        workspace_bytes: 0,
    })
}
