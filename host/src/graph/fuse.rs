//! Fusing several command buffers into one: the launches of `parts`, in order, over one binding
//! per value. Used by graph compilation (a segment of nodes) and by `SubmitBatch` groups (a
//! client's op-by-op stream). Pure: no device, no allocation of buffers.

use crate::cmdbuf::{Binding, CmdError, CommandBuffer, Role};
use crate::target::Target;

/// One command buffer to fuse: binding `b` of `cmd` is the value `values[b]` (caller's keys:
/// the same key in two parts is one binding of the result).
pub struct Part<'a> {
    pub cmd: &'a CommandBuffer,
    pub values: &'a [usize],
}

/// The fused command buffer and the value of each of its bindings (inputs first: values only
/// read; then the values some part writes, as outputs).
pub struct Fused {
    pub cmd: CommandBuffer,
    pub values: Vec<usize>,
}

/// Fuses `parts` for `target` (checked against its limits). Every value takes its description
/// from the first part binding it.
pub fn fuse(target: &Target, parts: &[Part]) -> Result<Fused, CmdError> {
    let mut keys: Vec<usize> = Vec::new();
    let mut written: Vec<bool> = Vec::new();
    let mut descs = Vec::new();
    let mut locals = Vec::with_capacity(parts.len());
    for p in parts {
        if p.values.len() != p.cmd.bindings.len() {
            return Err(CmdError::Invalid(format!(
                "{} values for {} bindings",
                p.values.len(),
                p.cmd.bindings.len()
            )));
        }
        let mut local = Vec::with_capacity(p.values.len());
        for (&k, binding) in p.values.iter().zip(&p.cmd.bindings) {
            let pos = keys.iter().position(|&x| x == k).unwrap_or_else(|| {
                keys.push(k);
                written.push(false);
                descs.push(binding.desc.clone());
                keys.len() - 1
            });
            if binding.role != Role::Input {
                written[pos] = true;
            }
            local.push(pos);
        }
        locals.push(local);
    }
    // Inputs first, then outputs (the format's order).
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by_key(|&k| written[k]);
    let mut index_of = vec![0u32; keys.len()];
    for (pos, &k) in order.iter().enumerate() {
        index_of[k] = pos as u32;
    }
    let bindings = order
        .iter()
        .map(|&k| Binding {
            role: if written[k] {
                Role::Output
            } else {
                Role::Input
            },
            desc: descs[k].clone(),
        })
        .collect();
    let mut launches = Vec::new();
    for (p, local) in parts.iter().zip(&locals) {
        for l in &p.cmd.launches {
            let mut l = l.clone();
            for r in &mut l.relocations {
                let b = local.get(r.binding as usize).ok_or_else(|| {
                    CmdError::Invalid(format!("relocation to missing binding {}", r.binding))
                })?;
                r.binding = index_of[*b];
            }
            launches.push(l);
        }
    }
    let cmd = CommandBuffer {
        target: target.name.clone(),
        bindings,
        launches,
    };
    cmd.validate(Some(&target.limits))?;
    Ok(Fused {
        cmd,
        values: order.iter().map(|&k| keys[k]).collect(),
    })
}
