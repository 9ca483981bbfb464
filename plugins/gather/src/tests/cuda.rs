//! Every CUDA module the plugin can name is produced (and, with `UMD_DUMP_CUDA`, dumped for
//! `scripts/nvrtc_check.py`), and lists the entry points it defines.

use super::util::*;
use umd_sdk::{Plugin, Target, dtype};

use crate::GatherPlugin;
use crate::common::{ALL_DTYPES, NUMERIC_DTYPES};

#[test]
fn cuda_modules_for_every_op_and_dtype() {
    for dt in ALL_DTYPES {
        let x = desc("x", &[2, 3], dt);
        cuda(&build(builder("Gather").input(x.clone()).input(desc(
            "i",
            &[2],
            umd_sdk::Dtype::I64,
        ))));
        cuda(&build(
            builder("Resize")
                .input(desc("x", &[1, 1, 2, 3], dt))
                .absent()
                .constant(
                    desc("s", &[4], umd_sdk::Dtype::F32),
                    &enc(umd_sdk::Dtype::F32, &[1., 1., 2., 2.]),
                ),
        ));
    }
    for dt in NUMERIC_DTYPES {
        let x = desc("x", &[2, 3], dt);
        for red in ["add", "mul", "max", "min"] {
            cuda(&build(
                builder("ScatterElements")
                    .input(x.clone())
                    .input(desc("i", &[1, 3], umd_sdk::Dtype::I64))
                    .input(desc("u", &[1, 3], dt))
                    .attr("reduction", text(red)),
            ));
        }
        cuda(&build(
            builder("Resize")
                .input(desc("x", &[1, 1, 2, 3], dt))
                .absent()
                .constant(
                    desc("s", &[4], umd_sdk::Dtype::F32),
                    &enc(umd_sdk::Dtype::F32, &[1., 1., 2., 2.]),
                )
                .attr("mode", text("linear")),
        ));
        for vdt in [
            umd_sdk::Dtype::I8,
            umd_sdk::Dtype::F16,
            umd_sdk::Dtype::F32,
            umd_sdk::Dtype::I64,
        ] {
            cuda(&build(
                builder("OneHot")
                    .input(desc("i", &[3], dt))
                    .constant(desc("d", &[], umd_sdk::Dtype::I64), &ints(&[4]))
                    .input(desc("v", &[2], vdt)),
            ));
        }
    }
}

#[test]
fn every_module_defines_its_entry_points() {
    let mut ids: Vec<String> = [1, 2, 4, 8]
        .iter()
        .map(|s| format!("gather_move_s{s}"))
        .collect();
    for dt in NUMERIC_DTYPES {
        let n = dtype::name(dt);
        ids.extend([
            format!("gather_scatter_{n}"),
            format!("gather_resize_{n}"),
            format!("gather_onehot_{n}"),
        ]);
    }
    for id in ids {
        let src = GatherPlugin::kernel_source(&id, &Target::cpu()).unwrap();
        assert!(
            !src.code.contains("#include"),
            "{id}: NVRTC has no include path"
        );
        for e in &src.entry_points {
            assert!(
                src.code.contains(&format!("void {e}(")),
                "{id}: {e} not defined"
            );
        }
    }
    for bad in [
        "gather_move_s3",
        "gather_scatter_bool",
        "gather_resize_bool",
        "matmul_f32",
        "gather_onehot_x",
    ] {
        assert!(
            GatherPlugin::kernel_source(bad, &Target::cpu()).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn describe_signatures_and_self_tests() {
    let info = GatherPlugin::describe();
    assert_eq!(info.name, "gather");
    assert_eq!(info.ops.len(), crate::OPS.len());
    assert!(
        info.ops
            .iter()
            .all(|o| o.targets == ["cpu", "cuda"] && o.priority == 0)
    );
    assert!(matches!(
        plan(&build(builder("Conv"))),
        Err(umd_sdk::OpError::UnsupportedOp(_))
    ));
    for case in GatherPlugin::self_tests() {
        let mut b = builder(&case.op);
        for d in &case.inputs {
            b = b.input(umd_sdk::legacy::desc_from_legacy(d));
        }
        let mut req = build(b);
        req.attributes = umd_sdk::PlanRequestExt::from_legacy(&umd_sdk::PlanRequest {
            op: case.op.clone(),
            inputs: vec![],
            attributes: case.attributes.clone(),
            target: Target::cpu(),
        })
        .attributes;
        let (_, out) =
            run(&req, &case.input_data).unwrap_or_else(|e| panic!("{}: {e:?}", case.name));
        assert_eq!(out, case.expected, "self-test {}", case.name);
    }
}
