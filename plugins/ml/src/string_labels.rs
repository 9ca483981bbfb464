//! Classifiers with string class labels (`classlabels_strings` of LinearClassifier,
//! SVMClassifier, TreeEnsembleClassifier), on the CPU device. A string output is sized when
//! planning (ABI 1.5), so the labels are computed then, from X's value: the host gives it to a
//! request that asks for it (a node of a graph run on host values, or a constant X). The
//! classifier is planned and run here with int64 labels standing for the strings (`BASE + j`
//! for label `j`; a small class index the classifier writes raw — a tree ensemble's two weighed
//! classes — names label `j` too, as onnxruntime's string path has it; any other number becomes
//! its decimal text), and the plan writes the results.
//!
//! Owns that substitution and the launches writing precomputed bytes; the classifiers' own
//! rules stay in their modules.

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{
    Access, AttrValueExt, AttributeExt, CpuCall, CpuWrite, Dtype, OpError, OpPlan, PlanRequestExt,
    TensorDesc,
};

use crate::blob::Blob;
use crate::common::{self, launch};

/// Label `j` runs as the int64 label `BASE + j` (far from the 0/1 a classifier makes up).
const BASE: i64 = 1 << 40;
/// The launch copying a range of the workspace into an output.
pub const COPY_ENTRY: &str = "copy_bytes";

/// Whether `req` asks for string class labels (an empty list does not, as in onnxruntime).
pub fn wanted(req: &PlanRequestExt) -> bool {
    common::strings(req, "classlabels_strings").is_ok_and(|l| !l.is_empty())
}

/// Plans classifier `req` (string labels; `ints` names its int64 label attribute).
pub fn plan(req: &PlanRequestExt, ints: &str) -> Result<OpPlan, OpError> {
    let labels = common::strings(req, "classlabels_strings")?;
    if umd_sdk::attr::has(&req.attributes, ints) {
        return Err(common::bad(
            req,
            format!("give `{ints}` or `classlabels_strings`, not both"),
        ));
    }
    if !req.target.name.eq_ignore_ascii_case("cpu") {
        return Err(OpError::UnsupportedTarget(format!(
            "{}: string class labels are computed on the CPU device only (target `{}`)",
            req.op, req.target.name
        )));
    }
    let x = req.value(0).ok_or_else(|| {
        OpError::UnsupportedDtype(format!(
            "{}: string class labels are computed when planning, from X's value, which this \
             request does not carry",
            req.op
        ))
    })?;
    let mut int_req = req.clone();
    int_req
        .attributes
        .retain(|a| a.name != "classlabels_strings");
    int_req.attributes.push(AttributeExt {
        name: ints.into(),
        value: AttrValueExt::Ints((0..labels.len() as i64).map(|j| BASE + j).collect()),
    });
    if let Some(Some(slot)) = int_req.inputs.first_mut() {
        slot.value = None;
    }
    let (int_plan, outs) = umd_sdk::testing::run::<crate::MlPlugin>(&int_req, &[x.to_vec()])?;
    let text: Vec<std::borrow::Cow<str>> = outs[0]
        .chunks_exact(8)
        .map(|b| {
            let v = i64::from_le_bytes(b.try_into().expect("8 bytes"));
            // a label stands for itself; a class index the classifier writes raw (two weighed
            // classes of a tree ensemble) is that class's label, as onnxruntime's string path
            // has it; any other number is its text
            let index = if v >= BASE { v - BASE } else { v };
            usize::try_from(index)
                .ok()
                .and_then(|j| labels.get(j))
                .map_or_else(|| v.to_string().into(), |l| l.as_str().into())
        })
        .collect();
    // What the plan carries, checked before it is built.
    let rows = text.len() as u64;
    let label_len: u64 = text.iter().map(|t| 8 + t.len() as u64).sum();
    let score_len = outs.get(1).map_or(0, |s| s.len() as u64);
    let carried = (crate::blob::CHUNK * crate::blob::MAX_CHUNKS * 8) as u64;
    if label_len.div_ceil(8) * 8 + score_len > carried {
        return Err(OpError::InvalidShape(format!(
            "{}: the string labels and scores of {rows} rows take {} bytes, more than the \
             {carried} a plan carries: send fewer rows per call",
            req.op,
            label_len + score_len
        )));
    }
    let label_bytes = umd_sdk::strings::encode(&text);
    let mut outputs = int_plan.outputs.clone();
    outputs[0] = TensorDesc {
        text_bytes: umd_sdk::strings::text_bytes(&text),
        ..TensorDesc::new(
            outputs[0].name.clone(),
            outputs[0].shape.clone(),
            Dtype::String,
        )
    };
    // The results, each from a word boundary of the workspace, then copied out.
    let mut blob = Blob::default();
    let mut at = Vec::new();
    let results = std::iter::once(&label_bytes).chain(outs.get(1));
    for bytes in results.take(outputs.len()) {
        at.push((blob.len() * 8, bytes.len() as u64));
        for w in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..w.len()].copy_from_slice(w);
            blob.words.push(u64::from_le_bytes(word));
        }
    }
    let ws = req.output_binding(outputs.len());
    let mut launches = blob.launches(req, ws)?;
    for (k, &(off, len)) in at.iter().enumerate() {
        let mut p = ParamPacker::new();
        p.ptr(ws, Access::Read)
            .ptr(req.output_binding(k), Access::Write)
            .u64(off)
            .u64(len);
        launches.push(launch(
            req,
            crate::blob::MODULE.into(),
            COPY_ENTRY.into(),
            1,
            p,
        )?);
    }
    Ok(OpPlan {
        outputs,
        launches,
        workspace_bytes: blob.bytes(),
    })
}

/// The CPU `copy_bytes`: `len` bytes of the workspace from `off` become the output.
pub fn run_cpu(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = umd_sdk::cpu::Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (src, dst) = (r.ptr()?, r.ptr()?);
    let (off, len) = (r.u64()?, r.u64()?);
    let end = off
        .checked_add(len)
        .ok_or_else(|| OpError::internal("copy_bytes: range overflows"))?;
    let from = bufs.input(src, end)?;
    let mut out = bufs.output(dst, len)?;
    out.data.copy_from_slice(&from[off as usize..end as usize]);
    Ok(vec![out])
}
