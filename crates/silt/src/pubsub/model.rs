//! Subscriptions, publications and when they match (seed 001 §4.3,
//! Tables 4.1-4.2), with the decisions the text leaves open.
//!
//! A subscription `S = {id, Tmin, Tmax, TS, sid, uid}` asks for the
//! publications on `id` published in `[Tmin, Tmax)`; it is made at `TS` and
//! expires at `Tmax`. A publication `P = {id, TP, Tmax, pid, desc}` happens
//! at `TP` and expires at its `Tmax`. Expiry is exclusive everywhere
//! (valid at `t` means `t < Tmax`), and window starts are inclusive (the
//! text's `T > Tmin` drops `T = Tmin`; errata).
//!
//! **The match rule** ([`matches`]): `S` and `P` on the same id match when
//! `S.Tmin <= P.TP < S.Tmax` and, for a publication older than the
//! subscription (`P.TP < S.TS`), the publication is still valid when the
//! subscription is made (`S.TS < P.Tmax`: Algorithm 1 must compare the
//! subscription time with the publication's expiry, not the publication's
//! own time; errata). The rule depends only on the pair, never on which
//! arrived first, so the operation that comes second finds the pair and
//! the first cannot: every matching pair is reported exactly once
//! (SUBSCRIBE returns it when the publication was stored first, PUBLISH
//! when the subscription was), even out of time order. Operations on one
//! id are serialized so that "second" is well defined (erratum 8).
//!
//! **Content filters** (beyond the paper; [`Filter`]): a subscription may
//! also ask for words (every one must be among the description's words, as
//! the keyword index reads text: [`crate::geo::text::keyword_tokens`]) and
//! a region (a box the publication's location must fall in, edges
//! included; a publication without a location never passes). A filter is
//! part of the pair's rule, so exactly-once matching holds with filters
//! too. It is checked on the id's list, which the id and the time window
//! already narrow to the few candidates an index probe over every id
//! would have to be intersected with.

use crate::error::{Error, Result};
use crate::geo::text::{has_words, keyword_tokens};
use crate::value::{self as encoding, FieldView, Value};

/// What a subscription asks of a publication's content (empty: nothing).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filter {
    /// Words the description must all hold (any case; stored as keyword
    /// tokens, sorted).
    pub words: Vec<String>,
    /// `[x0, y0, x1, y1]`: the publication's location must be inside.
    pub region: Option<[f64; 4]>,
}

impl Filter {
    /// Whether `p` passes.
    pub fn admits(&self, p: &Publication) -> bool {
        if !self.words.is_empty() && !has_words(&p.desc, &self.words, true) {
            return false;
        }
        match (self.region, p.loc) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some([x0, y0, x1, y1]), Some((x, y))) => x0 <= x && x <= x1 && y0 <= y && y <= y1,
        }
    }

    /// Whether it asks for anything.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty() && self.region.is_none()
    }

    /// The filter with its words as keyword tokens (so a word with
    /// punctuation asks for each of its parts, as the text would be read).
    pub fn normalized(&self) -> Filter {
        Filter {
            words: keyword_tokens(&self.words.join(" ")),
            region: self.region,
        }
    }

    fn check(&self, sid: i64) -> Result<()> {
        if let Some(r @ [x0, y0, x1, y1]) = self.region
            && (r.iter().any(|v| !v.is_finite()) || x0 > x1 || y0 > y1)
        {
            return Err(Error::invalid(
                Some("region"),
                format!(
                    "subscription {sid}: region [{x0}, {y0}, {x1}, {y1}] is not a box (finite, x0 <= x1, y0 <= y1)"
                ),
            ));
        }
        Ok(())
    }
}

/// A subscription.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Subscription {
    /// The topic or cell (a key value: integer, string, ...).
    pub id: Value,
    /// The subscription's own id (unique per pub/sub space).
    pub sid: i64,
    /// The user who made it (self-joining subscriptions group by user).
    pub uid: i64,
    /// When it was made.
    pub ts: i64,
    /// The window of publication times it asks for: `[tmin, tmax)`; it
    /// expires at `tmax`.
    pub tmin: i64,
    pub tmax: i64,
    /// What it asks of a publication's content.
    pub filter: Filter,
}

/// A publication.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Publication {
    pub id: Value,
    /// The publication's own id (unique per pub/sub space).
    pub pid: i64,
    /// When it happened.
    pub tp: i64,
    /// When it expires.
    pub tmax: i64,
    pub desc: String,
    /// Where it happened (`x`, `y`: longitude and latitude, or any plane),
    /// for subscriptions with a region.
    pub loc: Option<(f64, f64)>,
}

/// Whether `s` and `p` (on the same id) match: see the module docs.
pub fn matches(s: &Subscription, p: &Publication) -> bool {
    s.tmin <= p.tp && p.tp < s.tmax && (p.tp >= s.ts || s.ts < p.tmax) && s.filter.admits(p)
}

/// Whether `s` is live at `t`: made by then and not expired.
pub fn live_at(s: &Subscription, t: i64) -> bool {
    s.ts <= t && t < s.tmax
}

/// The record kinds, the last part of a DualDB list key.
pub(super) const SUB: &str = "S";
pub(super) const PUB: &str = "P";

impl Subscription {
    /// Refuse what can never be valid.
    pub fn check(&self) -> Result<()> {
        key_id(&self.id)?;
        if self.tmin >= self.tmax {
            return Err(Error::invalid(
                Some("tmin"),
                format!(
                    "subscription {}: its window [{}, {}) is empty (tmin must be below tmax)",
                    self.sid, self.tmin, self.tmax
                ),
            ));
        }
        self.filter.check(self.sid)
    }

    /// The stored record: its list time `t` is when it was made (list
    /// times are operation times, which the lists' expiry clock follows;
    /// a subscription list is read whole, as Algorithm 2 does, filtered by
    /// expiry).
    pub(super) fn record(&self) -> Value {
        let mut fields = vec![
            ("kind".into(), Value::String(SUB.into())),
            ("iid".into(), Value::Int(self.sid)),
            ("id".into(), self.id.clone()),
            ("t".into(), Value::Int(self.ts)),
            ("tmax".into(), Value::Int(self.tmax)),
            ("tmin".into(), Value::Int(self.tmin)),
            ("ts".into(), Value::Int(self.ts)),
            ("uid".into(), Value::Int(self.uid)),
        ];
        if !self.filter.words.is_empty() {
            let words = self.filter.words.iter().cloned().map(Value::String);
            fields.push(("words".into(), Value::Array(words.collect())));
        }
        if let Some(r) = self.filter.region {
            let r = r.iter().map(|v| Value::Double(*v));
            fields.push(("region".into(), Value::Array(r.collect())));
        }
        Value::Object(fields)
    }
}

impl Publication {
    /// Refuse what can never be valid.
    pub fn check(&self) -> Result<()> {
        key_id(&self.id)?;
        if self.tp >= self.tmax {
            return Err(Error::invalid(
                Some("tmax"),
                format!(
                    "publication {}: it expires ({}) no later than it happens ({})",
                    self.pid, self.tmax, self.tp
                ),
            ));
        }
        if let Some((x, y)) = self.loc
            && !(x.is_finite() && y.is_finite())
        {
            return Err(Error::invalid(
                Some("loc"),
                format!(
                    "publication {}: location ({x}, {y}) is not finite",
                    self.pid
                ),
            ));
        }
        Ok(())
    }

    /// The stored record: its list time `t` is its publication time.
    pub(super) fn record(&self) -> Value {
        let mut fields = vec![
            ("kind".into(), Value::String(PUB.into())),
            ("iid".into(), Value::Int(self.pid)),
            ("id".into(), self.id.clone()),
            ("t".into(), Value::Int(self.tp)),
            ("tmax".into(), Value::Int(self.tmax)),
            ("desc".into(), Value::String(self.desc.clone())),
        ];
        if let Some((x, y)) = self.loc {
            fields.push((
                "loc".into(),
                Value::Array(vec![Value::Double(x), Value::Double(y)]),
            ));
        }
        Value::Object(fields)
    }
}

/// A stored record, read in place from its encoding
/// ([`crate::value::encoding::visit_fields`]): a list read builds no
/// [`Value`] per item, only the subscription or publication it holds.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Stored {
    Sub(Subscription),
    Pub(Publication),
}

/// The fields of a stored record, in the order [`Stored::decode`] keeps
/// them.
const FIELDS: [&str; 12] = [
    "kind", "iid", "t", "tmax", "tmin", "ts", "uid", "id", "desc", "loc", "words", "region",
];
/// Slots of the integer fields (`iid` .. `uid`).
const INTS: std::ops::Range<usize> = 1..7;

impl Stored {
    pub(super) fn decode(bytes: &[u8]) -> Result<Stored> {
        let mut kind = None;
        let mut ints: [Option<i64>; 7] = [None; 7];
        let mut id = Value::Null;
        let mut desc = String::new();
        let mut nested: [Option<&[u8]>; 3] = [None; 3];
        let mut bad = None;
        encoding::visit_fields(
            bytes,
            |name| FIELDS.iter().position(|f| f.as_bytes() == name),
            |slot, v| match (slot, v) {
                (0, FieldView::Str(k)) if k == SUB => kind = Some(true),
                (0, FieldView::Str(k)) if k == PUB => kind = Some(false),
                (i, FieldView::Int(x)) if INTS.contains(&i) => ints[i] = Some(x),
                (7, FieldView::Int(x)) => id = Value::Int(x),
                (7, FieldView::Str(x)) => id = Value::String(x.to_owned()),
                (7, FieldView::Bin(x)) => id = Value::Binary(x.to_vec()),
                (7, FieldView::Encoded(x)) => match encoding::decode_value(x) {
                    Ok(v) => id = v,
                    Err(_) => bad = Some(FIELDS[7]),
                },
                (8, FieldView::Str(x)) => desc = x.to_owned(),
                (i @ 9..12, FieldView::Encoded(x)) => nested[i - 9] = Some(x),
                (i, _) => bad = Some(FIELDS[i]),
            },
        )?;
        if let Some(f) = bad {
            return Err(bad_field(f));
        }
        let int = |i: usize| ints[i].ok_or_else(|| bad_field(FIELDS[i]));
        let array = |i: usize| -> Result<Option<Vec<Value>>> {
            match nested[i - 9].map(encoding::decode_value).transpose() {
                Ok(None) => Ok(None),
                Ok(Some(Value::Array(v))) => Ok(Some(v)),
                _ => Err(bad_field(FIELDS[i])),
            }
        };
        match kind {
            Some(true) => {
                let words = match array(10)? {
                    None => Vec::new(),
                    Some(w) => w
                        .into_iter()
                        .map(|w| match w {
                            Value::String(s) => Ok(s),
                            _ => Err(bad_field("words")),
                        })
                        .collect::<Result<_>>()?,
                };
                let region = array(11)?.map(|v| doubles(&v, "region")).transpose()?;
                Ok(Stored::Sub(Subscription {
                    id,
                    sid: int(1)?,
                    uid: int(6)?,
                    ts: int(5)?,
                    tmin: int(4)?,
                    tmax: int(3)?,
                    filter: Filter { words, region },
                }))
            }
            Some(false) => {
                let loc = match array(9)? {
                    None => None,
                    Some(v) => {
                        let [x, y] = doubles(&v, "loc")?;
                        Some((x, y))
                    }
                };
                Ok(Stored::Pub(Publication {
                    id,
                    pid: int(1)?,
                    tp: int(2)?,
                    tmax: int(3)?,
                    desc,
                    loc,
                }))
            }
            None => Err(bad_field("kind")),
        }
    }

    /// The (kind, iid) identity of the stored item.
    pub(super) fn identity(&self) -> (bool, i64) {
        match self {
            Stored::Sub(s) => (true, s.sid),
            Stored::Pub(p) => (false, p.pid),
        }
    }
}

fn bad_field(f: &str) -> Error {
    Error::corrupt("<pub/sub record>", format!("field `{f}` is malformed"))
}

/// `N` doubles from a stored array.
pub(super) fn doubles<const N: usize>(v: &[Value], f: &str) -> Result<[f64; N]> {
    let mut out = [0.0; N];
    if v.len() != N {
        return Err(bad_field(f));
    }
    for (o, x) in out.iter_mut().zip(v) {
        *o = match x {
            Value::Double(d) => *d,
            _ => return Err(bad_field(f)),
        };
    }
    Ok(out)
}

/// An id must be a key value.
fn key_id(id: &Value) -> Result<()> {
    match id {
        Value::Bool(_) | Value::Int(_) | Value::Double(_) | Value::String(_) | Value::Binary(_) => {
            Ok(())
        }
        v => Err(Error::invalid(
            Some("id"),
            format!(
                "a pub/sub id must be a number, string or binary, got {}",
                v.type_name()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(r: &Value) -> Stored {
        let mut b = Vec::new();
        encoding::encode_value(r, &mut b);
        Stored::decode(&b).unwrap()
    }

    fn sub(ts: i64, tmin: i64, tmax: i64) -> Subscription {
        Subscription {
            id: Value::Int(1),
            sid: 1,
            uid: 1,
            ts,
            tmin,
            tmax,
            ..Default::default()
        }
    }

    fn publ(tp: i64, tmax: i64) -> Publication {
        Publication {
            id: Value::Int(1),
            pid: 1,
            tp,
            tmax,
            desc: String::new(),
            ..Default::default()
        }
    }

    #[test]
    fn the_rule_on_the_papers_example() {
        // §4.3: a driver at TS = 100 asks for [TS - 10, TS + 10).
        let s = sub(100, 90, 110);
        // Published at the window's start: included (the text's `>` drops it).
        assert!(matches(&s, &publ(90, 200)));
        // In the past, but expired before the subscription was made.
        assert!(!matches(&s, &publ(95, 100)));
        assert!(matches(&s, &publ(95, 101)));
        // In the future, before the subscription expires.
        assert!(matches(&s, &publ(109, 110)));
        assert!(!matches(&s, &publ(110, 120)));
        // Before the window.
        assert!(!matches(&s, &publ(89, 500)));
    }

    #[test]
    fn records_round_trip_and_bad_input_is_refused() {
        let s = sub(5, 0, 10);
        assert_eq!(stored(&s.record()), Stored::Sub(s.clone()));
        let p = publ(3, 9);
        assert_eq!(stored(&p.record()), Stored::Pub(p.clone()));
        // A record that is not one is refused, naming the field.
        let mut r = Vec::new();
        encoding::encode_value(
            &Value::Object(vec![("kind".into(), Value::String(SUB.into()))]),
            &mut r,
        );
        let e = Stored::decode(&r).unwrap_err().to_string();
        assert!(e.contains("`iid`"), "{e}");
        assert!(sub(5, 10, 10).check().is_err());
        assert!(publ(9, 9).check().is_err());
        let mut bad = publ(1, 2);
        bad.id = Value::Array(vec![]);
        assert!(bad.check().is_err());
    }

    #[test]
    fn content_filters_admit_by_words_and_region() {
        let f = Filter {
            words: vec!["Road".into(), "closed,".into()],
            region: None,
        }
        .normalized();
        assert_eq!(f.words, ["closed", "road"]);
        let mut p = publ(1, 2);
        p.desc = "ROAD closed: detour".into();
        assert!(f.admits(&p));
        p.desc = "road open".into();
        assert!(!f.admits(&p));
        let boxed = Filter {
            words: vec![],
            region: Some([0.0, 0.0, 1.0, 1.0]),
        };
        assert!(!boxed.admits(&p), "no location, no region match");
        p.loc = Some((1.0, 0.0));
        assert!(boxed.admits(&p), "edges included");
        p.loc = Some((1.5, 0.0));
        assert!(!boxed.admits(&p));
        // A filter is part of the pair's rule.
        let mut s = sub(100, 90, 110);
        s.filter = boxed.clone();
        p.tp = 95;
        p.tmax = 200;
        assert!(!matches(&s, &p));
        p.loc = Some((0.5, 0.5));
        assert!(matches(&s, &p));
        // Stored and read back whole.
        assert_eq!(stored(&s.record()), Stored::Sub(s.clone()));
        assert_eq!(stored(&p.record()), Stored::Pub(p.clone()));
        // Bad regions and locations are refused.
        for r in [[0.0, 0.0, f64::NAN, 1.0], [2.0, 0.0, 1.0, 1.0]] {
            s.filter.region = Some(r);
            assert!(s.check().is_err(), "{r:?}");
        }
        p.loc = Some((f64::INFINITY, 0.0));
        assert!(p.check().is_err());
    }
}
