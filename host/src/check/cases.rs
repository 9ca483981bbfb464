//! The correctness half of `umd check`: which requests are checked and how one is run.
//!
//! For every loaded plugin, every op it offers for the device's target and every self-test
//! case it declares: the case's inputs and attributes under that op's name, in the case's dtypes
//! and — when its inputs share one dtype — in every other dtype, at every scale. The plugin
//! decides which of these exist: a variant it declines for the CPU is skipped. The case itself
//! (its own op, dtypes and shapes) must plan, or the check fails. Ops that draw random numbers
//! are given a `seed` (their seeded draws must agree across devices).

use std::collections::HashSet;
use std::sync::Arc;

use super::{CaseResult, CheckOptions, compare};

use crate::device::Device;
use crate::error::Error;
use crate::plugin::LoadedPlugin;
use crate::plugin::self_test::TestCase;
use crate::target::Target;
use crate::tensor::{Dtype, TensorDesc};
use crate::translate::{OpRequest, Translation};
use crate::{Host, admission, data};

/// What the correctness half found.
#[derive(Debug, Default)]
pub(super) struct Found {
    pub cases: Vec<CaseResult>,
    pub skipped: usize,
    pub declined_on_device: Vec<(String, String)>,
    pub uncovered: Vec<String>,
}

/// One request to check.
struct Variant {
    req: OpRequest,
    scale: u64,
    /// The self-test case itself (its op, dtypes and shapes): it must plan.
    is_case: bool,
}

/// Checks every variant of every loaded plugin's cases.
pub(super) fn run_all(host: &Host, opts: &CheckOptions) -> Found {
    let mut found = Found::default();
    let mut seen = HashSet::new();
    let snapshot = host.registry().snapshot();
    let target = host.device().target().clone();
    for plugin in snapshot.plugins() {
        let cases = match plugin.self_test_cases() {
            Ok(cases) => cases.unwrap_or_default(),
            Err(fault) => {
                found.cases.push(failure(
                    format!("{} self-test cases", plugin.label()),
                    plugin,
                    "",
                    format!("self-test cases could not be read: {fault}"),
                ));
                Vec::new()
            }
        };
        for op in plugin.ops() {
            let offered = op.targets.iter().any(|t| target.specificity(t).is_some());
            let before = found.cases.len();
            if offered {
                for case in &cases {
                    for v in variants(case, &op.name, &opts.scales) {
                        if seen.insert(key(plugin, &v.req)) {
                            check_variant(host, plugin, case, &v, opts, &mut found);
                        }
                    }
                }
            }
            if found.cases.len() == before {
                let why = if offered {
                    "no self-test case of its plugin plans for it"
                } else {
                    "not offered for this device's target"
                };
                found
                    .uncovered
                    .push(format!("{} {} ({why})", plugin.label(), op.name));
            }
        }
    }
    found
}

/// The requests `umd check` derives from `case` for `op` at the case's own shapes: in its own
/// dtypes and, when its inputs share one, in every other dtype. For tools that plan without
/// running (`umd plugins compile`).
pub fn case_requests(case: &TestCase, op: &str) -> Vec<OpRequest> {
    variants(case, op, &[1])
        .into_iter()
        .map(|v| v.req)
        .collect()
}

/// What makes two variants the same request.
fn key(plugin: &LoadedPlugin, req: &OpRequest) -> String {
    let inputs: Vec<String> = req.inputs.iter().map(|t| t.to_string()).collect();
    format!(
        "{}|{}|{}|{:?}",
        plugin.label(),
        req.op.to_ascii_lowercase(),
        inputs.join(","),
        req.attributes
    )
}

/// `case`'s request under `op`, in each dtype and at each scale.
fn variants(case: &TestCase, op: &str, scales: &[u64]) -> Vec<Variant> {
    let mut base = admission::case_request(case);
    let own = base.op.eq_ignore_ascii_case(op);
    base.op = op.to_string();
    // an op that draws random numbers is compared seeded: the same draws on every device
    if crate::graph::draws_random(op) && !base.attributes.iter().any(|(n, _)| n == "seed") {
        base.attributes
            .push(("seed".into(), crate::tensor::AttrValue::Float(1.0)));
    }
    let shared = base
        .inputs
        .first()
        .map(|t| t.dtype)
        .filter(|d| base.inputs.iter().all(|t| t.dtype == *d));
    let mut dtypes = vec![None];
    if let Some(d) = shared {
        dtypes.extend(Dtype::ALL.into_iter().filter(|o| *o != d).map(Some));
    }
    let mut out = Vec::new();
    for dtype in dtypes {
        for &scale in scales {
            let inputs: Option<Vec<TensorDesc>> = base
                .inputs
                .iter()
                .map(|t| {
                    let shape = t
                        .shape
                        .iter()
                        .map(|d| d.checked_mul(scale))
                        .collect::<Option<Vec<u64>>>()?;
                    Some(TensorDesc::new(&*t.name, shape, dtype.unwrap_or(t.dtype)))
                })
                .collect();
            let Some(inputs) = inputs else { continue };
            out.push(Variant {
                req: OpRequest {
                    inputs,
                    ..base.clone()
                },
                scale,
                is_case: own && dtype.is_none() && scale == 1,
            });
        }
    }
    out
}

fn describe(plugin: &LoadedPlugin, case: &TestCase, v: &Variant) -> String {
    let inputs: Vec<String> = v.req.inputs.iter().map(|t| t.to_string()).collect();
    format!(
        "{} {} {} (from \"{}\", x{})",
        plugin.label(),
        v.req.op,
        inputs.join(" "),
        case.name,
        v.scale
    )
}

fn failure(name: String, plugin: &LoadedPlugin, op: &str, why: String) -> CaseResult {
    CaseResult {
        name,
        plugin: plugin.label().to_string(),
        op: op.to_string(),
        inputs: Vec::new(),
        source: String::new(),
        scale: 1,
        seeds: 0,
        max_error: 0.0,
        tolerance: 0.0,
        failure: Some(why),
    }
}

/// Whether a planning error means the plugin declined (as opposed to faulted).
fn declined(e: &Error) -> bool {
    matches!(
        e,
        Error::Unsupported { .. } | Error::Rejected { .. } | Error::Request(_)
    )
}

fn check_variant(
    host: &Host,
    plugin: &Arc<LoadedPlugin>,
    case: &TestCase,
    v: &Variant,
    opts: &CheckOptions,
    found: &mut Found,
) {
    let name = describe(plugin, case, v);
    let plan = |target: Target| {
        let req = OpRequest {
            target: Some(target),
            ..v.req.clone()
        };
        host.translator().plan_with(plugin, &req)
    };
    let reference = match plan(Target::cpu()) {
        Ok(t) => t,
        Err(e) if declined(&e) && !v.is_case => {
            found.skipped += 1;
            return;
        }
        Err(e) => {
            let why = format!("does not plan for cpu: {e}");
            found.cases.push(failure(name, plugin, &v.req.op, why));
            return;
        }
    };
    let device = match plan(host.device().target().clone()) {
        Ok(t) => t,
        Err(e) if declined(&e) => {
            found.declined_on_device.push((name, e.to_string()));
            return;
        }
        Err(e) => {
            let why = format!("plans for cpu but not for the device: {e}");
            found.cases.push(failure(name, plugin, &v.req.op, why));
            return;
        }
    };
    let mut result = CaseResult {
        name,
        plugin: plugin.label().to_string(),
        op: v.req.op.clone(),
        inputs: v.req.inputs.clone(),
        source: case.name.clone(),
        scale: v.scale,
        seeds: 0,
        max_error: 0.0,
        tolerance: 0.0,
        failure: None,
    };
    let salt = found.cases.len() as u64;
    for seed in 0..opts.seeds {
        result.seeds += 1;
        let inputs: Vec<Vec<u8>> = v
            .req
            .inputs
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let n = t.numel().unwrap_or(0) as usize;
                let s = (seed as u64) << 40 | salt << 8 | i as u64;
                data::encode(t.dtype, &data::random(t.dtype, n, s))
            })
            .collect();
        if let Err(why) = check_seed(host, &device, &reference, &inputs, &mut result) {
            result.failure = Some(format!("seed {seed}: {why}"));
            break;
        }
    }
    found.cases.push(result);
}

/// Runs one input set on both devices and compares every output.
fn check_seed(
    host: &Host,
    device: &Translation,
    reference: &Translation,
    inputs: &[Vec<u8>],
    result: &mut CaseResult,
) -> Result<(), String> {
    if device.outputs.len() != reference.outputs.len() {
        return Err(format!(
            "{} outputs on the device, {} on the reference",
            device.outputs.len(),
            reference.outputs.len()
        ));
    }
    let got = execute(&**host.device(), device, inputs)
        .map_err(|e| format!("on {}: {e}", host.device().name()))?;
    let want = execute(&**host.reference_device(), reference, inputs)
        .map_err(|e| format!("on the reference: {e}"))?;
    for (i, ((g, w), desc)) in got.iter().zip(&want).zip(&device.outputs).enumerate() {
        if desc != &reference.outputs[i] {
            return Err(format!(
                "output {i} is {desc} on the device, {} on the reference",
                reference.outputs[i]
            ));
        }
        let tol = compare::tolerance(&device.planner, &result.op, desc.dtype);
        result.tolerance = result.tolerance.max(tol);
        let d = compare::compare(desc.dtype, g, w, tol).map_err(|e| format!("output {i}: {e}"))?;
        result.max_error = result.max_error.max(d.max_error);
        if let Some((j, g, w)) = d.first_bad {
            return Err(format!(
                "output {i} element {j}: device {g}, reference {w} (error {:.3e} > {tol:e})",
                d.max_error
            ));
        }
    }
    Ok(())
}

/// Runs `t` on `dev` with `inputs` in its first bindings; returns every output's bytes.
fn execute(dev: &dyn Device, t: &Translation, inputs: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, String> {
    let inputs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    crate::device::run_once(dev, &t.cmdbuf, &inputs).map_err(|e| e.to_string())
}
