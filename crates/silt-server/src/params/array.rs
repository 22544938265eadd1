//! Array parameters (`int8[]`, `text[]`, ...: what psycopg sends for a
//! Python list, as in `WHERE id = ANY(%s)`), as SQL `ARRAY[...]` literals
//! whose elements are decoded as scalar parameters are. One dimension;
//! DataFusion turns `x = ANY(ARRAY[...])` into an IN list, which the scan
//! pushes down like one.

use pgwire::api::Type;
use postgres_types::Kind;

use super::{Literal, ParamError, err, literal};

/// The element type of array type `ty`, if it is one.
pub(super) fn element_type(ty: &Type) -> Option<&Type> {
    match ty.kind() {
        Kind::Array(e) => Some(e),
        _ => None,
    }
}

/// An array value of element type `elem`, sent in `binary` or text
/// format, as a SQL literal.
pub(super) fn array_literal(
    index: usize,
    b: &[u8],
    elem: &Type,
    binary: bool,
) -> Result<Literal, ParamError> {
    let items = if binary {
        binary_elements(index, b, elem)?
    } else {
        let text =
            std::str::from_utf8(b).map_err(|_| err(index, "the value is not valid UTF-8"))?;
        text_elements(index, text)?
            .into_iter()
            .map(|e| e.map(String::into_bytes))
            .collect()
    };
    if items.is_empty() {
        return Ok(Literal(format!(
            "CAST(make_array() AS {}[])",
            sql_type(elem)
        )));
    }
    let mut out = String::from("ARRAY[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&literal(index, item.as_deref(), elem, binary)?.0);
    }
    out.push(']');
    Ok(Literal(out))
}

/// The SQL type an empty array of `elem` is cast to.
fn sql_type(elem: &Type) -> &'static str {
    match *elem {
        Type::INT2 | Type::INT4 | Type::INT8 | Type::OID => "BIGINT",
        Type::FLOAT4 | Type::FLOAT8 => "DOUBLE",
        Type::BOOL => "BOOLEAN",
        Type::NUMERIC => "DECIMAL(38,10)",
        Type::DATE => "DATE",
        Type::TIMESTAMP => "TIMESTAMP",
        Type::TIMESTAMPTZ => "TIMESTAMP WITH TIME ZONE",
        Type::BYTEA => "BYTEA",
        _ => "VARCHAR",
    }
}

/// The elements of a binary array: a header (dimensions, a has-null flag,
/// the element type's oid), each dimension's length and lower bound, then
/// each element as a length (-1: null) and its bytes.
fn binary_elements(
    index: usize,
    b: &[u8],
    elem: &Type,
) -> Result<Vec<Option<Vec<u8>>>, ParamError> {
    let mut r = Reader { b, at: 0, index };
    let ndim = r.i32()?;
    let _has_null = r.i32()?;
    let oid = r.u32()?;
    if ndim == 0 {
        return Ok(Vec::new());
    }
    if ndim != 1 {
        return Err(err(
            index,
            format!("a {ndim}-dimensional array; only one-dimensional arrays are supported"),
        ));
    }
    if oid != elem.oid() {
        return Err(err(
            index,
            format!(
                "the array's elements are of type oid {oid}, not {}",
                elem.name()
            ),
        ));
    }
    let len = r.i32()?;
    let _lower = r.i32()?;
    let len = usize::try_from(len).map_err(|_| err(index, "a negative array length"))?;
    // Each element takes at least its 4-byte length: a length the bytes
    // cannot hold is refused before anything is allocated for it.
    if len > b.len() / 4 {
        return Err(err(index, "the array is shorter than its length says"));
    }
    let mut out = Vec::with_capacity(len);
    for _ in 0..len {
        let n = r.i32()?;
        if n < 0 {
            out.push(None);
        } else {
            out.push(Some(r.take(n as usize)?.to_vec()));
        }
    }
    if r.at != b.len() {
        return Err(err(index, "bytes left over after the array's elements"));
    }
    Ok(out)
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    index: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ParamError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| err(self.index, "the binary array ends early"))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn i32(&mut self) -> Result<i32, ParamError> {
        let s = self.take(4)?;
        Ok(i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u32(&mut self) -> Result<u32, ParamError> {
        let s = self.take(4)?;
        Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
}

/// The elements of an array's text form, `{a,"b c",NULL}`: quoted
/// elements with backslash escapes, unquoted ones trimmed, an unquoted
/// `NULL` a null.
fn text_elements(index: usize, text: &str) -> Result<Vec<Option<String>>, ParamError> {
    let bad = |why: &str| err(index, format!("`{text}` is not an array: {why}"));
    let t = text.trim();
    let inner = t
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .ok_or_else(|| bad("it must be written {a,b,...}"))?;
    if inner.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut chars = inner.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let item = match chars.peek() {
            Some('"') => {
                chars.next();
                let mut s = String::new();
                loop {
                    match chars.next() {
                        Some('\\') => {
                            s.push(chars.next().ok_or_else(|| bad("an unfinished escape"))?)
                        }
                        Some('"') => break,
                        Some(c) => s.push(c),
                        None => return Err(bad("an unclosed quote")),
                    }
                }
                while chars.next_if(|c| c.is_whitespace()).is_some() {}
                Some(s)
            }
            Some('{') => {
                return Err(err(
                    index,
                    "a multi-dimensional array; only one-dimensional arrays are supported",
                ));
            }
            _ => {
                let mut s = String::new();
                while let Some(c) = chars.next_if(|&c| c != ',') {
                    match c {
                        '\\' => s.push(chars.next().ok_or_else(|| bad("an unfinished escape"))?),
                        '"' | '{' | '}' => return Err(bad("a stray quote or brace")),
                        c => s.push(c),
                    }
                }
                let s = s.trim_end().to_owned();
                if s.is_empty() {
                    return Err(bad("an empty element"));
                }
                (!s.eq_ignore_ascii_case("null")).then_some(s)
            }
        };
        out.push(item);
        match chars.next() {
            None => return Ok(out),
            Some(',') => {}
            Some(_) => return Err(bad("elements must be separated by commas")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> Result<Vec<Option<String>>, ParamError> {
        text_elements(1, t)
    }

    #[test]
    fn text_arrays() {
        let s = |v: &str| Some(v.to_owned());
        assert_eq!(text("{1,2, 3}").unwrap(), [s("1"), s("2"), s("3")]);
        assert_eq!(text("{}").unwrap(), Vec::<Option<String>>::new());
        assert_eq!(
            text(r#"{"a b","c\"d",NULL,"NULL",e\,f}"#).unwrap(),
            [s("a b"), s("c\"d"), None, s("NULL"), s("e,f")]
        );
        for bad in [
            "1,2",
            "{1,,2}",
            "{\"a}",
            "{{1,2},{3,4}}",
            "{a\"b}",
            "{1 2\"}",
        ] {
            assert!(text(bad).is_err(), "{bad}");
        }
    }

    fn binary(ndim: i32, oid: u32, items: &[Option<&[u8]>]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(ndim.to_be_bytes());
        b.extend(0i32.to_be_bytes());
        b.extend(oid.to_be_bytes());
        if ndim > 0 {
            b.extend((items.len() as i32).to_be_bytes());
            b.extend(1i32.to_be_bytes());
        }
        for it in items {
            match it {
                Some(x) => {
                    b.extend((x.len() as i32).to_be_bytes());
                    b.extend(*x);
                }
                None => b.extend((-1i32).to_be_bytes()),
            }
        }
        b
    }

    #[test]
    fn literals_of_both_formats() {
        let one = 1i64.to_be_bytes();
        let minus = (-7i64).to_be_bytes();
        let b = binary(1, Type::INT8.oid(), &[Some(&one), None, Some(&minus)]);
        assert_eq!(
            array_literal(1, &b, &Type::INT8, true).unwrap().0,
            "ARRAY[1, NULL, (-7)]"
        );
        assert_eq!(
            array_literal(1, b"{x,'y'}", &Type::TEXT, false).unwrap().0,
            "ARRAY['x', '''y''']"
        );
        assert_eq!(
            array_literal(1, b"{}", &Type::INT4, false).unwrap().0,
            "CAST(make_array() AS BIGINT[])"
        );
        let empty = binary(0, Type::INT8.oid(), &[]);
        assert!(
            array_literal(1, &empty, &Type::INT8, true)
                .unwrap()
                .0
                .starts_with("CAST(")
        );
        // Element values are checked as scalars are.
        assert!(array_literal(1, b"{1,x}", &Type::INT8, false).is_err());
        // Malformed binary arrays are refused, not read past their end.
        let mut short = binary(1, Type::INT8.oid(), &[Some(&one)]);
        short.truncate(short.len() - 2);
        assert!(array_literal(1, &short, &Type::INT8, true).is_err());
        let mut huge = binary(1, Type::INT8.oid(), &[]);
        huge[12..16].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(array_literal(1, &huge, &Type::INT8, true).is_err());
        assert!(array_literal(1, &binary(2, Type::INT8.oid(), &[]), &Type::INT8, true).is_err());
        let wrong = binary(1, Type::TEXT.oid(), &[Some(b"a")]);
        assert!(array_literal(1, &wrong, &Type::INT8, true).is_err());
    }
}
