//! RE2's leftmost-longest search (`RE2::Options::set_longest_match(true)`, what onnxruntime's
//! Tokenizer compiles its `tokenexp` and `separators` with) on the `regex` crates: the leftmost
//! match's start comes from `regex` (leftmost-first and leftmost-longest agree on where the
//! leftmost match starts), its longest end from a lazy DFA built with `MatchKind::All`, searched
//! anchored at that start — it runs on until no longer match is possible. Patterns are RE2
//! syntax, rewritten by [`re2_to_regex`]; both automata are capped at [`SIZE_LIMIT`].

use std::ops::Range;

use regex::{Regex, RegexBuilder};
use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::nfa::thompson;
use regex_automata::{Anchored, Input, MatchKind};

use super::regex_match::{SIZE_LIMIT, re2_to_regex};

/// A compiled RE2 pattern searched leftmost-longest.
pub struct Longest {
    first: Regex,
    longest: DFA,
}

impl Longest {
    /// Compiles an RE2 `pattern`; the error says why it is not usable.
    pub fn new(pattern: &str) -> Result<Longest, String> {
        let translated = re2_to_regex(pattern);
        let first = RegexBuilder::new(&translated)
            .size_limit(SIZE_LIMIT)
            .dfa_size_limit(SIZE_LIMIT)
            .build()
            .map_err(|e| e.to_string())?;
        let longest = DFA::builder()
            .configure(
                DFA::config()
                    .match_kind(MatchKind::All)
                    .cache_capacity(SIZE_LIMIT),
            )
            .thompson(thompson::Config::new().nfa_size_limit(Some(SIZE_LIMIT)))
            .build(&translated)
            .map_err(|e| e.to_string())?;
        Ok(Longest { first, longest })
    }

    /// A search cache (one per thread of searches).
    pub fn cache(&self) -> Cache {
        self.longest.create_cache()
    }

    /// The leftmost-longest match in `hay` starting at or after byte `at` (a char boundary).
    /// Where the lazy DFA cannot decide (a Unicode word boundary on non-ASCII text, which RE2
    /// patterns do not have: `\b` is rewritten to its ASCII form), the leftmost-first end.
    pub fn find_at(&self, cache: &mut Cache, hay: &str, at: usize) -> Option<Range<usize>> {
        let m = self.first.find_at(hay, at)?;
        let input = Input::new(hay).range(m.start()..).anchored(Anchored::Yes);
        let end = match self.longest.try_search_fwd(cache, &input) {
            Ok(Some(e)) => e.offset().max(m.end()),
            _ => m.end(),
        };
        Some(m.start()..end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(p: &str, hay: &str, at: usize) -> Option<Range<usize>> {
        let l = Longest::new(p).unwrap();
        l.find_at(&mut l.cache(), hay, at)
    }

    #[test]
    fn the_leftmost_match_is_the_longest_not_the_first_alternative() {
        assert_eq!(find("a|ab", "xab", 0), Some(1..3));
        assert_eq!(find("b|ab|abc", "zabcd", 0), Some(1..4));
        assert_eq!(find("[a-z]+|[a-z]+ [a-z]+", "hi yo", 0), Some(0..5));
        assert_eq!(find("é|él", "xél", 0), Some(1..4));
        assert_eq!(
            find("a*", "baa", 0),
            Some(0..0),
            "an empty match at the start"
        );
        assert_eq!(find("a*", "baa", 1), Some(1..3));
        assert_eq!(find(r"\d+", "ab", 0), None);
        // the search sees the text before `at` (a word boundary needs it)
        assert_eq!(find(r"\bx", "ax x", 1), Some(3..4));
        assert!(Longest::new("(").is_err());
    }
}
