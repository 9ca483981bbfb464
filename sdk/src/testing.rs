//! A native test harness for plugins: plan a request with a [`Plugin`] and run every launch of
//! the plan through its CPU kernels, exactly as the host's CPU device does (bindings numbered
//! present inputs, outputs, workspace; each launch sees the buffers its relocations name; a
//! written buffer must come back whole). Runs in `cargo test` of a plugin crate: no host, no wasm.
//!
//! ```ignore
//! let req = PlanRequestExt::builder("Relu").input(x_desc).build(Target::cpu());
//! let (plan, outputs) = umd_sdk::testing::run::<MyPlugin>(&req, &[x_bytes])?;
//! ```

use crate::{CpuBuffer, CpuCall, CpuWrite, OpError, OpPlan, PlanRequestExt, Plugin, shape};

/// Plans `request` with `P` and runs the plan on `inputs` (one byte vector per *present* input).
/// Returns the plan and the contents of every output.
pub fn run<P: Plugin>(
    request: &PlanRequestExt,
    inputs: &[Vec<u8>],
) -> Result<(OpPlan, Vec<Vec<u8>>), OpError> {
    let plan = P::plan_ext(request)?;
    let outputs = execute_kernels::<P>(&plan, inputs)?;
    Ok((plan, outputs))
}

/// Runs `plan` on `inputs` through `P`'s in-place kernels ([`Plugin::run_kernel`]), as a host
/// of ABI 1.3 does: a launch `P` calls [`Plugin::splittable`] runs as several block ranges, in
/// reverse order (a kernel whose blocks are not independent shows up as a wrong result); every
/// other launch runs whole. Returns every output's bytes.
pub fn execute_kernels<P: Plugin>(
    plan: &OpPlan,
    inputs: &[Vec<u8>],
) -> Result<Vec<Vec<u8>>, OpError> {
    use crate::kernel::{HeapMemory, binding_access};
    use crate::{BlockRange, BoundBuffer, KernelCall};
    let mut buffers: Vec<Vec<u8>> = inputs.to_vec();
    for o in &plan.outputs {
        buffers.push(vec![0; shape::byte_size(&o.shape, o.dtype)? as usize]);
    }
    if plan.workspace_bytes > 0 {
        buffers.push(vec![0; plan.workspace_bytes as usize]);
    }
    for l in &plan.launches {
        let mut bound: Vec<u32> = l.relocations.iter().map(|r| r.binding).collect();
        bound.sort_unstable();
        bound.dedup();
        let mut held = Vec::with_capacity(bound.len());
        for &b in &bound {
            let data = buffers.get_mut(b as usize).ok_or_else(|| {
                OpError::internal(format!(
                    "relocation names binding {b}, which does not exist"
                ))
            })?;
            held.push((b, binding_access(&l.relocations, b), std::mem::take(data)));
        }
        let call = |first: u64, count: u64| KernelCall {
            module_id: l.module_id.clone(),
            entry_point: l.entry_point.clone(),
            grid: l.grid,
            block: l.block,
            params: l.params.clone(),
            relocations: l.relocations.clone(),
            buffers: held
                .iter()
                .map(|(b, _, d)| BoundBuffer {
                    binding: *b,
                    size: d.len() as u64,
                })
                .collect(),
            blocks: BlockRange { first, count },
        };
        let blocks = l.grid.volume();
        let mut mem = HeapMemory::new(held.iter().map(|(b, a, d)| (*b, *a, d.clone())));
        if P::splittable(&l.module_id, &l.entry_point) && blocks > 1 {
            // Three uneven parts, last first.
            let cuts = [0, blocks / 3, blocks / 3 + blocks / 2, blocks];
            for w in cuts.windows(2).rev().filter(|w| w[1] > w[0]) {
                P::run_kernel(&call(w[0], w[1] - w[0]), &mut mem)?;
            }
        } else {
            P::run_kernel(&call(0, blocks), &mut mem)?;
        }
        for (b, _, _) in &held {
            buffers[*b as usize] = mem.contents(*b).unwrap_or_default().to_vec();
        }
    }
    let first_output = inputs.len();
    Ok(buffers
        .into_iter()
        .skip(first_output)
        .take(plan.outputs.len())
        .collect())
}

/// Runs `plan` on `inputs` with the CPU kernel entry `run_cpu`; returns every output's bytes.
pub fn execute(
    plan: &OpPlan,
    inputs: &[Vec<u8>],
    run_cpu: impl Fn(CpuCall) -> Result<Vec<CpuWrite>, OpError>,
) -> Result<Vec<Vec<u8>>, OpError> {
    let mut buffers: Vec<Vec<u8>> = inputs.to_vec();
    for o in &plan.outputs {
        buffers.push(vec![0; shape::byte_size(&o.shape, o.dtype)? as usize]);
    }
    if plan.workspace_bytes > 0 {
        buffers.push(vec![0; plan.workspace_bytes as usize]);
    }
    for l in &plan.launches {
        let mut bound: Vec<u32> = l.relocations.iter().map(|r| r.binding).collect();
        bound.sort_unstable();
        bound.dedup();
        let mut call_buffers = Vec::with_capacity(bound.len());
        for &b in &bound {
            let data = buffers.get(b as usize).ok_or_else(|| {
                OpError::internal(format!(
                    "relocation names binding {b}, which does not exist"
                ))
            })?;
            let reads = l
                .relocations
                .iter()
                .any(|r| r.binding == b && r.access != crate::Access::Write);
            call_buffers.push(CpuBuffer {
                binding: b,
                size: data.len() as u64,
                data: if reads { data.clone() } else { Vec::new() },
            });
        }
        let writes = run_cpu(CpuCall {
            module_id: l.module_id.clone(),
            entry_point: l.entry_point.clone(),
            grid: l.grid,
            block: l.block,
            params: l.params.clone(),
            relocations: l.relocations.clone(),
            buffers: call_buffers,
        })?;
        for w in writes {
            let target = buffers.get_mut(w.binding as usize).ok_or_else(|| {
                OpError::internal(format!(
                    "kernel wrote binding {}, which does not exist",
                    w.binding
                ))
            })?;
            if w.data.len() != target.len() {
                return Err(OpError::internal(format!(
                    "kernel wrote {} bytes to binding {} of {} bytes (the host refuses this)",
                    w.data.len(),
                    w.binding,
                    target.len()
                )));
            }
            *target = w.data;
        }
    }
    let first_output = inputs.len();
    Ok(buffers
        .into_iter()
        .skip(first_output)
        .take(plan.outputs.len())
        .collect())
}

/// A `cuda:sm_XY` target with the common CUDA limits (for planning in tests).
pub fn cuda_target(arch: &str) -> crate::Target {
    crate::Target {
        name: format!("cuda:{arch}"),
        arch: arch.into(),
        limits: crate::TargetLimits::cuda(132),
    }
}

/// Plans `request` for `cuda:sm_90` with `P` and returns the source of every module the plan
/// names (checking the CUDA path without a GPU). When `UMD_DUMP_CUDA` names a directory, each
/// module is also written there as `<module-id>.cu` (for `scripts/nvrtc_check.py`).
pub fn cuda_sources<P: Plugin>(
    request: &PlanRequestExt,
) -> Result<Vec<(String, crate::ModuleSource)>, OpError> {
    let target = cuda_target("sm_90");
    let mut req = request.clone();
    req.target = target.clone();
    let plan = P::plan_ext(&req)?;
    let mut out: Vec<(String, crate::ModuleSource)> = Vec::new();
    for l in &plan.launches {
        if out.iter().any(|(id, _)| *id == l.module_id) {
            continue;
        }
        let src = P::kernel_source(&l.module_id, &target)?;
        if !src.entry_points.contains(&l.entry_point) {
            return Err(OpError::internal(format!(
                "module `{}` does not list entry point `{}`",
                l.module_id, l.entry_point
            )));
        }
        if let Ok(dir) = std::env::var("UMD_DUMP_CUDA") {
            let path = std::path::Path::new(&dir).join(format!("{}.cu", l.module_id));
            std::fs::create_dir_all(&dir)
                .and_then(|_| std::fs::write(&path, &src.code))
                .map_err(|e| OpError::internal(format!("writing {}: {e}", path.display())))?;
        }
        out.push((l.module_id.clone(), src));
    }
    Ok(out)
}
