//! Native tests: every op against naive references written here (`reference`), the ONNX
//! backend node cases (`node_cases`), error cases, and the CUDA sources of every op × dtype.

#![allow(clippy::too_many_arguments)]

mod conv;
mod deform;
mod emu;
mod fused;
mod inplace;
mod node_cases;
mod pool;
mod quant;
mod reference;

use crate::Conv;
use umd_sdk::{AttrValueExt, Dtype, OpError, OpPlan, PlanRequestExt, Target, TensorDesc, dtype};

pub const FLOATS: [Dtype; 4] = [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F64];

/// A request for `op` with present `inputs` (shape, dtype) and attributes.
pub fn request(
    op: &str,
    inputs: &[(&[u64], Dtype)],
    attrs: &[(&str, AttrValueExt)],
) -> PlanRequestExt {
    let mut b = PlanRequestExt::builder(op);
    for (i, (shape, dt)) in inputs.iter().enumerate() {
        b = b.input(TensorDesc::new(format!("in{i}"), shape.to_vec(), *dt));
    }
    for (name, v) in attrs {
        b = b.attr(name, v.clone());
    }
    b.build(Target::cpu())
}

pub fn ints(v: &[i64]) -> AttrValueExt {
    AttrValueExt::Ints(v.to_vec())
}
pub fn int(v: i64) -> AttrValueExt {
    AttrValueExt::Int(v)
}
pub fn text(v: &str) -> AttrValueExt {
    AttrValueExt::Text(v.into())
}

/// Plans and runs `req` on the CPU kernels with `inputs` (one value list per present input, in
/// that input's dtype); returns the plan and every output as f64.
pub fn run(req: &PlanRequestExt, inputs: &[Vec<f64>]) -> Result<(OpPlan, Vec<Vec<f64>>), OpError> {
    let bytes: Vec<Vec<u8>> = req
        .present()
        .zip(inputs)
        .map(|(d, v)| dtype::encode(d.dtype, v).unwrap())
        .collect();
    let (plan, outs) = umd_sdk::testing::run::<Conv>(req, &bytes)?;
    let vals = plan
        .outputs
        .iter()
        .zip(&outs)
        .map(|(d, b)| dtype::decode_f64(d.dtype, b))
        .collect();
    Ok((plan, vals))
}

/// Deterministic pseudo-random values in [-1, 1), rounded to `dt`.
pub fn data(n: usize, seed: u64, dt: Dtype) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let v: Vec<f64> = (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect();
    round(dt, &v)
}

/// Values rounded to what `dt` holds.
pub fn round(dt: Dtype, v: &[f64]) -> Vec<f64> {
    dtype::decode_f64(dt, &dtype::encode(dt, v).unwrap())
}

/// (absolute, relative) tolerance of a float result with sums of `terms` products.
pub fn tol(dt: Dtype) -> f64 {
    match dt {
        Dtype::F64 => 1e-12,
        Dtype::F32 => 1e-5,
        Dtype::F16 => 4e-3,
        _ => 2e-2,
    }
}

/// Asserts `got` matches `want` within `|got-want| <= t * (1 + |want|)` (NaN matches NaN).
pub fn assert_close(got: &[f64], want: &[f64], t: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= t * (1.0 + w.abs());
        assert!(ok, "{what}: element {i}: got {g}, want {w} (tolerance {t})");
    }
}

#[test]
fn describe_lists_every_op_on_both_targets() {
    use umd_sdk::Plugin;
    let info = Conv::describe();
    assert_eq!(info.name, "conv");
    // the ONNX ops, then the fused chains (domain `ai.umd.fused`, each with its signature)
    assert_eq!(info.ops.len(), crate::OPS.len() + crate::fused::OPS.len());
    let sigs = Conv::signatures();
    assert!(crate::fused::OPS.iter().all(|op| {
        sigs.iter()
            .any(|s| s.name == *op && s.domain == umd_sdk::fused::DOMAIN)
    }));
    assert!(
        info.ops
            .iter()
            .all(|o| o.targets == ["cpu", "cuda"] && o.priority == 0)
    );
    assert!(Conv::tolerance("Conv", Dtype::F16).is_some());
    assert!(Conv::tolerance("MaxPool", Dtype::F32).is_none());
}

#[test]
fn self_tests_pass_on_the_cpu_kernels() {
    use umd_sdk::Plugin;
    for case in Conv::self_tests() {
        let mut b = PlanRequestExt::builder(&case.op);
        for d in &case.inputs {
            b = b.input(umd_sdk::legacy::desc_from_legacy(d));
        }
        let mut req = b.build(Target::cpu());
        req.attributes = PlanRequestExt::from_legacy(&umd_sdk::PlanRequest {
            op: case.op.clone(),
            inputs: vec![],
            attributes: case.attributes.clone(),
            target: Target::cpu(),
        })
        .attributes;
        let (plan, outs) = umd_sdk::testing::run::<Conv>(&req, &case.input_data).unwrap();
        for ((d, got), want) in plan.outputs.iter().zip(&outs).zip(&case.expected) {
            assert_close(
                &dtype::decode_f64(d.dtype, got),
                &dtype::decode_f64(d.dtype, want),
                case.tolerance.max(1e-12),
                &case.name,
            );
        }
    }
}

#[test]
fn unknown_ops_and_domains_are_refused() {
    let r = request("Relu", &[(&[1, 1, 2], Dtype::F32)], &[]);
    assert!(matches!(
        run(&r, &[vec![0.0; 2]]),
        Err(OpError::UnsupportedOp(_))
    ));
    let mut r = request(
        "MaxPool",
        &[(&[1, 1, 2], Dtype::F32)],
        &[("kernel_shape", ints(&[1]))],
    );
    r.domain = "com.microsoft".into();
    assert!(matches!(
        run(&r, &[vec![0.0; 2]]),
        Err(OpError::UnsupportedOp(_))
    ));
}

#[test]
fn cuda_sources_exist_for_every_op_and_dtype() {
    let conv = |op: &str, dt, bias: bool| {
        let mut inputs: Vec<(&[u64], Dtype)> = vec![(&[1, 2, 5, 5], dt), (&[2, 2, 3, 3], dt)];
        if bias {
            inputs.push((&[2], dt));
        }
        request(op, &inputs, &[])
    };
    let pool =
        |op: &str, dt, attrs: &[(&str, AttrValueExt)]| request(op, &[(&[1, 2, 5, 5], dt)], attrs);
    let k = ("kernel_shape", ints(&[2, 2]));
    for dt in [
        Dtype::F32,
        Dtype::F16,
        Dtype::Bf16,
        Dtype::F64,
        Dtype::I8,
        Dtype::U8,
    ] {
        let mut reqs = vec![
            pool("MaxPool", dt, std::slice::from_ref(&k)),
            pool("GlobalMaxPool", dt, &[]),
        ];
        let mut idx = pool("MaxPool", dt, std::slice::from_ref(&k));
        idx.outputs_wanted = vec![true, true];
        reqs.push(idx);
        if FLOATS.contains(&dt) {
            for op in ["Conv", "ConvTranspose"] {
                reqs.push(conv(op, dt, false));
                reqs.push(conv(op, dt, true));
            }
            for op in ["AveragePool", "LpPool"] {
                reqs.push(pool(op, dt, std::slice::from_ref(&k)));
            }
            reqs.push(pool("GlobalAveragePool", dt, &[]));
            reqs.push(pool("GlobalLpPool", dt, &[]));
        }
        for req in &reqs {
            let srcs = umd_sdk::testing::cuda_sources::<Conv>(req)
                .unwrap_or_else(|e| panic!("{} {dt:?}: {e:?}", req.op));
            assert_eq!(srcs.len(), 1);
            let (id, src) = &srcs[0];
            assert_eq!(id, &crate::module_id(dt));
            assert!(!src.code.contains("#include"));
            for e in &src.entry_points {
                assert!(src.code.contains(&format!("void {e}(")), "{e} defined");
            }
        }
    }
}

/// Timing of the CPU kernels on typical CNN layers (`cargo test --release -- --ignored bench`).
#[test]
#[ignore]
fn bench_cpu_layers() {
    let layers: [(&str, &[u64], &[u64]); 5] = [
        ("conv 7x7/2 3->64 224", &[1, 3, 224, 224], &[64, 3, 7, 7]),
        ("conv 3x3 64->64 56", &[1, 64, 56, 56], &[64, 64, 3, 3]),
        ("conv 1x1 256->64 56", &[1, 256, 56, 56], &[64, 256, 1, 1]),
        ("conv 3x3 256->256 14", &[1, 256, 14, 14], &[256, 256, 3, 3]),
        ("dw 3x3 128 56", &[1, 128, 56, 56], &[128, 1, 3, 3]),
    ];
    for (name, xs, ws) in layers {
        let group = if ws[1] == 1 { xs[1] as i64 } else { 1 };
        let k = ws[2] as i64;
        let stride = if name.contains("/2") { 2 } else { 1 };
        let a = [
            ("group", int(group)),
            ("strides", ints(&[stride, stride])),
            ("pads", ints(&[k / 2; 4])),
        ];
        let r = request("Conv", &[(xs, Dtype::F32), (ws, Dtype::F32)], &a);
        let inputs = [
            data(xs.iter().product::<u64>() as usize, 1, Dtype::F32),
            data(ws.iter().product::<u64>() as usize, 2, Dtype::F32),
        ];
        let bytes: Vec<Vec<u8>> = inputs
            .iter()
            .map(|v| dtype::encode(Dtype::F32, v).unwrap())
            .collect();
        let t = std::time::Instant::now();
        let (plan, _) = umd_sdk::testing::run::<Conv>(&r, &bytes).unwrap();
        let dt = t.elapsed().as_secs_f64();
        let out: u64 = plan.outputs[0].shape.iter().product();
        let flops = 2.0 * out as f64 * (ws[1] * ws[2] * ws[3]) as f64;
        eprintln!(
            "{name}: {:.1} ms, {:.2} GFLOP/s",
            dt * 1e3,
            flops / dt / 1e9
        );
    }
}
