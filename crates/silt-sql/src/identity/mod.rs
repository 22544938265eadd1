//! SQL's identity columns, `GENERATED { ALWAYS | BY DEFAULT } AS IDENTITY
//! [( sequence options )]`: their options read into the catalog's
//! [`SequenceDef`] (`START WITH`, `INCREMENT BY`, `MINVALUE`, `MAXVALUE`,
//! with PostgreSQL's defaults), and PostgreSQL's rules for writing them.
//!
//! - `INSERT` refuses a value other than `DEFAULT` for a `GENERATED ALWAYS`
//!   column unless it says `OVERRIDING SYSTEM VALUE`; `OVERRIDING USER
//!   VALUE` puts the sequence's values in place of those given for any
//!   identity column.
//! - `UPDATE` may set a `GENERATED ALWAYS` column only to `DEFAULT`.
//! - `COPY` and the record API write the values they are given, as
//!   PostgreSQL's `COPY` does.
//!
//! The SQL parser does not know `OVERRIDING`: [`strip_overriding`] takes
//! the clause out of an `INSERT`'s text before it is parsed. It also reads
//! sequence options in one fixed order where PostgreSQL takes any:
//! [`order_options`] puts them in its order first.

use datafusion::sql::sqlparser::ast::{
    Expr as SqlExpr, GeneratedAs, SequenceOptions, UnaryOperator, Value as SqlValue,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use silt::{DatasetDef, FieldType, Identity, SequenceDef};

use crate::ddl::LineOffsets;
use crate::error::SqlError;

pub mod alter;

/// An `INSERT`'s `OVERRIDING ... VALUE` clause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overriding {
    /// `OVERRIDING SYSTEM VALUE`: values given for `GENERATED ALWAYS`
    /// columns are taken.
    System,
    /// `OVERRIDING USER VALUE`: values given for identity columns are
    /// replaced by the sequence's.
    User,
}

/// The sequence of identity column `column` of type `ty`, from its
/// `GENERATED ...` clause and options.
pub fn column(
    column: &str,
    ty: FieldType,
    generated_as: &GeneratedAs,
    options: Option<&[SequenceOptions]>,
) -> Result<SequenceDef, SqlError> {
    if ty != FieldType::Int {
        return Err(SqlError::Invalid(format!(
            "identity column `{column}` must be an integer type (smallint, integer or bigint), not {ty}"
        )));
    }
    let who = format!("identity column `{column}`");
    let mut def = sequence(&who, column, options.unwrap_or_default(), None)?;
    def.identity = Some(match generated_as {
        GeneratedAs::Always => Identity::Always,
        _ => Identity::ByDefault,
    });
    Ok(def)
}

/// The sequence `name` of `options` (`who` names it in errors), its
/// values bounded by integer type `bound` (`Some(i32::MAX)` for `AS
/// integer`) when no MINVALUE / MAXVALUE says otherwise.
pub fn sequence(
    who: &str,
    name: &str,
    options: &[SequenceOptions],
    bound: Option<i64>,
) -> Result<SequenceDef, SqlError> {
    let mut increment = 1;
    for o in options {
        if let SequenceOptions::IncrementBy(e, _) = o {
            increment = int_option(who, "INCREMENT", e)?;
        }
    }
    if increment == 0 {
        return Err(SqlError::Invalid(format!(
            "{who}: INCREMENT must not be zero"
        )));
    }
    let mut def = SequenceDef::counting(increment);
    if let Some(b) = bound {
        if increment > 0 {
            def.max = b;
        } else {
            def.min = -b - 1;
        }
    }
    let mut start = None;
    for o in options {
        match o {
            SequenceOptions::IncrementBy(..) => {}
            SequenceOptions::MinValue(Some(e)) => def.min = int_option(who, "MINVALUE", e)?,
            SequenceOptions::MaxValue(Some(e)) => def.max = int_option(who, "MAXVALUE", e)?,
            SequenceOptions::MinValue(None) | SequenceOptions::MaxValue(None) => {}
            SequenceOptions::StartWith(e, _) => start = Some(int_option(who, "START", e)?),
            // Silt reserves values in chunks of its own (see
            // `silt::dataset::sequence`): a cache size changes nothing.
            SequenceOptions::Cache(e) => {
                if int_option(who, "CACHE", e)? < 1 {
                    return Err(SqlError::Invalid(format!(
                        "{who}: CACHE must be at least 1"
                    )));
                }
            }
            // The parser's flag is "NO": `Cycle(true)` is `NO CYCLE`.
            SequenceOptions::Cycle(true) => {}
            SequenceOptions::Cycle(false) => {
                return Err(SqlError::Unsupported(format!(
                    "CYCLE on {who}: a sequence that wraps hands out its values again; leave it out (NO CYCLE)"
                )));
            }
        }
    }
    def.start = start.unwrap_or(if increment > 0 { def.min } else { def.max });
    def.validate(name)?;
    Ok(def)
}

/// An integer option (`START WITH -5`).
fn int_option(who: &str, what: &str, e: &SqlExpr) -> Result<i64, SqlError> {
    let bad = || SqlError::Invalid(format!("{who}: {what} takes an integer, not `{e}`"));
    match e {
        SqlExpr::Value(v) => match &v.value {
            SqlValue::Number(n, _) => n.parse().map_err(|_| bad()),
            _ => Err(bad()),
        },
        SqlExpr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => int_option(who, what, expr)?.checked_neg().ok_or_else(bad),
        SqlExpr::UnaryOp {
            op: UnaryOperator::Plus,
            expr,
        } => int_option(who, what, expr),
        _ => Err(bad()),
    }
}

/// The `GENERATED ALWAYS` identity columns of a table.
pub fn always(def: &DatasetDef) -> Vec<&str> {
    def.sequences
        .iter()
        .filter(|(_, s)| s.identity == Some(Identity::Always))
        .map(|(f, _)| f.as_str())
        .collect()
}

/// The identity columns of a table (either kind).
pub fn identities(def: &DatasetDef) -> Vec<&str> {
    def.sequences
        .iter()
        .filter(|(_, s)| s.identity.is_some())
        .map(|(f, _)| f.as_str())
        .collect()
}

/// `INSERT` text without its `OVERRIDING { SYSTEM | USER } VALUE` clause,
/// and the clause; `None` when the text has none.
pub fn strip_overriding(sql: &str) -> Option<(String, Overriding)> {
    // Every INSERT comes here: tokenize only a text that may hold it.
    if !contains_word(sql, "overriding") {
        return None;
    }
    let tokens = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize_with_location()
        .ok()?;
    let words: Vec<(usize, String)> = tokens
        .iter()
        .enumerate()
        .filter_map(|(i, t)| match &t.token {
            Token::Word(w) if w.quote_style.is_none() => Some((i, w.value.to_ascii_uppercase())),
            Token::Whitespace(_) => None,
            _ => Some((i, String::new())),
        })
        .collect();
    let at = words.windows(3).find(|w| {
        w[0].1 == "OVERRIDING" && (w[1].1 == "SYSTEM" || w[1].1 == "USER") && w[2].1 == "VALUE"
    })?;
    let which = if at[1].1 == "SYSTEM" {
        Overriding::System
    } else {
        Overriding::User
    };
    let offsets = LineOffsets::new(sql);
    let (first, last) = (&tokens[at[0].0].span, &tokens[at[2].0].span);
    let start = offsets.byte(sql, first.start.line, first.start.column);
    let end = offsets.byte(sql, last.end.line, last.end.column);
    let text = format!("{} {}", sql.get(..start)?, sql.get(end..)?);
    Some((text, which))
}

/// Whether `sql` holds `word` (ASCII, any case) anywhere: a cheap test
/// before tokenizing.
fn contains_word(sql: &str, word: &str) -> bool {
    sql.as_bytes()
        .windows(word.len())
        .any(|w| w.eq_ignore_ascii_case(word.as_bytes()))
}

/// The rank of a sequence option in the parser's order, by its first
/// word(s); `None` for a word that does not start an option.
fn option_rank(word: &str, next: &str) -> Option<u8> {
    Some(match (word, next) {
        ("INCREMENT", _) => 0,
        ("MINVALUE", _) | ("NO", "MINVALUE") => 1,
        ("MAXVALUE", _) | ("NO", "MAXVALUE") => 2,
        ("START", _) => 3,
        ("CACHE", _) => 4,
        ("CYCLE", _) | ("NO", "CYCLE") => 5,
        _ => return None,
    })
}

/// DDL text with sequence options in the order the parser reads them
/// (`START WITH 10 INCREMENT BY 5` becomes `INCREMENT BY 5 START WITH
/// 10`), those of each `AS IDENTITY ( ... )` and of a `CREATE SEQUENCE`;
/// `None` when nothing moves. Options it does not know are left where they
/// are (the parser then names them).
pub fn order_options(sql: &str) -> Option<String> {
    let sequence = {
        let mut w = sql.split_whitespace().map(str::to_ascii_uppercase);
        w.next().as_deref() == Some("CREATE")
            && match w.next().as_deref() {
                Some("SEQUENCE") => true,
                Some("TEMP" | "TEMPORARY") => w.next().as_deref() == Some("SEQUENCE"),
                _ => false,
            }
    };
    if !sequence && !contains_word(sql, "identity") {
        return None;
    }
    let tokens = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize_with_location()
        .ok()?;
    let offsets = LineOffsets::new(sql);
    let at = |i: usize| {
        let p = &tokens[i].span.start;
        offsets.byte(sql, p.line, p.column)
    };
    // Meaningful tokens: (index, upper-case word or "" for other tokens).
    let words: Vec<(usize, String)> = tokens
        .iter()
        .enumerate()
        .filter_map(|(i, t)| match &t.token {
            Token::Whitespace(_) | Token::EOF => None,
            Token::Word(w) if w.quote_style.is_none() => Some((i, w.value.to_ascii_uppercase())),
            Token::LParen => Some((i, "(".to_owned())),
            Token::RParen => Some((i, ")".to_owned())),
            Token::SemiColon => Some((i, ";".to_owned())),
            _ => Some((i, String::new())),
        })
        .collect();
    // The option lists: (first option, the token after the last).
    let mut lists: Vec<(usize, usize)> = Vec::new();
    if sequence {
        let first = (1..words.len()).find(|&k| {
            let next = words.get(k + 1).map_or("", |n| n.1.as_str());
            words[k - 1].1 != "SEQUENCE" && option_rank(&words[k].1, next).is_some()
        });
        if let Some(first) = first {
            let end = (first..words.len())
                .find(|&k| matches!(words[k].1.as_str(), "OWNED" | ";"))
                .unwrap_or(words.len());
            lists.push((first, end));
        }
    }
    for w in 0..words.len() {
        if words[w].1 != "IDENTITY" || words.get(w + 1).is_none_or(|n| n.1 != "(") {
            continue;
        }
        let open = w + 1;
        let close = (open + 1..words.len()).find(|&k| words[k].1 == ")")?;
        lists.push((open + 1, close));
    }
    let text_at = |k: usize| {
        if k < words.len() {
            at(words[k].0)
        } else {
            sql.len()
        }
    };
    let mut out = String::new();
    let mut copied = 0;
    let mut moved = false;
    for (first, end) in lists {
        // Options: (rank, first token).
        let mut starts: Vec<(u8, usize)> = Vec::new();
        for k in first..end {
            let next = words.get(k + 1).map_or("", |n| n.1.as_str());
            let prev = words[k - 1].1.as_str();
            if prev == "NO" {
                continue;
            }
            if let Some(r) = option_rank(&words[k].1, next) {
                starts.push((r, k));
            }
        }
        if starts.first().is_none_or(|s| s.1 != first) {
            continue;
        }
        let mut clauses: Vec<(u8, &str)> = starts
            .iter()
            .enumerate()
            .map(|(c, &(r, k))| {
                let stop = starts.get(c + 1).map_or(end, |s| s.1);
                (r, sql.get(text_at(k)..text_at(stop)).unwrap_or("").trim())
            })
            .collect();
        if clauses.windows(2).all(|p| p[0].0 <= p[1].0) {
            continue;
        }
        clauses.sort_by_key(|c| c.0);
        let body = clauses.iter().map(|c| c.1).collect::<Vec<_>>().join(" ");
        let (from, to) = (text_at(first), text_at(end));
        out.push_str(sql.get(copied..from)?);
        out.push_str(&body);
        if sql[to..].starts_with(|c: char| c.is_alphanumeric()) {
            out.push(' ');
        }
        copied = to;
        moved = true;
    }
    if !moved {
        return None;
    }
    out.push_str(sql.get(copied..)?);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overriding_clause_is_taken_out() {
        let (t, o) =
            strip_overriding("INSERT INTO t (id, v) OVERRIDING SYSTEM VALUE VALUES (1, 'x')")
                .unwrap();
        assert_eq!(o, Overriding::System);
        assert_eq!(t, "INSERT INTO t (id, v)   VALUES (1, 'x')");
        let (t, o) = strip_overriding("insert into t\noverriding user value\nselect 1").unwrap();
        assert_eq!(o, Overriding::User);
        assert_eq!(t, "insert into t\n \nselect 1");
        // In a string or as a quoted name it is not the clause.
        assert!(strip_overriding("INSERT INTO t VALUES ('OVERRIDING SYSTEM VALUE')").is_none());
        assert!(strip_overriding("INSERT INTO t VALUES (1)").is_none());
    }

    #[test]
    fn sequence_options_are_put_in_the_parsers_order() {
        assert_eq!(
            order_options("create sequence s start with 10 increment by -2 minvalue 0;").as_deref(),
            Some("create sequence s increment by -2 minvalue 0 start with 10;")
        );
        assert_eq!(
            order_options("CREATE SEQUENCE s AS integer CACHE 5 START 3 OWNED BY NONE").as_deref(),
            Some("CREATE SEQUENCE s AS integer START 3 CACHE 5 OWNED BY NONE")
        );
        // A sequence named like an option, options in order: unchanged.
        assert!(order_options("CREATE SEQUENCE start INCREMENT 1 START 1").is_none());
    }

    #[test]
    fn identity_options_are_put_in_the_parsers_order() {
        let sql = "CREATE TABLE t (id int GENERATED ALWAYS AS IDENTITY (START WITH 10 NO CYCLE INCREMENT BY -5 NO MAXVALUE) PRIMARY KEY, b int GENERATED BY DEFAULT AS IDENTITY (cache 5 minvalue 2))";
        assert_eq!(
            order_options(sql).unwrap(),
            "CREATE TABLE t (id int GENERATED ALWAYS AS IDENTITY (INCREMENT BY -5 NO MAXVALUE START WITH 10 NO CYCLE) PRIMARY KEY, b int GENERATED BY DEFAULT AS IDENTITY (minvalue 2 cache 5))"
        );
        // Already in order, or no options: nothing to do.
        assert!(
            order_options(
                "CREATE TABLE t (id int GENERATED ALWAYS AS IDENTITY (INCREMENT 2 START 3))"
            )
            .is_none()
        );
        assert!(
            order_options("CREATE TABLE t (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY)")
                .is_none()
        );
    }
}
