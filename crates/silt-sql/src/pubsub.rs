//! Publish/subscribe from SQL (`silt::pubsub`): spaces made and dropped by
//! statements, the operations as table functions, so that any client
//! (psql, a driver, the HTTP endpoint) can use them:
//!
//! ```sql
//! CREATE PUBSUB alerts [WITH (design = 'dualdb', delivery = true,
//!     partitions = 1, merge_policy = 'prefix', grace = 0,
//!     hierarchy = 'variable', depth = 5, fanout = 4)]
//! DROP PUBSUB [IF EXISTS] alerts
//! SELECT * FROM pubsub_subscribe('alerts', id, sid, uid, ts, tmin, tmax
//!     [, self_join [, 'words' [, 'x0,y0,x1,y1']]])
//! SELECT * FROM pubsub_publish('alerts', id, pid, tp, tmax, 'description'
//!     [, since [, x, y]])
//! SELECT * FROM pubsub_deliveries('alerts', uid [, max_rows])
//! SELECT * FROM pubsub_ack('alerts', uid [, seq])
//! ```
//!
//! - `pubsub_subscribe` stores the subscription and returns the stored
//!   publications that match it (`kind = 'publication'`) and, with
//!   `self_join`, the other subscriptions on the id live at `ts`
//!   (`kind = 'subscription'`); `pubsub_publish` stores the publication
//!   and returns the matching subscribers and, with `since`, the other
//!   publications on the id valid at `tp` and published at or after
//!   `since`. One row shape for both: `kind, id, pid, tp, sid, uid, ts,
//!   tmin, tmax, description, x, y` (null where it does not apply).
//! - Content filters: a subscription's `words` (every one must be among
//!   the description's words) and `region` (a box the publication's
//!   location `x, y` must fall in); `NULL` for none.
//! - `pubsub_deliveries` returns what is queued for subscriber `uid` past
//!   its cursor (`seq, uid, sid, id, pid, tp, tmax, description, x, y`), at most
//!   `max_rows` (default 1,000), without waiting; `pubsub_ack` moves the
//!   cursor to `seq` (default: everything queued now) and deletes what it
//!   passed, returning `uid, cursor`. Waiting for deliveries is the HTTP
//!   endpoint's or the embedded API's.
//! - Ids are integers or text (text that is the decimal form of an integer,
//!   `'7'`, is that integer: parameters often come as text); in a
//!   hierarchical space, a node is its path of child numbers as text,
//!   `'0.3.1'` (`''` is the root). The `id` column is text in the same
//!   forms. Integer arguments may be quoted too, as PostgreSQL coerces an
//!   untyped literal; a client preparing a call gets its parameters typed
//!   `text`.
//! - An operation runs when the statement runs (not when it is planned or
//!   `EXPLAIN`ed), commits on its own, and is refused inside a
//!   transaction block. A role needs read and write on the space's
//!   datasets (`pubsub_deliveries`: read).

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, Float64Builder, Int64Builder, RecordBatch, StringBuilder,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl};
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{DataFusionError, ScalarValue, plan_err};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use datafusion::physical_plan::{ExecutionPlan, SendableRecordBatchStream};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use silt::pubsub::{
    Delivery, Design, Filter, Granularity, PubSub, PubSubOptions, Publication, Subscription,
};
use silt::{Database, Value};

use crate::error::SqlError;
use crate::session::TxnSlot;

/// Rows `pubsub_deliveries` returns when not told.
const DEFAULT_ROWS: i64 = 1000;
/// The most it returns at once.
const MAX_ROWS: i64 = 100_000;

/// `CREATE PUBSUB` / `DROP PUBSUB`.
#[derive(Debug, PartialEq)]
pub enum PubSubStmt {
    Create {
        name: String,
        if_not_exists: bool,
        opts: Box<PubSubOptions>,
    },
    Drop {
        name: String,
        if_exists: bool,
    },
}

/// Recognize `CREATE PUBSUB` and `DROP PUBSUB` (`words`: the statement's
/// leading keywords, upper case).
pub fn parse_text(words: &[&str], text: &str) -> Result<Option<PubSubStmt>, SqlError> {
    let create = matches!(words, ["CREATE", "PUBSUB", ..]);
    if !create && !matches!(words, ["DROP", "PUBSUB", ..]) {
        return Ok(None);
    }
    let tokens: Vec<Token> = Tokenizer::new(&GenericDialect {}, text)
        .tokenize()
        .map_err(|e| SqlError::Parse(e.to_string()))?
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_) | Token::SemiColon))
        .collect();
    let keyword = |i: usize, k: &str| matches!(tokens.get(i), Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(k));
    // After `CREATE PUBSUB` / `DROP PUBSUB`.
    let mut i = 2;
    let cond = if create && keyword(i, "IF") && keyword(i + 1, "NOT") && keyword(i + 2, "EXISTS") {
        i += 3;
        true
    } else if !create && keyword(i, "IF") && keyword(i + 1, "EXISTS") {
        i += 2;
        true
    } else {
        false
    };
    let name = match tokens.get(i) {
        // As DataFusion reads names: unquoted ones lower-cased.
        Some(Token::Word(w)) if w.quote_style.is_some() => w.value.clone(),
        Some(Token::Word(w)) => w.value.to_ascii_lowercase(),
        _ => {
            return Err(SqlError::Parse(format!(
                "expected `{} PUBSUB name`",
                if create { "CREATE" } else { "DROP" }
            )));
        }
    };
    let mut t = tokens.into_iter().skip(i + 1);
    if !create {
        return match t.next() {
            None => Ok(Some(PubSubStmt::Drop {
                name,
                if_exists: cond,
            })),
            Some(x) => Err(SqlError::Parse(format!(
                "unexpected `{x}` after `DROP PUBSUB {name}`"
            ))),
        };
    }
    let mut given = Vec::new();
    match t.next() {
        None => {}
        Some(Token::Word(w)) if w.value.eq_ignore_ascii_case("with") => {
            if t.next() != Some(Token::LParen) {
                return Err(SqlError::Parse("expected `(` after WITH".to_owned()));
            }
            loop {
                let key = match t.next() {
                    Some(Token::Word(w)) => w.value.to_ascii_lowercase(),
                    Some(Token::RParen) if given.is_empty() => break,
                    other => {
                        return Err(SqlError::Parse(format!(
                            "expected an option name in CREATE PUBSUB ... WITH (...), got {}",
                            other.map_or("the end".to_owned(), |o| format!("`{o}`"))
                        )));
                    }
                };
                if t.next() != Some(Token::Eq) {
                    return Err(SqlError::Parse(format!("expected `=` after `{key}`")));
                }
                let value = match t.next() {
                    Some(Token::SingleQuotedString(s)) => s,
                    Some(Token::Number(n, _)) => n,
                    Some(Token::Minus) => match t.next() {
                        Some(Token::Number(n, _)) => format!("-{n}"),
                        _ => return Err(SqlError::Parse(format!("expected a number for `{key}`"))),
                    },
                    Some(Token::Word(w)) => w.value,
                    _ => return Err(SqlError::Parse(format!("expected a value for `{key}`"))),
                };
                given.push((key, value));
                match t.next() {
                    Some(Token::Comma) => continue,
                    Some(Token::RParen) => break,
                    _ => {
                        return Err(SqlError::Parse(
                            "expected `,` or `)` in CREATE PUBSUB ... WITH (...)".to_owned(),
                        ));
                    }
                }
            }
            if let Some(x) = t.next() {
                return Err(SqlError::Parse(format!(
                    "unexpected `{x}` after CREATE PUBSUB ... WITH (...)"
                )));
            }
        }
        Some(x) => {
            return Err(SqlError::Parse(format!(
                "unexpected `{x}` after `CREATE PUBSUB {name}` (options go in WITH (...))"
            )));
        }
    }
    Ok(Some(PubSubStmt::Create {
        name,
        if_not_exists: cond,
        opts: Box::new(options(&given)?),
    }))
}

/// The options of `WITH (...)`.
fn options(given: &[(String, String)]) -> Result<PubSubOptions, SqlError> {
    let mut o = PubSubOptions {
        delivery: true,
        ..PubSubOptions::default()
    };
    let (mut hierarchy, mut depth, mut fanout) = (None, 5u8, 4u8);
    let bad = |k: &str, v: &str, want: &str| {
        SqlError::Invalid(format!("pub/sub option `{k}`: expected {want}, got `{v}`"))
    };
    for (k, v) in given {
        match k.as_str() {
            "design" => o.design = Design::parse(v)?,
            "delivery" => {
                o.delivery = match v.to_ascii_lowercase().as_str() {
                    "true" | "on" | "1" => true,
                    "false" | "off" | "0" => false,
                    _ => return Err(bad(k, v, "true or false")),
                }
            }
            "partitions" => {
                o.partitions = v
                    .parse()
                    .ok()
                    .filter(|p| (1..=1024).contains(p))
                    .ok_or_else(|| bad(k, v, "a number of partitions from 1 to 1024"))?
            }
            "merge_policy" => o.policy = silt::lsm::policy::MergePolicy::parse(v)?,
            "grace" => o.grace = v.parse().map_err(|_| bad(k, v, "an integer"))?,
            "memory" | "memory_budget" => {
                o.memory_budget = Some(v.parse().map_err(|_| bad(k, v, "a number of bytes"))?)
            }
            "hierarchy" => hierarchy = Some(v.to_ascii_lowercase()),
            "depth" => depth = v.parse().map_err(|_| bad(k, v, "a depth from 1 to 32"))?,
            "fanout" => fanout = v.parse().map_err(|_| bad(k, v, "a fanout from 2 to 255"))?,
            _ => {
                return Err(SqlError::Invalid(format!(
                    "unknown pub/sub option `{k}`; the options are design, delivery, partitions, merge_policy, grace, memory, hierarchy, depth, fanout"
                )));
            }
        }
    }
    o.hierarchy = match hierarchy.as_deref() {
        None => None,
        Some("fixed") => Some(Granularity::Fixed { depth, fanout }),
        Some("variable") => Some(Granularity::Variable { depth, fanout }),
        Some(v) => return Err(bad("hierarchy", v, "'fixed' or 'variable'")),
    };
    if o.design == Design::RepQueries && !given.iter().any(|(k, _)| k == "delivery") {
        // RepQueries subscribers poll: no queues unless asked (and then
        // refused with the reason).
        o.delivery = false;
    }
    Ok(o)
}

/// Run `CREATE PUBSUB` / `DROP PUBSUB`.
pub fn run(db: &Database, stmt: PubSubStmt) -> Result<(), SqlError> {
    match stmt {
        PubSubStmt::Create {
            name,
            if_not_exists,
            opts,
        } => {
            if PubSub::exists(db, &name) {
                if if_not_exists {
                    return Ok(());
                }
                return Err(SqlError::Invalid(format!(
                    "pub/sub space `{name}` already exists (DROP PUBSUB {name} first, or CREATE PUBSUB IF NOT EXISTS)"
                )));
            }
            PubSub::open(db, &name, &opts)?;
            Ok(())
        }
        PubSubStmt::Drop { name, if_exists } => {
            if !PubSub::exists(db, &name) {
                if if_exists {
                    return Ok(());
                }
                return Err(SqlError::Invalid(format!(
                    "no pub/sub space named `{name}`"
                )));
            }
            PubSub::drop_space(db, &name)?;
            Ok(())
        }
    }
}

/// Register the table functions on `ctx`.
pub fn register(ctx: &SessionContext, db: &Arc<Database>) {
    for op in [Op::Subscribe, Op::Publish, Op::Deliveries, Op::Ack] {
        ctx.register_udtf(op.name(), Arc::new(PubSubFunction { db: db.clone(), op }));
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Subscribe,
    Publish,
    Deliveries,
    Ack,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Subscribe => "pubsub_subscribe",
            Op::Publish => "pubsub_publish",
            Op::Deliveries => "pubsub_deliveries",
            Op::Ack => "pubsub_ack",
        }
    }

    fn usage(self) -> &'static str {
        match self {
            Op::Subscribe => {
                "pubsub_subscribe(space, id, sid, uid, ts, tmin, tmax [, self_join [, words [, 'x0,y0,x1,y1']]])"
            }
            Op::Publish => {
                "pubsub_publish(space, id, pid, tp, tmax, description [, since [, x, y]])"
            }
            Op::Deliveries => "pubsub_deliveries(space, uid [, max_rows])",
            Op::Ack => "pubsub_ack(space, uid [, seq])",
        }
    }

    fn schema(self) -> SchemaRef {
        let i = |n: &str, null: bool| Field::new(n, DataType::Int64, null);
        let s = |n: &str, null: bool| Field::new(n, DataType::Utf8, null);
        let f = |n: &str, null: bool| Field::new(n, DataType::Float64, null);
        Arc::new(Schema::new(match self {
            Op::Subscribe | Op::Publish => vec![
                s("kind", false),
                s("id", false),
                i("pid", true),
                i("tp", true),
                i("sid", true),
                i("uid", true),
                i("ts", true),
                i("tmin", true),
                i("tmax", false),
                s("description", true),
                f("x", true),
                f("y", true),
            ],
            Op::Deliveries => vec![
                i("seq", false),
                i("uid", false),
                i("sid", false),
                s("id", false),
                i("pid", false),
                i("tp", false),
                i("tmax", false),
                s("description", false),
                f("x", true),
                f("y", true),
            ],
            Op::Ack => vec![i("uid", false), i("cursor", false)],
        }))
    }
}

struct PubSubFunction {
    db: Arc<Database>,
    op: Op,
}

impl std::fmt::Debug for PubSubFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.op.name())
    }
}

/// Whether `e` holds a `$n` parameter.
fn has_placeholder(e: &Expr) -> bool {
    let mut found = false;
    let _ = e.apply(|x| {
        found |= matches!(x, Expr::Placeholder(_));
        Ok(if found {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
    found
}

/// One argument, a constant.
#[derive(Clone, Debug)]
enum Arg {
    Int(i64),
    Float(f64),
    Text(String),
    Bool(bool),
    Null,
}

fn constant(op: Op, n: usize, e: &Expr) -> datafusion::common::Result<Arg> {
    let v = match e {
        Expr::Literal(v, _) => v.clone(),
        Expr::Negative(inner) => match inner.as_ref() {
            Expr::Literal(v, _) => v.arithmetic_negate()?,
            _ => return not_constant(op, n),
        },
        Expr::Cast(c) => match c.expr.as_ref() {
            Expr::Literal(v, _) => v.cast_to(c.field.data_type())?,
            _ => return not_constant(op, n),
        },
        _ => return not_constant(op, n),
    };
    Ok(match v {
        v if v.is_null() => Arg::Null,
        ScalarValue::Boolean(Some(b)) => Arg::Bool(b),
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => Arg::Text(s),
        v @ (ScalarValue::Float16(_)
        | ScalarValue::Float32(_)
        | ScalarValue::Float64(_)
        | ScalarValue::Decimal128(..)
        | ScalarValue::Decimal256(..)) => match v.cast_to(&DataType::Float64)? {
            ScalarValue::Float64(Some(f)) => Arg::Float(f),
            _ => return not_constant(op, n),
        },
        other => match other.cast_to(&DataType::Int64)? {
            ScalarValue::Int64(Some(i)) => Arg::Int(i),
            _ => return not_constant(op, n),
        },
    })
}

fn not_constant<T>(op: Op, n: usize) -> datafusion::common::Result<T> {
    plan_err!(
        "argument {} of {} must be a constant (a number, a string or true/false); usage: {}",
        n + 1,
        op.name(),
        op.usage()
    )
}

impl TableFunctionImpl for PubSubFunction {
    fn call_with_args(
        &self,
        args: TableFunctionArgs,
    ) -> datafusion::common::Result<Arc<dyn TableProvider>> {
        let op = self.op;
        // A statement being described (a client preparing it with `$n`
        // parameters): the shape only. Its parameters are bound into the
        // text before it runs.
        if args.exprs().iter().any(has_placeholder) {
            return Ok(Arc::new(PubSubCall {
                op,
                call: None,
                schema: op.schema(),
            }));
        }
        let args: Vec<Arg> = args
            .exprs()
            .iter()
            .enumerate()
            .map(|(n, e)| constant(op, n, e))
            .collect::<datafusion::common::Result<_>>()?;
        let (min, max) = match op {
            Op::Subscribe => (7, 10),
            Op::Publish => (6, 9),
            Op::Deliveries | Op::Ack => (2, 3),
        };
        if args.len() < min || args.len() > max {
            return plan_err!(
                "{} takes {min} to {max} arguments; usage: {}",
                op.name(),
                op.usage()
            );
        }
        let Arg::Text(space) = &args[0] else {
            return plan_err!(
                "the first argument of {} is the space's name, as text",
                op.name()
            );
        };
        let space =
            PubSub::get(&self.db, space).map_err(|e| DataFusionError::Plan(e.to_string()))?;
        let call = Call { op, space, args };
        // Check the arguments now: a bad one fails the plan, not a run.
        call.request()
            .map_err(|e| DataFusionError::Plan(e.to_string()))?;
        Ok(Arc::new(PubSubCall {
            op,
            call: Some(Arc::new(call)),
            schema: op.schema(),
        }))
    }
}

/// One call of a table function, run when its plan executes.
struct Call {
    op: Op,
    space: Arc<PubSub>,
    args: Vec<Arg>,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}('{}', {:?})",
            self.op.name(),
            self.space.name(),
            &self.args[1..]
        )
    }
}

/// What a call does, its arguments read.
enum Request {
    Subscribe(Subscription, bool),
    Publish(Publication, Option<i64>),
    Deliveries(i64, usize),
    Ack(i64, Option<i64>),
}

impl Call {
    /// Integer argument `n`. A quoted integer counts, as PostgreSQL
    /// coerces an untyped literal (and a parameter a client sent as text).
    fn int(&self, n: usize, what: &str) -> Result<i64, SqlError> {
        match self.args.get(n) {
            Some(Arg::Int(i)) => Ok(*i),
            Some(Arg::Text(t)) if t.trim().parse::<i64>().is_ok() => {
                t.trim().parse().map_err(|_| SqlError::Invalid(t.clone()))
            }
            other => Err(SqlError::Invalid(format!(
                "{}: `{what}` (argument {}) must be an integer, got {}; usage: {}",
                self.op.name(),
                n + 1,
                describe(other),
                self.op.usage()
            ))),
        }
    }

    fn float(&self, n: usize, what: &str) -> Result<f64, SqlError> {
        match self.args.get(n) {
            Some(Arg::Int(i)) => Ok(*i as f64),
            Some(Arg::Float(f)) => Ok(*f),
            Some(Arg::Text(t)) if t.trim().parse::<f64>().is_ok_and(f64::is_finite) => {
                t.trim().parse().map_err(|_| SqlError::Invalid(t.clone()))
            }
            other => Err(SqlError::Invalid(format!(
                "{}: `{what}` (argument {}) must be a number, got {}; usage: {}",
                self.op.name(),
                n + 1,
                describe(other),
                self.op.usage()
            ))),
        }
    }

    fn id(&self) -> Result<Value, SqlError> {
        let hier = self.space.options().hierarchy.is_some();
        match (self.args.get(1), hier) {
            (Some(Arg::Int(i)), false) => Ok(Value::Int(*i)),
            // The decimal form of an integer is that integer: a client's
            // parameters may come as text, and the `id` column shows both
            // alike.
            (Some(Arg::Text(s)), false) => Ok(match s.parse::<i64>() {
                Ok(i) if i.to_string() == *s => Value::Int(i),
                _ => Value::String(s.clone()),
            }),
            (Some(Arg::Text(s)), true) => parse_path(s),
            (other, _) => Err(SqlError::Invalid(format!(
                "{}: `id` must be {}, got {}",
                self.op.name(),
                if hier {
                    "a node's path as text ('0.3.1'; '' for the root)"
                } else {
                    "an integer or text"
                },
                describe(other)
            ))),
        }
    }

    fn request(&self) -> Result<Request, SqlError> {
        Ok(match self.op {
            Op::Subscribe => {
                let self_join = match self.args.get(7) {
                    None | Some(Arg::Null) => false,
                    Some(Arg::Bool(b)) => *b,
                    other => {
                        return Err(SqlError::Invalid(format!(
                            "pubsub_subscribe: `self_join` must be true or false, got {}",
                            describe(other)
                        )));
                    }
                };
                let words = match self.args.get(8) {
                    None | Some(Arg::Null) => Vec::new(),
                    Some(Arg::Text(t)) => t.split_whitespace().map(str::to_owned).collect(),
                    other => {
                        return Err(SqlError::Invalid(format!(
                            "pubsub_subscribe: `words` must be text (words separated by spaces) or NULL, got {}",
                            describe(other)
                        )));
                    }
                };
                let region = match self.args.get(9) {
                    None | Some(Arg::Null) => None,
                    Some(Arg::Text(t)) => Some(parse_box(t)?),
                    other => {
                        return Err(SqlError::Invalid(format!(
                            "pubsub_subscribe: `region` must be text 'x0,y0,x1,y1' or NULL, got {}",
                            describe(other)
                        )));
                    }
                };
                let s = Subscription {
                    id: self.id()?,
                    sid: self.int(2, "sid")?,
                    uid: self.int(3, "uid")?,
                    ts: self.int(4, "ts")?,
                    tmin: self.int(5, "tmin")?,
                    tmax: self.int(6, "tmax")?,
                    filter: Filter { words, region },
                };
                s.check()?;
                Request::Subscribe(s, self_join)
            }
            Op::Publish => {
                let desc = match self.args.get(5) {
                    Some(Arg::Text(s)) => s.clone(),
                    other => {
                        return Err(SqlError::Invalid(format!(
                            "pubsub_publish: `description` must be text, got {}",
                            describe(other)
                        )));
                    }
                };
                let since = match self.args.get(6) {
                    None | Some(Arg::Null) => None,
                    Some(_) => Some(self.int(6, "since")?),
                };
                let loc = match (self.args.get(7), self.args.get(8)) {
                    (None | Some(Arg::Null), None | Some(Arg::Null)) => None,
                    _ => Some((self.float(7, "x")?, self.float(8, "y")?)),
                };
                let p = Publication {
                    id: self.id()?,
                    pid: self.int(2, "pid")?,
                    tp: self.int(3, "tp")?,
                    tmax: self.int(4, "tmax")?,
                    desc,
                    loc,
                };
                p.check()?;
                Request::Publish(p, since)
            }
            Op::Deliveries => {
                let uid = self.int(1, "uid")?;
                let rows = match self.args.get(2) {
                    None | Some(Arg::Null) => DEFAULT_ROWS,
                    Some(_) => self.int(2, "max_rows")?,
                };
                if !(1..=MAX_ROWS).contains(&rows) {
                    return Err(SqlError::Invalid(format!(
                        "pubsub_deliveries: `max_rows` must be from 1 to {MAX_ROWS}, got {rows}"
                    )));
                }
                Request::Deliveries(uid, rows as usize)
            }
            Op::Ack => {
                let uid = self.int(1, "uid")?;
                let seq = match self.args.get(2) {
                    None | Some(Arg::Null) => None,
                    Some(_) => Some(self.int(2, "seq")?),
                };
                Request::Ack(uid, seq)
            }
        })
    }

    /// Run the call (blocking: it writes and waits for its commit).
    fn run(&self, schema: &SchemaRef) -> Result<RecordBatch, SqlError> {
        let mut rows = Rows::default();
        match self.request()? {
            Request::Subscribe(s, self_join) => {
                let r = self.space.subscribe(&s, self_join)?;
                for p in &r.publications {
                    rows.publication(p);
                }
                for s in &r.subscriptions {
                    rows.subscription(s);
                }
            }
            Request::Publish(p, since) => {
                let r = self.space.publish(&p, since)?;
                for s in &r.subscribers {
                    rows.subscription(s);
                }
                for p in &r.publications {
                    rows.publication(p);
                }
            }
            Request::Deliveries(uid, max) => {
                let mut l = self.space.listen(uid)?;
                while rows.n < max {
                    match l.try_next()? {
                        Some(d) => rows.delivery(&d),
                        None => break,
                    }
                }
            }
            Request::Ack(uid, seq) => {
                let mut l = self.space.listen(uid)?;
                match seq {
                    Some(seq) => {
                        // The listener acknowledges only what it handed out.
                        while let Some(d) = l.try_next()? {
                            if d.seq >= seq {
                                break;
                            }
                        }
                        l.ack(seq)?
                    }
                    None => {
                        while l.try_next()?.is_some() {}
                        l.ack_all()?;
                    }
                }
                rows.ack(uid, l.cursor());
            }
        }
        rows.batch(self.op, schema)
    }
}

fn describe(a: Option<&Arg>) -> String {
    match a {
        None => "nothing".to_owned(),
        Some(Arg::Int(i)) => format!("the integer {i}"),
        Some(Arg::Float(f)) => format!("the number {f}"),
        Some(Arg::Text(s)) => format!("the text '{s}'"),
        Some(Arg::Bool(b)) => format!("{b}"),
        Some(Arg::Null) => "NULL".to_owned(),
    }
}

/// Pub/sub space `name` for a session logged in as `user` (`None`: every
/// right), checking that the role may read its datasets (and with
/// `write`, write them: acknowledging deletes from the queue).
pub fn space_for(
    db: &Database,
    user: Option<&str>,
    name: &str,
    write: bool,
) -> Result<Arc<PubSub>, SqlError> {
    let space = PubSub::get(db, name)?;
    if let Some(who) = crate::access::principal(db, user)? {
        let datasets: Vec<String> = space
            .datasets()
            .iter()
            .map(|d| d.name().to_owned())
            .collect();
        crate::access::check_datasets(&who, &datasets, write, "listen on")?;
    }
    Ok(space)
}

/// A delivery as a JSON object (`seq, uid, sid, id, pid, tp, tmax,
/// desc`; `id` a number, text, or a path's text form `"0.3.1"`).
pub fn delivery_json(d: &Delivery) -> serde_json::Value {
    let p = &d.publication;
    let id = match &p.id {
        Value::Int(i) => serde_json::Value::from(*i),
        other => serde_json::Value::from(id_text(other)),
    };
    serde_json::json!({
        "seq": d.seq,
        "uid": d.uid,
        "sid": d.sid,
        "id": id,
        "pid": p.pid,
        "tp": p.tp,
        "tmax": p.tmax,
        "desc": p.desc,
        "x": p.loc.map(|l| l.0),
        "y": p.loc.map(|l| l.1),
    })
}

/// A box from its text form `'x0,y0,x1,y1'`.
fn parse_box(t: &str) -> Result<[f64; 4], SqlError> {
    let v: Vec<f64> = t
        .split(',')
        .map(|c| c.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| bad_box(t))?;
    <[f64; 4]>::try_from(v).map_err(|_| bad_box(t))
}

fn bad_box(t: &str) -> SqlError {
    SqlError::Invalid(format!(
        "pubsub_subscribe: region `{t}` is not a box: four numbers 'x0,y0,x1,y1'"
    ))
}

/// A node's path from its text form (`'0.3.1'`; `''`: the root).
fn parse_path(s: &str) -> Result<Value, SqlError> {
    if s.is_empty() {
        return Ok(Value::Binary(Vec::new()));
    }
    s.split('.')
        .map(|c| c.trim().parse::<u8>())
        .collect::<Result<Vec<u8>, _>>()
        .map(Value::Binary)
        .map_err(|_| {
            SqlError::Invalid(format!(
                "`{s}` is not a node's path: child numbers (0 to 255) separated by dots, as '0.3.1' ('' is the root)"
            ))
        })
}

/// An id in its text form.
fn id_text(v: &Value) -> String {
    match v {
        Value::Binary(p) => p
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join("."),
        Value::String(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::Double(d) => d.to_string(),
        Value::Bool(b) => b.to_string(),
        other => format!("{other:?}"),
    }
}

/// The rows of a call's answer, column by column.
#[derive(Default)]
struct Rows {
    n: usize,
    text: [Vec<Option<String>>; 3],
    ints: [Vec<Option<i64>>; 8],
    xy: [Vec<Option<f64>>; 2],
}

impl Rows {
    /// A `kind, id, pid, tp, sid, uid, ts, tmin, tmax, description, x, y`
    /// row.
    fn matched(
        &mut self,
        kind: &str,
        id: &Value,
        ints: [Option<i64>; 7],
        desc: Option<&str>,
        loc: Option<(f64, f64)>,
    ) {
        self.n += 1;
        self.xy[0].push(loc.map(|l| l.0));
        self.xy[1].push(loc.map(|l| l.1));
        self.text[0].push(Some(kind.to_owned()));
        self.text[1].push(Some(id_text(id)));
        self.text[2].push(desc.map(str::to_owned));
        for (col, v) in self.ints.iter_mut().zip(ints) {
            col.push(v);
        }
    }

    fn publication(&mut self, p: &Publication) {
        let ints = [
            Some(p.pid),
            Some(p.tp),
            None,
            None,
            None,
            None,
            Some(p.tmax),
        ];
        self.matched("publication", &p.id, ints, Some(&p.desc), p.loc);
    }

    fn subscription(&mut self, s: &Subscription) {
        let ints = [
            None,
            None,
            Some(s.sid),
            Some(s.uid),
            Some(s.ts),
            Some(s.tmin),
            Some(s.tmax),
        ];
        self.matched("subscription", &s.id, ints, None, None);
    }

    fn delivery(&mut self, d: &Delivery) {
        self.n += 1;
        let p = &d.publication;
        self.xy[0].push(p.loc.map(|l| l.0));
        self.xy[1].push(p.loc.map(|l| l.1));
        self.text[1].push(Some(id_text(&p.id)));
        self.text[2].push(Some(p.desc.clone()));
        for (col, v) in self
            .ints
            .iter_mut()
            .zip([d.seq, d.uid, d.sid, p.pid, p.tp, p.tmax])
        {
            col.push(Some(v));
        }
    }

    fn ack(&mut self, uid: i64, cursor: i64) {
        self.n += 1;
        self.ints[0].push(Some(uid));
        self.ints[1].push(Some(cursor));
    }

    fn batch(self, op: Op, schema: &SchemaRef) -> Result<RecordBatch, SqlError> {
        let text = |v: &[Option<String>]| -> ArrayRef {
            let mut b = StringBuilder::new();
            for s in v {
                b.append_option(s.as_deref());
            }
            Arc::new(b.finish())
        };
        let int = |v: &[Option<i64>]| -> ArrayRef {
            let mut b = Int64Builder::new();
            for i in v {
                b.append_option(*i);
            }
            Arc::new(b.finish())
        };
        let float = |v: &[Option<f64>]| -> ArrayRef {
            let mut b = Float64Builder::new();
            for f in v {
                b.append_option(*f);
            }
            Arc::new(b.finish())
        };
        let [kind, id, desc] = &self.text;
        let cols: Vec<ArrayRef> = match op {
            Op::Subscribe | Op::Publish => {
                let mut c = vec![text(kind), text(id)];
                c.extend(self.ints[..7].iter().map(|v| int(v)));
                c.push(text(desc));
                c.extend(self.xy.iter().map(|v| float(v)));
                c
            }
            Op::Deliveries => {
                let mut c: Vec<ArrayRef> = self.ints[..3].iter().map(|v| int(v)).collect();
                c.push(text(id));
                c.extend(self.ints[3..6].iter().map(|v| int(v)));
                c.push(text(desc));
                c.extend(self.xy.iter().map(|v| float(v)));
                c
            }
            Op::Ack => vec![int(&self.ints[0]), int(&self.ints[1])],
        };
        RecordBatch::try_new(schema.clone(), cols)
            .map_err(|e| SqlError::Runtime(format!("building the answer's rows: {e}")))
    }
}

/// The table a call makes: one partition, its rows computed when the plan
/// executes.
#[derive(Debug)]
pub struct PubSubCall {
    op: Op,
    /// `None`: planned with unbound parameters, to describe the statement.
    call: Option<Arc<Call>>,
    schema: SchemaRef,
}

impl PubSubCall {
    /// The datasets the call reads and whether it writes them, for the
    /// privilege check (`crate::access`).
    pub fn needs(&self) -> (Vec<String>, bool) {
        let names = match &self.call {
            Some(c) => c
                .space
                .datasets()
                .iter()
                .map(|d| d.name().to_owned())
                .collect(),
            None => Vec::new(),
        };
        (names, self.op != Op::Deliveries)
    }

    /// The function's name.
    pub fn function(&self) -> &'static str {
        self.op.name()
    }
}

#[async_trait::async_trait]
impl TableProvider for PubSubCall {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> datafusion::common::Result<Arc<dyn ExecutionPlan>> {
        let part: Arc<dyn PartitionStream> = Arc::new(CallStream {
            op: self.op,
            call: self.call.clone(),
            schema: self.schema.clone(),
        });
        Ok(Arc::new(StreamingTableExec::try_new(
            self.schema.clone(),
            vec![part],
            projection,
            Vec::new(),
            false,
            None,
        )?))
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> datafusion::common::Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![
            TableProviderFilterPushDown::Unsupported;
            filters.len()
        ])
    }
}

#[derive(Debug)]
struct CallStream {
    op: Op,
    call: Option<Arc<Call>>,
    schema: SchemaRef,
}

impl PartitionStream for CallStream {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let call = self.call.clone();
        let schema = self.schema.clone();
        let in_block = TxnSlot::of(ctx.session_config()).is_some();
        let op = self.op;
        let fut = async move {
            if in_block {
                return Err(DataFusionError::External(Box::new(SqlError::Unsupported(
                    format!(
                        "{} inside a transaction block: pub/sub operations commit on their own; run it after COMMIT or ROLLBACK",
                        op.name()
                    ),
                ))));
            }
            let Some(call) = call else {
                return Err(DataFusionError::Plan(format!(
                    "{} was planned with parameters ($1, ...) that were never bound",
                    op.name()
                )));
            };
            let s = schema.clone();
            crate::blocking::blocking(move || call.run(&s))
                .await
                .map_err(|e| DataFusionError::External(Box::new(e)))
        };
        Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            futures::stream::once(fut),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(sql: &str) -> Result<Option<PubSubStmt>, SqlError> {
        let words: Vec<String> = sql
            .split_whitespace()
            .take(2)
            .map(|w| w.to_ascii_uppercase())
            .collect();
        let w: Vec<&str> = words.iter().map(String::as_str).collect();
        parse_text(&w, sql)
    }

    #[test]
    fn create_and_drop_parse() {
        let Some(PubSubStmt::Create {
            name,
            if_not_exists,
            opts,
        }) = parse(
            "CREATE PUBSUB IF NOT EXISTS Feed WITH (design = 'twodb', delivery = false, partitions = 2, grace = -3, hierarchy = variable, depth = 4, fanout = 8)",
        )
        .unwrap()
        else {
            panic!("not a create");
        };
        assert_eq!(name, "feed");
        assert!(if_not_exists);
        assert_eq!(opts.design, Design::TwoDb);
        assert!(!opts.delivery);
        assert_eq!(opts.partitions, 2);
        assert_eq!(opts.grace, -3);
        assert_eq!(
            opts.hierarchy,
            Some(Granularity::Variable {
                depth: 4,
                fanout: 8
            })
        );
        assert_eq!(
            parse("drop pubsub if exists \"Feed\";").unwrap(),
            Some(PubSubStmt::Drop {
                name: "Feed".to_owned(),
                if_exists: true
            })
        );
        let Some(PubSubStmt::Create { opts, .. }) = parse("CREATE PUBSUB p").unwrap() else {
            panic!("not a create");
        };
        assert!(opts.delivery);
        assert!(parse("SELECT 1").unwrap().is_none());
        for (bad, says) in [
            (
                "CREATE PUBSUB p WITH (colour = 'red')",
                "unknown pub/sub option `colour`",
            ),
            ("CREATE PUBSUB p WITH (partitions = 0)", "from 1 to 1024"),
            (
                "CREATE PUBSUB p WITH (design = 'kafka')",
                "unknown pub/sub design",
            ),
            ("CREATE PUBSUB p (design = 'twodb')", "options go in WITH"),
            ("CREATE PUBSUB p WITH (design 'twodb')", "expected `=`"),
            ("DROP PUBSUB", "expected `DROP PUBSUB name`"),
            ("DROP PUBSUB a b", "unexpected `b`"),
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn paths_read_and_print() {
        assert_eq!(parse_path("0.3.12").unwrap(), Value::Binary(vec![0, 3, 12]));
        assert_eq!(parse_path("").unwrap(), Value::Binary(vec![]));
        assert!(parse_path("1.x").is_err());
        assert!(parse_path("1.256").is_err());
        assert_eq!(id_text(&Value::Binary(vec![0, 3, 12])), "0.3.12");
        assert_eq!(id_text(&Value::Int(-4)), "-4");
    }
}
