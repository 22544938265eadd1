//! Text tokenizers for the keyword and n-gram inverted indexes.
//!
//! Both tokenizers lowercase with the Unicode lowercase mapping of each
//! character ([`char::to_lowercase`]), applied character by character. That
//! mapping has no context rules (a capital sigma always becomes `σ`, never the
//! final form `ς`), so lowercasing a piece of a text gives exactly the
//! matching piece of the lowercased text, which is what makes the n-gram
//! substring search sound. There is no Unicode normalization: a precomposed
//! `é` (U+00E9) and `e` followed by a combining acute accent (U+0301) are
//! different, and the combining accent, not being alphanumeric, separates
//! keywords.
//!
//! Token lists are returned sorted and without duplicates, ready to be turned
//! into index keys.

use std::collections::BTreeSet;

/// Longest keyword token, in UTF-8 bytes; longer words are truncated (at a
/// character boundary) to at most this many bytes.
pub const MAX_KEYWORD_BYTES: usize = 256;

/// Lowercase `text` one character at a time (see the module documentation).
fn lowercase_chars(text: &str) -> impl Iterator<Item = char> + '_ {
    text.chars().flat_map(char::to_lowercase)
}

/// The longest prefix of `s` that has at most `max` bytes and ends on a
/// character boundary.
fn truncate_at_char_boundary(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
}

/// Keyword tokens of `text`, for the keyword (word) inverted index.
///
/// The text is split at every character that is not alphanumeric in the
/// Unicode sense ([`char::is_alphanumeric`]: letters of any script and
/// digits); each word is lowercased (per character, see the module
/// documentation) and truncated to at most [`MAX_KEYWORD_BYTES`] bytes at a
/// character boundary. Empty words are dropped; the result is sorted and
/// deduplicated. `"Café CAFÉ, café!"` gives `["café"]`.
pub fn keyword_tokens(text: &str) -> Vec<String> {
    let mut set = BTreeSet::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() {
            continue;
        }
        let mut token: String = lowercase_chars(word).collect();
        truncate_at_char_boundary(&mut token, MAX_KEYWORD_BYTES);
        set.insert(token);
    }
    set.into_iter().collect()
}

/// N-gram tokens of `text`, for the n-gram inverted index.
///
/// The text is lowercased (per character, see the module documentation) and
/// the `n` characters starting at every position (characters, not bytes;
/// spaces and punctuation included) are a token; near the end of the text
/// the window is cut short, so the last `n - 1` positions yield shorter
/// "tail" grams (a text of fewer than `n` characters yields its suffixes).
/// Hence every substring of the text that is shorter than `n` is a prefix of
/// some token, which lets a short pattern be answered by a prefix scan of
/// the index, and every substring of length >= `n` contains full grams.
/// The result is sorted and deduplicated; the empty text yields nothing.
///
/// `n` must be at least 1; callers validate it (an index definition with
/// `n = 0` is rejected). So that this function never panics, `n = 0` is
/// treated as 1.
pub fn ngram_tokens(text: &str, n: usize) -> Vec<String> {
    let n = n.max(1);
    let chars: Vec<char> = lowercase_chars(text).collect();
    let set: BTreeSet<String> = (0..chars.len())
        .map(|i| {
            chars[i..(i + n).min(chars.len())]
                .iter()
                .collect::<String>()
        })
        .collect();
    set.into_iter().collect()
}

/// The grams a substring search for `pattern` must find.
///
/// For a lowercased pattern of at least `n` characters: its full `n`-grams
/// (tail grams of the pattern are not needed: they are prefixes of grams of
/// the text and the full grams already cover every character). Every text
/// that contains the pattern has all of these among its [`ngram_tokens`],
/// so the index lookup is a sound filter and candidates still need a final
/// substring check. A shorter (non-empty) pattern yields itself, to be
/// looked up as a *prefix* of the index's tokens. An empty pattern yields
/// no grams.
pub fn ngram_query_tokens(pattern: &str, n: usize) -> Vec<String> {
    let n = n.max(1);
    let chars: Vec<char> = lowercase_chars(pattern).collect();
    if chars.len() < n {
        return if chars.is_empty() {
            Vec::new()
        } else {
            vec![chars.into_iter().collect()]
        };
    }
    let set: BTreeSet<String> = chars
        .windows(n)
        .map(|w| w.iter().collect::<String>())
        .collect();
    set.into_iter().collect()
}

/// Whether the words of `s` hold all (or any) of `tokens` (sorted words).
pub fn has_words(s: &str, tokens: &[String], all: bool) -> bool {
    let have = keyword_tokens(s);
    if all {
        tokens.iter().all(|t| have.binary_search(t).is_ok())
    } else {
        tokens.iter().any(|t| have.binary_search(t).is_ok())
    }
}

/// Whether `s` holds `pattern` as a substring, case-folded per character
/// (as the tokenizer does).
pub fn has_substring(s: &str, pattern: &str) -> bool {
    let fold = |t: &str| t.chars().flat_map(char::to_lowercase).collect::<String>();
    fold(s).contains(&fold(pattern))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn keywords_basic() {
        assert_eq!(
            keyword_tokens("The quick, brown fox -- the QUICK one!"),
            v(&["brown", "fox", "one", "quick", "the"])
        );
        assert_eq!(keyword_tokens("Café CAFÉ"), v(&["café"]));
        assert_eq!(keyword_tokens("Café CAFÉ, café!"), v(&["café"]));
        assert_eq!(keyword_tokens(""), Vec::<String>::new());
        assert_eq!(keyword_tokens(" ,.;-- "), Vec::<String>::new());
        assert_eq!(keyword_tokens("route66 ROUTE66"), v(&["route66"]));
        assert_eq!(
            keyword_tokens("e-mail_address"),
            v(&["address", "e", "mail"])
        );
        // Other scripts: CJK and Cyrillic letters are alphanumeric.
        assert_eq!(keyword_tokens("東京 Москва"), v(&["москва", "東京"]));
        // Per-character lowercase: capital sigma is always σ.
        assert_eq!(keyword_tokens("ΟΔΟΣ"), v(&["οδοσ"]));
        // Decomposed accent splits (no normalization).
        assert_eq!(keyword_tokens("Cafe\u{301}"), v(&["cafe"]));
    }

    #[test]
    fn keywords_truncate_at_char_boundary() {
        let long = "a".repeat(300);
        assert_eq!(keyword_tokens(&long), vec!["a".repeat(256)]);
        // 'é' is 2 bytes: 255 'a' + 'é' would be 257 bytes, so the 'é' goes.
        let mixed = format!("{}é", "a".repeat(255));
        assert_eq!(keyword_tokens(&mixed), vec!["a".repeat(255)]);
        // Multi-byte only: 100 x 3-byte chars = 300 bytes -> 85 chars.
        let cjk = "語".repeat(100);
        let t = keyword_tokens(&cjk);
        assert_eq!(t, vec!["語".repeat(85)]);
        // Two words sharing their first 256 bytes collapse into one token.
        let a = format!("{}x {}y", "b".repeat(256), "b".repeat(256));
        assert_eq!(keyword_tokens(&a), vec!["b".repeat(256)]);
    }

    #[test]
    fn ngrams_basic() {
        // Full grams plus the shorter tail grams of the last n - 1 positions.
        assert_eq!(
            ngram_tokens("Hello", 3),
            v(&["ell", "hel", "llo", "lo", "o"])
        );
        assert_eq!(ngram_tokens("aaaa", 2), v(&["a", "aa"]));
        assert_eq!(ngram_tokens("ab", 3), v(&["ab", "b"]));
        assert_eq!(ngram_tokens("AB", 2), v(&["ab", "b"]));
        assert_eq!(ngram_tokens("", 3), Vec::<String>::new());
        assert_eq!(ngram_tokens("a b", 2), v(&[" b", "a ", "b"]));
        // Windows are by character: "Café" has 4 chars, 5 bytes.
        assert_eq!(ngram_tokens("Café", 2), v(&["af", "ca", "fé", "é"]));
        assert_eq!(ngram_tokens("CAFÉ", 4), v(&["afé", "café", "fé", "é"]));
        assert_eq!(ngram_tokens("東京都", 2), v(&["京都", "東京", "都"]));
        // n = 0 behaves like n = 1 instead of panicking.
        assert_eq!(ngram_tokens("aba", 0), v(&["a", "b"]));
        assert_eq!(ngram_query_tokens("xYz", 2), v(&["xy", "yz"]));
        assert_eq!(ngram_query_tokens("Q", 3), v(&["q"]));
    }

    proptest! {
        #[test]
        fn keyword_tokens_are_sorted_unique_and_bounded(text in ".{0,200}") {
            let toks = keyword_tokens(&text);
            for w in toks.windows(2) {
                prop_assert!(w[0] < w[1]);
            }
            for t in &toks {
                prop_assert!(!t.is_empty());
                prop_assert!(t.len() <= MAX_KEYWORD_BYTES);
            }
        }

        #[test]
        fn keyword_tokens_of_part_are_in_whole(
            a in "[a-zA-Z0-9éÉßçÇøØ ,.!-]{0,40}",
            b in "[a-zA-Z0-9éÉßçÇøØ ,.!-]{0,40}",
        ) {
            let whole = keyword_tokens(&format!("{a} {b}"));
            for t in keyword_tokens(&a).iter().chain(keyword_tokens(&b).iter()) {
                prop_assert!(whole.contains(t), "{t:?} missing from {whole:?}");
            }
            // Tokens re-tokenize to themselves.
            let again = keyword_tokens(&whole.join(" "));
            prop_assert_eq!(again, whole);
        }

        #[test]
        fn substring_grams_are_in_text(
            text in ".{0,60}",
            n in 1usize..5,
            i in 0usize..60,
            len in 0usize..60,
        ) {
            let chars: Vec<char> = text.chars().collect();
            let start = i.min(chars.len());
            let end = (start + len).min(chars.len());
            let pattern: String = chars[start..end].iter().collect();
            let grams = ngram_tokens(&text, n);
            for w in grams.windows(2) {
                prop_assert!(w[0] < w[1]);
            }
            let lowered: usize = pattern.chars().flat_map(char::to_lowercase).count();
            if lowered >= n {
                for q in ngram_query_tokens(&pattern, n) {
                    prop_assert_eq!(q.chars().count(), n);
                    prop_assert!(grams.contains(&q), "{q:?} not in {grams:?}");
                }
            } else if lowered > 0 {
                // A short pattern is a prefix of some gram.
                let q = &ngram_query_tokens(&pattern, n)[0];
                prop_assert!(grams.iter().any(|g| g.starts_with(q.as_str())), "{q:?} prefixes none of {grams:?}");
            }
        }
    }
}
