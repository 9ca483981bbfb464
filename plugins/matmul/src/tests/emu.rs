//! Vectors for the norm plugin's `tools/cuda_emu.py`, which runs the CUDA modules on the host:
//! when `UMD_DUMP_VECTORS` names a directory, each case (a request planned for `cuda:sm_90`, its
//! inputs, and the outputs of the CPU kernels) goes to `matmul.cases` and every module used to
//! `<module>.cu`; some also with a grid of one row tile and one batch, to exercise the strides.

use super::*;
use umd_sdk::emu_vectors::dump_case;
use umd_sdk::{Dim3, Plugin};

#[test]
fn cuda_emulation_vectors() {
    let Ok(dir) = std::env::var("UMD_DUMP_VECTORS") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    let mut out = String::new();
    let mut add = |name: String, r: &Req, vals: &[Vec<f64>], shrink: bool| {
        let bytes: Vec<Vec<u8>> = r
            .inputs
            .iter()
            .flatten()
            .zip(vals)
            .map(|((_, dt), v)| dtype::encode(*dt, v).unwrap())
            .collect();
        let req = r.build();
        dump_case::<MatMul>(&mut out, &dir, &name, &req, &bytes, None);
        if shrink {
            let plan = MatMul::plan_ext(&req).unwrap();
            let g = Dim3 {
                x: plan.launches[0].grid.x,
                y: 1,
                z: 1,
            };
            dump_case::<MatMul>(
                &mut out,
                &dir,
                &format!("{name}-strided"),
                &req,
                &bytes,
                Some(g),
            );
        }
    };
    let numel = |s: &[u64]| s.iter().product::<u64>() as usize;
    for dt in DTYPES {
        for (a, b) in [
            (&[5u64, 37][..], &[37u64, 19][..]),
            (&[3, 1, 17, 4], &[1, 2, 4, 20]),
            (&[4], &[2, 4, 3]),
            (&[0, 2, 3], &[3, 4]),
            (&[2, 0], &[0, 3]),
            (&[0, 3], &[3, 5]),
        ] {
            let r = Req::new("MatMul").input(a, dt).input(b, dt);
            let vals = [data(numel(a), 1, dt), data(numel(b), 2, dt)];
            add(
                format!("MatMul-{a:?}x{b:?}-{dt:?}").replace(' ', ""),
                &r,
                &vals,
                true,
            );
        }
        let (alpha, beta) = if umd_sdk::request::is_float(dt) {
            (0.5, 0.25)
        } else {
            (2.0, 3.0)
        };
        for (ta, tb, c) in [
            (false, false, &[19u64][..]),
            (true, true, &[17, 1]),
            (true, false, &[]),
        ] {
            let a = if ta { [20u64, 17] } else { [17, 20] };
            let b = if tb { [19u64, 20] } else { [20, 19] };
            let r = Req::new("Gemm")
                .input(&a, dt)
                .input(&b, dt)
                .input(c, dt)
                .attr("transA", A::Int(ta as i64))
                .attr("transB", A::Int(tb as i64))
                .attr("alpha", A::Float(alpha))
                .attr("beta", A::Float(beta));
            let vals = [data(340, 3, dt), data(380, 4, dt), data(numel(c), 5, dt)];
            add(format!("Gemm-{ta}-{tb}-{dt:?}"), &r, &vals, true);
        }
    }
    for ta in INT8 {
        for tb in INT8 {
            let int8 = |n, seed, dt| -> Vec<f64> {
                data(n, seed, Dtype::I64)
                    .into_iter()
                    .map(|v| if dt == Dtype::U8 { v + 8.0 } else { v * 15.0 })
                    .collect()
            };
            let r = Req::new("MatMulInteger")
                .input(&[2, 9, 33], ta)
                .input(&[33, 18], tb)
                .absent()
                .input(&[18], tb);
            let vals = [int8(594, 1, ta), int8(594, 2, tb), int8(18, 3, tb)];
            add(format!("MatMulInteger-{ta:?}-{tb:?}"), &r, &vals, true);
            let r = Req::new("MatMulInteger")
                .input(&[9, 33], ta)
                .input(&[33, 18], tb)
                .input(&[9], ta)
                .input(&[], tb);
            let vals = [
                int8(297, 4, ta),
                int8(594, 5, tb),
                int8(9, 6, ta),
                int8(1, 7, tb),
            ];
            add(
                format!("MatMulInteger-rows-{ta:?}-{tb:?}"),
                &r,
                &vals,
                false,
            );
        }
    }
    std::fs::write(format!("{dir}/matmul.cases"), out).unwrap();
}
