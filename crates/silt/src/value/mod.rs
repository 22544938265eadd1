//! Record values and their encodings.
//!
//! * [`Value`]: the in-memory form of a record and of its fields.
//! * [`encode_value`] / [`decode_value`] / [`decode_field`]: the compact binary
//!   form records are stored in (see `encoding.rs` for the format).
//! * [`encode_key`] / [`decode_key`]: an order-preserving encoding of key tuples,
//!   so that byte order of encoded keys is the logical order of the tuples
//!   (see `key.rs` for the format and the ordering of numbers).
//! * [`from_json`] / [`to_json`] / [`parse_json_record`]: JSON conversion.
//! * [`FieldType`] / [`coerce`]: declared field types and the conversions a
//!   dataset applies to incoming values.
//! * [`Geometry`]: points, rectangles and polygons.
//!
//! Design decisions worth knowing:
//!
//! * `Int(3)` and `Double(3.0)` are different values (`!=`), but in keys all
//!   numbers share one numeric order; see [`encode_key`].
//! * Doubles compare by their bits with every NaN treated as one value, so
//!   `-0.0 != 0.0` and `NaN == NaN`; this makes `Value` `Eq` and `Hash`.
//! * Object fields keep the order they were given in. Field names are unique
//!   when parsed from JSON ([`parse_json_record`], [`Value::try_object`]);
//!   a programmatically built object with repeated names is stored as it is,
//!   and lookups ([`Value::get`], [`decode_field`]) return the first match.

pub mod array;
mod coerce;
pub mod decimal;
mod encoding;
mod geometry;
pub mod interval;
mod json;
mod key;
pub mod temporal;

use std::fmt;
use std::hash::{Hash, Hasher};

use crate::error::{Error, Result};

pub use coerce::{
    DEFAULT_DECIMAL, ELEMENT_TYPES, ElementType, FieldType, check_geographic_field, coerce,
    coerce_text,
};
pub use encoding::{
    FieldView, decode_field, decode_value, encode_fields, encode_raw_fields, encode_record,
    encode_value, encoded_len, for_each_raw_field, visit_fields,
};
pub use geometry::{Geometry, check_geographic};
pub use json::{from_json, parse_json_record, to_json};
pub use key::{
    KEY_PREFIX_END, MAX_KEY_BYTES, compare_key_parts, compare_keys, decode_key, encode_key,
    encode_key_part, key_parts_len, key_to_string, prefix_upper_bound,
};

use geometry::canonical_bits;

/// Maximum nesting depth of arrays and objects in a record. The top-level
/// object counts as depth 1. Deeper values are rejected when parsed and when
/// decoded, which also bounds recursion on adversarial input.
pub const MAX_DEPTH: usize = 64;

/// A record or field value.
#[derive(Clone, Debug, Default)]
pub enum Value {
    /// Absent / JSON `null`.
    #[default]
    Null,
    /// A boolean.
    Bool(bool),
    /// A 64-bit signed integer.
    Int(i64),
    /// A 64-bit float (may be non-finite; JSON renders those as `null`).
    Double(f64),
    /// UTF-8 text.
    String(String),
    /// Raw bytes (JSON form: `{"$binary": "<base64>"}`).
    Binary(Vec<u8>),
    /// An ordered list.
    Array(Vec<Value>),
    /// Named fields in the order given. Names should be unique; see the module docs.
    Object(Vec<(String, Value)>),
    /// A spatial value.
    Geometry(Geometry),
}

impl PartialEq for Value {
    /// Structural equality. Doubles compare by bits with all NaNs equal
    /// (`-0.0 != 0.0`); `Int(1) != Double(1.0)`; object field order matters.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Value::Null, Value::Null) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Double(a), Value::Double(b)) => canonical_bits(*a) == canonical_bits(*b),
            (Value::String(a), Value::String(b)) => a == b,
            (Value::Binary(a), Value::Binary(b)) => a == b,
            (Value::Array(a), Value::Array(b)) => a == b,
            (Value::Object(a), Value::Object(b)) => a == b,
            (Value::Geometry(a), Value::Geometry(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Value {}

impl Hash for Value {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Value::Null => {}
            Value::Bool(b) => b.hash(state),
            Value::Int(i) => i.hash(state),
            Value::Double(d) => canonical_bits(*d).hash(state),
            Value::String(s) => s.hash(state),
            Value::Binary(b) => b.hash(state),
            Value::Array(a) => a.hash(state),
            Value::Object(o) => o.hash(state),
            Value::Geometry(g) => g.hash(state),
        }
    }
}

impl fmt::Display for Value {
    /// Compact JSON text, object fields in order, binary as `{"$binary": ...}`,
    /// geometry as GeoJSON, non-finite doubles as `null`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        f.write_str(&s)
    }
}

impl Value {
    /// Look up a field of an object.
    ///
    /// A top-level field whose name is exactly `field` wins. Otherwise, if
    /// `field` contains dots, it is a path: each segment names an object field
    /// or, made only of ASCII digits, an array index (`"user.tags.0"`).
    /// Returns `None` for non-objects and missing fields. With repeated field
    /// names the first one is found.
    pub fn get(&self, field: &str) -> Option<&Value> {
        let Value::Object(fields) = self else {
            return None;
        };
        if let Some((_, v)) = fields.iter().find(|(k, _)| k == field) {
            return Some(v);
        }
        if !field.contains('.') {
            return None;
        }
        let mut cur = self;
        for seg in field.split('.') {
            cur = cur.child(seg)?;
        }
        Some(cur)
    }

    /// One step of a path: an object field or an array index.
    fn child(&self, seg: &str) -> Option<&Value> {
        match self {
            Value::Object(fields) => fields.iter().find(|(k, _)| k == seg).map(|(_, v)| v),
            Value::Array(items) => parse_index(seg).and_then(|i| items.get(i)),
            _ => None,
        }
    }

    /// Build an object, rejecting repeated field names.
    pub fn try_object(fields: Vec<(String, Value)>) -> Result<Value> {
        if let Some(dup) = first_duplicate(&fields) {
            return Err(Error::invalid(
                Some(dup),
                format!("field `{dup}` appears more than once"),
            ));
        }
        Ok(Value::Object(fields))
    }

    /// Type name for messages: `null`, `bool`, `int`, `double`, `string`,
    /// `binary`, `array`, `object`, `point`, `rectangle` or `polygon`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Double(_) => "double",
            Value::String(_) => "string",
            Value::Binary(_) => "binary",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
            Value::Geometry(g) => g.type_name(),
        }
    }

    /// `true` for [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The boolean, if this is a `Bool`.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The integer, if this is an `Int` (doubles are not converted).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The number as a double, if this is a `Double` or an `Int` (large
    /// integers round to the nearest double).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Double(d) => Some(*d),
            _ => None,
        }
    }

    /// The text, if this is a `String`.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The bytes, if this is a `Binary`.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Binary(b) => Some(b),
            _ => None,
        }
    }

    /// The elements, if this is an `Array`.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The fields, if this is an `Object`.
    pub fn as_object(&self) -> Option<&[(String, Value)]> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The geometry, if this is a `Geometry`.
    pub fn as_geometry(&self) -> Option<&Geometry> {
        match self {
            Value::Geometry(g) => Some(g),
            _ => None,
        }
    }

    /// Nesting depth: 0 for scalars (geometry included), 1 for an array or
    /// object of scalars, and so on. Iterative, so it is safe on deep values.
    pub fn depth(&self) -> usize {
        fn container(v: &&Value) -> bool {
            matches!(v, Value::Array(_) | Value::Object(_))
        }
        // Only containers are pushed (a scalar child is as deep as the
        // container holding it, which already counted that level), so a flat
        // record allocates nothing: this runs for every record written.
        let mut max = 0;
        let mut stack: Vec<(&Value, usize)> = Vec::new();
        let mut next = Some((self, 0));
        while let Some((v, d)) = next.take().or_else(|| stack.pop()) {
            match v {
                Value::Array(items) => {
                    max = max.max(d + 1);
                    stack.extend(items.iter().filter(container).map(|c| (c, d + 1)));
                }
                Value::Object(fields) => {
                    max = max.max(d + 1);
                    stack.extend(
                        fields
                            .iter()
                            .map(|(_, c)| c)
                            .filter(container)
                            .map(|c| (c, d + 1)),
                    );
                }
                _ => {}
            }
        }
        max
    }

    /// A cheap guess of the encoded size of a record, to size its buffer
    /// once: field names and top-level string / binary payloads plus a few
    /// bytes per field (not recursive: nested values may be arbitrarily
    /// deep until `encode_record` refuses them).
    pub(crate) fn encoded_len_hint(&self) -> usize {
        let one = |v: &Value| match v {
            Value::String(s) => s.len() + 5,
            Value::Binary(b) => b.len() + 5,
            _ => 24,
        };
        match self {
            Value::Object(fields) => {
                16 + fields
                    .iter()
                    .map(|(n, v)| n.len() + 5 + one(v))
                    .sum::<usize>()
            }
            v => one(v),
        }
    }
}

/// A path segment that is an array index: ASCII digits only, no sign.
pub(crate) fn parse_index(seg: &str) -> Option<usize> {
    if seg.is_empty() || !seg.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    seg.parse().ok()
}

/// The first field name that appears twice, if any.
pub(crate) fn first_duplicate(fields: &[(String, Value)]) -> Option<&str> {
    if fields.len() <= 16 {
        for (i, (k, _)) in fields.iter().enumerate() {
            if fields[..i].iter().any(|(p, _)| p == k) {
                return Some(k);
            }
        }
        None
    } else {
        let mut seen = std::collections::HashSet::with_capacity(fields.len());
        fields
            .iter()
            .find(|(k, _)| !seen.insert(k.as_str()))
            .map(|(k, _)| k.as_str())
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<i32> for Value {
    fn from(i: i32) -> Self {
        Value::Int(i64::from(i))
    }
}

impl From<f64> for Value {
    fn from(d: f64) -> Self {
        Value::Double(d)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}

impl From<Vec<u8>> for Value {
    fn from(b: Vec<u8>) -> Self {
        Value::Binary(b)
    }
}

impl From<Geometry> for Value {
    fn from(g: Geometry) -> Self {
        Value::Geometry(g)
    }
}

#[cfg(test)]
pub(crate) mod testgen;

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(fields: Vec<(&str, Value)>) -> Value {
        Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
    }

    #[test]
    fn get_paths() {
        let v = obj(vec![
            ("a", Value::Int(1)),
            ("a.b", Value::Int(2)),
            (
                "user",
                obj(vec![
                    ("name", "x".into()),
                    (
                        "tags",
                        Value::Array(vec!["t0".into(), obj(vec![("k", Value::Bool(true))])]),
                    ),
                ]),
            ),
        ]);
        assert_eq!(v.get("a"), Some(&Value::Int(1)));
        assert_eq!(v.get("a.b"), Some(&Value::Int(2)));
        assert_eq!(v.get("user.name"), Some(&"x".into()));
        assert_eq!(v.get("user.tags.0"), Some(&"t0".into()));
        assert_eq!(v.get("user.tags.1.k"), Some(&Value::Bool(true)));
        assert_eq!(v.get("user.tags.+1"), None);
        assert_eq!(v.get("user.tags.7"), None);
        assert_eq!(v.get("user.missing"), None);
        assert_eq!(v.get("nope"), None);
        assert_eq!(Value::Int(3).get("a"), None);
    }

    #[test]
    fn equality_and_accessors() {
        assert_ne!(Value::Int(1), Value::Double(1.0));
        assert_eq!(Value::Double(f64::NAN), Value::Double(-f64::NAN));
        assert_ne!(Value::Double(0.0), Value::Double(-0.0));
        assert_eq!(Value::Int(7).as_f64(), Some(7.0));
        assert_eq!(Value::Double(7.0).as_i64(), None);
        assert_eq!(Value::from("s").as_str(), Some("s"));
        assert_eq!(
            Value::Geometry(Geometry::point(0.0, 0.0)).type_name(),
            "point"
        );
        assert!(Value::Null.is_null());
    }

    #[test]
    fn depth_and_duplicates() {
        assert_eq!(Value::Int(1).depth(), 0);
        assert_eq!(Value::Array(vec![]).depth(), 1);
        assert_eq!(
            obj(vec![("a", Value::Array(vec![Value::Object(vec![])]))]).depth(),
            3
        );
        let e = Value::try_object(vec![
            ("a".into(), Value::Null),
            ("b".into(), Value::Null),
            ("a".into(), Value::Null),
        ])
        .unwrap_err();
        assert!(e.to_string().contains("more than once"), "{e}");
        let many: Vec<(String, Value)> = (0..40)
            .map(|i| (format!("f{}", i % 39), Value::Null))
            .collect();
        assert_eq!(first_duplicate(&many), Some("f0"));
    }

    fn depth_by_recursion(v: &Value) -> usize {
        match v {
            Value::Array(items) => 1 + items.iter().map(depth_by_recursion).max().unwrap_or(0),
            Value::Object(fields) => {
                1 + fields
                    .iter()
                    .map(|(_, c)| depth_by_recursion(c))
                    .max()
                    .unwrap_or(0)
            }
            _ => 0,
        }
    }

    proptest::proptest! {
        #[test]
        fn depth_equals_the_recursive_definition(v in super::testgen::arb_value()) {
            proptest::prop_assert_eq!(v.depth(), depth_by_recursion(&v));
        }
    }

    #[test]
    fn display_is_json() {
        let v = obj(vec![
            ("z", Value::Int(1)),
            ("a", Value::Double(f64::INFINITY)),
            ("b", Value::Binary(vec![1, 2, 3])),
            ("s", "q\"".into()),
        ]);
        assert_eq!(
            v.to_string(),
            r#"{"z":1,"a":null,"b":{"$binary":"AQID"},"s":"q\""}"#
        );
    }
}
