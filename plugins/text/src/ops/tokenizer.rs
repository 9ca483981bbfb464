//! com.microsoft Tokenizer (what skl2onnx writes for scikit-learn's CountVectorizer and
//! TfidfVectorizer), as onnxruntime's contrib kernel computes it. Each string of a `[C]` or
//! `[N, C]` tensor becomes its tokens, one of three ways:
//! - `separators` (RE2 patterns, searched leftmost-longest as onnxruntime compiles them): the
//!   string is split at every match of the first separator, each piece at every match of the
//!   second, and so on; a piece shorter than `mincharnum` characters is dropped, and once a
//!   separator leaves no piece the string has no tokens. `separators = [""]` is characters.
//! - `tokenexp` (RE2, leftmost-longest, unanchored): the matches; a match shorter than
//!   `mincharnum` characters is skipped one character on. `tokenexp = "."` is characters.
//! - characters: each UTF-8 character.
//!
//! Tokens are framed by U+0002/U+0003 when `mark` is set, then padded with `pad_value` to the
//! longest row: output `input dims + [max tokens]`, the last dimension 0 when no string has a
//! token. `separators` win over `tokenexp` when both are given, as in onnxruntime.

use regex_automata::hybrid::dfa::Cache;

use super::common::{Budget, OpResult, attr, check_attrs, invalid, str_input};
use super::longest::Longest;
use super::{Attr, Tensor, Value};

const ATTRS: &[&str] = &["mark", "pad_value", "mincharnum", "separators", "tokenexp"];
/// Most separators one node may give.
const MAX_SEPARATORS: usize = 256;

/// How strings become tokens.
enum Mode {
    Chars,
    Expression(Box<Longest>),
    Separators(Vec<Longest>),
}

fn compile(what: &str, pattern: &str) -> OpResult<Longest> {
    Longest::new(pattern)
        .or_else(|e| invalid(format!("Tokenizer: {what} {pattern:?} is not usable: {e}")))
}

fn mode(attrs: &[(String, Attr)], mincharnum: usize) -> OpResult<Mode> {
    let chars = || {
        if mincharnum > 1 {
            return invalid("Tokenizer: mincharnum is too big for character tokenization");
        }
        Ok(Mode::Chars)
    };
    match (attr(attrs, "separators"), attr(attrs, "tokenexp")) {
        (Some(Attr::Texts(s)), _) if s.len() == 1 && s[0].is_empty() => chars(),
        (Some(Attr::Texts(s)), _) if s.is_empty() => {
            invalid("Tokenizer: `separators` must not be empty")
        }
        (Some(Attr::Texts(s)), _) if s.len() > MAX_SEPARATORS => invalid(format!(
            "Tokenizer: {} separators, at most {MAX_SEPARATORS}",
            s.len()
        )),
        (Some(Attr::Texts(s)), _) => Ok(Mode::Separators(
            s.iter()
                .map(|p| compile("separator", p))
                .collect::<OpResult<_>>()?,
        )),
        (Some(_), _) => invalid("Tokenizer: `separators` is a list of strings"),
        (None, Some(Attr::Text(exp))) if exp == "." => chars(),
        (None, Some(Attr::Text(exp))) if !exp.is_empty() => {
            Ok(Mode::Expression(Box::new(compile("tokenexp", exp)?)))
        }
        _ => invalid("Tokenizer: give one of `tokenexp` (not empty) and `separators`"),
    }
}

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
    let mode = mode(attrs, mincharnum)?;
    let (rank, dims) = (x.shape.len(), x.shape.clone());
    if !(1..=2).contains(&rank) {
        return invalid(format!(
            "Tokenizer: input dimensions are [C] or [N, C], not {dims:?}"
        ));
    }
    let mut caches: Vec<Cache> = match &mode {
        Mode::Expression(re) => vec![re.cache()],
        Mode::Separators(seps) => seps.iter().map(Longest::cache).collect(),
        Mode::Chars => Vec::new(),
    };
    let mut rows: Vec<Vec<&str>> = Vec::with_capacity(x.data.len());
    let mut budget = Budget::default();
    for s in &x.data {
        let row = match &mode {
            Mode::Chars => s
                .char_indices()
                .map(|(i, c)| &s[i..i + c.len_utf8()])
                .collect(),
            Mode::Expression(re) => matches(re, &mut caches[0], s, mincharnum),
            Mode::Separators(seps) => split(seps, &mut caches, s, mincharnum),
        };
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

/// The bytes of the character at `at` (1 past the end, as onnxruntime steps past an empty
/// match there).
fn char_len(s: &str, at: usize) -> usize {
    s[at..].chars().next().map_or(1, char::len_utf8)
}

/// `tokenexp`'s tokens of `s`: its matches of at least `min` characters, a shorter (or empty)
/// match skipped one character on; none when `s` is shorter than `min`.
fn matches<'s>(re: &Longest, cache: &mut Cache, s: &'s str, min: usize) -> Vec<&'s str> {
    let mut row = Vec::new();
    if s.chars().count() < min {
        return row;
    }
    let mut at = 0;
    while at <= s.len() {
        let Some(m) = re.find_at(cache, s, at) else {
            break;
        };
        let token = &s[m.clone()];
        if !token.is_empty() && token.chars().count() >= min {
            row.push(token);
            at = m.end;
        } else {
            at = m.start + char_len(s, m.start);
        }
    }
    row
}

/// `separators`' tokens of `s`: split by each separator in turn (see the module doc).
fn split<'s>(seps: &[Longest], caches: &mut [Cache], s: &'s str, min: usize) -> Vec<&'s str> {
    let mut row = vec![s];
    for (sep, cache) in seps.iter().zip(caches) {
        let mut tokens = Vec::new();
        for text in &row {
            let mut start = 0;
            loop {
                let Some(m) = sep.find_at(cache, text, start) else {
                    let trailing = &text[start..];
                    if trailing.chars().count() >= min {
                        tokens.push(trailing);
                    }
                    break;
                };
                let token = &text[start..m.start];
                if token.chars().count() >= min {
                    tokens.push(token);
                }
                start = if m.is_empty() {
                    m.start + char_len(text, m.start)
                } else {
                    m.end
                };
                if start > text.len() {
                    break; // an empty match at the end: nothing trails it
                }
            }
        }
        if tokens.is_empty() {
            return tokens;
        }
        row = tokens;
    }
    row
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
        let e = tokenizer(&s(&[1], &["a"]), &attrs(0, 1, Some("("), None)).unwrap_err();
        assert!(format!("{e}").contains("not usable"), "{e}");
        // an empty match never stalls the scan
        let out = tokenizer(&s(&[1], &["ab"]), &attrs(0, 0, Some("x*"), None)).unwrap();
        assert_eq!(out, vec![s(&[1, 0], &[])]);
    }

    /// Each expectation is onnxruntime 1.32's output for the same node and input.
    #[test]
    fn separators_split_in_turn_as_onnxruntime_does() {
        let run = |x: &[&str], seps: Vec<&str>, mark: i64, min: i64| {
            tokenizer(
                &s(&[x.len() as u64], x),
                &attrs(mark, min, None, Some(seps)),
            )
            .unwrap()
            .remove(0)
        };
        assert_eq!(
            run(&["a b,,c", "hello  world"], vec![" ", ","], 0, 1),
            s(&[2, 3], &["a", "b", "c", "hello", "world", "#"])
        );
        assert_eq!(
            run(&["a b,,c", "hello  world"], vec![r"\s+", ","], 0, 1),
            s(&[2, 3], &["a", "b", "c", "hello", "world", "#"])
        );
        assert_eq!(
            run(&["a b,,c", "hello  world"], vec![" ", ","], 0, 2),
            s(&[2, 2], &["#", "#", "hello", "world"])
        );
        // the first separator splits, the second splits its pieces
        assert_eq!(
            run(&["abcabc", "xaby"], vec!["ab", "b"], 0, 1),
            s(&[2, 2], &["c", "c", "x", "y"])
        );
        assert_eq!(
            run(&["abcabc", "xaby"], vec!["b", "ab"], 0, 1),
            s(&[2, 3], &["a", "ca", "c", "xa", "y", "#"])
        );
        assert_eq!(run(&["a.b.c"], vec!["."], 0, 1), s(&[1, 0], &[]));
        assert_eq!(
            run(&["a1b22c"], vec!["[0-9]+"], 0, 1),
            s(&[1, 3], &["a", "b", "c"])
        );
        assert_eq!(run(&["", "   "], vec![" "], 0, 1), s(&[2, 0], &[]));
        assert_eq!(
            run(&["a b"], vec![" "], 1, 1),
            s(&[1, 4], &["\u{2}", "a", "b", "\u{3}"])
        );
        assert_eq!(run(&["aaa"], vec!["a*"], 0, 1), s(&[1, 0], &[]));
        assert_eq!(
            run(&["héllo wörld"], vec!["l+"], 0, 1),
            s(&[1, 3], &["hé", "o wör", "d"])
        );
        // leftmost-longest: " " and "  " both match at 1; the longer one is the separator
        assert_eq!(
            run(&["a  b"], vec![" ", "  "], 0, 1),
            s(&[1, 2], &["a", "b"])
        );
        let e = tokenizer(&s(&[1], &["ab"]), &attrs(0, 1, None, Some(vec!["("]))).unwrap_err();
        assert!(
            format!("{e}").contains("separator \"(\" is not usable"),
            "{e}"
        );
    }

    #[test]
    fn token_expressions_take_the_longest_match() {
        let out = tokenizer(&s(&[1], &["abc ab"]), &attrs(0, 1, Some("a|abc|ab"), None)).unwrap();
        assert_eq!(out, vec![s(&[1, 2], &["abc", "ab"])]);
        // "." is character tokenization (a newline is a character too)
        let out = tokenizer(&s(&[1], &["a\nb"]), &attrs(0, 1, Some("."), None)).unwrap();
        assert_eq!(out, vec![s(&[1, 3], &["a", "\n", "b"])]);
    }
}
