//! Vectors for the norm plugin's `tools/cuda_emu.py` (which runs CUDA modules on the host): when
//! `UMD_DUMP_VECTORS` names a directory, each case (a request planned for `cuda:sm_90`, its
//! inputs, and the outputs of the CPU kernels) goes to `attention.cases` and every module used
//! to `<module>.cu`. Also run with a one-block grid, to exercise the grid-stride loops.

use super::*;
use umd_sdk::Dim3;
use umd_sdk::emu_vectors::dump_case;

#[test]
fn cuda_emulation_vectors() {
    let Ok(dir) = std::env::var("UMD_DUMP_VECTORS") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    let mut out = String::new();
    let mut add = |name: String, r: &Req, vals: &[Vec<f64>]| {
        let req = r.build(Target::cpu());
        let bytes = r.bytes(vals);
        dump_case::<AttentionPlugin>(&mut out, &dir, &name, &req, &bytes, None);
        dump_case::<AttentionPlugin>(
            &mut out,
            &dir,
            &format!("{name}-grid1"),
            &req,
            &bytes,
            Some(Dim3::x(1)),
        );
    };
    for dt in ALL {
        for (k, (r, vals)) in every_op(dt).into_iter().enumerate() {
            add(format!("{}-{k}-{dt:?}", r.op), &r, &vals);
        }
        // more keys than threads (several chunks) and a value head wider than the block
        let r = Req::new("Attention")
            .input(&[1, 2, 3, 4], dt)
            .input(&[1, 1, 300, 4], dt)
            .input(&[1, 1, 300, 200], dt);
        add(
            format!("Attention-long-{dt:?}"),
            &r,
            &[data(24, 1), data(1200, 2), data(60000, 3)],
        );
    }
    // TensorScatter: one element width per dtype, both modes, i64, i32 and no write indices
    for dt in [Dtype::U8, Dtype::F16, Dtype::F32, Dtype::I64] {
        let ints = |n: usize, base: f64| (0..n).map(|i| base + (i % 50) as f64).collect::<Vec<_>>();
        let cases = [
            (
                &[2u64, 3, 40, 5][..],
                &[2u64, 3, 7, 5][..],
                "linear",
                Some((Dtype::I64, vec![3., 33.])),
            ),
            (
                &[2, 3, 40, 5],
                &[2, 3, 9, 5],
                "circular",
                Some((Dtype::I32, vec![35., 70.])),
            ),
            (&[3, 50, 2], &[3, 4, 2], "linear", None),
        ];
        for (k, (past, upd, mode, idx)) in cases.into_iter().enumerate() {
            let mut r = Req::new("TensorScatter")
                .input(past, dt)
                .input(upd, dt)
                .attr("mode", A::Text(mode.into()));
            let mut vals = vec![ints(numel(past), 0.0), ints(numel(upd), 60.0)];
            if let Some((idt, v)) = idx {
                r = r.input(&[v.len() as u64], idt);
                vals.push(v);
            }
            add(format!("TensorScatter-{k}-{dt:?}"), &r, &vals);
        }
    }
    std::fs::write(format!("{dir}/attention.cases"), out).unwrap();
}
