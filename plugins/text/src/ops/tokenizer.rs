//! com.microsoft Tokenizer (what skl2onnx writes for scikit-learn's CountVectorizer and
//! TfidfVectorizer), as onnxruntime's contrib kernel computes it: each string of a `[C]` or
//! `[N, C]` tensor becomes its tokens — the matches of `tokenexp` (RE2 syntax, unanchored,
//! leftmost; a match shorter than `mincharnum` characters is skipped one character on), or its
//! characters when `separators` is `[""]` — framed by U+0002/U+0003 when `mark` is set, then
//! padded with `pad_value` to the longest row: output `input dims + [max tokens]`.
//! `separators` splitting (regexes in onnxruntime) is not served.

use regex::RegexBuilder;

use super::common::{Budget, OpResult, attr, check_attrs, invalid, str_input};
use super::regex_match::{SIZE_LIMIT, re2_to_regex};
use super::{Attr, OpError, Tensor, Value};

const ATTRS: &[&str] = &["mark", "pad_value", "mincharnum", "separators", "tokenexp"];

pub fn tokenizer(x: &Value, attrs: &[(String, Attr)]) -> OpResult<Vec<Value>> {
    check_attrs("Tokenizer", attrs, ATTRS)?;
    let x = str_input("Tokenizer input", x)?;
    let int = |name: &str| match attr(attrs, name) {
        Some(Attr::Int(v)) => Ok(*v),
        _ => invalid(format!(
            "Tokenizer: attribute \"{name}\" (an int) is required"
        )),
    };
    let mark = int("mark")? != 0;
    let mincharnum = int("mincharnum")?;
    if mincharnum < 0 {
        return invalid(format!("Tokenizer: mincharnum {mincharnum} is negative"));
    }
    let mincharnum = mincharnum as usize;
    let pad = match attr(attrs, "pad_value") {
        Some(Attr::Text(p)) => p.clone(),
        _ => return invalid("Tokenizer: attribute \"pad_value\" (a string) is required"),
    };
    let chars = match (attr(attrs, "separators"), attr(attrs, "tokenexp")) {
        (Some(Attr::Texts(s)), None) if s.len() == 1 && s[0].is_empty() => {
            if mincharnum > 1 {
                return invalid("Tokenizer: mincharnum is too big for character tokenization");
            }
            None
        }
        (Some(_), None) => {
            return Err(OpError::Unsupported(
                "Tokenizer: `separators` splitting is not served; `tokenexp` and character \
                 tokenization (`separators` = [\"\"]) are"
                    .into(),
            ));
        }
        (None, Some(Attr::Text(exp))) if !exp.is_empty() => Some(
            RegexBuilder::new(&re2_to_regex(exp))
                .size_limit(SIZE_LIMIT)
                .dfa_size_limit(SIZE_LIMIT)
                .build()
                .or_else(|e| invalid(format!("Tokenizer: tokenexp {exp:?} is not usable: {e}")))?,
        ),
        _ => return invalid("Tokenizer: give one of `tokenexp` and `separators`"),
    };
    let (rank, dims) = (x.shape.len(), x.shape.clone());
    if !(1..=2).contains(&rank) {
        return invalid(format!(
            "Tokenizer: input dimensions are [C] or [N, C], not {dims:?}"
        ));
    }
    let mut rows: Vec<Vec<&str>> = Vec::with_capacity(x.data.len());
    let mut budget = Budget::default();
    for s in &x.data {
        let mut row = Vec::new();
        match &chars {
            None => {
                for (i, c) in s.char_indices() {
                    row.push(&s[i..i + c.len_utf8()]);
                }
            }
            Some(re) if s.chars().count() >= mincharnum => {
                let mut at = 0;
                while at <= s.len() {
                    let Some(m) = re.find_at(s, at) else { break };
                    if m.as_str().chars().count() >= mincharnum && !m.is_empty() {
                        row.push(m.as_str());
                        at = m.end();
                    } else {
                        // too short (or empty): move one character on from the match
                        match s[m.start()..].chars().next() {
                            Some(c) => at = m.start() + c.len_utf8(),
                            None => break,
                        }
                    }
                }
            }
            Some(_) => {}
        }
        budget.charge(row.iter().map(|t| t.len() + 24).sum())?;
        rows.push(row);
    }
    let longest = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width = if longest == 0 {
        0
    } else {
        longest + 2 * mark as usize
    };
    let mut shape = if x.data.is_empty() && rank == 1 {
        vec![]
    } else {
        dims
    };
    if x.data.is_empty() && rank == 2 {
        shape.truncate(1);
    }
    shape.push(width as u64);
    let mut out = Vec::new();
    if width > 0 {
        budget.charge(
            x.data
                .len()
                .saturating_mul(width)
                .saturating_mul(24 + pad.len()),
        )?;
        for row in &rows {
            if mark {
                out.push("\u{2}".to_string());
            }
            out.extend(row.iter().map(|t| t.to_string()));
            if mark {
                out.push("\u{3}".to_string());
            }
            out.extend(std::iter::repeat_n(pad.clone(), longest - row.len()));
        }
    }
    Ok(vec![Value::Str(Tensor::new(shape, out))])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::s;

    fn attrs(
        mark: i64,
        min: i64,
        exp: Option<&str>,
        seps: Option<Vec<&str>>,
    ) -> Vec<(String, Attr)> {
        let mut a = vec![
            ("mark".to_string(), Attr::Int(mark)),
            ("mincharnum".to_string(), Attr::Int(min)),
            ("pad_value".to_string(), Attr::Text("#".into())),
        ];
        if let Some(e) = exp {
            a.push(("tokenexp".into(), Attr::Text(e.into())));
        }
        if let Some(v) = seps {
            a.push((
                "separators".into(),
                Attr::Texts(v.iter().map(|s| s.to_string()).collect()),
            ));
        }
        a
    }

    #[test]
    fn token_expressions_pad_and_mark() {
        let x = s(&[2], &["the cat sat", "a dog"]);
        let out = tokenizer(&x, &attrs(0, 1, Some("[a-z]+"), None)).unwrap();
        assert_eq!(
            out,
            vec![s(&[2, 3], &["the", "cat", "sat", "a", "dog", "#"])]
        );
        // matches shorter than mincharnum are skipped one character on: "ab" then "cd"
        let out = tokenizer(
            &s(&[1], &["abcd x"]),
            &attrs(0, 2, Some("[a-z]{2}|[a-z]"), None),
        )
        .unwrap();
        assert_eq!(out, vec![s(&[1, 2], &["ab", "cd"])]);
        let out = tokenizer(&s(&[1, 1], &["hi yo"]), &attrs(1, 1, Some("[a-z]+"), None)).unwrap();
        assert_eq!(out, vec![s(&[1, 1, 4], &["\u{2}", "hi", "yo", "\u{3}"])]);
        // nothing matches: a last dimension of 0
        let out = tokenizer(&s(&[2], &["!!", "?"]), &attrs(1, 1, Some("[a-z]+"), None)).unwrap();
        assert_eq!(out, vec![s(&[2, 0], &[])]);
    }

    #[test]
    fn characters_and_refusals() {
        let out = tokenizer(&s(&[2], &["añ", "b"]), &attrs(0, 1, None, Some(vec![""]))).unwrap();
        assert_eq!(out, vec![s(&[2, 2], &["a", "ñ", "b", "#"])]);
        let e = tokenizer(&s(&[1], &["a b"]), &attrs(0, 1, None, Some(vec![" "]))).unwrap_err();
        assert!(
            format!("{e}").contains("`separators` splitting is not served"),
            "{e}"
        );
        let e = tokenizer(&s(&[1], &["a"]), &attrs(0, 1, Some("("), None)).unwrap_err();
        assert!(format!("{e}").contains("not usable"), "{e}");
        // an empty match never stalls the scan
        let out = tokenizer(&s(&[1], &["ab"]), &attrs(0, 0, Some("x*"), None)).unwrap();
        assert_eq!(out, vec![s(&[1, 0], &[])]);
    }
}
