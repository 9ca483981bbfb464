//! The CUDA path without a GPU: every op × served dtype plans for `cuda:sm_90` and yields a
//! module listing its entry point (with `UMD_DUMP_CUDA` set, the modules are written for
//! `scripts/nvrtc_check.py`).

use super::*;

fn requests() -> Vec<PlanRequestExt> {
    let mut v = Vec::new();
    let size_bytes = |s: &[i64]| s.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
    for dt in crate::common::FLOATS {
        let r = (desc(&[], Dtype::F32), 0.5f32.to_le_bytes().to_vec());
        v.push(
            PlanRequestExt::builder("Dropout")
                .input(desc(&[4], dt))
                .constant(r.0.clone(), &r.1)
                .constant(desc(&[], Dtype::Boolean), &[1])
                .outputs_wanted(vec![true, true])
                .build(target()),
        );
        v.push(
            PlanRequestExt::builder("Dropout")
                .input(desc(&[4], dt))
                .constant(r.0, &r.1)
                .constant(desc(&[], Dtype::Boolean), &[1])
                .build(target()),
        );
        v.push(
            PlanRequestExt::builder("AffineGrid")
                .input(desc(&[1, 2, 3], dt))
                .constant(desc(&[4], Dtype::I64), &size_bytes(&[1, 1, 4, 4]))
                .build(target()),
        );
        v.push(
            PlanRequestExt::builder("Col2Im")
                .input(desc(&[1, 5, 5], dt))
                .constant(
                    desc(&[2], Dtype::I64),
                    &[5i64, 5].map(|v| v.to_le_bytes()).concat(),
                )
                .constant(
                    desc(&[2], Dtype::I64),
                    &[1i64, 5].map(|v| v.to_le_bytes()).concat(),
                )
                .build(target()),
        );
        v.push(
            PlanRequestExt::builder("Det")
                .input(desc(&[2, 3, 3], dt))
                .build(target()),
        );
        v.push(
            PlanRequestExt::builder("DFT")
                .input(desc(&[1, 4, 2], dt))
                .build(target()),
        );
        v.push(
            PlanRequestExt::builder("GridSample")
                .input(desc(&[1, 1, 4, 4], dt))
                .input(desc(&[1, 2, 2, 2], dt))
                .build(target()),
        );
    }
    for dt in dtype::ALL {
        v.push(
            PlanRequestExt::builder("CenterCropPad")
                .input(desc(&[4, 4], dt))
                .constant(
                    desc(&[2], Dtype::I64),
                    &[2i64, 6].map(|v| v.to_le_bytes()).concat(),
                )
                .build(target()),
        );
        v.push(
            PlanRequestExt::builder("Compress")
                .input(desc(&[4, 2], dt))
                .constant(desc(&[2], Dtype::Boolean), &[1, 0])
                .attr("axis", int(0))
                .build(target()),
        );
        v.push(
            PlanRequestExt::builder("MaxUnpool")
                .input(desc(&[1, 1, 2, 2], dt))
                .input(desc(&[1, 1, 2, 2], Dtype::I64))
                .attr("kernel_shape", AttrValueExt::Ints(vec![2, 2]))
                .attr("strides", AttrValueExt::Ints(vec![2, 2]))
                .build(target()),
        );
        v.push(
            PlanRequestExt::builder("ReverseSequence")
                .input(desc(&[4, 2], dt))
                .input(desc(&[2], Dtype::I64))
                .build(target()),
        );
        v.push(
            PlanRequestExt::builder("Dropout")
                .input(desc(&[4], dt))
                .outputs_wanted(vec![true, true])
                .build(target()),
        );
    }
    for dt in crate::window::OUT {
        let n = (1..=24)
            .find(|n| crate::common::onnx_dtype(*n) == Some(dt))
            .unwrap();
        let mut mel = super::mel::mel_req(8, 16, 8192, 0.0, 4096.0, Dtype::F32);
        mel.attributes.push(umd_sdk::AttributeExt {
            name: "output_datatype".into(),
            value: int(n),
        });
        v.push(mel);
        for (op, _) in crate::window::OPS {
            v.push(
                PlanRequestExt::builder(op)
                    .constant(desc(&[], Dtype::I64), &8i64.to_le_bytes())
                    .attr("output_datatype", int(n))
                    .build(target()),
            );
        }
    }
    for dt in crate::unique::DTYPES {
        let x = dtype::encode(dt, &[1.0, 0.0, 1.0, 2.0]).unwrap();
        v.push(
            PlanRequestExt::builder("Unique")
                .constant(desc(&[4], dt), &x)
                .outputs_wanted(vec![true; 4])
                .build(target()),
        );
        v.push(
            PlanRequestExt::builder("NonZero")
                .constant(desc(&[4], dt), &x)
                .build(target()),
        );
    }
    for dt in crate::common::FLOATS {
        let b = dtype::encode(dt, &[0.0, 0.0, 1.0, 1.0, 0.0, 0.5, 1.0, 1.5]).unwrap();
        let s = dtype::encode(dt, &[0.9, 0.8]).unwrap();
        v.push(
            PlanRequestExt::builder("NonMaxSuppression")
                .constant(desc(&[1, 2, 4], dt), &b)
                .constant(desc(&[1, 1, 2], dt), &s)
                .constant(desc(&[1], Dtype::I64), &3i64.to_le_bytes())
                .build(target()),
        );
    }
    for dt in crate::einsum::DTYPES {
        v.push(
            PlanRequestExt::builder("Einsum")
                .input(desc(&[2, 3], dt))
                .input(desc(&[3, 4], dt))
                .attr("equation", text("ij,jk->ik"))
                .build(target()),
        );
    }
    v
}

#[test]
fn every_op_and_dtype_has_cuda_source() {
    let mut modules = std::collections::BTreeSet::new();
    for req in requests() {
        let srcs = testing::cuda_sources::<Misc>(&req)
            .unwrap_or_else(|e| panic!("{} {:?}: {e:?}", req.op, req.inputs));
        for (id, src) in srcs {
            assert!(id.starts_with("misc_"), "{id}");
            assert!(!src.code.contains("#include"), "{id}");
            assert!(src.code.contains("extern \"C\" __global__"), "{id}");
            modules.insert(id);
        }
    }
    assert!(modules.len() >= 20, "{modules:?}");
}
