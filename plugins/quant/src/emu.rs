//! Vectors for `plugins/norm/tools/cuda_emu.py` (runs CUDA modules as C++ on the host, with
//! AddressSanitizer): when `UMD_DUMP_VECTORS` names a directory, every launch of a set of plans
//! is written as one case — its inputs are the buffers as the CPU kernels left them before the
//! launch, its expected outputs what the CPU kernel writes — plus a one-block-grid variant (the
//! grid-stride loops). `umd_sdk::emu_vectors::dump_case` takes single-launch plans only; this
//! is its multi-launch form. Outputs the script cannot decode are compared as raw bytes (`u8`).

use std::fmt::Write as _;

use umd_sdk::kernel::binding_access;
use umd_sdk::{
    Access, CpuBuffer, CpuCall, Dim3, Dtype, PlanRequestExt, Plugin, dtype, shape, testing,
};

fn hex(b: &[u8]) -> String {
    if b.is_empty() {
        return "-".into();
    }
    b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

/// The script's name for comparing a buffer of `dt`.
fn label(dt: Dtype) -> &'static str {
    match dt {
        Dtype::F32
        | Dtype::F64
        | Dtype::F16
        | Dtype::Bf16
        | Dtype::I32
        | Dtype::I64
        | Dtype::I8 => dtype::name(dt),
        _ => "u8",
    }
}

/// Appends a case per launch of `req`'s plan (planned for `cuda:sm_90`); `ws_label` names the
/// workspace's comparison dtype for a launch's entry point. Launches that read and write one
/// binding are run but not dumped (the script gives written buffers fresh contents).
pub fn dump_plan<P: Plugin>(
    out: &mut String,
    dir: &str,
    name: &str,
    req: &PlanRequestExt,
    inputs: &[Vec<u8>],
    ws_label: impl Fn(&str) -> &'static str,
) {
    let mut req = req.clone();
    req.target = testing::cuda_target("sm_90");
    let plan = P::plan_ext(&req).unwrap_or_else(|e| panic!("{name}: {e:?}"));
    let mut bufs: Vec<Vec<u8>> = inputs.to_vec();
    for o in &plan.outputs {
        bufs.push(vec![
            0;
            shape::byte_size(&o.shape, o.dtype).unwrap() as usize
        ]);
    }
    if plan.workspace_bytes > 0 {
        bufs.push(vec![0; plan.workspace_bytes as usize]);
    }
    let present: Vec<Dtype> = req.present().map(|d| d.dtype).collect();
    let label_of = |b: usize, entry: &str| -> &'static str {
        if b < present.len() {
            label(present[b])
        } else if b < present.len() + plan.outputs.len() {
            label(plan.outputs[b - present.len()].dtype)
        } else {
            ws_label(entry)
        }
    };
    for (li, l) in plan.launches.iter().enumerate() {
        let mut bound: Vec<u32> = l.relocations.iter().map(|r| r.binding).collect();
        bound.sort_unstable();
        bound.dedup();
        let access = |b: u32| binding_access(&l.relocations, b);
        let call = CpuCall {
            module_id: l.module_id.clone(),
            entry_point: l.entry_point.clone(),
            grid: l.grid,
            block: l.block,
            params: l.params.clone(),
            relocations: l.relocations.clone(),
            buffers: bound
                .iter()
                .map(|&b| CpuBuffer {
                    binding: b,
                    size: bufs[b as usize].len() as u64,
                    data: if access(b) != Access::Write {
                        bufs[b as usize].clone()
                    } else {
                        Vec::new()
                    },
                })
                .collect(),
        };
        let writes = P::run_cpu(call).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let dumpable = bound.iter().all(|&b| access(b) != Access::ReadWrite);
        let src = P::kernel_source(&l.module_id, &req.target).unwrap();
        std::fs::write(format!("{dir}/{}.cu", l.module_id), &src.code).unwrap();
        let grids = if l.grid.x > 1 {
            vec![l.grid, Dim3::x(1)]
        } else {
            vec![l.grid]
        };
        for (gi, g) in grids.iter().enumerate().filter(|_| dumpable) {
            let _ = writeln!(
                out,
                "case {name}-l{li}-g{gi}\nmodule {}\nentry {}",
                l.module_id, l.entry_point
            );
            let _ = writeln!(
                out,
                "grid {} {} {}\nblock {} {} {}",
                g.x, g.y, g.z, l.block.x, l.block.y, l.block.z
            );
            let _ = writeln!(out, "params {}", hex(&l.params));
            for r in &l.relocations {
                let _ = writeln!(out, "reloc {} {}", r.offset, r.binding);
            }
            for &b in bound.iter().filter(|&&b| access(b) == Access::Read) {
                let _ = writeln!(out, "in {b} {}", hex(&bufs[b as usize]));
            }
            for w in &writes {
                let _ = writeln!(out, "out {} {}", w.binding, w.data.len());
                let lab = label_of(w.binding as usize, &l.entry_point);
                let _ = writeln!(out, "expect {} {lab} {}", w.binding, hex(&w.data));
            }
            out.push_str("end\n");
        }
        for w in writes {
            bufs[w.binding as usize] = w.data;
        }
    }
}
