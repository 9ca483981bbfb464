//! Vectors for `plugins/norm/tools/cuda_emu.py` (runs the CUDA modules as C++ on the host and
//! compares them with the CPU kernels): when `UMD_DUMP_VECTORS` names a directory, every case
//! goes to `recurrent.cases` (the workspace binding added as a scratch buffer), each module to
//! `<module>.cu`; each case also runs with a one-block grid (the grid-stride over pairs).

use super::*;

#[test]
fn cuda_emulation_vectors() {
    use umd_sdk::emu_vectors::dump_case;
    let Ok(dir) = std::env::var("UMD_DUMP_VECTORS") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    let mut out = String::new();
    let mut add = |name: String, c: &Case| {
        let (req, vals) = c.build();
        let bytes: Vec<Vec<u8>> = req
            .present()
            .zip(&vals)
            .map(|(d, v)| dtype::encode(d.dtype, v).unwrap())
            .collect();
        let plan = Recurrent::plan_ext(&req).unwrap();
        let ws = format!(
            "out {} {}\nend\n",
            bytes.len() + plan.outputs.len(),
            plan.workspace_bytes
        );
        for grid in [None, Some(umd_sdk::Dim3::x(1))] {
            let n = format!("{name}{}", if grid.is_some() { "-grid1" } else { "" });
            dump_case::<Recurrent>(&mut out, &dir, &n, &req, &bytes, grid);
            assert!(out.ends_with("end\n"));
            out.truncate(out.len() - 4);
            out.push_str(&ws);
        }
    };
    for op in OPS {
        for dt in ALL {
            for dir in ["forward", "reverse", "bidirectional"] {
                for layout in [0, 1] {
                    let mut c = Case::new(op, dt).dir(dir);
                    c.layout = layout;
                    c.lens = Some(vec![3, if layout == 0 { 1 } else { 0 }]);
                    add(format!("{op}-{}-{dir}-l{layout}", dtype::name(dt)), &c);
                }
            }
            let mut c = Case::new(op, dt);
            c.bias = false;
            c.h0 = false;
            c.c0 = false;
            c.peep = false;
            add(format!("{op}-{}-bare", dtype::name(dt)), &c);
            for (s, b, h) in [(0, 2, 4), (3, 0, 4), (3, 2, 0)] {
                let mut c = Case::new(op, dt).dir("bidirectional");
                (c.seq, c.batch, c.hidden) = (s, b, h);
                add(format!("{op}-{}-empty-{s}-{b}-{h}", dtype::name(dt)), &c);
            }
        }
    }
    let mut c = Case::new("GRU", Dtype::F32)
        .dir("bidirectional")
        .attr("linear_before_reset", A::Int(1))
        .attr("clip", A::Float(0.2));
    (c.hidden, c.seq, c.input) = (300, 2, 2);
    add("GRU-wide-lbr".into(), &c);
    let c = Case::new("LSTM", Dtype::F32)
        .attr("input_forget", A::Int(1))
        .attr(
            "activations",
            A::Texts(vec!["HardSigmoid".into(), "Elu".into(), "Softplus".into()]),
        );
    add("LSTM-acts".into(), &c);
    for (k, name) in act::NAMES.iter().enumerate() {
        let c = Case::new("RNN", Dtype::F64).attr("activations", A::Texts(vec![name.to_string()]));
        add(format!("RNN-act{k}"), &c);
    }
    std::fs::write(format!("{dir}/recurrent.cases"), out).unwrap();
}
