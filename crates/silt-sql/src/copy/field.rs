//! One field of `COPY` data as a value of its column: PostgreSQL's text
//! input of each type (`bigint`, `double precision`, `boolean`, `bytea`,
//! `text`, `date`, `timestamp[tz]`, `numeric`; JSON text for `any` and
//! `jsonb`; WKT for the spatial types, which the dataset checks; arrays
//! as `{...}` of their elements' text), or its binary (send) form.

use silt::{FieldType, Value};

use crate::coerce::{column_type_name, decimal_error, parse_bool, shown};
use crate::convert::{ColumnInfo, any_value};
use crate::error::SqlError;
use crate::pg_forms;

fn invalid(col: &ColumnInfo, text: &str) -> SqlError {
    SqlError::InvalidText {
        column: col.name.clone(),
        column_type: column_type_name(col),
        text: shown(text),
    }
}

fn utf8<'a>(col: &ColumnInfo, b: &'a [u8]) -> Result<&'a str, SqlError> {
    std::str::from_utf8(b).map_err(|e| {
        SqlError::BadCopyData(format!(
            "invalid byte sequence for encoding \"UTF8\" in column \"{}\" (byte {})",
            col.name,
            e.valid_up_to() + 1
        ))
    })
}

/// A field in text form (the text and CSV formats).
pub fn from_text(col: &ColumnInfo, b: &[u8]) -> Result<Value, SqlError> {
    let s = utf8(col, b)?;
    Ok(match col.ty {
        FieldType::Int => {
            let t = s.trim();
            match t.parse::<i64>() {
                Ok(i) => Value::Int(i),
                Err(_)
                    if !t.is_empty()
                        && t.trim_start_matches(['+', '-'])
                            .bytes()
                            .all(|c| c.is_ascii_digit()) =>
                {
                    return Err(SqlError::OutOfRange {
                        column: col.name.clone(),
                        column_type: column_type_name(col),
                        value: shown(t),
                    });
                }
                Err(_) => return Err(invalid(col, s)),
            }
        }
        FieldType::Double => {
            let t = s.trim();
            // Rust also reads "inf"; PostgreSQL's spellings are a subset.
            match t.parse::<f64>() {
                Ok(d) if !t.is_empty() => Value::Double(d),
                _ => return Err(invalid(col, s)),
            }
        }
        FieldType::Bool => Value::Bool(parse_bool(s.trim()).ok_or_else(|| invalid(col, s))?),
        FieldType::Binary => Value::Binary(bytea_text(s).ok_or_else(|| invalid(col, s))?),
        FieldType::Any => any_value(s),
        FieldType::Json => json_text(col, s)?,
        FieldType::Date => {
            Value::Int(silt::value::temporal::parse_date(s).map_err(|_| invalid(col, s))?)
        }
        FieldType::Timestamp | FieldType::TimestampTz => Value::Int(
            silt::value::temporal::parse_timestamp(s, col.ty == FieldType::TimestampTz)
                .map_err(|_| invalid(col, s))?,
        ),
        FieldType::Decimal { precision, scale } => decimal_text(col, s, precision, scale)?,
        FieldType::Interval => Value::String(
            silt::value::interval::parse(s)
                .map_err(|_| invalid(col, s))?
                .to_iso(),
        ),
        FieldType::Array(_) => {
            let elem = element(col)?;
            let parts = silt::value::array::parse_literal(s).map_err(|reason| {
                SqlError::MalformedArray {
                    column: col.name.clone(),
                    reason,
                }
            })?;
            let mut items = Vec::with_capacity(parts.len());
            for p in parts {
                items.push(match p {
                    Some(t) => from_text(&elem, t.as_bytes())?,
                    None => Value::Null,
                });
            }
            Value::Array(items)
        }
        FieldType::String
        | FieldType::Point
        | FieldType::Rectangle
        | FieldType::Polygon
        | FieldType::Geometry => Value::String(s.to_owned()),
    })
}

/// A field in binary form: the big-endian integers and floats of
/// PostgreSQL's send functions (any width a client may send), one byte
/// for a boolean, raw bytes for `bytea`, UTF-8 for text.
pub fn from_binary(col: &ColumnInfo, b: &[u8]) -> Result<Value, SqlError> {
    let wrong = |what: &str| {
        SqlError::BadCopyData(format!(
            "a binary {what} of {} bytes for column \"{}\" ({})",
            b.len(),
            col.name,
            column_type_name(col)
        ))
    };
    Ok(match col.ty {
        FieldType::Int => Value::Int(match b.len() {
            8 => i64::from_be_bytes(b.try_into().map_err(|_| wrong("integer"))?),
            4 => i64::from(i32::from_be_bytes(
                b.try_into().map_err(|_| wrong("integer"))?,
            )),
            2 => i64::from(i16::from_be_bytes([b[0], b[1]])),
            _ => return Err(wrong("integer")),
        }),
        FieldType::Double => Value::Double(match b.len() {
            8 => f64::from_be_bytes(b.try_into().map_err(|_| wrong("float"))?),
            4 => f64::from(f32::from_be_bytes(
                b.try_into().map_err(|_| wrong("float"))?,
            )),
            _ => return Err(wrong("float")),
        }),
        FieldType::Bool => match b {
            [0] => Value::Bool(false),
            [1] => Value::Bool(true),
            _ => return Err(wrong("boolean")),
        },
        FieldType::Binary => Value::Binary(b.to_vec()),
        // jsonb's binary form is a version byte (1) and the text.
        FieldType::Any => any_value(utf8(col, b.strip_prefix(&[1u8]).unwrap_or(b))?),
        FieldType::Json => json_text(col, utf8(col, b.strip_prefix(&[1u8]).unwrap_or(b))?)?,
        FieldType::Date => Value::Int(pg_forms::date_recv(b).ok_or_else(|| wrong("date"))?),
        FieldType::Timestamp | FieldType::TimestampTz => {
            Value::Int(pg_forms::timestamp_recv(b).ok_or_else(|| wrong("timestamp"))?)
        }
        FieldType::Decimal { precision, scale } => {
            let text = pg_forms::numeric_recv(b).ok_or_else(|| wrong("numeric"))?;
            decimal_text(col, &text, precision, scale)?
        }
        FieldType::Interval => Value::String(
            pg_forms::interval_recv(b)
                .ok_or_else(|| wrong("interval"))?
                .to_iso(),
        ),
        FieldType::Array(_) => {
            let elem = element(col)?;
            let parts = pg_forms::array_recv(b).map_err(|why| {
                SqlError::BadCopyData(format!(
                    "{why} (column \"{}\", {})",
                    col.name,
                    column_type_name(col)
                ))
            })?;
            let mut items = Vec::with_capacity(parts.len());
            for p in parts {
                items.push(match p {
                    Some(e) => from_binary(&elem, e)?,
                    None => Value::Null,
                });
            }
            Value::Array(items)
        }
        FieldType::String
        | FieldType::Point
        | FieldType::Rectangle
        | FieldType::Polygon
        | FieldType::Geometry => Value::String(utf8(col, b)?.to_owned()),
    })
}

/// The element column of an array column.
fn element(col: &ColumnInfo) -> Result<ColumnInfo, SqlError> {
    col.element()
        .ok_or_else(|| SqlError::Invalid(format!("column \"{}\" is not an array", col.name)))
}

/// JSON text as the document it holds.
fn json_text(col: &ColumnInfo, s: &str) -> Result<Value, SqlError> {
    let j: serde_json::Value = serde_json::from_str(s).map_err(|_| invalid(col, s))?;
    Ok(silt::value::from_json(&j))
}

/// Decimal text rounded to the column's scale; too many integer digits is
/// out of range.
fn decimal_text(col: &ColumnInfo, s: &str, precision: u8, scale: u8) -> Result<Value, SqlError> {
    silt::value::decimal::normalize(s, precision, scale)
        .map(Value::String)
        .map_err(|e| decimal_error(col, s, &e))
}

/// PostgreSQL's `bytea` input: `\x` and hex digits (whitespace between
/// pairs allowed), or the escape form (`\\` and octal `\ooo`).
pub fn bytea_text(s: &str) -> Option<Vec<u8>> {
    if let Some(hex) = s.strip_prefix("\\x") {
        let digits: Vec<u32> = hex
            .chars()
            .filter(|c| !c.is_ascii_whitespace())
            .map(|c| c.to_digit(16))
            .collect::<Option<_>>()?;
        if !digits.len().is_multiple_of(2) {
            return None;
        }
        return Some(digits.chunks(2).map(|p| (p[0] * 16 + p[1]) as u8).collect());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
        } else if b.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
        } else {
            let oct = b.get(i + 1..i + 4)?;
            if !oct.iter().all(|c| (b'0'..=b'7').contains(c)) || oct[0] > b'3' {
                return None;
            }
            out.push(oct.iter().fold(0u8, |v, c| v * 8 + (c - b'0')));
            i += 4;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::DataType;

    fn col(ty: FieldType) -> ColumnInfo {
        ColumnInfo {
            name: "c".into(),
            ty,
            data_type: DataType::Utf8,
            primary_key: false,
            rest: None,
        }
    }

    #[test]
    fn text_input_of_each_type() {
        assert_eq!(
            from_text(&col(FieldType::Int), b" -42 ").ok(),
            Some(Value::Int(-42))
        );
        assert!(matches!(
            from_text(&col(FieldType::Int), b"99999999999999999999"),
            Err(SqlError::OutOfRange { .. })
        ));
        assert!(matches!(
            from_text(&col(FieldType::Int), b"4x"),
            Err(SqlError::InvalidText { .. })
        ));
        assert_eq!(
            from_text(&col(FieldType::Double), b"-Infinity").ok(),
            Some(Value::Double(f64::NEG_INFINITY))
        );
        assert_eq!(
            from_text(&col(FieldType::Bool), b"t").ok(),
            Some(Value::Bool(true))
        );
        assert!(from_text(&col(FieldType::Bool), b"maybe").is_err());
        assert_eq!(
            from_text(&col(FieldType::Binary), b"\\x0aFF").ok(),
            Some(Value::Binary(vec![10, 255]))
        );
        assert_eq!(
            from_text(&col(FieldType::Binary), b"a\\\\b\\001").ok(),
            Some(Value::Binary(vec![b'a', b'\\', b'b', 1]))
        );
        assert!(from_text(&col(FieldType::Binary), b"\\x0").is_err());
        assert_eq!(
            from_text(&col(FieldType::Any), b"{\"a\":1}").ok(),
            Some(Value::Object(vec![("a".into(), Value::Int(1))]))
        );
        assert!(matches!(
            from_text(&col(FieldType::String), b"\xff"),
            Err(SqlError::BadCopyData(_))
        ));
    }

    #[test]
    fn binary_input_of_each_type() {
        assert_eq!(
            from_binary(&col(FieldType::Int), &7i32.to_be_bytes()).ok(),
            Some(Value::Int(7))
        );
        assert_eq!(
            from_binary(&col(FieldType::Double), &1.5f64.to_be_bytes()).ok(),
            Some(Value::Double(1.5))
        );
        assert!(from_binary(&col(FieldType::Int), &[1, 2, 3]).is_err());
        assert!(from_binary(&col(FieldType::Bool), &[2]).is_err());
        assert_eq!(
            from_binary(&col(FieldType::Any), b"\x01[1]").ok(),
            Some(Value::Array(vec![Value::Int(1)]))
        );
    }
}
