//! PostgreSQL's array text (`{1,2,NULL}`, `{"a b","c\"d"}`), as array
//! fields (`FieldType::Array`, SQL's `bigint[]`) read it
//! ([`parse_literal`]) and write it ([`format_literal`]), so an array
//! reads back as PostgreSQL prints it. The fields themselves (an element
//! type, stored as a `Value::Array` of the elements' stored values) are
//! `super::coerce`'s.

/// Text in an error: quoted, at most 60 characters.
pub(super) fn shown(s: &str) -> String {
    let mut out: String = s.chars().take(60).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    format!("\"{out}\"")
}

/// The elements of PostgreSQL's one-dimensional array text: `{a,b,c}`,
/// each element bare (surrounding whitespace dropped; `NULL` in any case
/// is a null) or double-quoted (backslash escapes any character, inside
/// quotes or out). Errors say what is wrong and where, as PostgreSQL's
/// `malformed array literal` does.
pub fn parse_literal(text: &str) -> Result<Vec<Option<String>>, String> {
    let bad = |why: &str| format!("malformed array literal: {} ({why})", shown(text));
    let t = text.trim();
    if t.starts_with('[') {
        return Err(bad(
            "array bounds such as [1:3]= are not supported; write the elements as {...}",
        ));
    }
    let inner = t
        .strip_prefix('{')
        .and_then(|r| r.strip_suffix('}'))
        .ok_or_else(|| bad("array value must start with \"{\" and end with \"}\""))?;
    let mut out = Vec::new();
    if inner.trim().is_empty() {
        return Ok(out);
    }
    let mut chars = inner.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut item = String::new();
        let mut quoted = false;
        // Trailing whitespace of a bare element is dropped; escaped or
        // quoted text is kept whole.
        let mut kept = 0;
        loop {
            match chars.peek().copied() {
                None => break,
                Some(',') => break,
                Some('{') | Some('}') => {
                    return Err(bad(
                        "nested braces: multi-dimensional arrays are not supported, only one-dimensional ones",
                    ));
                }
                Some('"') => {
                    chars.next();
                    quoted = true;
                    loop {
                        match chars.next() {
                            None => return Err(bad("unterminated quoted element")),
                            Some('"') => break,
                            Some('\\') => match chars.next() {
                                Some(c) => item.push(c),
                                None => return Err(bad("unexpected end after \\")),
                            },
                            Some(c) => item.push(c),
                        }
                    }
                    kept = item.len();
                }
                Some('\\') => {
                    chars.next();
                    let c = chars.next().ok_or_else(|| bad("unexpected end after \\"))?;
                    item.push(c);
                    kept = item.len();
                }
                Some(c) => {
                    chars.next();
                    item.push(c);
                    if !c.is_whitespace() {
                        kept = item.len();
                    }
                }
            }
        }
        item.truncate(kept);
        if item.is_empty() && !quoted {
            return Err(bad("empty element; write NULL or \"\""));
        }
        if !quoted && item.eq_ignore_ascii_case("null") {
            out.push(None);
        } else {
            out.push(Some(item));
        }
        if chars.next().is_none() {
            return Ok(out);
        }
    }
}

/// PostgreSQL's array text of the given element texts (`None` is `NULL`):
/// an element is double-quoted when it is empty, reads as `NULL`, or holds
/// a brace, comma, quote, backslash or whitespace.
pub fn format_literal<'a>(elems: impl IntoIterator<Item = Option<&'a str>>) -> String {
    let mut out = String::from("{");
    for (i, e) in elems.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match e {
            None => out.push_str("NULL"),
            Some(s) => push_element(&mut out, s),
        }
    }
    out.push('}');
    out
}

fn push_element(out: &mut String, s: &str) {
    let quote = s.is_empty()
        || s.eq_ignore_ascii_case("null")
        || s.chars()
            .any(|c| matches!(c, '{' | '}' | ',' | '"' | '\\') || c.is_whitespace());
    if !quote {
        out.push_str(s);
        return;
    }
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> Vec<Option<String>> {
        parse_literal(s).expect(s)
    }

    #[test]
    fn literals_read_as_postgresql_reads_them() {
        assert_eq!(lit("{}"), Vec::<Option<String>>::new());
        assert_eq!(lit(" { } "), Vec::<Option<String>>::new());
        assert_eq!(
            lit("{1, 2 ,3}"),
            vec![Some("1".into()), Some("2".into()), Some("3".into())]
        );
        assert_eq!(
            lit(r#"{"a b",NULL,null,"NULL",c\,d,"x\"y\\z",""}"#),
            vec![
                Some("a b".into()),
                None,
                None,
                Some("NULL".into()),
                Some("c,d".into()),
                Some("x\"y\\z".into()),
                Some(String::new()),
            ]
        );
        assert_eq!(lit("{ two words }"), vec![Some("two words".into())]);
    }

    #[test]
    fn malformed_literals_say_why() {
        for (text, why) in [
            ("1,2", "must start with"),
            ("{1,2", "must start with"),
            ("{{1,2},{3,4}}", "multi-dimensional"),
            ("{1,,2}", "empty element"),
            ("{\"open}", "unterminated"),
            ("[1:2]={1,2}", "bounds"),
        ] {
            let e = parse_literal(text).expect_err(text);
            assert!(e.contains("malformed array literal"), "{e}");
            assert!(e.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn formatting_round_trips() {
        let cases: Vec<Vec<Option<&str>>> = vec![
            vec![],
            vec![Some("1"), None, Some("3")],
            vec![
                Some(""),
                Some("NULL"),
                Some("a b"),
                Some("{x}"),
                Some("q\"\\"),
            ],
        ];
        for c in cases {
            let text = format_literal(c.iter().copied());
            let back = lit(&text);
            let want: Vec<Option<String>> = c.iter().map(|e| e.map(str::to_owned)).collect();
            assert_eq!(back, want, "{text}");
        }
        assert_eq!(format_literal([Some("1"), None]), "{1,NULL}");
        assert_eq!(format_literal([Some("a b")]), "{\"a b\"}");
    }
}
