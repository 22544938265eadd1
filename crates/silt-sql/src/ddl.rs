//! Statement splitting and the statements the SQL layer runs itself:
//! `CREATE TABLE`, `CREATE INDEX`, `DROP TABLE`, `DROP INDEX`, `COMPACT`,
//! and `INSERT` into Silt tables (see [`crate::insert`]; `UPSERT INTO` is
//! read as `INSERT OR REPLACE INTO`).

use std::sync::Arc;

use datafusion::sql::parser::{DFParser, Statement as DFStatement};
use datafusion::sql::sqlparser::ast::{
    ColumnOption, CreateIndex, CreateTable, CreateTableOptions, Expr as SqlExpr, Ident, IndexType,
    ObjectName, ObjectType, SqlOption, Statement, TableConstraint, Value as SqlValue,
};
use datafusion::sql::sqlparser::dialect::{Dialect, GenericDialect, PostgreSqlDialect};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};
use silt::lsm::policy::MergePolicy;
use silt::storage::Compression;
use silt::{
    Database, DatasetDef, FieldDefault, FieldType, IndexDef, IndexKind, IndexOptions,
    ReconcileOption,
};

use crate::error::SqlError;
use crate::insert::{self, InsertStmt};

/// One statement of a script: its text and first word(s).
#[derive(Debug, Clone)]
pub struct Segment {
    pub text: String,
    words: Vec<String>,
}

/// Split a script at top-level semicolons (quotes and comments respected).
pub fn split(sql: &str) -> Result<Vec<Segment>, SqlError> {
    if let Some(one) = single(sql) {
        return Ok(one);
    }
    let dialect = GenericDialect {};
    let tokens = Tokenizer::new(&dialect, sql)
        .tokenize_with_location()
        .map_err(|e| SqlError::Parse(e.to_string()))?;
    let offsets = LineOffsets::new(sql);
    let mut out = Vec::new();
    let mut cur: Vec<&TokenWithSpan> = Vec::new();
    let mut flush = |cur: &mut Vec<&TokenWithSpan>| {
        let meaningful: Vec<&&TokenWithSpan> = cur
            .iter()
            .filter(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF))
            .collect();
        if let (Some(first), Some(last)) = (meaningful.first(), meaningful.last()) {
            let start = offsets.byte(sql, first.span.start.line, first.span.start.column);
            let end = offsets.byte(sql, last.span.end.line, last.span.end.column);
            if let Some(text) = sql.get(start..end.max(start)) {
                let words = meaningful
                    .iter()
                    .take(3)
                    .map(|t| match &t.token {
                        Token::Word(w) => w.value.to_ascii_uppercase(),
                        other => other.to_string(),
                    })
                    .collect();
                out.push(Segment {
                    text: text.to_owned(),
                    words,
                });
            }
        }
        cur.clear();
    };
    for t in &tokens {
        if t.token == Token::SemiColon {
            flush(&mut cur);
        } else {
            cur.push(t);
        }
    }
    flush(&mut cur);
    Ok(out)
}

/// The common case without tokenizing the text twice: one statement, no
/// `;` and no comment, whose first words are plain words, numbers or `*`.
/// `None` sends the text to the tokenizer.
fn single(sql: &str) -> Option<Vec<Segment>> {
    if sql.contains(';') || sql.contains("--") || sql.contains("/*") {
        return None;
    }
    let text = sql.trim();
    if text.is_empty() {
        return Some(vec![]);
    }
    let b = text.as_bytes();
    let mut words = Vec::with_capacity(3);
    let mut i = 0;
    while words.len() < 3 && i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            if i < b.len() && !(b[i].is_ascii_whitespace() || b"*(),".contains(&b[i])) {
                return None;
            }
            words.push(text[start..i].to_ascii_uppercase());
        } else if c.is_ascii_digit() {
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i < b.len() && !(b[i].is_ascii_whitespace() || b"*(),".contains(&b[i])) {
                return None;
            }
            words.push(text[start..i].to_owned());
        } else if b"*(),".contains(&c) {
            i += 1;
            words.push((c as char).to_string());
        } else {
            return None;
        }
    }
    Some(vec![Segment {
        text: text.to_owned(),
        words,
    }])
}

/// Byte offsets of line starts, to turn token locations into slices.
pub(crate) struct LineOffsets(Vec<usize>);

impl LineOffsets {
    pub(crate) fn new(s: &str) -> LineOffsets {
        let mut v = vec![0];
        for (i, b) in s.bytes().enumerate() {
            if b == b'\n' {
                v.push(i + 1);
            }
        }
        LineOffsets(v)
    }

    /// Byte offset of a 1-based (line, column-in-chars) location.
    pub(crate) fn byte(&self, s: &str, line: u64, column: u64) -> usize {
        let Some(&start) = usize::try_from(line.saturating_sub(1))
            .ok()
            .and_then(|l| self.0.get(l))
        else {
            return s.len();
        };
        let col = usize::try_from(column.saturating_sub(1)).unwrap_or(usize::MAX);
        let rest = s.get(start..).unwrap_or("");
        match rest.char_indices().nth(col) {
            Some((i, _)) => start + i,
            None => s.len(),
        }
    }
}

/// What a statement is, once recognized.
pub enum Parsed {
    /// `COMPACT [TABLE] name`
    Compact(String),
    CreateTable(Box<CreateTable>),
    CreateIndex(Box<CreateIndex>),
    DropTables {
        names: Vec<String>,
        if_exists: bool,
        cascade: bool,
    },
    /// `UPDATE ... FROM`, `DELETE ... USING`, and either with `RETURNING`.
    Dml(Box<crate::dml::DmlStmt>),
    /// `DECLARE ... CURSOR`, `FETCH`, `CLOSE` (see [`crate::cursors`]).
    Cursor(Box<crate::cursors::CursorStmt>),
    /// `ALTER TABLE` (see [`crate::alter`]).
    Alter(Box<crate::alter::AlterStmt>),
    /// `TRUNCATE [TABLE] a, b`
    Truncate(Vec<String>),
    /// `CREATE MATERIALIZED VIEW v AS SELECT ... JOIN ...` (`crate::matview`).
    CreateMaterialized(Box<datafusion::sql::sqlparser::ast::CreateView>),
    /// `DROP MATERIALIZED VIEW [IF EXISTS] a, b`
    DropMaterialized {
        names: Vec<String>,
        if_exists: bool,
    },
    /// `DROP VIEW [IF EXISTS] a, b [CASCADE]`
    DropViews {
        names: Vec<String>,
        if_exists: bool,
        cascade: bool,
    },
    DropIndex {
        table: Option<String>,
        index: String,
        if_exists: bool,
    },
    /// `BEGIN`, `START TRANSACTION` (any modes).
    Begin,
    /// `COMMIT`, `END`.
    Commit,
    /// `ROLLBACK`, `ABORT`.
    Rollback,
    /// `SAVEPOINT name`
    Savepoint(String),
    /// `ROLLBACK TO [SAVEPOINT] name`
    RollbackTo(String),
    /// `RELEASE [SAVEPOINT] name`
    Release(String),
    /// `INSERT` (and `UPSERT`, `REPLACE`) into a table: the SQL layer runs
    /// it when the table is a Silt dataset.
    Insert(Box<InsertStmt>),
    /// `COPY ... FROM STDIN` or `COPY ... TO STDOUT` (see [`crate::copy`]).
    Copy(Box<crate::copy::CopyStmt>),
    /// `CREATE`/`ALTER`/`DROP ROLE` (or `USER`), `GRANT`, `REVOKE`.
    Role(Box<crate::access::RoleStmt>),
    /// `CREATE`, `ALTER` or `DROP SEQUENCE` (see [`crate::sequence_ddl`]).
    Sequence(Box<crate::sequence_ddl::SeqStmt>),
    /// `CREATE` or `DROP PUBSUB` (see [`crate::pubsub`]).
    PubSub(Box<crate::pubsub::PubSubStmt>),
    /// Anything else: DataFusion plans it.
    DataFusion(Box<DFStatement>),
}

/// An identifier as DataFusion sees it: unquoted names are lower-cased.
pub fn ident(i: &Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_ascii_lowercase()
    }
}

/// The parts of a (possibly qualified) name, as DataFusion sees them.
pub(crate) fn object_parts(n: &ObjectName) -> Vec<String> {
    n.0.iter().filter_map(|p| p.as_ident().map(ident)).collect()
}

/// The last part of a (possibly qualified) name.
fn object_name(n: &ObjectName) -> Result<String, SqlError> {
    let mut parts = object_parts(n);
    if parts.len() > 1 && parts[parts.len() - 2] == crate::convert::DOCUMENTS_SCHEMA {
        return Err(SqlError::Invalid(format!(
            "`{n}` is in the read-only schema `{}` (the document view of the tables): name the table itself",
            crate::convert::DOCUMENTS_SCHEMA
        )));
    }
    parts
        .pop()
        .ok_or_else(|| SqlError::Invalid(format!("bad name `{n}`")))
}

/// Whether `sql` holds keyword `kw` (upper case) outside strings, quoted
/// names and comments.
pub fn has_keyword(sql: &str, kw: &str) -> bool {
    let dialect = GenericDialect {};
    let Ok(tokens) = Tokenizer::new(&dialect, sql).tokenize() else {
        return false;
    };
    tokens
        .iter()
        .any(|t| matches!(t, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(kw)))
}

/// The one statement of `sql`, parsed; `None` for anything else (several
/// statements, or one that does not parse).
pub(crate) fn parse_one(sql: &str) -> Option<Parsed> {
    let segs = split(sql).ok()?;
    let [seg] = segs.as_slice() else {
        return None;
    };
    parse(seg).ok()
}

/// Recognize one statement.
pub fn parse(seg: &Segment) -> Result<Parsed, SqlError> {
    let w: Vec<&str> = seg.words.iter().map(String::as_str).collect();
    if w.first() == Some(&"COMPACT") {
        let rest: Vec<&str> = seg.text.split_whitespace().skip(1).collect();
        let rest: Vec<&str> = match rest.first() {
            Some(t) if t.eq_ignore_ascii_case("table") => rest[1..].to_vec(),
            _ => rest,
        };
        return match rest.as_slice() {
            [name] => Ok(Parsed::Compact(unquote(name))),
            _ => Err(SqlError::Parse("expected `COMPACT table_name`".to_owned())),
        };
    }
    if w.first() == Some(&"ABORT") {
        return Ok(Parsed::Rollback);
    }
    if w.first() == Some(&"COPY")
        && let Some(c) = crate::copy::parse(&seg.text)?
    {
        return Ok(Parsed::Copy(Box::new(c)));
    }
    if let Some(p) = crate::pubsub::parse_text(&w, &seg.text)? {
        return Ok(Parsed::PubSub(Box::new(p)));
    }
    if let Some(r) = crate::access::parse_text(&w, &seg.text)? {
        return Ok(Parsed::Role(Box::new(r)));
    }
    if w.first() == Some(&"ALTER")
        && let Some((name, if_exists, steps)) = crate::identity::alter::parse_sequence(&seg.text)?
    {
        return Ok(Parsed::Sequence(Box::new(
            crate::sequence_ddl::SeqStmt::Alter {
                name,
                if_exists,
                steps,
            },
        )));
    }
    if w.first() == Some(&"ALTER")
        && let Some((table, if_exists, column, change)) = crate::identity::alter::parse(&seg.text)?
    {
        let stmt = crate::alter::AlterStmt::identity(table, if_exists, column, change);
        return Ok(Parsed::Alter(Box::new(stmt)));
    }
    let mut overriding = None;
    let text = if w.first() == Some(&"UPSERT") {
        // `UPSERT INTO t ...` = `INSERT OR REPLACE INTO t ...`
        let body = seg.text.trim_start();
        format!("INSERT OR REPLACE{}", body.get(6..).unwrap_or(""))
    } else if w.first() == Some(&"INSERT")
        && let Some((text, o)) = crate::identity::strip_overriding(&seg.text)
    {
        overriding = Some(o);
        text
    } else if matches!(w.first(), Some(&"CREATE" | &"ALTER"))
        && let Some(text) = crate::identity::order_options(&seg.text)
    {
        text
    } else {
        seg.text.clone()
    };
    let generic = GenericDialect {};
    let postgres = PostgreSqlDialect {};
    let dialect: &dyn Dialect = if uses_pg_operators(&text) {
        &postgres
    } else {
        &generic
    };
    let mut stmts = DFParser::parse_sql_with_dialect(&text, dialect).map_err(|e| {
        SqlError::Parse(
            e.to_string()
                .trim_start_matches("SQL error: ")
                .trim_start_matches("ParserError(")
                .to_owned(),
        )
    })?;
    let Some(stmt) = stmts.pop_front() else {
        return Err(SqlError::Parse("empty statement".to_owned()));
    };
    if !stmts.is_empty() {
        return Err(SqlError::Parse("expected one statement".to_owned()));
    }
    let DFStatement::Statement(s) = stmt else {
        return Ok(Parsed::DataFusion(Box::new(stmt)));
    };
    match *s {
        Statement::StartTransaction { .. } => Ok(Parsed::Begin),
        Statement::Commit { .. } => Ok(Parsed::Commit),
        Statement::Rollback {
            savepoint: None, ..
        } => Ok(Parsed::Rollback),
        Statement::Rollback {
            savepoint: Some(name),
            ..
        } => Ok(Parsed::RollbackTo(ident(&name))),
        Statement::Savepoint { name } => Ok(Parsed::Savepoint(ident(&name))),
        Statement::ReleaseSavepoint { name } => Ok(Parsed::Release(ident(&name))),
        Statement::CreateTable(ct) => Ok(Parsed::CreateTable(Box::new(ct))),
        Statement::CreateView(cv) if cv.materialized => {
            Ok(Parsed::CreateMaterialized(Box::new(cv)))
        }
        Statement::Drop {
            object_type: ObjectType::MaterializedView,
            if_exists,
            names,
            ..
        } => Ok(Parsed::DropMaterialized {
            names: names.iter().map(object_name).collect::<Result<_, _>>()?,
            if_exists,
        }),
        Statement::CreateSequence {
            temporary,
            if_not_exists,
            name,
            data_type,
            sequence_options,
            owned_by,
        } => Ok(Parsed::Sequence(Box::new(crate::sequence_ddl::create(
            &name,
            if_not_exists,
            temporary,
            data_type.as_ref(),
            &sequence_options,
            owned_by.as_ref(),
        )?))),
        Statement::Drop {
            object_type: ObjectType::Sequence,
            if_exists,
            names,
            ..
        } => Ok(Parsed::Sequence(Box::new(
            crate::sequence_ddl::SeqStmt::Drop {
                names: names.iter().map(object_name).collect::<Result<_, _>>()?,
                if_exists,
            },
        ))),
        Statement::CreateIndex(ci) => Ok(Parsed::CreateIndex(Box::new(ci))),
        Statement::Drop {
            object_type: ObjectType::Table,
            if_exists,
            names,
            cascade,
            ..
        } => Ok(Parsed::DropTables {
            names: names.iter().map(object_name).collect::<Result<_, _>>()?,
            if_exists,
            cascade,
        }),
        Statement::Drop {
            object_type: ObjectType::View,
            if_exists,
            names,
            cascade,
            ..
        } => Ok(Parsed::DropViews {
            names: names.iter().map(object_name).collect::<Result<_, _>>()?,
            if_exists,
            cascade,
        }),
        Statement::Drop {
            object_type: ObjectType::Index,
            if_exists,
            names,
            table,
            ..
        } => {
            let [name] = names.as_slice() else {
                return Err(SqlError::Unsupported(
                    "DROP INDEX drops one index at a time".to_owned(),
                ));
            };
            let mut parts = object_parts(name);
            let index = parts
                .pop()
                .ok_or_else(|| SqlError::Invalid(format!("bad index name `{name}`")))?;
            let table = match table {
                Some(t) => Some(object_name(&t)?),
                None => parts.pop(),
            };
            Ok(Parsed::DropIndex {
                table,
                index,
                if_exists,
            })
        }
        Statement::Insert(ins) => insert::parse(ins, overriding),
        Statement::Update(u) => match crate::dml::parse_update(&u)? {
            Some(p) => Ok(p),
            None => Ok(Parsed::DataFusion(Box::new(DFStatement::Statement(
                Box::new(Statement::Update(u)),
            )))),
        },
        Statement::Delete(d) => match crate::dml::parse_delete(&d)? {
            Some(p) => Ok(p),
            None => Ok(Parsed::DataFusion(Box::new(DFStatement::Statement(
                Box::new(Statement::Delete(d)),
            )))),
        },
        Statement::Declare { stmts } => crate::cursors::parse_declare(&stmts),
        Statement::Fetch {
            name, direction, ..
        } => crate::cursors::parse_fetch(&name, &direction),
        Statement::Close { cursor } => Ok(crate::cursors::parse_close(&cursor)),
        Statement::AlterTable(a) => Ok(Parsed::Alter(Box::new(crate::alter::parse(&a)?))),
        Statement::Truncate(t) => {
            if t.partitions.is_some() || t.on_cluster.is_some() {
                return Err(SqlError::Unsupported(
                    "TRUNCATE of partitions or clusters; TRUNCATE the whole table".to_owned(),
                ));
            }
            let names = t
                .table_names
                .iter()
                .map(|n| object_name(&n.name))
                .collect::<Result<_, _>>()?;
            Ok(Parsed::Truncate(names))
        }
        other => Ok(Parsed::DataFusion(Box::new(DFStatement::Statement(
            Box::new(other),
        )))),
    }
}

fn unquote(s: &str) -> String {
    let t = s.trim();
    if t.len() >= 2 && t.starts_with('"') && t.ends_with('"') {
        t[1..t.len() - 1].to_owned()
    } else {
        t.to_ascii_lowercase()
    }
}

/// Whether `sql` may use PostgreSQL's JSON operators (`->`, `->>`, `#>`,
/// `#>>`, `@>`, `<@`): such a statement is parsed with PostgreSQL's
/// precedence, which binds them tighter than `=`, `IS` and `AND` (the
/// generic dialect's binds them looser, so `doc->>'k' = 'v'` would read
/// `doc ->> ('k' = 'v')`). Text inside a literal may match too; that only
/// picks PostgreSQL's dialect.
fn uses_pg_operators(sql: &str) -> bool {
    ["->", "#>", "@>", "<@"].iter().any(|op| sql.contains(op))
}

/// The declared type of a SQL column type.
pub fn field_type(dt: &str) -> Result<FieldType, SqlError> {
    if let Some(elem) = array_element(dt) {
        let t = field_type(elem)?;
        if matches!(t, FieldType::Array(_)) {
            return Err(SqlError::Invalid(format!(
                "unsupported column type `{dt}`: arrays have one dimension"
            )));
        }
        return silt::value::ElementType::of(t)
            .map(FieldType::Array)
            .ok_or_else(|| {
                SqlError::Invalid(format!(
                    "unsupported column type `{dt}`: arrays hold {}",
                    silt::value::ELEMENT_TYPES
                ))
            });
    }
    let lower = dt.to_ascii_lowercase();
    let base = lower.split('(').next().unwrap_or("").trim();
    let t = match base {
        "bigint" | "int" | "integer" | "int8" | "int4" | "int2" | "int64" | "int32"
        | "smallint" | "tinyint" | "long" => FieldType::Int,
        "double" | "double precision" | "float" | "float8" | "float4" | "float64" | "real" => {
            FieldType::Double
        }
        "decimal" | "numeric" | "dec" => {
            let t = lower.replacen("dec(", "decimal(", 1);
            FieldType::parse(&t).map_err(|e| SqlError::Invalid(e.to_string()))?
        }
        "varchar" | "text" | "string" | "char" | "character varying" | "character"
        | "nvarchar" => FieldType::String,
        "boolean" | "bool" => FieldType::Bool,
        "bytea" | "blob" | "binary" | "varbinary" | "bytes" => FieldType::Binary,
        "geometry" | "geography" => FieldType::Geometry,
        "box" => FieldType::Rectangle,
        "date" => FieldType::Date,
        // `timestamp(3) with time zone`: the precision is kept to the
        // microsecond whatever it says.
        "timestamp" | "datetime" if lower.contains("with time zone") => FieldType::TimestampTz,
        "timestamp" | "datetime" => FieldType::Timestamp,
        "timestamptz" => FieldType::TimestampTz,
        "json" | "jsonb" => FieldType::Json,
        "interval" => FieldType::Interval,
        other => FieldType::parse(other).map_err(|_| {
            SqlError::Invalid(format!(
                "unsupported column type `{dt}`; use BIGINT, DOUBLE PRECISION, NUMERIC(p,s), VARCHAR, BOOLEAN, BYTEA, DATE, TIMESTAMP, TIMESTAMPTZ, INTERVAL, JSONB, GEOMETRY, POINT, RECTANGLE or POLYGON"
            ))
        })?,
    };
    Ok(t)
}

/// The element type of an array type: `bigint[]`, `text[3]` (a size is
/// not enforced, as in PostgreSQL).
fn array_element(dt: &str) -> Option<&str> {
    let t = dt.trim();
    let open = t.strip_suffix(']')?.rfind('[')?;
    t[open + 1..t.len() - 1]
        .trim()
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| &t[..open])
}

/// An option value as text.
pub(crate) fn option_text(e: &SqlExpr) -> String {
    match e {
        SqlExpr::Value(v) => match &v.value {
            SqlValue::SingleQuotedString(s) | SqlValue::DoubleQuotedString(s) => s.clone(),
            SqlValue::Number(n, _) => n.to_string(),
            SqlValue::Boolean(b) => b.to_string(),
            other => other.to_string(),
        },
        SqlExpr::Identifier(i) => i.value.clone(),
        other => other.to_string(),
    }
}

/// `64MB`, `64 MiB`, `1g`, `4096` -> bytes.
pub fn parse_size(s: &str) -> Result<u64, SqlError> {
    let t = s.trim().to_ascii_lowercase().replace(' ', "");
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| SqlError::Invalid(format!("`{s}` is not a size; use e.g. 64MB")))?;
    let mult: u64 = match unit {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => {
            return Err(SqlError::Invalid(format!(
                "unknown size unit in `{s}`; use B, KB, MB or GB"
            )));
        }
    };
    let bytes = n * mult as f64;
    if !(bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64) {
        return Err(SqlError::Invalid(format!("size `{s}` is out of range")));
    }
    Ok(bytes as u64)
}

fn parse_num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, SqlError> {
    v.trim()
        .parse()
        .map_err(|_| SqlError::Invalid(format!("option `{key}`: `{v}` is not a valid number")))
}

/// The default a column's `DEFAULT` clause gives (`None` for
/// `DEFAULT NULL`): a constant, or the time of the write.
pub fn field_default(column: &str, e: &SqlExpr) -> Result<Option<FieldDefault>, SqlError> {
    let refuse = || {
        SqlError::Unsupported(format!(
            "DEFAULT {e} on column `{column}`: a default is a constant (a number, a string, true/false, a typed literal like DATE '2026-01-01') or now() / CURRENT_TIMESTAMP / CURRENT_DATE"
        ))
    };
    Ok(Some(match e {
        SqlExpr::Nested(inner) => return field_default(column, inner),
        SqlExpr::Value(v) => match &v.value {
            SqlValue::Null => return Ok(None),
            SqlValue::Number(n, _) => FieldDefault::Text(n.to_string()),
            SqlValue::Boolean(b) => FieldDefault::Text(b.to_string()),
            SqlValue::SingleQuotedString(t) | SqlValue::EscapedStringLiteral(t) => {
                FieldDefault::Text(t.clone())
            }
            _ => return Err(refuse()),
        },
        SqlExpr::UnaryOp { op, expr } => {
            let sign = match op {
                datafusion::sql::sqlparser::ast::UnaryOperator::Minus => "-",
                datafusion::sql::sqlparser::ast::UnaryOperator::Plus => "",
                _ => return Err(refuse()),
            };
            match field_default(column, expr)? {
                Some(FieldDefault::Text(t)) if t.starts_with(|c: char| c.is_ascii_digit()) => {
                    FieldDefault::Text(format!("{sign}{t}"))
                }
                _ => return Err(refuse()),
            }
        }
        SqlExpr::TypedString(ts) => match &ts.value.value {
            SqlValue::SingleQuotedString(t) => FieldDefault::Text(t.clone()),
            _ => return Err(refuse()),
        },
        SqlExpr::Cast { expr, .. } => return field_default(column, expr),
        SqlExpr::Function(f) => {
            let name = f.name.to_string().to_ascii_lowercase();
            let no_args = match &f.args {
                datafusion::sql::sqlparser::ast::FunctionArguments::None => true,
                datafusion::sql::sqlparser::ast::FunctionArguments::List(l) => l.args.is_empty(),
                _ => false,
            };
            match name.as_str() {
                "now"
                | "current_timestamp"
                | "current_date"
                | "localtimestamp"
                | "transaction_timestamp"
                | "statement_timestamp"
                | "clock_timestamp"
                    if no_args =>
                {
                    FieldDefault::Now
                }
                _ => return Err(refuse()),
            }
        }
        SqlExpr::Identifier(i) if i.quote_style.is_none() => {
            match i.value.to_ascii_lowercase().as_str() {
                "current_timestamp" | "current_date" | "localtimestamp" => FieldDefault::Now,
                _ => return Err(refuse()),
            }
        }
        _ => return Err(refuse()),
    }))
}

/// A `UNIQUE (cols)` table constraint: its name, if given, and columns.
pub fn unique_constraint(
    u: &datafusion::sql::sqlparser::ast::UniqueConstraint,
) -> Result<(Option<String>, Vec<String>), SqlError> {
    let mut cols = Vec::new();
    for ic in &u.columns {
        match &ic.column.expr {
            SqlExpr::Identifier(i) => cols.push(ident(i)),
            other => {
                return Err(SqlError::Invalid(format!(
                    "UNIQUE parts must be column names, got `{other}`"
                )));
            }
        }
    }
    Ok((u.name.as_ref().or(u.index_name.as_ref()).map(ident), cols))
}

/// The unique btree index that keeps `UNIQUE (cols)` on `table`, named as
/// given or as PostgreSQL names the constraint, `<table>_<cols>_key`.
pub fn unique_index(table: &str, given: Option<String>, cols: &[String]) -> IndexDef {
    let name = given.unwrap_or_else(|| format!("{table}_{}_key", cols.join("_")));
    let refs: Vec<&str> = cols.iter().map(String::as_str).collect();
    let mut idx = IndexDef::btree(&name, &refs);
    idx.options.unique = true;
    idx
}

/// The name of a table's next unnamed CHECK constraint: PostgreSQL's
/// `<table>_<suffix>` (`t_check`, `t_n_check`), numbered when taken.
pub fn check_name(table: &str, suffix: &str, taken: &[silt::CheckDef]) -> String {
    let base = format!("{table}_{suffix}");
    let mut n = base.clone();
    let mut i = 0;
    while taken.iter().any(|c| c.name == n) {
        i += 1;
        n = format!("{base}{i}");
    }
    n
}

/// `SERIAL` and its kin: an int column whose default is its sequence.
pub fn is_serial(type_name: &str) -> bool {
    matches!(
        type_name.to_ascii_lowercase().as_str(),
        "serial" | "serial4" | "bigserial" | "serial8" | "smallserial" | "serial2"
    )
}

/// The narrower type a column of SQL type `dt` is declared with than the
/// one it is stored as (`integer`, `smallint`, `serial`, `varchar(n)`), so
/// that the catalog shows it and writes keep its bounds.
pub fn narrow(dt: &str) -> Option<silt::Narrow> {
    let lower = dt.trim().to_ascii_lowercase();
    let (base, args) = match lower.split_once('(') {
        Some((b, a)) => (b.trim(), Some(a.trim_end_matches(')').trim())),
        None => (lower.as_str(), None),
    };
    match (base, args) {
        ("int" | "integer" | "int4" | "int32" | "serial" | "serial4", None) => {
            Some(silt::Narrow::Int32)
        }
        ("smallint" | "int2" | "smallserial" | "serial2", None) => Some(silt::Narrow::Int16),
        ("varchar" | "character varying" | "nvarchar", Some(n)) => {
            n.parse().ok().filter(|&n| n > 0).map(silt::Narrow::Varchar)
        }
        _ => None,
    }
}

/// Build the dataset definition of a `CREATE TABLE`.
pub fn dataset_def(ct: &CreateTable) -> Result<DatasetDef, SqlError> {
    if ct.query.is_some() {
        return Err(SqlError::Unsupported(
            "CREATE TABLE ... AS SELECT; create the table with its columns and a PRIMARY KEY, then INSERT INTO ... SELECT".to_owned(),
        ));
    }
    let name = object_name(&ct.name)?;
    let mut pk: Vec<String> = Vec::new();
    let mut not_null: Vec<String> = Vec::new();
    let mut defaults: Vec<(String, FieldDefault)> = Vec::new();
    let mut sequences: Vec<(String, silt::SequenceDef)> = Vec::new();
    let mut checks: Vec<(Option<String>, String, String)> = Vec::new();
    let mut uniques: Vec<(Option<String>, Vec<String>)> = Vec::new();
    let mut fields = Vec::new();
    let mut narrows = Vec::new();
    for c in &ct.columns {
        let cname = ident(&c.name);
        let type_name = c.data_type.to_string();
        if let Some(n) = narrow(&type_name) {
            narrows.push((cname.clone(), n));
        }
        let ty = if is_serial(&type_name) {
            not_null.push(cname.clone());
            defaults.push((cname.clone(), FieldDefault::Sequence));
            FieldType::Int
        } else {
            field_type(&type_name)?
        };
        for o in &c.options {
            match &o.option {
                ColumnOption::PrimaryKey(_) => pk.push(cname.clone()),
                ColumnOption::Generated {
                    generation_expr: None,
                    generated_as,
                    sequence_options,
                    ..
                } => {
                    let s = crate::identity::column(
                        &cname,
                        ty,
                        generated_as,
                        sequence_options.as_deref(),
                    )?;
                    not_null.push(cname.clone());
                    sequences.push((cname.clone(), s));
                }
                ColumnOption::NotNull => not_null.push(cname.clone()),
                ColumnOption::Default(e) => {
                    if let Some(d) = field_default(&cname, e)? {
                        defaults.push((cname.clone(), d));
                    }
                }
                ColumnOption::Check(c) => {
                    checks.push((
                        c.name.as_ref().map(ident),
                        format!("{cname}_check"),
                        c.expr.to_string(),
                    ));
                }
                ColumnOption::Unique(_) => {
                    uniques.push((o.name.as_ref().map(ident), vec![cname.clone()]));
                }
                // Kept by `foreign_keys::of_create`.
                ColumnOption::ForeignKey(_) => {}
                ColumnOption::Generated { .. }
                | ColumnOption::Materialized(_)
                | ColumnOption::OnUpdate(_) => {
                    return Err(SqlError::Unsupported(format!(
                        "`{}` on column `{cname}`: Silt keeps PRIMARY KEY, UNIQUE, REFERENCES, NOT NULL, DEFAULT and CHECK only",
                        o.option
                    )));
                }
                _ => {}
            }
        }
        fields.push((cname, ty));
    }
    for tc in &ct.constraints {
        if let TableConstraint::Check(c) = tc {
            checks.push((
                c.name.as_ref().map(ident),
                "check".to_owned(),
                c.expr.to_string(),
            ));
            continue;
        }
        if let TableConstraint::Unique(u) = tc {
            uniques.push(unique_constraint(u)?);
            continue;
        }
        if matches!(tc, TableConstraint::ForeignKey(_)) {
            // Kept by `foreign_keys::of_create`.
            continue;
        }
        if let TableConstraint::PrimaryKey(p) = tc {
            if !pk.is_empty() {
                return Err(SqlError::Invalid(
                    "the primary key is declared twice".to_owned(),
                ));
            }
            for ic in &p.columns {
                match &ic.column.expr {
                    SqlExpr::Identifier(i) => pk.push(ident(i)),
                    other => {
                        return Err(SqlError::Invalid(format!(
                            "primary key parts must be column names, got `{other}`"
                        )));
                    }
                }
            }
        }
    }
    if pk.is_empty() {
        return Err(SqlError::Invalid(format!(
            "CREATE TABLE {name} needs a primary key: `id BIGINT PRIMARY KEY` or `PRIMARY KEY (a, b)`"
        )));
    }
    for k in &pk {
        if !fields.iter().any(|(n, _)| n == k) {
            return Err(SqlError::Invalid(format!(
                "primary key column `{k}` is not a column of {name}"
            )));
        }
    }
    let pk_refs: Vec<&str> = pk.iter().map(String::as_str).collect();
    let mut def = DatasetDef::new(&name, &pk_refs);
    for (n, t) in fields {
        if def.field_type(&n).is_some() {
            return Err(SqlError::Invalid(format!("column `{n}` is declared twice")));
        }
        def = def.field(&n, t);
    }
    for n in not_null.iter().filter(|n| !pk.contains(n)) {
        def = def.not_null(n);
    }
    def.narrow = narrows;
    // UNIQUE: a unique btree index each, named as PostgreSQL names the
    // constraint (`<table>_<columns>_key`); the primary key is unique
    // already.
    for (given, cols) in uniques {
        if cols == pk {
            continue;
        }
        for c in &cols {
            if def.field_type(c).is_none() {
                return Err(SqlError::Invalid(format!(
                    "UNIQUE column `{c}` is not a column of {name}"
                )));
            }
        }
        let mut idx = unique_index(&name, given, &cols);
        if def.indexes.iter().any(|d| d.name == idx.name) {
            continue;
        }
        idx.id = def.indexes.len() as u32 + 1;
        def.index_ids_used = idx.id;
        idx.validate()?;
        def.indexes.push(idx);
    }
    for (n, d) in defaults {
        def = def.default_value(&n, d);
    }
    for (n, s) in sequences {
        if def.defaults.iter().any(|(f, _)| *f == n) {
            return Err(SqlError::Invalid(format!(
                "both a DEFAULT and an identity are given for column `{n}`; keep one"
            )));
        }
        def = def.sequence(&n, s);
    }
    // PostgreSQL's names: `<table>_<column>_check`, `<table>_check`, then
    // numbered when taken.
    for (given, suffix, expr) in checks {
        let name = match given {
            Some(n) => n,
            None => check_name(&name, &suffix, &def.checks),
        };
        def.checks.push(silt::CheckDef { name, expr });
    }
    let opts: &[SqlOption] = match &ct.table_options {
        CreateTableOptions::None => &[],
        CreateTableOptions::With(o)
        | CreateTableOptions::Options(o)
        | CreateTableOptions::Plain(o)
        | CreateTableOptions::TableProperties(o) => o,
    };
    let mut ttl_opts = Vec::new();
    for o in opts {
        let SqlOption::KeyValue { key, value } = o else {
            return Err(SqlError::Invalid(format!(
                "unsupported table option `{o}`; use WITH (key = 'value', ...)"
            )));
        };
        let k = key.value.to_ascii_lowercase();
        let v = option_text(value);
        match k.as_str() {
            "merge_policy" | "policy" => def.policy = MergePolicy::parse(&v)?,
            "memory_budget" | "memory" => def.memory_budget = parse_size(&v)?,
            "partitions" => def.partitions = parse_num(&k, &v)?,
            "compression" => def.compression = Compression::parse(&v)?,
            "block_size" => {
                def.block_size = usize::try_from(parse_size(&v)?)
                    .map_err(|_| SqlError::Invalid(format!("block size `{v}` is too large")))?
            }
            "bloom_fpr" => def.bloom_fpr = parse_num(&k, &v)?,
            "remote" | "storage" => {
                let level = def.remote.as_ref().map_or(0, |r| r.from_level);
                def = def.remote(&v, level);
            }
            "remote_level" => {
                let level = parse_num(&k, &v)?;
                let Some(r) = def.remote.as_mut() else {
                    return Err(SqlError::Invalid(
                        "remote_level needs remote = 's3://bucket/prefix' before it".to_owned(),
                    ));
                };
                r.from_level = level;
            }
            "ttl_time" | "ttl_expiry" | "ttl_after" | "ttl_clock" | "ttl_grace" => {
                ttl_opts.push((k, v));
            }
            other => {
                return Err(SqlError::Invalid(format!(
                    "unknown table option `{other}`; available: merge_policy, memory_budget, partitions, compression, block_size, bloom_fpr, remote, remote_level, ttl_expiry, ttl_time, ttl_after, ttl_clock, ttl_grace"
                )));
            }
        }
    }
    if !ttl_opts.is_empty() {
        def.ttl = Some(ttl_def(&def, silt::TtlDef::default(), &ttl_opts)?);
    }
    def.foreign_keys = crate::foreign_keys::of_create(ct, &name)?
        .into_iter()
        .map(|w| w.def)
        .collect();
    def.validate()?;
    Ok(def)
}

/// A table's `ttl`: `base` changed by its `ttl_*` options, `ttl_expiry`
/// (the column holding each row's expiry) or `ttl_time` with `ttl_after`
/// (a life past it), `ttl_clock`, `ttl_grace`. Lengths are numbers in the
/// clock's unit, or intervals (`'7 days'`) under a wall clock.
pub(crate) fn ttl_def(
    def: &DatasetDef,
    base: silt::TtlDef,
    opts: &[(String, String)],
) -> Result<silt::TtlDef, SqlError> {
    let mut t = base;
    for (k, v) in opts {
        match k.as_str() {
            "ttl_time" => t.time = Some(v.clone()),
            "ttl_expiry" => t.expiry = Some(v.clone()),
            "ttl_clock" => t.clock = Some(v.to_ascii_lowercase()),
            _ => {}
        }
    }
    let per_sec = silt::clock::unit(t.clock_name(def))?;
    let length = |k: &str, v: &str| -> Result<i64, SqlError> {
        if let Ok(n) = v.trim().parse::<i64>() {
            return Ok(n);
        }
        let Some(per_sec) = per_sec else {
            return Err(SqlError::Invalid(format!(
                "{k} = '{v}': the written clock counts in the table's own units; give a number"
            )));
        };
        let i = silt::value::interval::parse(v)
            .map_err(|e| SqlError::Invalid(format!("{k} = '{v}': {e}")))?;
        if i.months != 0 {
            return Err(SqlError::Invalid(format!(
                "{k} = '{v}': a month has no fixed length; give days"
            )));
        }
        let micros = i128::from(i.days) * 86_400_000_000 + i128::from(i.micros);
        i64::try_from(micros * i128::from(per_sec) / 1_000_000)
            .map_err(|_| SqlError::Invalid(format!("{k} = '{v}' is too long")))
    };
    for (k, v) in opts {
        match k.as_str() {
            "ttl_after" => t.after = Some(length(k, v)?),
            "ttl_grace" => t.grace = length(k, v)?,
            _ => {}
        }
    }
    Ok(t)
}

/// The index definition of a `CREATE INDEX`, and its table.
pub fn index_def(ci: &CreateIndex) -> Result<(String, IndexDef), SqlError> {
    let name = match &ci.name {
        Some(n) => object_name(n)?,
        None => {
            return Err(SqlError::Invalid(
                "CREATE INDEX needs a name: CREATE INDEX name ON table USING kind (column)"
                    .to_owned(),
            ));
        }
    };
    let table = object_name(&ci.table_name)?;
    let kind = match &ci.using {
        None | Some(IndexType::BTree) => IndexKind::Btree,
        Some(IndexType::GiST) => IndexKind::Rtree,
        Some(IndexType::GIN) => IndexKind::Keyword,
        Some(IndexType::BRIN) => IndexKind::Brin,
        Some(IndexType::Custom(i)) => IndexKind::parse(&i.value)?,
        Some(other) => {
            return Err(SqlError::Invalid(format!(
                "unsupported index type `{other}`; available: btree, rtree, dhvb, keyword, ngram, brin, embedded, eager, lazy, composite"
            )));
        }
    };
    if ci.unique && kind != IndexKind::Btree {
        return Err(SqlError::Unsupported(format!(
            "a UNIQUE {kind} index: only btree indexes can be unique"
        )));
    }
    let mut fields = Vec::new();
    for c in &ci.columns {
        match &c.column.expr {
            SqlExpr::Identifier(i) => fields.push(ident(i)),
            other => {
                return Err(SqlError::Invalid(format!(
                    "index parts must be column names, got `{other}`"
                )));
            }
        }
    }
    let mut policy = MergePolicy::default();
    let mut options = IndexOptions {
        unique: ci.unique,
        ..IndexOptions::default()
    };
    for w in &ci.with {
        let (k, v) = match w {
            SqlExpr::BinaryOp { left, right, .. } => (option_text(left), option_text(right)),
            other => {
                return Err(SqlError::Invalid(format!(
                    "index option `{other}` is not key = value"
                )));
            }
        };
        let k = k.to_ascii_lowercase();
        match k.as_str() {
            "merge_policy" | "policy" => policy = MergePolicy::parse(&v)?,
            "reconcile" => options.reconcile = Some(ReconcileOption::parse(&v)?),
            "gram" | "n" => options.gram = Some(parse_num(&k, &v)?),
            "leaf_bytes" => {
                options.leaf_bytes = Some(
                    usize::try_from(parse_size(&v)?)
                        .map_err(|_| SqlError::Invalid(format!("leaf size `{v}` is too large")))?,
                )
            }
            "bits_per_key" => options.bits_per_key = Some(parse_num(&k, &v)?),
            "chunk_size" | "chunk_bytes" => options.chunk_bytes = Some(parse_size(&v)?),
            "form" | "brin_form" => {
                options.brin_form =
                    Some(silt::storage::brin::BrinForm::parse(&v).ok_or_else(|| {
                        SqlError::Invalid(format!(
                            "unknown brin form `{v}`; use 'interval_tree' or 'key_value'"
                        ))
                    })?)
            }
            "order" => options.order = Some(silt::index::RtreeOrder::parse(&v)?),
            "time" => options.time = Some(v.clone()),
            "expiry" => options.expiry = Some(v.clone()),
            "grace" => options.grace = Some(parse_num(&k, &v)?),
            "clock" => options.clock = Some(v.clone()),
            "space" => {
                let parts: Vec<f64> = v
                    .split(',')
                    .map(|p| parse_num::<f64>(&k, p))
                    .collect::<Result<_, _>>()?;
                let [a, b, c, d] = parts.as_slice() else {
                    return Err(SqlError::Invalid(
                        "option `space` needs four numbers: 'min_x,min_y,max_x,max_y'".to_owned(),
                    ));
                };
                options.space = Some([*a, *b, *c, *d]);
            }
            other => {
                return Err(SqlError::Invalid(format!(
                    "unknown index option `{other}`; available: merge_policy, reconcile, gram, leaf_bytes, bits_per_key, order, space, for brin indexes chunk_size and form, and for valuelist indexes time, expiry, grace, clock"
                )));
            }
        }
    }
    let def = IndexDef {
        name,
        id: 0,
        kind,
        fields,
        policy,
        options,
    };
    Ok((table, def))
}

pub use crate::blocking::blocking;

/// `DROP INDEX` without a table: the one dataset that has such an index.
pub fn find_index_table(db: &Arc<Database>, index: &str) -> Result<Option<String>, SqlError> {
    let mut found = Vec::new();
    for name in db.dataset_names() {
        let ds = db.dataset(&name)?;
        if ds.index_defs().iter().any(|d| d.name == index) {
            found.push(name);
        }
    }
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        _ => Err(SqlError::Invalid(format!(
            "index `{index}` exists on several tables ({}); use DROP INDEX {index} ON table",
            found.join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tokenizer's split, for comparison.
    fn slow(sql: &str) -> Vec<(String, Vec<String>)> {
        let with_semicolon = format!("{sql};");
        split(&with_semicolon)
            .expect("splits")
            .into_iter()
            .map(|s| (s.text, s.words))
            .collect()
    }

    #[test]
    fn the_single_statement_path_agrees_with_the_tokenizer() {
        for sql in [
            "SELECT id FROM t WHERE id = 5",
            "  select * from t  ",
            "SELECT count(*), 1 FROM t",
            "BEGIN",
            "COMPACT TABLE t",
            "UPSERT INTO t VALUES (1, 'a;b')",
            "INSERT INTO t VALUES (1)",
            "create user bob with password 'x'",
            "SELECT 12 FROM t",
            "",
            "   ",
        ] {
            let fast: Vec<(String, Vec<String>)> = single(sql)
                .map(|v| v.into_iter().map(|s| (s.text, s.words)).collect())
                .unwrap_or_else(|| slow(sql));
            assert_eq!(fast, slow(sql), "{sql:?}");
        }
        // What the fast path leaves to the tokenizer.
        for sql in [
            "SELECT 1; SELECT 2",
            "SELECT 1 -- hi",
            "/* c */ SELECT 1",
            "\"Quoted\" x",
            "SELECT 1.5",
            "SELECT a::int",
        ] {
            assert!(single(sql).is_none(), "{sql:?}");
        }
    }
}
