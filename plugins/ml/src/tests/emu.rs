//! CUDA emulation vectors (every launch of a plan, workspace tables included).

use super::*;

/// Appends a case per launch of `req`'s plan (for `cuda:sm_90`) to `out`, each with the buffers
/// as the CPU kernels left them before it (the workspace table included) and the CPU kernels'
/// results after it; writes the modules to `dir`. Launches that read and write one binding
/// (`fill_words` past its first chunk) are skipped: the emulator fills written buffers.
fn dump_plan(out: &mut String, dir: &str, name: &str, req: &PlanRequestExt, inputs: &[Vec<u8>]) {
    use std::fmt::Write as _;
    use umd_sdk::{CpuBuffer, CpuCall};
    let hex = |b: &[u8]| {
        if b.is_empty() {
            "-".to_string()
        } else {
            b.iter().map(|x| format!("{x:02x}")).collect()
        }
    };
    let mut req = req.clone();
    req.target = testing::cuda_target("sm_90");
    let plan = MlPlugin::plan_ext(&req).unwrap();
    let mut bufs: Vec<Vec<u8>> = inputs.to_vec();
    let mut dts: Vec<Dtype> = req.present().map(|d| d.dtype).collect();
    for o in &plan.outputs {
        bufs.push(vec![
            0;
            umd_sdk::shape::byte_size(&o.shape, o.dtype).unwrap()
                as usize
        ]);
        dts.push(o.dtype);
    }
    bufs.push(vec![0; plan.workspace_bytes as usize]);
    dts.push(Dtype::U8);
    for (k, l) in plan.launches.iter().enumerate() {
        let src = MlPlugin::kernel_source(&l.module_id, &req.target).unwrap();
        std::fs::write(format!("{dir}/{}.cu", l.module_id), &src.code).unwrap();
        let call = CpuCall {
            module_id: l.module_id.clone(),
            entry_point: l.entry_point.clone(),
            grid: l.grid,
            block: l.block,
            params: l.params.clone(),
            relocations: l.relocations.clone(),
            buffers: l
                .relocations
                .iter()
                .map(|r| CpuBuffer {
                    binding: r.binding,
                    size: bufs[r.binding as usize].len() as u64,
                    data: if r.access == umd_sdk::Access::Write {
                        vec![]
                    } else {
                        bufs[r.binding as usize].clone()
                    },
                })
                .collect(),
        };
        let before = bufs.clone();
        for w in MlPlugin::run_cpu(call).unwrap() {
            bufs[w.binding as usize] = w.data;
        }
        if l.relocations
            .iter()
            .any(|r| r.access == umd_sdk::Access::ReadWrite)
        {
            continue;
        }
        let _ = writeln!(
            out,
            "case {name}-{k}\nmodule {}\nentry {}\ngrid {} {} {}\nblock {} {} {}\nparams {}",
            l.module_id,
            l.entry_point,
            l.grid.x,
            l.grid.y,
            l.grid.z,
            l.block.x,
            l.block.y,
            l.block.z,
            hex(&l.params)
        );
        for r in &l.relocations {
            let _ = writeln!(out, "reloc {} {}", r.offset, r.binding);
        }
        for r in &l.relocations {
            let b = r.binding as usize;
            if r.access == umd_sdk::Access::Read {
                let _ = writeln!(out, "in {b} {}", hex(&before[b]));
            } else {
                let _ = writeln!(out, "out {b} {}", bufs[b].len());
                let _ = writeln!(out, "expect {b} {} {}", dtype::name(dts[b]), hex(&bufs[b]));
            }
        }
        out.push_str("end\n");
    }
}

/// Vectors for `plugins/norm/tools/cuda_emu.py` (runs the CUDA modules as C++ on the host):
/// when `UMD_DUMP_VECTORS` names a directory, every op × dtype goes to `ml.cases`.
#[test]
fn cuda_emulation_vectors() {
    let Ok(dir) = std::env::var("UMD_DUMP_VECTORS") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    let mut out = String::new();
    for dt in ALL {
        let x: Vec<f64> = data(300, 2, -3.0, 3.0).iter().map(|v| v.round()).collect();
        let r = req(
            "Binarizer",
            &[(vec![300], dt)],
            vec![("threshold", A::Float(0.5))],
        );
        dump_plan(
            &mut out,
            &dir,
            &format!("binarizer-{dt:?}"),
            &r,
            &[enc(dt, &x)],
        );
    }
    for dt in [Dtype::U8, Dtype::F16, Dtype::F32, Dtype::I64] {
        let x: Vec<f64> = (0..60).map(|i| (i % 50) as f64).collect();
        for idt in [Dtype::I32, Dtype::I64] {
            let r = req(
                "ArrayFeatureExtractor",
                &[(vec![3, 4, 5], dt), (vec![4], idt)],
                vec![],
            );
            let ind = enc(idt, &[4., -1., 0., 9.]);
            dump_plan(
                &mut out,
                &dir,
                &format!("afe-{dt:?}-{idt:?}"),
                &r,
                &[enc(dt, &x), ind],
            );
        }
    }
    for mode in ["TF", "IDF", "TFIDF"] {
        for dt in crate::tfidf::DTYPES {
            let t = Tfidf {
                mode,
                weights: if mode == "TF" {
                    vec![]
                } else {
                    data(7, 3, 0.5, 2.0)
                },
                ..official_tfidf(1, 3)
            };
            let x = [1., 1., 3., 3., 3., 7., 8., 6., 7., 5., 6., 8.];
            let r = req("TfIdfVectorizer", &[(vec![2, 6], dt)], t.attrs());
            dump_plan(
                &mut out,
                &dir,
                &format!("tfidf-{mode}-{dt:?}"),
                &r,
                &[enc(dt, &x)],
            );
        }
    }
    for dt in common::FLOATS {
        let x = [1.2, 3.4, -0.12, f64::NAN, 12.0, 7.0];
        let r = req(
            "TreeEnsemble",
            &[(vec![6, 1], dt)],
            membership_tree().attrs(dt),
        );
        dump_plan(
            &mut out,
            &dir,
            &format!("tree-member-{dt:?}"),
            &r,
            &[enc(dt, &x)],
        );
        for agg in 0..4 {
            for post in 0..5 {
                let t = Trees {
                    agg,
                    post,
                    ..single_tree()
                };
                let x = [1.2, 3.4, -0.12, 1.66, 4.14, 1.77];
                let r = req("TreeEnsemble", &[(vec![3, 2], dt)], t.attrs(dt));
                let name = format!("tree-{agg}-{post}-{dt:?}");
                dump_plan(&mut out, &dir, &name, &r, &[enc(dt, &x)]);
            }
        }
    }
    for xd in crate::label::DTYPES {
        for yd in crate::label::DTYPES {
            let tdt = |d: Dtype| {
                if d == Dtype::I32 || d == Dtype::I64 {
                    d
                } else {
                    Dtype::F64
                }
            };
            let r = req(
                "LabelEncoder",
                &[(vec![5], xd)],
                vec![
                    ("keys_tensor", tensor(tdt(xd), &[1., 2., 3., 2.])),
                    ("values_tensor", tensor(yd, &[10., 20., 30., 40.])),
                    ("default_tensor", tensor(yd, &[-5.])),
                ],
            );
            let x = enc(xd, &[2., 1., 7., 3., 0.]);
            dump_plan(&mut out, &dir, &format!("label-{xd:?}-{yd:?}"), &r, &[x]);
        }
    }
    let forests = super::classic::forest_cases();
    let svms = super::classic::svm_cases();
    for (name, r, inputs) in super::classic::classic_cases()
        .into_iter()
        .chain(forests)
        .chain(svms)
    {
        dump_plan(&mut out, &dir, &name, &r, &inputs);
    }
    std::fs::write(format!("{dir}/ml.cases"), out).unwrap();
}
