//! `ALTER TABLE t ALTER [COLUMN] c` changes of identity columns, as
//! PostgreSQL takes them:
//!
//! - `ADD GENERATED { ALWAYS | BY DEFAULT } AS IDENTITY [( options )]`
//!   makes an integer `NOT NULL` column without a default an identity
//!   column (the parser reads this one; its counter starts at `START`,
//!   whatever the rows hold, as PostgreSQL's new sequence does);
//! - `SET GENERATED { ALWAYS | BY DEFAULT }`, `SET INCREMENT [BY] n`,
//!   `SET START [WITH] n`, `SET [NO] MINVALUE`, `SET [NO] MAXVALUE`,
//!   `SET CACHE n`, `SET NO CYCLE` and `RESTART [[WITH] n]`, any number of
//!   them in one clause, change its kind, its options and its counter;
//! - `DROP IDENTITY [IF EXISTS]` makes it a plain column again.
//!
//! The parser knows neither the `SET` forms nor `RESTART` nor `DROP
//! IDENTITY`: [`parse`] reads them from the statement's text.

use datafusion::sql::sqlparser::ast::{GeneratedAs, SequenceOptions};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use silt::{Alteration, FieldDefault, Identity, SequenceDef};

use crate::error::SqlError;

/// A change of one column's identity.
#[derive(Debug, Clone)]
pub enum Change {
    /// `ADD GENERATED ... AS IDENTITY [( options )]`.
    Add {
        always: bool,
        options: Vec<SequenceOptions>,
    },
    /// `SET ...` and `RESTART ...` steps, in the statement's order.
    Set(Vec<Step>),
    /// `DROP IDENTITY [IF EXISTS]`.
    Drop { if_exists: bool },
}

/// One `SET` or `RESTART` of an identity column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Generated(Identity),
    Increment(i64),
    Start(i64),
    /// `SET MINVALUE n`, or `SET NO MINVALUE` (`None`: the default bound).
    Min(Option<i64>),
    Max(Option<i64>),
    /// `RESTART [WITH n]` (`None`: at the sequence's start).
    Restart(Option<i64>),
}

/// An `ALTER TABLE` whose one action is an identity change the parser
/// cannot read: (table, IF EXISTS, column, change). `None` for any other
/// statement (the parser takes it).
pub fn parse(sql: &str) -> Result<Option<(String, bool, String, Change)>, SqlError> {
    let Some(w) = words(sql) else {
        return Ok(None);
    };
    let mut r = Reader::new(&w, true);
    if !r.eat(&["ALTER", "TABLE"]) {
        return Ok(None);
    }
    let if_exists = r.eat(&["IF", "EXISTS"]);
    r.eat(&["ONLY"]);
    let Some(table) = r.name() else {
        return Ok(None);
    };
    if !r.eat(&["ALTER"]) {
        return Ok(None);
    }
    r.eat(&["COLUMN"]);
    let Some(column) = r.ident() else {
        return Ok(None);
    };
    r.who = format!("identity column `{column}`");
    let change = if r.eat(&["DROP", "IDENTITY"]) {
        Change::Drop {
            if_exists: r.eat(&["IF", "EXISTS"]),
        }
    } else {
        let mut steps = Vec::new();
        while let Some(step) = r.step()? {
            steps.extend(step);
        }
        if !r.stepped {
            return Ok(None);
        }
        Change::Set(steps)
    };
    match r.peek() {
        None => Ok(Some((table, if_exists, column, change))),
        Some(Word::Other(t)) if t == "," => Err(SqlError::Unsupported(
            "an identity change with other ALTER TABLE actions; give each its own statement"
                .to_owned(),
        )),
        Some(_) => Err(SqlError::Parse(format!(
            "unexpected `{}` after the identity change of column `{column}`",
            r.rest()
        ))),
    }
}

/// `ALTER SEQUENCE [IF EXISTS] name` and its steps (`INCREMENT [BY] n`,
/// `START [WITH] n`, `[NO] MINVALUE`, `[NO] MAXVALUE`, `CACHE n`, `NO
/// CYCLE`, `RESTART [[WITH] n]`): (name, IF EXISTS, steps). `None` for
/// any other statement.
pub fn parse_sequence(sql: &str) -> Result<Option<(String, bool, Vec<Step>)>, SqlError> {
    let Some(w) = words(sql) else {
        return Ok(None);
    };
    let mut r = Reader::new(&w, false);
    if !r.eat(&["ALTER", "SEQUENCE"]) {
        return Ok(None);
    }
    let if_exists = r.eat(&["IF", "EXISTS"]);
    let Some(name) = r.name() else {
        return Err(SqlError::Parse(format!(
            "ALTER SEQUENCE needs a sequence name, not `{}`",
            r.rest()
        )));
    };
    r.who = format!("sequence `{name}`");
    let mut steps = Vec::new();
    while let Some(step) = r.step()? {
        steps.extend(step);
    }
    match r.peek() {
        None if r.stepped => Ok(Some((name, if_exists, steps))),
        _ => Err(SqlError::Unsupported(format!(
            "ALTER SEQUENCE {name} {}: Silt changes INCREMENT, START, MINVALUE, MAXVALUE, CACHE, NO CYCLE and RESTART (OWNED BY, RENAME, SET SCHEMA are not kept)",
            r.rest()
        ))),
    }
}

/// A token of the statement: a word (upper-cased unless quoted), a
/// number, or anything else as its text.
#[derive(Debug, Clone, PartialEq)]
enum Word {
    Keyword(String),
    Quoted(String),
    Number(String),
    Other(String),
}

/// The statement's tokens without whitespace; `None` if it is not
/// `ALTER ...` or does not tokenize (the parser then says why).
fn words(sql: &str) -> Option<Vec<Word>> {
    let first = sql.split_whitespace().next()?;
    if !first.eq_ignore_ascii_case("alter") {
        return None;
    }
    let tokens = Tokenizer::new(&GenericDialect {}, sql).tokenize().ok()?;
    Some(
        tokens
            .into_iter()
            .filter_map(|t| match t {
                Token::Whitespace(_) | Token::EOF | Token::SemiColon => None,
                Token::Word(w) if w.quote_style.is_none() => {
                    Some(Word::Keyword(w.value.to_ascii_uppercase()))
                }
                Token::Word(w) => Some(Word::Quoted(w.value)),
                Token::Number(n, _) => Some(Word::Number(n)),
                other => Some(Word::Other(other.to_string())),
            })
            .collect(),
    )
}

struct Reader<'a> {
    w: &'a [Word],
    at: usize,
    /// A step was read (`SET CACHE` and `SET NO CYCLE` change nothing).
    stepped: bool,
    /// What the steps change, as errors name it.
    who: String,
    /// Steps start with `SET` (an identity column's; a sequence's do not).
    set: bool,
}

impl<'a> Reader<'a> {
    /// A reader of `w` from its start; `set`: steps start with `SET`.
    fn new(w: &'a [Word], set: bool) -> Reader<'a> {
        Reader {
            w,
            at: 0,
            stepped: false,
            who: String::new(),
            set,
        }
    }

    fn peek(&self) -> Option<&Word> {
        self.w.get(self.at)
    }

    fn rest(&self) -> String {
        self.w[self.at..]
            .iter()
            .map(|w| match w {
                Word::Keyword(s) | Word::Quoted(s) | Word::Number(s) | Word::Other(s) => s.as_str(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Consume `words` (keywords) if they come next.
    fn eat(&mut self, words: &[&str]) -> bool {
        let matches = words
            .iter()
            .enumerate()
            .all(|(i, k)| matches!(self.w.get(self.at + i), Some(Word::Keyword(w)) if w == k));
        if matches {
            self.at += words.len();
        }
        matches
    }

    /// An identifier: a quoted one as written, else in lower case.
    fn ident(&mut self) -> Option<String> {
        let s = match self.peek()? {
            Word::Keyword(w) => w.to_ascii_lowercase(),
            Word::Quoted(w) => w.clone(),
            _ => return None,
        };
        self.at += 1;
        Some(s)
    }

    /// A table name, perhaps qualified: its last part.
    fn name(&mut self) -> Option<String> {
        let mut last = self.ident()?;
        while matches!(self.peek(), Some(Word::Other(p)) if p == ".") {
            self.at += 1;
            last = self.ident()?;
        }
        Some(last)
    }

    /// Consume `SET` (for an identity column's steps) and then `words`.
    fn eat_set(&mut self, words: &[&str]) -> bool {
        if !self.set {
            return self.eat(words);
        }
        let start = self.at;
        if self.eat(&["SET"]) && self.eat(words) {
            return true;
        }
        self.at = start;
        false
    }

    /// A signed integer.
    fn int(&mut self, what: &str) -> Result<i64, SqlError> {
        let sign = match self.peek() {
            Some(Word::Other(s)) if s == "-" || s == "+" => Some(s == "-"),
            _ => None,
        };
        if sign.is_some() {
            self.at += 1;
        }
        let negative = sign == Some(true);
        let bad = || SqlError::Invalid(format!("{}: {what} takes an integer", self.who));
        let Some(Word::Number(n)) = self.peek() else {
            return Err(bad());
        };
        let text = if negative { format!("-{n}") } else { n.clone() };
        self.at += 1;
        text.parse().map_err(|_| bad())
    }

    /// The next step (`Some(None)`: one that changes nothing), `None` at
    /// the end of the steps.
    fn step(&mut self) -> Result<Option<Option<Step>>, SqlError> {
        let step = if self.eat(&["RESTART"]) {
            self.eat(&["WITH"]);
            match self.peek() {
                Some(Word::Number(_)) => Some(Step::Restart(Some(self.int("RESTART")?))),
                Some(Word::Other(s)) if s == "-" || s == "+" => {
                    Some(Step::Restart(Some(self.int("RESTART")?)))
                }
                _ => Some(Step::Restart(None)),
            }
        } else if self.set && self.eat(&["SET", "GENERATED", "ALWAYS"]) {
            Some(Step::Generated(Identity::Always))
        } else if self.set && self.eat(&["SET", "GENERATED", "BY", "DEFAULT"]) {
            Some(Step::Generated(Identity::ByDefault))
        } else if self.eat_set(&["INCREMENT"]) {
            self.eat(&["BY"]);
            Some(Step::Increment(self.int("INCREMENT")?))
        } else if self.eat_set(&["START"]) {
            self.eat(&["WITH"]);
            Some(Step::Start(self.int("START")?))
        } else if self.eat_set(&["MINVALUE"]) {
            Some(Step::Min(Some(self.int("MINVALUE")?)))
        } else if self.eat_set(&["NO", "MINVALUE"]) {
            Some(Step::Min(None))
        } else if self.eat_set(&["MAXVALUE"]) {
            Some(Step::Max(Some(self.int("MAXVALUE")?)))
        } else if self.eat_set(&["NO", "MAXVALUE"]) {
            Some(Step::Max(None))
        } else if self.eat_set(&["CACHE"]) {
            // Silt reserves values in chunks of its own.
            if self.int("CACHE")? < 1 {
                return Err(SqlError::Invalid(format!(
                    "{}: CACHE must be at least 1",
                    self.who
                )));
            }
            None
        } else if self.eat_set(&["NO", "CYCLE"]) {
            None
        } else if self.eat_set(&["CYCLE"]) {
            return Err(SqlError::Unsupported(format!(
                "CYCLE on {}: a sequence that wraps hands out its values again; leave it out (NO CYCLE)",
                self.who
            )));
        } else {
            return Ok(None);
        };
        self.stepped = true;
        Ok(Some(step))
    }
}

/// PostgreSQL's words for a column that is not in the state a change needs.
fn state(column: &str, table: &str, what: &str) -> SqlError {
    SqlError::NotInPrerequisiteState(format!(
        "column \"{column}\" of relation \"{table}\" {what}"
    ))
}

/// Apply `change` to `column` of `ds`.
pub fn apply(alt: &mut Alteration<'_>, column: &str, change: &Change) -> Result<(), SqlError> {
    let ds = alt.dataset().clone();
    let def = alt.def();
    let table = ds.name().to_owned();
    let Some(ty) = def.field_type(column) else {
        return Err(SqlError::Invalid(format!(
            "table `{table}` has no column `{column}`"
        )));
    };
    let current = def
        .sequences
        .iter()
        .find(|(f, s)| f == column && s.identity.is_some())
        .map(|(_, s)| *s);
    match (change, current) {
        (Change::Add { .. }, Some(_)) => {
            Err(state(column, &table, "is already an identity column"))
        }
        (Change::Add { always, options }, None) => {
            let not_null = def
                .not_null
                .iter()
                .chain(&def.primary_key)
                .any(|f| f == column);
            if !not_null {
                return Err(state(
                    column,
                    &table,
                    "must be declared NOT NULL before identity can be added",
                ));
            }
            if def.defaults.iter().any(|(f, _)| f == column) {
                return Err(state(column, &table, "already has a default value"));
            }
            let generated = if *always {
                GeneratedAs::Always
            } else {
                GeneratedAs::ByDefault
            };
            let seq = super::column(column, ty, &generated, Some(options))?;
            let name = column.to_owned();
            alt.change(move |d| {
                d.defaults.push((name.clone(), FieldDefault::Sequence));
                d.sequences.retain(|(f, _)| *f != name);
                d.sequences.push((name, seq));
                Ok(())
            })?;
            // A new sequence: a counter a former identity of the column
            // left behind starts over.
            ds.set_sequence(column, seq.start, false)?;
            Ok(())
        }
        (Change::Drop { if_exists: true }, None) => Ok(()),
        (_, None) => Err(state(column, &table, "is not an identity column")),
        (Change::Drop { .. }, Some(_)) => {
            let name = column.to_owned();
            alt.change(move |d| {
                d.defaults
                    .retain(|(f, x)| !(*f == name && *x == FieldDefault::Sequence));
                d.sequences.retain(|(f, _)| *f != name);
                Ok(())
            })?;
            Ok(())
        }
        (Change::Set(steps), Some(old)) => {
            let seq = changed(column, old, steps)?;
            if seq != old {
                let name = column.to_owned();
                alt.change(move |d| {
                    for (f, s) in d.sequences.iter_mut() {
                        if *f == name {
                            *s = seq;
                        }
                    }
                    Ok(())
                })?;
            }
            if let Some(at) = restart(steps) {
                ds.set_sequence(column, at.unwrap_or(seq.start), false)?;
            }
            Ok(())
        }
    }
}

/// The last `RESTART` of the steps, if any: `Some(None)` restarts at the
/// sequence's start.
pub(crate) fn restart(steps: &[Step]) -> Option<Option<i64>> {
    steps.iter().rev().find_map(|s| match s {
        Step::Restart(at) => Some(*at),
        _ => None,
    })
}

/// `old` with the `SET` steps applied (a `RESTART` moves the counter, not
/// the options), checked as a new one would be.
pub(crate) fn changed(
    column: &str,
    old: SequenceDef,
    steps: &[Step],
) -> Result<SequenceDef, SqlError> {
    let mut s = old;
    for step in steps {
        match *step {
            Step::Generated(kind) => s.identity = Some(kind),
            Step::Increment(0) => {
                return Err(SqlError::Invalid(format!(
                    "identity column `{column}`: INCREMENT must not be zero"
                )));
            }
            Step::Increment(n) => s.increment = n,
            Step::Start(n) => s.start = n,
            Step::Min(m) => s.min = m.unwrap_or(SequenceDef::counting(s.increment).min),
            Step::Max(m) => s.max = m.unwrap_or(SequenceDef::counting(s.increment).max),
            Step::Restart(_) => {}
        }
    }
    s.validate(column)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(sql: &str) -> Vec<Step> {
        match parse(sql).unwrap().unwrap().3 {
            Change::Set(s) => s,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reads_the_forms_the_parser_does_not() {
        let (t, if_exists, c, change) =
            parse("ALTER TABLE IF EXISTS public.\"T\" ALTER COLUMN Id DROP IDENTITY IF EXISTS;")
                .unwrap()
                .unwrap();
        assert_eq!((t.as_str(), if_exists, c.as_str()), ("T", true, "id"));
        assert!(matches!(change, Change::Drop { if_exists: true }));
        assert_eq!(
            steps(
                "alter table t alter id set generated by default restart with -5 set increment by 2"
            ),
            vec![
                Step::Generated(Identity::ByDefault),
                Step::Restart(Some(-5)),
                Step::Increment(2),
            ]
        );
        assert_eq!(
            steps(
                "ALTER TABLE t ALTER id SET START 10 SET NO MAXVALUE SET MINVALUE 3 SET CACHE 20 RESTART"
            ),
            vec![
                Step::Start(10),
                Step::Max(None),
                Step::Min(Some(3)),
                Step::Restart(None),
            ]
        );
        assert_eq!(
            steps("ALTER TABLE t ALTER id SET GENERATED ALWAYS"),
            vec![Step::Generated(Identity::Always)]
        );
    }

    #[test]
    fn leaves_other_alters_to_the_parser() {
        for sql in [
            "ALTER TABLE t ALTER COLUMN id SET DEFAULT 5",
            "ALTER TABLE t ALTER COLUMN id SET NOT NULL",
            "ALTER TABLE t ADD COLUMN x int",
            "ALTER TABLE t ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY",
            "ALTER VIEW v RENAME TO w",
            "SELECT 1",
        ] {
            assert!(parse(sql).unwrap().is_none(), "{sql}");
        }
    }

    #[test]
    fn refuses_what_it_cannot_do() {
        let e = parse("ALTER TABLE t ALTER id SET CYCLE").unwrap_err();
        assert!(e.to_string().contains("CYCLE"), "{e}");
        let e = parse("ALTER TABLE t ALTER id RESTART, ALTER x DROP DEFAULT").unwrap_err();
        assert!(e.to_string().contains("its own statement"), "{e}");
        let e = parse("ALTER TABLE t ALTER id SET INCREMENT BY x").unwrap_err();
        assert!(e.to_string().contains("INCREMENT takes an integer"), "{e}");
        let e = parse("ALTER TABLE t ALTER id RESTART 5 junk").unwrap_err();
        assert!(e.to_string().contains("unexpected `JUNK`"), "{e}");
    }

    #[test]
    fn set_steps_change_the_options() {
        let old = SequenceDef {
            identity: Some(Identity::Always),
            ..SequenceDef::counting(1)
        };
        let s = changed(
            "id",
            old,
            &[
                Step::Generated(Identity::ByDefault),
                Step::Increment(-1),
                Step::Max(Some(100)),
                Step::Start(100),
            ],
        )
        .unwrap();
        assert_eq!(
            (s.identity, s.increment, s.max, s.start),
            (Some(Identity::ByDefault), -1, 100, 100)
        );
        assert!(changed("id", old, &[Step::Increment(0)]).is_err());
        assert!(
            changed("id", old, &[Step::Start(-3)]).is_err(),
            "START below MINVALUE"
        );
    }
}
