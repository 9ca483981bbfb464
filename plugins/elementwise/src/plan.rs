//! Planning: checks a request against the [`ONNX_OPS`](crate::ops::ONNX_OPS) table (inputs,
//! dtypes, attributes), infers the output shape by broadcasting, and emits the launches: one for
//! a binary op, Where or PRelu; for Sum/Mean/Max/Min one per further input, folding into the
//! output in place (Mean then divides by the count).

use umd_sdk::params::ParamPacker;
use umd_sdk::shape;
use umd_sdk::{
    Access, Dtype, Launch, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype, launch,
};

use crate::bcast::{Geometry, broadcast_all, check_rank};
use crate::ops::{self, Form, Kernel, NUMERIC, OnnxOp, dtype_list};

/// Threads per block of every launch.
const THREADS: u32 = 256;

/// Plans one request.
pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    let op = ops::onnx_op(&req.op).ok_or_else(|| umd_sdk::unsupported_op_ext(req))?;
    attr::only(&req.attributes, op.attrs).map_err(|e| match e {
        OpError::InvalidAttribute(m) => OpError::InvalidAttribute(format!("{}: {m}", op.name)),
        other => other,
    })?;
    if req.outputs(1) != 1 {
        return Err(OpError::shape(format!(
            "{} has one output, {} were asked for",
            op.name,
            req.outputs(1)
        )));
    }
    let inputs = (0..req.slots())
        .map(|i| req.required(i))
        .collect::<Result<Vec<_>, _>>()?;
    for t in &inputs {
        check_rank(t)?;
    }
    let p = Planner { req, op, inputs };
    match op.form {
        Form::Binary(kernel) => p.binary(kernel),
        Form::Mod => match attr::int_or(&req.attributes, "fmod", 0)? {
            0 => p.binary("mod"),
            1 => p.binary("fmod"),
            v => Err(OpError::InvalidAttribute(format!(
                "Mod: attribute `fmod` must be 0 or 1, got {v}"
            ))),
        },
        Form::BitShift => match attr::text_or(&req.attributes, "direction", "")?.as_str() {
            "LEFT" => p.binary("shl"),
            "RIGHT" => p.binary("shr"),
            "" => Err(OpError::InvalidAttribute(
                "BitShift: attribute `direction` is required (LEFT or RIGHT)".into(),
            )),
            v => Err(OpError::InvalidAttribute(format!(
                "BitShift: attribute `direction` must be LEFT or RIGHT, got {v:?}"
            ))),
        },
        Form::Pow => p.binary("pow"),
        Form::Variadic { kernel, mean } => p.variadic(kernel, mean),
        Form::PRelu => p.prelu(),
        Form::Where => p.select(),
    }
}

struct Planner<'a> {
    req: &'a PlanRequestExt,
    op: &'static OnnxOp,
    inputs: Vec<&'a TensorDesc>,
}

impl Planner<'_> {
    fn arity(&self, want: usize) -> Result<(), OpError> {
        if self.inputs.len() != want {
            return Err(OpError::shape(format!(
                "{} takes {want} inputs, got {}",
                self.op.name,
                self.inputs.len()
            )));
        }
        Ok(())
    }

    /// Checks `dt` is served.
    fn served(&self, dt: Dtype) -> Result<(), OpError> {
        if !self.op.dtypes.contains(&dt) {
            return Err(OpError::dtype(format!(
                "{} supports {}; got {}",
                self.op.name,
                dtype_list(self.op.dtypes),
                dtype::name(dt)
            )));
        }
        Ok(())
    }

    /// Checks every input in `ts` has dtype `dt`.
    fn same(&self, dt: Dtype, ts: &[&TensorDesc]) -> Result<(), OpError> {
        if let Some(t) = ts.iter().find(|t| t.dtype != dt) {
            return Err(OpError::dtype(format!(
                "{} needs inputs of one dtype, got {} and {}",
                self.op.name,
                dtype::name(dt),
                dtype::name(t.dtype)
            )));
        }
        Ok(())
    }

    fn kernel(&self, name: &str) -> Result<&'static Kernel, OpError> {
        ops::kernel(name).ok_or_else(|| OpError::internal(format!("no kernel `{name}`")))
    }

    fn binding(&self, i: usize) -> u32 {
        self.req.binding(i).unwrap_or(i as u32)
    }

    fn plan(&self, out: Vec<u64>, dt: Dtype, launches: Vec<Launch>) -> Result<OpPlan, OpError> {
        shape::byte_size(&out, dt)?;
        Ok(OpPlan {
            outputs: vec![TensorDesc::new("out", out, dt)],
            launches,
            workspace_bytes: 0,
        })
    }

    /// One launch of `kernel` reading `ins`, writing the output (binding after the inputs).
    fn launch(
        &self,
        kernel: &Kernel,
        dt: Dtype,
        ydt: Option<Dtype>,
        ins: &[(u32, Access)],
        g: &Geometry,
        extra: Option<u64>,
    ) -> Result<Launch, OpError> {
        let limits = &self.req.target.limits;
        let mut p = ParamPacker::new();
        for &(b, access) in ins {
            p.ptr(b, access);
        }
        p.ptr(self.req.output_binding(0), Access::Write);
        let mode = g.pack(&mut p);
        if let Some(x) = extra {
            p.u64(x);
        }
        let (grid, block) = launch::linear(g.n, THREADS, limits)?;
        let (params, relocations) = p.finish(limits.max_param_bytes)?;
        Ok(Launch {
            module_id: kernel.module(dt),
            entry_point: kernel.entry(dt, ydt, mode),
            grid,
            block,
            shared_memory: 0,
            params,
            relocations,
        })
    }

    /// Two inputs broadcast both ways (or, with the legacy `broadcast=1`, B to A).
    fn binary(&self, name: &str) -> Result<OpPlan, OpError> {
        self.arity(2)?;
        let kernel = self.kernel(name)?;
        let (a, b) = (self.inputs[0], self.inputs[1]);
        self.served(a.dtype)?;
        let ydt = if name == "pow" {
            if !NUMERIC.contains(&b.dtype) {
                return Err(OpError::dtype(format!(
                    "Pow: the exponent must be one of {}; got {}",
                    dtype_list(NUMERIC),
                    dtype::name(b.dtype)
                )));
            }
            Some(b.dtype)
        } else {
            self.same(a.dtype, &[b])?;
            None
        };
        let b_shape = self.legacy_shape(&a.shape, &b.shape)?;
        let out = broadcast_all([&a.shape[..], &b_shape])?;
        let g = Geometry::broadcast(&out, &[&a.shape, &b_shape])?;
        let read = [
            (self.binding(0), Access::Read),
            (self.binding(1), Access::Read),
        ];
        let l = self.launch(kernel, a.dtype, ydt, &read, &g, None)?;
        self.plan(out, kernel.output_dtype(a.dtype), vec![l])
    }

    /// B's shape as broadcast: itself, or under the legacy (opset < 7) `broadcast=1` [`axis`]
    /// attributes B aligned at `axis` of A (and A's shape the output's).
    fn legacy_shape(&self, a: &[u64], b: &[u64]) -> Result<Vec<u64>, OpError> {
        let attrs = &self.req.attributes;
        if !attr::has(attrs, "broadcast") {
            return Ok(b.to_vec());
        }
        let bad = |m: String| Err(OpError::InvalidAttribute(format!("{}: {m}", self.op.name)));
        let shaped = match attr::int(attrs, "broadcast")? {
            0 if a == b => b.to_vec(),
            0 => {
                return Err(OpError::shape(format!(
                    "{}: shapes {a:?} and {b:?} differ and `broadcast` is 0",
                    self.op.name
                )));
            }
            1 => {
                let mut shaped = b.to_vec();
                if attr::has(attrs, "axis") {
                    let axis = attr::int(attrs, "axis")?;
                    let rank = a.len() as i64;
                    let axis = if axis < 0 { axis + rank } else { axis };
                    if axis < 0 || axis + b.len() as i64 > rank {
                        return bad(format!(
                            "attribute `axis` {axis} does not place shape {b:?} inside {a:?}"
                        ));
                    }
                    shaped.resize(a.len() - axis as usize, 1);
                }
                shaped
            }
            v => return bad(format!("attribute `broadcast` must be 0 or 1, got {v}")),
        };
        if shape::broadcast(a, &shaped)? != a {
            return Err(OpError::shape(format!(
                "{}: shape {b:?} does not broadcast to {a:?}",
                self.op.name
            )));
        }
        Ok(shaped)
    }

    /// Sum/Mean/Max/Min: `out = k(in0, in1)`, then `out = k(out, in_j)` for each further input,
    /// then (Mean) `out = out / N`. One input: a copy.
    fn variadic(&self, name: &str, mean: bool) -> Result<OpPlan, OpError> {
        let Some(first) = self.inputs.first() else {
            return Err(OpError::shape(format!(
                "{} takes at least one input",
                self.op.name
            )));
        };
        let dt = first.dtype;
        self.served(dt)?;
        self.same(dt, &self.inputs)?;
        let out = broadcast_all(self.inputs.iter().map(|t| &t.shape[..]))?;
        let read = |i: usize| (self.binding(i), Access::Read);
        let acc = (self.req.output_binding(0), Access::ReadWrite);
        let mut launches = Vec::new();
        if self.inputs.len() == 1 {
            let g = Geometry::broadcast(&out, &[&first.shape])?;
            launches.push(self.launch(self.kernel("copy")?, dt, None, &[read(0)], &g, None)?);
        } else {
            let kernel = self.kernel(name)?;
            let g = Geometry::broadcast(&out, &[&first.shape, &self.inputs[1].shape])?;
            launches.push(self.launch(kernel, dt, None, &[read(0), read(1)], &g, None)?);
            for (j, t) in self.inputs.iter().enumerate().skip(2) {
                let g = Geometry::broadcast(&out, &[&out, &t.shape])?;
                launches.push(self.launch(kernel, dt, None, &[acc, read(j)], &g, None)?);
            }
            if mean {
                let g = Geometry::broadcast(&out, &[&out])?;
                let count = Some(self.inputs.len() as u64);
                launches.push(self.launch(self.kernel("divn")?, dt, None, &[acc], &g, count)?);
            }
        }
        self.plan(out, dt, launches)
    }

    /// PRelu: the slope broadcast to X (numpy rules; or a 1-D slope matching exactly one of X's
    /// dimensions, as the ONNX reference accepts).
    fn prelu(&self) -> Result<OpPlan, OpError> {
        self.arity(2)?;
        let (x, slope) = (self.inputs[0], self.inputs[1]);
        self.served(x.dtype)?;
        self.same(x.dtype, &[slope])?;
        let out = x.shape.clone();
        let slope_strides = match shape::broadcast(&x.shape, &slope.shape) {
            Ok(s) if s == x.shape => shape::broadcast_strides(&slope.shape, &out),
            _ => {
                let along: Vec<usize> = match slope.shape[..] {
                    [d] => (0..out.len()).filter(|&i| out[i] == d).collect(),
                    _ => Vec::new(),
                };
                let [axis] = along[..] else {
                    return Err(OpError::shape(format!(
                        "PRelu: slope of shape {:?} does not broadcast to X of shape {:?}",
                        slope.shape, x.shape
                    )));
                };
                (0..out.len()).map(|i| u64::from(i == axis)).collect()
            }
        };
        let strides = [shape::contiguous_strides(&out), slope_strides];
        let g = Geometry::new(&out, &strides)?;
        let read = [
            (self.binding(0), Access::Read),
            (self.binding(1), Access::Read),
        ];
        let l = self.launch(self.kernel("prelu")?, x.dtype, None, &read, &g, None)?;
        self.plan(out, x.dtype, vec![l])
    }

    /// Where(condition, X, Y): three-way broadcast; values are moved as they are.
    fn select(&self) -> Result<OpPlan, OpError> {
        self.arity(3)?;
        let (c, x, y) = (self.inputs[0], self.inputs[1], self.inputs[2]);
        if c.dtype != Dtype::Boolean {
            return Err(OpError::dtype(format!(
                "Where: the condition must be bool, got {}",
                dtype::name(c.dtype)
            )));
        }
        self.served(x.dtype)?;
        self.same(x.dtype, &[y])?;
        let shapes = [&c.shape[..], &x.shape, &y.shape];
        let out = broadcast_all(shapes)?;
        let g = Geometry::broadcast(&out, &shapes)?;
        let read: Vec<(u32, Access)> = (0..3).map(|i| (self.binding(i), Access::Read)).collect();
        let l = self.launch(self.kernel("where")?, x.dtype, None, &read, &g, None)?;
        self.plan(out, x.dtype, vec![l])
    }
}
