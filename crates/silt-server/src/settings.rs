//! Session settings the server keeps itself, and the settings no client
//! may change.
//!
//! - `statement_timeout`, as in PostgreSQL: `SET statement_timeout = '5s'`
//!   (also `TO`, `SESSION`, `LOCAL`; units `us`, `ms`, `s`, `min`, `h`,
//!   `d`; a bare number, quoted or not, is milliseconds; `0` turns the
//!   session's own limit off), `SHOW statement_timeout`, `RESET
//!   statement_timeout` / `SET statement_timeout TO DEFAULT` / `RESET
//!   ALL` (back to the server's default). The server's `--timeout` stays
//!   a ceiling (see [`crate::limits::Budget::statement_timeout`]).
//! - `SET datafusion.runtime.*` (memory limit, spill directory) would
//!   replace the server's limits for every session: refused (42501), as is
//!   a `datafusion.execution.batch_size` over 65536 (its batches are
//!   what the memory limits do not count).

use std::time::Duration;

use parking_lot::Mutex;

use crate::error::QueryError;

/// The largest `datafusion.execution.batch_size` a client may set.
pub const MAX_BATCH_SIZE: u64 = 65536;

/// What a session has set.
#[derive(Debug, Default)]
pub struct Settings {
    statement_timeout: Mutex<Option<Duration>>,
}

/// A statement about a setting the server keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Setting {
    /// `SET statement_timeout ...` (`None`: back to the default).
    SetTimeout(Option<Duration>),
    /// `SHOW statement_timeout`.
    ShowTimeout,
    /// `RESET ALL`: every setting back to its default (DataFusion's are
    /// not touched: they are not per session).
    ResetAll,
}

impl Settings {
    /// The session's `statement_timeout` (`None`: the server's default).
    pub fn statement_timeout(&self) -> Option<Duration> {
        *self.statement_timeout.lock()
    }

    /// Apply `SET` / `RESET`.
    pub fn apply(&self, s: &Setting) {
        match s {
            Setting::SetTimeout(t) => *self.statement_timeout.lock() = *t,
            Setting::ResetAll => *self.statement_timeout.lock() = None,
            Setting::ShowTimeout => {}
        }
    }
}

/// The words of a `SET` / `SHOW` / `RESET` statement: identifiers and
/// quoted values, `=` dropped, lower-cased outside quotes.
fn tokens(sql: &str) -> Result<Vec<String>, QueryError> {
    let s = sql.trim().trim_end_matches(';').trim();
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() || c == '=' {
            chars.next();
        } else if c == '\'' || c == '"' {
            chars.next();
            let mut v = String::new();
            loop {
                match chars.next() {
                    Some(q) if q == c => {
                        if chars.peek() == Some(&c) {
                            v.push(c);
                            chars.next();
                        } else {
                            break;
                        }
                    }
                    Some(x) => v.push(x),
                    None => {
                        return Err(QueryError::Sql(silt_sql::SqlError::Parse(
                            "unterminated quoted value".to_owned(),
                        )));
                    }
                }
            }
            // Mark quoted values so that `'DEFAULT'` stays a value.
            out.push(format!("'{v}"));
        } else {
            let mut w = String::new();
            while let Some(&x) = chars.peek() {
                if x.is_whitespace() || x == '=' || x == '\'' || x == '"' {
                    break;
                }
                w.push(x.to_ascii_lowercase());
                chars.next();
            }
            out.push(w);
        }
    }
    Ok(out)
}

fn unquote(t: &str) -> &str {
    t.strip_prefix('\'').unwrap_or(t)
}

/// Parse a PostgreSQL duration: a number with an optional unit (`us`,
/// `ms`, `s`, `min`, `h`, `d`; none: milliseconds).
pub fn parse_pg_duration(v: &str) -> Option<Duration> {
    let t = v.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().ok()?;
    let ms = match unit.trim() {
        "" | "ms" => n,
        "us" => n / 1000.0,
        "s" | "sec" | "secs" => n * 1000.0,
        "min" | "mins" => n * 60_000.0,
        "h" => n * 3_600_000.0,
        "d" => n * 86_400_000.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(ms / 1000.0).ok()
}

/// A duration as PostgreSQL shows a setting: `0`, `500ms`, `5s`, `2min`,
/// `1h`.
pub fn show_pg_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        "0".to_owned()
    } else if !ms.is_multiple_of(1000) {
        format!("{ms}ms")
    } else if !ms.is_multiple_of(60_000) {
        format!("{}s", ms / 1000)
    } else if !ms.is_multiple_of(3_600_000) {
        format!("{}min", ms / 60_000)
    } else {
        format!("{}h", ms / 3_600_000)
    }
}

fn bad_value(name: &str, v: &str) -> QueryError {
    QueryError::Sql(silt_sql::SqlError::Invalid(format!(
        "invalid value for parameter \"{name}\": \"{v}\" (a duration such as '5s', '500ms', '2min', or a number of milliseconds; 0 for none)"
    )))
}

/// The server-kept setting `sql` is about, if it is one; `Err` for a
/// malformed one, or one no client may change.
pub fn parse(sql: &str) -> Result<Option<Setting>, QueryError> {
    let t = tokens(sql)?;
    let w: Vec<&str> = t.iter().map(String::as_str).collect();
    let (verb, rest) = match w.split_first() {
        Some((v, rest)) => (*v, rest),
        None => return Ok(None),
    };
    let rest = match rest {
        ["session" | "local", r @ ..] => r,
        r => r,
    };
    match (verb, rest) {
        ("show", ["statement_timeout"]) => Ok(Some(Setting::ShowTimeout)),
        ("reset", ["statement_timeout"]) => Ok(Some(Setting::SetTimeout(None))),
        ("reset", ["all"]) => Ok(Some(Setting::ResetAll)),
        ("set", ["statement_timeout", "to", v] | ["statement_timeout", v]) => {
            if *v == "default" {
                return Ok(Some(Setting::SetTimeout(None)));
            }
            let raw = unquote(v);
            parse_pg_duration(raw)
                .map(|d| Some(Setting::SetTimeout(Some(d))))
                .ok_or_else(|| bad_value("statement_timeout", raw))
        }
        ("set", [name, ..]) | ("reset", [name]) if name.starts_with("datafusion.runtime.") => {
            Err(QueryError::Forbidden(format!(
                "`{name}` is a server setting and cannot be changed by a session: the server's memory limits are --max-query-memory and --max-server-memory"
            )))
        }
        (
            "set",
            ["datafusion.execution.batch_size", "to", v] | ["datafusion.execution.batch_size", v],
        ) => match unquote(v).parse::<u64>() {
            Ok(n) if n > MAX_BATCH_SIZE => Err(QueryError::Forbidden(format!(
                "datafusion.execution.batch_size = {n} is over the most a session may set ({MAX_BATCH_SIZE})"
            ))),
            _ => Ok(None),
        },
        _ => Ok(None),
    }
}

/// Refuse the statements of `sql` that set what no client may change
/// (for front ends that do not keep session settings, e.g. HTTP).
pub fn check_script(sql: &str) -> Result<(), QueryError> {
    let segs = silt_sql::ddl::split(sql).map_err(QueryError::Sql)?;
    for seg in segs {
        let first = seg
            .text
            .split(|c: char| c.is_whitespace() || c == ';')
            .find(|w| !w.is_empty())
            .unwrap_or("");
        if first.eq_ignore_ascii_case("set") || first.eq_ignore_ascii_case("reset") {
            parse(&seg.text)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn statement_timeout_statements() {
        let set = |s: &str| parse(s).unwrap();
        assert_eq!(
            set("SET statement_timeout = '5s'"),
            Some(Setting::SetTimeout(Some(ms(5000))))
        );
        assert_eq!(
            set("set statement_timeout to 500;"),
            Some(Setting::SetTimeout(Some(ms(500))))
        );
        assert_eq!(
            set("SET SESSION statement_timeout = '250ms'"),
            Some(Setting::SetTimeout(Some(ms(250))))
        );
        assert_eq!(
            set("SET statement_timeout = '1min'"),
            Some(Setting::SetTimeout(Some(ms(60_000))))
        );
        assert_eq!(
            set("SET statement_timeout = 0"),
            Some(Setting::SetTimeout(Some(ms(0))))
        );
        assert_eq!(
            set("SET statement_timeout TO DEFAULT"),
            Some(Setting::SetTimeout(None))
        );
        assert_eq!(
            set("RESET statement_timeout"),
            Some(Setting::SetTimeout(None))
        );
        assert_eq!(set("RESET ALL"), Some(Setting::ResetAll));
        assert_eq!(set("SHOW statement_timeout"), Some(Setting::ShowTimeout));
        assert_eq!(set("SET search_path = public"), None);
        assert_eq!(set("SET datafusion.execution.batch_size = 1024"), None);
        assert!(parse("SET statement_timeout = 'soon'").is_err());
        assert!(parse("SET datafusion.runtime.memory_limit = '100G'").is_err());
        assert!(parse("SET datafusion.execution.batch_size = 100000000").is_err());
        assert!(check_script("SELECT 1; SET datafusion.runtime.temp_directory = '/'").is_err());
        assert!(check_script("SELECT 'SET datafusion.runtime.x'").is_ok());
    }

    #[test]
    fn durations_show_as_postgres_does() {
        assert_eq!(show_pg_duration(ms(0)), "0");
        assert_eq!(show_pg_duration(ms(500)), "500ms");
        assert_eq!(show_pg_duration(ms(5000)), "5s");
        assert_eq!(show_pg_duration(ms(120_000)), "2min");
        assert_eq!(show_pg_duration(ms(7_200_000)), "2h");
        assert_eq!(parse_pg_duration("1.5s"), Some(ms(1500)));
        assert_eq!(parse_pg_duration("-1"), None);
    }
}
