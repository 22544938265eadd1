//! Proptest strategies shared by the value module's tests.

use proptest::collection::vec;
use proptest::prelude::*;

use super::{Geometry, Value};

/// Any double, with the edge cases made likely.
pub fn arb_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => any::<f64>(),
        1 => prop::sample::select(vec![
            0.0,
            -0.0,
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            f64::MAX,
            f64::MIN,
            9007199254740992.0,
            9223372036854775808.0,
            -9223372036854775808.0,
        ]),
        2 => (-1000i64..1000).prop_map(|i| i as f64 / 4.0),
    ]
}

fn arb_i64() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => any::<i64>(),
        2 => -200i64..200,
        1 => prop::sample::select(vec![i64::MIN, i64::MAX, 0, 1 << 53, -(1 << 53), 1 << 62]),
    ]
}

fn arb_string() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-c\\x00\\u{ff}é]{0,4}",
        any::<String>().prop_map(|s| s.chars().take(12).collect()),
    ]
}

fn arb_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(prop::sample::select(vec![0u8, 1, 0xfe, 0xff, b'a']), 0..5),
        vec(any::<u8>(), 0..12),
    ]
}

fn arb_ring() -> impl Strategy<Value = Vec<(f64, f64)>> {
    vec((arb_f64(), arb_f64()), 0..6)
}

/// Any geometry (not necessarily valid).
pub fn arb_geometry() -> impl Strategy<Value = Geometry> {
    prop_oneof![
        (arb_f64(), arb_f64()).prop_map(|(x, y)| Geometry::Point { x, y }),
        (arb_f64(), arb_f64(), arb_f64(), arb_f64()).prop_map(|(a, b, c, d)| Geometry::Rect {
            min_x: a,
            min_y: b,
            max_x: c,
            max_y: d
        }),
        (arb_ring(), vec(arb_ring(), 0..3))
            .prop_map(|(exterior, holes)| Geometry::Polygon { exterior, holes }),
    ]
}

fn arb_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        arb_i64().prop_map(Value::Int),
        arb_f64().prop_map(Value::Double),
        arb_string().prop_map(Value::String),
        arb_bytes().prop_map(Value::Binary),
        arb_geometry().prop_map(Value::Geometry),
    ]
}

/// Field names that make dotted paths and array-index segments likely.
fn arb_name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-c]{1,2}",
        1 => Just("a.b".to_owned()),
        1 => "[0-2]",
        1 => Just(String::new()),
    ]
}

fn dedupe(fields: Vec<(String, Value)>) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = Vec::with_capacity(fields.len());
    for (k, v) in fields {
        if !out.iter().any(|(p, _)| *p == k) {
            out.push((k, v));
        }
    }
    out
}

/// Any value, nested a few levels, objects with unique names.
pub fn arb_value() -> impl Strategy<Value = Value> {
    arb_leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Value::Array),
            vec((arb_name(), inner), 0..6).prop_map(|f| Value::Object(dedupe(f))),
        ]
    })
}

/// An object record.
pub fn arb_record() -> impl Strategy<Value = Value> {
    vec((arb_name(), arb_value()), 0..8).prop_map(|f| Value::Object(dedupe(f)))
}

/// Paths that exist in `v` (up to three segments) plus some that do not.
pub fn path_candidates(v: &Value) -> Vec<String> {
    fn walk(v: &Value, prefix: &str, depth: usize, out: &mut Vec<String>) {
        if depth == 3 || out.len() > 60 {
            return;
        }
        let join = |seg: &str| {
            if prefix.is_empty() {
                seg.to_owned()
            } else {
                format!("{prefix}.{seg}")
            }
        };
        match v {
            Value::Object(fields) => {
                for (k, c) in fields {
                    let p = join(k);
                    out.push(p.clone());
                    walk(c, &p, depth + 1, out);
                }
                out.push(join("zz"));
            }
            Value::Array(items) => {
                for (i, c) in items.iter().enumerate() {
                    let p = join(&i.to_string());
                    out.push(p.clone());
                    walk(c, &p, depth + 1, out);
                }
                out.push(join(&items.len().to_string()));
            }
            _ => out.push(join("x")),
        }
    }
    let mut out = vec![
        "a".to_owned(),
        "a.b".to_owned(),
        "a.0".to_owned(),
        "a.b.c".to_owned(),
        String::new(),
        ".".to_owned(),
    ];
    walk(v, "", 0, &mut out);
    out
}

/// Values that survive a trip through JSON text unchanged.
pub fn arb_json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        arb_i64().prop_map(Value::Int),
        (-100_000i64..100_000).prop_map(|i| Value::Double(i as f64 / 1024.0)),
        Just(Value::Double(-0.0)),
        any::<String>().prop_map(Value::String),
        arb_bytes().prop_map(Value::Binary),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Value::Array),
            vec(("[a-z]{1,3}", inner), 0..6).prop_map(|f| Value::Object(dedupe(f))),
        ]
    })
}

/// Ints and doubles clustered around interesting values so that equal and
/// adjacent values across the two types are common.
pub fn arb_number() -> impl Strategy<Value = Value> {
    let bases = vec![
        0i64,
        1,
        -1,
        1000,
        (1 << 53) - 1,
        1 << 53,
        (1 << 53) + 1,
        -(1 << 53),
        1 << 54,
        1 << 62,
        -(1 << 62),
        i64::MAX,
        i64::MIN,
        i64::MAX - 1024,
        i64::MIN + 1024,
        123_456_789_123_456_789,
    ];
    let delta = prop_oneof![3 => -2i64..=2, 1 => -1100i64..1100];
    let clustered = (prop::sample::select(bases), delta, 0u8..4).prop_map(|(base, delta, kind)| {
        let i = base.saturating_add(delta);
        match kind {
            0 | 1 => Value::Int(i),
            2 => Value::Double(i as f64),
            _ => Value::Double(i as f64 + 0.5),
        }
    });
    prop_oneof![
        3 => clustered,
        1 => any::<i64>().prop_map(Value::Int),
        1 => arb_f64().prop_map(Value::Double),
        1 => (-4i64..4).prop_map(Value::Int),
        1 => (-16i64..16).prop_map(|i| Value::Double(i as f64 / 4.0)),
    ]
}

/// Kinds of key parts, for same-shape tuples.
fn arb_part_of_kind(kind: u8) -> BoxedStrategy<Value> {
    match kind {
        0 => Just(Value::Null).boxed(),
        1 => any::<bool>().prop_map(Value::Bool).boxed(),
        2 => arb_number().boxed(),
        3 => arb_string().prop_map(Value::String).boxed(),
        _ => arb_bytes().prop_map(Value::Binary).boxed(),
    }
}

/// Any key part.
pub fn arb_key_part() -> impl Strategy<Value = Value> {
    (0u8..5).prop_flat_map(arb_part_of_kind)
}

/// A key tuple of 0 to 3 parts.
pub fn arb_key_tuple() -> impl Strategy<Value = Vec<Value>> {
    vec(arb_key_part(), 0..4)
}

/// Two tuples of the same arity and part kinds.
pub fn arb_tuple_pair() -> impl Strategy<Value = (Vec<Value>, Vec<Value>)> {
    vec(0u8..5, 1..4).prop_flat_map(|kinds| {
        let a: Vec<BoxedStrategy<Value>> = kinds.iter().map(|k| arb_part_of_kind(*k)).collect();
        let b: Vec<BoxedStrategy<Value>> = kinds.iter().map(|k| arb_part_of_kind(*k)).collect();
        (a, b)
    })
}
