//! Reading a statement's SQL for its parameters and equi-joins: a scan of
//! its words, not a parser (the workload's SQL is written to be read so).

use super::Statement;

impl Statement {
    /// The highest `$n` the SQL names (its parameter count).
    pub fn placeholders(&self) -> usize {
        tokens(self.sql)
            .iter()
            .filter_map(|t| t.strip_prefix('$')?.parse::<usize>().ok())
            .max()
            .unwrap_or(0)
    }

    /// The statement's equi-join conditions, `(left table, left column,
    /// right table, right column)` in the order written, found by a scan
    /// of the SQL's words, not a parser:
    ///
    /// 1. every `FROM` list item and `JOIN` names a table, then an alias
    ///    (`t a`, `t AS a`, or none: the table's own name); a parenthesized
    ///    subquery followed by an alias stands for the first table of its
    ///    `FROM` (the newest orders are orders);
    /// 2. every `a.x = b.y` between two qualified columns, in `ON` or
    ///    `WHERE` alike, is a condition, its aliases resolved by step 1.
    ///
    /// So the statements write every join column qualified and aliases are
    /// unique within a statement. Conditions under an `OR` are reported
    /// like the others (getRelated gives five, one per related item); an
    /// alias step 1 did not see drops its condition.
    pub fn joins(&self) -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
        let t = tokens(self.sql);
        let aliases = aliases(&t);
        let table = |a: &str| table_of(&aliases, a);
        let plain = |w: Option<&&str>| !matches!(w, Some(&("." | "+" | "-" | "*" | "/" | "||")));
        let mut out = Vec::new();
        for i in 0..t.len().saturating_sub(6) {
            if let &[a, ".", x, "=", b, ".", y] = &t[i..i + 7]
                && plain(i.checked_sub(1).and_then(|p| t.get(p)))
                && plain(t.get(i + 7))
                && let (Some(l), Some(r)) = (table(a), table(b))
            {
                out.push((l, x, r, y));
            }
        }
        out
    }

    /// The columns the statement compares with a parameter (`a.x = $1`,
    /// `x >= $2`, `x LIKE $3`): `(table, column)`, an unqualified column
    /// taken as the first `FROM` table's. They are the attributes a view
    /// index serves (the view-index step of §4.5).
    pub fn filters(&self) -> Vec<(&'static str, &'static str)> {
        let t = tokens(self.sql);
        let aliases = aliases(&t);
        let first = aliases.first().map(|(_, t)| *t);
        let compares = |w: &str| {
            matches!(w, "=" | "<" | ">" | "<=" | ">=" | "<>" | "!=")
                || w.eq_ignore_ascii_case("like")
        };
        let mut out = Vec::new();
        for (i, w) in t.iter().enumerate() {
            if !w.starts_with('$') || i < 2 || !compares(t[i - 1]) {
                continue;
            }
            let col = t[i - 2];
            let found = if i >= 4 && t[i - 3] == "." {
                table_of(&aliases, t[i - 4]).map(|tb| (tb, col))
            } else {
                first.map(|tb| (tb, col))
            };
            if let Some(f) = found
                && is_name(col)
                && !out.contains(&f)
            {
                out.push(f);
            }
        }
        out
    }
}

/// The statement's table references, `(alias, table)` (see
/// [`Statement::joins`] step 1).
fn aliases(t: &[&'static str]) -> Vec<(&'static str, &'static str)> {
    let mut aliases = Vec::new();
    for (i, w) in t.iter().enumerate() {
        let from = w.eq_ignore_ascii_case("from");
        if !from && !w.eq_ignore_ascii_case("join") {
            continue;
        }
        let mut at = i + 1;
        while let Some((table, alias, next)) = table_ref(t, at) {
            aliases.push((alias, table));
            match t.get(next) {
                Some(&",") if from => at = next + 1,
                _ => break,
            }
        }
    }
    aliases
}

fn table_of(aliases: &[(&'static str, &'static str)], a: &str) -> Option<&'static str> {
    aliases
        .iter()
        .find(|(al, _)| al.eq_ignore_ascii_case(a))
        .map(|(_, t)| *t)
}

/// The table reference at `t[i]`: `(table, alias, index after it)`.
fn table_ref<'a>(t: &[&'a str], i: usize) -> Option<(&'a str, &'a str, usize)> {
    let (table, mut j) = if t.get(i) == Some(&"(") {
        let mut depth = 0usize;
        let close = (i..t.len()).find(|&k| {
            match t[k] {
                "(" => depth += 1,
                ")" => depth -= 1,
                _ => {}
            }
            depth == 0
        })?;
        let inner = &t[i + 1..close];
        let from = inner.iter().position(|w| w.eq_ignore_ascii_case("from"))?;
        (*inner.get(from + 1).filter(|w| is_name(w))?, close + 1)
    } else {
        (*t.get(i).filter(|w| is_name(w))?, i + 1)
    };
    if t.get(j).is_some_and(|w| w.eq_ignore_ascii_case("as")) {
        j += 1;
    }
    match t.get(j) {
        Some(w) if is_name(w) => Some((table, w, j + 1)),
        _ => Some((table, table, j)),
    }
}

/// Words that end a table reference instead of naming an alias.
const KEYWORDS: [&str; 19] = [
    "where", "join", "on", "inner", "left", "right", "full", "outer", "cross", "group", "order",
    "limit", "as", "set", "values", "having", "union", "offset", "using",
];

fn is_name(w: &str) -> bool {
    w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && !KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(w))
}

/// The SQL's words as slices of it: names and keywords, `$n`, numbers, a
/// quoted string as one word, `<>` `<=` `>=` `!=` `||`, and any other
/// character alone.
fn tokens(sql: &str) -> Vec<&str> {
    let b = sql.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let (mut out, mut i) = (Vec::new(), 0);
    while i < b.len() {
        let start = i;
        if b[i].is_ascii_whitespace() {
            i += 1;
            continue;
        } else if word(b[i]) || b[i] == b'$' {
            i += 1;
            while i < b.len() && word(b[i]) {
                i += 1;
            }
        } else if b[i] == b'\'' {
            // To the closing quote (an unclosed one runs to the end).
            let close = b[i + 1..].iter().position(|&c| c == b'\'');
            i = close.map_or(b.len(), |p| i + p + 2);
        } else if matches!(b.get(i..i + 2), Some(b"<>" | b"<=" | b">=" | b"!=" | b"||")) {
            i += 2;
        } else {
            i += sql[i..].chars().next().map_or(1, char::len_utf8);
        }
        out.push(&sql[start..i]);
    }
    out
}
