//! Declared field types and the conversion of incoming values to them.

use std::fmt;

use base64::Engine;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

use super::geometry::check_geographic_reason;
use super::{Geometry, Value, decimal, temporal};
use crate::error::{Error, Result};

/// The declared type of a field in a dataset schema. Serialized as its
/// name (`"int"`, `"decimal(10,2)"`; see [`FieldType::parse`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum FieldType {
    /// Anything; values are kept as they are.
    Any,
    /// `true` / `false`.
    Bool,
    /// 64-bit signed integer.
    Int,
    /// 64-bit float.
    Double,
    /// UTF-8 text.
    String,
    /// Bytes (base64 text accepted).
    Binary,
    /// A [`Geometry::Point`].
    Point,
    /// A [`Geometry::Rect`].
    Rectangle,
    /// A [`Geometry::Polygon`].
    Polygon,
    /// Any of point, rectangle and polygon.
    Geometry,
    /// A calendar date, stored as an int: days since 1970-01-01
    /// ([`super::temporal`]).
    Date,
    /// A date and time without a zone, stored as an int: microseconds since
    /// 1970-01-01 00:00:00.
    Timestamp,
    /// An instant, stored as an int: microseconds since 1970-01-01 00:00:00
    /// UTC.
    TimestampTz,
    /// An exact decimal of at most `precision` digits, `scale` of them
    /// after the point, stored as its canonical text ([`super::decimal`]).
    Decimal { precision: u8, scale: u8 },
    /// A JSON document: any value, as `Any`, shown to SQL as `jsonb`.
    Json,
    /// A span of months, days and time, stored as its ISO 8601 text
    /// ([`super::interval`]).
    Interval,
    /// A one-dimensional array of one element type (`int[]`), stored as an
    /// array of the element's stored values ([`super::array`]).
    Array(ElementType),
}

const TYPE_NAMES: &str = "any, bool, int, double, string, binary, point, rectangle, polygon, geometry, date, timestamp, timestamptz, interval, decimal(p,s), json, and arrays such as int[]";

/// `decimal` / `numeric` without a precision: PostgreSQL's unconstrained
/// numeric is stored with this precision and scale (DataFusion's choice).
pub const DEFAULT_DECIMAL: FieldType = FieldType::Decimal {
    precision: 38,
    scale: 10,
};

impl FieldType {
    /// Parse a type name, case-insensitively, with common aliases:
    /// `int`/`int64`/`integer`/`bigint`/`long`, `double`/`float`/`float64`/`real`,
    /// `string`/`text`/`str`, `bool`/`boolean`, `binary`/`bytes`/`blob`,
    /// `point`, `rectangle`/`rect`, `polygon`, `geometry`, `any`, `date`,
    /// `timestamp`/`datetime`, `timestamptz`, `decimal(p,s)`/`numeric(p,s)`
    /// (`decimal(p)` is scale 0; bare `decimal` is `decimal(38,10)`),
    /// `json`/`jsonb`; an element type followed by `[]` is an array of it
    /// (`int[]`, `decimal(10,2)[]`).
    pub fn parse(s: &str) -> Result<FieldType> {
        if let Some(elem) = s.trim().strip_suffix("[]") {
            let t = FieldType::parse(elem)?;
            return ElementType::of(t)
                .map(FieldType::Array)
                .ok_or_else(|| Error::Parse {
                    what: "field type".to_owned(),
                    reason: format!(
                        "arrays of {t} are not supported (`{s}`); arrays hold {ELEMENT_TYPES}"
                    ),
                });
        }
        let lower = s.trim().to_ascii_lowercase();
        let unknown = || Error::Parse {
            what: "field type".to_owned(),
            reason: format!("unknown type `{s}`; expected one of {TYPE_NAMES}"),
        };
        let (base, args) = match lower.find('(') {
            Some(i) => {
                let inner = lower[i + 1..].strip_suffix(')').ok_or_else(unknown)?;
                (lower[..i].trim(), Some(inner))
            }
            None => (lower.as_str(), None),
        };
        if let Some(args) = args {
            if !matches!(base, "decimal" | "numeric") {
                return Err(unknown());
            }
            return decimal_type(s, args);
        }
        let t = match base {
            "any" => FieldType::Any,
            "bool" | "boolean" => FieldType::Bool,
            "int" | "int64" | "integer" | "bigint" | "long" => FieldType::Int,
            "double" | "float" | "float64" | "real" => FieldType::Double,
            "string" | "text" | "str" => FieldType::String,
            "binary" | "bytes" | "blob" => FieldType::Binary,
            "point" => FieldType::Point,
            "rectangle" | "rect" => FieldType::Rectangle,
            "polygon" => FieldType::Polygon,
            "geometry" => FieldType::Geometry,
            "date" => FieldType::Date,
            "timestamp" | "datetime" | "timestamp without time zone" => FieldType::Timestamp,
            "timestamptz" | "timestamp with time zone" => FieldType::TimestampTz,
            "decimal" | "numeric" => DEFAULT_DECIMAL,
            "json" | "jsonb" => FieldType::Json,
            "interval" => FieldType::Interval,
            _ => return Err(unknown()),
        };
        Ok(t)
    }

    /// Whether values of this type can be key parts (all but geometries,
    /// decimals and intervals, whose stored text does not sort as their
    /// values, and arrays). `Any`
    /// and `Json` count as key types: their values are checked one by one
    /// when keys are encoded.
    pub fn is_key_type(self) -> bool {
        !self.is_geometry()
            && !matches!(
                self,
                FieldType::Decimal { .. } | FieldType::Interval | FieldType::Array(_)
            )
    }

    /// Whether this is `point`, `rectangle`, `polygon` or `geometry`.
    pub fn is_geometry(self) -> bool {
        matches!(
            self,
            FieldType::Point | FieldType::Rectangle | FieldType::Polygon | FieldType::Geometry
        )
    }

    /// Whether `v` already has this type without conversion (null always
    /// does). Geometry structure, the range of dates and times and the
    /// form of decimal text are not checked here.
    pub fn matches(self, v: &Value) -> bool {
        if let (FieldType::Array(e), Value::Array(items)) = (self, v) {
            let e = e.field_type();
            return items
                .iter()
                .all(|i| !matches!(i, Value::Array(_)) && e.matches(i));
        }
        matches!(
            (self, v),
            (_, Value::Null)
                | (FieldType::Any | FieldType::Json, _)
                | (FieldType::Bool, Value::Bool(_))
                | (
                    FieldType::Int
                        | FieldType::Date
                        | FieldType::Timestamp
                        | FieldType::TimestampTz,
                    Value::Int(_)
                )
                | (FieldType::Double, Value::Double(_))
                | (
                    FieldType::String | FieldType::Decimal { .. } | FieldType::Interval,
                    Value::String(_)
                )
                | (FieldType::Binary, Value::Binary(_))
                | (FieldType::Point, Value::Geometry(Geometry::Point { .. }))
                | (FieldType::Rectangle, Value::Geometry(Geometry::Rect { .. }))
                | (
                    FieldType::Polygon,
                    Value::Geometry(Geometry::Polygon { .. })
                )
                | (FieldType::Geometry, Value::Geometry(_))
        )
    }
}

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
fn coerce_array(elem: ElementType, v: Value) -> Result<Value, String> {
    let items = match v {
        Value::Array(items) => items,
        Value::String(s) => return array_of_text(elem, &s),
        other => {
            return Err(format!(
                "expected an array of {elem} (a list, or text such as '{{1,2,3}}'), found {}",
                short_value(&other)
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
        let j: serde_json::Value = serde_json::from_str(t).map_err(|e| {
            format!(
                "array text {} is not valid JSON: {e}",
                super::array::shown(t)
            )
        })?;
        return coerce_array(elem, super::from_json(&j));
    }
    let parts = super::array::parse_literal(t)?;
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
                    super::array::shown(t)
                ));
            }
        },
        ElementType::Int => Value::Int(t.parse::<i64>().map_err(|_| {
            format!(
                "invalid input syntax for type bigint: {}",
                super::array::shown(t)
            )
        })?),
        ElementType::Double => Value::Double(t.parse::<f64>().map_err(|_| {
            format!(
                "invalid input syntax for type double precision: {}",
                super::array::shown(t)
            )
        })?),
        _ => Value::String(t.to_owned()),
    };
    coerce_reason(elem.field_type(), v)
}

fn short_value(v: &Value) -> String {
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

/// `decimal(p[,s])`'s arguments.
fn decimal_type(shown: &str, args: &str) -> Result<FieldType> {
    let bad = |why: String| Error::Parse {
        what: "field type".to_owned(),
        reason: format!("`{shown}`: {why}"),
    };
    let mut parts = args.split(',').map(str::trim);
    let num = |p: Option<&str>, what: &str| -> Result<u8> {
        let p = p.ok_or_else(|| bad(format!("missing {what}")))?;
        p.parse::<u8>()
            .map_err(|_| bad(format!("{what} `{p}` is not a number from 0 to 38")))
    };
    let precision = num(parts.next(), "precision")?;
    let scale = match parts.next() {
        Some(s) => num(Some(s), "scale")?,
        None => 0,
    };
    if parts.next().is_some() {
        return Err(bad("decimal takes (precision, scale)".to_owned()));
    }
    if precision == 0 || precision > decimal::MAX_PRECISION {
        return Err(bad(format!(
            "precision {precision} must be between 1 and {}",
            decimal::MAX_PRECISION
        )));
    }
    if scale > precision {
        return Err(bad(format!(
            "scale {scale} must be between 0 and the precision {precision}"
        )));
    }
    Ok(FieldType::Decimal { precision, scale })
}

impl From<FieldType> for String {
    fn from(t: FieldType) -> String {
        t.to_string()
    }
}

impl TryFrom<String> for FieldType {
    type Error = Error;
    fn try_from(s: String) -> Result<FieldType> {
        FieldType::parse(&s)
    }
}

impl fmt::Display for FieldType {
    /// The canonical name (as serialized): `any`, `bool`, `int`, ...,
    /// `decimal(10,2)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            FieldType::Any => "any",
            FieldType::Bool => "bool",
            FieldType::Int => "int",
            FieldType::Double => "double",
            FieldType::String => "string",
            FieldType::Binary => "binary",
            FieldType::Point => "point",
            FieldType::Rectangle => "rectangle",
            FieldType::Polygon => "polygon",
            FieldType::Geometry => "geometry",
            FieldType::Date => "date",
            FieldType::Timestamp => "timestamp",
            FieldType::TimestampTz => "timestamptz",
            FieldType::Decimal { precision, scale } => {
                return write!(f, "decimal({precision},{scale})");
            }
            FieldType::Json => "json",
            FieldType::Interval => "interval",
            FieldType::Array(e) => return write!(f, "{e}[]"),
        };
        f.write_str(name)
    }
}

/// Standard base64 alphabet, padding optional.
const B64_STANDARD: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);
/// URL-safe base64 alphabet, padding optional.
const B64_URL: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Check `v` against the declared type `ty` of field `field`, converting
/// where that loses nothing (or, for int to double, rounds as documented):
///
/// * `Null` is accepted for every type (the caller checks required fields).
/// * `Any`: unchanged.
/// * `Int`: ints; doubles with an exact integral value in range (`3.0` → `3`).
/// * `Double`: doubles (NaN and infinities included); ints (rounded to the
///   nearest double beyond ±2^53).
/// * `Binary`: binary; strings holding base64 (standard or URL-safe alphabet,
///   padding optional).
/// * `Bool`, `String`: only themselves.
/// * `Point`: a point; `[x, y]`; `{"x": .., "y": ..}` (or `lon`/`lng`/`longitude`
///   with `lat`/`latitude`); GeoJSON `{"type": "Point", "coordinates": [x, y]}`
///   (also inside a GeoJSON `Feature`); WKT `POINT(x y)`.
/// * `Rectangle`: a rectangle; `[min_x, min_y, max_x, max_y]`;
///   `{"min_x", "min_y", "max_x", "max_y"}`; a GeoJSON or WKT polygon (or a
///   polygon value) that is an axis-aligned box.
/// * `Polygon`: a polygon; a rectangle (converted); GeoJSON `Polygon`; WKT
///   `POLYGON((x y, ...), ...)`; bare coordinates `[[[x, y], ...], ...]` or a
///   single ring `[[x, y], ...]`.
/// * `Geometry`: any of the three forms above (`[x, y]` is a point, four
///   numbers a rectangle; a GeoJSON polygon whose `bbox` it exactly traces, as
///   [`to_json`](super::to_json) writes rectangles, is a rectangle).
///
/// Geometries must pass [`Geometry::validate`] (finite coordinates, closed
/// rings of at least 4 points, `min <= max`); rings are not closed for you.
/// Errors are [`Error::InvalidRecord`] naming `field` and saying what was
/// expected and what was found.
pub fn coerce(field: &str, ty: FieldType, v: Value) -> Result<Value> {
    coerce_reason(ty, v).map_err(|reason| Error::invalid(Some(field), reason))
}

/// Convert one text cell (CSV and similar) to the declared type: the text is
/// parsed as the type (`42`, `2.5`, `true`/`false`/`yes`/`no`/`1`/`0`,
/// base64, WKT or JSON geometry forms), then [`coerce`]d. An empty or
/// all-blank cell is `Null` except for `String` and `Any`, which keep the
/// text as a string (as they do any text).
pub fn coerce_text(field: &str, ty: FieldType, text: &str) -> Result<Value> {
    let t = text.trim();
    let err = |reason: String| Error::invalid(Some(field), reason);
    match ty {
        FieldType::Any | FieldType::String => return Ok(Value::String(text.to_owned())),
        _ if t.is_empty() => return Ok(Value::Null),
        FieldType::Array(_) => return coerce(field, ty, Value::String(t.to_owned())),
        _ => {}
    }
    let v = match ty {
        FieldType::Json => serde_json::from_str::<Value>(t).map_err(|e| {
            err(format!(
                "invalid input syntax for type json: {} ({e})",
                quote(t)
            ))
        })?,
        FieldType::Date
        | FieldType::Timestamp
        | FieldType::TimestampTz
        | FieldType::Interval
        | FieldType::Decimal { .. } => Value::String(t.to_owned()),
        FieldType::Bool => match t.to_ascii_lowercase().as_str() {
            "true" | "t" | "yes" | "y" | "1" => Value::Bool(true),
            "false" | "f" | "no" | "n" | "0" => Value::Bool(false),
            _ => return Err(err(format!("expected bool, found text {}", quote(t)))),
        },
        FieldType::Int => match t.parse::<i64>() {
            Ok(i) => Value::Int(i),
            Err(_) => match t.parse::<f64>() {
                Ok(d) if d.is_finite() => Value::Double(d),
                _ => return Err(err(format!("expected int, found text {}", quote(t)))),
            },
        },
        FieldType::Double => match t.parse::<f64>() {
            Ok(d) => Value::Double(d),
            Err(_) => return Err(err(format!("expected double, found text {}", quote(t)))),
        },
        FieldType::Binary => Value::String(t.to_owned()),
        _ => {
            if t.starts_with('{') || t.starts_with('[') {
                match serde_json::from_str::<Value>(t) {
                    Ok(v) => v,
                    Err(e) => {
                        return Err(err(format!(
                            "expected {}, found text {} that is not valid JSON: {e}",
                            ty,
                            quote(t)
                        )));
                    }
                }
            } else {
                Value::String(t.to_owned())
            }
        }
    };
    coerce(field, ty, v)
}

pub(super) fn coerce_reason(ty: FieldType, v: Value) -> std::result::Result<Value, String> {
    if v.is_null() {
        return Ok(v);
    }
    match ty {
        FieldType::Any | FieldType::Json => Ok(v),
        FieldType::Array(e) => coerce_array(e, v),
        FieldType::Interval => match v {
            Value::String(s) => super::interval::parse(&s).map(|i| Value::String(i.to_iso())),
            other => Err(mismatch(
                "interval (text such as '1 day 02:00:00' or 'P1DT2H')",
                &other,
            )),
        },
        FieldType::Date => match v {
            Value::Int(d) if temporal::valid_days(d) => Ok(v),
            Value::String(s) => temporal::parse_date(&s).map(Value::Int),
            Value::Int(d) => Err(format!(
                "date {d} (days since 1970-01-01) is outside the supported years -262143..262142"
            )),
            other => Err(mismatch(
                "date (YYYY-MM-DD text or days since 1970-01-01)",
                &other,
            )),
        },
        FieldType::Timestamp | FieldType::TimestampTz => {
            let zone = ty == FieldType::TimestampTz;
            match v {
                Value::Int(m) if temporal::valid_micros(m) => Ok(v),
                Value::String(s) => temporal::parse_timestamp(&s, zone).map(Value::Int),
                Value::Int(m) => Err(format!(
                    "timestamp {m} (microseconds since 1970-01-01) is outside the supported years -262143..262142"
                )),
                other => Err(mismatch(
                    "timestamp (ISO text or microseconds since 1970-01-01)",
                    &other,
                )),
            }
        }
        FieldType::Decimal { precision, scale } => {
            let text = match &v {
                Value::String(s) => s.clone(),
                Value::Int(i) => i.to_string(),
                Value::Double(d) if d.is_finite() => format!("{d:e}"),
                other => {
                    return Err(mismatch(
                        &format!("decimal({precision},{scale}) (a number or its text)"),
                        other,
                    ));
                }
            };
            decimal::normalize(&text, precision, scale)
                .map(Value::String)
                .map_err(|e| e.to_string())
        }
        FieldType::Bool => match v {
            Value::Bool(_) => Ok(v),
            other => Err(mismatch("bool", &other)),
        },
        FieldType::String => match v {
            Value::String(_) => Ok(v),
            other => Err(mismatch("string", &other)),
        },
        FieldType::Int => match v {
            Value::Int(_) => Ok(v),
            Value::Double(d) => exact_int(d).map(Value::Int).ok_or_else(|| {
                format!("expected int, found double {d:?}, which is not an integer in the int64 range")
            }),
            other => Err(mismatch("int", &other)),
        },
        FieldType::Double => match v {
            Value::Double(_) => Ok(v),
            Value::Int(i) => Ok(Value::Double(i as f64)),
            other => Err(mismatch("double", &other)),
        },
        FieldType::Binary => match v {
            Value::Binary(_) => Ok(v),
            Value::String(s) => B64_STANDARD
                .decode(&s)
                .or_else(|_| B64_URL.decode(&s))
                .map(Value::Binary)
                .map_err(|e| {
                    format!(
                        "expected binary (bytes or base64 text), found string {} that is not base64: {e}",
                        quote(&s)
                    )
                }),
            other => Err(mismatch("binary (bytes or base64 text)", &other)),
        },
        FieldType::Point | FieldType::Rectangle | FieldType::Polygon | FieldType::Geometry => {
            let g = to_geometry(ty, &v)?;
            g.validate_reason()?;
            Ok(Value::Geometry(g))
        }
    }
}

/// `d` as an int if it is integral and within the i64 range.
fn exact_int(d: f64) -> Option<i64> {
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    if d.is_finite() && d.fract() == 0.0 && (-TWO_POW_63..TWO_POW_63).contains(&d) {
        Some(d as i64)
    } else {
        None
    }
}

/// Check a geometry against geographic ranges like
/// [`check_geographic`](super::check_geographic), naming `field` in the error.
pub fn check_geographic_field(field: &str, g: &Geometry) -> Result<()> {
    check_geographic_reason(g).map_err(|r| Error::invalid(Some(field), r))
}

fn quote(s: &str) -> String {
    const MAX: usize = 60;
    let mut shown: String = s.chars().take(MAX).collect();
    if shown.len() < s.len() {
        shown.push('…');
    }
    serde_json::to_string(&shown).unwrap_or(shown)
}

/// A short description of a value for "found ..." in messages.
fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("bool {b}"),
        Value::Int(i) => format!("int {i}"),
        Value::Double(d) => format!("double {d:?}"),
        Value::String(s) => format!("string {}", quote(s)),
        Value::Binary(b) => format!("binary of {} bytes", b.len()),
        Value::Array(a) => format!("array of {} elements", a.len()),
        Value::Object(f) => {
            let names: Vec<&str> = f.iter().take(8).map(|(k, _)| k.as_str()).collect();
            let more = if f.len() > 8 { ", ..." } else { "" };
            format!("object with members {}{more}", names.join(", "))
        }
        Value::Geometry(g) => g.type_name().to_owned(),
    }
}

fn mismatch(expected: &str, found: &Value) -> String {
    format!("expected {expected}, found {}", describe(found))
}

fn expected_forms(ty: FieldType) -> &'static str {
    match ty {
        FieldType::Point => {
            "point ([x, y], {\"x\": .., \"y\": ..}, GeoJSON Point or WKT POINT(x y))"
        }
        FieldType::Rectangle => {
            "rectangle ([min_x, min_y, max_x, max_y], {\"min_x\", \"min_y\", \"max_x\", \"max_y\"}, or an axis-aligned box polygon in GeoJSON or WKT)"
        }
        FieldType::Polygon => {
            "polygon (GeoJSON Polygon, WKT POLYGON((x y, ...)) or [[[x, y], ...]] rings)"
        }
        _ => {
            "geometry (point, rectangle or polygon in GeoJSON, WKT, [x, y], [min_x, min_y, max_x, max_y] or {\"x\", \"y\"} form)"
        }
    }
}

type R<T> = std::result::Result<T, String>;

/// Convert to a geometry of the wanted kind (not yet validated).
fn to_geometry(ty: FieldType, v: &Value) -> R<Geometry> {
    let g = match v {
        Value::Geometry(g) => g.clone(),
        Value::String(s) => match Geometry::parse_wkt(s) {
            Ok(g) => g,
            Err(Error::Parse { reason, .. }) => {
                return Err(format!(
                    "expected {}, found string {} that is not valid WKT: {reason}",
                    expected_forms(ty),
                    quote(s)
                ));
            }
            Err(e) => return Err(e.to_string()),
        },
        Value::Array(items) => from_array(ty, items)?,
        Value::Object(fields) => from_object(ty, fields)?,
        other => return Err(mismatch(expected_forms(ty), other)),
    };
    fit(ty, g, v)
}

/// Make `g` the kind `ty` asks for, converting rectangles and box polygons.
fn fit(ty: FieldType, g: Geometry, src: &Value) -> R<Geometry> {
    match (ty, &g) {
        (FieldType::Geometry, _)
        | (FieldType::Point, Geometry::Point { .. })
        | (FieldType::Rectangle, Geometry::Rect { .. })
        | (FieldType::Polygon, Geometry::Polygon { .. }) => Ok(g),
        (FieldType::Polygon, Geometry::Rect { .. }) => g
            .to_polygon()
            .ok_or_else(|| mismatch(expected_forms(ty), src)),
        (FieldType::Rectangle, Geometry::Polygon { .. }) => {
            g.validate_reason()?;
            g.as_rect().ok_or_else(|| {
                format!(
                    "expected rectangle, found a polygon that is not an axis-aligned box (a box has no holes and 5 points tracing its 4 distinct corners): {}",
                    short_wkt(&g)
                )
            })
        }
        _ => Err(format!(
            "expected {}, found {} {}",
            expected_forms(ty),
            g.type_name(),
            short_wkt(&g)
        )),
    }
}

fn short_wkt(g: &Geometry) -> String {
    let w = g.to_wkt();
    if w.chars().count() > 80 {
        let mut s: String = w.chars().take(80).collect();
        s.push('…');
        s
    } else {
        w
    }
}

/// A coordinate: an int or a double.
fn num(v: &Value, what: &str) -> R<f64> {
    match v {
        Value::Int(i) => Ok(*i as f64),
        Value::Double(d) => Ok(*d),
        other => Err(format!(
            "{what} must be a number, found {}",
            describe(other)
        )),
    }
}

fn is_num(v: &Value) -> bool {
    matches!(v, Value::Int(_) | Value::Double(_))
}

/// `[x, y]` as a position.
fn position(v: &Value, what: &str) -> R<(f64, f64)> {
    match v {
        Value::Array(a) if a.len() == 2 => Ok((num(&a[0], what)?, num(&a[1], what)?)),
        Value::Array(a) if a.len() == 3 && a.iter().all(is_num) => Err(format!(
            "{what} has 3 numbers; only 2-D coordinates [x, y] are supported"
        )),
        other => Err(format!(
            "{what} must be a position [x, y], found {}",
            describe(other)
        )),
    }
}

fn ring(v: &Value, what: &str) -> R<Vec<(f64, f64)>> {
    match v {
        Value::Array(pts) => pts
            .iter()
            .enumerate()
            .map(|(i, p)| position(p, &format!("{what} point {}", i + 1)))
            .collect(),
        other => Err(format!(
            "{what} must be an array of [x, y] positions, found {}",
            describe(other)
        )),
    }
}

fn rings(v: &Value) -> R<Geometry> {
    match v {
        Value::Array(rs) if !rs.is_empty() => {
            let exterior = ring(&rs[0], "polygon exterior ring")?;
            let holes = rs[1..]
                .iter()
                .enumerate()
                .map(|(i, r)| ring(r, &format!("polygon hole {}", i + 1)))
                .collect::<R<Vec<_>>>()?;
            Ok(Geometry::Polygon { exterior, holes })
        }
        other => Err(format!(
            "polygon coordinates must be a non-empty array of rings, found {}",
            describe(other)
        )),
    }
}

fn from_array(ty: FieldType, items: &[Value]) -> R<Geometry> {
    let all_nums = items.iter().all(is_num);
    let want_rect = matches!(ty, FieldType::Rectangle | FieldType::Geometry);
    let want_point = matches!(ty, FieldType::Point | FieldType::Geometry);
    if all_nums && items.len() == 2 && want_point {
        return Ok(Geometry::Point {
            x: num(&items[0], "x")?,
            y: num(&items[1], "y")?,
        });
    }
    if all_nums && items.len() == 4 && want_rect {
        return Ok(Geometry::Rect {
            min_x: num(&items[0], "min_x")?,
            min_y: num(&items[1], "min_y")?,
            max_x: num(&items[2], "max_x")?,
            max_y: num(&items[3], "max_y")?,
        });
    }
    if all_nums && items.len() == 3 && want_point {
        return Err(format!(
            "expected {}, found an array of 3 numbers; only 2-D coordinates [x, y] are supported",
            expected_forms(ty)
        ));
    }
    if ty != FieldType::Point
        && let Some(Value::Array(first)) = items.first()
    {
        // [[[x, y], ...], ...] rings, or a single ring [[x, y], ...].
        return if matches!(first.first(), Some(Value::Array(_))) {
            rings(&Value::Array(items.to_vec()))
        } else {
            Ok(Geometry::Polygon {
                exterior: ring(&Value::Array(items.to_vec()), "polygon exterior ring")?,
                holes: Vec::new(),
            })
        };
    }
    Err(format!(
        "expected {}, found array of {} elements",
        expected_forms(ty),
        items.len()
    ))
}

fn member<'a>(fields: &'a [(String, Value)], name: &str) -> Option<&'a Value> {
    fields.iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

fn from_object(ty: FieldType, fields: &[(String, Value)]) -> R<Geometry> {
    if let Some(t) = member(fields, "type") {
        return from_geojson(ty, fields, t);
    }
    let names: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
    let has = |n: &str| names.contains(&n);
    let only = |allowed: &[&str]| -> R<()> {
        match names.iter().find(|n| !allowed.contains(n)) {
            Some(extra) => Err(format!(
                "expected {}, found object with unexpected member `{extra}`",
                expected_forms(ty)
            )),
            None => Ok(()),
        }
    };
    let get = |n: &str| -> R<f64> {
        match member(fields, n) {
            Some(v) => num(v, n),
            None => Err(format!("object is missing member `{n}`")),
        }
    };
    if has("min_x") || has("min_y") || has("max_x") || has("max_y") {
        if !matches!(ty, FieldType::Rectangle | FieldType::Geometry) {
            return Err(format!(
                "expected {}, found a rectangle object",
                expected_forms(ty)
            ));
        }
        only(&["min_x", "min_y", "max_x", "max_y"])?;
        return Ok(Geometry::Rect {
            min_x: get("min_x")?,
            min_y: get("min_y")?,
            max_x: get("max_x")?,
            max_y: get("max_y")?,
        });
    }
    let lon = ["x", "lon", "lng", "longitude"]
        .into_iter()
        .find(|n| has(n));
    let lat = ["y", "lat", "latitude"].into_iter().find(|n| has(n));
    if let (Some(xn), Some(yn)) = (lon, lat) {
        if !matches!(ty, FieldType::Point | FieldType::Geometry) {
            return Err(format!(
                "expected {}, found a point object",
                expected_forms(ty)
            ));
        }
        only(&[xn, yn])?;
        return Ok(Geometry::Point {
            x: get(xn)?,
            y: get(yn)?,
        });
    }
    Err(format!(
        "expected {}, found {}",
        expected_forms(ty),
        describe(&Value::Object(fields.to_vec()))
    ))
}

fn from_geojson(ty: FieldType, fields: &[(String, Value)], t: &Value) -> R<Geometry> {
    let coords = || {
        member(fields, "coordinates")
            .ok_or_else(|| "GeoJSON geometry is missing `coordinates`".to_owned())
    };
    match t.as_str() {
        Some("Point") => {
            let (x, y) = position(coords()?, "GeoJSON Point coordinates")?;
            Ok(Geometry::Point { x, y })
        }
        Some("Polygon") => {
            let g = rings(coords()?)?;
            // A polygon tracing exactly its `bbox` is a rectangle written by
            // `to_json`.
            if ty == FieldType::Geometry
                && let Some(Value::Array(b)) = member(fields, "bbox")
                && b.len() == 4
                && let Some(Geometry::Rect {
                    min_x,
                    min_y,
                    max_x,
                    max_y,
                }) = g.as_rect()
            {
                let bbox: Vec<Option<f64>> = b.iter().map(Value::as_f64).collect();
                if bbox == [Some(min_x), Some(min_y), Some(max_x), Some(max_y)] {
                    return Ok(Geometry::rect(min_x, min_y, max_x, max_y));
                }
            }
            Ok(g)
        }
        Some("Feature") => match member(fields, "geometry") {
            Some(Value::Object(inner)) => match member(inner, "type") {
                Some(t2) => from_geojson(ty, inner, t2),
                None => Err("GeoJSON Feature geometry has no `type`".to_owned()),
            },
            Some(other) => Err(format!(
                "GeoJSON Feature `geometry` must be a geometry object, found {}",
                describe(other)
            )),
            None => Err("GeoJSON Feature has no `geometry`".to_owned()),
        },
        Some(other) => Err(format!(
            "expected {}, found unsupported GeoJSON type `{other}` (supported: Point, Polygon)",
            expected_forms(ty)
        )),
        None => Err(format!(
            "expected {}, found object whose `type` is {}, not a GeoJSON type name",
            expected_forms(ty),
            describe(t)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{from_json, parse_json_record};
    use serde_json::json;

    fn c(ty: FieldType, j: serde_json::Value) -> Result<Value> {
        coerce("f", ty, from_json(&j))
    }

    fn err(ty: FieldType, j: serde_json::Value) -> String {
        let e = c(ty, j).unwrap_err();
        match &e {
            Error::InvalidRecord { field, .. } => assert_eq!(field.as_deref(), Some("f")),
            other => panic!("{other:?}"),
        }
        e.to_string()
    }

    fn pt(x: f64, y: f64) -> Value {
        Value::Geometry(Geometry::point(x, y))
    }

    fn rect(a: f64, b: f64, c: f64, d: f64) -> Value {
        Value::Geometry(Geometry::rect(a, b, c, d))
    }

    #[test]
    fn parse_types() {
        for (s, t) in [
            ("int", FieldType::Int),
            ("INT64", FieldType::Int),
            ("bigint", FieldType::Int),
            ("double", FieldType::Double),
            ("float", FieldType::Double),
            ("string", FieldType::String),
            ("text", FieldType::String),
            ("bool", FieldType::Bool),
            ("boolean", FieldType::Bool),
            ("binary", FieldType::Binary),
            ("point", FieldType::Point),
            ("rectangle", FieldType::Rectangle),
            ("rect", FieldType::Rectangle),
            ("polygon", FieldType::Polygon),
            (" geometry ", FieldType::Geometry),
            ("any", FieldType::Any),
        ] {
            assert_eq!(FieldType::parse(s).unwrap(), t, "{s}");
            assert_eq!(FieldType::parse(&t.to_string()).unwrap(), t);
            let ser = serde_json::to_string(&t).unwrap();
            assert_eq!(ser, format!("\"{t}\""));
            assert_eq!(serde_json::from_str::<FieldType>(&ser).unwrap(), t);
        }
        let e = FieldType::parse("varchar").unwrap_err().to_string();
        assert!(
            e.contains("unknown type `varchar`") && e.contains("rectangle"),
            "{e}"
        );
        assert!(FieldType::Int.is_key_type() && !FieldType::Point.is_key_type());
        assert!(FieldType::Rectangle.matches(&rect(0.0, 0.0, 1.0, 1.0)));
        assert!(!FieldType::Point.matches(&rect(0.0, 0.0, 1.0, 1.0)));
        assert!(FieldType::Int.matches(&Value::Null));
    }

    #[test]
    fn scalars() {
        assert_eq!(c(FieldType::Int, json!(5)).unwrap(), Value::Int(5));
        assert_eq!(c(FieldType::Int, json!(5.0)).unwrap(), Value::Int(5));
        assert_eq!(c(FieldType::Int, json!(-0.0)).unwrap(), Value::Int(0));
        assert!(err(FieldType::Int, json!(5.5)).contains("double 5.5, which is not an integer"));
        assert!(err(FieldType::Int, json!(1e19)).contains("not an integer in the int64 range"));
        assert!(err(FieldType::Int, json!("5")).contains("expected int, found string \"5\""));
        assert_eq!(c(FieldType::Double, json!(5)).unwrap(), Value::Double(5.0));
        assert_eq!(
            c(FieldType::Double, json!(2.5)).unwrap(),
            Value::Double(2.5)
        );
        assert!(err(FieldType::Double, json!(true)).contains("expected double, found bool true"));
        assert_eq!(c(FieldType::Bool, json!(true)).unwrap(), Value::Bool(true));
        assert!(err(FieldType::Bool, json!(1)).contains("expected bool, found int 1"));
        assert_eq!(c(FieldType::String, json!("x")).unwrap(), "x".into());
        assert!(err(FieldType::String, json!([1, 2])).contains("found array of 2 elements"));
        assert_eq!(
            c(FieldType::Binary, json!("AAEC")).unwrap(),
            Value::Binary(vec![0, 1, 2])
        );
        assert_eq!(
            c(FieldType::Binary, json!("-_8")).unwrap(),
            Value::Binary(vec![0xfb, 0xff])
        );
        assert_eq!(
            c(FieldType::Binary, json!({"$binary": "AAE="})).unwrap(),
            Value::Binary(vec![0, 1])
        );
        assert!(err(FieldType::Binary, json!("not base64!")).contains("not base64"));
        assert!(err(FieldType::Binary, json!(3)).contains("expected binary"));
        for ty in [FieldType::Int, FieldType::Point, FieldType::String] {
            assert_eq!(c(ty, json!(null)).unwrap(), Value::Null);
        }
        let any = from_json(&json!({"a": [1, "x"]}));
        assert_eq!(coerce("f", FieldType::Any, any.clone()).unwrap(), any);
        let e = err(FieldType::Int, json!({"a": 1}));
        assert!(
            e.contains("(field `f`)") && e.contains("object with members a"),
            "{e}"
        );
    }

    #[test]
    fn point_forms() {
        let want = pt(-122.5, 37.25);
        for j in [
            json!([-122.5, 37.25]),
            json!({"x": -122.5, "y": 37.25}),
            json!({"lon": -122.5, "lat": 37.25}),
            json!({"lng": -122.5, "latitude": 37.25}),
            json!({"type": "Point", "coordinates": [-122.5, 37.25]}),
            json!({"type": "Feature", "properties": {}, "geometry": {"type": "Point", "coordinates": [-122.5, 37.25]}}),
            json!("POINT(-122.5 37.25)"),
            json!("point (-122.5   37.25)"),
        ] {
            assert_eq!(c(FieldType::Point, j.clone()).unwrap(), want, "{j}");
            assert_eq!(c(FieldType::Geometry, j.clone()).unwrap(), want, "{j}");
        }
        assert_eq!(c(FieldType::Point, json!([1, 2])).unwrap(), pt(1.0, 2.0));
        assert_eq!(coerce("f", FieldType::Point, want.clone()).unwrap(), want);
    }

    #[test]
    fn point_errors() {
        for (j, want) in [
            (json!([1, 2, 3]), "only 2-D"),
            (json!([1]), "found array of 1 elements"),
            (json!(["a", 2]), "expected point"),
            (json!({"x": 1}), "expected point"),
            (json!({"x": 1, "y": 2, "z": 3}), "unexpected member `z`"),
            (
                json!({"x": "1", "y": 2}),
                "x must be a number, found string \"1\"",
            ),
            (json!({"type": "Point"}), "missing `coordinates`"),
            (
                json!({"type": "Point", "coordinates": [1, 2, 3]}),
                "only 2-D",
            ),
            (
                json!({"type": "LineString", "coordinates": []}),
                "unsupported GeoJSON type `LineString`",
            ),
            (json!({"type": 5}), "not a GeoJSON type name"),
            (json!("POINT(1)"), "not valid WKT: expected a number"),
            (json!("hello"), "not valid WKT"),
            (json!(true), "expected point ([x, y]"),
            (
                json!({"min_x": 0, "min_y": 0, "max_x": 1, "max_y": 1}),
                "found a rectangle object",
            ),
            (
                json!("POLYGON((0 0, 1 0, 1 1, 0 0))"),
                "found polygon POLYGON",
            ),
        ] {
            let j_text = j.to_string();
            let e = match c(FieldType::Point, j) {
                Ok(v) => panic!("{j_text}: accepted as {v:?}"),
                Err(e) => e.to_string(),
            };
            assert!(e.contains(want), "{j_text}: {e}");
            assert!(e.contains("(field `f`)"), "{e}");
        }
        let e = coerce("loc", FieldType::Point, pt(f64::NAN, 1.0))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("(field `loc`)") && e.contains("non-finite"),
            "{e}"
        );
        let e = coerce(
            "loc",
            FieldType::Point,
            Value::Array(vec![Value::Double(f64::INFINITY), Value::Int(0)]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("non-finite"), "{e}");
    }

    #[test]
    fn rectangle_forms() {
        let want = rect(0.0, 1.0, 2.0, 3.0);
        for j in [
            json!([0, 1, 2, 3]),
            json!({"min_x": 0, "min_y": 1, "max_x": 2, "max_y": 3}),
            json!({"type": "Polygon", "coordinates": [[[0, 1], [2, 1], [2, 3], [0, 3], [0, 1]]]}),
            json!({"type": "Polygon", "coordinates": [[[0, 1], [0, 3], [2, 3], [2, 1], [0, 1]]]}),
            json!("POLYGON((2 3, 0 3, 0 1, 2 1, 2 3))"),
        ] {
            assert_eq!(c(FieldType::Rectangle, j.clone()).unwrap(), want, "{j}");
        }
        assert_eq!(c(FieldType::Geometry, json!([0, 1, 2, 3])).unwrap(), want);
        // What to_json writes for a rectangle comes back as a rectangle.
        let j = crate::value::to_json(&want);
        assert_eq!(c(FieldType::Geometry, j.clone()).unwrap(), want);
        assert_eq!(c(FieldType::Rectangle, j.clone()).unwrap(), want);
        // ...and as a polygon where a polygon is declared.
        assert!(matches!(
            c(FieldType::Polygon, j).unwrap(),
            Value::Geometry(Geometry::Polygon { .. })
        ));
        // A plain box polygon stays a polygon for `geometry`.
        assert!(matches!(
            c(
                FieldType::Geometry,
                json!("POLYGON((2 3, 0 3, 0 1, 2 1, 2 3))")
            )
            .unwrap(),
            Value::Geometry(Geometry::Polygon { .. })
        ));
    }

    #[test]
    fn rectangle_errors() {
        for (j, want) in [
            (json!([2, 1, 0, 3]), "min_x 2 is greater than max_x 0"),
            (
                json!({"min_x": 0, "min_y": 1, "max_x": 2}),
                "missing member `max_y`",
            ),
            (
                json!({"min_x": 0, "min_y": 1, "max_x": 2, "max_y": 3, "srid": 4}),
                "unexpected member `srid`",
            ),
            (
                json!({"type": "Polygon", "coordinates": [[[0, 0], [2, 1], [2, 3], [0, 3], [0, 0]]]}),
                "not an axis-aligned box",
            ),
            (json!("POLYGON((0 0, 1 0, 1 1, 0 1))"), "not closed"),
            (json!([1, 2]), "expected rectangle"),
            (json!("POINT(1 2)"), "found point POINT(1 2)"),
            (json!([0, 1, 2, "x"]), "expected rectangle"),
        ] {
            let e = err(FieldType::Rectangle, j.clone());
            assert!(e.contains(want), "{j}: {e}");
        }
    }

    #[test]
    fn polygon_forms() {
        let ring = vec![(0.0, 0.0), (4.0, 0.0), (4.0, 4.0), (0.0, 0.0)];
        let hole = vec![(1.0, 0.5), (2.0, 0.5), (2.0, 1.0), (1.0, 0.5)];
        let want = Value::Geometry(Geometry::Polygon {
            exterior: ring.clone(),
            holes: vec![hole.clone()],
        });
        for j in [
            json!({"type": "Polygon", "coordinates": [[[0, 0], [4, 0], [4, 4], [0, 0]], [[1, 0.5], [2, 0.5], [2, 1], [1, 0.5]]]}),
            json!("POLYGON((0 0, 4 0, 4 4, 0 0), (1 0.5, 2 0.5, 2 1, 1 0.5))"),
            json!([
                [[0, 0], [4, 0], [4, 4], [0, 0]],
                [[1, 0.5], [2, 0.5], [2, 1], [1, 0.5]]
            ]),
        ] {
            assert_eq!(c(FieldType::Polygon, j.clone()).unwrap(), want, "{j}");
            assert_eq!(c(FieldType::Geometry, j.clone()).unwrap(), want, "{j}");
        }
        let single = Value::Geometry(Geometry::Polygon {
            exterior: ring,
            holes: vec![],
        });
        assert_eq!(
            c(FieldType::Polygon, json!([[0, 0], [4, 0], [4, 4], [0, 0]])).unwrap(),
            single
        );
        // A rectangle is converted to its polygon.
        let r = coerce("f", FieldType::Polygon, rect(0.0, 0.0, 1.0, 1.0)).unwrap();
        assert_eq!(
            r,
            Value::Geometry(Geometry::Polygon {
                exterior: vec![(0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0), (0.0, 0.0)],
                holes: vec![]
            })
        );
    }

    #[test]
    fn polygon_errors() {
        for (j, want) in [
            (
                json!({"type": "Polygon", "coordinates": [[[0, 0], [4, 0], [4, 4]]]}),
                "at least 4",
            ),
            (
                json!({"type": "Polygon", "coordinates": [[[0, 0], [4, 0], [4, 4], [1, 1]]]}),
                "not closed: first point (0, 0) differs from last point (1, 1)",
            ),
            (
                json!({"type": "Polygon", "coordinates": []}),
                "non-empty array of rings",
            ),
            (
                json!({"type": "Polygon", "coordinates": [[[0, 0], [4, "a"]]]}),
                "exterior ring point 2 must be a number",
            ),
            (
                json!({"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0]], [[0, 0], [1, 1]]]}),
                "hole 1",
            ),
            (json!("POLYGON((0 0, 1 0, 1 1, 0 0)"), "expected `)`"),
            (
                json!("MULTIPOLYGON(((0 0, 1 0, 1 1, 0 0)))"),
                "unsupported WKT geometry type `MULTIPOLYGON`",
            ),
            (json!([1, 2]), "expected polygon"),
            (json!({"x": 1, "y": 2}), "found a point object"),
            (json!("POINT(1 2)"), "found point"),
        ] {
            let e = err(FieldType::Polygon, j.clone());
            assert!(e.contains(want), "{j}: {e}");
        }
    }

    #[test]
    fn geographic_check_names_field() {
        let e = check_geographic_field("loc", &Geometry::point(0.0, 95.0))
            .unwrap_err()
            .to_string();
        assert!(e.contains("(field `loc`)") && e.contains("latitude"), "{e}");
    }

    #[test]
    fn text_cells() {
        let t = |ty, s| coerce_text("f", ty, s);
        assert_eq!(t(FieldType::Int, " 42 ").unwrap(), Value::Int(42));
        assert_eq!(t(FieldType::Int, "42.0").unwrap(), Value::Int(42));
        assert!(
            t(FieldType::Int, "4x")
                .unwrap_err()
                .to_string()
                .contains("expected int, found text \"4x\"")
        );
        assert!(t(FieldType::Int, "4.5").is_err());
        assert_eq!(t(FieldType::Int, "").unwrap(), Value::Null);
        assert_eq!(t(FieldType::Double, "2.5").unwrap(), Value::Double(2.5));
        assert_eq!(t(FieldType::Double, "7").unwrap(), Value::Double(7.0));
        assert!(t(FieldType::Double, "x").is_err());
        assert_eq!(t(FieldType::Bool, "Yes").unwrap(), Value::Bool(true));
        assert_eq!(t(FieldType::Bool, "0").unwrap(), Value::Bool(false));
        assert!(t(FieldType::Bool, "maybe").is_err());
        assert_eq!(t(FieldType::String, " a ").unwrap(), " a ".into());
        assert_eq!(t(FieldType::String, "").unwrap(), "".into());
        assert_eq!(t(FieldType::Any, "7").unwrap(), "7".into());
        assert_eq!(
            t(FieldType::Binary, "AAE=").unwrap(),
            Value::Binary(vec![0, 1])
        );
        assert_eq!(t(FieldType::Point, "POINT(1 2)").unwrap(), pt(1.0, 2.0));
        assert_eq!(t(FieldType::Point, "[1, 2]").unwrap(), pt(1.0, 2.0));
        assert_eq!(
            t(
                FieldType::Geometry,
                r#"{"type":"Point","coordinates":[1,2]}"#
            )
            .unwrap(),
            pt(1.0, 2.0)
        );
        assert!(
            t(FieldType::Point, "[1, 2")
                .unwrap_err()
                .to_string()
                .contains("not valid JSON")
        );
    }

    #[test]
    fn from_parsed_record() {
        let rec = parse_json_record(
            r#"{"id": 1, "loc": {"type": "Point", "coordinates": [10, 20]}, "score": 3}"#,
        )
        .unwrap();
        let Value::Object(fields) = rec else { panic!() };
        let mut out = Vec::new();
        for (k, v) in fields {
            let ty = match k.as_str() {
                "loc" => FieldType::Point,
                "score" => FieldType::Double,
                _ => FieldType::Int,
            };
            out.push((k.clone(), coerce(&k, ty, v).unwrap()));
        }
        assert_eq!(out[1].1, pt(10.0, 20.0));
        assert_eq!(out[2].1, Value::Double(3.0));
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
