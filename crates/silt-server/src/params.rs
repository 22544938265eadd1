//! Statement parameters (`$1`, `$2`...) of the PostgreSQL extended protocol.
//!
//! The SQL engine takes SQL text, so bound values are written into the
//! statement as SQL literals: integers as numbers, floats as numbers
//! with a point or exponent (`1.5`, `2.0`, `(-1e-7)`; `CAST('NaN' AS
//! DOUBLE)` and the infinities), booleans as `TRUE`/`FALSE`, `bytea` as
//! `X'..'`, everything else as a quoted string (`'it''s'`), `NULL` for
//! null, arrays as `ARRAY[...]` of their elements' literals. Placeholders inside string literals, quoted identifiers and
//! comments are left alone.

mod array;

use pgwire::api::Type;
use silt::value::{decimal, temporal};
use silt_sql::pg_forms;

/// A bound parameter value as a SQL literal.
#[derive(Debug, Clone, PartialEq)]
pub struct Literal(pub String);

/// Why a parameter could not be used.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("parameter ${index}: {reason}")]
pub struct ParamError {
    pub index: usize,
    pub reason: String,
}

fn err(index: usize, reason: impl Into<String>) -> ParamError {
    ParamError {
        index,
        reason: reason.into(),
    }
}

/// A quoted SQL string literal.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push('\'');
        }
        out.push(c);
    }
    out.push('\'');
    out
}

fn int_literal(v: i64) -> Literal {
    if v < 0 {
        Literal(format!("({v})"))
    } else {
        Literal(v.to_string())
    }
}

/// A float as SQL reads a float: `{v:?}` always has a point or an
/// exponent (`2.0`, `1e20`) and round-trips. Plain numbers let the plan
/// cache bind them as parameters (see `silt_sql::plan_cache`).
fn float_literal(v: f64) -> Literal {
    if v.is_nan() {
        return Literal("CAST('NaN' AS DOUBLE)".to_owned());
    }
    if v.is_infinite() {
        let s = if v > 0.0 { "inf" } else { "-inf" };
        return Literal(format!("CAST('{s}' AS DOUBLE)"));
    }
    if v.is_sign_negative() {
        Literal(format!("({v:?})"))
    } else {
        Literal(format!("{v:?}"))
    }
}

fn hex_literal(b: &[u8]) -> Literal {
    let mut s = String::with_capacity(b.len() * 2 + 3);
    s.push_str("X'");
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s.push('\'');
    Literal(s)
}

/// A date (days since 1970-01-01) as a typed SQL literal.
fn date_literal(days: i64) -> Literal {
    let text =
        temporal::days_date(days).map_or_else(String::new, |d| d.format("%Y-%m-%d").to_string());
    Literal(format!("DATE '{text}'"))
}

/// A timestamp (microseconds since 1970-01-01) as a typed SQL literal in
/// RFC 3339 form, which DataFusion's cast reads exactly.
fn timestamp_literal(micros: i64, zone: bool) -> Literal {
    let text = temporal::micros_datetime(micros).map_or_else(String::new, |t| {
        t.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
    });
    if zone {
        Literal(format!("TIMESTAMPTZ '{text}Z'"))
    } else {
        Literal(format!("TIMESTAMP '{text}'"))
    }
}

/// An interval as a SQL literal DataFusion reads exactly (its parts in
/// units it knows).
fn interval_literal(i: &silt::value::interval::Interval) -> Literal {
    Literal(format!(
        "INTERVAL '{} months {} days {} microseconds'",
        i.months, i.days, i.micros
    ))
}

/// A decimal number as an exact SQL literal: a `numeric` cast of its
/// plain digits (a bare `1.5` would be a double), with at least as many
/// fraction digits as it has.
fn numeric_literal(index: usize, text: &str) -> Result<Literal, ParamError> {
    let bad = || err(index, format!("`{text}` is not a number"));
    let t = text.trim();
    // Its digits after the point (exponent applied), capped at 38.
    let frac = {
        let (m, e) = match t.find(['e', 'E']) {
            Some(i) => (&t[..i], t[i + 1..].parse::<i64>().map_err(|_| bad())?),
            None => (t, 0),
        };
        let f = m.find('.').map_or(0, |i| (m.len() - i - 1) as i64);
        (f - e).clamp(0, 38) as u8
    };
    let plain = decimal::normalize(t, decimal::MAX_PRECISION, frac).map_err(|_| bad())?;
    let int_digits = plain
        .trim_start_matches('-')
        .split('.')
        .next()
        .map_or(1, str::len);
    let precision = (int_digits + usize::from(frac)).clamp(1, 38);
    Ok(Literal(format!(
        "CAST('{plain}' AS DECIMAL({precision},{frac}))"
    )))
}

fn utf8(index: usize, b: &[u8]) -> Result<&str, ParamError> {
    std::str::from_utf8(b).map_err(|_| err(index, "the value is not valid UTF-8"))
}

fn fixed<const N: usize>(index: usize, b: &[u8], ty: &Type) -> Result<[u8; N], ParamError> {
    b.try_into().map_err(|_| {
        err(
            index,
            format!(
                "a binary {} value must be {N} bytes, got {}",
                ty.name(),
                b.len()
            ),
        )
    })
}

/// Decode one parameter (1-based `index`) sent in `binary` or text format
/// for type `ty` into a SQL literal.
pub fn literal(
    index: usize,
    value: Option<&[u8]>,
    ty: &Type,
    binary: bool,
) -> Result<Literal, ParamError> {
    let Some(b) = value else {
        return Ok(Literal("NULL".to_owned()));
    };
    if let Some(elem) = array::element_type(ty) {
        return array::array_literal(index, b, elem, binary);
    }
    if binary {
        return Ok(match *ty {
            Type::BOOL => Literal(
                if fixed::<1>(index, b, ty)?[0] != 0 {
                    "TRUE"
                } else {
                    "FALSE"
                }
                .to_owned(),
            ),
            Type::CHAR => int_literal(i64::from(i8::from_be_bytes(fixed(index, b, ty)?))),
            Type::INT2 => int_literal(i64::from(i16::from_be_bytes(fixed(index, b, ty)?))),
            Type::INT4 => int_literal(i64::from(i32::from_be_bytes(fixed(index, b, ty)?))),
            Type::OID => int_literal(i64::from(u32::from_be_bytes(fixed(index, b, ty)?))),
            Type::INT8 => int_literal(i64::from_be_bytes(fixed(index, b, ty)?)),
            Type::FLOAT4 => float_literal(f64::from(f32::from_be_bytes(fixed(index, b, ty)?))),
            Type::FLOAT8 => float_literal(f64::from_be_bytes(fixed(index, b, ty)?)),
            Type::BYTEA => hex_literal(b),
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN | Type::JSON => {
                Literal(quote(utf8(index, b)?))
            }
            // jsonb: a version byte (1), then the text.
            Type::JSONB => match b.split_first() {
                Some((1, text)) => Literal(quote(utf8(index, text)?)),
                _ => return Err(err(index, "a binary jsonb value must start with version 1")),
            },
            Type::DATE => {
                let d = pg_forms::date_recv(&fixed::<4>(index, b, ty)?)
                    .ok_or_else(|| err(index, "the date is outside the supported years"))?;
                date_literal(d)
            }
            Type::TIMESTAMP | Type::TIMESTAMPTZ => {
                let m = pg_forms::timestamp_recv(&fixed::<8>(index, b, ty)?)
                    .ok_or_else(|| err(index, "the timestamp is outside the supported years"))?;
                timestamp_literal(m, *ty == Type::TIMESTAMPTZ)
            }
            Type::NUMERIC => {
                let text = pg_forms::numeric_recv(b)
                    .ok_or_else(|| err(index, "not a finite binary numeric"))?;
                numeric_literal(index, &text)?
            }
            Type::INTERVAL => interval_literal(&pg_forms::interval_recv(b).ok_or_else(|| {
                err(
                    index,
                    "a binary interval is 16 bytes within ±292 years of time",
                )
            })?),
            _ => {
                return Err(err(
                    index,
                    format!(
                        "binary format for type {} is not supported; send it as text",
                        ty.name()
                    ),
                ));
            }
        });
    }
    let text = utf8(index, b)?;
    let t = text.trim();
    Ok(match *ty {
        Type::BOOL => match t.to_ascii_lowercase().as_str() {
            "t" | "true" | "yes" | "y" | "on" | "1" => Literal("TRUE".to_owned()),
            "f" | "false" | "no" | "n" | "off" | "0" => Literal("FALSE".to_owned()),
            _ => return Err(err(index, format!("`{text}` is not a boolean"))),
        },
        Type::INT2 | Type::INT4 | Type::INT8 | Type::OID | Type::CHAR => int_literal(
            t.parse::<i64>()
                .map_err(|_| err(index, format!("`{text}` is not an integer")))?,
        ),
        Type::FLOAT4 | Type::FLOAT8 => {
            let v = match t.to_ascii_lowercase().as_str() {
                "infinity" | "inf" | "+infinity" => f64::INFINITY,
                "-infinity" | "-inf" => f64::NEG_INFINITY,
                _ => t
                    .parse::<f64>()
                    .map_err(|_| err(index, format!("`{text}` is not a number")))?,
            };
            float_literal(v)
        }
        Type::NUMERIC => numeric_literal(index, t)?,
        Type::INTERVAL => {
            interval_literal(&silt::value::interval::parse(t).map_err(|e| err(index, e))?)
        }
        Type::DATE => date_literal(temporal::parse_date(t).map_err(|e| err(index, e))?),
        Type::TIMESTAMP | Type::TIMESTAMPTZ => {
            let zone = *ty == Type::TIMESTAMPTZ;
            timestamp_literal(
                temporal::parse_timestamp(t, zone).map_err(|e| err(index, e))?,
                zone,
            )
        }
        Type::BYTEA => {
            let Some(hex) = t.strip_prefix("\\x") else {
                return Ok(Literal(quote(text)));
            };
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| {
                    hex.get(i..i + 2)
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                        .ok_or_else(|| err(index, "bad hex in a bytea value"))
                })
                .collect::<Result<Vec<u8>, _>>()?;
            hex_literal(&bytes)
        }
        _ => Literal(quote(text)),
    })
}

/// A JSON value (an HTTP request's `args`, 1-based `index`) as a SQL
/// literal: `null`, booleans and numbers as themselves, strings quoted,
/// arrays and objects as their JSON text, quoted.
pub fn json_literal(index: usize, v: &serde_json::Value) -> Result<Literal, ParamError> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => Literal("NULL".to_owned()),
        Value::Bool(b) => Literal(if *b { "TRUE" } else { "FALSE" }.to_owned()),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => int_literal(i),
            (None, Some(f)) if n.is_f64() => float_literal(f),
            _ => return Err(err(index, format!("{n} does not fit in a bigint"))),
        },
        Value::String(s) => Literal(quote(s)),
        other => Literal(quote(&other.to_string())),
    })
}

/// The largest placeholder number in `sql` (0 if none).
pub fn count(sql: &str) -> usize {
    let mut max = 0;
    let _ = walk(sql, |n, _| {
        // The protocol allows at most 65,535 parameters.
        if n <= usize::from(u16::MAX) {
            max = max.max(n);
        }
        Ok(String::new())
    });
    max
}

/// Replace every `$n` of `sql` by `values[n - 1]`.
pub fn substitute(sql: &str, values: &[Literal]) -> Result<String, ParamError> {
    walk(sql, |n, _| {
        values
            .get(n.wrapping_sub(1))
            .map(|l| l.0.clone())
            .ok_or_else(|| {
                err(
                    n,
                    format!("there is no parameter ${n} ({} were bound)", values.len()),
                )
            })
    })
}

/// Whether placeholder `$n` is the array of a quantified comparison
/// (`x = ANY($n)`, `ALL($n)`, `SOME($n)`): an untyped `{...}` value there
/// is an array's text (psycopg sends a list of strings untyped).
pub fn is_quantified(sql: &str, n: usize) -> bool {
    let mut found = false;
    let _ = walk(sql, |m, before| {
        found |= m == n && follows_quantifier(before);
        Ok(String::new())
    });
    found
}

fn follows_quantifier(before: &str) -> bool {
    let Some(t) = before.trim_end().strip_suffix('(') else {
        return false;
    };
    let t = t.trim_end().as_bytes();
    ["any", "all", "some"].iter().any(|w| {
        let w = w.as_bytes();
        t.len() >= w.len()
            && t[t.len() - w.len()..].eq_ignore_ascii_case(w)
            && (t.len() == w.len() || !is_ident(t[t.len() - w.len() - 1]))
    })
}

/// Copy `sql`, replacing each placeholder outside literals, quoted
/// identifiers and comments by what `f` returns for its number and the
/// text before it.
fn walk(
    sql: &str,
    mut f: impl FnMut(usize, &str) -> Result<String, ParamError>,
) -> Result<String, ParamError> {
    let b = sql.as_bytes();
    let mut out = String::with_capacity(sql.len() + 16);
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        match b[i] {
            b'\'' => {
                // E'..' strings allow backslash escapes.
                let escapes = i > 0
                    && (b[i - 1] == b'e' || b[i - 1] == b'E')
                    && (i < 2 || !is_ident(b[i - 2]));
                i += 1;
                while i < b.len() {
                    if escapes && b[i] == b'\\' {
                        i += 2;
                        continue;
                    }
                    if b[i] == b'\'' {
                        if b.get(i + 1) == Some(&b'\'') {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += 1;
                }
                i += 1;
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0usize;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'$' if b.get(i + 1).is_some_and(u8::is_ascii_digit)
                && (i == 0 || !is_ident(b[i - 1])) =>
            {
                let start = i;
                i += 1;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                let n: usize = sql
                    .get(start + 1..i)
                    .and_then(|d| d.parse().ok())
                    .unwrap_or(usize::MAX);
                let rep = f(n, sql.get(..start).unwrap_or(""))?;
                out.push_str(sql.get(copied..start).unwrap_or(""));
                out.push_str(&rep);
                copied = i;
            }
            _ => i += 1,
        }
    }
    out.push_str(sql.get(copied..).unwrap_or(""));
    Ok(out)
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> Literal {
        Literal(s.to_owned())
    }

    #[test]
    fn quantified_placeholders() {
        let sql = "SELECT 1 WHERE a = ANY ( $1 ) AND b <> all($2) AND c = $3 AND d = company($4) AND e = SOME($5)";
        let q: Vec<usize> = (1..=5).filter(|&n| is_quantified(sql, n)).collect();
        assert_eq!(q, [1, 2, 5]);
        assert!(!is_quantified("SELECT 'any($1)', $1", 1));
    }

    #[test]
    fn substitutes_outside_literals() {
        let sql = "SELECT '$1', \"$1\", $1 -- $2\n, $2 /* $3 /* $3 */ */ FROM t WHERE a$1 = $10";
        assert_eq!(count(sql), 10);
        let mut vals: Vec<Literal> = (1..=10).map(|i| lit(&format!("v{i}"))).collect();
        vals[0] = lit("'x'");
        let out = substitute(sql, &vals).unwrap();
        assert_eq!(
            out,
            "SELECT '$1', \"$1\", 'x' -- $2\n, v2 /* $3 /* $3 */ */ FROM t WHERE a$1 = v10"
        );
        assert!(substitute("SELECT $3", &vals[..2]).is_err());
        assert!(substitute("SELECT $0", &vals).is_err());
        assert!(substitute("SELECT $99999999999999999999999", &vals).is_err());
        assert_eq!(
            substitute("SELECT E'\\'$1'", &vals).unwrap(),
            "SELECT E'\\'$1'"
        );
        // Unterminated things do not panic.
        for s in ["'abc", "\"abc", "/* abc", "$", "E'\\", "--"] {
            let _ = substitute(s, &vals);
        }
    }

    #[test]
    fn literals() {
        assert_eq!(literal(1, None, &Type::INT8, true).unwrap().0, "NULL");
        assert_eq!(
            literal(1, Some(&(-5i64).to_be_bytes()), &Type::INT8, true)
                .unwrap()
                .0,
            "(-5)"
        );
        assert_eq!(
            literal(1, Some(&7i32.to_be_bytes()), &Type::INT4, true)
                .unwrap()
                .0,
            "7"
        );
        assert!(literal(1, Some(&[1, 2]), &Type::INT8, true).is_err());
        assert_eq!(
            literal(1, Some(&1.5f64.to_be_bytes()), &Type::FLOAT8, true)
                .unwrap()
                .0,
            "1.5"
        );
        assert_eq!(
            literal(1, Some(b"-2"), &Type::FLOAT8, false).unwrap().0,
            "(-2.0)"
        );
        assert_eq!(
            literal(1, Some(b"1e300"), &Type::FLOAT8, false).unwrap().0,
            "1e300"
        );
        assert_eq!(
            literal(1, Some(b"NaN"), &Type::FLOAT8, false).unwrap().0,
            "CAST('NaN' AS DOUBLE)"
        );
        assert_eq!(
            literal(1, Some(b"it's"), &Type::TEXT, false).unwrap().0,
            "'it''s'"
        );
        assert_eq!(
            literal(1, Some(b"\\x0aff"), &Type::BYTEA, false).unwrap().0,
            "X'0aff'"
        );
        assert!(literal(1, Some(b"12a"), &Type::INT8, false).is_err());
        assert!(literal(1, Some(b"1; DROP TABLE t"), &Type::NUMERIC, false).is_err());
        assert_eq!(
            literal(1, Some(b"t"), &Type::BOOL, false).unwrap().0,
            "TRUE"
        );
        assert!(literal(1, Some(&[0xff]), &Type::TEXT, true).is_err());
    }

    #[test]
    fn temporal_numeric_and_json_parameters() {
        let lit = |b: &[u8], ty: &Type, binary: bool| literal(1, Some(b), ty, binary).map(|l| l.0);
        assert_eq!(
            lit(b"2024-03-01", &Type::DATE, false).unwrap(),
            "DATE '2024-03-01'"
        );
        assert_eq!(
            lit(&(8_826i32).to_be_bytes(), &Type::DATE, true).unwrap(),
            "DATE '2024-03-01'"
        );
        assert_eq!(
            lit(b"2024-03-01 12:30:00.5+02:00", &Type::TIMESTAMPTZ, false).unwrap(),
            "TIMESTAMPTZ '2024-03-01T10:30:00.500000Z'"
        );
        assert_eq!(
            lit(b"2024-03-01 12:30:00", &Type::TIMESTAMP, false).unwrap(),
            "TIMESTAMP '2024-03-01T12:30:00.000000'"
        );
        assert_eq!(
            lit(&0i64.to_be_bytes(), &Type::TIMESTAMP, true).unwrap(),
            "TIMESTAMP '2000-01-01T00:00:00.000000'"
        );
        assert!(lit(b"2024-02-30", &Type::DATE, false).is_err());
        assert!(lit(&i64::MAX.to_be_bytes(), &Type::TIMESTAMPTZ, true).is_err());
        assert_eq!(
            lit(b"-12.50", &Type::NUMERIC, false).unwrap(),
            "CAST('-12.50' AS DECIMAL(4,2))"
        );
        assert_eq!(
            lit(b"1.5e3", &Type::NUMERIC, false).unwrap(),
            "CAST('1500' AS DECIMAL(4,0))"
        );
        assert_eq!(
            lit(
                &[0, 2, 0, 0, 0, 0, 0, 2, 0, 12, 0x13, 0x88],
                &Type::NUMERIC,
                true
            )
            .unwrap(),
            "CAST('12.50' AS DECIMAL(4,2))"
        );
        assert_eq!(
            lit(b"\x01{\"a\": 1}", &Type::JSONB, true).unwrap(),
            "'{\"a\": 1}'"
        );
        assert!(lit(b"{}", &Type::JSONB, true).is_err());
    }
}
