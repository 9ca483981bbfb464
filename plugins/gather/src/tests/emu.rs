//! Dumps every launch of every replayed ONNX case (planned for CUDA) with the buffers it reads
//! and the CPU kernels' results, for `tools/cuda_emu.py`, which runs the CUDA modules as C++ on
//! the same parameter blocks and compares. Runs only when `UMD_DUMP_VECTORS` names a directory.
//!
//! File format (one launch): `module ID`, `entry NAME`, `params HEX`, `reloc OFFSET BINDING`…,
//! `buf BINDING HEX` (read bindings) or `out BINDING SIZE` (write-only ones), `want BINDING HEX`.

use std::fmt::Write as _;

use umd_sdk::{Access, CpuBuffer, CpuCall, Plugin, shape};

use super::onnx;
use crate::GatherPlugin;

fn hex(b: &[u8]) -> String {
    b.iter()
        .fold(String::with_capacity(2 * b.len()), |mut s, x| {
            let _ = write!(s, "{x:02x}");
            s
        })
}

#[test]
fn dump_vectors() {
    let Ok(dir) = std::env::var("UMD_DUMP_VECTORS") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    let mut count = 0;
    for c in onnx::cases() {
        let (mut req, data) = onnx::request(&c);
        req.target = umd_sdk::testing::cuda_target("sm_90");
        let plan = GatherPlugin::plan_ext(&req).unwrap();
        let mut bufs = data.clone();
        for o in &plan.outputs {
            bufs.push(vec![
                0;
                shape::byte_size(&o.shape, o.dtype).unwrap() as usize
            ]);
        }
        for (li, l) in plan.launches.iter().enumerate() {
            let mut bound: Vec<u32> = l.relocations.iter().map(|r| r.binding).collect();
            bound.sort_unstable();
            bound.dedup();
            let reads = |b: u32| {
                l.relocations
                    .iter()
                    .any(|r| r.binding == b && r.access != Access::Write)
            };
            let mut f = format!(
                "module {}\nentry {}\nparams {}\n",
                l.module_id,
                l.entry_point,
                hex(&l.params)
            );
            for r in &l.relocations {
                let _ = writeln!(f, "reloc {} {}", r.offset, r.binding);
            }
            let mut call_bufs = Vec::new();
            for &b in &bound {
                let d = &bufs[b as usize];
                if reads(b) {
                    let _ = writeln!(f, "buf {b} {}", hex(d));
                } else {
                    let _ = writeln!(f, "out {b} {}", d.len());
                }
                call_bufs.push(CpuBuffer {
                    binding: b,
                    size: d.len() as u64,
                    data: if reads(b) { d.clone() } else { vec![] },
                });
            }
            let writes = GatherPlugin::run_cpu(CpuCall {
                module_id: l.module_id.clone(),
                entry_point: l.entry_point.clone(),
                grid: l.grid,
                block: l.block,
                params: l.params.clone(),
                relocations: l.relocations.clone(),
                buffers: call_bufs,
            })
            .unwrap();
            for w in writes {
                let _ = writeln!(f, "want {} {}", w.binding, hex(&w.data));
                bufs[w.binding as usize] = w.data;
            }
            std::fs::write(format!("{dir}/{}_{li}.case", c.name), f).unwrap();
            count += 1;
        }
    }
    eprintln!("{count} launches dumped to {dir}");
}
