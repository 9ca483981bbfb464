//! StringSplit-20: split each string on `delimiter` (at most `maxsplit` times), as Python's
//! `str.split` does; outputs `Y` (input shape + `[max parts]`, padded with `""`) and `Z` (int64,
//! input shape, the number of parts of each element).
//!
//! With `delimiter` absent or `""` the split is on runs of whitespace, leading and trailing
//! whitespace dropped (Python's `str.split()`; whitespace is Python's `str.isspace`, i.e.
//! Unicode White_Space plus U+001C..U+001F). With a delimiter, consecutive delimiters delimit
//! empty strings. A negative `maxsplit` means no limit, as in Python.

use super::common::{Budget, OpResult, attr_int, attr_text, check_attrs, str_input};
use super::{Attr, Tensor, Value};

/// Python's `str.isspace` for one character.
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `s.split(None, maxsplit)` (CPython's `split_whitespace`), `None` = no limit.
fn split_whitespace(s: &str, maxsplit: Option<usize>) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = s;
    let mut left = maxsplit.unwrap_or(usize::MAX);
    while left > 0 {
        rest = rest.trim_start_matches(py_space);
        if rest.is_empty() {
            break;
        }
        let end = rest.find(py_space).unwrap_or(rest.len());
        parts.push(&rest[..end]);
        rest = &rest[end..];
        left -= 1;
    }
    // Only when maxsplit was reached: the remainder, leading whitespace skipped, kept whole.
    let rest = rest.trim_start_matches(py_space);
    if !rest.is_empty() {
        parts.push(rest);
    }
    parts
}

/// Python's `s.split(delimiter, maxsplit)` for a non-empty delimiter.
fn split_on<'a>(s: &'a str, delimiter: &str, maxsplit: Option<usize>) -> Vec<&'a str> {
    match maxsplit.and_then(|m| m.checked_add(1)) {
        Some(n) => s.splitn(n, delimiter).collect(),
        None => s.split(delimiter).collect(),
    }
}

/// StringSplit on input `x`.
pub fn string_split(x: &Value, attrs: &[(String, Attr)]) -> OpResult<Vec<Value>> {
    check_attrs("StringSplit", attrs, &["delimiter", "maxsplit"])?;
    let delimiter = attr_text(attrs, "delimiter")?
        .map(String::as_str)
        .unwrap_or("");
    let maxsplit = attr_int(attrs, "maxsplit")?.and_then(|&m| usize::try_from(m).ok());
    let x = str_input("StringSplit input X", x)?;
    let splits: Vec<Vec<&str>> = x
        .data
        .iter()
        .map(|s| match delimiter {
            "" => split_whitespace(s, maxsplit),
            d => split_on(s, d, maxsplit),
        })
        .collect();
    let width = splits.iter().map(Vec::len).max().unwrap_or(0);
    // Charge both outputs before building Y: the padding can be far larger than the text.
    let mut budget = Budget::default();
    budget.charge_elems::<i64>(x.data.len())?;
    budget.charge_elems::<String>(x.data.len().saturating_mul(width))?;
    for parts in &splits {
        budget.charge(parts.iter().map(|p| p.len()).sum())?;
    }
    let mut y = Vec::with_capacity(x.data.len() * width);
    let mut z = Vec::with_capacity(x.data.len());
    for parts in &splits {
        z.push(parts.len() as i64);
        y.extend(parts.iter().map(|p| p.to_string()));
        y.extend((parts.len()..width).map(|_| String::new()));
    }
    let mut y_shape = x.shape.clone();
    y_shape.push(width as u64);
    Ok(vec![
        Value::Str(Tensor::new(y_shape, y)),
        Value::I64(Tensor::new(x.shape.clone(), z)),
    ])
}

#[cfg(test)]
mod tests {
    use super::super::{OpError, run, s};
    use super::*;

    fn z(shape: &[u64], v: &[i64]) -> Value {
        Value::I64(Tensor::new(shape.to_vec(), v.to_vec()))
    }

    fn split(
        x: Value,
        delimiter: Option<&str>,
        maxsplit: Option<i64>,
    ) -> Result<Vec<Value>, OpError> {
        let mut attrs = vec![];
        if let Some(d) = delimiter {
            attrs.push(("delimiter".to_string(), Attr::Text(d.to_string())));
        }
        if let Some(m) = maxsplit {
            attrs.push(("maxsplit".to_string(), Attr::Int(m)));
        }
        run("StringSplit", &[Some(x)], &attrs)
    }

    // Expected values: onnx/backend/test/case/node/string_split.py (all seven node tests).
    #[test]
    fn node_tests() {
        let got = split(s(&[2], &["abc.com", "def.net"]), Some("."), None).unwrap();
        assert_eq!(
            got,
            vec![s(&[2, 2], &["abc", "com", "def", "net"]), z(&[2], &[2, 2])]
        );
        let x = s(
            &[2, 2],
            &["hello world", "def.net", "o n n x", "the quick brown fox"],
        );
        let want = [
            "hello",
            "world",
            "",
            "def.net",
            "",
            "",
            "o",
            "n",
            "n x",
            "the",
            "quick",
            "brown fox",
        ];
        let got = split(x, None, Some(2)).unwrap();
        assert_eq!(got, vec![s(&[2, 2, 3], &want), z(&[2, 2], &[2, 1, 3, 3])]);
        let got = split(s(&[2], &["o-n-n--x-", "o-n----nx"]), Some("-"), None).unwrap();
        let want = ["o", "n", "n", "", "x", "", "o", "n", "", "", "", "nx"];
        assert_eq!(got, vec![s(&[2, 6], &want), z(&[2], &[6, 6])]);
        for delimiter in [Some(""), None] {
            let x = s(
                &[3],
                &["hello world !", "  hello   world !", " hello world   ! "],
            );
            let want = ["hello", "world", "!"].repeat(3);
            let got = split(x, delimiter, None).unwrap();
            assert_eq!(got, vec![s(&[3, 3], &want), z(&[3], &[3, 3, 3])]);
        }
        let got = split(s(&[0], &[]), None, None).unwrap();
        assert_eq!(got, vec![s(&[0, 0], &[]), z(&[0], &[])]);
    }

    // Expected values: onnx ReferenceEvaluator (numpy np.char.split, i.e. Python str.split).
    #[test]
    fn reference_evaluator_cases() {
        let x = || s(&[4], &["  a b  c ", "", "x\u{1f}y\u{a0}z", "--"]);
        let got = split(x(), None, Some(1)).unwrap();
        let want = ["a", "b  c ", "", "", "x", "y\u{a0}z", "--", ""];
        assert_eq!(got, vec![s(&[4, 2], &want), z(&[4], &[2, 0, 2, 1])]);
        let got = split(x(), None, Some(0)).unwrap();
        assert_eq!(
            got,
            vec![
                s(&[4, 1], &["a b  c ", "", "x\u{1f}y\u{a0}z", "--"]),
                z(&[4], &[1, 0, 1, 1])
            ]
        );
        let got = split(x(), Some("-"), Some(-1)).unwrap();
        let want = [
            "  a b  c ",
            "",
            "",
            "",
            "",
            "",
            "x\u{1f}y\u{a0}z",
            "",
            "",
            "",
            "",
            "",
        ];
        assert_eq!(got, vec![s(&[4, 3], &want), z(&[4], &[1, 1, 1, 3])]);
        // A scalar (the reference evaluator fails on rank 0): Python's "a::b::".split("::", 1).
        let got = split(s(&[], &["a::b::"]), Some("::"), Some(1)).unwrap();
        assert_eq!(got, vec![s(&[2], &["a", "b::"]), z(&[], &[2])]);
    }

    #[test]
    fn bad_inputs_and_bounds() {
        let bad = |r: Result<Vec<Value>, OpError>, word: &str| {
            assert!(
                matches!(&r, Err(OpError::Invalid(m)) if m.contains(word)),
                "{r:?}"
            )
        };
        bad(
            split(Value::I64(Tensor::new(vec![1], vec![1])), None, None),
            "string tensor",
        );
        let attrs = [("delimiter".to_string(), Attr::Int(1))];
        bad(
            run("StringSplit", &[Some(s(&[1], &["a"]))], &attrs),
            "delimiter",
        );
        let attrs = [("maxsplit".to_string(), Attr::Text("1".into()))];
        bad(
            run("StringSplit", &[Some(s(&[1], &["a"]))], &attrs),
            "maxsplit",
        );
        bad(split(s(&[2], &["a"]), None, None), "shape");
        // 4096 elements padded to 4096 parts each: 16 Mi empty strings, past the byte budget.
        let mut data = vec![String::new(); 4096];
        data[0] = "-".repeat(4095);
        let x = Value::Str(Tensor::new(vec![4096], data));
        bad(split(x, Some("-"), None), "exceed");
    }
}
