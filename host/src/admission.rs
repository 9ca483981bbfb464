//! Admission: before a plugin's ops are offered, the host runs the self-test cases it declares
//! (ABI 1.1) on the CPU device — through the same plan validation and execution path as real
//! requests — and compares every output with the expected values. A plugin with a failing case
//! is not admitted; the report names the case and what differed.
//!
//! Not built yet: generic cases derived from op signatures (the ABI does not describe
//! signatures). Cases run on the CPU device even when the host serves a GPU; GPU-against-CPU
//! comparison on these cases' shapes is `umd check` ([`crate::check`]), not admission.

use std::sync::Arc;

use crate::plugin::LoadedPlugin;
use crate::plugin::convert;
use crate::plugin::self_test::TestCase;
use crate::target::Target;
use crate::tensor::AttrValue;
use crate::translate::OpRequest;
use crate::{Host, data};

/// What admission checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AdmissionReport {
    /// Self-test cases run (all passed).
    pub cases: usize,
}

/// Runs the plugin's self-test cases; `Err` names the first failing case.
pub fn admit(host: &Host, plugin: &Arc<LoadedPlugin>) -> Result<AdmissionReport, String> {
    let cases = match plugin.self_test_cases() {
        Ok(Some(c)) => c,
        Ok(None) => return Ok(AdmissionReport::default()),
        Err(fault) => return Err(format!("self-test cases could not be read: {fault}")),
    };
    // Launches planned by this plugin run on it even though it is not offered yet.
    host.registry().remember(plugin);
    for case in &cases {
        run_case(host, plugin, case)
            .map_err(|why| format!("self-test `{}` ({}) failed: {why}", case.name, case.op))?;
    }
    Ok(AdmissionReport { cases: cases.len() })
}

fn attr_from_wit(v: &crate::plugin::wit::AttrValue) -> AttrValue {
    use crate::plugin::wit::AttrValue as W;
    match v {
        W::Int(x) => AttrValue::Int(*x),
        W::Float(x) => AttrValue::Float(*x),
        W::Text(x) => AttrValue::Text(x.clone()),
        W::Ints(x) => AttrValue::Ints(x.clone()),
        W::Floats(x) => AttrValue::Floats(x.clone()),
        W::Boolean(x) => AttrValue::Bool(*x),
    }
}

/// The request a self-test case describes (op, inputs, attributes; no target).
pub(crate) fn case_request(case: &TestCase) -> OpRequest {
    let mut req = OpRequest::new(
        case.op.clone(),
        case.inputs
            .iter()
            .cloned()
            .map(convert::tensor_from_wit)
            .collect(),
    );
    req.attributes = case
        .attributes
        .iter()
        .map(|a| (a.name.clone(), attr_from_wit(&a.value)))
        .collect();
    req
}

fn run_case(host: &Host, plugin: &Arc<LoadedPlugin>, case: &TestCase) -> Result<(), String> {
    let mut req = case_request(case);
    req.target = Some(Target::cpu());
    if case.input_data.len() != req.inputs.len() {
        return Err(format!(
            "{} inputs but {} input buffers",
            req.inputs.len(),
            case.input_data.len()
        ));
    }
    let t = host
        .translator()
        .plan_with(plugin, &req)
        .map_err(|e| e.to_string())?;
    if case.expected.len() != t.outputs.len() {
        return Err(format!(
            "{} outputs but {} expected buffers",
            t.outputs.len(),
            case.expected.len()
        ));
    }
    let inputs: Vec<&[u8]> = case.input_data.iter().map(Vec::as_slice).collect();
    let outputs = crate::device::run_once(&**host.reference_device(), &t.cmdbuf, &inputs)
        .map_err(|e| e.to_string())?;
    for (i, ((desc, got), want)) in t
        .outputs
        .iter()
        .zip(&outputs)
        .zip(&case.expected)
        .enumerate()
    {
        let tol = case.tolerance.max(0.0);
        let diff =
            data::compare(desc.dtype, got, want, tol).map_err(|e| format!("output {i}: {e}"))?;
        if let Some((j, g, w)) = diff.first_bad {
            return Err(format!(
                "output {i} element {j}: got {g}, expected {w} (tolerance {tol})"
            ));
        }
    }
    Ok(())
}
