//! A native test harness for plugins: plan a request with a [`Plugin`] and run every launch of
//! the plan through its CPU kernels, exactly as the host's CPU device does (bindings numbered
//! present inputs, outputs, workspace; each launch sees the buffers its relocations name; a
//! written buffer must come back whole). Runs in `cargo test` of a plugin crate: no host, no wasm.
//!
//! ```ignore
//! let req = PlanRequestExt::builder("Relu").input(x_desc).build(Target::cpu());
//! let (plan, outputs) = umd_sdk::testing::run::<MyPlugin>(&req, &[x_bytes])?;
//! ```

use crate::{CpuBuffer, CpuCall, CpuWrite, OpError, OpPlan, PlanRequestExt, Plugin};

/// Plans `request` with `P` and runs the plan on `inputs` (one byte vector per *present* input).
/// Returns the plan and the contents of every output.
pub fn run<P: Plugin>(
    request: &PlanRequestExt,
    inputs: &[Vec<u8>],
) -> Result<(OpPlan, Vec<Vec<u8>>), OpError> {
    let plan = crate::plan_checked::<P>(request)?;
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
    run_kernels::<P>(plan, inputs, 0, |blocks, split| {
        let parts = if split && blocks > 1 { 3 } else { 1 };
        (0..parts)
            .map(|p| crate::kernel::part(blocks, parts, p))
            .collect()
    })
}

/// [`execute_kernels`] with the cuts chosen and unwritten bytes made visible: a splittable
/// launch runs as the block ranges [`cut`] makes of its grid at the fractions `cuts` (last range
/// first), every other launch whole; every buffer the plan writes (outputs, workspace) starts
/// filled with `fill` instead of zeros, so a byte no range writes shows up as a wrong result.
/// Returns every output's bytes.
pub fn execute_kernels_cut<P: Plugin>(
    plan: &OpPlan,
    inputs: &[Vec<u8>],
    cuts: &[f64],
    fill: u8,
) -> Result<Vec<Vec<u8>>, OpError> {
    run_kernels::<P>(plan, inputs, fill, |blocks, split| {
        cut(blocks, if split { cuts } else { &[] })
    })
}

/// The block ranges of a grid of `blocks` cut at the fractions `cuts` of it (ascending, each in
/// [0, 1]; cuts that fall on the same block make no empty range): `[]` is the whole grid,
/// `[0.5]` its two halves.
pub fn cut(blocks: u64, cuts: &[f64]) -> Vec<std::ops::Range<u64>> {
    let mut at: Vec<u64> = cuts
        .iter()
        .map(|f| ((blocks as f64 * f) as u64).min(blocks))
        .collect();
    at.insert(0, 0);
    at.push(blocks);
    at.dedup();
    at.windows(2).map(|w| w[0]..w[1]).collect()
}

/// Runs every launch of `plan` through `P::run_kernel` as the block ranges `ranges(blocks,
/// splittable)` gives, last first, on buffers whose written bindings start as `fill`.
fn run_kernels<P: Plugin>(
    plan: &OpPlan,
    inputs: &[Vec<u8>],
    fill: u8,
    ranges: impl Fn(u64, bool) -> Vec<std::ops::Range<u64>>,
) -> Result<Vec<Vec<u8>>, OpError> {
    use crate::KernelCall;
    use crate::kernel::HeapMemory;
    let mut buffers = bind(plan, inputs, fill)?;
    for l in &plan.launches {
        check_relocations(l, buffers.len())?;
        let (mut mem, sizes) = HeapMemory::for_launch(l, buffers.clone());
        let split = P::splittable(&l.module_id, &l.entry_point);
        // Reversed order: a kernel whose blocks are not independent shows up as a wrong result.
        for r in ranges(l.grid.volume(), split).into_iter().rev() {
            let call = KernelCall::for_launch(l, &sizes, r);
            P::run_kernel(&call, &mut mem)?;
        }
        for b in &sizes {
            buffers[b.binding as usize] = mem.contents(b.binding).unwrap_or_default().to_vec();
        }
    }
    Ok(outputs(plan, inputs.len(), buffers))
}

/// Runs `plan` on `inputs` with the `run-cpu` style kernel entry `run_cpu` (ABI 1.0–1.2: each
/// launch gets the contents of the buffers it reads and returns every buffer it writes, whole);
/// returns every output's bytes.
pub fn execute(
    plan: &OpPlan,
    inputs: &[Vec<u8>],
    run_cpu: impl Fn(CpuCall) -> Result<Vec<CpuWrite>, OpError>,
) -> Result<Vec<Vec<u8>>, OpError> {
    let mut buffers = bind(plan, inputs, 0)?;
    for l in &plan.launches {
        check_relocations(l, buffers.len())?;
        let mut bound: Vec<u32> = l.relocations.iter().map(|r| r.binding).collect();
        bound.sort_unstable();
        bound.dedup();
        let call_buffers = bound
            .iter()
            .map(|&b| {
                let data = &buffers[b as usize];
                let reads =
                    crate::kernel::binding_access(&l.relocations, b) != crate::Access::Write;
                CpuBuffer {
                    binding: b,
                    size: data.len() as u64,
                    data: if reads { data.clone() } else { Vec::new() },
                }
            })
            .collect();
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
    Ok(outputs(plan, inputs.len(), buffers))
}

/// The buffers of a plan's bindings: the inputs, then the outputs and the workspace, every byte
/// `fill`.
fn bind(plan: &OpPlan, inputs: &[Vec<u8>], fill: u8) -> Result<Vec<Vec<u8>>, OpError> {
    let mut buffers: Vec<Vec<u8>> = inputs.to_vec();
    for o in &plan.outputs {
        let bytes = o.byte_size()?;
        buffers.push(vec![fill; bytes as usize]);
    }
    if plan.workspace_bytes > 0 {
        buffers.push(vec![fill; plan.workspace_bytes as usize]);
    }
    Ok(buffers)
}

/// Refuses a launch naming a binding the plan does not have.
fn check_relocations(l: &crate::Launch, bindings: usize) -> Result<(), OpError> {
    match l
        .relocations
        .iter()
        .find(|r| r.binding as usize >= bindings)
    {
        Some(r) => Err(OpError::internal(format!(
            "relocation names binding {}, which does not exist",
            r.binding
        ))),
        None => Ok(()),
    }
}

/// The outputs' contents among all bindings' (inputs first).
fn outputs(plan: &OpPlan, inputs: usize, buffers: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    buffers
        .into_iter()
        .skip(inputs)
        .take(plan.outputs.len())
        .collect()
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
    let plan = crate::plan_checked::<P>(&req)?;
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

/// `n` f32s that catch the differences a vector kernel may make to a scalar loop: repeated
/// values (ties), `-0` beside `0`, and NaNs of distinct payloads, among small integers.
pub fn awkward_f32s(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| match i % 11 {
            3 => f32::from_bits(0x7fc0_0001 + i as u32),
            5 => -0.0,
            6 => 0.0,
            _ => ((i * 7919) % 13) as f32 - 6.0,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::cut;

    #[test]
    fn cuts_make_ranges_covering_the_grid() {
        assert_eq!(cut(10, &[]), vec![0..10]);
        assert_eq!(cut(10, &[0.37]), vec![0..3, 3..10]);
        assert_eq!(cut(10, &[0.09, 0.61]), vec![0..6, 6..10]);
        assert_eq!(cut(10, &[0.5, 0.5001]), vec![0..5, 5..10]);
        assert_eq!(cut(1, &[0.3]), vec![0..1]);
    }
}
