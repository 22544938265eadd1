//! The compact binary record encoding (the stored form of a record; format:
//! `docs/format/keys.md`).
//!
//! Every value is a one-byte tag followed by its payload:
//!
//! | tag  | value     | payload                                                  |
//! |------|-----------|----------------------------------------------------------|
//! | 0x00 | null      | -                                                        |
//! | 0x01 | false     | -                                                        |
//! | 0x02 | true      | -                                                        |
//! | 0x03 | int       | zigzag LEB128 varint (1 byte for -64..=63)               |
//! | 0x04 | double    | 8 bytes, IEEE-754 little-endian                          |
//! | 0x05 | string    | varint byte length, UTF-8 bytes                          |
//! | 0x06 | binary    | varint byte length, bytes                                |
//! | 0x07 | array     | varint element count, elements                           |
//! | 0x08 | object    | varint field count, then per field: varint name length, name bytes, value |
//! | 0x09 | point     | x, y as 8-byte little-endian doubles                     |
//! | 0x0A | rectangle | min_x, min_y, max_x, max_y as 8-byte doubles             |
//! | 0x0B | polygon   | varint ring count (>= 1, exterior first), per ring: varint point count, points as 16 bytes |
//!
//! Varints are unsigned LEB128, at most 10 bytes, without redundant trailing
//! zero groups. Decoding checks every count and length against the bytes
//! that remain before allocating, rejects unknown tags, invalid UTF-8, nesting
//! deeper than [`MAX_DEPTH`] and trailing bytes, and never panics.
//! Decoding errors are [`Error::Corrupt`] with the placeholder path
//! `<record>`; a caller that knows the file can re-wrap them.

use super::{Geometry, MAX_DEPTH, Value, parse_index};
use crate::error::{Error, Result};
use crate::varint::{VarintError, put as put_varint, unzigzag, zigzag};

const T_NULL: u8 = 0x00;
const T_FALSE: u8 = 0x01;
const T_TRUE: u8 = 0x02;
const T_INT: u8 = 0x03;
const T_DOUBLE: u8 = 0x04;
const T_STRING: u8 = 0x05;
const T_BINARY: u8 = 0x06;
const T_ARRAY: u8 = 0x07;
const T_OBJECT: u8 = 0x08;
const T_POINT: u8 = 0x09;
const T_RECT: u8 = 0x0A;
const T_POLYGON: u8 = 0x0B;

/// Largest up-front allocation (in elements) made from a decoded count; the
/// vector grows past it only as elements are actually decoded.
const MAX_PREALLOC: usize = 1024;

/// Append the binary encoding of `v` to `out`.
///
/// Values nested deeper than [`MAX_DEPTH`] encode fine but [`decode_value`]
/// rejects them; use [`encode_record`] to check first.
pub fn encode_value(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.push(T_NULL),
        Value::Bool(false) => out.push(T_FALSE),
        Value::Bool(true) => out.push(T_TRUE),
        Value::Int(i) => {
            out.push(T_INT);
            put_varint(out, zigzag(*i));
        }
        Value::Double(d) => {
            out.push(T_DOUBLE);
            out.extend_from_slice(&d.to_le_bytes());
        }
        Value::String(s) => {
            out.push(T_STRING);
            put_bytes(out, s.as_bytes());
        }
        Value::Binary(b) => {
            out.push(T_BINARY);
            put_bytes(out, b);
        }
        Value::Array(items) => {
            out.push(T_ARRAY);
            put_varint(out, items.len() as u64);
            for item in items {
                encode_value(item, out);
            }
        }
        Value::Object(fields) => {
            out.push(T_OBJECT);
            put_varint(out, fields.len() as u64);
            for (name, value) in fields {
                put_bytes(out, name.as_bytes());
                encode_value(value, out);
            }
        }
        Value::Geometry(Geometry::Point { x, y }) => {
            out.push(T_POINT);
            put_f64s(out, &[*x, *y]);
        }
        Value::Geometry(Geometry::Rect {
            min_x,
            min_y,
            max_x,
            max_y,
        }) => {
            out.push(T_RECT);
            put_f64s(out, &[*min_x, *min_y, *max_x, *max_y]);
        }
        Value::Geometry(Geometry::Polygon { exterior, holes }) => {
            out.push(T_POLYGON);
            put_varint(out, 1 + holes.len() as u64);
            for ring in std::iter::once(exterior).chain(holes) {
                put_varint(out, ring.len() as u64);
                for (x, y) in ring {
                    put_f64s(out, &[*x, *y]);
                }
            }
        }
    }
}

/// Check that `v` can be stored (nesting at most [`MAX_DEPTH`]) and append its
/// encoding to `out`. On error `out` is unchanged.
pub fn encode_record(v: &Value, out: &mut Vec<u8>) -> Result<()> {
    let depth = v.depth();
    if depth > MAX_DEPTH {
        return Err(Error::invalid(
            None,
            format!("value is nested {depth} levels deep; the limit is {MAX_DEPTH}"),
        ));
    }
    encode_value(v, out);
    Ok(())
}

/// [`encode_record`] of the object whose `count` fields are `fields`
/// (name, value), without building it.
pub fn encode_fields<'a>(
    fields: impl Iterator<Item = (&'a str, &'a Value)> + Clone,
    count: usize,
    out: &mut Vec<u8>,
) -> Result<()> {
    let depth = 1 + fields
        .clone()
        .filter(|(_, v)| matches!(v, Value::Array(_) | Value::Object(_)))
        .map(|(_, v)| v.depth())
        .max()
        .unwrap_or(0);
    if depth > MAX_DEPTH {
        return Err(Error::invalid(
            None,
            format!("value is nested {depth} levels deep; the limit is {MAX_DEPTH}"),
        ));
    }
    out.push(T_OBJECT);
    put_varint(out, count as u64);
    for (name, value) in fields {
        put_bytes(out, name.as_bytes());
        encode_value(value, out);
    }
    Ok(())
}

/// Decode one value that must span all of `bytes`.
pub fn decode_value(bytes: &[u8]) -> Result<Value> {
    let mut r = Reader::new(bytes);
    let v = read_value(&mut r, 0).map_err(DecodeError::into_error)?;
    if r.pos != bytes.len() {
        return Err(r.err("trailing bytes after the value").into_error());
    }
    Ok(v)
}

/// Extract one field from an encoded object without decoding the rest.
///
/// Same lookup rules as [`Value::get`]: an exact top-level name first, then a
/// dotted path through objects and array indexes. Returns `Ok(None)` when the
/// field is absent or the encoded value is not an object. Only the parts
/// walked over are checked, so corruption elsewhere may go unnoticed.
pub fn decode_field(bytes: &[u8], field: &str) -> Result<Option<Value>> {
    find_field(bytes, field).map_err(DecodeError::into_error)
}

fn find_field(bytes: &[u8], field: &str) -> std::result::Result<Option<Value>, DecodeError> {
    let mut r = Reader::new(bytes);
    if r.peek()? != T_OBJECT {
        // A well-formed non-object has no fields; an unknown tag is corruption.
        skip_value(&mut r, 0)?;
        return Ok(None);
    }
    if seek_child(&mut r, field, 0)? {
        return read_value(&mut r, 1).map(Some);
    }
    if !field.contains('.') {
        return Ok(None);
    }
    let mut r = Reader::new(bytes);
    let mut depth = 0;
    for seg in field.split('.') {
        if !seek_child(&mut r, seg, depth)? {
            return Ok(None);
        }
        depth += 1;
    }
    read_value(&mut r, depth).map(Some)
}

/// A top-level field of an encoded record, read in place.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FieldView<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Double(f64),
    Str(&'a str),
    Bin(&'a [u8]),
    /// An array, object or geometry: its encoding (for [`decode_value`]).
    Encoded(&'a [u8]),
}

/// Call `f(name, value)` with each top-level field of an encoded object,
/// the value as its own encoding (what [`decode_value`] reads). `Ok(false)`
/// when the record is not an object (it has no fields). The walk checks
/// the structure it passes over, not the values' contents.
pub fn for_each_raw_field<'a>(
    bytes: &'a [u8],
    mut f: impl FnMut(&'a [u8], &'a [u8]),
) -> Result<bool> {
    let mut r = Reader::new(bytes);
    let mut run = |r: &mut Reader<'a>| -> DResult<bool> {
        if r.peek()? != T_OBJECT {
            skip_value(r, 0)?;
            return Ok(false);
        }
        r.byte()?;
        r.enter(0)?;
        let n = r.count(2)?;
        for _ in 0..n {
            let len = r.count(1)?;
            let name = r.take(len)?;
            let start = r.pos;
            skip_value(r, 1)?;
            f(name, &r.buf[start..r.pos]);
        }
        Ok(true)
    };
    run(&mut r).map_err(DecodeError::into_error)
}

/// The length of the one value encoding that starts `bytes` (which may
/// go on past it).
pub fn encoded_len(bytes: &[u8]) -> Result<usize> {
    let mut r = Reader::new(bytes);
    skip_value(&mut r, 0).map_err(DecodeError::into_error)?;
    Ok(r.pos)
}

/// Append the object whose `count` fields are `fields` (name, value
/// encoding as [`for_each_raw_field`] gives it) to `out`.
pub fn encode_raw_fields<'a>(
    count: usize,
    fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    out: &mut Vec<u8>,
) {
    out.push(T_OBJECT);
    put_varint(out, count as u64);
    for (name, value) in fields {
        put_bytes(out, name);
        out.extend_from_slice(value);
    }
}

/// Visit the top-level fields of an encoded object that `wanted` picks:
/// for each field, `wanted(name)` returns the caller's slot for it (or
/// `None` to skip the field unread), and `f(slot, view)` gets the field's
/// value in place. A record that is not an object has no fields. This is
/// how a scan turns stored records into columns without building a
/// [`Value`] per record; as with [`decode_field`], only the parts walked
/// over are checked.
pub fn visit_fields<'a>(
    bytes: &'a [u8],
    mut wanted: impl FnMut(&[u8]) -> Option<usize>,
    mut f: impl FnMut(usize, FieldView<'a>),
) -> Result<()> {
    let mut r = Reader::new(bytes);
    let mut run = |r: &mut Reader<'a>| -> DResult<()> {
        if r.peek()? != T_OBJECT {
            return skip_value(r, 0);
        }
        r.byte()?;
        r.enter(0)?;
        let n = r.count(2)?;
        for _ in 0..n {
            let len = r.count(1)?;
            let name = r.take(len)?;
            let Some(slot) = wanted(name) else {
                skip_value(r, 1)?;
                continue;
            };
            let start = r.pos;
            let view = match r.byte()? {
                T_NULL => FieldView::Null,
                T_FALSE => FieldView::Bool(false),
                T_TRUE => FieldView::Bool(true),
                T_INT => FieldView::Int(unzigzag(r.varint()?)),
                T_DOUBLE => FieldView::Double(r.f64()?),
                T_STRING => {
                    let len = r.count(1)?;
                    let at = r.pos;
                    let b = r.take(len)?;
                    FieldView::Str(std::str::from_utf8(b).map_err(|_| DecodeError {
                        pos: at,
                        reason: "invalid UTF-8 in a string".to_owned(),
                    })?)
                }
                T_BINARY => {
                    let len = r.count(1)?;
                    FieldView::Bin(r.take(len)?)
                }
                _ => {
                    r.pos = start;
                    skip_value(r, 1)?;
                    FieldView::Encoded(&r.buf[start..r.pos])
                }
            };
            f(slot, view);
        }
        Ok(())
    };
    run(&mut r).map_err(DecodeError::into_error)
}

/// With `r` at the start of a value nested in `depth` containers: if it is an
/// object with field `seg` (or an array with index `seg`), leave `r` at the
/// start of that child and return true; otherwise return false.
fn seek_child(
    r: &mut Reader<'_>,
    seg: &str,
    depth: usize,
) -> std::result::Result<bool, DecodeError> {
    match r.byte()? {
        T_OBJECT => {
            r.enter(depth)?;
            let n = r.count(2)?;
            for _ in 0..n {
                let len = r.count(1)?;
                let name = r.take(len)?;
                if name == seg.as_bytes() {
                    return Ok(true);
                }
                skip_value(r, depth + 1)?;
            }
            Ok(false)
        }
        T_ARRAY => {
            r.enter(depth)?;
            let n = r.count(1)?;
            let Some(idx) = parse_index(seg) else {
                return Ok(false);
            };
            if idx >= n {
                return Ok(false);
            }
            for _ in 0..idx {
                skip_value(r, depth + 1)?;
            }
            Ok(true)
        }
        tag if tag <= T_POLYGON => Ok(false),
        tag => Err(r.unknown_tag(tag)),
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_f64s(out: &mut Vec<u8>, fs: &[f64]) {
    for f in fs {
        out.extend_from_slice(&f.to_le_bytes());
    }
}

/// A decoding failure: what and where.
struct DecodeError {
    pos: usize,
    reason: String,
}

impl DecodeError {
    fn into_error(self) -> Error {
        Error::corrupt(
            "<record>",
            format!("bad encoded value: {} at byte {}", self.reason, self.pos),
        )
    }
}

type DResult<T> = std::result::Result<T, DecodeError>;

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    fn err(&self, reason: impl Into<String>) -> DecodeError {
        DecodeError {
            pos: self.pos,
            reason: reason.into(),
        }
    }

    fn unknown_tag(&self, tag: u8) -> DecodeError {
        DecodeError {
            pos: self.pos.saturating_sub(1),
            reason: format!("unknown type tag 0x{tag:02x}"),
        }
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn peek(&self) -> DResult<u8> {
        self.buf
            .get(self.pos)
            .copied()
            .ok_or_else(|| self.err("unexpected end of input"))
    }

    fn byte(&mut self) -> DResult<u8> {
        let b = self.peek()?;
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> DResult<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.err(format!(
                "length {n} exceeds the {} remaining bytes",
                self.remaining()
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn f64(&mut self) -> DResult<f64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(f64::from_le_bytes(a))
    }

    fn varint(&mut self) -> DResult<u64> {
        let mut pos = self.pos;
        match crate::varint::decode(self.buf, &mut pos) {
            Ok(v) => {
                self.pos = pos;
                Ok(v)
            }
            Err(VarintError::Truncated { at }) => {
                self.pos = at;
                Err(self.err("unexpected end of input"))
            }
            Err(VarintError::Overflow) => Err(self.err("varint overflows 64 bits")),
            Err(VarintError::Overlong) => Err(self.err("overlong varint")),
        }
    }

    /// A count of items each taking at least `min_size` bytes, checked
    /// against what remains so a corrupt count cannot cause a huge allocation
    /// or a long loop.
    fn count(&mut self, min_size: usize) -> DResult<usize> {
        let start = self.pos;
        let n = self.varint()?;
        let limit = self.remaining() / min_size.max(1);
        if n > limit as u64 {
            self.pos = start;
            return Err(self.err(format!(
                "count {n} is more than the {} remaining bytes can hold",
                self.remaining()
            )));
        }
        Ok(n as usize)
    }

    /// Check that one more level of nesting below `depth` is allowed.
    fn enter(&self, depth: usize) -> DResult<()> {
        if depth >= MAX_DEPTH {
            return Err(self.err(format!("nesting deeper than {MAX_DEPTH} levels")));
        }
        Ok(())
    }

    fn string(&mut self) -> DResult<String> {
        let len = self.count(1)?;
        let start = self.pos;
        let b = self.take(len)?;
        match std::str::from_utf8(b) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(DecodeError {
                pos: start,
                reason: "string is not valid UTF-8".to_owned(),
            }),
        }
    }

    fn ring(&mut self) -> DResult<Vec<(f64, f64)>> {
        let n = self.count(16)?;
        let mut ring = Vec::with_capacity(n);
        for _ in 0..n {
            let x = self.f64()?;
            let y = self.f64()?;
            ring.push((x, y));
        }
        Ok(ring)
    }
}

/// Decode the value at `r`, which is nested inside `depth` containers.
fn read_value(r: &mut Reader<'_>, depth: usize) -> DResult<Value> {
    let tag = r.byte()?;
    Ok(match tag {
        T_NULL => Value::Null,
        T_FALSE => Value::Bool(false),
        T_TRUE => Value::Bool(true),
        T_INT => Value::Int(unzigzag(r.varint()?)),
        T_DOUBLE => Value::Double(r.f64()?),
        T_STRING => Value::String(r.string()?),
        T_BINARY => {
            let len = r.count(1)?;
            Value::Binary(r.take(len)?.to_vec())
        }
        T_ARRAY => {
            r.enter(depth)?;
            let n = r.count(1)?;
            let mut items = Vec::with_capacity(n.min(MAX_PREALLOC));
            for _ in 0..n {
                items.push(read_value(r, depth + 1)?);
            }
            Value::Array(items)
        }
        T_OBJECT => {
            r.enter(depth)?;
            let n = r.count(2)?;
            let mut fields = Vec::with_capacity(n.min(MAX_PREALLOC));
            for _ in 0..n {
                let name = r.string()?;
                let value = read_value(r, depth + 1)?;
                fields.push((name, value));
            }
            Value::Object(fields)
        }
        T_POINT => Value::Geometry(Geometry::Point {
            x: r.f64()?,
            y: r.f64()?,
        }),
        T_RECT => Value::Geometry(Geometry::Rect {
            min_x: r.f64()?,
            min_y: r.f64()?,
            max_x: r.f64()?,
            max_y: r.f64()?,
        }),
        T_POLYGON => {
            let rings = r.count(1)?;
            if rings == 0 {
                return Err(r.err("polygon without an exterior ring"));
            }
            let exterior = r.ring()?;
            let mut holes = Vec::with_capacity((rings - 1).min(MAX_PREALLOC));
            for _ in 1..rings {
                holes.push(r.ring()?);
            }
            Value::Geometry(Geometry::Polygon { exterior, holes })
        }
        other => return Err(r.unknown_tag(other)),
    })
}

/// Move past the value at `r` without building it.
fn skip_value(r: &mut Reader<'_>, depth: usize) -> DResult<()> {
    match r.byte()? {
        T_NULL | T_FALSE | T_TRUE => {}
        T_INT => {
            r.varint()?;
        }
        T_DOUBLE => {
            r.take(8)?;
        }
        T_STRING | T_BINARY => {
            let len = r.count(1)?;
            r.take(len)?;
        }
        T_ARRAY => {
            r.enter(depth)?;
            let n = r.count(1)?;
            for _ in 0..n {
                skip_value(r, depth + 1)?;
            }
        }
        T_OBJECT => {
            r.enter(depth)?;
            let n = r.count(2)?;
            for _ in 0..n {
                let len = r.count(1)?;
                r.take(len)?;
                skip_value(r, depth + 1)?;
            }
        }
        T_POINT => {
            r.take(16)?;
        }
        T_RECT => {
            r.take(32)?;
        }
        T_POLYGON => {
            let rings = r.count(1)?;
            if rings == 0 {
                return Err(r.err("polygon without an exterior ring"));
            }
            for _ in 0..rings {
                let n = r.count(16)?;
                r.take(n * 16)?;
            }
        }
        other => return Err(r.unknown_tag(other)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::parse_json_record;
    use crate::value::testgen::{arb_record, arb_value, path_candidates};
    use proptest::prelude::*;

    fn round_trip(v: &Value) -> Value {
        let mut out = Vec::new();
        encode_value(v, &mut out);
        decode_value(&out).unwrap()
    }

    #[test]
    fn scalars_round_trip() {
        for v in [
            Value::Null,
            Value::Bool(true),
            Value::Bool(false),
            Value::Int(0),
            Value::Int(-1),
            Value::Int(i64::MIN),
            Value::Int(i64::MAX),
            Value::Double(-0.0),
            Value::Double(f64::NAN),
            Value::Double(f64::NEG_INFINITY),
            Value::String(String::new()),
            Value::String("héllo".into()),
            Value::Binary(vec![0, 255]),
            Value::Geometry(Geometry::point(1.0, 2.0)),
            Value::Geometry(Geometry::rect(1.0, 2.0, 3.0, 4.0)),
            Value::Geometry(Geometry::Polygon {
                exterior: vec![(0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 0.0)],
                holes: vec![vec![]],
            }),
        ] {
            assert_eq!(round_trip(&v), v);
        }
        let mut out = Vec::new();
        encode_value(&Value::Int(-64), &mut out);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn varint_edges() {
        for v in [0u64, 127, 128, 16383, 16384, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(Reader::new(&out).varint().ok(), Some(v));
        }
        // Overflow in the 10th byte, overlong, and too long.
        for bad in [
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02][..],
            &[0x80, 0x00],
            &[0x80; 11],
        ] {
            assert!(Reader::new(bad).varint().is_err());
        }
    }

    #[test]
    fn malformed_inputs_are_errors() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![], "unexpected end"),
            (vec![0xee], "unknown type tag 0xee"),
            (vec![T_NULL, T_NULL], "trailing bytes"),
            (vec![T_STRING, 5, b'a'], "count 5"),
            (vec![T_STRING, 1, 0xff], "UTF-8"),
            (vec![T_ARRAY, 0xff, 0xff, 0xff, 0xff, 0x0f], "count"),
            (vec![T_OBJECT, 3, 0, 0], "count"),
            (vec![T_POLYGON, 0], "exterior"),
            (vec![T_POLYGON, 1, 2, 0, 0], "count"),
            (vec![T_DOUBLE, 0, 0], "exceeds"),
        ];
        for (bytes, want) in cases {
            let e = decode_value(&bytes).unwrap_err();
            assert!(matches!(e, Error::Corrupt { .. }), "{e:?}");
            assert!(e.to_string().contains(want), "{bytes:?}: {e}");
        }
    }

    #[test]
    fn depth_limit() {
        let mut v = Value::Null;
        for _ in 0..MAX_DEPTH {
            v = Value::Array(vec![v]);
        }
        assert_eq!(round_trip(&v), v);
        let mut out = Vec::new();
        encode_record(&v, &mut out).unwrap();
        let deeper = Value::Array(vec![v]);
        let mut out = Vec::new();
        encode_value(&deeper, &mut out);
        let e = decode_value(&out).unwrap_err();
        assert!(e.to_string().contains("nesting deeper"), "{e}");
        let mut out2 = Vec::new();
        assert!(encode_record(&deeper, &mut out2).is_err());
        assert!(out2.is_empty());
        // A long run of array tags cannot blow the stack.
        let mut bytes = Vec::new();
        for _ in 0..100_000 {
            bytes.extend_from_slice(&[T_ARRAY, 1]);
        }
        bytes.push(T_NULL);
        assert!(decode_value(&bytes).is_err());
        let mut obj = Vec::new();
        obj.extend_from_slice(&[T_OBJECT, 2, 1, b'a']);
        obj.extend_from_slice(&bytes);
        obj.extend_from_slice(&[1, b'b', T_NULL]);
        assert!(decode_field(&obj, "b").is_err());
    }

    #[test]
    fn raw_fields_split_and_join_records() {
        let rec = Value::Object(vec![
            ("a".into(), Value::Int(-7)),
            (
                "b".into(),
                Value::Array(vec![Value::Null, Value::String("x".into())]),
            ),
            ("c".into(), Value::Double(1.5)),
        ]);
        let mut bytes = Vec::new();
        encode_value(&rec, &mut bytes);
        let mut parts: Vec<(&[u8], &[u8])> = Vec::new();
        assert!(for_each_raw_field(&bytes, |n, v| parts.push((n, v))).unwrap());
        assert_eq!(parts.len(), 3);
        for (_, v) in &parts {
            assert_eq!(encoded_len(v).unwrap(), v.len());
        }
        // All fields back: the same record; two of them: those two.
        let mut out = Vec::new();
        encode_raw_fields(parts.len(), parts.iter().copied(), &mut out);
        assert_eq!(out, bytes);
        let mut two = Vec::new();
        encode_raw_fields(2, parts.iter().copied().skip(1), &mut two);
        assert_eq!(
            decode_value(&two).unwrap(),
            Value::Object(vec![
                (
                    "b".into(),
                    Value::Array(vec![Value::Null, Value::String("x".into())])
                ),
                ("c".into(), Value::Double(1.5)),
            ])
        );
        // Not an object: no fields; damage: an error.
        let mut int = Vec::new();
        encode_value(&Value::Int(3), &mut int);
        assert!(!for_each_raw_field(&int, |_, _| panic!("a field")).unwrap());
        assert!(for_each_raw_field(&bytes[..bytes.len() - 1], |_, _| {}).is_err());
        assert!(encoded_len(&[]).is_err());
    }

    #[test]
    fn decode_field_basics() {
        let v = parse_json_record(
            r#"{"id": 7, "user": {"name": "ann", "tags": ["x", "y"]}, "a.b": 1, "n": null}"#,
        )
        .unwrap();
        let mut out = Vec::new();
        encode_value(&v, &mut out);
        assert_eq!(decode_field(&out, "id").unwrap(), Some(Value::Int(7)));
        assert_eq!(decode_field(&out, "n").unwrap(), Some(Value::Null));
        assert_eq!(decode_field(&out, "missing").unwrap(), None);
        assert_eq!(decode_field(&out, "a.b").unwrap(), Some(Value::Int(1)));
        assert_eq!(decode_field(&out, "user.name").unwrap(), Some("ann".into()));
        assert_eq!(decode_field(&out, "user.tags.1").unwrap(), Some("y".into()));
        assert_eq!(decode_field(&out, "user.tags.2").unwrap(), None);
        assert_eq!(decode_field(&out, "id.x").unwrap(), None);
        let mut scalar = Vec::new();
        encode_value(&Value::Int(3), &mut scalar);
        assert_eq!(decode_field(&scalar, "id").unwrap(), None);
        assert!(decode_field(&[0xee], "id").is_err());
        assert!(decode_field(&out[..out.len() - 3], "zzz").is_err());
    }

    #[test]
    fn tweet_is_smaller_than_json() {
        let json = r#"{"id":1234567890123456789,"created_at":"2024-03-01T12:34:56Z","text":"Just setting up my LSM tree, compaction is fun #rust","user_id":987654321,"user_name":"silt_dev","retweets":12,"likes":240,"lang":"en","sensitive":false,"location":{"type":"Point","coordinates":[-122.4194,37.7749]}}"#;
        let v = parse_json_record(json).unwrap();
        let mut out = Vec::new();
        encode_value(&v, &mut out);
        assert!(
            out.len() < json.len(),
            "encoded {} bytes, JSON {} bytes",
            out.len(),
            json.len()
        );
        assert_eq!(decode_value(&out).unwrap(), v);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn prop_round_trip(v in arb_value()) {
            let mut out = Vec::new();
            encode_value(&v, &mut out);
            prop_assert_eq!(decode_value(&out).unwrap(), v);
        }

        #[test]
        fn prop_decode_field_agrees_with_get(v in arb_record()) {
            let mut out = Vec::new();
            encode_value(&v, &mut out);
            let decoded = decode_value(&out).unwrap();
            for path in path_candidates(&v) {
                prop_assert_eq!(
                    decode_field(&out, &path).unwrap(),
                    decoded.get(&path).cloned(),
                    "path {:?}", path
                );
            }
        }

        #[test]
        fn prop_visit_fields_agrees_with_decoding(v in arb_record()) {
            let mut out = Vec::new();
            encode_value(&v, &mut out);
            let Value::Object(fields) = decode_value(&out).unwrap() else {
                return Ok(());
            };
            // Every other field, by position.
            let mut seen = Vec::new();
            let mut i = 0;
            visit_fields(
                &out,
                |_| {
                    i += 1;
                    (i % 2 == 1).then_some(i - 1)
                },
                |slot, view| {
                    let back = match view {
                        FieldView::Null => Value::Null,
                        FieldView::Bool(b) => Value::Bool(b),
                        FieldView::Int(i) => Value::Int(i),
                        FieldView::Double(d) => Value::Double(d),
                        FieldView::Str(s) => Value::String(s.to_owned()),
                        FieldView::Bin(b) => Value::Binary(b.to_vec()),
                        FieldView::Encoded(e) => decode_value(e).unwrap(),
                    };
                    seen.push((slot, back));
                },
            )
            .unwrap();
            let want: Vec<(usize, Value)> = fields
                .into_iter()
                .enumerate()
                .filter(|(i, _)| i % 2 == 0)
                .map(|(i, (_, v))| (i, v))
                .collect();
            prop_assert_eq!(seen, want);
        }

        #[test]
        fn prop_random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode_value(&bytes);
            let _ = decode_field(&bytes, "a");
            let _ = decode_field(&bytes, "a.0.b");
            let _ = visit_fields(&bytes, |_| Some(0), |_, _| {});
        }

        #[test]
        fn prop_truncated_and_mutated_never_panic(
            v in arb_value(),
            cut in any::<prop::sample::Index>(),
            flip in any::<prop::sample::Index>(),
            xor in 1u8..=255,
        ) {
            let mut out = Vec::new();
            encode_value(&v, &mut out);
            let c = cut.index(out.len() + 1);
            if c < out.len() {
                prop_assert!(decode_value(&out[..c]).is_err());
            }
            let _ = decode_field(&out[..c], "a");
            if !out.is_empty() {
                let i = flip.index(out.len());
                out[i] ^= xor;
                let _ = decode_value(&out);
                let _ = decode_field(&out, "a");
            }
        }
    }
}
