//! Vectors for `tools/cuda_emu.py`, which runs the CUDA modules as C++ on the host: with
//! `UMD_DUMP_VECTORS=<dir>`, every op × dtype on flat, scalar, strided, 64-bit-strided and empty
//! shapes is planned and run on the CPU kernels, and `<dir>/cases.txt` gets its buffers,
//! launches (parameter blocks, relocations) and the CPU's outputs; `<dir>/<module>.cu` each
//! module used. Without the variable the test does nothing.
//!
//! Format, one item a line: `case NAME`, `buf BINDING SIZE x<hex>|-` (`-`: an output),
//! `launch MODULE ENTRY x<params hex> OFFSET:BINDING,…`, `expect BINDING DTYPE x<hex>`, `end`.

use super::*;
use crate::bcast::{Geometry, Mode};
use crate::ops::{Form, NUMERIC, ONNX_OPS};
use std::fmt::Write as _;
use umd_sdk::dtype::encode;
use umd_sdk::params::ParamPacker;

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(1 + 2 * b.len());
    s.push('x');
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}

/// The requests of every case: (name, op, inputs with their value kinds, attributes).
type Case = (
    String,
    String,
    Vec<(Vec<u64>, Dtype, Kind)>,
    Vec<(&'static str, AttrValueExt)>,
);

fn cases() -> Vec<Case> {
    use Kind::*;
    let pairs: &[(&[u64], &[u64])] = &[
        (&[2, 3], &[2, 3]),
        (&[5], &[]),
        (&[2, 1, 4], &[3, 1]),
        (&[2, 0], &[0]),
    ];
    let prelu_pairs: &[(&[u64], &[u64])] = &[
        (&[2, 3], &[2, 3]),
        (&[5], &[]),
        (&[2, 3, 4], &[3, 1]),
        (&[2, 3, 2], &[3]),
    ];
    let mut out: Vec<Case> = Vec::new();
    let mut push =
        |op: &str, ins: Vec<(Vec<u64>, Dtype, Kind)>, attrs: Vec<(&'static str, AttrValueExt)>| {
            let name = format!(
                "{op}{attrs:?} {:?}",
                ins.iter()
                    .map(|(s, d, _)| (s.clone(), *d))
                    .collect::<Vec<_>>()
            );
            out.push((name, op.to_string(), ins, attrs));
        };
    for op in ONNX_OPS {
        for &dt in op.dtypes {
            let attr_sets: Vec<Vec<(&'static str, AttrValueExt)>> = match op.form {
                Form::Mod => vec![vec![], vec![("fmod", int(1))]],
                Form::BitShift => ["LEFT", "RIGHT"]
                    .iter()
                    .map(|d| vec![("direction", AttrValueExt::Text(d.to_string()))])
                    .collect(),
                _ => vec![vec![]],
            };
            match op.form {
                Form::Variadic { .. } => {
                    let sets: &[&[&[u64]]] = &[
                        &[&[2, 3]],
                        &[&[2, 3], &[3]],
                        &[&[4], &[2, 1], &[], &[3, 1, 1]],
                    ];
                    for set in sets {
                        push(
                            op.name,
                            set.iter().map(|s| (s.to_vec(), dt, Any)).collect(),
                            vec![],
                        );
                    }
                }
                Form::Where => {
                    let sets: &[[&[u64]; 3]] = &[
                        [&[2, 1], &[3], &[]],
                        [&[3, 1, 2], &[1, 4, 1], &[2]],
                        [&[2, 2], &[2, 2], &[2, 2]],
                    ];
                    for [c, x, y] in sets {
                        let ins = vec![
                            (c.to_vec(), Dtype::Boolean, Any),
                            (x.to_vec(), dt, Any),
                            (y.to_vec(), dt, Any),
                        ];
                        push(op.name, ins, vec![]);
                    }
                }
                _ => {
                    let ydts: &[Dtype] = if op.form == Form::Pow { NUMERIC } else { &[dt] };
                    let ps = if op.form == Form::PRelu {
                        prelu_pairs
                    } else {
                        pairs
                    };
                    let yk = match op.form {
                        Form::Pow => Exp,
                        Form::BitShift => Shift,
                        _ => Any,
                    };
                    for attrs in &attr_sets {
                        for &ydt in ydts {
                            for (a, b) in ps {
                                push(
                                    op.name,
                                    vec![(a.to_vec(), dt, Any), (b.to_vec(), ydt, yk)],
                                    attrs.clone(),
                                );
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// `launch` re-packed in `mode` (a single-launch plan over `shapes` broadcast to `out`).
fn repack(launch: &umd_sdk::Launch, out: &[u64], shapes: &[&[u64]], mode: Mode) -> umd_sdk::Launch {
    let g = Geometry::broadcast(out, shapes).unwrap();
    let mut p = ParamPacker::new();
    for r in &launch.relocations {
        p.ptr(r.binding, r.access);
    }
    g.pack_as(&mut p, mode);
    let (params, relocations) = p.finish(4096).unwrap();
    let base = launch
        .entry_point
        .trim_end_matches("_bcast64")
        .trim_end_matches("_bcast");
    umd_sdk::Launch {
        entry_point: format!("{base}{}", mode.suffix()),
        params,
        relocations,
        ..launch.clone()
    }
}

#[test]
fn dump_vectors_for_the_cuda_emulator() {
    let Ok(dir) = std::env::var("UMD_DUMP_VECTORS") else {
        return;
    };
    let dir = std::path::Path::new(&dir);
    std::fs::create_dir_all(dir).unwrap();
    let mut text = String::new();
    let mut modules = std::collections::BTreeSet::new();
    let mut rng = Rng(7);
    let mut extra: Vec<(String, PlanRequestExt, Vec<Vec<u8>>)> = Vec::new();
    // an integer base with fractional float exponents (pow in f64, truncated)
    let pow_req = request(
        "Pow",
        &[(vec![4], Dtype::I32, vec![]), (vec![4], Dtype::F32, vec![])],
        &[],
    );
    let data = vec![
        encode(Dtype::I32, &[4., 9., 2., 8.]).unwrap(),
        encode(Dtype::F32, &[0.5, 0.5, -1., 0.5]).unwrap(),
    ];
    extra.push(("Pow i32^f32 fractional".into(), pow_req, data));
    let mut all = Vec::new();
    for (name, op, ins, attrs) in cases() {
        let inputs: Vec<Input> = ins
            .iter()
            .map(|(s, dt, k)| {
                (
                    s.clone(),
                    *dt,
                    values(*dt, shape::numel(s).unwrap(), &mut rng, *k),
                )
            })
            .collect();
        let req = request(&op, &inputs, &attrs);
        let data: Vec<Vec<u8>> = inputs
            .iter()
            .map(|(_, dt, v)| encode(*dt, v).unwrap())
            .collect();
        all.push((name, req, data));
    }
    all.extend(extra);
    let mut count = 0;
    for (name, req, data) in all {
        let plan = Elementwise::plan_ext(&req).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let mut variants = vec![(name.clone(), plan.clone())];
        let shapes: Vec<&[u64]> = req.present().map(|t| &t.shape[..]).collect();
        let standard = !req.op.eq_ignore_ascii_case("PRelu");
        if plan.launches.len() == 1 && plan.launches[0].entry_point.ends_with("_bcast") && standard
        {
            let mut p64 = plan.clone();
            p64.launches[0] = repack(
                &plan.launches[0],
                &plan.outputs[0].shape,
                &shapes,
                Mode::Strided64,
            );
            variants.push((format!("{name} (64-bit walk)"), p64));
        }
        for (name, plan) in variants {
            let outs = testing::execute(&plan, &data, Elementwise::run_cpu).unwrap();
            let _ = writeln!(text, "case {name}");
            for (b, d) in data.iter().enumerate() {
                let _ = writeln!(text, "buf {b} {} {}", d.len(), hex(d));
            }
            for (k, o) in plan.outputs.iter().enumerate() {
                let size = shape::byte_size(&o.shape, o.dtype).unwrap();
                let _ = writeln!(text, "buf {} {size} -", data.len() + k);
            }
            for l in &plan.launches {
                modules.insert(l.module_id.clone());
                let relocs: Vec<String> = l
                    .relocations
                    .iter()
                    .map(|r| format!("{}:{}", r.offset, r.binding))
                    .collect();
                let _ = writeln!(
                    text,
                    "launch {} {} {} {}",
                    l.module_id,
                    l.entry_point,
                    hex(&l.params),
                    relocs.join(",")
                );
            }
            for (k, (o, bytes)) in plan.outputs.iter().zip(&outs).enumerate() {
                let _ = writeln!(
                    text,
                    "expect {} {} {}",
                    data.len() + k,
                    dtype::name(o.dtype),
                    hex(bytes)
                );
            }
            text.push_str("end\n");
            count += 1;
        }
    }
    std::fs::write(dir.join("cases.txt"), text).unwrap();
    for id in &modules {
        let src = Elementwise::kernel_source(id, &testing::cuda_target("sm_90")).unwrap();
        std::fs::write(dir.join(format!("{id}.cu")), src.code).unwrap();
    }
    eprintln!(
        "{count} cases over {} modules in {}",
        modules.len(),
        dir.display()
    );
}
