//! Statement templates: a query's shape found from its text, without
//! parsing it.
//!
//! Clients that do not prepare statements send the same query again and
//! again with other literals (`... WHERE id = 5`, `... WHERE id = 7`).
//! The plan cache ([`crate::plan_cache`]) already plans such a shape once,
//! but finding the shape takes a parse of the text and a walk of its
//! syntax tree: for a small query, as much time as running it. A template
//! finds it from the text alone:
//!
//! - **Lexing.** [`lex`] splits the text into its number and string
//!   literals and the rest (the *template*: the text with each literal
//!   replaced by a marker of its kind). Anything the lexer is not sure
//!   to read as the SQL parser does (comments, escape strings, dollar
//!   quotes, backslashes, non-ASCII outside literals, several statements)
//!   gives no template.
//! - **Learning.** The first time a template is seen with a cached shape,
//!   [`Template::learn`] finds which literal became which parameter: it
//!   normalizes a *probe*, the text with every literal replaced by a
//!   distinct sentinel of the same kind, and reads the sentinels back
//!   from the probe's parameters. Literals that did not become parameters
//!   are fixed: a later text must have the very same ones. The template is
//!   kept only if it reproduces the shape's parameters for the text it
//!   was learned from.
//! - **Use.** For a later text with the same template and the same fixed
//!   literals, [`Template::values`] reads the parameters straight from the
//!   literals, typed as the planner types them; an integer that no longer
//!   fits its type sends the statement down the parsing path.
//!
//! Which literals become parameters depends only on the statement's
//! structure, which the template fixes: the parser sees the same tokens in
//! the same order, with other values in the parameter literals.

use datafusion::common::ScalarValue;

/// A literal's kind, as the lexer reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Digits only.
    Int,
    /// Digits, a point, digits.
    Float,
    /// Either with an exponent (`1e5`, `2.5E-3`).
    Exp,
    /// A single-quoted string.
    Str,
}

/// One literal of a statement's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Literal<'a> {
    pub kind: Kind,
    /// The literal's text (a string's without its quotes, `''` not yet
    /// unescaped; a number's with its sign, if it has one).
    pub text: &'a str,
}

/// A statement's text split into its template and literals.
#[derive(Debug)]
pub struct Lexed<'a> {
    pub template: String,
    pub literals: Vec<Literal<'a>>,
}

/// The most literals a template holds (a longer statement is parsed).
pub const MAX_LITERALS: usize = 256;

/// The longest text given a template (a longer one is parsed): templates
/// are kept, and a cache of them must stay small.
pub const MAX_TEXT: usize = 8 * 1024;

const MARK: char = '\u{1}';

fn ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
}

/// Split `sql` into its template and literals; `None` when the text has
/// anything the lexer might read otherwise than the parser (see the
/// module doc).
pub fn lex(sql: &str) -> Option<Lexed<'_>> {
    if sql.len() > MAX_TEXT {
        return None;
    }
    let b = sql.as_bytes();
    let mut template = String::with_capacity(sql.len());
    let mut literals = Vec::new();
    let mut i = 0;
    // The last byte that was not whitespace, for a literal's sign.
    let mut last_sig = 0u8;
    while i < b.len() {
        let c = b[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => {
                template.push(c as char);
                i += 1;
                continue;
            }
            b'\'' => {
                // A prefix (E'..', N'..', X'..', U&'..') changes what the
                // string means.
                if i > 0 && (ident_byte(b[i - 1]) || b[i - 1] == b'&') {
                    return None;
                }
                // Two strings in a row may be joined by the parser.
                if last_sig == b'\'' {
                    return None;
                }
                let start = i + 1;
                let mut j = start;
                loop {
                    match b.get(j)? {
                        b'\'' if b.get(j + 1) == Some(&b'\'') => j += 2,
                        b'\'' => break,
                        b'\\' => return None,
                        _ => j += 1,
                    }
                }
                literals.push(Literal {
                    kind: Kind::Str,
                    text: &sql[start..j],
                });
                template.push(MARK);
                template.push('S');
                i = j + 1;
                last_sig = b'\'';
                continue;
            }
            b'"' => {
                let mut j = i + 1;
                loop {
                    match b.get(j)? {
                        b'"' if b.get(j + 1) == Some(&b'"') => j += 2,
                        b'"' => break,
                        _ => j += 1,
                    }
                }
                template.push_str(&sql[i..=j]);
                i = j + 1;
                last_sig = b'"';
                continue;
            }
            // (A number after a point, `.5` or `t.5`, is refused below.)
            // A sign right before a number where no operand ends (after
            // an operator, `(` or `,`) is the literal's: `x > -5` and
            // `x > 5` have one template.
            b'0'..=b'9' | b'-'
                if c != b'-'
                    || (b.get(i + 1).is_some_and(u8::is_ascii_digit)
                        && matches!(
                            last_sig,
                            0 | b'(' | b',' | b'=' | b'<' | b'>' | b'+' | b'-' | b'*' | b'/' | b'%'
                        )) =>
            {
                let digits = if c == b'-' { i + 1 } else { i };
                let (end, kind) = number(b, digits)?;
                if b.get(end).is_some_and(|&n| ident_byte(n) || n == b'.') {
                    return None;
                }
                literals.push(Literal {
                    kind,
                    text: &sql[i..end],
                });
                template.push(MARK);
                template.push(match kind {
                    Kind::Int => 'I',
                    Kind::Float => 'F',
                    _ => 'E',
                });
                i = end;
                last_sig = b'0';
                continue;
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                let mut j = i + 1;
                while j < b.len() && ident_byte(b[j]) {
                    j += 1;
                }
                template.push_str(&sql[i..j]);
                i = j;
                last_sig = b'a';
                continue;
            }
            // Comments, statement separators, placeholders and dollar
            // quotes, escapes.
            b'-' if b.get(i + 1) == Some(&b'-') => return None,
            b'/' if b.get(i + 1) == Some(&b'*') => return None,
            b';' | b'$' | b'\\' | b'`' => return None,
            b'.' if b.get(i + 1).is_some_and(u8::is_ascii_digit) => return None,
            0x21..=0x7e => {
                template.push(c as char);
                i += 1;
                last_sig = c;
                continue;
            }
            _ => return None,
        }
    }
    if literals.len() > MAX_LITERALS {
        return None;
    }
    Some(Lexed { template, literals })
}

/// The end of the number starting at `i`, and its kind: `d+`, `d+.d+`,
/// either with an exponent; anything else (`5.`) is refused.
fn number(b: &[u8], i: usize) -> Option<(usize, Kind)> {
    let digits = |mut j: usize| {
        while b.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        j
    };
    let mut j = digits(i);
    let mut kind = Kind::Int;
    if b.get(j) == Some(&b'.') {
        let k = digits(j + 1);
        if k == j + 1 {
            return None;
        }
        kind = Kind::Float;
        j = k;
    }
    if matches!(b.get(j), Some(b'e' | b'E')) {
        let mut k = j + 1;
        if matches!(b.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        if !b.get(k).is_some_and(u8::is_ascii_digit) {
            return None;
        }
        kind = Kind::Exp;
        j = digits(k);
    }
    Some((j, kind))
}

/// What one literal of a template is.
#[derive(Debug, Clone, PartialEq)]
enum Slot {
    /// Parameter `index` (from 0), negated when the shape took the sign
    /// too.
    Param { index: usize, negate: bool },
    /// Not a parameter: a text with this template must have this literal.
    Fixed(String),
}

/// A template learned for one shape (see the module doc).
#[derive(Debug, Clone)]
pub struct Template {
    /// The shape's key in the plan cache.
    pub key: String,
    slots: Vec<Slot>,
    params: usize,
}

/// The text of `lexed` with its literals replaced by `f(index, literal)`.
fn rebuild(lexed: &Lexed<'_>, f: impl Fn(usize, &Literal<'_>) -> String) -> String {
    let mut out = String::with_capacity(lexed.template.len() + 16 * lexed.literals.len());
    let mut n = 0;
    let mut chars = lexed.template.chars();
    while let Some(c) = chars.next() {
        if c == MARK {
            chars.next();
            if let Some(l) = lexed.literals.get(n) {
                out.push_str(&f(n, l));
            }
            n += 1;
        } else {
            out.push(c);
        }
    }
    out
}

/// A probe literal's value: sentinel integers from this base, floats
/// from it plus a half (exact in an `f64`).
const SENTINEL: i64 = 1_000_000_000;
const SENTINEL_STR: &str = "silt-template-";

/// The *probe* of a lexed text: the text with every literal replaced by a
/// distinct sentinel of its kind (literal `i`: the integer `SENTINEL + i`,
/// the same plus a half for a float, a string with `i` after a prefix).
pub fn probe(lexed: &Lexed<'_>) -> String {
    rebuild(lexed, |i, l| match l.kind {
        Kind::Int => (SENTINEL + i as i64).to_string(),
        Kind::Float => format!("{}.5", SENTINEL + i as i64),
        Kind::Exp => format!("{}.5e0", SENTINEL + i as i64),
        Kind::Str => format!("'{SENTINEL_STR}{i}'"),
    })
}

/// Which literal of a [`probe`] a number's text (as the parser keeps it)
/// stands for, and its kind; `None` if it is no sentinel.
pub fn number_sentinel(text: &str) -> Option<(usize, Kind)> {
    let (int, kind) = if let Some(t) = text.strip_suffix(".5e0") {
        (t, Kind::Exp)
    } else if let Some(t) = text.strip_suffix(".5") {
        (t, Kind::Float)
    } else {
        (text, Kind::Int)
    };
    let n: i64 = int.parse().ok()?;
    Some((usize::try_from(n.checked_sub(SENTINEL)?).ok()?, kind))
}

/// Which literal of a [`probe`] a string stands for; `None` if it is no
/// sentinel.
pub fn string_sentinel(s: &str) -> Option<usize> {
    s.strip_prefix(SENTINEL_STR)?.parse().ok()
}

/// A literal's value as the SQL planner types it on its own (an integer
/// as an `Int64`, a float as a `Float64`, a string as `Utf8`); `None`
/// when the planner would type it otherwise (an integer past `i64`).
pub fn typed(lit: &Literal<'_>) -> Option<ScalarValue> {
    Some(match lit.kind {
        Kind::Int => ScalarValue::Int64(Some(lit.text.parse().ok()?)),
        Kind::Float | Kind::Exp => ScalarValue::Float64(Some(lit.text.parse().ok()?)),
        Kind::Str => ScalarValue::Utf8(Some(lit.text.replace("''", "'"))),
    })
}

impl Template {
    /// Learn the template of a text lexed as `lexed`, whose shape has key
    /// `key` and parameters `values`; `normalize` gives the shape's
    /// parameters of another text (`None` if it has no shape). `None`
    /// when the literals do not map one to one onto the parameters.
    pub fn learn(
        lexed: &Lexed<'_>,
        key: &str,
        values: &[ScalarValue],
        normalize: impl Fn(&str) -> Option<Vec<ScalarValue>>,
    ) -> Option<Template> {
        let probed = normalize(&probe(lexed))?;
        if probed.len() != values.len() {
            return None;
        }
        let mut slots: Vec<Slot> = lexed
            .literals
            .iter()
            .map(|l| Slot::Fixed(l.text.to_owned()))
            .collect();
        for (index, v) in probed.iter().enumerate() {
            let (lit, negate) = match v {
                ScalarValue::Int64(Some(n)) => {
                    let (m, neg) = if *n < 0 { (-*n, true) } else { (*n, false) };
                    (usize::try_from(m.checked_sub(SENTINEL)?).ok()?, neg)
                }
                ScalarValue::Float64(Some(f)) => {
                    let m = f.abs() - 0.5;
                    if m.fract() != 0.0 || m < SENTINEL as f64 {
                        return None;
                    }
                    ((m - SENTINEL as f64) as usize, *f < 0.0)
                }
                ScalarValue::Utf8(Some(s)) => (s.strip_prefix(SENTINEL_STR)?.parse().ok()?, false),
                _ => return None,
            };
            let slot = slots.get_mut(lit)?;
            if !matches!(slot, Slot::Fixed(_)) {
                return None;
            }
            *slot = Slot::Param { index, negate };
        }
        let t = Template {
            key: key.to_owned(),
            slots,
            params: values.len(),
        };
        // It must give back the very parameters of the text it came from.
        (t.values(lexed)?.as_slice() == values).then_some(t)
    }

    /// The shape's parameters for a text with this template; `None` when
    /// a fixed literal differs or a value would be typed otherwise than
    /// the shape's (the text is then parsed).
    pub fn values(&self, lexed: &Lexed<'_>) -> Option<Vec<ScalarValue>> {
        if lexed.literals.len() != self.slots.len() {
            return None;
        }
        let mut values = vec![ScalarValue::Null; self.params];
        for (slot, lit) in self.slots.iter().zip(&lexed.literals) {
            match slot {
                Slot::Fixed(t) => {
                    if t != lit.text {
                        return None;
                    }
                }
                Slot::Param { index, negate } => {
                    let v = match lit.kind {
                        Kind::Int => {
                            // As the planner: an i64 if it fits (with its
                            // sign), else another type: parse the text.
                            let n: i64 = if *negate {
                                let mut s = String::with_capacity(lit.text.len() + 1);
                                s.push('-');
                                s.push_str(lit.text);
                                s.parse().ok()?
                            } else {
                                lit.text.parse().ok()?
                            };
                            ScalarValue::Int64(Some(n))
                        }
                        Kind::Float | Kind::Exp => {
                            let f: f64 = lit.text.parse().ok()?;
                            ScalarValue::Float64(Some(if *negate { -f } else { f }))
                        }
                        Kind::Str => ScalarValue::Utf8(Some(lit.text.replace("''", "'"))),
                    };
                    *values.get_mut(*index)? = v;
                }
            }
        }
        Some(values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexing_separates_literals() {
        let l = lex("SELECT id FROM t WHERE id = 5 AND name = 'it''s' AND x < -1.5e3").unwrap();
        assert_eq!(
            l.template,
            "SELECT id FROM t WHERE id = \u{1}I AND name = \u{1}S AND x < \u{1}E"
        );
        let texts: Vec<_> = l.literals.iter().map(|l| (l.kind, l.text)).collect();
        assert_eq!(
            texts,
            vec![
                (Kind::Int, "5"),
                (Kind::Str, "it''s"),
                (Kind::Exp, "-1.5e3")
            ]
        );
        // A sign where an operand starts is the literal's; a minus after
        // an operand is the template's.
        let l = lex("SELECT f((-2.0), -3) FROM t WHERE a - 5 > b-1").unwrap();
        assert_eq!(
            l.template,
            "SELECT f((\u{1}F), \u{1}I) FROM t WHERE a - \u{1}I > b-\u{1}I"
        );
        let texts: Vec<_> = l.literals.iter().map(|l| l.text).collect();
        assert_eq!(texts, vec!["-2.0", "-3", "5", "1"]);
        // Digits inside names are not literals; quoted names are kept.
        let l = lex("SELECT c1, \"9x\" FROM t2 WHERE c1 = 0.5").unwrap();
        assert_eq!(l.template, "SELECT c1, \"9x\" FROM t2 WHERE c1 = \u{1}F");
    }

    #[test]
    fn lexing_refuses_what_it_might_misread() {
        for sql in [
            "SELECT 1; SELECT 2",
            "SELECT 1 -- comment",
            "SELECT /* c */ 1",
            "SELECT E'a\\n'",
            "SELECT 'a\\'",
            "SELECT 'a' 'b'",
            "SELECT $1",
            "SELECT $$x$$",
            "SELECT 1abc",
            "SELECT 1e",
            "SELECT 'é' FROM t WHERE nom = 'x' AND é = 1",
            "SELECT 'unterminated",
            "SELECT x FROM t WHERE a = 1.2.3",
            "SELECT x FROM t WHERE a = .5",
            "SELECT x FROM t WHERE a = 5.",
            "SELECT t.5 FROM t",
        ] {
            assert!(lex(sql).is_none(), "{sql}");
        }
        let long = format!("SELECT x FROM t WHERE a = '{}'", "x".repeat(MAX_TEXT));
        assert!(lex(&long).is_none());
        // Non-ASCII inside a string is fine.
        assert!(lex("SELECT 'é'").is_some());
    }

    /// A toy "shape": every literal between `WHERE` and `LIMIT` is a
    /// parameter, with its sign; the others are not.
    fn toy(sql: &str) -> Option<Vec<ScalarValue>> {
        let l = lex(sql)?;
        let at = sql.find("WHERE")?;
        let end = sql.find("LIMIT").unwrap_or(sql.len());
        let mut out = Vec::new();
        for lit in &l.literals {
            let offset = lit.text.as_ptr() as usize - sql.as_ptr() as usize;
            if offset < at || offset > end {
                continue;
            }
            let minus = sql[..offset].trim_end().ends_with('-');
            out.push(match lit.kind {
                Kind::Int => {
                    let v: i64 = lit.text.parse().ok()?;
                    ScalarValue::Int64(Some(if minus { -v } else { v }))
                }
                Kind::Float | Kind::Exp => {
                    let v: f64 = lit.text.parse().ok()?;
                    ScalarValue::Float64(Some(if minus { -v } else { v }))
                }
                Kind::Str => ScalarValue::Utf8(Some(lit.text.replace("''", "'"))),
            });
        }
        Some(out)
    }

    #[test]
    fn a_learned_template_reads_new_values_and_refuses_other_fixed_literals() {
        let sql = "SELECT 5 AS five FROM t WHERE id = 5 AND x < -2.5 AND s = 'a''b' LIMIT 3";
        let l = lex(sql).unwrap();
        let values = toy(sql).unwrap();
        let t = Template::learn(&l, "key", &values, toy).unwrap();
        let other = "SELECT 5 AS five FROM t WHERE id = 9 AND x < -7.25 AND s = 'zz' LIMIT 3";
        assert_eq!(
            t.values(&lex(other).unwrap()).unwrap(),
            vec![
                ScalarValue::Int64(Some(9)),
                ScalarValue::Float64(Some(-7.25)),
                ScalarValue::Utf8(Some("zz".to_owned())),
            ]
        );
        // The select list's 5 and the limit are fixed.
        for other in [
            "SELECT 6 AS five FROM t WHERE id = 9 AND x < -7.25 AND s = 'zz' LIMIT 3",
            "SELECT 5 AS five FROM t WHERE id = 9 AND x < -7.25 AND s = 'zz' LIMIT 4",
        ] {
            assert!(t.values(&lex(other).unwrap()).is_none(), "{other}");
        }
        // An integer that no longer fits is parsed.
        let big = "SELECT 5 AS five FROM t WHERE id = 99999999999999999999 AND x < -7.25 AND s = 'zz' LIMIT 3";
        assert!(t.values(&lex(big).unwrap()).is_none());
    }

    #[test]
    fn a_template_whose_literals_do_not_map_is_not_learned() {
        let sql = "SELECT a FROM t WHERE id = 5";
        let l = lex(sql).unwrap();
        // A "shape" that reports a parameter no literal gave.
        let wrong = |_: &str| Some(vec![ScalarValue::Int64(Some(42))]);
        assert!(Template::learn(&l, "k", &[ScalarValue::Int64(Some(5))], wrong).is_none());
        // Or other values than the text's own.
        let shifted = |s: &str| toy(s);
        assert!(Template::learn(&l, "k", &[ScalarValue::Int64(Some(6))], shifted).is_none());
    }
}
