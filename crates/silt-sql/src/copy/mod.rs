//! PostgreSQL's `COPY` between a client and a Silt table:
//! `COPY table [(columns)] FROM STDIN` loads rows the client streams
//! ([`CopyIn`]), `COPY table [(columns)] | (query) TO STDOUT` streams a
//! result back ([`encode::Encoder`]); in the text, CSV and binary formats,
//! with PostgreSQL's options (`FORMAT`, `DELIMITER`, `NULL`, `HEADER`,
//! `QUOTE`, `ESCAPE`, `FORCE_QUOTE`, `FORCE_NOT_NULL`, `FORCE_NULL`,
//! `ENCODING 'UTF8'`, `FREEZE`) and the pre-9.0 spellings (`BINARY`,
//! `CSV HEADER`, `DELIMITER AS`).
//!
//! Rows go straight into the dataset's batch write path, decoded from the
//! client's bytes into records without Arrow or DataFusion in between.
//! Outside a transaction block the rows are committed in transactions of
//! up to [`ROWS_PER_WRITE`] rows (atomic batches: one lock pass and one
//! commit for the batch, about 1.7x the rate of a transaction per row): a
//! failing row rolls back its batch and stops the load, the batches
//! before it stay committed, and the error says how many rows that is
//! ([`SqlError::PartialWrite`], numbering data rows from 1). Inside a
//! block the rows go into the block's transaction: all or none, as
//! PostgreSQL's COPY.
//!
//! `COPY table [(columns)] FROM 'file'` loads a file on the server (it
//! needs the server-files setting, as reading any server file does): a
//! text, CSV or binary file goes through the same [`CopyIn`] as a client's
//! stream; a Parquet file (`FORMAT parquet`, or a `.parquet` name) is read
//! into Arrow batches by column name, re-encoded as COPY text rows and
//! loaded the same way ([`file`]). `COPY ... TO 'file'` (CSV, JSON,
//! Parquet) is DataFusion's; `PROGRAM` is refused.

pub mod decode;
pub mod encode;
pub mod field;
pub mod file;
pub mod progress;

use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{
    CopyLegacyCsvOption, CopyLegacyOption, CopyOption, CopySource, CopyTarget, Ident, ObjectName,
    Statement,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use silt::{Dataset, PendingAck, PreparedBatch, RowShape, Value};
use tokio::task::JoinHandle;

use crate::ddl;
use crate::error::SqlError;
use crate::session::TxnSlot;
use crate::target::{Table, Target, Written};
use decode::{Decoder, Step};
use progress::LoadProgress;

/// The data format of a `COPY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyFormat {
    Text,
    Csv,
    Binary,
}

/// CSV's `FORCE_QUOTE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForceQuote {
    None,
    All,
    Columns(Vec<String>),
}

/// The options of a `COPY`, with PostgreSQL's defaults per format.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyOptions {
    pub format: CopyFormat,
    pub delimiter: u8,
    pub null: String,
    pub header: bool,
    pub quote: u8,
    pub escape: u8,
    pub force_quote: ForceQuote,
    pub force_not_null: Vec<String>,
    pub force_null: Vec<String>,
}

impl CopyOptions {
    /// PostgreSQL's defaults for `format`: tab and `\N` for text, comma,
    /// the empty string and `"` for CSV.
    pub fn defaults(format: CopyFormat) -> CopyOptions {
        let csv = format == CopyFormat::Csv;
        CopyOptions {
            format,
            delimiter: if csv { b',' } else { b'\t' },
            null: if csv { String::new() } else { "\\N".to_owned() },
            header: false,
            quote: b'"',
            escape: b'"',
            force_quote: ForceQuote::None,
            force_not_null: vec![],
            force_null: vec![],
        }
    }
}

/// What a `COPY` moves.
#[derive(Debug, Clone, PartialEq)]
pub enum CopyKind {
    /// `COPY table [(columns)] FROM STDIN`.
    In {
        table: ObjectName,
        /// The columns the data has, in order (empty: all of them).
        columns: Vec<String>,
    },
    /// `COPY ... TO STDOUT`: the query whose rows are sent.
    Out { query: String },
    /// `COPY table [(columns)] FROM 'path'`: a file on the server.
    InFile {
        table: ObjectName,
        columns: Vec<String>,
        path: String,
        /// A Parquet file (else the options' format).
        parquet: bool,
    },
}

/// A `COPY` between the client and the server.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyStmt {
    pub kind: CopyKind,
    pub options: CopyOptions,
}

fn unsupported(what: &str) -> SqlError {
    SqlError::Unsupported(format!(
        "{what}; COPY runs between the server and its client: COPY ... FROM STDIN (psql's \\copy, psycopg's cursor.copy()) and COPY ... TO STDOUT"
    ))
}

fn one_byte(c: char, what: &str) -> Result<u8, SqlError> {
    u8::try_from(c).ok().filter(u8::is_ascii).ok_or_else(|| {
        SqlError::Invalid(format!("COPY {what} must be a single one-byte character"))
    })
}

fn names(ids: &[Ident]) -> Vec<String> {
    ids.iter().map(ddl::ident).collect()
}

/// Parse a statement starting with `COPY`: `None` for `COPY ... TO
/// 'file'` (DataFusion's statement).
pub fn parse(sql: &str) -> Result<Option<CopyStmt>, SqlError> {
    let stmt = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_statement())
        .map_err(|e| SqlError::Parse(e.to_string()))?;
    let Statement::Copy {
        source,
        to,
        target,
        options,
        legacy_options,
        values,
    } = stmt
    else {
        return Err(SqlError::Parse(format!("not a COPY statement: {sql}")));
    };
    let mut file = None;
    match (&target, to) {
        (CopyTarget::Stdin, false) | (CopyTarget::Stdout, true) => {}
        (CopyTarget::File { .. }, true) => return Ok(None),
        (CopyTarget::File { filename }, false) => file = Some(filename.clone()),
        (CopyTarget::Program { .. }, _) => {
            return Err(unsupported("COPY ... PROGRAM is not supported"));
        }
        (CopyTarget::Stdin, true) | (CopyTarget::Stdout, false) => {
            return Err(SqlError::Parse(
                "COPY FROM goes with STDIN and COPY TO with STDOUT".to_owned(),
            ));
        }
    }
    if !values.is_empty() {
        return Err(unsupported(
            "rows inline after COPY ... FROM STDIN; are not supported",
        ));
    }
    if let Some(path) = file {
        let CopySource::Table {
            table_name,
            columns,
        } = source
        else {
            return Err(SqlError::Parse(
                "COPY (query) goes TO a file or STDOUT, not FROM".to_owned(),
            ));
        };
        let named = options.iter().find_map(|o| match o {
            CopyOption::Format(f) => Some(f.value.to_ascii_lowercase()),
            _ => None,
        });
        let parquet = match named.as_deref() {
            Some("parquet") => true,
            Some(_) => false,
            None => path.to_ascii_lowercase().ends_with(".parquet"),
        };
        let options = if parquet {
            if options.len() > usize::from(named.is_some()) || !legacy_options.is_empty() {
                return Err(SqlError::Invalid(
                    "COPY FROM a Parquet file takes no options besides FORMAT parquet".to_owned(),
                ));
            }
            CopyOptions::defaults(CopyFormat::Text)
        } else {
            options_of(&options, &legacy_options, false)?
        };
        return Ok(Some(CopyStmt {
            kind: CopyKind::InFile {
                table: table_name,
                columns: names(&columns),
                path,
                parquet,
            },
            options,
        }));
    }
    let options = options_of(&options, &legacy_options, to)?;
    let kind = match source {
        CopySource::Table {
            table_name,
            columns,
        } if !to => CopyKind::In {
            table: table_name,
            columns: names(&columns),
        },
        CopySource::Table {
            table_name,
            columns,
        } => {
            let list = if columns.is_empty() {
                "*".to_owned()
            } else {
                columns
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            CopyKind::Out {
                query: format!("SELECT {list} FROM {table_name}"),
            }
        }
        CopySource::Query(q) => CopyKind::Out {
            query: q.to_string(),
        },
    };
    Ok(Some(CopyStmt { kind, options }))
}

fn options_of(
    options: &[CopyOption],
    legacy: &[CopyLegacyOption],
    to: bool,
) -> Result<CopyOptions, SqlError> {
    let mut format = CopyFormat::Text;
    for o in options {
        if let CopyOption::Format(f) = o {
            format = match f.value.to_ascii_lowercase().as_str() {
                "text" => CopyFormat::Text,
                "csv" => CopyFormat::Csv,
                "binary" => CopyFormat::Binary,
                "parquet" => {
                    return Err(SqlError::Invalid(
                        "COPY FORMAT parquet reads or writes a file on the server: COPY t FROM '/path/f.parquet', COPY (query) TO '/path/f.parquet'".to_owned(),
                    ));
                }
                other => {
                    return Err(SqlError::Invalid(format!(
                        "COPY format \"{other}\" not recognized (text, csv or binary; parquet for files)"
                    )));
                }
            };
        }
    }
    for o in legacy {
        match o {
            CopyLegacyOption::Binary => format = CopyFormat::Binary,
            CopyLegacyOption::Csv(_) => format = CopyFormat::Csv,
            _ => {}
        }
    }
    let mut out = CopyOptions::defaults(format);
    let csv_only = |what: &str| {
        if format == CopyFormat::Csv {
            Ok(())
        } else {
            Err(SqlError::Invalid(format!(
                "COPY {what} is available only in CSV mode"
            )))
        }
    };
    let csv = |o: &CopyLegacyCsvOption, out: &mut CopyOptions| -> Result<(), SqlError> {
        match o {
            CopyLegacyCsvOption::Header => out.header = true,
            CopyLegacyCsvOption::Quote(c) => out.quote = one_byte(*c, "quote")?,
            CopyLegacyCsvOption::Escape(c) => out.escape = one_byte(*c, "escape")?,
            CopyLegacyCsvOption::ForceQuote(c) => out.force_quote = ForceQuote::Columns(names(c)),
            CopyLegacyCsvOption::ForceNotNull(c) => out.force_not_null = names(c),
        }
        Ok(())
    };
    for o in options {
        match o {
            CopyOption::Format(_) | CopyOption::Freeze(_) => {}
            CopyOption::Delimiter(c) => out.delimiter = one_byte(*c, "delimiter")?,
            CopyOption::Null(s) => out.null = s.clone(),
            CopyOption::Header(h) => out.header = *h,
            CopyOption::Quote(c) => {
                csv_only("quote")?;
                out.quote = one_byte(*c, "quote")?;
            }
            CopyOption::Escape(c) => {
                csv_only("escape")?;
                out.escape = one_byte(*c, "escape")?;
            }
            CopyOption::ForceQuote(c) => {
                csv_only("FORCE_QUOTE")?;
                out.force_quote = ForceQuote::Columns(names(c));
            }
            CopyOption::ForceNotNull(c) => {
                csv_only("FORCE_NOT_NULL")?;
                out.force_not_null = names(c);
            }
            CopyOption::ForceNull(c) => {
                csv_only("FORCE_NULL")?;
                out.force_null = names(c);
            }
            CopyOption::Encoding(e) => {
                let e = e.to_ascii_uppercase().replace(['-', '_'], "");
                if e != "UTF8" && e != "SQLASCII" {
                    return Err(SqlError::Unsupported(format!(
                        "COPY ENCODING '{e}': the data must be UTF8"
                    )));
                }
            }
        }
    }
    for o in legacy {
        match o {
            CopyLegacyOption::Binary => {}
            CopyLegacyOption::Csv(list) => {
                for c in list {
                    csv(c, &mut out)?;
                }
            }
            CopyLegacyOption::Delimiter(c) => out.delimiter = one_byte(*c, "delimiter")?,
            CopyLegacyOption::Null(s) => out.null = s.clone(),
            other => {
                return Err(SqlError::Unsupported(format!("COPY option {other}")));
            }
        }
    }
    check(&out, to)?;
    Ok(out)
}

/// PostgreSQL's checks of a COPY's options.
fn check(o: &CopyOptions, to: bool) -> Result<(), SqlError> {
    let bad = |m: &str| Err(SqlError::Invalid(m.to_owned()));
    if o.format == CopyFormat::Binary {
        if o.header {
            return bad("cannot specify HEADER in BINARY mode");
        }
        return Ok(());
    }
    if matches!(o.delimiter, b'\n' | b'\r') {
        return bad("COPY delimiter cannot be newline or carriage return");
    }
    if o.null.contains(['\n', '\r']) {
        return bad("COPY null representation cannot use newline or carriage return");
    }
    if o.format == CopyFormat::Text
        && (o.delimiter == b'\\'
            || o.delimiter.is_ascii_lowercase()
            || o.delimiter.is_ascii_digit()
            || o.delimiter == b'.')
    {
        return bad(
            "COPY delimiter cannot be a backslash, a lower-case letter, a digit or a period in text format",
        );
    }
    if o.format == CopyFormat::Csv {
        if o.delimiter == o.quote {
            return bad("COPY delimiter and quote must be different");
        }
        if o.null.as_bytes().contains(&o.delimiter) {
            return bad("COPY delimiter must not appear in the NULL specification");
        }
        if !to && o.force_quote != ForceQuote::None {
            return bad("COPY FORCE_QUOTE cannot be used with COPY FROM");
        }
        if to && (!o.force_not_null.is_empty() || !o.force_null.is_empty()) {
            return bad("COPY FORCE_NOT_NULL and FORCE_NULL cannot be used with COPY TO");
        }
    }
    Ok(())
}

/// Rows decoded before they are written together, in one transaction.
pub const ROWS_PER_WRITE: usize = 4096;
/// ... or this many bytes of fields, whichever comes first.
const BYTES_PER_WRITE: usize = 4 << 20;

/// The longest row a load takes (a longer one is most likely a missing
/// newline or an unterminated CSV quote).
const MAX_ROW_BYTES: usize = 64 << 20;

/// Rows decoded and not written yet: records for a block's transaction,
/// else prepared for the dataset (so that the writing thread only writes).
enum Batch {
    Values(Vec<Value>),
    Prepared(PreparedBatch),
}

impl Batch {
    fn new(in_block: bool) -> Batch {
        if in_block {
            Batch::Values(Vec::with_capacity(ROWS_PER_WRITE))
        } else {
            Batch::Prepared(PreparedBatch::new())
        }
    }

    fn len(&self) -> usize {
        match self {
            Batch::Values(v) => v.len(),
            Batch::Prepared(v) => v.len(),
        }
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An empty list for the keys (of `key_fields` fields each) of a batch's rows.
fn key_list(key_fields: usize) -> Vec<Value> {
    Vec::with_capacity(ROWS_PER_WRITE * key_fields)
}

/// One write of decoded rows, running on a blocking thread.
type Pending = JoinHandle<Result<Wrote, SqlError>>;

/// What a write of decoded rows did.
struct Wrote {
    written: Written,
    /// The rows' keys (for errors), one after another.
    keys: Vec<Value>,
    /// The batch's acknowledgment, still to come.
    ack: Option<PendingAck>,
    /// The previous batch's acknowledgment, waited for after this batch
    /// was applied: how many rows it made durable.
    earlier: Option<Result<u64, silt::Error>>,
    /// The emptied batch, to fill again (a prepared batch keeps its
    /// buffer: a load allocates nothing per row for it).
    spare: Option<Batch>,
    /// The last value each sequence default took in the batch.
    taken: Vec<(String, i64)>,
}

/// A `COPY ... FROM STDIN` being loaded: hand it the client's data as it
/// comes ([`CopyIn::data`]), then [`CopyIn::finish`].
///
/// Decoding and writing overlap: rows are decoded on the caller's task
/// while the previous rows are written on a blocking thread.
pub struct CopyIn {
    table: Arc<Table>,
    target: Arc<Target>,
    /// The table column of each field of a row.
    targets: Vec<usize>,
    format: CopyFormat,
    decoder: Decoder,
    /// Bytes received and not decoded yet.
    buf: Vec<u8>,
    /// An incomplete long row is decoded again only once `buf` has grown
    /// to this size (so that a long row is not scanned once per message).
    wait_for: usize,
    /// The fields of the row being decoded, in `shape`'s order (`None`:
    /// absent), and where the primary key's fields are among them.
    row: Vec<Option<Value>>,
    shape: RowShape,
    key_fields: Vec<Option<usize>>,
    /// Decoded rows not written yet, their keys (for errors: the key
    /// fields of each row, one row after another) and size.
    rows: Batch,
    keys: Vec<Value>,
    row_bytes: usize,
    /// Data rows decoded (the next row is `read + 1`).
    read: u64,
    /// Data rows handed to writes; rows committed.
    sent: u64,
    committed: u64,
    pending: Option<(Pending, u64)>,
    /// An emptied batch and key list to decode the next rows into.
    spare: Option<(Batch, Vec<Value>)>,
    /// The last write's acknowledgment and its rows: the next write waits
    /// for it once it has applied its own rows (so the log flush of one
    /// batch overlaps the work on the next), or `settle` does.
    unacked: Option<(PendingAck, u64)>,
    /// The end-of-data marker was read: what follows is ignored.
    ended: bool,
    in_block: bool,
    progress: Arc<LoadProgress>,
    /// The fields the rows leave to their sequences (`SERIAL` and identity
    /// columns not in the column list), and the session whose `currval`
    /// and `lastval` see the values they take, as an `INSERT`'s do.
    serials: Arc<[String]>,
    sequences: Arc<crate::sequences::SessionSequences>,
}

impl std::fmt::Debug for CopyIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CopyIn({}, {} rows)", self.table.name, self.read)
    }
}

impl CopyIn {
    /// A load of `stmt`'s rows into `ds` (in the block `txn`, if any),
    /// counted in `progress`.
    pub fn new(
        ds: Arc<Dataset>,
        stmt: &CopyStmt,
        txn: Option<Arc<TxnSlot>>,
        progress: Arc<LoadProgress>,
        sequences: Arc<crate::sequences::SessionSequences>,
    ) -> Result<CopyIn, SqlError> {
        let (CopyKind::In { columns, .. } | CopyKind::InFile { columns, .. }) = &stmt.kind else {
            return Err(SqlError::Invalid("not a COPY ... FROM".to_owned()));
        };
        let table = Table::new(ds.clone());
        let targets = table.target_column_names(columns)?;
        // A required column left out is filled by its default, if any.
        if let Some(&j) = table
            .required
            .iter()
            .find(|&&j| !targets.contains(&j) && table.defaults[j].is_none())
        {
            return Err(table.not_null(j));
        }
        let o = &stmt.options;
        let flags = |list: &[String], what: &str| -> Result<Vec<bool>, SqlError> {
            for n in list {
                if !targets.iter().any(|&j| table.cols[j].name == *n) {
                    return Err(SqlError::Invalid(format!(
                        "{what} column \"{n}\" is not referenced by COPY"
                    )));
                }
            }
            Ok(targets
                .iter()
                .map(|&j| list.contains(&table.cols[j].name))
                .collect())
        };
        let force_not_null = flags(&o.force_not_null, "FORCE_NOT_NULL")?;
        let force_null = flags(&o.force_null, "FORCE_NULL")?;
        let decoder = Decoder::new(o, targets.len()).with_forced(force_not_null, force_null);
        let names: Vec<String> = targets
            .iter()
            .map(|&j| table.cols[j].name.clone())
            .collect();
        let shape = ds.row_shape(&names);
        let key_fields = table
            .pk
            .iter()
            .map(|j| targets.iter().position(|t| t == j))
            .collect();
        let keys = key_list(table.pk.len());
        let serials = table
            .def
            .defaults
            .iter()
            .filter(|(f, d)| *d == silt::FieldDefault::Sequence && !names.contains(f))
            .map(|(f, _)| f.clone())
            .collect();
        Ok(CopyIn {
            serials,
            sequences,
            row: vec![None; targets.len()],
            shape,
            key_fields,
            target: Arc::new(Target {
                ds,
                def: table.def.clone(),
                txn: txn.clone(),
            }),
            table: Arc::new(table),
            targets,
            format: o.format,
            decoder,
            buf: Vec::new(),
            wait_for: 0,
            rows: Batch::new(txn.is_some()),
            keys,
            row_bytes: 0,
            read: 0,
            sent: 0,
            committed: 0,
            unacked: None,
            pending: None,
            spare: None,
            ended: false,
            in_block: txn.is_some(),
            progress,
        })
    }

    /// The data format the client is to send.
    pub fn format(&self) -> CopyFormat {
        self.format
    }

    /// How many fields each row has.
    pub fn columns(&self) -> usize {
        self.targets.len()
    }

    /// Rows committed so far.
    pub fn committed(&self) -> u64 {
        self.committed
    }

    /// The next piece of the client's data. An error ends the load: the
    /// rows before the failing one are written first (outside a block).
    pub async fn data(&mut self, bytes: &[u8]) -> Result<(), SqlError> {
        if self.ended {
            return Ok(());
        }
        self.buf.extend_from_slice(bytes);
        self.progress.add_bytes(bytes.len());
        if self.buf.len() < self.wait_for {
            return Ok(());
        }
        let r = self.decode(false).await;
        self.progress.set_rows(self.read, self.committed);
        r
    }

    /// The end of the data: the last rows are written; returns how many
    /// rows were loaded.
    pub async fn finish(mut self) -> Result<u64, SqlError> {
        if !self.ended {
            self.decode(true).await?;
        }
        self.write().await?;
        self.wait().await?;
        self.settle().await?;
        Ok(self.committed)
    }

    /// The data could not be read to its end (`e`): the rows decoded so
    /// far are written (outside a block, as for a bad row) and the error
    /// says how many are committed.
    pub async fn abort(mut self, e: SqlError) -> SqlError {
        self.ended = true;
        let done = async {
            self.write().await?;
            self.wait().await?;
            self.settle().await
        };
        if let Err(w) = done.await {
            return w;
        }
        if self.in_block {
            return e;
        }
        SqlError::PartialWrite {
            row: None,
            total: None,
            committed: self.committed,
            unchanged: 0,
            source: Box::new(e),
        }
    }

    async fn decode(&mut self, last: bool) -> Result<(), SqlError> {
        let mut at = 0;
        let mut failure = None;
        while !self.ended {
            let step = match self.decoder.next(&self.buf[at..], last) {
                Ok(s) => s,
                Err(e) => {
                    failure = Some((self.read + 1, SqlError::BadCopyData(e.0)));
                    break;
                }
            };
            match step {
                Step::Row { used } => {
                    at += used;
                    self.read += 1;
                    match self.record() {
                        Ok(()) => {}
                        Err(e) => {
                            failure = Some((self.read, e));
                            break;
                        }
                    }
                    if self.rows.len() >= ROWS_PER_WRITE || self.row_bytes >= BYTES_PER_WRITE {
                        self.write().await?;
                    }
                }
                Step::Skip { used } => at += used,
                Step::End { .. } => self.ended = true,
                Step::NeedMore => {
                    let partial = self.buf.len() - at;
                    if partial > MAX_ROW_BYTES {
                        let msg = format!(
                            "a row longer than {} MiB (a missing newline, or an unterminated quote?)",
                            MAX_ROW_BYTES >> 20
                        );
                        failure = Some((self.read + 1, SqlError::BadCopyData(msg)));
                    }
                    self.wait_for = if partial > 64 << 10 { 2 * partial } else { 0 };
                    break;
                }
            }
        }
        self.buf.drain(..at);
        if self.ended {
            self.buf = Vec::new();
        }
        match failure {
            None => Ok(()),
            Some((row, e)) => {
                // The rows before the bad one are written, as an INSERT's.
                self.ended = true;
                self.write().await?;
                self.wait().await?;
                self.settle().await?;
                Err(self.failed(row, e))
            }
        }
    }

    /// Add the decoded row to the batch: its record, prepared for the
    /// dataset here (checked and encoded) unless it goes into a block.
    fn record(&mut self) -> Result<(), SqlError> {
        let fields = self.decoder.fields().zip(&self.targets);
        for (slot, (f, &j)) in self.row.iter_mut().zip(fields) {
            let col = &self.table.cols[j];
            *slot = match f {
                None if self.table.required.contains(&j) => return Err(self.table.not_null(j)),
                // A null given for a column with a default stays null.
                None if self.table.defaults[j].is_some() => Some(Value::Null),
                None => None,
                Some(b) => {
                    self.row_bytes += b.len();
                    Some(match self.format {
                        CopyFormat::Binary => field::from_binary(col, b)?,
                        _ => field::from_text(col, b)?,
                    })
                }
            };
        }
        let key = self.key_fields.iter();
        let key = key.map(|i| i.and_then(|i| self.row[i].clone()).unwrap_or(Value::Null));
        self.keys.extend(key);
        match &mut self.rows {
            Batch::Values(v) => {
                let names = self.shape.names().iter();
                let fields = names.zip(self.row.iter_mut());
                let fields = fields.filter_map(|(n, v)| v.take().map(|v| (n.clone(), v)));
                v.push(Value::Object(fields.collect()));
            }
            Batch::Prepared(b) => {
                let ds = &self.target.ds;
                ds.prepare_row_into(&self.shape, &mut self.row, b)?;
            }
        }
        Ok(())
    }

    /// The error of the load stopped at data row `row`.
    fn failed(&self, row: u64, e: SqlError) -> SqlError {
        if self.in_block {
            return e;
        }
        SqlError::PartialWrite {
            row: Some(row),
            total: None,
            committed: self.committed,
            unchanged: 0,
            source: Box::new(e),
        }
    }

    /// Start writing the decoded rows (after the previous write is done).
    async fn write(&mut self) -> Result<(), SqlError> {
        self.wait().await?;
        if self.rows.is_empty() {
            return Ok(());
        }
        let (next, next_keys) = self
            .spare
            .take()
            .unwrap_or_else(|| (Batch::new(self.in_block), key_list(self.key_fields.len())));
        let rows = std::mem::replace(&mut self.rows, next);
        let keys = std::mem::replace(&mut self.keys, next_keys);
        self.row_bytes = 0;
        let first = self.sent;
        self.sent += rows.len() as u64;
        let target = self.target.clone();
        let earlier = self.unacked.take();
        let serials = self.serials.clone();
        let job = tokio::task::spawn_blocking(move || {
            let mut taken = Vec::new();
            let (written, ack, spare) = match rows {
                Batch::Values(mut v) => {
                    // Numbered here, so that the values taken are known.
                    for f in serials.iter() {
                        let got = target.ds.next_sequence(f, v.len() as u64)?;
                        for (r, n) in v.iter_mut().zip(got.values()) {
                            if let Value::Object(fields) = r {
                                fields.push((f.clone(), Value::Int(n)));
                            }
                        }
                        if got.count > 0 {
                            taken.push((f.clone(), got.last()));
                        }
                    }
                    (target.insert_atomic(v)?, None, None)
                }
                Batch::Prepared(mut b) => {
                    let (written, ack) = target.insert_prepared(&b)?;
                    // The last row took the last values.
                    let last = match b.len().checked_sub(1).and_then(|i| b.record(i)) {
                        Some(r) if !serials.is_empty() => Some(silt::value::decode_value(r)?),
                        _ => None,
                    };
                    for f in serials.iter() {
                        if let Some(Value::Int(n)) = last.as_ref().and_then(|r| r.get(f)) {
                            taken.push((f.clone(), *n));
                        }
                    }
                    b.clear();
                    (written, ack, Some(Batch::Prepared(b)))
                }
            };
            let earlier = earlier.map(|(a, n)| a.wait().map(|()| n));
            Ok(Wrote {
                written,
                keys,
                ack,
                earlier,
                spare,
                taken,
            })
        });
        self.pending = Some((job, first));
        Ok(())
    }

    /// Wait for the last write's acknowledgment (its rows are then
    /// committed as the durability mode promises).
    async fn settle(&mut self) -> Result<(), SqlError> {
        let Some((ack, n)) = self.unacked.take() else {
            return Ok(());
        };
        tokio::task::spawn_blocking(move || ack.wait())
            .await
            .map_err(|e| SqlError::Runtime(format!("a COPY write failed: {e}")))??;
        self.committed += n;
        Ok(())
    }

    /// Wait for the write in progress; a failed row ends the load.
    async fn wait(&mut self) -> Result<(), SqlError> {
        let Some((job, first)) = self.pending.take() else {
            return Ok(());
        };
        let Wrote {
            written: w,
            mut keys,
            ack,
            earlier,
            spare,
            taken,
        } = job
            .await
            .map_err(|e| SqlError::Runtime(format!("a COPY write failed: {e}")))??;
        for (f, n) in taken {
            let name = silt::sequence_name(&self.table.name, &f);
            self.sequences.taken(&name, n);
        }
        if let Some(r) = earlier {
            self.committed += r?;
        }
        match ack {
            Some(a) => self.unacked = Some((a, w.written)),
            None => self.committed += w.written,
        }
        if let Some((i, e)) = w.failed {
            let n = self.key_fields.len();
            let e = match keys.get(i * n..(i + 1) * n) {
                Some(k) => self.table.row_error(k, e),
                None => e.into(),
            };
            self.ended = true;
            return Err(self.failed(first + i as u64 + 1, e));
        }
        if let Some(batch) = spare {
            keys.clear();
            self.spare = Some((batch, keys));
        }
        Ok(())
    }
}
