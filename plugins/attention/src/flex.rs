//! FlexAttention with its graph attributes (`score_mod`, `prob_mod`), served as an expansion
//! (ABI 1.6) the host inlines: the ONNX function of the op, written with shape-generic ops
//! (grouped-query heads repeated by Unsqueeze/Expand/Reshape, the scale split as √scale on Q
//! and on K, the scores cast to the softmax precision), with the modifier graphs run where the
//! spec puts them. Without graph attributes FlexAttention is planned as one kernel
//! ([`crate::attention::plan_flex`]).

use umd_sdk::expand::{Builder, int, ints};
use umd_sdk::{AttrValueExt, Dtype, ExpandRequest, Expansion, OpError};

/// ONNX `TensorProto.DataType` numbers of the softmax precisions the spec allows.
const FLOAT: i64 = 1;
const DOUBLE: i64 = 11;

/// The expansion of a FlexAttention node.
pub fn expand(req: &ExpandRequest) -> Result<Expansion, OpError> {
    if !req.domain.is_empty() && req.domain != "ai.onnx.preview" {
        return Err(OpError::UnsupportedOp(format!(
            "FlexAttention of domain `{}` is not served",
            req.domain
        )));
    }
    if req.inputs.len() != 3 || req.inputs.iter().any(|i| i.is_none()) {
        return Err(OpError::shape("FlexAttention takes 3 inputs: Q, K and V"));
    }
    if req.outputs_wanted.len() != 1 {
        return Err(OpError::shape("FlexAttention has one output"));
    }
    for g in &req.graphs {
        if g != "score_mod" && g != "prob_mod" {
            return Err(OpError::InvalidAttribute(format!(
                "FlexAttention has no graph attribute `{g}`"
            )));
        }
    }
    let mut scale = None;
    let mut precision = None;
    for a in &req.attributes {
        match (a.name.as_str(), &a.value) {
            ("scale", AttrValueExt::Float(v)) => scale = Some(*v),
            ("softmax_precision", AttrValueExt::Int(v)) => precision = Some(*v),
            (name, v) => {
                return Err(OpError::InvalidAttribute(format!(
                    "FlexAttention: attribute `{name}` ({v:?}) is not one FlexAttention takes"
                )));
            }
        }
    }
    let q_dtype = req.inputs[0].flatten();
    let precision = match precision {
        Some(p @ (FLOAT | DOUBLE | 10 | 16)) => Some(p),
        Some(p) => {
            return Err(OpError::InvalidAttribute(format!(
                "FlexAttention: softmax_precision {p} is not a float type"
            )));
        }
        // The spec's default: double for double inputs, float otherwise. Where Q's type is not
        // known at load, the softmax runs in Q's own type (the default for f32 and f64; f16
        // and bf16 then round where the spec computes in f32).
        None => match q_dtype {
            Some(Dtype::F64) => Some(DOUBLE),
            Some(_) => Some(FLOAT),
            None => None,
        },
    };
    let has = |g: &str| req.graphs.iter().any(|n| n == g);

    let mut b = Builder::new(&["Q", "K", "V"], &["Y"]);
    let shape = |b: &mut Builder, x: &str, start: i64, end: i64| {
        b.op("Shape", &[x], vec![int("start", start), int("end", end)])
    };
    let batch = shape(&mut b, "Q", 0, 1);
    let kv_len = shape(&mut b, "K", -2, -1);
    let q_heads = shape(&mut b, "Q", 1, 2);
    let kv_heads = shape(&mut b, "K", 1, 2);
    let repeat = b.op("Div", &[&q_heads, &kv_heads], vec![]);
    let axis2 = b.const_i64(&[2], &[1]);
    // K and V with each head repeated for its group of query heads.
    let aligned = |b: &mut Builder, x: &str| {
        let unsq = b.op("Unsqueeze", &[x, &axis2], vec![]);
        let head = shape(b, x, 3, 4);
        let wide = b.op(
            "Concat",
            &[&batch, &kv_heads, &repeat, &kv_len, &head],
            vec![int("axis", 0)],
        );
        let expanded = b.op("Expand", &[&unsq, &wide], vec![]);
        let to = b.op(
            "Concat",
            &[&batch, &q_heads, &kv_len, &head],
            vec![int("axis", 0)],
        );
        b.op("Reshape", &[&expanded, &to], vec![])
    };
    let k = aligned(&mut b, "K");
    let v = aligned(&mut b, "V");
    let scale = match scale {
        Some(s) => b.scalar_f32(s as f32),
        None => {
            let q_shape = b.op("Shape", &["Q"], vec![]);
            let three = b.const_i64(&[3], &[]);
            let e = b.op("Gather", &[&q_shape, &three], vec![int("axis", 0)]);
            let e = b.op("Cast", &[&e], vec![int("to", FLOAT)]);
            let root = b.op("Sqrt", &[&e], vec![]);
            let one = b.scalar_f32(1.0);
            b.op("Div", &[&one, &root], vec![])
        }
    };
    let root = b.op("Sqrt", &[&scale], vec![]);
    let root = b.op("CastLike", &[&root, "Q"], vec![]);
    let q = b.op("Mul", &["Q", &root], vec![]);
    let k = b.op("Mul", &[&k, &root], vec![]);
    let kt = b.op("Transpose", &[&k], vec![ints("perm", &[0, 1, 3, 2])]);
    // In the compute precision (when known): the scores, what the modifiers return, and V.
    let compute = |b: &mut Builder, x: &str| match precision {
        Some(p) => b.op("Cast", &[x], vec![int("to", p)]),
        None => x.to_string(),
    };
    let scores = b.op("MatMul", &[&q, &kt], vec![]);
    let mut scores = compute(&mut b, &scores);
    if has("score_mod") {
        scores = b.graph("score_mod", &[&scores]);
        scores = compute(&mut b, &scores);
    }
    let mut probs = b.op("Softmax", &[&scores], vec![int("axis", 3)]);
    if has("prob_mod") {
        probs = b.graph("prob_mod", &[&probs]);
        probs = compute(&mut b, &probs);
    }
    let v = compute(&mut b, &v);
    let y = b.op("MatMul", &[&probs, &v], vec![]);
    b.op_into("CastLike", &[&y, "V"], "Y", vec![]);
    Ok(b.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use umd_sdk::AttributeExt;

    fn request(graphs: &[&str], attributes: Vec<AttributeExt>) -> ExpandRequest {
        ExpandRequest {
            op: "FlexAttention".into(),
            domain: "ai.onnx.preview".into(),
            opset: 1,
            inputs: vec![Some(Some(Dtype::F32)); 3],
            outputs_wanted: vec![true],
            attributes,
            graphs: graphs.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn ops(e: &Expansion) -> Vec<String> {
        e.nodes
            .iter()
            .map(|n| n.graph.clone().unwrap_or_else(|| n.op.clone()))
            .collect()
    }

    #[test]
    fn the_modifiers_run_around_the_softmax() {
        let e = expand(&request(&["score_mod", "prob_mod"], vec![])).unwrap();
        assert_eq!(
            (e.inputs.len(), e.outputs.as_slice()),
            (3, &["Y".to_string()][..])
        );
        let o = ops(&e);
        let at = |name: &str| o.iter().position(|x| x == name).unwrap();
        assert!(at("MatMul") < at("score_mod"));
        assert!(at("score_mod") < at("Softmax") && at("Softmax") < at("prob_mod"));
        assert_eq!(e.nodes.last().unwrap().outputs, ["Y"]);
        // Q's type known: the scores, the modifier's result and V are cast to the softmax
        // precision; not known (and no softmax_precision): none of them is.
        let casts = |e: &Expansion| e.nodes.iter().filter(|n| n.op == "Cast").count();
        let known = casts(&expand(&request(&["score_mod"], vec![])).unwrap());
        let mut r = request(&["score_mod"], vec![]);
        r.inputs[0] = Some(None);
        assert_eq!(casts(&expand(&r).unwrap()), known - 3);
        // Every value read is an input or written before.
        let mut known: Vec<String> = e.inputs.clone();
        for n in &e.nodes {
            for i in &n.inputs {
                assert!(known.contains(i), "{i} read before written");
            }
            known.extend(n.outputs.iter().cloned());
        }
    }

    #[test]
    fn a_given_scale_is_a_constant_and_only_given_modifiers_run() {
        let scale = AttributeExt {
            name: "scale".into(),
            value: AttrValueExt::Float(0.25),
        };
        let o = ops(&expand(&request(&["prob_mod"], vec![scale])).unwrap());
        assert!(!o.contains(&"Gather".to_string()), "{o:?}");
        assert!(!o.contains(&"score_mod".to_string()));
        assert!(o.contains(&"prob_mod".to_string()));
    }

    #[test]
    fn bad_requests_are_refused_by_name() {
        let e = expand(&request(&["mask_mod"], vec![])).unwrap_err();
        assert!(format!("{e:?}").contains("no graph attribute `mask_mod`"));
        let p = AttributeExt {
            name: "softmax_precision".into(),
            value: AttrValueExt::Int(7),
        };
        let e = expand(&request(&["score_mod"], vec![p])).unwrap_err();
        assert!(format!("{e:?}").contains("softmax_precision 7"));
        let mut r = request(&["score_mod"], vec![]);
        r.inputs.pop();
        assert!(expand(&r).is_err());
    }
}
