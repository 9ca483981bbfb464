//! The CUDA path without a GPU: every op × dtype plans for `cuda:sm_90` and every module it
//! names has source listing the entry point (with `UMD_DUMP_CUDA` set, the modules are written
//! out for `scripts/nvrtc_check.py`).

use super::*;
use crate::consts::RANGE_DTYPES;
use umd_sdk::{Plugin, TensorValue};

fn requests(dt: Dtype) -> Vec<Case> {
    let x = |shape: &[u64]| values(numel(shape), dt);
    let one = AttrValueExt::Tensor(TensorValue {
        desc: TensorDesc::new("v", vec![1], dt),
        data: dtype::encode(dt, &[1.0]).unwrap(),
    });
    let mut cases = vec![
        case("Transpose")
            .input(&[2, 3, 4], dt, &x(&[2, 3, 4]))
            .int_list("perm", &[1, 0, 2]),
        case("Identity").input(&[5], dt, &x(&[5])),
        case("Reshape")
            .input(&[2, 3], dt, &x(&[2, 3]))
            .ints(&[3, 2]),
        case("Concat")
            .int("axis", 1)
            .input(&[2, 3], dt, &x(&[2, 3]))
            .input(&[2, 1], dt, &x(&[2, 1])),
        case("Split")
            .input(&[6], dt, &x(&[6]))
            .int("num_outputs", 3),
        case("Slice")
            .input(&[7], dt, &x(&[7]))
            .ints(&[5])
            .ints(&[0])
            .ints(&[0])
            .ints(&[-2]),
        case("Expand").input(&[3, 1], dt, &x(&[3, 1])).ints(&[3, 4]),
        case("Tile").input(&[2, 2], dt, &x(&[2, 2])).ints(&[2, 3]),
        case("ConstantOfShape")
            .ints(&[2, 2])
            .attr("value", one.clone()),
        case("Constant").attr("value", one),
        case("Shape").input(&[2, 3], dt, &x(&[2, 3])),
        case("Size").input(&[2, 3], dt, &x(&[2, 3])),
    ];
    if dt != Dtype::F8e8m0 {
        cases.push(case("Trilu").input(&[3, 3], dt, &x(&[3, 3])));
        cases.push(case("EyeLike").input(&[3, 3], dt, &x(&[3, 3])));
    }
    cases
}

fn check(c: &Case) {
    let req = c.request();
    let modules = umd_sdk::testing::cuda_sources::<Shape>(&req)
        .unwrap_or_else(|e| panic!("{}: {e:?}", req.op));
    assert!(!modules.is_empty());
    for (id, src) in modules {
        assert!(id.starts_with("shape_"), "{id}");
        for e in &src.entry_points {
            assert!(
                src.code.contains(&format!("void {e}(")),
                "{id}: {e} is not defined"
            );
        }
        assert!(!src.code.contains("#include"), "{id}");
    }
}

#[test]
fn cuda_sources_for_every_op_and_dtype() {
    for dt in ALL_DTYPES {
        requests(dt).iter().for_each(check);
        for to in crate::common::CAST_DTYPES {
            let code = super::cast::onnx_code(to);
            check(&case("Cast").input(&[4], dt, &values(4, dt)).int("to", code));
        }
    }
    // Casts from the packed types (ABI 1.4) to every dtype.
    for dt in dtype::PACKED {
        for to in crate::common::CAST_DTYPES {
            let code = super::cast::onnx_code(to);
            check(
                &case("Cast")
                    .input(&[5], dt, &[0., 1., 0., 1., 0.])
                    .int("to", code),
            );
        }
    }
    for dt in RANGE_DTYPES {
        check(
            &case("Range")
                .constant(&[], dt, &[0.])
                .constant(&[], dt, &[5.])
                .constant(&[], dt, &[1.]),
        );
    }
    let target = Target::cpu();
    assert!(Shape::kernel_source("shape_cast_nope", &target).is_err());
    assert!(Shape::kernel_source("elementwise_f32", &target).is_err());
    assert_eq!(
        Shape::kernel_source("shape_cast_bool", &target)
            .unwrap()
            .entry_points
            .len(),
        22,
        "bool casts to the 17 other whole-byte dtypes and the 5 packed ones"
    );
}
