//! Array parameters (`int8[]`, `text[]`, ...: what psycopg sends for a
//! Python list, as in `WHERE id = ANY(%s)`), as SQL `ARRAY[...]` literals
//! whose elements are decoded as scalar parameters are. One dimension;
//! DataFusion turns `x = ANY(ARRAY[...])` into an IN list, which the scan
//! pushes down like one.

use pgwire::api::Type;
use postgres_types::Kind;

use silt_sql::pg_forms;

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

/// The elements of a binary array ([`pg_forms::array_recv`]), whose
/// element type must be `elem`'s.
fn binary_elements(
    index: usize,
    b: &[u8],
    elem: &Type,
) -> Result<Vec<Option<Vec<u8>>>, ParamError> {
    let items = pg_forms::array_recv(b).map_err(|why| err(index, why))?;
    let oid = b
        .get(8..12)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_be_bytes);
    if let Some(oid) = oid.filter(|&o| !items.is_empty() && o != elem.oid()) {
        return Err(err(
            index,
            format!(
                "the array's elements are of type oid {oid}, not {}",
                elem.name()
            ),
        ));
    }
    Ok(items.into_iter().map(|e| e.map(<[u8]>::to_vec)).collect())
}

/// The elements of an array's text form, `{a,"b c",NULL}`
/// ([`silt::value::array::parse_literal`]).
fn text_elements(index: usize, text: &str) -> Result<Vec<Option<String>>, ParamError> {
    silt::value::array::parse_literal(text).map_err(|why| err(index, why))
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
