//! Refusals: each bad request gets the right `OpError`.

use super::*;
use crate::plan::plan;

fn err(req: PlanRequestExt) -> OpError {
    plan(&req).expect_err("the request must be refused")
}

#[test]
fn bad_attributes_are_named() {
    let e = err(builder("ReduceSum", &[2, 3], Dtype::F32)
        .attr("axis", int(1))
        .build(target()));
    assert!(
        matches!(&e, OpError::InvalidAttribute(m) if m.contains("`axis`")),
        "{e:?}"
    );
    let e = err(builder("ReduceMax", &[2, 3], Dtype::F32)
        .attr("axes", ints(&[2]))
        .build(target()));
    assert!(
        matches!(&e, OpError::InvalidAttribute(m) if m.contains("axes") && m.contains("out of range")),
        "{e:?}"
    );
    let e =
        err(with_ints(builder("ReduceMin", &[2, 3], Dtype::F32), &[1, -1], false).build(target()));
    assert!(
        matches!(&e, OpError::InvalidAttribute(m) if m.contains("twice")),
        "{e:?}"
    );
    let e = err(with_ints(
        builder("ReduceSum", &[2, 3], Dtype::F32).attr("axes", ints(&[0])),
        &[1],
        false,
    )
    .build(target()));
    assert!(
        matches!(&e, OpError::InvalidAttribute(m) if m.contains("both")),
        "{e:?}"
    );
    let e = err(builder("ReduceSum", &[2, 3], Dtype::F32)
        .attr("keepdims", AttrValueExt::Text("yes".into()))
        .build(target()));
    assert!(
        matches!(&e, OpError::InvalidAttribute(m) if m.contains("keepdims")),
        "{e:?}"
    );
    let e = err(builder("ArgMax", &[2, 3], Dtype::F32)
        .attr("axis", int(-3))
        .build(target()));
    assert!(
        matches!(&e, OpError::InvalidAttribute(m) if m.contains("axis")),
        "{e:?}"
    );
    let e = err(builder("ArgMin", &[2, 3], Dtype::F32)
        .attr("axes", ints(&[0]))
        .build(target()));
    assert!(
        matches!(&e, OpError::InvalidAttribute(m) if m.contains("`axes`")),
        "{e:?}"
    );
    let e = err(with_ints(builder("CumSum", &[2, 3], Dtype::F32), &[2], true).build(target()));
    assert!(
        matches!(&e, OpError::InvalidAttribute(m) if m.contains("axis")),
        "{e:?}"
    );
    let e = err(with_ints(builder("TopK", &[2, 3], Dtype::F32), &[1], false)
        .attr("largest", AttrValueExt::Float(1.0))
        .build(target()));
    assert!(
        matches!(&e, OpError::InvalidAttribute(m) if m.contains("largest")),
        "{e:?}"
    );
    let e = err(with_ints(builder("TopK", &[2, 3], Dtype::F32), &[1], false)
        .attr("k", int(1))
        .build(target()));
    assert!(
        matches!(&e, OpError::InvalidAttribute(m) if m.contains("both")),
        "{e:?}"
    );
}

#[test]
fn unserved_dtypes_say_what_is_served() {
    for (op, dt) in [
        ("ReduceLogSum", Dtype::I32),
        ("ReduceLogSumExp", Dtype::I64),
        ("ReduceSum", Dtype::Boolean),
        ("ReduceProd", Dtype::I8),
        ("ArgMax", Dtype::Boolean),
        ("CumSum", Dtype::U8),
        ("TopK", Dtype::Boolean),
        ("ReduceLogSum", Dtype::U32),
        ("ReduceMax", Dtype::F8e4m3fn),
        ("ReduceSum", Dtype::F8e5m2),
        ("ArgMin", Dtype::F8e8m0),
        ("TopK", Dtype::F8e4m3fnuz),
        ("CumSum", Dtype::F8e5m2fnuz),
    ] {
        let b = builder(op, &[2, 3], dt);
        let b = match op {
            "CumSum" => with_ints(b, &[0], true),
            "TopK" => with_ints(b, &[1], false),
            _ => b,
        };
        let e = err(b.build(target()));
        assert!(
            matches!(&e, OpError::UnsupportedDtype(m) if m.contains("serves f32")),
            "{op}: {e:?}"
        );
    }
}

#[test]
fn bad_shapes_and_values() {
    let e = err(with_ints(builder("TopK", &[2, 3], Dtype::F32), &[4], false).build(target()));
    assert!(
        matches!(&e, OpError::InvalidShape(m) if m.contains("k = 4")),
        "{e:?}"
    );
    let e = err(with_ints(builder("TopK", &[2, 3], Dtype::F32), &[-1], false).build(target()));
    assert!(matches!(e, OpError::InvalidShape(_)), "{e:?}");
    let e = err(with_ints(builder("TopK", &[2, 3], Dtype::F32), &[1, 2], false).build(target()));
    assert!(
        matches!(&e, OpError::InvalidShape(m) if m.contains("one value")),
        "{e:?}"
    );
    let e = err(builder("TopK", &[2, 3], Dtype::F32).build(target()));
    assert!(
        matches!(&e, OpError::InvalidShape(m) if m.contains("required")),
        "{e:?}"
    );
    let e = err(builder("CumSum", &[2, 3], Dtype::F32).build(target()));
    assert!(
        matches!(&e, OpError::InvalidShape(m) if m.contains("required")),
        "{e:?}"
    );
    let e = err(builder("ArgMax", &[2, 0], Dtype::F32)
        .attr("axis", int(1))
        .build(target()));
    assert!(
        matches!(&e, OpError::InvalidShape(m) if m.contains("empty")),
        "{e:?}"
    );
    // axes input present but its value not sent
    let e = err(builder("ReduceSum", &[2, 3], Dtype::F32)
        .input(TensorDesc::new("axes", vec![1], Dtype::I64))
        .build(target()));
    assert!(
        matches!(&e, OpError::InvalidShape(m) if m.contains("must be known")),
        "{e:?}"
    );
    let e = err(builder("ReduceSum", &[1; 9], Dtype::F32).build(target()));
    assert!(
        matches!(&e, OpError::InvalidShape(m) if m.contains("rank 9")),
        "{e:?}"
    );
    let e = err(builder("ReduceSum", &[1 << 40, 1 << 40], Dtype::F32).build(target()));
    assert!(matches!(e, OpError::InvalidShape(_)), "{e:?}");
    let e = err(PlanRequestExt::builder("ReduceSum").build(target()));
    assert!(
        matches!(&e, OpError::InvalidShape(m) if m.contains("required")),
        "{e:?}"
    );
    let e = err(with_ints(
        with_ints(builder("ReduceSum", &[2], Dtype::F32), &[0], false),
        &[0],
        false,
    )
    .build(target()));
    assert!(
        matches!(&e, OpError::InvalidShape(m) if m.contains("at most 2")),
        "{e:?}"
    );
}

#[test]
fn unknown_ops_are_unsupported() {
    let e = err(builder("ReduceMedian", &[2], Dtype::F32).build(target()));
    assert!(matches!(e, OpError::UnsupportedOp(_)));
}

#[test]
fn corrupt_cpu_calls_are_internal_errors() {
    use umd_sdk::Plugin;
    let req = with_ints(builder("ReduceSum", &[2, 3], Dtype::F32), &[1], false).build(target());
    let l = plan(&req).unwrap().launches.remove(0);
    let call = |entry: &str, data: Vec<u8>| umd_sdk::CpuCall {
        module_id: l.module_id.clone(),
        entry_point: entry.into(),
        grid: l.grid,
        block: l.block,
        params: l.params.clone(),
        relocations: l.relocations.clone(),
        buffers: vec![
            umd_sdk::CpuBuffer {
                binding: 0,
                size: data.len() as u64,
                data,
            },
            umd_sdk::CpuBuffer {
                binding: 2,
                size: 8,
                data: vec![],
            },
        ],
    };
    assert!(matches!(
        Reduce::run_cpu(call("median_f32_rows", vec![0; 24])),
        Err(OpError::Internal(_))
    ));
    assert!(matches!(
        Reduce::run_cpu(call("sum_f99_rows", vec![0; 24])),
        Err(OpError::Internal(_))
    ));
    assert!(
        matches!(
            Reduce::run_cpu(call("sum_f32_cols", vec![0; 20])),
            Err(OpError::Internal(_))
        ),
        "short input"
    );
    assert!(Reduce::run_cpu(call("sum_f32_cols", vec![0; 24])).is_ok());
}
