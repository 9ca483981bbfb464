//! Fused ops, a convention of graph hosts (umd 0.1 on, any ABI from 1.2): a plugin that
//! serves an op named `A.B.…` (two to [`MAX_STAGES`] ONNX op names joined by `.`) and declares
//! its signature in domain [`DOMAIN`] computes the chain A → B → … as one op — a conv with its normalization,
//! residual add and activation as an epilogue, say. The host names no op: it reads the chains
//! from the names plugins serve, offers one wherever a graph holds it (every stage's one output
//! read only by the next stage, never a graph output), and plans the graph's nodes unfused
//! when the plugin declines the request (any error).
//!
//! The request: op `A.B.…`, domain [`DOMAIN`]; its input slots are stage 0's, then each later
//! stage's inputs but the one the previous stage feeds, in order (absent optional inputs stay
//! absent slots); attribute `"{i}.{name}"` is stage `i`'s attribute `name`, `"{i}.inputs"` how
//! many slots stage `i` has in the request, `"{i}.link"` (`i ≥ 1`) which of stage `i`'s inputs
//! the previous stage feeds. Its outputs are the last stage's. [`split`] reads it back.
//!
//! The request's opset is the graph's `ai.onnx` opset (every stage is an `ai.onnx` op).
//!
//! (`.`, not `+`: every host accepts op names of `[A-Za-z0-9-_.]` and at most [`MAX_NAME`]
//! bytes, so a plugin declaring chains within that still loads, unfused, in a host that
//! predates them; a longer name makes every host refuse the whole plugin.)
//!
//! ```
//! use umd_sdk::{fused, AttrValueExt, Dtype, PlanRequestExt, Target, TensorDesc};
//! let t = |n: &str, s: &[u64]| TensorDesc::new(n, s.to_vec(), Dtype::F32);
//! let req = PlanRequestExt::builder("Conv.Add.Relu")
//!     .input(t("x", &[1, 3, 8, 8]))
//!     .input(t("w", &[4, 3, 3, 3]))
//!     .input(t("skip", &[1, 4, 6, 6]))
//!     .attr("0.inputs", AttrValueExt::Int(2))
//!     .attr("0.group", AttrValueExt::Int(1))
//!     .attr("1.inputs", AttrValueExt::Int(1))
//!     .attr("1.link", AttrValueExt::Int(1)) // Add(skip, conv)
//!     .attr("2.inputs", AttrValueExt::Int(0))
//!     .attr("2.link", AttrValueExt::Int(0))
//!     .build(Target::cpu());
//! let stages = fused::split(&req).unwrap();
//! assert_eq!(stages[1].op, "Add");
//! assert_eq!(stages[1].slots, vec![Some(2), None]); // skip is slot 2; input 1 is linked
//! assert_eq!(stages[0].attributes[0].name, "group");
//! assert_eq!(stages[0].request(&req).slots(), 2);
//! ```

use crate::{AttrValueExt, AttributeExt, OpError, OpSignature, PlanRequestExt, TensorDesc};

/// The domain of fused ops.
pub const DOMAIN: &str = "ai.umd.fused";
/// Most stages a fused op has.
pub const MAX_STAGES: usize = 8;
/// Longest op name a host accepts (chains included).
pub const MAX_NAME: usize = 64;

/// One stage of a fused request.
#[derive(Debug, Clone)]
pub struct Stage {
    /// The stage's ONNX op.
    pub op: String,
    /// Its attributes, named as the op names them.
    pub attributes: Vec<AttributeExt>,
    /// For each of the stage's inputs in order, its slot in the fused request; `None` at the
    /// linked input (stage 0 has none).
    pub slots: Vec<Option<usize>>,
    /// Which of its inputs the previous stage feeds (`None` for stage 0).
    pub link: Option<usize>,
}

impl Stage {
    /// Stage 0 as a request of its own (its slots are the fused request's first ones, so its
    /// *input* bindings are the fused request's too): check and shape it as the op alone. Its
    /// output bindings are not the fused request's (the later stages' inputs come first
    /// there): pack outputs with the fused request's [`PlanRequestExt::output_binding`].
    pub fn request(&self, fused: &PlanRequestExt) -> PlanRequestExt {
        let mut req = fused.clone();
        req.op = self.op.clone();
        req.domain = String::new();
        req.attributes = self.attributes.clone();
        req.inputs.truncate(self.slots.iter().flatten().count());
        req
    }
}

impl Stage {
    /// The stage's inputs but the linked one, in order; an absent one declines the request.
    pub fn others<'r>(&self, req: &'r PlanRequestExt) -> Result<Vec<&'r TensorDesc>, OpError> {
        self.slots
            .iter()
            .flatten()
            .map(|&k| req.input(k).ok_or_else(|| declined(req, "an absent input")))
            .collect()
    }

    /// The request slot of the stage's one other input (a binary stage such as a residual
    /// `Add`: the input the previous stage does not feed).
    pub fn other_slot(&self) -> Option<usize> {
        match self.slots[..] {
            [None, Some(k)] | [Some(k), None] => Some(k),
            _ => None,
        }
    }
}

/// The signatures a plugin declares for the chains it serves (domain [`DOMAIN`]).
pub fn signatures(chains: &[&str]) -> Vec<OpSignature> {
    chains
        .iter()
        .map(|op| OpSignature {
            name: op.to_string(),
            domain: DOMAIN.into(),
            constant_inputs: Vec::new(),
        })
        .collect()
}

/// A plugin declining a fused request, naming why: the host then runs the chain's nodes.
pub fn declined(req: &PlanRequestExt, why: impl std::fmt::Display) -> OpError {
    OpError::UnsupportedOp(format!("{}: {why}", req.op))
}

/// Whether `t` holds one value per channel of an `(N, C, …)`-shaped `out` when broadcast to
/// it: `[C, 1, …]` (one rank less) or `[1, C, 1, …]` (the same rank).
pub fn per_channel(t: &TensorDesc, out: &[u64]) -> bool {
    let ones = |d: &[u64]| d.iter().all(|&v| v == 1);
    match t.shape.len() {
        _ if out.len() < 2 => false,
        r if r + 1 == out.len() => t.shape[0] == out[1] && ones(&t.shape[1..]),
        r if r == out.len() => t.shape[0] == 1 && t.shape[1] == out[1] && ones(&t.shape[2..]),
        _ => false,
    }
}

fn bad(req: &PlanRequestExt, why: String) -> OpError {
    OpError::InvalidAttribute(format!("fused op `{}`: {why}", req.op))
}

/// The stages of a fused request, checked: 2..=[`MAX_STAGES`] op names, every attribute
/// prefixed by a stage's index, slot counts that add up to the request's, links within their
/// stage's inputs.
pub fn split(req: &PlanRequestExt) -> Result<Vec<Stage>, OpError> {
    let ops: Vec<&str> = req.op.split('.').collect();
    if !(2..=MAX_STAGES).contains(&ops.len()) || ops.iter().any(|o| o.is_empty()) {
        return Err(bad(
            req,
            format!("needs 2 to {MAX_STAGES} ops joined by `.`"),
        ));
    }
    let mut stages: Vec<Stage> = ops
        .iter()
        .map(|op| Stage {
            op: op.to_string(),
            attributes: Vec::new(),
            slots: Vec::new(),
            link: None,
        })
        .collect();
    let mut counts = vec![None; ops.len()];
    for a in &req.attributes {
        let Some((i, name)) = a
            .name
            .split_once('.')
            .and_then(|(i, n)| Some((i.parse::<usize>().ok()?, n)))
            .filter(|(i, _)| *i < ops.len())
        else {
            return Err(bad(req, format!("attribute `{}` names no stage", a.name)));
        };
        let int = || match a.value {
            AttrValueExt::Int(v) if (0..=1 << 16).contains(&v) => Ok(v as usize),
            _ => Err(bad(
                req,
                format!("attribute `{}` must be a small int", a.name),
            )),
        };
        match name {
            "inputs" => counts[i] = Some(int()?),
            "link" if i > 0 => stages[i].link = Some(int()?),
            _ => stages[i].attributes.push(AttributeExt {
                name: name.to_string(),
                value: a.value.clone(),
            }),
        }
    }
    let mut next = 0;
    for (i, s) in stages.iter_mut().enumerate() {
        let n = counts[i].ok_or_else(|| bad(req, format!("attribute `{i}.inputs` is missing")))?;
        if i > 0 && s.link.is_none() {
            return Err(bad(req, format!("attribute `{i}.link` is missing")));
        }
        let total = n + usize::from(i > 0);
        if s.link.is_some_and(|l| l >= total) {
            return Err(bad(
                req,
                format!("stage {i} links input {:?} of {total}", s.link),
            ));
        }
        for k in 0..total {
            if Some(k) == s.link {
                s.slots.push(None);
            } else {
                s.slots.push(Some(next));
                next += 1;
            }
        }
    }
    if next != req.slots() {
        return Err(bad(
            req,
            format!("its stages have {next} inputs, the request {}", req.slots()),
        ));
    }
    Ok(stages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Dtype, Target, TensorDesc};

    fn req(op: &str, slots: usize, attrs: &[(&str, i64)]) -> PlanRequestExt {
        let mut b = PlanRequestExt::builder(op);
        for k in 0..slots {
            b = b.input(TensorDesc::new(format!("i{k}"), vec![1], Dtype::F32));
        }
        for (n, v) in attrs {
            b = b.attr(n, AttrValueExt::Int(*v));
        }
        b.build(Target::cpu())
    }

    #[test]
    fn splits_slots_links_and_attributes() {
        let r = req(
            "Conv.BatchNormalization.Relu",
            7,
            &[
                ("0.inputs", 3),
                ("0.group", 2),
                ("1.inputs", 4),
                ("1.link", 0),
                ("2.inputs", 0),
                ("2.link", 0),
            ],
        );
        let s = split(&r).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].slots, vec![Some(0), Some(1), Some(2)]);
        assert_eq!(s[1].slots, vec![None, Some(3), Some(4), Some(5), Some(6)]);
        assert_eq!(s[2].slots, vec![None]);
        assert_eq!(s[0].attributes.len(), 1);
        assert_eq!(s[0].request(&r).slots(), 3);
    }

    #[test]
    fn per_channel_shapes_and_the_other_input() {
        let t = |s: &[u64]| TensorDesc::new("t", s.to_vec(), Dtype::F32);
        let out = [2, 8, 5, 5];
        assert!(per_channel(&t(&[8, 1, 1]), &out));
        assert!(per_channel(&t(&[1, 8, 1, 1]), &out));
        for no in [
            &[8][..],
            &[1, 1, 5, 5],
            &[8, 1],
            &[2, 8, 1, 1],
            &[1, 8, 5, 1],
        ] {
            assert!(!per_channel(&t(no), &out), "{no:?}");
        }
        assert!(!per_channel(&t(&[]), &[8]));
        let r = req(
            "Conv.Add",
            3,
            &[("0.inputs", 2), ("1.inputs", 1), ("1.link", 1)],
        );
        let s = split(&r).unwrap();
        assert_eq!(s[1].other_slot(), Some(2));
        assert_eq!(s[1].others(&r).unwrap().len(), 1);
        assert_eq!(s[0].other_slot(), None);
    }

    #[test]
    fn refuses_what_does_not_add_up() {
        let ok = [("0.inputs", 2), ("1.inputs", 0), ("1.link", 0)];
        assert!(split(&req("Conv.Relu", 2, &ok)).is_ok());
        for (op, slots, attrs, want) in [
            ("Conv", 2, &ok[..], "2 to 8"),
            ("Conv..Relu", 2, &ok[..], "2 to 8"),
            ("Conv.Relu", 3, &ok[..], "request 3"),
            ("Conv.Relu", 2, &ok[..2], "`1.link` is missing"),
            ("Conv.Relu", 2, &ok[1..], "`0.inputs` is missing"),
            (
                "Conv.Relu",
                2,
                &[("0.inputs", 2), ("1.inputs", 0), ("1.link", 1)][..],
                "links",
            ),
            (
                "Conv.Relu",
                2,
                &[("0.inputs", 2), ("1.inputs", 0), ("1.link", 0), ("5.x", 1)][..],
                "names no stage",
            ),
            (
                "Conv.Relu",
                2,
                &[("0.inputs", -1), ("1.inputs", 0), ("1.link", 0)][..],
                "small int",
            ),
        ] {
            let e = format!("{:?}", split(&req(op, slots, attrs)).unwrap_err());
            assert!(e.contains(want), "{op} {attrs:?}: {e}");
        }
    }
}
