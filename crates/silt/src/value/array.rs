//! Array fields (SQL's `bigint[]`, `text[]`, ...): one-dimensional lists
//! of one scalar element type, stored as a [`Value::Array`] of the
//! element's stored values (dates as days, decimals as canonical text...).
//! Nulls may be elements; arrays of arrays are refused.
//!
//! PostgreSQL's array text (`{1,2,NULL}`, `{"a b","c\"d"}`) is read by
//! [`parse_literal`] and written by [`format_literal`], so an array reads
//! back as PostgreSQL prints it.

use std::fmt;

use super::Value;
use super::coerce::{FieldType, coerce_reason};

/// The element type of an array field: the scalar types an array can hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElementType {
    Bool,
    Int,
    Double,
    String,
    Date,
    Timestamp,
    TimestampTz,
    Decimal { precision: u8, scale: u8 },
}

/// The element types, as errors list them.
pub const ELEMENT_TYPES: &str =
    "bool, int, double, string, date, timestamp, timestamptz and decimal(p,s)";

impl ElementType {
    /// The element type of arrays of `t`, if arrays of it are supported.
    pub fn of(t: FieldType) -> Option<ElementType> {
        Some(match t {
            FieldType::Bool => ElementType::Bool,
            FieldType::Int => ElementType::Int,
            FieldType::Double => ElementType::Double,
            FieldType::String => ElementType::String,
            FieldType::Date => ElementType::Date,
            FieldType::Timestamp => ElementType::Timestamp,
            FieldType::TimestampTz => ElementType::TimestampTz,
            FieldType::Decimal { precision, scale } => ElementType::Decimal { precision, scale },
            _ => return None,
        })
    }

    /// The field type of one element.
    pub fn field_type(self) -> FieldType {
        match self {
            ElementType::Bool => FieldType::Bool,
            ElementType::Int => FieldType::Int,
            ElementType::Double => FieldType::Double,
            ElementType::String => FieldType::String,
            ElementType::Date => FieldType::Date,
            ElementType::Timestamp => FieldType::Timestamp,
            ElementType::TimestampTz => FieldType::TimestampTz,
            ElementType::Decimal { precision, scale } => FieldType::Decimal { precision, scale },
        }
    }
}

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.field_type().fmt(f)
    }
}

/// Convert `v` to an array of `elem`: an array (each element converted as
/// a field of the element type would be), PostgreSQL's array text
/// (`{1,2,NULL}`), or JSON array text (`[1, 2, null]`). The error says
/// which element failed and why.
pub(super) fn coerce_array(elem: ElementType, v: Value) -> Result<Value, String> {
    let items = match v {
        Value::Array(items) => items,
        Value::String(s) => return array_of_text(elem, &s),
        other => {
            return Err(format!(
                "expected an array of {elem} (a list, or text such as '{{1,2,3}}'), found {}",
                short(&other)
            ));
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        if matches!(item, Value::Array(_)) {
            return Err(format!(
                "element {} is an array; arrays have one dimension",
                i + 1
            ));
        }
        out.push(
            coerce_reason(elem.field_type(), item)
                .map_err(|e| format!("element {}: {e}", i + 1))?,
        );
    }
    Ok(Value::Array(out))
}

fn array_of_text(elem: ElementType, s: &str) -> Result<Value, String> {
    let t = s.trim();
    if t.starts_with('[') {
        let j: serde_json::Value = serde_json::from_str(t)
            .map_err(|e| format!("array text {} is not valid JSON: {e}", shown(t)))?;
        return coerce_array(elem, super::from_json(&j));
    }
    let parts = parse_literal(t)?;
    let mut out = Vec::with_capacity(parts.len());
    for (i, p) in parts.into_iter().enumerate() {
        let v = match p {
            None => Value::Null,
            Some(text) => {
                element_of_text(elem, &text).map_err(|e| format!("element {}: {e}", i + 1))?
            }
        };
        out.push(v);
    }
    Ok(Value::Array(out))
}

/// One element's text as a value of the element type.
pub fn element_of_text(elem: ElementType, text: &str) -> Result<Value, String> {
    let t = text.trim();
    let v = match elem {
        ElementType::String => return Ok(Value::String(text.to_owned())),
        ElementType::Bool => match t.to_ascii_lowercase().as_str() {
            "t" | "true" | "y" | "yes" | "on" | "1" => Value::Bool(true),
            "f" | "false" | "n" | "no" | "off" | "0" => Value::Bool(false),
            _ => {
                return Err(format!(
                    "invalid input syntax for type boolean: {}",
                    shown(t)
                ));
            }
        },
        ElementType::Int => Value::Int(
            t.parse::<i64>()
                .map_err(|_| format!("invalid input syntax for type bigint: {}", shown(t)))?,
        ),
        ElementType::Double => Value::Double(t.parse::<f64>().map_err(|_| {
            format!(
                "invalid input syntax for type double precision: {}",
                shown(t)
            )
        })?),
        _ => Value::String(t.to_owned()),
    };
    coerce_reason(elem.field_type(), v)
}

fn short(v: &Value) -> String {
    match v {
        Value::Bool(b) => format!("bool {b}"),
        Value::Int(i) => format!("int {i}"),
        Value::Double(d) => format!("double {d:?}"),
        Value::Binary(b) => format!("binary of {} bytes", b.len()),
        Value::Object(_) => "an object".to_owned(),
        Value::Geometry(g) => g.type_name().to_owned(),
        Value::Null | Value::String(_) | Value::Array(_) => "another value".to_owned(),
    }
}

/// Text in an error: quoted, at most 60 characters.
fn shown(s: &str) -> String {
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
                        "nested braces: multi-dimensional arrays are not supported",
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

    #[test]
    fn arrays_coerce_element_by_element() {
        let int = ElementType::Int;
        assert_eq!(
            coerce_array(int, Value::String("{1, NULL, 3}".into())),
            Ok(Value::Array(vec![
                Value::Int(1),
                Value::Null,
                Value::Int(3)
            ]))
        );
        assert_eq!(
            coerce_array(int, Value::String("[1, 2.0]".into())),
            Ok(Value::Array(vec![Value::Int(1), Value::Int(2)]))
        );
        let e = coerce_array(int, Value::String("{1,x}".into())).expect_err("x");
        assert!(e.contains("element 2") && e.contains("bigint"), "{e}");
        let e = coerce_array(int, Value::Array(vec![Value::Array(vec![])])).expect_err("nested");
        assert!(e.contains("one dimension"), "{e}");
        let e = coerce_array(int, Value::Int(3)).expect_err("scalar");
        assert!(e.contains("expected an array of int"), "{e}");
        assert_eq!(
            coerce_array(ElementType::Date, Value::String("{2024-02-29}".into())),
            Ok(Value::Array(vec![Value::Int(19_782)]))
        );
        let d = ElementType::Decimal {
            precision: 5,
            scale: 2,
        };
        assert_eq!(
            coerce_array(d, Value::Array(vec![Value::Int(3)])),
            Ok(Value::Array(vec![Value::String("3.00".into())]))
        );
    }

    #[test]
    fn array_types_parse_and_print() {
        for (text, shown) in [
            ("int[]", "int[]"),
            ("BIGINT[]", "int[]"),
            ("decimal(10,2)[]", "decimal(10,2)[]"),
            ("timestamptz[]", "timestamptz[]"),
        ] {
            let t = FieldType::parse(text).expect(text);
            assert!(matches!(t, FieldType::Array(_)), "{text}");
            assert_eq!(t.to_string(), shown);
            assert_eq!(FieldType::parse(shown).expect(shown), t);
            assert!(!t.is_key_type());
        }
        for bad in ["geometry[]", "json[]", "int[][]", "interval[]"] {
            let e = FieldType::parse(bad).expect_err(bad).to_string();
            assert!(
                e.contains("not supported") || e.contains("unknown"),
                "{bad}: {e}"
            );
        }
        assert!(FieldType::Array(ElementType::Int).matches(&Value::Array(vec![Value::Int(1)])));
        assert!(
            !FieldType::Array(ElementType::Int)
                .matches(&Value::Array(vec![Value::Null, Value::Double(1.0)]))
        );
    }
}
