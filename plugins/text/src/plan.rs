//! Planning and the CPU kernel. A string op's outputs depend on its inputs' *values* (their
//! shapes and text sizes too), and the host gives every string input's value at plan time: the
//! plan runs the op ([`crate::ops::run`]) to size the outputs, and records the call
//! ([`crate::wire`]) in the launch's parameters; the kernel reads the inputs from the bound
//! buffers, runs the op again and writes the outputs, refusing a result that is not the size
//! the plan gave (the inputs changed since).
//!
//! One launch of one block, module [`MODULE`], entry point [`ENTRY`]. Parameters: a pointer per
//! present input (read), then per output (write), then the record's length (u32) and the record
//! in u32 words. A record larger than the parameter block (4 KiB: large LabelEncoder maps) is
//! refused with a message. CPU device only (no CUDA kernels).

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{
    Access, AttrValueExt, CpuCall, CpuWrite, Dim3, Launch, OpError, OpPlan, PlanRequestExt,
    TensorDesc, dtype,
};

use crate::ops::{self, Attr, OPS};
use crate::value;
use crate::wire::{Call, Slot};

pub const MODULE: &str = "text";
pub const ENTRY: &str = "text_op";

fn op_error(e: ops::OpError) -> OpError {
    match e {
        ops::OpError::Invalid(m) => OpError::InvalidAttribute(m),
        ops::OpError::Unsupported(m) => OpError::UnsupportedOp(m),
    }
}

fn attr(op: &str, name: &str, v: &AttrValueExt) -> Result<Attr, OpError> {
    Ok(match v {
        AttrValueExt::Int(x) => Attr::Int(*x),
        AttrValueExt::Float(x) => Attr::Float(*x),
        AttrValueExt::Text(x) => Attr::Text(x.clone()),
        AttrValueExt::Ints(x) => Attr::Ints(x.clone()),
        AttrValueExt::Floats(x) => Attr::Floats(x.clone()),
        AttrValueExt::Boolean(x) => Attr::Int(*x as i64),
        AttrValueExt::Texts(x) => Attr::Texts(x.clone()),
        AttrValueExt::Tensor(t) => Attr::Tensor(
            value::from_bytes(t.desc.dtype, &t.desc.shape, &t.data).map_err(|e| {
                OpError::InvalidAttribute(format!("{op}: attribute `{name}`: {e:?}"))
            })?,
        ),
    })
}

fn run(call: &Call, inputs: &[Option<ops::Value>]) -> Result<Vec<ops::Value>, OpError> {
    let (op, _) = OPS
        .get(call.op as usize)
        .ok_or_else(|| OpError::internal("unknown op"))?;
    ops::run(op, inputs, &call.attrs).map_err(op_error)
}

pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    let index = OPS
        .iter()
        .position(|(name, _)| name.eq_ignore_ascii_case(&req.op))
        .ok_or_else(|| umd_sdk::unsupported_op_ext(req))?;
    let op = OPS[index].0;
    if !req.target.name.eq_ignore_ascii_case("cpu") {
        return Err(OpError::UnsupportedTarget(format!(
            "{op} on strings runs on the CPU device only (target `{}`)",
            req.target.name
        )));
    }
    let mut slots = Vec::with_capacity(req.slots());
    let mut inputs = Vec::with_capacity(req.slots());
    for i in 0..req.slots() {
        let Some(d) = req.input(i) else {
            slots.push(None);
            inputs.push(None);
            continue;
        };
        let Some(bytes) = req.value(i) else {
            // Only string inputs come with their value: a request without strings in is
            // another plugin's (numeric Equal, LabelEncoder), or needs a constant input.
            return Err(OpError::UnsupportedDtype(format!(
                "{op}: input {i} is {} without a value known when planning; the text plugin \
                 serves string inputs (and other inputs whose value is a constant)",
                dtype::name(d.dtype)
            )));
        };
        inputs.push(Some(value::from_bytes(d.dtype, &d.shape, bytes)?));
        slots.push(Some(Slot {
            dtype: d.dtype,
            shape: d.shape.clone(),
            text_bytes: d.text_bytes,
        }));
    }
    let attrs = req
        .attributes
        .iter()
        .map(|a| Ok((a.name.clone(), attr(op, &a.name, &a.value)?)))
        .collect::<Result<Vec<_>, OpError>>()?;
    let mut call = Call {
        op: index as u8,
        inputs: slots,
        outputs: Vec::new(),
        attrs,
    };
    let results = run(&call, &inputs)?;
    let outputs: Vec<TensorDesc> = results
        .iter()
        .enumerate()
        .map(|(k, v)| {
            let (dt, text_bytes, _) = value::to_bytes(v);
            TensorDesc {
                text_bytes,
                ..TensorDesc::new(format!("output{k}"), v.shape().to_vec(), dt)
            }
        })
        .collect();
    call.outputs = outputs
        .iter()
        .map(|o| Slot {
            dtype: o.dtype,
            shape: o.shape.clone(),
            text_bytes: o.text_bytes,
        })
        .collect();
    let record = crate::wire::encode(&call);
    let mut p = ParamPacker::new();
    for i in 0..req.slots() {
        if let Some(b) = req.binding(i) {
            p.ptr(b, Access::Read);
        }
    }
    for k in 0..outputs.len() {
        p.ptr(req.output_binding(k), Access::Write);
    }
    p.u32(record.len() as u32);
    for w in record.chunks(4) {
        let mut word = [0u8; 4];
        word[..w.len()].copy_from_slice(w);
        p.u32(u32::from_le_bytes(word));
    }
    let (params, relocations) = p.finish(req.target.limits.max_param_bytes).map_err(|e| {
        OpError::InvalidAttribute(format!(
            "{op}: its attributes and inputs take {} bytes of kernel parameters, more than the \
             target's {} ({e:?})",
            record.len(),
            req.target.limits.max_param_bytes
        ))
    })?;
    Ok(OpPlan {
        outputs,
        launches: vec![Launch {
            module_id: MODULE.into(),
            entry_point: ENTRY.into(),
            grid: Dim3::x(1),
            block: Dim3::x(1),
            shared_memory: 0,
            params,
            relocations,
        }],
        workspace_bytes: 0,
    })
}

fn size_of(s: &Slot) -> Result<u64, OpError> {
    let n = s.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
    n.and_then(|n| dtype::byte_len(s.dtype, n))
        .and_then(|b| b.checked_add(s.text_bytes))
        .ok_or_else(|| OpError::internal("text kernel: a size overflows"))
}

/// The CPU kernel: reads every input whole, runs the op, writes every output whole.
pub fn run_cpu(c: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    if c.module_id != MODULE || c.entry_point != ENTRY {
        return Err(OpError::internal(format!(
            "unknown kernel `{}` of module `{}`",
            c.entry_point, c.module_id
        )));
    }
    let bufs = umd_sdk::cpu::Buffers::new(c);
    let mut r = ParamReader::new(&c.params, &c.relocations);
    let ptrs = (0..c.relocations.len())
        .map(|_| r.ptr())
        .collect::<Result<Vec<_>, _>>()?;
    let len = r.u32()? as usize;
    let mut record = Vec::with_capacity(len + 4);
    while record.len() < len {
        record.extend_from_slice(&r.u32()?.to_le_bytes());
    }
    record.truncate(len);
    let call = crate::wire::decode(&record)?;
    let present: Vec<&Slot> = call.inputs.iter().flatten().collect();
    if ptrs.len() != present.len() + call.outputs.len() {
        return Err(OpError::internal(
            "text kernel: bindings do not match the call record",
        ));
    }
    let mut next = ptrs.iter();
    let mut inputs = Vec::with_capacity(call.inputs.len());
    for s in &call.inputs {
        inputs.push(match s {
            None => None,
            Some(s) => {
                let size = size_of(s)?;
                let b = *next.next().expect("counted");
                let bytes = &bufs.input(b, size)?[..size as usize];
                Some(value::from_bytes(s.dtype, &s.shape, bytes)?)
            }
        });
    }
    let results = run(&call, &inputs)?;
    let mut writes = Vec::with_capacity(results.len());
    for (k, (v, planned)) in results.iter().zip(&call.outputs).enumerate() {
        let (dt, text_bytes, data) = value::to_bytes(v);
        if dt != planned.dtype || v.shape() != planned.shape || text_bytes != planned.text_bytes {
            return Err(OpError::internal(format!(
                "text kernel: output {k} is {}{:?} with {text_bytes} text bytes, the plan \
                 sized {}{:?} with {} (the inputs changed since planning)",
                dtype::name(dt),
                v.shape(),
                dtype::name(planned.dtype),
                planned.shape,
                planned.text_bytes
            )));
        }
        let mut w = bufs.output(*next.next().expect("counted"), data.len() as u64)?;
        w.data.copy_from_slice(&data);
        writes.push(w);
    }
    Ok(writes)
}
