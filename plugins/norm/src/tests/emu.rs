//! Vectors for `tools/cuda_emu.py`, which runs the CUDA modules on the host: when
//! `UMD_DUMP_VECTORS` names a directory, each case (a request planned for `cuda:sm_90`, its
//! inputs, and the outputs of the CPU kernels) goes to `norm.cases` and every module used to
//! `<module>.cu`. Also run with a one-block grid, to exercise the grid-stride loops.

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
        let present: Vec<_> = r.inputs.iter().flatten().collect();
        let bytes: Vec<Vec<u8>> = present
            .iter()
            .zip(vals)
            .map(|((_, dt), v)| dtype::encode(*dt, v).unwrap())
            .collect();
        let req = r.build(Target::cpu());
        dump_case::<Norm>(&mut out, &dir, &name, &req, &bytes, None);
        dump_case::<Norm>(
            &mut out,
            &dir,
            &format!("{name}-grid1"),
            &req,
            &bytes,
            Some(Dim3::x(1)),
        );
    };
    for dt in ALL {
        for shape in [&[2u64, 3, 4][..], &[3, 40], &[0, 3, 2], &[2, 3, 0]] {
            for (r, vals) in every_op(shape, dt) {
                add(
                    format!("{}-{shape:?}-{dt:?}", r.op).replace(' ', ""),
                    &r,
                    &vals,
                );
            }
        }
        // multi-warp rows with a NaN, strided softmax columns, all LayerNorm outputs in bf16,
        // per-group GroupNorm, MVN over the channel view
        let mut x = data(3 * 1500, 4);
        x[1700] = f64::NAN;
        for op in ["Softmax", "LogSoftmax", "Hardmax"] {
            let r = Req::new(op, &[3, 1500], dt);
            add(format!("{op}-wide-{dt:?}"), &r, std::slice::from_ref(&x));
            let r = Req::new(op, &[3, 1500], dt).attr("axis", A::Int(0));
            add(format!("{op}-cols-{dt:?}"), &r, std::slice::from_ref(&x));
        }
        let r = Req::new("LayerNormalization", &[4, 700], dt)
            .input(&[700], dt)
            .attr("stash_type", A::Int(16))
            .outputs(3);
        add(
            format!("LayerNorm-bf16-stats-{dt:?}"),
            &r,
            &[data(2800, 5), data(700, 6)],
        );
        let r = Req::new("GroupNormalization", &[2, 6, 5], dt)
            .input(&[3], dt)
            .input(&[3], dt)
            .attr("num_groups", A::Int(3))
            .opset(18);
        add(
            format!("GroupNorm18-{dt:?}"),
            &r,
            &[data(60, 7), data(3, 8), data(3, 9)],
        );
        let r = Req::new("MeanVarianceNormalization", &[2, 3, 4, 5], dt);
        add(format!("MVN-{dt:?}"), &r, &[data(120, 10)]);
        let r = bn_request(&[2, 3, 4], dt).opset(9).outputs(5);
        let vals = [
            data(24, 1),
            data(3, 2),
            data(3, 3),
            data(3, 4),
            positive(3, 5),
        ];
        add(format!("BN-opset9-train-{dt:?}"), &r, &vals);
    }
    std::fs::write(format!("{dir}/norm.cases"), out).unwrap();
}
