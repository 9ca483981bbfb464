//! RegexFullMatch-20: whether each string matches `pattern` (RE2 syntax) from end to end.
//!
//! The pattern runs on the `regex` crate, whose syntax is RE2's apart from a few corners; to
//! keep RE2's meaning, [`re2_to_regex`] rewrites the Perl classes `\d \D \w \W \s \S \b \B`
//! (ASCII-only in RE2, Unicode in the crate) into ASCII forms and `\Q…\E` (which the crate
//! lacks) into escaped literals. The compiled program is capped at [`SIZE_LIMIT`]; a pattern
//! the crate refuses (bad syntax, too large, RE2-only features like `\C`) is Invalid.
//! (onnx's Python reference evaluator uses Python's `re`, whose `\w` is Unicode; on ASCII
//! text the two agree.)

use regex::{Regex, RegexBuilder};

use super::common::{Budget, OpResult, attr_text, check_attrs, invalid, str_input};
use super::{Attr, Tensor, Value};

/// The most bytes a compiled pattern (and each lazy DFA cache) may take.
pub const SIZE_LIMIT: usize = 1 << 20;

/// RE2's Perl classes, spelled for the `regex` crate (outside and inside brackets).
fn perl_class(c: char, in_class: bool) -> Option<&'static str> {
    Some(match (c, in_class) {
        ('d', _) => "[0-9]",
        ('D', _) => "[^0-9]",
        ('w', _) => "[0-9A-Za-z_]",
        ('W', _) => "[^0-9A-Za-z_]",
        ('s', _) => r"[\t\n\f\r ]",
        ('S', _) => r"[^\t\n\f\r ]",
        ('b', false) => r"(?-u:\b)",
        ('B', false) => r"(?-u:\B)",
        _ => return None,
    })
}

/// Rewrites an RE2 pattern so that the `regex` crate gives it RE2's meaning (see the module
/// doc). Everything else is copied as written, for the crate to accept or refuse.
pub fn re2_to_regex(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('Q') => {
                    let mut literal = String::new();
                    while let Some(q) = chars.next() {
                        if q == '\\' && chars.peek() == Some(&'E') {
                            chars.next();
                            break;
                        }
                        literal.push(q);
                    }
                    out.push_str(&regex::escape(&literal));
                }
                Some(e) => match perl_class(e, in_class) {
                    Some(class) => out.push_str(class),
                    None => {
                        out.push('\\');
                        out.push(e);
                    }
                },
                None => out.push('\\'),
            },
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    out.push(chars.next().unwrap_or('^'));
                }
                if chars.peek() == Some(&']') {
                    out.push_str(r"\]"); // A leading ']' is a literal in RE2.
                    chars.next();
                }
            }
            '[' if chars.peek() == Some(&':') => {
                // A POSIX class such as [:alpha:] (ASCII in both engines): copy through ":]".
                out.push('[');
                let mut prev = '[';
                for p in chars.by_ref() {
                    out.push(p);
                    if prev == ':' && p == ']' {
                        break;
                    }
                    prev = p;
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            c => out.push(c),
        }
    }
    out
}

/// Compiles `pattern` (RE2) for full matches, anchored at both ends.
pub fn compile_full(pattern: &str) -> OpResult<Regex> {
    let translated = re2_to_regex(pattern);
    let build = |p: &str| {
        RegexBuilder::new(p)
            .size_limit(SIZE_LIMIT)
            .dfa_size_limit(SIZE_LIMIT)
            .build()
    };
    // The pattern alone first, so that an unbalanced ")(" cannot escape the anchoring group.
    let checked = build(&translated).and_then(|_| build(&format!(r"\A(?:{translated})\z")));
    checked.or_else(|e| {
        invalid(format!(
            "attribute \"pattern\" {pattern:?} is not a usable regex: {e}"
        ))
    })
}

/// RegexFullMatch on input `x`.
pub fn regex_full_match(x: &Value, attrs: &[(String, Attr)]) -> OpResult<Vec<Value>> {
    check_attrs("RegexFullMatch", attrs, &["pattern"])?;
    let Some(pattern) = attr_text(attrs, "pattern")? else {
        return invalid("RegexFullMatch: attribute \"pattern\" is required");
    };
    let re = compile_full(pattern)?;
    let x = str_input("RegexFullMatch input X", x)?;
    Budget::default().charge_elems::<bool>(x.data.len())?;
    let data = x.data.iter().map(|s| re.is_match(s)).collect();
    Ok(vec![Value::Bool(Tensor::new(x.shape.clone(), data))])
}

#[cfg(test)]
mod tests;
