//! JSON conversion.
//!
//! * Numbers written as integers that fit an `i64` become [`Value::Int`];
//!   everything else (fractions, exponents, integers beyond `i64`) becomes
//!   [`Value::Double`]. So `3` is an int and `3.0` a double, and a double
//!   written out by [`to_json`] reads back as a double.
//! * [`Value::Binary`] is written as `{"$binary": "<standard base64>"}`, and an
//!   object that is exactly that (one member, valid base64) reads back as
//!   binary.
//! * [`Value::Geometry`] is written as a GeoJSON geometry object; reading it
//!   back gives an ordinary object, which [`coerce`](super::coerce) turns into
//!   a geometry for fields declared with a geometry type. A rectangle is
//!   written as a GeoJSON `Polygon` with a `bbox` member.
//! * Non-finite doubles are written as `null`.
//! * Field order: [`parse_json_record`] and `Value`'s `Deserialize` keep the
//!   order of the text and reject repeated names. `serde_json::Value` (without
//!   serde_json's `preserve_order` feature, which this crate does not enable)
//!   keeps objects sorted by name, so [`from_json`] yields fields in that map's
//!   order (sorted) and [`to_json`] loses the order of a `Value::Object`.
//!   `Value`'s `Display` and `Serialize` keep the order.

use std::fmt;

use base64::Engine;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

use super::{Geometry, MAX_DEPTH, Value, first_duplicate};
use crate::error::{Error, Result};

const BINARY_KEY: &str = "$binary";

fn b64() -> &'static base64::engine::GeneralPurpose {
    &base64::engine::general_purpose::STANDARD
}

/// Convert a `serde_json::Value`. See the module docs for numbers, binary and
/// field order.
pub fn from_json(j: &serde_json::Value) -> Value {
    match j {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                Value::Double(u as f64)
            } else {
                Value::Double(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        serde_json::Value::String(s) => Value::String(s.clone()),
        serde_json::Value::Array(a) => Value::Array(a.iter().map(from_json).collect()),
        serde_json::Value::Object(m) => {
            object_or_binary(m.iter().map(|(k, v)| (k.clone(), from_json(v))).collect())
        }
    }
}

/// An object, or the binary it stands for if it is exactly `{"$binary": b64}`.
fn object_or_binary(fields: Vec<(String, Value)>) -> Value {
    if let [(k, Value::String(s))] = fields.as_slice()
        && k == BINARY_KEY
        && let Ok(bytes) = b64().decode(s)
    {
        return Value::Binary(bytes);
    }
    Value::Object(fields)
}

/// Convert to a `serde_json::Value`: binary as `{"$binary": base64}`,
/// geometry as GeoJSON, non-finite doubles as `null`. Object field order is
/// that of `serde_json::Map` (sorted by name); for ordered text use
/// `Display` / `Serialize`. With repeated field names the last one wins.
pub fn to_json(v: &Value) -> serde_json::Value {
    match v {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Int(i) => serde_json::Value::from(*i),
        Value::Double(d) => json_f64(*d),
        Value::String(s) => serde_json::Value::String(s.clone()),
        Value::Binary(b) => {
            let mut m = serde_json::Map::new();
            m.insert(BINARY_KEY.to_owned(), b64().encode(b).into());
            serde_json::Value::Object(m)
        }
        Value::Array(a) => serde_json::Value::Array(a.iter().map(to_json).collect()),
        Value::Object(fields) => serde_json::Value::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect(),
        ),
        Value::Geometry(g) => geojson(g),
    }
}

fn json_f64(d: f64) -> serde_json::Value {
    serde_json::Number::from_f64(d).map_or(serde_json::Value::Null, serde_json::Value::Number)
}

fn json_ring(r: &[(f64, f64)]) -> serde_json::Value {
    serde_json::Value::Array(
        r.iter()
            .map(|(x, y)| serde_json::Value::Array(vec![json_f64(*x), json_f64(*y)]))
            .collect(),
    )
}

/// The GeoJSON geometry object for `g`.
fn geojson(g: &Geometry) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    match g {
        Geometry::Point { x, y } => {
            m.insert("type".into(), "Point".into());
            m.insert(
                "coordinates".into(),
                serde_json::Value::Array(vec![json_f64(*x), json_f64(*y)]),
            );
        }
        Geometry::Rect {
            min_x,
            min_y,
            max_x,
            max_y,
        } => {
            m.insert("type".into(), "Polygon".into());
            m.insert(
                "bbox".into(),
                serde_json::Value::Array(
                    [min_x, min_y, max_x, max_y]
                        .iter()
                        .map(|c| json_f64(**c))
                        .collect(),
                ),
            );
            m.insert(
                "coordinates".into(),
                serde_json::Value::Array(vec![json_ring(&super::geometry::box_ring(
                    *min_x, *min_y, *max_x, *max_y,
                ))]),
            );
        }
        Geometry::Polygon { exterior, holes } => {
            m.insert("type".into(), "Polygon".into());
            m.insert(
                "coordinates".into(),
                serde_json::Value::Array(
                    std::iter::once(exterior)
                        .chain(holes)
                        .map(|r| json_ring(r))
                        .collect(),
                ),
            );
        }
    }
    serde_json::Value::Object(m)
}

/// Parse one JSON record (for example one line of a JSON-lines file).
///
/// The text must be a single JSON object. Field order is kept; repeated
/// field names, nesting deeper than [`MAX_DEPTH`] and trailing text are
/// errors. Errors are [`Error::Parse`] with `what` = `JSON record` and the
/// serde_json reason with its column (the line is mentioned only if the text
/// spans several lines), so a caller can prefix its own line number.
pub fn parse_json_record(text: &str) -> Result<Value> {
    let parse_err = |reason: String| Error::Parse {
        what: "JSON record".to_owned(),
        reason,
    };
    let v: Value = serde_json::from_str(text).map_err(|e| parse_err(json_reason(&e)))?;
    match &v {
        Value::Object(_) => {}
        other => {
            return Err(parse_err(format!(
                "expected a JSON object, found {}",
                json_kind(other)
            )));
        }
    }
    let depth = v.depth();
    if depth > MAX_DEPTH {
        return Err(parse_err(format!(
            "nested {depth} levels deep; the limit is {MAX_DEPTH}"
        )));
    }
    Ok(v)
}

/// serde_json's message with the position rewritten as `at column C` when
/// the line is 1.
fn json_reason(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match full.strip_suffix(&suffix) {
        Some(msg) if e.line() <= 1 => format!("{msg} at column {}", e.column()),
        _ => full,
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Int(_) | Value::Double(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        _ => "an object",
    }
}

// ---------------------------------------------------------------------------
// serde

struct F(f64);

impl Serialize for F {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        if self.0.is_finite() {
            s.serialize_f64(self.0)
        } else {
            s.serialize_unit()
        }
    }
}

struct Ring<'a>(&'a [(f64, f64)]);

impl Serialize for Ring<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for (x, y) in self.0 {
            seq.serialize_element(&[F(*x), F(*y)])?;
        }
        seq.end()
    }
}

struct Rings<'a>(&'a [(f64, f64)], &'a [Vec<(f64, f64)>]);

impl Serialize for Rings<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(1 + self.1.len()))?;
        seq.serialize_element(&Ring(self.0))?;
        for h in self.1 {
            seq.serialize_element(&Ring(h))?;
        }
        seq.end()
    }
}

impl Serialize for Geometry {
    /// GeoJSON geometry object (a rectangle as a `Polygon` with `bbox`).
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Geometry::Point { x, y } => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("type", "Point")?;
                m.serialize_entry("coordinates", &[F(*x), F(*y)])?;
                m.end()
            }
            Geometry::Rect {
                min_x,
                min_y,
                max_x,
                max_y,
            } => {
                let ring = super::geometry::box_ring(*min_x, *min_y, *max_x, *max_y);
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("type", "Polygon")?;
                m.serialize_entry("bbox", &[F(*min_x), F(*min_y), F(*max_x), F(*max_y)])?;
                m.serialize_entry("coordinates", &Rings(&ring, &[]))?;
                m.end()
            }
            Geometry::Polygon { exterior, holes } => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("type", "Polygon")?;
                m.serialize_entry("coordinates", &Rings(exterior, holes))?;
                m.end()
            }
        }
    }
}

impl Serialize for Value {
    /// The JSON form: fields in order, binary as `{"$binary": base64}`,
    /// geometry as GeoJSON, non-finite doubles as `null`.
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Int(i) => s.serialize_i64(*i),
            Value::Double(d) => F(*d).serialize(s),
            Value::String(v) => s.serialize_str(v),
            Value::Binary(b) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry(BINARY_KEY, &b64().encode(b))?;
                m.end()
            }
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Value::Object(fields) => {
                let mut m = s.serialize_map(Some(fields.len()))?;
                for (k, v) in fields {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
            Value::Geometry(g) => g.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Value {
    /// Reads any self-describing format (JSON in practice): keeps object
    /// field order, rejects repeated field names, turns `{"$binary": b64}`
    /// into binary, and integers beyond `i64` into doubles.
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> std::result::Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> std::result::Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Value, D::Error> {
        Value::deserialize(d)
    }

    fn visit_bool<E>(self, b: bool) -> std::result::Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, i: i64) -> std::result::Result<Value, E> {
        Ok(Value::Int(i))
    }

    fn visit_u64<E>(self, u: u64) -> std::result::Result<Value, E> {
        Ok(i64::try_from(u).map_or(Value::Double(u as f64), Value::Int))
    }

    fn visit_f64<E>(self, f: f64) -> std::result::Result<Value, E> {
        Ok(Value::Double(f))
    }

    fn visit_str<E>(self, s: &str) -> std::result::Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> std::result::Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_bytes<E>(self, b: &[u8]) -> std::result::Result<Value, E> {
        Ok(Value::Binary(b.to_vec()))
    }

    fn visit_byte_buf<E>(self, b: Vec<u8>) -> std::result::Result<Value, E> {
        Ok(Value::Binary(b))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(v) = seq.next_element::<Value>()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Value, A::Error> {
        let mut fields: Vec<(String, Value)> =
            Vec::with_capacity(map.size_hint().unwrap_or(0).min(1024));
        // Small objects are checked by a linear scan as they are read; larger
        // ones once at the end.
        while let Some(k) = map.next_key::<String>()? {
            if fields.len() < 16 && fields.iter().any(|(p, _)| *p == k) {
                return Err(de::Error::custom(format!("duplicate field `{k}`")));
            }
            let v = map.next_value::<Value>()?;
            fields.push((k, v));
        }
        if fields.len() > 16
            && let Some(dup) = first_duplicate(&fields)
        {
            return Err(de::Error::custom(format!("duplicate field `{dup}`")));
        }
        Ok(object_or_binary(fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::testgen::arb_json_value;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn numbers() {
        let v = parse_json_record(
            r#"{"a": 3, "b": 3.0, "c": -9223372036854775808, "d": 18446744073709551615, "e": 1e3, "f": 1e400}"#,
        );
        let e = v.unwrap_err().to_string();
        assert!(e.contains("number out of range at column"), "{e}");
        let v = parse_json_record(
            r#"{"a": 3, "b": 3.0, "c": -9223372036854775808, "d": 18446744073709551615, "e": 1e3}"#,
        )
        .unwrap();
        assert_eq!(v.get("a"), Some(&Value::Int(3)));
        assert_eq!(v.get("b"), Some(&Value::Double(3.0)));
        assert_eq!(v.get("c"), Some(&Value::Int(i64::MIN)));
        assert_eq!(v.get("d"), Some(&Value::Double(18446744073709551615.0)));
        assert_eq!(v.get("e"), Some(&Value::Double(1000.0)));
        let j = json!({"a": 3, "b": 3.0, "d": 18446744073709551615u64});
        let v = from_json(&j);
        assert_eq!(v.get("a"), Some(&Value::Int(3)));
        assert_eq!(v.get("b"), Some(&Value::Double(3.0)));
        assert_eq!(v.get("d"), Some(&Value::Double(18446744073709551615.0)));
    }

    #[test]
    fn order_duplicates_and_errors() {
        let v = parse_json_record(r#"{"z": 1, "a": {"y": 2, "b": 3}}"#).unwrap();
        assert_eq!(v.to_string(), r#"{"z":1,"a":{"y":2,"b":3}}"#);
        let e = parse_json_record(r#"{"a": 1, "b": 2, "a": 3}"#).unwrap_err();
        assert!(matches!(e, Error::Parse { .. }));
        assert!(
            e.to_string().contains("duplicate field `a` at column"),
            "{e}"
        );
        let big: Vec<String> = (0..20).map(|i| format!("\"f{i}\": {i}")).collect();
        let text = format!("{{{}, \"f3\": 0}}", big.join(", "));
        let e = parse_json_record(&text).unwrap_err();
        assert!(e.to_string().contains("duplicate field `f3`"), "{e}");
        for (text, want) in [
            ("[1, 2]", "expected a JSON object, found an array"),
            ("42", "found a number"),
            ("", "EOF while parsing a value at column 0"),
            ("{\"a\": }", "expected value at column 7"),
            ("{} {}", "trailing characters at column 4"),
            ("{\"a\":\n nope}", "line 2"),
        ] {
            let e = parse_json_record(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
            assert!(e.starts_with("cannot parse JSON record: "), "{e}");
        }
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(64), "]".repeat(64));
        let e = parse_json_record(&deep).unwrap_err().to_string();
        assert!(e.contains("limit is 64"), "{e}");
        let ok = format!("{{\"a\":{}1{}}}", "[".repeat(63), "]".repeat(63));
        parse_json_record(&ok).unwrap();
    }

    #[test]
    fn binary_and_geometry() {
        let v = Value::Object(vec![
            ("b".into(), Value::Binary(vec![0, 1, 2, 250])),
            ("p".into(), Value::Geometry(Geometry::point(1.5, -2.0))),
            (
                "r".into(),
                Value::Geometry(Geometry::rect(0.0, 1.0, 2.0, 3.0)),
            ),
            (
                "poly".into(),
                Value::Geometry(Geometry::Polygon {
                    exterior: vec![(0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (0.0, 0.0)],
                    holes: vec![],
                }),
            ),
            ("nan".into(), Value::Double(f64::NAN)),
        ]);
        let j = to_json(&v);
        assert_eq!(j["b"], json!({"$binary": "AAEC+g=="}));
        assert_eq!(j["p"], json!({"type": "Point", "coordinates": [1.5, -2.0]}));
        assert_eq!(
            j["r"],
            json!({"type": "Polygon", "bbox": [0.0, 1.0, 2.0, 3.0],
                   "coordinates": [[[0.0, 1.0], [2.0, 1.0], [2.0, 3.0], [0.0, 3.0], [0.0, 1.0]]]})
        );
        assert_eq!(
            j["poly"],
            json!({"type": "Polygon", "coordinates": [[[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]]})
        );
        assert_eq!(j["nan"], serde_json::Value::Null);
        // Display agrees with to_json (modulo order).
        let reparsed: serde_json::Value = serde_json::from_str(&v.to_string()).unwrap();
        assert_eq!(reparsed, j);
        // Binary comes back; geometry comes back as a GeoJSON object.
        let back = from_json(&j);
        assert_eq!(back.get("b"), Some(&Value::Binary(vec![0, 1, 2, 250])));
        assert_eq!(back.get("p.type"), Some(&Value::String("Point".into())));
        let parsed = parse_json_record(&v.to_string()).unwrap();
        assert_eq!(parsed.get("b"), Some(&Value::Binary(vec![0, 1, 2, 250])));
        // Not quite the marker: stays an object.
        let o = from_json(&json!({"$binary": "!!"}));
        assert!(matches!(o, Value::Object(_)));
        let o = from_json(&json!({"$binary": "AA==", "x": 1}));
        assert!(matches!(o, Value::Object(_)));
    }

    fn sorted(v: Value) -> Value {
        match v {
            Value::Array(a) => Value::Array(a.into_iter().map(sorted).collect()),
            Value::Object(mut f) => {
                f.sort_by(|a, b| a.0.cmp(&b.0));
                Value::Object(f.into_iter().map(|(k, v)| (k, sorted(v))).collect())
            }
            other => other,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn prop_json_round_trip(v in arb_json_value()) {
            // Through serde_json::Value: order becomes sorted.
            prop_assert_eq!(from_json(&to_json(&v)), sorted(v.clone()));
            // Through text: order kept.
            let text = v.to_string();
            let back: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(back, v);
        }
    }
}
