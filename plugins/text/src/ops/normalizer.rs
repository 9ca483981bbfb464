//! StringNormalizer-10: drop stop words from a `[C]` or `[1, C]` string tensor, then change case.
//!
//! Semantics follow the ONNX spec text (and onnxruntime): an element is dropped when it *is* a
//! stop word (compared whole, case-insensitively with Unicode lowercasing unless
//! `is_case_sensitive`); the survivors are lower- or uppercased with Unicode case mapping
//! (`locale` is accepted and ignored); when nothing survives the output is one `""` of shape
//! `[1]` (input `[C]`) or `[1, 1]` (input `[1, C]`).
//!
//! Where onnx's Python reference evaluator differs, this follows the spec, on purpose:
//! the reference also strips accents (NFKD) from non-ASCII strings, removes stop words
//! *inside* space-separated strings, drops every empty string (not just stop words), and
//! with `case_change_action = NONE` compares stop words case-sensitively even when
//! `is_case_sensitive = 0`. The node tests (single words, ASCII) agree under both readings.

use std::collections::HashSet;

use super::common::{
    Budget, OpResult, attr_int, attr_text, attr_texts, check_attrs, invalid, str_input,
};
use super::{Attr, Tensor, Value};

const ATTRS: &[&str] = &[
    "case_change_action",
    "is_case_sensitive",
    "locale",
    "stopwords",
];

#[derive(Clone, Copy)]
enum Case {
    None,
    Lower,
    Upper,
}

/// StringNormalizer on input `x`.
pub fn string_normalizer(x: &Value, attrs: &[(String, Attr)]) -> OpResult<Vec<Value>> {
    check_attrs("StringNormalizer", attrs, ATTRS)?;
    let case = match attr_text(attrs, "case_change_action")?.map(String::as_str) {
        None | Some("NONE") => Case::None,
        Some("LOWER") => Case::Lower,
        Some("UPPER") => Case::Upper,
        Some(other) => {
            return invalid(format!(
                "attribute \"case_change_action\" must be NONE, LOWER or UPPER, got {other:?}"
            ));
        }
    };
    let sensitive = match attr_int(attrs, "is_case_sensitive")? {
        None | Some(0) => false,
        Some(1) => true,
        Some(v) => {
            return invalid(format!(
                "attribute \"is_case_sensitive\" must be 0 or 1, got {v}"
            ));
        }
    };
    attr_text(attrs, "locale")?; // Any locale: case mapping is Unicode's.
    let stops: HashSet<String> = match attr_texts(attrs, "stopwords")? {
        None => HashSet::new(),
        Some(words) if sensitive => words.iter().cloned().collect(),
        Some(words) => words.iter().map(|w| w.to_lowercase()).collect(),
    };
    let x = str_input("StringNormalizer input X", x)?;
    let two_d = match x.shape[..] {
        [_] => false,
        [1, _] => true,
        _ => {
            return invalid(format!(
                "StringNormalizer input X must have shape [C] or [1, C], got {:?}",
                x.shape
            ));
        }
    };
    let mut budget = Budget::default();
    let mut data = Vec::new();
    for s in &x.data {
        let stop = if sensitive {
            stops.contains(s)
        } else {
            !stops.is_empty() && stops.contains(&s.to_lowercase())
        };
        if stop {
            continue;
        }
        let out = match case {
            Case::None => s.clone(),
            Case::Lower => s.to_lowercase(),
            Case::Upper => s.to_uppercase(),
        };
        budget.charge_str(out.len())?;
        data.push(out);
    }
    if data.is_empty() {
        data.push(String::new());
    }
    let c = data.len() as u64;
    let shape = if two_d { vec![1, c] } else { vec![c] };
    Ok(vec![Value::Str(Tensor::new(shape, data))])
}

#[cfg(test)]
mod tests {
    use super::super::{OpError, run, s};
    use super::*;

    fn attrs(list: &[(&str, Attr)]) -> Vec<(String, Attr)> {
        list.iter()
            .map(|(n, a)| (n.to_string(), a.clone()))
            .collect()
    }

    fn norm(x: Value, a: &[(&str, Attr)]) -> Result<Vec<Value>, OpError> {
        run("StringNormalizer", &[Some(x)], &attrs(a))
    }

    fn text(v: &str) -> Attr {
        Attr::Text(v.to_string())
    }

    fn monday() -> Attr {
        Attr::Texts(vec!["monday".to_string()])
    }

    const DAYS: [&str; 4] = ["monday", "tuesday", "wednesday", "thursday"];

    // Expected values: onnx/backend/test/case/node/stringnormalizer.py (all six node tests).
    #[test]
    fn node_tests() {
        let sens = ("is_case_sensitive", Attr::Int(1));
        let got = norm(s(&[2], &["monday", "tuesday"]), std::slice::from_ref(&sens)).unwrap();
        assert_eq!(got, vec![s(&[2], &["monday", "tuesday"])]);
        let got = norm(s(&[4], &DAYS), &[sens.clone(), ("stopwords", monday())]).unwrap();
        assert_eq!(got, vec![s(&[3], &["tuesday", "wednesday", "thursday"])]);
        let a = [
            sens.clone(),
            ("stopwords", monday()),
            ("case_change_action", text("LOWER")),
        ];
        assert_eq!(
            norm(s(&[4], &DAYS), &a).unwrap(),
            vec![s(&[3], &["tuesday", "wednesday", "thursday"])]
        );
        let a = [
            sens.clone(),
            ("stopwords", monday()),
            ("case_change_action", text("UPPER")),
        ];
        assert_eq!(
            norm(s(&[4], &DAYS), &a).unwrap(),
            vec![s(&[3], &["TUESDAY", "WEDNESDAY", "THURSDAY"])]
        );
        assert_eq!(
            norm(s(&[2], &["monday", "monday"]), &a).unwrap(),
            vec![s(&[1], &[""])]
        );
        let x = s(
            &[1, 6],
            &[
                "Monday",
                "tuesday",
                "wednesday",
                "Monday",
                "tuesday",
                "wednesday",
            ],
        );
        let a = [
            ("stopwords", monday()),
            ("case_change_action", text("UPPER")),
        ];
        let want = s(&[1, 4], &["TUESDAY", "WEDNESDAY", "TUESDAY", "WEDNESDAY"]);
        assert_eq!(norm(x, &a).unwrap(), vec![want]);
    }

    // Expected values: onnx ReferenceEvaluator (onnx 1.x) on the same inputs and attributes.
    #[test]
    fn reference_evaluator_cases() {
        let a = [("stopwords", monday()), ("is_case_sensitive", Attr::Int(1))];
        assert_eq!(
            norm(s(&[1, 2], &["monday", "monday"]), &a).unwrap(),
            vec![s(&[1, 1], &[""])]
        );
        assert_eq!(norm(s(&[0], &[]), &[]).unwrap(), vec![s(&[1], &[""])]);
        let x = || s(&[3], &["Monday", "monday", "x"]);
        let stops = ("stopwords", Attr::Texts(vec!["MONDAY".into()]));
        let a = [stops.clone(), ("case_change_action", text("LOWER"))];
        assert_eq!(norm(x(), &a).unwrap(), vec![s(&[1], &["x"])]);
        let a = [stops.clone(), ("case_change_action", text("UPPER"))];
        assert_eq!(norm(x(), &a).unwrap(), vec![s(&[1], &["X"])]);
        let a = [
            stops,
            ("case_change_action", text("LOWER")),
            ("is_case_sensitive", Attr::Int(1)),
        ];
        assert_eq!(
            norm(x(), &a).unwrap(),
            vec![s(&[3], &["monday", "monday", "x"])]
        );
    }

    // Expected values: Python's str.upper()/str.lower() (Unicode full case mapping). The
    // reference evaluator would also strip the accents ("CA", "ete i"); the spec does not.
    #[test]
    fn unicode_case_mapping() {
        let a = [
            ("case_change_action", text("UPPER")),
            ("locale", text("de_DE")),
        ];
        assert_eq!(
            norm(s(&[2], &["straße", "ça"]), &a).unwrap(),
            vec![s(&[2], &["STRASSE", "ÇA"])]
        );
        let a = [("case_change_action", text("LOWER"))];
        assert_eq!(
            norm(s(&[1], &["ÉTÉ İ"]), &a).unwrap(),
            vec![s(&[1], &["été i\u{307}"])]
        );
    }

    // Spec reading (is_case_sensitive defaults to false whatever case_change_action is); the
    // reference evaluator keeps all three here because with NONE it compares case-sensitively.
    #[test]
    fn stop_words_ignore_case_by_default() {
        let x = s(&[3], &["Monday", "monday", "x"]);
        let a = [("stopwords", Attr::Texts(vec!["MONDAY".into()]))];
        assert_eq!(norm(x, &a).unwrap(), vec![s(&[1], &["x"])]);
    }

    #[test]
    fn bad_attributes_and_shapes() {
        let x = || s(&[1], &["a"]);
        let bad = |r: Result<Vec<Value>, OpError>, word: &str| {
            assert!(
                matches!(&r, Err(OpError::Invalid(m)) if m.contains(word)),
                "{r:?}"
            )
        };
        bad(
            norm(x(), &[("case_change_action", text("lower"))]),
            "case_change_action",
        );
        bad(
            norm(x(), &[("case_change_action", Attr::Int(1))]),
            "case_change_action",
        );
        bad(
            norm(x(), &[("is_case_sensitive", Attr::Int(2))]),
            "is_case_sensitive",
        );
        bad(norm(x(), &[("stopwords", text("a"))]), "stopwords");
        bad(norm(x(), &[("stop_words", monday())]), "stop_words");
        bad(norm(s(&[2, 1], &["a", "b"]), &[]), "[C] or [1, C]");
        bad(norm(s(&[], &["a"]), &[]), "[C] or [1, C]");
        bad(
            norm(Value::I64(Tensor::new(vec![1], vec![1])), &[]),
            "string tensor",
        );
    }
}
