//! Order-preserving encoding of key tuples (format: `docs/format/keys.md`).
//!
//! For any two tuples `a` and `b` of key values, comparing `encode_key(a)` and
//! `encode_key(b)` as byte strings gives the same answer as
//! [`compare_keys`]`(a, b)`: parts compare left to right, and a tuple that is
//! a prefix of another sorts first. A tuple's encoding is the concatenation of
//! its parts' encodings, so it is a byte prefix of the encoding of any longer
//! tuple that starts with it.
//!
//! ## Part encodings
//!
//! | tag  | part            | payload                                   |
//! |------|-----------------|-------------------------------------------|
//! | 0x02 | null            | -                                         |
//! | 0x04 | false           | -                                         |
//! | 0x05 | true            | -                                         |
//! | 0x10 | int or double   | 8 bytes + class byte (+ 2 bytes), below   |
//! | 0x20 | string          | escaped bytes, terminator `00 01`         |
//! | 0x30 | binary          | escaped bytes, terminator `00 01`         |
//!
//! So null < false < true < every number < every string < every binary.
//! No tag is `0xFF` ([`KEY_PREFIX_END`]), which gives
//! [`prefix_upper_bound`]. Strings and binaries escape each `00` byte as
//! `00 FF` and end with `00 01`, so they are self-delimiting and order
//! bytewise (a shorter string that is a prefix of a longer one sorts first).
//!
//! ## Numbers
//!
//! Ints and doubles share one numeric order, so `Int(2) < Double(2.5) < Int(3)`.
//! A number `v` is encoded as `d`, the double nearest to `v` (for a double, `v`
//! itself; for an int, `i as f64`, round-to-nearest-even), in the usual
//! order-preserving form of an IEEE-754 double (big-endian bits, sign bit
//! flipped for positives, all bits flipped for negatives), then a class byte:
//!
//! * `01` + 2 bytes: an int below `d` (`i - d` as a biased big-endian `i16`),
//! * `02`: a double, exactly `d`,
//! * `03`: an int, exactly `d`,
//! * `04` + 2 bytes: an int above `d`.
//!
//! Rounding to nearest is monotone, so if two numbers have different `d` they
//! compare like their `d`s, and if they share `d` the class byte and offset
//! decide. Ints beyond ±2^53 that no double represents therefore still sort
//! exactly. An int and a double of equal value encode differently but
//! adjacently, the double first: `Double(3.0) < Int(3)`. `-0.0` sorts just
//! before `0.0` (total order), and both before `Int(0)`.
//!
//! NaN is accepted: every NaN encodes as the canonical quiet NaN and sorts
//! after `+inf`, so all NaNs are one key (and decode as `f64::NAN`).
//!
//! Decoding errors are [`Error::Corrupt`] with the placeholder path `<key>`.

use std::cmp::Ordering;

use super::Value;
use crate::error::{Error, Result};

/// Largest encoded key, in bytes, that [`encode_key`] produces.
pub const MAX_KEY_BYTES: usize = 4096;

/// A byte that no key part encoding starts with and that is greater than every
/// part tag: `prefix ++ [KEY_PREFIX_END]` is greater than the encoding of any
/// tuple that extends the tuple encoded in `prefix`.
pub const KEY_PREFIX_END: u8 = 0xFF;

const K_NULL: u8 = 0x02;
const K_FALSE: u8 = 0x04;
const K_TRUE: u8 = 0x05;
const K_NUM: u8 = 0x10;
const K_STRING: u8 = 0x20;
const K_BINARY: u8 = 0x30;

const N_INT_BELOW: u8 = 0x01;
const N_DOUBLE: u8 = 0x02;
const N_INT: u8 = 0x03;
const N_INT_ABOVE: u8 = 0x04;

/// 2^63 as a double: the smallest double above every `i64`.
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

/// Append the order-preserving encoding of the key tuple `parts` to `out`.
///
/// Fails, leaving `out` unchanged, if a part is an array, object or geometry
/// (not key types) or if the encoding would exceed [`MAX_KEY_BYTES`]
/// ([`Error::KeyTooLarge`]).
pub fn encode_key<V: std::borrow::Borrow<Value>>(parts: &[V], out: &mut Vec<u8>) -> Result<()> {
    let start = out.len();
    for (i, p) in parts.iter().enumerate() {
        if let Err(e) = encode_part(p.borrow(), out) {
            out.truncate(start);
            let which = if parts.len() == 1 {
                "a key".to_owned()
            } else {
                format!("key part {} of {}", i + 1, parts.len())
            };
            return Err(Error::invalid(None, format!("{which} cannot be {e}")));
        }
    }
    let size = out.len() - start;
    if size > MAX_KEY_BYTES {
        out.truncate(start);
        return Err(Error::KeyTooLarge {
            size,
            limit: MAX_KEY_BYTES,
        });
    }
    Ok(())
}

/// Append the encoding of a single key part (no size limit). Concatenating
/// part encodings gives the tuple encoding.
pub fn encode_key_part(part: &Value, out: &mut Vec<u8>) -> Result<()> {
    encode_part(part, out).map_err(|e| Error::invalid(None, format!("a key cannot be {e}")))
}

fn encode_part(part: &Value, out: &mut Vec<u8>) -> std::result::Result<(), String> {
    match part {
        Value::Null => out.push(K_NULL),
        Value::Bool(false) => out.push(K_FALSE),
        Value::Bool(true) => out.push(K_TRUE),
        Value::Int(i) => {
            let d = *i as f64;
            // `d` is integral and within [-2^63, 2^63], so both casts are exact.
            let r = i128::from(*i) - d as i128;
            out.push(K_NUM);
            out.extend_from_slice(&ordered_f64(d));
            match r.cmp(&0) {
                Ordering::Equal => out.push(N_INT),
                Ordering::Less => {
                    out.push(N_INT_BELOW);
                    out.extend_from_slice(&offset_bytes(r));
                }
                Ordering::Greater => {
                    out.push(N_INT_ABOVE);
                    out.extend_from_slice(&offset_bytes(r));
                }
            }
        }
        Value::Double(d) => {
            let d = if d.is_nan() { f64::NAN } else { *d };
            out.push(K_NUM);
            out.extend_from_slice(&ordered_f64(d));
            out.push(N_DOUBLE);
        }
        Value::String(s) => {
            out.push(K_STRING);
            put_escaped(out, s.as_bytes());
        }
        Value::Binary(b) => {
            out.push(K_BINARY);
            put_escaped(out, b);
        }
        other => {
            return Err(format!(
                "of type {}: keys are made of null, bool, int, double, string and binary values",
                other.type_name()
            ));
        }
    }
    Ok(())
}

/// Decode a key tuple produced by [`encode_key`].
pub fn decode_key(bytes: &[u8]) -> Result<Vec<Value>> {
    let mut parts = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let (v, next) = decode_part(bytes, pos).map_err(|(at, reason)| {
            Error::corrupt(
                "<key>",
                format!(
                    "bad encoded key: {reason} at byte {at} (part {})",
                    parts.len() + 1
                ),
            )
        })?;
        parts.push(v);
        pos = next;
    }
    Ok(parts)
}

/// Byte length of the first `n` parts of an encoded key tuple (an error if
/// the key has fewer parts or is malformed).
pub fn key_parts_len(bytes: &[u8], n: usize) -> Result<usize> {
    let mut pos = 0;
    for i in 0..n {
        if pos >= bytes.len() {
            return Err(Error::corrupt(
                "<key>",
                format!("bad encoded key: {i} part(s), expected at least {n}"),
            ));
        }
        let (_, next) = decode_part(bytes, pos).map_err(|(at, reason)| {
            Error::corrupt(
                "<key>",
                format!("bad encoded key: {reason} at byte {at} (part {})", i + 1),
            )
        })?;
        pos = next;
    }
    Ok(pos)
}

/// The exclusive upper bound of all keys whose tuple starts with the tuple
/// encoded in `prefix`: `prefix ++ [0xFF]`. The range `prefix..upper` holds
/// exactly the keys extending that tuple (including the tuple itself).
pub fn prefix_upper_bound(prefix: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(prefix.len() + 1);
    v.extend_from_slice(prefix);
    v.push(KEY_PREFIX_END);
    v
}

/// Compare two key parts in key order (the order of their encodings).
///
/// Type order: null < bool < numbers < string < binary; numbers compare by
/// exact value across ints and doubles, NaN last, `-0.0 < 0.0`, and at equal
/// value a double before an int. Non-key values (array, object, geometry)
/// sort after all key values and compare equal to each other.
pub fn compare_key_parts(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Null => 0,
            Value::Bool(_) => 1,
            Value::Int(_) | Value::Double(_) => 2,
            Value::String(_) => 3,
            Value::Binary(_) => 4,
            _ => 5,
        }
    }
    match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        (Value::Double(x), Value::Double(y)) => cmp_doubles(*x, *y),
        (Value::Int(i), Value::Double(d)) => cmp_int_double(*i, *d),
        (Value::Double(d), Value::Int(i)) => cmp_int_double(*i, *d).reverse(),
        (Value::String(x), Value::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Value::Binary(x), Value::Binary(y)) => x.cmp(y),
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Compare two key tuples: part by part, a proper prefix first. This is the
/// order of their [`encode_key`] encodings.
pub fn compare_keys(a: &[Value], b: &[Value]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match compare_key_parts(x, y) {
            Ordering::Equal => {}
            other => return other,
        }
    }
    a.len().cmp(&b.len())
}

/// Render a key tuple for messages: one part as itself (`42`, `"a"`), several
/// as a tuple (`("a", 7)`). Doubles always show a fraction or exponent
/// (`2.0`), binary shows as hex (`0x0aff`); long strings and binaries are
/// shortened with `…`.
pub fn key_to_string(parts: &[Value]) -> String {
    match parts {
        [one] => part_to_string(one),
        _ => {
            let inner: Vec<String> = parts.iter().map(part_to_string).collect();
            format!("({})", inner.join(", "))
        }
    }
}

const SHOW_CHARS: usize = 64;
const SHOW_BYTES: usize = 32;

fn part_to_string(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Double(d) => format!("{d:?}"),
        Value::String(s) => {
            let mut shown: String = s.chars().take(SHOW_CHARS).collect();
            let cut = shown.len() < s.len();
            if cut {
                shown.push('…');
            }
            serde_json::to_string(&shown).unwrap_or(shown)
        }
        Value::Binary(b) => {
            let mut s = String::from("0x");
            for byte in b.iter().take(SHOW_BYTES) {
                s.push_str(&format!("{byte:02x}"));
            }
            if b.len() > SHOW_BYTES {
                s.push('…');
            }
            s
        }
        other => {
            let s = other.to_string();
            if s.chars().count() > SHOW_CHARS {
                let mut t: String = s.chars().take(SHOW_CHARS).collect();
                t.push('…');
                t
            } else {
                s
            }
        }
    }
}

fn cmp_doubles(x: f64, y: f64) -> Ordering {
    match (x.is_nan(), y.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => x.total_cmp(&y),
    }
}

/// Exact comparison of an int with a double; at equal value the int is greater.
fn cmp_int_double(i: i64, d: f64) -> Ordering {
    if d.is_nan() || d >= TWO_POW_63 {
        return Ordering::Less;
    }
    if d < -TWO_POW_63 {
        return Ordering::Greater;
    }
    let t = d.trunc();
    // `t` is integral and within [-2^63, 2^63), so the cast is exact.
    match i.cmp(&(t as i64)) {
        Ordering::Equal => {
            let frac = d - t;
            // A positive fraction puts `d` above `i`; a negative one or an
            // exact tie (int after double) puts `i` above.
            if frac > 0.0 {
                Ordering::Less
            } else {
                Ordering::Greater
            }
        }
        other => other,
    }
}

fn ordered_f64(d: f64) -> [u8; 8] {
    let bits = d.to_bits();
    let o = if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    o.to_be_bytes()
}

fn unordered_f64(b: [u8; 8]) -> f64 {
    let o = u64::from_be_bytes(b);
    let bits = if o >> 63 == 1 { o & !(1 << 63) } else { !o };
    f64::from_bits(bits)
}

/// `r` is within ±1024 (half an ulp of doubles below 2^63), so it fits an i16.
fn offset_bytes(r: i128) -> [u8; 2] {
    ((r as i16 as u16) ^ 0x8000).to_be_bytes()
}

fn put_escaped(out: &mut Vec<u8>, b: &[u8]) {
    let mut rest = b;
    while let Some(i) = rest.iter().position(|&c| c == 0) {
        out.extend_from_slice(&rest[..i]);
        out.extend_from_slice(&[0x00, 0xFF]);
        rest = &rest[i + 1..];
    }
    out.extend_from_slice(rest);
    out.extend_from_slice(&[0x00, 0x01]);
}

type PartResult = std::result::Result<(Value, usize), (usize, String)>;

fn decode_part(b: &[u8], pos: usize) -> PartResult {
    let Some(&tag) = b.get(pos) else {
        return Err((pos, "unexpected end of key".to_owned()));
    };
    let body = pos + 1;
    match tag {
        K_NULL => Ok((Value::Null, body)),
        K_FALSE => Ok((Value::Bool(false), body)),
        K_TRUE => Ok((Value::Bool(true), body)),
        K_NUM => decode_number(b, body),
        K_STRING => {
            let (bytes, next) = get_escaped(b, body)?;
            match String::from_utf8(bytes) {
                Ok(s) => Ok((Value::String(s), next)),
                Err(_) => Err((body, "string is not valid UTF-8".to_owned())),
            }
        }
        K_BINARY => {
            let (bytes, next) = get_escaped(b, body)?;
            Ok((Value::Binary(bytes), next))
        }
        other => Err((pos, format!("unknown key part tag 0x{other:02x}"))),
    }
}

fn decode_number(b: &[u8], pos: usize) -> PartResult {
    let short = |what: &str| (pos, format!("number truncated ({what} missing)"));
    let raw: [u8; 8] = b
        .get(pos..pos + 8)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| short("value bytes"))?;
    let d = unordered_f64(raw);
    let class_at = pos + 8;
    let class = *b.get(class_at).ok_or_else(|| short("class byte"))?;
    let bad = |why: &str| (class_at, format!("invalid number encoding: {why}"));
    let int_ok = |d: f64| d.is_finite() && d.fract() == 0.0 && d.abs() <= TWO_POW_63;
    match class {
        N_DOUBLE => {
            if d.is_nan() && d.to_bits() != f64::NAN.to_bits() {
                return Err(bad("non-canonical NaN"));
            }
            Ok((Value::Double(d), class_at + 1))
        }
        N_INT => {
            if !int_ok(d) || d >= TWO_POW_63 {
                return Err(bad("not an integer in range"));
            }
            Ok((Value::Int(d as i64), class_at + 1))
        }
        N_INT_BELOW | N_INT_ABOVE => {
            let off: [u8; 2] = b
                .get(class_at + 1..class_at + 3)
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| short("offset bytes"))?;
            let r = i128::from((u16::from_be_bytes(off) ^ 0x8000) as i16);
            if (class == N_INT_BELOW) != (r < 0) || r == 0 {
                return Err(bad("offset sign does not match its class"));
            }
            if !int_ok(d) {
                return Err(bad("not an integer in range"));
            }
            let v = d as i128 + r;
            let Ok(i) = i64::try_from(v) else {
                return Err(bad("integer out of range"));
            };
            if i as f64 != d {
                return Err(bad("non-canonical integer offset"));
            }
            Ok((Value::Int(i), class_at + 3))
        }
        other => Err((class_at, format!("unknown number class 0x{other:02x}"))),
    }
}

fn get_escaped(b: &[u8], pos: usize) -> std::result::Result<(Vec<u8>, usize), (usize, String)> {
    let mut out = Vec::new();
    let mut i = pos;
    loop {
        let rest = b.get(i..).unwrap_or(&[]);
        let Some(z) = rest.iter().position(|&c| c == 0) else {
            return Err((b.len(), "unterminated string or binary".to_owned()));
        };
        out.extend_from_slice(&rest[..z]);
        let at = i + z;
        match b.get(at + 1) {
            Some(0x01) => return Ok((out, at + 2)),
            Some(0xFF) => {
                out.push(0);
                i = at + 2;
            }
            Some(other) => {
                return Err((
                    at + 1,
                    format!("invalid escape byte 0x{other:02x} after 0x00"),
                ));
            }
            None => return Err((at + 1, "unterminated string or binary".to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::testgen::{arb_key_part, arb_key_tuple, arb_number, arb_tuple_pair};
    use proptest::prelude::*;

    fn enc(parts: &[Value]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_key(parts, &mut out).unwrap();
        out
    }

    fn check_pair(a: &[Value], b: &[Value]) -> std::result::Result<(), TestCaseError> {
        let (ea, eb) = (enc(a), enc(b));
        prop_assert_eq!(
            ea.cmp(&eb),
            compare_keys(a, b),
            "a={:?} b={:?} ea={:02x?} eb={:02x?}",
            a,
            b,
            ea,
            eb
        );
        Ok(())
    }

    #[test]
    fn number_order_examples() {
        let ordered = [
            Value::Double(f64::NEG_INFINITY),
            Value::Int(i64::MIN),
            Value::Int(i64::MIN + 1),
            Value::Double(-1e18),
            Value::Int(-3),
            Value::Double(-2.5),
            Value::Int(-1),
            Value::Double(-0.0),
            Value::Double(0.0),
            Value::Int(0),
            Value::Double(1e-300),
            Value::Int(2),
            Value::Double(2.5),
            Value::Double(3.0),
            Value::Int(3),
            Value::Int((1 << 53) - 1),
            Value::Double(9007199254740992.0),
            Value::Int(1 << 53),
            Value::Int((1 << 53) + 1),
            Value::Double(9007199254740994.0),
            Value::Int((1 << 53) + 2),
            Value::Int((1 << 53) + 3),
            Value::Double(9007199254740996.0),
            Value::Int(i64::MAX - 1),
            Value::Int(i64::MAX),
            Value::Double(TWO_POW_63),
            Value::Double(f64::INFINITY),
            Value::Double(f64::NAN),
        ];
        for w in ordered.windows(2) {
            assert_eq!(
                compare_key_parts(&w[0], &w[1]),
                Ordering::Less,
                "{:?} < {:?}",
                w[0],
                w[1]
            );
            assert!(enc(&w[..1]) < enc(&w[1..]), "{:?} < {:?}", w[0], w[1]);
        }
        for v in &ordered {
            assert_eq!(&decode_key(&enc(std::slice::from_ref(v))).unwrap()[0], v);
        }
    }

    #[test]
    fn type_order_and_strings() {
        let ordered = [
            Value::Null,
            Value::Bool(false),
            Value::Bool(true),
            Value::Double(f64::NEG_INFINITY),
            Value::Double(f64::NAN),
            Value::String(String::new()),
            Value::String("\0".into()),
            Value::String("\0\0".into()),
            Value::String("\0a".into()),
            Value::String("a".into()),
            Value::String("a\0".into()),
            Value::String("ab".into()),
            Value::String("é".into()),
            Value::Binary(vec![]),
            Value::Binary(vec![0]),
            Value::Binary(vec![0, 0xff]),
            Value::Binary(vec![1]),
            Value::Binary(vec![0xff]),
        ];
        for w in ordered.windows(2) {
            assert!(enc(&w[..1]) < enc(&w[1..]), "{:?} < {:?}", w[0], w[1]);
        }
        // Composite: ("a", 2) < ("a\0", 1) < ("ab", 0)
        assert!(enc(&["a".into(), Value::Int(2)]) < enc(&["a\0".into(), Value::Int(1)]));
        assert!(enc(&["a\0".into(), Value::Int(1)]) < enc(&["ab".into(), Value::Int(0)]));
    }

    #[test]
    fn nan_is_one_key() {
        let a = enc(&[Value::Double(f64::NAN)]);
        let b = enc(&[Value::Double(-f64::NAN)]);
        assert_eq!(a, b);
        assert!(enc(&[Value::Double(f64::INFINITY)]) < a);
        assert_eq!(decode_key(&a).unwrap(), vec![Value::Double(f64::NAN)]);
    }

    #[test]
    fn errors() {
        let mut out = vec![9];
        let e = encode_key(&[Value::Int(1), Value::Array(vec![])], &mut out).unwrap_err();
        assert!(e.to_string().contains("key part 2 of 2"), "{e}");
        assert!(e.to_string().contains("array"), "{e}");
        assert_eq!(out, vec![9]);
        let e = encode_key(
            &[Value::Geometry(crate::value::Geometry::point(0.0, 0.0))],
            &mut out,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("a key cannot be of type point"),
            "{e}"
        );
        let e = encode_key_part(&Value::Object(vec![]), &mut out).unwrap_err();
        assert!(e.to_string().contains("object"), "{e}");

        let big = Value::String("x".repeat(MAX_KEY_BYTES));
        match encode_key(&[big], &mut out) {
            Err(Error::KeyTooLarge { size, limit }) => {
                assert_eq!(limit, MAX_KEY_BYTES);
                assert_eq!(size, MAX_KEY_BYTES + 3);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(out, vec![9]);
        let fits = Value::String("x".repeat(MAX_KEY_BYTES - 3));
        encode_key(&[fits], &mut out).unwrap();

        for (bad, want) in [
            (vec![0x77], "unknown key part tag"),
            (vec![K_STRING, b'a'], "unterminated"),
            (vec![K_STRING, b'a', 0], "unterminated"),
            (vec![K_STRING, 0, 7], "invalid escape"),
            (vec![K_STRING, 0xff, 0, 1], "UTF-8"),
            (vec![K_NUM, 0, 0], "truncated"),
            (vec![K_NUM, 0x80, 0, 0, 0, 0, 0, 0, 0], "truncated"),
            (
                vec![K_NUM, 0x80, 0, 0, 0, 0, 0, 0, 0, 9],
                "unknown number class",
            ),
            (
                vec![K_NUM, 0xC0, 0, 0, 0, 0, 0, 0, 1, N_INT],
                "not an integer",
            ),
            (
                vec![K_NUM, 0x80, 0, 0, 0, 0, 0, 0, 0, N_INT_ABOVE, 0x80, 1],
                "non-canonical",
            ),
            (
                vec![K_NUM, 0x80, 0, 0, 0, 0, 0, 0, 0, N_INT_ABOVE, 0x7f, 0xff],
                "sign",
            ),
            (
                vec![K_NUM, 0xFF, 0xF0, 0, 0, 0, 0, 0, 0, N_INT],
                "not an integer",
            ),
        ] {
            let e = decode_key(&bad).unwrap_err();
            assert!(matches!(e, Error::Corrupt { .. }));
            assert!(e.to_string().contains(want), "{bad:02x?}: {e}");
        }
    }

    #[test]
    fn rendering() {
        assert_eq!(key_to_string(&[Value::Int(42)]), "42");
        assert_eq!(
            key_to_string(&[Value::String("a".into()), Value::Int(7)]),
            r#"("a", 7)"#
        );
        assert_eq!(key_to_string(&[Value::Double(2.0)]), "2.0");
        assert_eq!(key_to_string(&[Value::Binary(vec![0x0a, 0xff])]), "0x0aff");
        assert_eq!(key_to_string(&[]), "()");
        assert_eq!(
            key_to_string(&[Value::Null, Value::Bool(true), Value::String("q\"".into())]),
            r#"(null, true, "q\"")"#
        );
        let long = key_to_string(&[Value::String("y".repeat(500))]);
        assert!(long.ends_with("…\"") && long.chars().count() < 80, "{long}");
        let longb = key_to_string(&[Value::Binary(vec![1; 100])]);
        assert!(longb.ends_with('…') && longb.len() < 80, "{longb}");
    }

    #[test]
    fn prefix_bound() {
        let p = enc(&["a".into()]);
        let hi = prefix_upper_bound(&p);
        for t in [
            vec![Value::String("a".into())],
            vec!["a".into(), Value::Binary(vec![0xff; 4])],
            vec!["a".into(), Value::Double(f64::NAN)],
        ] {
            let e = enc(&t);
            assert!(e >= p && e < hi);
        }
        assert!(enc(&["a\0".into()]) > hi);
        assert!(enc(&["b".into()]) > hi);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn prop_numbers_ordered(a in arb_number(), b in arb_number()) {
            check_pair(std::slice::from_ref(&a), std::slice::from_ref(&b))?;
        }

        #[test]
        fn prop_parts_ordered(a in arb_key_part(), b in arb_key_part()) {
            check_pair(std::slice::from_ref(&a), std::slice::from_ref(&b))?;
        }

        #[test]
        fn prop_same_shape_tuples_ordered((a, b) in arb_tuple_pair()) {
            check_pair(&a, &b)?;
        }

        #[test]
        fn prop_any_tuples_ordered(a in arb_key_tuple(), b in arb_key_tuple()) {
            check_pair(&a, &b)?;
        }

        #[test]
        fn prop_round_trip_and_prefix(a in arb_key_tuple(), b in arb_key_tuple()) {
            let ea = enc(&a);
            prop_assert_eq!(&decode_key(&ea).unwrap(), &a);
            let mut ab = a.clone();
            ab.extend(b.iter().cloned());
            let eab = enc(&ab);
            prop_assert!(eab.starts_with(&ea));
            prop_assert!(eab < prefix_upper_bound(&ea));
            prop_assert_eq!(decode_key(&eab).unwrap(), ab);
        }

        #[test]
        fn prop_decode_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(parts) = decode_key(&bytes) {
                // Whatever decodes re-encodes to the same bytes.
                let mut out = Vec::new();
                if encode_key(&parts, &mut out).is_ok() {
                    prop_assert_eq!(out, bytes);
                }
            }
        }
    }
}
