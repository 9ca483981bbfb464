//! Native tests: every op planned and run on the CPU kernels against naive f64 references written
//! here (or ONNX's published values), across dtypes, attributes, opsets, empty and strided shapes,
//! error cases, and the CUDA sources of every op × dtype.

use super::*;
use std::collections::BTreeMap;
use umd_sdk::{AttrValueExt as A, PlanRequestExt, Target, testing};

const ALL: [Dtype; 4] = DTYPES;

/// Deterministic values in [-2, 2).
fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
        })
        .collect()
}

/// Positive values in [0.1, 2.1) (variances).
fn positive(n: usize, seed: u64) -> Vec<f64> {
    data(n, seed).into_iter().map(|v| v.abs() + 0.1).collect()
}

/// `v` rounded to `dt` (references start from the values the kernel sees).
fn round(dt: Dtype, v: &[f64]) -> Vec<f64> {
    dtype::decode_f64(dt, &dtype::encode(dt, v).unwrap())
}

fn numel(shape: &[u64]) -> usize {
    shape.iter().product::<u64>() as usize
}

/// A request: `inputs` as (shape, dtype) or absent, attributes, opset, outputs wanted.
struct Req {
    op: &'static str,
    inputs: Vec<Option<(Vec<u64>, Dtype)>>,
    attrs: Vec<(&'static str, A)>,
    opset: u32,
    outputs: usize,
}

impl Req {
    fn new(op: &'static str, x: &[u64], dt: Dtype) -> Self {
        Req {
            op,
            inputs: vec![Some((x.to_vec(), dt))],
            attrs: vec![],
            opset: 0,
            outputs: 0,
        }
    }
    fn input(mut self, shape: &[u64], dt: Dtype) -> Self {
        self.inputs.push(Some((shape.to_vec(), dt)));
        self
    }
    fn absent(mut self) -> Self {
        self.inputs.push(None);
        self
    }
    fn attr(mut self, name: &'static str, v: A) -> Self {
        self.attrs.push((name, v));
        self
    }
    fn opset(mut self, o: u32) -> Self {
        self.opset = o;
        self
    }
    fn outputs(mut self, n: usize) -> Self {
        self.outputs = n;
        self
    }
    fn build(&self, target: Target) -> PlanRequestExt {
        let mut b = PlanRequestExt::builder(self.op).opset(self.opset);
        for (i, s) in self.inputs.iter().enumerate() {
            b = match s {
                Some((shape, dt)) => b.input(TensorDesc::new(format!("in{i}"), shape.clone(), *dt)),
                None => b.absent(),
            };
        }
        for (n, v) in &self.attrs {
            b = b.attr(n, v.clone());
        }
        if self.outputs > 0 {
            b = b.outputs_wanted(vec![true; self.outputs]);
        }
        b.build(target)
    }
    fn plan(&self) -> Result<OpPlan, OpError> {
        Norm::plan_ext(&self.build(Target::cpu()))
    }
    /// Runs on the CPU kernels with one value list per present input (rounded to its dtype);
    /// returns every output decoded.
    fn run(&self, values: &[Vec<f64>]) -> Result<Vec<(TensorDesc, Vec<f64>)>, OpError> {
        let present: Vec<_> = self.inputs.iter().flatten().collect();
        assert_eq!(
            present.len(),
            values.len(),
            "one value list per present input"
        );
        let bytes: Vec<Vec<u8>> = present
            .iter()
            .zip(values)
            .map(|((shape, dt), v)| {
                assert_eq!(v.len(), numel(shape));
                dtype::encode(*dt, v).unwrap()
            })
            .collect();
        let (plan, outs) = testing::run::<Norm>(&self.build(Target::cpu()), &bytes)?;
        Ok(plan
            .outputs
            .into_iter()
            .zip(outs)
            .map(|(d, b)| {
                let v = dtype::decode_f64(d.dtype, &b);
                (d, v)
            })
            .collect())
    }
}

/// Comparison tolerance of CPU results against f64 references (inputs already rounded).
fn tol(dt: Dtype) -> (f64, f64) {
    match dt {
        Dtype::F32 => (1e-5, 1e-5),
        Dtype::F16 => (2e-3, 2e-3),
        Dtype::Bf16 => (1.6e-2, 1.6e-2),
        _ => (1e-12, 1e-12),
    }
}

fn assert_close(got: &[f64], want: &[f64], dt: Dtype, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let (a, r) = tol(dt);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= a + r * w.abs() || g == w;
        assert!(ok, "{what} [{i}]: got {g}, want {w} ({dt:?})");
    }
}

// ---------------------------------------------------------------- references

/// Softmax family along the middle dim of `(outer, len, inner)`; mode 0/1/2.
fn softmax_ref(x: &[f64], (o, l, n): (usize, usize, usize), mode: u32) -> Vec<f64> {
    let mut y = vec![0.0; x.len()];
    for a in 0..o {
        for c in 0..n {
            let idx = |e: usize| a * l * n + e * n + c;
            if mode == 2 {
                // numpy argmax: first NaN, else first maximum
                let mut best = 0;
                for e in 0..l {
                    let (v, b) = (x[idx(e)], x[idx(best)]);
                    if !b.is_nan() && (v.is_nan() || v > b) {
                        best = e;
                    }
                }
                if l > 0 {
                    y[idx(best)] = 1.0;
                }
                continue;
            }
            let m = (0..l).map(|e| x[idx(e)]).fold(f64::NEG_INFINITY, |m, v| {
                if v.is_nan() || m.is_nan() {
                    f64::NAN
                } else {
                    m.max(v)
                }
            });
            let s: f64 = (0..l).map(|e| (x[idx(e)] - m).exp()).sum();
            for e in 0..l {
                y[idx(e)] = if mode == 0 {
                    (x[idx(e)] - m).exp() / s
                } else {
                    x[idx(e)] - m - s.ln()
                };
            }
        }
    }
    y
}

/// Mean and population variance.
fn moments(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    (m, v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n)
}

/// LayerNorm over rows of `d`: (Y, Mean, InvStdDev).
fn layer_norm_ref(x: &[f64], d: usize, w: &[f64], b: Option<&[f64]>, eps: f64) -> [Vec<f64>; 3] {
    let rows = x.len().checked_div(d).unwrap_or(0);
    let (mut y, mut mean, mut inv) = (vec![], vec![], vec![]);
    for r in 0..rows {
        let row = &x[r * d..(r + 1) * d];
        let (m, var) = moments(row);
        let is = 1.0 / (var + eps).sqrt();
        for (j, v) in row.iter().enumerate() {
            let wj = w[j % w.len()];
            let bj = b.map_or(0.0, |b| b[j % b.len()]);
            y.push((v - m) * is * wj + bj);
        }
        mean.push(m);
        inv.push(is);
    }
    [y, mean, inv]
}

/// `(N, C, spatial)` of an `(N, C, ...)` shape.
fn ncs(shape: &[u64]) -> (usize, usize, usize) {
    (shape[0] as usize, shape[1] as usize, numel(&shape[2..]))
}

#[allow(clippy::needless_range_loop)]
fn batchnorm_ref(x: &[f64], dims: (usize, usize, usize), p: &[Vec<f64>], eps: f64) -> Vec<f64> {
    let (n, c, s) = dims;
    let mut y = vec![0.0; x.len()];
    for a in 0..n {
        for ch in 0..c {
            for k in 0..s {
                let i = (a * c + ch) * s + k;
                y[i] = p[0][ch] * (x[i] - p[2][ch]) / (p[3][ch] + eps).sqrt() + p[1][ch];
            }
        }
    }
    y
}

/// Training-mode BatchNorm: (Y, running mean, running var, batch mean, batch var).
fn batchnorm_train_ref(
    x: &[f64],
    (n, c, s): (usize, usize, usize),
    p: &[Vec<f64>],
    eps: f64,
    mom: f64,
) -> [Vec<f64>; 5] {
    let mut stats = (vec![], vec![]);
    for ch in 0..c {
        let vals: Vec<f64> = (0..n)
            .flat_map(|a| (0..s).map(move |k| (a * c + ch) * s + k))
            .map(|i| x[i])
            .collect();
        let (m, v) = moments(&vals);
        stats.0.push(m);
        stats.1.push(v);
    }
    let y = batchnorm_ref(
        x,
        (n, c, s),
        &[p[0].clone(), p[1].clone(), stats.0.clone(), stats.1.clone()],
        eps,
    );
    let rm = (0..c)
        .map(|i| p[2][i] * mom + stats.0[i] * (1.0 - mom))
        .collect();
    let rv = (0..c)
        .map(|i| p[3][i] * mom + stats.1[i] * (1.0 - mom))
        .collect();
    [y, rm, rv, stats.0, stats.1]
}

/// GroupNorm (InstanceNorm when groups == C) with scale/bias per channel or per group.
fn group_norm_ref(
    x: &[f64],
    (n, c, s): (usize, usize, usize),
    groups: usize,
    scale: &[f64],
    bias: &[f64],
    eps: f64,
) -> Vec<f64> {
    let cg = c / groups;
    let per_channel = scale.len() == c;
    let mut y = vec![0.0; x.len()];
    for a in 0..n {
        for g in 0..groups {
            let start = (a * c + g * cg) * s;
            let vals = &x[start..start + cg * s];
            let (m, v) = moments(vals);
            for (j, xv) in vals.iter().enumerate() {
                let k = if per_channel { g * cg + j / s } else { g };
                y[start + j] = (xv - m) / (v + eps).sqrt() * scale[k] + bias[k];
            }
        }
    }
    y
}

fn lrn_ref(
    x: &[f64],
    (n, c, s): (usize, usize, usize),
    size: usize,
    a: f64,
    b: f64,
    k: f64,
) -> Vec<f64> {
    let (c1, c2) = ((size - 1) / 2, (size - 1).div_ceil(2) + 1);
    let mut y = vec![0.0; x.len()];
    for i0 in 0..n {
        for ch in 0..c {
            for p in 0..s {
                let lo = ch.saturating_sub(c1);
                let hi = (ch + c2).min(c);
                let sq: f64 = (lo..hi).map(|cc| x[(i0 * c + cc) * s + p].powi(2)).sum();
                let i = (i0 * c + ch) * s + p;
                y[i] = x[i] / (k + a / size as f64 * sq).powf(b);
            }
        }
    }
    y
}

/// MVN over `axes` of `shape`, as ONNX defines it: (x - E[x]) / (sqrt(E[x²] - E[x]²) + 1e-9).
fn mvn_ref(x: &[f64], shape: &[u64], axes: &[usize]) -> Vec<f64> {
    let strides = umd_sdk::shape::contiguous_strides(shape);
    let key = |i: usize| -> Vec<u64> {
        (0..shape.len())
            .map(|d| {
                if axes.contains(&d) {
                    0
                } else {
                    (i as u64 / strides[d]) % shape[d]
                }
            })
            .collect()
    };
    let mut acc: BTreeMap<Vec<u64>, (f64, f64, f64)> = BTreeMap::new();
    for (i, v) in x.iter().enumerate() {
        let e = acc.entry(key(i)).or_default();
        e.0 += v;
        e.1 += v * v;
        e.2 += 1.0;
    }
    x.iter()
        .enumerate()
        .map(|(i, v)| {
            let (s, q, n) = acc[&key(i)];
            let m = s / n;
            (v - m) / ((q / n - m * m).max(0.0).sqrt() + 1e-9)
        })
        .collect()
}

// ---------------------------------------------------------------- softmax family

/// The (outer, len, inner) view the test expects, from the ONNX definitions.
fn softmax_view(shape: &[u64], axis: i64, opset: u32) -> (usize, usize, usize) {
    let r = shape.len() as i64;
    let a = (if axis < 0 { axis + r } else { axis }) as usize;
    if opset < 13 {
        (numel(&shape[..a]), numel(&shape[a..]), 1)
    } else {
        (
            numel(&shape[..a]),
            shape[a] as usize,
            numel(&shape[a + 1..]),
        )
    }
}

#[test]
fn softmax_family_matches_the_reference_on_every_axis_opset_and_dtype() {
    let shape = [3u64, 4, 5];
    for (op, mode) in [("Softmax", 0), ("LogSoftmax", 1), ("Hardmax", 2)] {
        for dt in ALL {
            let x = round(dt, &data(60, 7));
            for opset in [11, 13] {
                for axis in [None, Some(0), Some(1), Some(2), Some(-1), Some(-2)] {
                    let mut r = Req::new(op, &shape, dt).opset(opset);
                    if let Some(a) = axis {
                        r = r.attr("axis", A::Int(a));
                    }
                    let default = if opset < 13 { 1 } else { -1 };
                    let view = softmax_view(&shape, axis.unwrap_or(default), opset);
                    let got = r.run(std::slice::from_ref(&x)).unwrap();
                    assert_eq!(got[0].0.shape, shape.to_vec());
                    let want = softmax_ref(&x, view, mode);
                    let what = format!("{op} {dt:?} opset {opset} axis {axis:?}");
                    assert_close(&got[0].1, &want, dt, &what);
                }
            }
        }
    }
}

#[test]
fn softmax_matches_onnx_published_values() {
    let r = Req::new("Softmax", &[1, 3], Dtype::F32);
    let got = r.run(&[vec![-1., 0., 1.]]).unwrap();
    assert_close(
        &got[0].1,
        &[0.09003057, 0.24472847, 0.66524096],
        Dtype::F32,
        "example",
    );
    let r = Req::new("LogSoftmax", &[1, 3], Dtype::F32);
    let got = r.run(&[vec![-1., 0., 1.]]).unwrap();
    assert_close(
        &got[0].1,
        &[-2.4076061, -1.4076061, -0.40760612],
        Dtype::F32,
        "log",
    );
    // large numbers: the max subtraction keeps them finite
    let x = vec![0., 1., 2., 3., 10000., 10001., 10002., 10003.];
    let want = [0.032058604, 0.08714432, 0.23688284, 0.6439143];
    let got = Req::new("Softmax", &[2, 4], Dtype::F32).run(&[x]).unwrap();
    assert_close(&got[0].1[..4], &want, Dtype::F32, "large 0");
    assert_close(&got[0].1[4..], &want, Dtype::F32, "large 1");
}

#[test]
fn softmax_opsets_differ_in_what_a_row_is() {
    let x = data(60, 3);
    let r = |opset| {
        Req::new("Softmax", &[3, 4, 5], Dtype::F32)
            .opset(opset)
            .attr("axis", A::Int(1))
            .run(std::slice::from_ref(&x))
            .unwrap()
            .remove(0)
            .1
    };
    let (old, new) = (r(11), r(13));
    for b in 0..3 {
        let s: f64 = old[b * 20..(b + 1) * 20].iter().sum();
        assert!((s - 1.0).abs() < 1e-5, "opset 11: one row of 20 per batch");
        for k in 0..5 {
            let s: f64 = (0..4).map(|j| new[b * 20 + j * 5 + k]).sum();
            assert!((s - 1.0).abs() < 1e-5, "opset 13: rows along axis 1");
        }
    }
    // opset 1 (unsaid axis means 1) and an axis equal to the rank (one-element rows)
    let got = Req::new("Softmax", &[2, 3], Dtype::F32)
        .opset(1)
        .attr("axis", A::Int(2))
        .run(&[data(6, 1)])
        .unwrap();
    assert_eq!(got[0].1, vec![1.0; 6]);
}

#[test]
fn softmax_propagates_nan_and_hardmax_picks_the_first_nan_or_maximum() {
    let nan = f64::NAN;
    for dt in ALL {
        let x = vec![1., nan, 2., 3., 3., 1.];
        let got = Req::new("Softmax", &[2, 3], dt)
            .run(std::slice::from_ref(&x))
            .unwrap();
        assert!(got[0].1[..3].iter().all(|v| v.is_nan()), "{dt:?}");
        assert!(got[0].1[3..].iter().all(|v| !v.is_nan()), "{dt:?}");
        let got = Req::new("Hardmax", &[2, 3], dt).run(&[x]).unwrap();
        assert_eq!(got[0].1, vec![0., 1., 0., 1., 0., 0.], "{dt:?}");
        // strided columns: ties and NaN along axis 0
        let x = vec![1., 5., nan, 1., 5., 2.];
        let got = Req::new("Hardmax", &[2, 3], dt)
            .attr("axis", A::Int(0))
            .run(&[x])
            .unwrap();
        assert_eq!(got[0].1, vec![1., 1., 1., 0., 0., 0.], "{dt:?}");
    }
}

#[test]
fn softmax_strided_and_row_kernels_are_chosen_by_layout() {
    let plan = |axis| {
        Req::new("Softmax", &[4, 8], Dtype::F32)
            .attr("axis", A::Int(axis))
            .plan()
            .unwrap()
    };
    assert_eq!(plan(1).launches[0].entry_point, "softmax_f32_rows");
    assert_eq!(plan(0).launches[0].entry_point, "softmax_f32_cols");
    let rows = plan(1);
    assert_eq!((rows.launches[0].grid.x, rows.launches[0].block.x), (4, 32));
}

// ---------------------------------------------------------------- LayerNormalization

#[test]
fn layer_norm_matches_the_reference_on_every_axis_with_statistics() {
    let shape = [2u64, 3, 4, 5];
    for dt in ALL {
        let x = round(dt, &data(120, 11));
        for axis in -4i64..4 {
            let a = if axis < 0 { axis + 4 } else { axis } as usize;
            let norm = &shape[a..];
            let d = numel(norm);
            let (w, b) = (round(dt, &data(d, 5)), round(dt, &data(d, 6)));
            let r = Req::new("LayerNormalization", &shape, dt)
                .input(norm, dt)
                .input(norm, dt)
                .attr("axis", A::Int(axis))
                .outputs(3);
            let got = r.run(&[x.clone(), w.clone(), b.clone()]).unwrap();
            let want = layer_norm_ref(&x, d, &w, Some(&b), 1e-5);
            let what = format!("LayerNorm {dt:?} axis {axis}");
            assert_close(&got[0].1, &want[0], dt, &what);
            let mut stat_shape = shape[..a].to_vec();
            stat_shape.resize(4, 1);
            for k in 1..3 {
                assert_eq!(
                    got[k].0.dtype,
                    Dtype::F32,
                    "stash_type 1 statistics are float"
                );
                assert_eq!(got[k].0.shape, stat_shape);
                assert_close(&got[k].1, &want[k], Dtype::F32.max_of(dt), &what);
            }
        }
    }
}

/// The looser of two dtypes' tolerances (statistics are computed in the data's precision).
trait MaxOf {
    fn max_of(self, other: Dtype) -> Dtype;
}
impl MaxOf for Dtype {
    fn max_of(self, other: Dtype) -> Dtype {
        if tol(other).0 > tol(self).0 {
            other
        } else {
            self
        }
    }
}

#[test]
fn layer_norm_without_bias_with_a_scalar_scale_epsilon_and_bf16_statistics() {
    let x = data(30, 2);
    let r = Req::new("LayerNormalization", &[2, 3, 5], Dtype::F32)
        .input(&[1], Dtype::F32)
        .attr("axis", A::Int(1))
        .attr("epsilon", A::Float(0.1))
        .attr("stash_type", A::Int(16))
        .outputs(2);
    let got = r.run(&[x.clone(), vec![2.5]]).unwrap();
    let want = layer_norm_ref(&x, 15, &[2.5], None, 0.1);
    assert_close(&got[0].1, &want[0], Dtype::F32, "y");
    assert_eq!(got.len(), 2, "only the outputs asked for");
    assert_eq!(got[1].0.dtype, Dtype::Bf16);
    assert_close(&got[1].1, &want[1], Dtype::Bf16, "mean");
    // an absent B slot followed by nothing, and a scale with leading 1s
    let r = Req::new("LayerNormalization", &[2, 5], Dtype::F64)
        .input(&[1, 5], Dtype::F64)
        .absent();
    let w = data(5, 9);
    let got = r.run(&[data(10, 8), w.clone()]).unwrap();
    let want = layer_norm_ref(&data(10, 8), 5, &w, None, 1e-5);
    assert_close(&got[0].1, &want[0], Dtype::F64, "f64 no bias");
}

#[test]
fn layer_norm_refuses_bad_requests() {
    let base = || Req::new("LayerNormalization", &[2, 3], Dtype::F32).input(&[3], Dtype::F32);
    let e = base().attr("axis", A::Int(2)).plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("axis")));
    let e = base().attr("stash_type", A::Int(7)).plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("stash_type")));
    let e = base().attr("momentum", A::Float(0.5)).plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("momentum")));
    let e = Req::new("LayerNormalization", &[2, 3], Dtype::F32)
        .input(&[2], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)));
    let e = base().input(&[3], Dtype::F16).plan().unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(_)));
    let e = Req::new("LayerNormalization", &[2, 3], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(m) if m.contains("required")));
    let e = base().outputs(4).plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)));
}

// ---------------------------------------------------------------- BatchNormalization

fn bn_params(c: usize, dt: Dtype) -> Vec<Vec<f64>> {
    vec![
        round(dt, &data(c, 21)),
        round(dt, &data(c, 22)),
        round(dt, &data(c, 23)),
        round(dt, &positive(c, 24)),
    ]
}

fn bn_request(shape: &[u64], dt: Dtype) -> Req {
    let c = shape[1];
    let mut r = Req::new("BatchNormalization", shape, dt);
    for _ in 0..4 {
        r = r.input(&[c], dt);
    }
    r
}

#[test]
fn batch_norm_inference_matches_the_reference() {
    for shape in [&[2u64, 3, 4, 5][..], &[4, 3], &[1, 2, 7]] {
        for dt in ALL {
            let dims = ncs(shape);
            let x = round(dt, &data(numel(shape), 20));
            let p = bn_params(dims.1, dt);
            for eps in [None, Some(1e-2)] {
                let mut r = bn_request(shape, dt);
                if let Some(e) = eps {
                    r = r.attr("epsilon", A::Float(e));
                }
                let mut inputs = vec![x.clone()];
                inputs.extend(p.iter().cloned());
                let got = r.run(&inputs).unwrap();
                let want = batchnorm_ref(&x, dims, &p, eps.unwrap_or(1e-5));
                assert_close(&got[0].1, &want, dt, &format!("BN {shape:?} {dt:?}"));
                assert_eq!(got[0].0.shape, shape.to_vec());
            }
        }
    }
}

#[test]
fn batch_norm_training_mode_produces_running_statistics() {
    let shape = [2u64, 3, 4, 5];
    for dt in ALL {
        let dims = ncs(&shape);
        let x = round(dt, &data(120, 30));
        let p = bn_params(3, dt);
        let mut inputs = vec![x.clone()];
        inputs.extend(p.iter().cloned());
        let r = bn_request(&shape, dt)
            .attr("training_mode", A::Int(1))
            .attr("epsilon", A::Float(1e-2))
            .outputs(3);
        let got = r.run(&inputs).unwrap();
        let want = batchnorm_train_ref(&x, dims, &p, 1e-2, 0.9);
        assert_eq!(got.len(), 3);
        for k in 0..3 {
            assert_close(&got[k].1, &want[k], dt, &format!("BN train {dt:?} out {k}"));
        }
        // opset 9: training is asked for by the extra outputs; saved mean/var too
        let r = bn_request(&shape, dt)
            .opset(9)
            .attr("momentum", A::Float(0.7))
            .outputs(5);
        let got = r.run(&inputs).unwrap();
        let want = batchnorm_train_ref(&x, dims, &p, 1e-5, 0.7);
        for k in 0..5 {
            assert_close(
                &got[k].1,
                &want[k],
                dt,
                &format!("BN opset 9 {dt:?} out {k}"),
            );
        }
    }
    // training mode with only Y wanted
    let x = data(24, 3);
    let p = bn_params(3, Dtype::F32);
    let mut inputs = vec![x.clone()];
    inputs.extend(p.iter().cloned());
    let got = bn_request(&[2, 3, 4], Dtype::F32)
        .attr("training_mode", A::Int(1))
        .run(&inputs)
        .unwrap();
    let want = batchnorm_train_ref(&x, (2, 3, 4), &p, 1e-5, 0.9);
    assert_close(&got[0].1, &want[0], Dtype::F32, "Y only");
}

#[test]
fn batch_norm_refuses_bad_requests() {
    let e = bn_request(&[2, 3], Dtype::F32)
        .attr("spatial", A::Int(0))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("spatial")));
    let e = bn_request(&[2, 3], Dtype::F32)
        .outputs(3)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("training")));
    let e = Req::new("BatchNormalization", &[2, 3], Dtype::F32)
        .input(&[3], Dtype::F32)
        .input(&[3], Dtype::F32)
        .input(&[2], Dtype::F32)
        .input(&[3], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(m) if m.contains("[3]")));
    let mut rank1 = Req::new("BatchNormalization", &[3], Dtype::F32);
    for _ in 0..4 {
        rank1 = rank1.input(&[3], Dtype::F32);
    }
    let e = rank1.plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)));
}

// ---------------------------------------------------------------- Instance / Group norm

#[test]
fn instance_norm_matches_the_reference() {
    for shape in [&[2u64, 3, 4, 5][..], &[1, 2, 1, 3], &[2, 3]] {
        for dt in ALL {
            let (n, c, s) = ncs(shape);
            let x = round(dt, &data(numel(shape), 40));
            let (w, b) = (round(dt, &data(c, 41)), round(dt, &data(c, 42)));
            let got = Req::new("InstanceNormalization", shape, dt)
                .input(&[c as u64], dt)
                .input(&[c as u64], dt)
                .attr("epsilon", A::Float(1e-2))
                .run(&[x.clone(), w.clone(), b.clone()])
                .unwrap();
            let want = group_norm_ref(&x, (n, c, s), c, &w, &b, 1e-2);
            assert_close(&got[0].1, &want, dt, &format!("Instance {shape:?} {dt:?}"));
        }
    }
    // ONNX's published example
    let got = Req::new("InstanceNormalization", &[1, 2, 1, 3], Dtype::F32)
        .input(&[2], Dtype::F32)
        .input(&[2], Dtype::F32)
        .run(&[vec![-1., 0., 1., 2., 3., 4.], vec![1., 1.5], vec![0., 1.]])
        .unwrap();
    let want = [-1.2247356, 0., 1.2247356, -0.8371035, 1., 2.8371034];
    assert_close(&got[0].1, &want, Dtype::F32, "instancenorm example");
}

#[test]
fn group_norm_serves_per_channel_and_per_group_parameters() {
    let shape = [3u64, 4, 2, 2];
    for dt in ALL {
        let dims = ncs(&shape);
        let x = round(dt, &data(48, 50));
        for (opset, len) in [(21, 4usize), (18, 2), (0, 4), (0, 2)] {
            let (w, b) = (round(dt, &data(len, 51)), round(dt, &data(len, 52)));
            let got = Req::new("GroupNormalization", &shape, dt)
                .input(&[len as u64], dt)
                .input(&[len as u64], dt)
                .attr("num_groups", A::Int(2))
                .attr("epsilon", A::Float(1e-2))
                .opset(opset)
                .run(&[x.clone(), w.clone(), b.clone()])
                .unwrap();
            let want = group_norm_ref(&x, dims, 2, &w, &b, 1e-2);
            assert_close(&got[0].1, &want, dt, &format!("Group {dt:?} opset {opset}"));
        }
    }
    let r = |groups, len, opset| {
        Req::new("GroupNormalization", &shape, Dtype::F32)
            .input(&[len], Dtype::F32)
            .input(&[len], Dtype::F32)
            .attr("num_groups", A::Int(groups))
            .opset(opset)
            .plan()
    };
    assert!(
        matches!(r(3, 4, 21).unwrap_err(), OpError::InvalidAttribute(m) if m.contains("num_groups"))
    );
    assert!(matches!(
        r(0, 4, 21).unwrap_err(),
        OpError::InvalidAttribute(_)
    ));
    assert!(
        matches!(r(2, 2, 21).unwrap_err(), OpError::InvalidShape(_)),
        "opset 21 is per channel"
    );
    assert!(
        matches!(r(2, 4, 18).unwrap_err(), OpError::InvalidShape(_)),
        "opset 18 is per group"
    );
    let e = Req::new("GroupNormalization", &shape, Dtype::F32)
        .input(&[4], Dtype::F32)
        .input(&[4], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("num_groups")));
}

// ---------------------------------------------------------------- LRN and MVN

#[test]
fn lrn_matches_the_reference() {
    let shape = [5u64, 5, 5, 5];
    for dt in ALL {
        let x = round(dt, &data(625, 60));
        for (size, alpha, beta, bias) in [
            (3i64, Some(0.0002), Some(0.5), Some(2.0)),
            (3, None, None, None),
            (4, Some(0.1), Some(0.75), None),
            (1, Some(1.0), Some(1.0), Some(1.0)),
        ] {
            let mut r = Req::new("LRN", &shape, dt).attr("size", A::Int(size));
            for (name, v) in [("alpha", alpha), ("beta", beta), ("bias", bias)] {
                if let Some(v) = v {
                    r = r.attr(name, A::Float(v));
                }
            }
            let got = r.run(std::slice::from_ref(&x)).unwrap();
            let want = lrn_ref(
                &x,
                ncs(&shape),
                size as usize,
                alpha.unwrap_or(1e-4),
                beta.unwrap_or(0.75),
                bias.unwrap_or(1.0),
            );
            assert_close(&got[0].1, &want, dt, &format!("LRN {dt:?} size {size}"));
        }
    }
    let e = Req::new("LRN", &[1, 2], Dtype::F32)
        .attr("size", A::Int(0))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("size")));
    let e = Req::new("LRN", &[1, 2], Dtype::F32).plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("size")));
}

#[test]
fn mvn_matches_the_reference_for_served_axes() {
    for dt in ALL {
        for (shape, axes) in [
            (&[3u64, 3, 3, 1][..], None),
            (&[2, 3, 4, 5], Some(vec![2i64, 3])),
            (&[2, 3, 4], Some(vec![1])),
            (&[2, 3, 4], Some(vec![0, 1, 2])),
            (&[2, 3, 4, 5], Some(vec![0, 1])),
            (&[2, 3, 4, 5], Some(vec![-1, 0])),
        ] {
            let x = round(dt, &data(numel(shape), 70));
            let mut r = Req::new("MeanVarianceNormalization", shape, dt);
            if let Some(a) = &axes {
                r = r.attr("axes", A::Ints(a.clone()));
            }
            let got = r.run(std::slice::from_ref(&x)).unwrap();
            let axes: Vec<usize> = axes
                .unwrap_or(vec![0, 2, 3])
                .iter()
                .map(|&a| if a < 0 { a + shape.len() as i64 } else { a } as usize)
                .collect();
            let want = mvn_ref(&x, shape, &axes);
            let (a, r) = tol(dt);
            for (i, (g, w)) in got[0].1.iter().zip(&want).enumerate() {
                // MVN divides by a standard deviation: allow for its rounding
                assert!(
                    (g - w).abs() <= 4.0 * (a + r * w.abs()),
                    "MVN {shape:?} {dt:?} [{i}]: {g} vs {w}"
                );
            }
        }
    }
    let e = Req::new("MeanVarianceNormalization", &[2, 3, 4, 5], Dtype::F32)
        .attr("axes", A::Ints(vec![1, 3]))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("axes")));
    let e = Req::new("MeanVarianceNormalization", &[2, 3, 4], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(
        matches!(e, OpError::InvalidAttribute(m) if m.contains("axes")),
        "default axis 3 on rank 3"
    );
}

// ---------------------------------------------------------------- shared behaviour

/// A runnable request for every op on `shape` (rank ≥ 2) in `dt`, with its inputs' values.
fn every_op(shape: &[u64], dt: Dtype) -> Vec<(Req, Vec<Vec<f64>>)> {
    let c = shape[1];
    let x = data(numel(shape), 1);
    let v = |n| data(n as usize, 2);
    let mut out = vec![];
    for op in [
        "Softmax",
        "LogSoftmax",
        "Hardmax",
        "LRN",
        "MeanVarianceNormalization",
    ] {
        let mut r = Req::new(op, shape, dt);
        if op == "LRN" {
            r = r.attr("size", A::Int(3));
        }
        if op == "MeanVarianceNormalization" {
            r = r.attr("axes", A::Ints(vec![0]));
        }
        out.push((r, vec![x.clone()]));
    }
    let last = *shape.last().unwrap();
    out.push((
        Req::new("LayerNormalization", shape, dt)
            .input(&[last], dt)
            .input(&[last], dt)
            .outputs(3),
        vec![x.clone(), v(last), v(last)],
    ));
    for op in ["InstanceNormalization", "GroupNormalization"] {
        let mut r = Req::new(op, shape, dt).input(&[c], dt).input(&[c], dt);
        if op == "GroupNormalization" {
            r = r.attr("num_groups", A::Int(1));
        }
        out.push((r, vec![x.clone(), v(c), v(c)]));
    }
    for training in [0, 1] {
        let mut r = bn_request(shape, dt);
        if training == 1 {
            r = r.attr("training_mode", A::Int(1)).outputs(3);
        }
        out.push((
            r,
            vec![x.clone(), v(c), v(c), v(c), positive(c as usize, 3)],
        ));
    }
    out
}

#[test]
fn empty_tensors_plan_a_launch_and_touch_nothing() {
    for shape in [&[0u64, 3, 2][..], &[2, 0, 3], &[2, 3, 0]] {
        for dt in ALL {
            for (r, vals) in every_op(shape, dt) {
                let got = r
                    .run(&vals)
                    .unwrap_or_else(|e| panic!("{} {shape:?}: {e:?}", r.op));
                let plan = r.plan().unwrap();
                assert_eq!(plan.launches.len(), 1);
                assert!(plan.launches[0].grid.x >= 1);
                assert_eq!(got[0].1.len(), numel(shape), "{}", r.op);
            }
        }
    }
    // LayerNorm over an empty normalized shape: statistics of nothing are NaN, as in numpy
    let got = Req::new("LayerNormalization", &[2, 0], Dtype::F32)
        .input(&[0], Dtype::F32)
        .outputs(3)
        .run(&[vec![], vec![]])
        .unwrap();
    assert!(got[1].1.iter().all(|v| v.is_nan()) && got[1].1.len() == 2);
}

#[test]
fn unknown_ops_attributes_and_dtypes_are_refused() {
    let e = Req::new("Relu", &[2], Dtype::F32).plan().unwrap_err();
    assert!(matches!(e, OpError::UnsupportedOp(_)));
    let e = Req::new("Softmax", &[2], Dtype::I32).plan().unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("f32, f16, bf16 and f64")));
    let e = Req::new("Softmax", &[2], Dtype::F32)
        .attr("axes", A::Int(0))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("axes")));
    let e = Req::new("Softmax", &[], Dtype::F32).plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("axis")));
    let e = Req::new("Hardmax", &[2, 3], Dtype::F32)
        .attr("axis", A::Int(-3))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(_)));
    let e = Req::new("Softmax", &[2, 3], Dtype::F32)
        .input(&[2], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)));
    // names are matched case-insensitively
    assert!(Req::new("softmax", &[2, 3], Dtype::F32).plan().is_ok());
}

#[test]
fn cuda_sources_exist_for_every_op_and_dtype() {
    for dt in ALL {
        for shape in [&[2u64, 3, 4][..], &[2, 8]] {
            for (r, _) in every_op(shape, dt) {
                let srcs = testing::cuda_sources::<Norm>(&r.build(Target::cpu()))
                    .unwrap_or_else(|e| panic!("{} {dt:?}: {e:?}", r.op));
                assert_eq!(srcs.len(), 1);
            }
        }
        // the other statistics dtypes of LayerNorm, and the strided softmax kernel
        let r = Req::new("LayerNormalization", &[2, 4], dt)
            .input(&[4], dt)
            .attr("stash_type", A::Int(16))
            .outputs(2);
        testing::cuda_sources::<Norm>(&r.build(Target::cpu())).unwrap();
        let src =
            Norm::kernel_source(&format!("norm_{}", dtype::name(dt)), &Target::cpu()).unwrap();
        for e in &src.entry_points {
            assert!(src.code.contains(&format!("void {e}(")), "{e} missing");
        }
    }
    assert!(Norm::kernel_source("norm_i32", &Target::cpu()).is_err());
}

#[test]
fn self_tests_pass_and_describe_lists_every_op() {
    for case in Norm::self_tests() {
        let req = PlanRequestExt::from_legacy(&umd_sdk::PlanRequest {
            op: case.op.clone(),
            inputs: case.inputs.clone(),
            attributes: case.attributes.clone(),
            target: Target::cpu(),
        });
        let (plan, outs) = testing::run::<Norm>(&req, &case.input_data).unwrap();
        assert_eq!(outs.len(), case.expected.len(), "{}", case.name);
        for ((o, want), d) in outs.iter().zip(&case.expected).zip(&plan.outputs) {
            let (g, w) = (
                dtype::decode_f64(d.dtype, o),
                dtype::decode_f64(d.dtype, want),
            );
            for (g, w) in g.iter().zip(&w) {
                assert!(
                    (g - w).abs() <= case.tolerance + 1e-7,
                    "{}: {g} vs {w}",
                    case.name
                );
            }
        }
    }
    let info = Norm::describe();
    assert_eq!(info.ops.len(), OPS.len());
    assert!(info.ops.iter().all(|o| o.targets == ["cpu", "cuda"]));
    assert_eq!(
        Norm::tolerance("Hardmax", Dtype::F32).unwrap().absolute,
        0.0
    );
    assert!(Norm::tolerance("Softmax", Dtype::Bf16).is_some());
}
