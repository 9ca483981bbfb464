//! MaxRoiPool by hand: bins of a 4 × 4 image, a RoI clipped at the border, a malformed RoI
//! (1 × 1), an out-of-range batch index; refusals; CUDA emulation vectors.

use super::*;

fn req(dt: Dtype, rois: u64, pooled: &[i64], scale: f64) -> PlanRequestExt {
    PlanRequestExt::builder("MaxRoiPool")
        .input(desc(&[1, 1, 4, 4], dt))
        .input(desc(&[rois, 5], dt))
        .attr("pooled_shape", AttrValueExt::Ints(pooled.to_vec()))
        .attr("spatial_scale", AttrValueExt::Float(scale))
        .build(target())
}

const IMAGE: [f64; 16] = [
    1., 2., 3., 4., //
    5., 6., 7., 8., //
    9., 10., 11., 12., //
    13., 14., 15., 16.,
];

#[test]
fn bins_borders_and_malformed_rois() {
    for dt in crate::common::FLOATS {
        let rois = vec![
            0., 0., 0., 3., 3., // the whole image: 2 × 2 bins of 2 × 2 cells
            0., 2., 2., 9., 9., // past the border: clipped to rows/cols 2..4
            0., 3., 1., 1., 0., // end before start: 1 × 1 at (x 3, y 1)
            4., 0., 0., 3., 3., // batch 4 of 1: zeros
        ];
        let (plan, out) = run(&req(dt, 4, &[2, 2], 1.0), &[IMAGE.to_vec(), rois]).unwrap();
        assert_eq!(plan.outputs[0].shape, vec![4, 1, 2, 2]);
        assert_eq!(
            out[0],
            vec![
                6., 8., 14., 16., 16., 0., 0., 0., 8., 8., 8., 8., 0., 0., 0., 0.
            ],
            "{dt:?}"
        );
    }
    // the spatial scale applies to the corners before rounding
    let (_, out) = run(
        &req(Dtype::F32, 1, &[1, 1], 0.5),
        &[IMAGE.to_vec(), vec![0., 2., 2., 6., 6.]],
    )
    .unwrap();
    assert_eq!(out[0], vec![16.0]);
    // a NaN cell never wins (the max starts from the lowest float); infinite and NaN corners
    // are clamped, not overflowed
    let mut img = IMAGE.to_vec();
    img[0] = f64::NAN;
    let (_, out) = run(
        &req(Dtype::F32, 2, &[1, 1], 1.0),
        &[
            img,
            vec![
                0.,
                0.,
                0.,
                0.,
                1.,
                0.,
                f64::NEG_INFINITY,
                f64::NAN,
                f64::INFINITY,
                9.,
            ],
        ],
    )
    .unwrap();
    assert_eq!(out[0], vec![5.0, 16.0]);
    // refusals
    let bad = PlanRequestExt::builder("MaxRoiPool")
        .input(desc(&[1, 1, 4, 4], Dtype::F32))
        .input(desc(&[2, 4], Dtype::F32))
        .attr("pooled_shape", AttrValueExt::Ints(vec![2, 2]))
        .build(target());
    assert!(matches!(err(&bad), OpError::InvalidShape(_)));
    assert!(matches!(
        err(&req(Dtype::F32, 1, &[0, 2], 1.0)),
        OpError::InvalidAttribute(_)
    ));
    assert!(matches!(
        err(&req(Dtype::F32, 1, &[2], 1.0)),
        OpError::InvalidAttribute(_)
    ));
}

/// Vectors for `plugins/norm/tools/cuda_emu.py` (`misc-roipool.cases`).
#[test]
fn cuda_emulation_vectors() {
    let Ok(dir) = std::env::var("UMD_DUMP_VECTORS") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    let mut out = String::new();
    for dt in crate::common::FLOATS {
        let rois = [
            0., 0., 0., 3., 3., 0., 2., 2., 9., 9., 0., 3., 1., 1., 0., 4., 0., 0., 3., 3.,
        ];
        let inputs = vec![enc(dt, &IMAGE), enc(dt, &rois)];
        for (k, (pooled, scale)) in [(vec![2, 2], 1.0), (vec![3, 2], 0.7)]
            .into_iter()
            .enumerate()
        {
            let name = format!("roipool-{k}-{}", dtype::name(dt));
            let r = req(dt, 4, &pooled, scale);
            umd_sdk::emu_vectors::dump_case::<Misc>(&mut out, &dir, &name, &r, &inputs, None);
        }
    }
    std::fs::write(format!("{dir}/misc-roipool.cases"), out).unwrap();
}
