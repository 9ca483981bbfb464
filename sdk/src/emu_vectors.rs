//! Vectors for the CUDA emulators of the plugins' `tools/cuda_emu.py`, which run a plugin's CUDA
//! modules as C++ on the host: [`dump_case`] plans a request for `cuda:sm_90`, runs it on the
//! plugin's CPU kernels, writes each module to `<dir>/<module>.cu` and appends one case (launch,
//! parameter block, relocations, inputs, expected outputs) to a text dump. Native builds only.

use std::fmt::Write as _;

use crate::{Dim3, PlanRequestExt, Plugin, dtype, testing};

fn hex(b: &[u8]) -> String {
    if b.is_empty() {
        return "-".into();
    }
    b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

/// Appends the case `name` (the single launch of `req`'s plan, with `grid` if given) to `out`.
pub fn dump_case<P: Plugin>(
    out: &mut String,
    dir: &str,
    name: &str,
    req: &PlanRequestExt,
    inputs: &[Vec<u8>],
    grid: Option<Dim3>,
) {
    let mut req = req.clone();
    req.target = testing::cuda_target("sm_90");
    let plan = P::plan_ext(&req).unwrap_or_else(|e| panic!("{name}: {e:?}"));
    let outs = testing::execute(&plan, inputs, P::run_cpu).unwrap();
    assert_eq!(plan.launches.len(), 1, "{name}: one launch");
    let l = &plan.launches[0];
    let src = P::kernel_source(&l.module_id, &req.target).unwrap();
    std::fs::write(format!("{dir}/{}.cu", l.module_id), &src.code).unwrap();
    let g = grid.unwrap_or(l.grid);
    let _ = writeln!(
        out,
        "case {name}\nmodule {}\nentry {}",
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
    let bound = |b: usize| l.relocations.iter().any(|r| r.binding as usize == b);
    for (b, data) in inputs.iter().enumerate().filter(|(b, _)| bound(*b)) {
        let _ = writeln!(out, "in {b} {}", hex(data));
    }
    for (k, (desc, data)) in plan.outputs.iter().zip(&outs).enumerate() {
        let b = inputs.len() + k;
        if bound(b) {
            let _ = writeln!(out, "out {b} {}", data.len());
            let _ = writeln!(out, "expect {b} {} {}", dtype::name(desc.dtype), hex(data));
        }
    }
    out.push_str("end\n");
}
