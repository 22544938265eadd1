//! Values of declared date, time, interval and decimal fields as Python
//! has them.
//!
//! Going in, `datetime.date`, `datetime.datetime`, `datetime.timedelta`
//! and `decimal.Decimal` become their ISO / plain text, which a declared
//! field's type reads (`date`, `timestamp`, `timestamptz`, `interval`,
//! `decimal(p,s)`; an undeclared field keeps the text). A declared
//! `interval` comes out as a `datetime.timedelta` when it has no months
//! (Python's timedelta has none), else as its ISO 8601 text. Coming out, a record's declared fields of those types
//! become `datetime.date`, naive `datetime.datetime`, UTC
//! `datetime.datetime` and `decimal.Decimal` (stored as days, microseconds
//! and canonical text: see `silt::value::temporal`). A stored value Python
//! cannot hold (a year past 9999) comes out as stored. Arrays of those
//! types come out as lists of them.

use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyDict, PyList};
use silt::{DatasetDef, FieldType, Value};

use crate::convert::to_py;

/// The declared fields of a dataset that come out as Python objects of
/// their own (empty for most datasets: then records convert as before).
#[derive(Clone, Default)]
pub struct Typed(Vec<(String, FieldType)>);

impl Typed {
    pub fn of(def: &DatasetDef) -> Typed {
        Typed(
            def.fields
                .iter()
                .filter(|(_, t)| is_typed(*t))
                .cloned()
                .collect(),
        )
    }

    /// A record as a dict, its typed fields converted.
    pub fn record<'py>(&self, py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
        let Value::Object(fields) = v else {
            return to_py(py, v);
        };
        if self.0.is_empty() {
            return to_py(py, v);
        }
        let d = PyDict::new(py);
        for (k, v) in fields {
            if d.contains(k)? {
                continue;
            }
            let ty = self.0.iter().find(|(n, _)| n == k).map(|(_, t)| *t);
            let obj = match ty {
                Some(t) => typed_value(py, t, v)?,
                None => to_py(py, v)?,
            };
            d.set_item(k, obj)?;
        }
        Ok(d.into_any())
    }
}

/// Whether values of `t` come out as Python objects of their own (arrays
/// of such elements too).
fn is_typed(t: FieldType) -> bool {
    match t {
        FieldType::Date
        | FieldType::Timestamp
        | FieldType::TimestampTz
        | FieldType::Interval
        | FieldType::Decimal { .. } => true,
        FieldType::Array(e) => is_typed(e.field_type()),
        _ => false,
    }
}

/// Days since 1970-01-01 as a proleptic Gregorian ordinal (`date.toordinal`).
const EPOCH_ORDINAL: i64 = 719_163;

fn typed_value<'py>(py: Python<'py>, t: FieldType, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    if let (FieldType::Array(e), Value::Array(items)) = (t, v) {
        let list = PyList::empty(py);
        for item in items {
            list.append(typed_value(py, e.field_type(), item)?)?;
        }
        return Ok(list.into_any());
    }
    let dt = py.import("datetime")?;
    let made = match (t, v) {
        (FieldType::Date, Value::Int(days)) => dt
            .getattr("date")?
            .call_method1("fromordinal", (EPOCH_ORDINAL.saturating_add(*days),)),
        (FieldType::Timestamp | FieldType::TimestampTz, Value::Int(micros)) => {
            let epoch = if t == FieldType::TimestampTz {
                let utc = dt.getattr("timezone")?.getattr("utc")?;
                dt.getattr("datetime")?
                    .call((1970, 1, 1, 0, 0, 0, 0, utc), None)?
            } else {
                dt.getattr("datetime")?.call1((1970, 1, 1))?
            };
            let delta = dt
                .getattr("timedelta")?
                .call((), Some(&[("microseconds", *micros)].into_py_dict(py)?))?;
            epoch.add(delta)
        }
        (FieldType::Decimal { .. }, Value::String(s)) => {
            py.import("decimal")?.getattr("Decimal")?.call1((s,))
        }
        (FieldType::Interval, Value::String(s)) => match silt::value::interval::parse(s) {
            Ok(i) if i.months == 0 => dt.getattr("timedelta")?.call(
                (),
                Some(&[("days", i64::from(i.days)), ("microseconds", i.micros)].into_py_dict(py)?),
            ),
            _ => return to_py(py, v),
        },
        _ => return to_py(py, v),
    };
    match made {
        Ok(o) => Ok(o),
        // Outside what Python's datetime holds: the value as stored.
        Err(_) => to_py(py, v),
    }
}

/// A `datetime.date`, `datetime.datetime` or `decimal.Decimal` as the text
/// a declared field reads, or None for anything else.
pub fn text_of(obj: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    let py = obj.py();
    let dt = py.import("datetime")?;
    if obj.is_instance(&dt.getattr("date")?)? {
        // datetime is a date too; isoformat() writes either (with the
        // offset when aware).
        return Ok(Some(obj.call_method0("isoformat")?.extract()?));
    }
    if obj.is_instance(&dt.getattr("timedelta")?)? {
        let days: i64 = obj.getattr("days")?.extract()?;
        let secs: i64 = obj.getattr("seconds")?.extract()?;
        let us: i64 = obj.getattr("microseconds")?.extract()?;
        return Ok(Some(format!("P{days}DT{secs}.{us:06}S")));
    }
    if obj.is_instance(&py.import("decimal")?.getattr("Decimal")?)? {
        return Ok(Some(obj.str()?.extract()?));
    }
    Ok(None)
}
