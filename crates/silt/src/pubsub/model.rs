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

use crate::error::{Error, Result};
use crate::value::Value;

/// A subscription.
#[derive(Clone, Debug, PartialEq)]
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
}

/// A publication.
#[derive(Clone, Debug, PartialEq)]
pub struct Publication {
    pub id: Value,
    /// The publication's own id (unique per pub/sub space).
    pub pid: i64,
    /// When it happened.
    pub tp: i64,
    /// When it expires.
    pub tmax: i64,
    pub desc: String,
}

/// Whether `s` and `p` (on the same id) match: see the module docs.
pub fn matches(s: &Subscription, p: &Publication) -> bool {
    s.tmin <= p.tp && p.tp < s.tmax && (p.tp >= s.ts || s.ts < p.tmax)
}

/// Whether `s` is live at `t`: made by then and not expired.
pub fn live_at(s: &Subscription, t: i64) -> bool {
    s.ts <= t && t < s.tmax
}

/// The record kinds, the last part of a DualDB list key.
pub(super) const SUB: &str = "S";
pub(super) const PUB: &str = "P";

fn int(r: &Value, f: &str) -> Result<i64> {
    match r.get(f) {
        Some(Value::Int(v)) => Ok(*v),
        _ => Err(Error::corrupt(
            "<pub/sub record>",
            format!("field `{f}` is not an integer"),
        )),
    }
}

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
        Ok(())
    }

    /// The stored record: its list time `t` is when it was made (list
    /// times are operation times, which the lists' expiry clock follows;
    /// a subscription list is read whole, as Algorithm 2 does, filtered by
    /// expiry).
    pub(super) fn record(&self) -> Value {
        Value::Object(vec![
            ("kind".into(), Value::String(SUB.into())),
            ("iid".into(), Value::Int(self.sid)),
            ("id".into(), self.id.clone()),
            ("t".into(), Value::Int(self.ts)),
            ("tmax".into(), Value::Int(self.tmax)),
            ("tmin".into(), Value::Int(self.tmin)),
            ("ts".into(), Value::Int(self.ts)),
            ("uid".into(), Value::Int(self.uid)),
        ])
    }

    pub(super) fn from_record(r: &Value) -> Result<Subscription> {
        Ok(Subscription {
            id: r.get("id").cloned().unwrap_or(Value::Null),
            sid: int(r, "iid")?,
            uid: int(r, "uid")?,
            ts: int(r, "ts")?,
            tmin: int(r, "tmin")?,
            tmax: int(r, "tmax")?,
        })
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
        Ok(())
    }

    /// The stored record: its list time `t` is its publication time.
    pub(super) fn record(&self) -> Value {
        Value::Object(vec![
            ("kind".into(), Value::String(PUB.into())),
            ("iid".into(), Value::Int(self.pid)),
            ("id".into(), self.id.clone()),
            ("t".into(), Value::Int(self.tp)),
            ("tmax".into(), Value::Int(self.tmax)),
            ("desc".into(), Value::String(self.desc.clone())),
        ])
    }

    pub(super) fn from_record(r: &Value) -> Result<Publication> {
        Ok(Publication {
            id: r.get("id").cloned().unwrap_or(Value::Null),
            pid: int(r, "iid")?,
            tp: int(r, "t")?,
            tmax: int(r, "tmax")?,
            desc: match r.get("desc") {
                Some(Value::String(s)) => s.clone(),
                _ => String::new(),
            },
        })
    }
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

    fn sub(ts: i64, tmin: i64, tmax: i64) -> Subscription {
        Subscription {
            id: Value::Int(1),
            sid: 1,
            uid: 1,
            ts,
            tmin,
            tmax,
        }
    }

    fn publ(tp: i64, tmax: i64) -> Publication {
        Publication {
            id: Value::Int(1),
            pid: 1,
            tp,
            tmax,
            desc: String::new(),
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
        assert_eq!(Subscription::from_record(&s.record()).unwrap(), s);
        let p = publ(3, 9);
        assert_eq!(Publication::from_record(&p.record()).unwrap(), p);
        assert!(sub(5, 10, 10).check().is_err());
        assert!(publ(9, 9).check().is_err());
        let mut bad = publ(1, 2);
        bad.id = Value::Array(vec![]);
        assert!(bad.check().is_err());
    }
}
