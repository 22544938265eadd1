//! Rows of one shape: records that give the same fields in the same order
//! (a `COPY`'s column list), prepared without building a record object.
//!
//! [`Dataset::row_shape`] works out once per load what
//! [`Dataset::prepare`] works out per record: each field's declared type,
//! what the dataset's defaults do for the rows, and where the primary key
//! and the NOT NULL fields are. [`Dataset::prepare_row_into`] then coerces,
//! checks and encodes one row straight into the record encoding: no field
//! name is copied, no object built, no field looked up by name. The record,
//! its key and its errors are those `prepare` makes of the same object
//! (tested against it).

use super::*;
use crate::value::FieldType;

/// Where a primary-key or NOT NULL field's value is in a prepared row.
#[derive(Clone, Copy, Debug)]
enum Source {
    /// The row's field at this position.
    Given(usize),
    /// The default filled in at this position of the filled fields.
    Filled(usize),
    /// Neither: the field is missing from every row.
    Missing,
}

/// What one default of the dataset does for a row, in the definition's order.
#[derive(Clone, Debug)]
enum DefaultStep {
    /// A counter's field given by the row: an integer moves the counter past it.
    Seen(usize),
    /// A counter's field the rows leave out: its next value.
    Take,
    /// A field the rows leave out: its default, read as its type.
    Value(FieldDefault, FieldType),
}

/// The shape of rows for [`Dataset::prepare_row_into`]: see the module
/// documentation. Made by [`Dataset::row_shape`] for one definition of the
/// dataset, under which its rows are prepared: once an `ALTER` has
/// replaced it, a batch of them is refused at its write
/// ([`Error::Altered`]); a new shape is made for the new definition.
#[derive(Clone, Debug)]
pub struct RowShape {
    def: Arc<DatasetDef>,
    names: Vec<String>,
    types: Vec<Option<FieldType>>,
    /// Per given field, the narrower type it was declared with.
    narrow: Vec<Option<crate::schema::Narrow>>,
    /// (field, step, the field's declared narrower type) per default of
    /// the definition that does something.
    defaults: Vec<(String, DefaultStep, Option<crate::schema::Narrow>)>,
    /// Names of the filled-in fields, in the order they are appended.
    filled: Vec<String>,
    pk: Vec<Source>,
    not_null: Vec<(String, Source)>,
    /// Positions of given fields that have a default: a row leaving one
    /// out (`None`) gets the default, so it is prepared as a record.
    defaulted: Vec<usize>,
    /// Whether rows are prepared directly: not with CHECK constraints
    /// (evaluated on a record object), nor with a key or NOT NULL field
    /// named by a path into a field.
    direct: bool,
}

impl RowShape {
    /// The fields each row gives, in order.
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

impl Dataset {
    /// The shape of rows giving the fields `names`, in this order (see
    /// [`Dataset::prepare_row_into`]).
    pub fn row_shape(&self, names: &[String]) -> RowShape {
        let def = self.def();
        let types = names.iter().map(|n| def.field_type(n)).collect();
        let narrow = names.iter().map(|n| def.narrow_of(n)).collect();
        let given = |f: &str| names.iter().position(|n| n == f);
        let mut defaults = Vec::new();
        let mut filled = Vec::new();
        let defaulted = names
            .iter()
            .enumerate()
            .filter(|(_, n)| def.defaults.iter().any(|(d, _)| d == *n))
            .map(|(i, _)| i)
            .collect();
        for (name, d) in &def.defaults {
            let step = match (given(name), d) {
                (Some(i), FieldDefault::Sequence) => DefaultStep::Seen(i),
                (Some(_), _) => continue,
                (None, FieldDefault::Sequence) => DefaultStep::Take,
                (None, d) => match def.field_type(name) {
                    Some(t) => DefaultStep::Value(d.clone(), t),
                    None => continue,
                },
            };
            if !matches!(step, DefaultStep::Seen(_)) {
                filled.push(name.clone());
            }
            defaults.push((name.clone(), step, def.narrow_of(name)));
        }
        let mut direct = def.checks.is_empty();
        let mut source = |f: &str| match (given(f), filled.iter().position(|n| n == f)) {
            (Some(i), _) => Source::Given(i),
            (None, Some(j)) => Source::Filled(j),
            (None, None) => {
                // `prepare` would look the path up inside a field.
                direct &= !f.contains('.');
                Source::Missing
            }
        };
        let pk = def.primary_key.iter().map(|k| source(k)).collect();
        let not_null = def
            .not_null
            .iter()
            .map(|f| (f.clone(), source(f)))
            .collect();
        RowShape {
            names: names.to_vec(),
            types,
            narrow,
            defaults,
            filled,
            pk,
            not_null,
            defaulted,
            direct,
            def,
        }
    }

    /// [`Dataset::prepare_into`] of the record whose fields are `row`'s
    /// values under `shape`'s names (`None`: the field is absent). The
    /// values are taken out of `row`, which the caller refills for the next
    /// row.
    pub fn prepare_row_into(
        &self,
        shape: &RowShape,
        row: &mut [Option<Value>],
        batch: &mut PreparedBatch,
    ) -> Result<()> {
        batch.push_with(self, shape.def.clone(), |_, out| {
            self.prepare_row_to(shape, row, out)
        })
    }

    /// [`Dataset::prepare_row_into`] appending the encoded key and then
    /// the encoded record to `out`; returns the key's length.
    fn prepare_row_to(
        &self,
        shape: &RowShape,
        row: &mut [Option<Value>],
        out: &mut Vec<u8>,
    ) -> Result<usize> {
        let def = &shape.def;
        if row.len() != shape.names.len() {
            return Err(Error::invalid(
                None,
                format!(
                    "a row of {} fields for a shape of {}",
                    row.len(),
                    shape.names.len()
                ),
            ));
        }
        if !shape.direct || shape.defaulted.iter().any(|&i| row[i].is_none()) {
            let fields = shape
                .names
                .iter()
                .zip(row.iter_mut())
                .filter_map(|(n, v)| v.take().map(|v| (n.clone(), v)))
                .collect();
            return self.prepare_to(def, Value::Object(fields), out);
        }
        for ((slot, name), ty) in row.iter_mut().zip(&shape.names).zip(&shape.types) {
            if let (Some(v), Some(t)) = (slot.as_mut(), ty) {
                let given = std::mem::replace(v, Value::Null);
                *v = value::coerce(name, *t, given)?;
            }
        }
        for ((slot, name), n) in row.iter().zip(&shape.names).zip(&shape.narrow) {
            if let (Some(v), Some(n)) = (slot, n) {
                n.check(name, v)?;
            }
        }
        let mut filled = Vec::with_capacity(shape.filled.len());
        for (name, step, narrow) in &shape.defaults {
            match step {
                DefaultStep::Seen(i) => {
                    if let Some(Value::Int(v)) = &row[*i] {
                        self.sequences.seen(name, &def.sequence_def(name), *v)?;
                    }
                }
                DefaultStep::Take => {
                    let v = self.sequences.take(name, &def.sequence_def(name), 1)?;
                    filled.push(Value::Int(v.first));
                }
                DefaultStep::Value(d, t) => filled.push(d.value(name, *t)?),
            }
            if let (Some(n), Some(v)) = (narrow, filled.last())
                && !matches!(step, DefaultStep::Seen(_))
            {
                n.check(name, v)?;
            }
        }
        let at = |s: Source| match s {
            Source::Given(i) => row[i].as_ref(),
            Source::Filled(j) => filled.get(j),
            Source::Missing => None,
        };
        for (f, s) in &shape.not_null {
            if matches!(at(*s), None | Some(Value::Null)) {
                return Err(Error::invalid(
                    Some(f),
                    "null value violates the NOT NULL constraint",
                ));
            }
        }
        let part = |(k, s): (&String, &Source)| match at(*s) {
            None | Some(Value::Null) => Err(Error::invalid(
                Some(k),
                "the primary key field is missing or null",
            )),
            Some(v) => Ok(v),
        };
        let start = out.len();
        if let ([k], [s]) = (&def.primary_key[..], &shape.pk[..]) {
            // One key field (the usual case): no list of parts.
            value::encode_key(&[part((k, s))?], out)?;
        } else {
            let parts = def.primary_key.iter().zip(&shape.pk).map(part);
            value::encode_key(&parts.collect::<Result<Vec<_>>>()?, out)?;
        }
        let key_len = out.len() - start;
        let fields = shape
            .names
            .iter()
            .zip(row.iter())
            .filter_map(|(n, v)| v.as_ref().map(|v| (n.as_str(), v)))
            .chain(shape.filled.iter().map(String::as_str).zip(&filled));
        let count = row.iter().filter(|v| v.is_some()).count() + filled.len();
        // `out` is a batch's buffer, reused batch after batch: no size hint.
        value::encode_fields(fields, count, out)?;
        check_record_size(out.len() - start - key_len)?;
        Ok(key_len)
    }
}
