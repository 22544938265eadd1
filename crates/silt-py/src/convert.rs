//! Python objects ⇄ `silt::Value`.
//!
//! To Silt: `None`, `bool`, `int` (int64; larger values are refused),
//! `float`, `str`, `bytes` / `bytearray` / `memoryview`, `list` / `tuple`,
//! `dict` with `str` keys, objects with `__geo_interface__` (shapely and
//! friends: their GeoJSON dict), and number-like objects (`__index__`, e.g.
//! numpy integers; `float` subclasses and `__float__`, e.g. numpy floats).
//! GeoJSON dicts, WKT strings and `[lon, lat]` lists become geometries in
//! fields declared `point`, `rectangle`, `polygon` or `geometry` (the core's
//! coercion does that).
//!
//! To Python: the inverse, geometries as GeoJSON dicts (a rectangle is a
//! `Polygon` with a `bbox` it traces, which converts back to a rectangle).

use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyMemoryView, PyString, PyTuple,
};
use silt::{Geometry, Value};

use crate::errors::{BindError, IntoPyResult};

/// Maximum nesting of lists and dicts (the core's limit; also bounds the
/// recursion on self-referencing lists).
const MAX_DEPTH: usize = silt::value::MAX_DEPTH;

/// A conversion failure: the path to the bad element (innermost first) and why.
struct ConvError {
    path: Vec<String>,
    reason: String,
}

impl ConvError {
    fn new(reason: impl Into<String>) -> Self {
        ConvError {
            path: Vec::new(),
            reason: reason.into(),
        }
    }

    fn at(mut self, seg: String) -> Self {
        self.path.push(seg);
        self
    }

    fn into_bind(self) -> BindError {
        let field = if self.path.is_empty() {
            None
        } else {
            Some(
                self.path
                    .iter()
                    .rev()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("."),
            )
        };
        BindError::InvalidInput {
            field,
            reason: self.reason,
        }
    }
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".to_owned())
}

/// Convert a Python object to a value.
pub fn to_value(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    let py = obj.py();
    convert(obj, 0).map_err(ConvError::into_bind).py_err(py)
}

/// Convert a record: it must be a dict (or have `__geo_interface__`... no:
/// a record is a mapping of field names).
pub fn to_record(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    let py = obj.py();
    if !obj.is_instance_of::<PyDict>() {
        return Err(BindError::invalid(format!(
            "a record must be a dict of field names to values, got {}",
            type_name(obj)
        )))
        .py_err(py);
    }
    to_value(obj)
}

fn convert(obj: &Bound<'_, PyAny>, depth: usize) -> Result<Value, ConvError> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if obj.is_instance_of::<PyBool>() {
        return obj
            .extract::<bool>()
            .map(Value::Bool)
            .map_err(|e| ConvError::new(e.to_string()));
    }
    if obj.is_instance_of::<PyInt>() {
        return int_value(obj);
    }
    if obj.is_instance_of::<PyFloat>() {
        return obj
            .extract::<f64>()
            .map(Value::Double)
            .map_err(|e| ConvError::new(e.to_string()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return s
            .to_cow()
            .map(|s| Value::String(s.into_owned()))
            .map_err(|e| ConvError::new(format!("text that is not valid UTF-8: {e}")));
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Value::Binary(b.as_bytes().to_vec()));
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(Value::Binary(b.to_vec()));
    }
    if obj.is_instance_of::<PyMemoryView>() {
        let bytes = obj
            .call_method0("tobytes")
            .and_then(|b| b.extract::<Vec<u8>>())
            .map_err(|e| ConvError::new(format!("cannot read the memoryview: {e}")))?;
        return Ok(Value::Binary(bytes));
    }
    if depth >= MAX_DEPTH {
        return Err(ConvError::new(format!(
            "values nest deeper than {MAX_DEPTH} levels of lists and dicts"
        )));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut fields = Vec::with_capacity(d.len());
        for (k, v) in d.iter() {
            let Ok(name) = k.cast::<PyString>() else {
                return Err(ConvError::new(format!(
                    "dict keys must be str, got {} key {}",
                    type_name(&k),
                    k.repr().map(|r| r.to_string()).unwrap_or_default()
                )));
            };
            let name = name
                .to_cow()
                .map_err(|e| ConvError::new(format!("a key that is not valid UTF-8: {e}")))?
                .into_owned();
            let v = convert(&v, depth + 1).map_err(|e| e.at(name.clone()))?;
            fields.push((name, v));
        }
        return Ok(Value::Object(fields));
    }
    if let Ok(l) = obj.cast::<PyList>() {
        let mut items = Vec::with_capacity(l.len());
        for (i, v) in l.iter().enumerate() {
            items.push(convert(&v, depth + 1).map_err(|e| e.at(i.to_string()))?);
        }
        return Ok(Value::Array(items));
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        let mut items = Vec::with_capacity(t.len());
        for (i, v) in t.iter().enumerate() {
            items.push(convert(&v, depth + 1).map_err(|e| e.at(i.to_string()))?);
        }
        return Ok(Value::Array(items));
    }
    if let Ok(geo) = obj.getattr("__geo_interface__") {
        return convert(&geo, depth + 1);
    }
    // Dates, times and decimals as the text their declared fields read
    // (a Decimal must not become a float through `__float__`).
    if let Some(t) = crate::typed::text_of(obj).map_err(|e| ConvError::new(e.to_string()))? {
        return Ok(Value::String(t));
    }
    if obj.hasattr("__index__").unwrap_or(false) {
        let i = obj
            .call_method0("__index__")
            .map_err(|e| ConvError::new(e.to_string()))?;
        return int_value(&i);
    }
    if obj.hasattr("__float__").unwrap_or(false) {
        return obj
            .call_method0("__float__")
            .and_then(|f| f.extract::<f64>())
            .map(Value::Double)
            .map_err(|e| ConvError::new(e.to_string()));
    }
    Err(ConvError::new(format!(
        "cannot store a Python {} value; use None, bool, int, float, str, bytes, list, tuple, dict, datetime.date, datetime.datetime, decimal.Decimal or a GeoJSON geometry dict",
        type_name(obj)
    )))
}

fn int_value(obj: &Bound<'_, PyAny>) -> Result<Value, ConvError> {
    obj.extract::<i64>().map(Value::Int).map_err(|_| {
        ConvError::new(format!(
            "integer {} is outside the int64 range [-2**63, 2**63 - 1]; store it as a float or a str",
            obj.str().map(|s| s.to_string()).unwrap_or_default()
        ))
    })
}

/// A primary key or index bound: a scalar (one field) or a tuple / list of
/// values (several fields, or a prefix of them).
pub fn to_key(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Value>> {
    if obj.is_instance_of::<PyTuple>() || obj.is_instance_of::<PyList>() {
        let mut out = Vec::new();
        for item in obj.try_iter()? {
            out.push(to_value(&item?)?);
        }
        Ok(out)
    } else {
        Ok(vec![to_value(obj)?])
    }
}

/// A value as a Python object.
pub fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    match v {
        Value::Null => Ok(py.None().into_bound(py)),
        Value::Bool(b) => b.into_bound_py_any(py),
        Value::Int(i) => i.into_bound_py_any(py),
        Value::Double(d) => d.into_bound_py_any(py),
        Value::String(s) => s.into_bound_py_any(py),
        Value::Binary(b) => Ok(PyBytes::new(py, b).into_any()),
        Value::Array(a) => {
            let list = PyList::empty(py);
            for item in a {
                list.append(to_py(py, item)?)?;
            }
            Ok(list.into_any())
        }
        Value::Object(fields) => {
            let d = PyDict::new(py);
            for (k, v) in fields {
                // With repeated names (only possible for records built in
                // Rust) the first one wins, as `Value::get` does.
                if !d.contains(k)? {
                    d.set_item(k, to_py(py, v)?)?;
                }
            }
            Ok(d.into_any())
        }
        Value::Geometry(g) => geometry_to_py(py, g),
    }
}

fn ring_to_py<'py>(py: Python<'py>, ring: &[(f64, f64)]) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, ring.iter().map(|(x, y)| vec![*x, *y]))
}

/// A geometry as a GeoJSON dict.
pub fn geometry_to_py<'py>(py: Python<'py>, g: &Geometry) -> PyResult<Bound<'py, PyAny>> {
    let d = PyDict::new(py);
    match g {
        Geometry::Point { x, y } => {
            d.set_item("type", "Point")?;
            d.set_item("coordinates", vec![*x, *y])?;
        }
        Geometry::Rect {
            min_x,
            min_y,
            max_x,
            max_y,
        } => {
            d.set_item("type", "Polygon")?;
            d.set_item("bbox", vec![*min_x, *min_y, *max_x, *max_y])?;
            let ring = [
                (*min_x, *min_y),
                (*max_x, *min_y),
                (*max_x, *max_y),
                (*min_x, *max_y),
                (*min_x, *min_y),
            ];
            d.set_item("coordinates", PyList::new(py, [ring_to_py(py, &ring)?])?)?;
        }
        Geometry::Polygon { exterior, holes } => {
            d.set_item("type", "Polygon")?;
            let rings = PyList::empty(py);
            rings.append(ring_to_py(py, exterior)?)?;
            for h in holes {
                rings.append(ring_to_py(py, h)?)?;
            }
            d.set_item("coordinates", rings)?;
        }
    }
    Ok(d.into_any())
}

/// A primary key as Python: the value itself for a one-field key, a tuple
/// otherwise (what `get` and `delete` accept).
pub fn key_to_py<'py>(py: Python<'py>, pk: &[Value]) -> PyResult<Bound<'py, PyAny>> {
    match pk {
        [one] => to_py(py, one),
        many => {
            let items = many
                .iter()
                .map(|v| to_py(py, v))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(PyTuple::new(py, items)?.into_any())
        }
    }
}

/// A JSON value (statistics, definitions) as Python.
pub fn json_to_py<'py>(py: Python<'py>, j: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value as J;
    match j {
        J::Null => Ok(py.None().into_bound(py)),
        J::Bool(b) => b.into_bound_py_any(py),
        J::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_bound_py_any(py)
            } else if let Some(u) = n.as_u64() {
                u.into_bound_py_any(py)
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_bound_py_any(py)
            }
        }
        J::String(s) => s.into_bound_py_any(py),
        J::Array(a) => {
            let list = PyList::empty(py);
            for item in a {
                list.append(json_to_py(py, item)?)?;
            }
            Ok(list.into_any())
        }
        J::Object(m) => {
            let d = PyDict::new(py);
            for (k, v) in m {
                d.set_item(k, json_to_py(py, v)?)?;
            }
            Ok(d.into_any())
        }
    }
}

/// Any serializable core structure (stats, definitions) as Python.
pub fn serde_to_py<'py, T: serde::Serialize>(
    py: Python<'py>,
    v: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let j = serde_json::to_value(v)
        .map_err(|e| BindError::Internal(format!("cannot encode statistics: {e}")))
        .py_err(py)?;
    json_to_py(py, &j)
}

/// A geometry argument of a query: anything a `geometry` field accepts
/// (GeoJSON dict, WKT string, `[x, y]`, `(min_x, min_y, max_x, max_y)`).
pub fn to_geometry(obj: &Bound<'_, PyAny>) -> PyResult<Geometry> {
    let py = obj.py();
    let v = to_value(obj)?;
    let v = silt::value::coerce("geometry", silt::FieldType::Geometry, v).py_err(py)?;
    match v {
        Value::Geometry(g) => Ok(g),
        other => Err(BindError::invalid(format!(
            "expected a geometry (GeoJSON dict, WKT string, [lon, lat] or (min_x, min_y, max_x, max_y)), got {}",
            other.type_name()
        )))
        .py_err(py),
    }
}
