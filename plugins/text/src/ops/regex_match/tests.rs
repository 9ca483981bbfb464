use super::super::{OpError, run};
use super::*;

fn s(shape: &[u64], v: &[&str]) -> Value {
    Value::Str(Tensor::new(
        shape.to_vec(),
        v.iter().map(|x| x.to_string()).collect(),
    ))
}

fn b(shape: &[u64], v: &[bool]) -> Value {
    Value::Bool(Tensor::new(shape.to_vec(), v.to_vec()))
}

fn full(x: Value, pattern: &str) -> Result<Vec<Value>, OpError> {
    run(
        "RegexFullMatch",
        &[Some(x)],
        &[("pattern".to_string(), Attr::Text(pattern.to_string()))],
    )
}

fn matches(pattern: &str, text: &str) -> bool {
    compile_full(pattern).unwrap().is_match(text)
}

// Expected values: onnx/backend/test/case/node/regex_full_match.py (all three node tests).
#[test]
fn node_tests() {
    let x = s(
        &[3],
        &["www.google.com", "www.facebook.com", "www.bbc.co.uk"],
    );
    assert_eq!(
        full(x, r"www\.[\w.-]+\.\bcom\b").unwrap(),
        vec![b(&[3], &[true, true, false])]
    );
    let email = r"(\W|^)[\w.\-]{0,25}@(yahoo|gmail)\.com(\W|$)";
    let x = s(
        &[2, 2],
        &[
            "account@gmail.com",
            "account@hotmail.com",
            "not email",
            "account2@yahoo.com",
        ],
    );
    assert_eq!(
        full(x, email).unwrap(),
        vec![b(&[2, 2], &[true, false, false, true])]
    );
    assert_eq!(full(s(&[2, 0], &[]), email).unwrap(), vec![b(&[2, 0], &[])]);
}

// Expected values: RE2 semantics (RE2::FullMatch), checked by hand against RE2's syntax page:
// full match means the whole string, not a leftmost-first prefix; Perl classes are ASCII.
#[test]
fn full_match_and_re2_classes() {
    assert!(matches("a|ab", "ab"));
    assert!(!matches("a", "ab"));
    assert!(!matches("b", "ab"));
    assert!(matches("(?m)a$", "a"));
    assert!(!matches("(?m)^a$", "a\nb"));
    assert!(matches(r"\w+", "abc_09"));
    assert!(!matches(r"\w+", "été"));
    assert!(matches(r"\W", "é"));
    assert!(matches(r"[\w\s]+", "a b\tc"));
    assert!(!matches(r"\s", "\u{a0}"));
    assert!(!matches(r"\d", "٣"));
    assert!(matches(r"\pL+", "été"));
    assert!(matches(r"[[:alpha:]]+x", "abx"));
    assert!(matches(r"[]a]+", "]a]"));
    assert!(matches(r"[^]a]", "b"));
    assert!(matches(r"\Qa.b\E.", "a.bc"));
    assert!(!matches(r"\Qa.b\E", "axb"));
    assert!(
        matches(r"x\bé", "xé"),
        "ASCII word boundary between x and é"
    );
    assert!(matches(r"\\w", r"\w"));
    assert!(matches(r"(?i)ABC", "abc"));
}

#[test]
fn bad_patterns_are_invalid() {
    let x = || s(&[1], &["a"]);
    for pattern in ["(", "a)(b", "[a", r"\C", "a{2,1}", "(?<!a)b"] {
        let r = full(x(), pattern);
        assert!(
            matches!(&r, Err(OpError::Invalid(m)) if m.contains("pattern") && m.contains(&format!("{pattern:?}"))),
            "{pattern}: {r:?}"
        );
    }
    let r = full(x(), r"\w{1000}{1000}");
    assert!(
        matches!(&r, Err(OpError::Invalid(m)) if m.contains("pattern")),
        "{r:?}"
    );
    let r = run("RegexFullMatch", &[Some(x())], &[]);
    assert!(
        matches!(&r, Err(OpError::Invalid(m)) if m.contains("required")),
        "{r:?}"
    );
    let r = run(
        "RegexFullMatch",
        &[Some(x())],
        &[("pattern".to_string(), Attr::Int(1))],
    );
    assert!(
        matches!(&r, Err(OpError::Invalid(m)) if m.contains("pattern")),
        "{r:?}"
    );
    let ints = Value::I64(Tensor::new(vec![1], vec![1]));
    assert!(matches!(full(ints, "a"), Err(OpError::Invalid(_))));
}
