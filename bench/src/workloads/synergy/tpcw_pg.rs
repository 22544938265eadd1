//! The TPC-W data set and Synergy's views as PostgreSQL 15 has them:
//! tables from `silt::workload::tpcw::schema()`, the records as COPY text,
//! each Synergy view as a `CREATE MATERIALIZED VIEW` or as a table kept by
//! row triggers, and a read rewritten to the views Silt's rewrite chose
//! for it (PostgreSQL reads a view only when the query names it).

use std::fmt::Write as _;

use anyhow::{Result, anyhow, bail};
use silt::schema::{DatasetDef, FkAction, ViewColumn};
use silt::value::temporal;
use silt::{FieldType, Value};

/// A Synergy view: its path of relations (root first), how each joins the
/// one before it, and its columns.
pub(super) struct ViewSpec {
    pub name: String,
    pub relations: Vec<String>,
    /// `edges[i]`: the field of `relations[i + 1]` that holds the key of
    /// `relations[i]`.
    pub edges: Vec<String>,
    /// Each relation's (one-column) primary key, in `relations` order.
    pub keys: Vec<String>,
    pub columns: Vec<ViewColumn>,
    /// The view columns the design indexed (its view indexes).
    pub indexed: Vec<String>,
}

impl ViewSpec {
    fn column(&self, relation: &str, field: &str) -> Option<&str> {
        self.columns
            .iter()
            .find(|c| c.relation == relation && c.field == field)
            .map(|c| c.name.as_str())
    }

    /// The view's defining query, every relation under its own name.
    pub fn select(&self) -> String {
        let cols: Vec<String> = self
            .columns
            .iter()
            .map(|c| format!("{}.{} AS {}", c.relation, c.field, c.name))
            .collect();
        let mut sql = format!("SELECT {} FROM {}", cols.join(", "), self.relations[0]);
        for (i, field) in self.edges.iter().enumerate() {
            let (parent, child) = (&self.relations[i], &self.relations[i + 1]);
            let _ = write!(
                sql,
                " JOIN {child} ON {child}.{field} = {parent}.{}",
                self.keys[i]
            );
        }
        sql
    }

    /// Indexes on the view (PostgreSQL's own, so its reads find rows as
    /// Silt's keyed view and view indexes do): every relation's key and
    /// the design's view indexes.
    fn indexes(&self) -> Vec<String> {
        let mut cols: Vec<&str> = self
            .relations
            .iter()
            .zip(&self.keys)
            .filter_map(|(r, k)| self.column(r, k))
            .collect();
        for c in &self.indexed {
            if !cols.contains(&c.as_str()) {
                cols.push(c);
            }
        }
        cols.iter()
            .enumerate()
            .map(|(i, c)| format!("CREATE INDEX {}_i{i} ON {} ({c})", self.name, self.name))
            .collect()
    }

    /// The view as `CREATE MATERIALIZED VIEW` and its indexes.
    pub fn matview_sql(&self) -> Vec<String> {
        let mut out = vec![format!(
            "CREATE MATERIALIZED VIEW {} AS {}",
            self.name,
            self.select()
        )];
        out.extend(self.indexes());
        out
    }

    /// The view as a table and, for each relation of its path, a row
    /// trigger that replaces the view rows the written row is part of
    /// (those holding its key) with the join's rows for its new version.
    /// `i` numbers the view, for the functions' names.
    pub fn trigger_sql(&self, i: usize) -> Vec<String> {
        let mut out = vec![format!("CREATE TABLE {} AS {}", self.name, self.select())];
        out.extend(self.indexes());
        let select = self.select();
        for (r, key) in self.relations.iter().zip(&self.keys) {
            let col = self.column(r, key).unwrap_or(key);
            let f = format!("keep_v{i}_{r}");
            out.push(format!(
                "CREATE FUNCTION {f}() RETURNS trigger AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN DELETE FROM {v} WHERE {col} = OLD.{key}; END IF;
  IF TG_OP <> 'DELETE' THEN INSERT INTO {v} {select} WHERE {r}.{key} = NEW.{key}; END IF;
  RETURN NULL;
END $$ LANGUAGE plpgsql",
                v = self.name
            ));
            out.push(format!(
                "CREATE TRIGGER {f} AFTER INSERT OR UPDATE OR DELETE ON {r} \
                 FOR EACH ROW EXECUTE FUNCTION {f}()"
            ));
        }
        out
    }
}

fn pg_type(t: &FieldType) -> &'static str {
    match t {
        FieldType::Int => "bigint",
        FieldType::Double => "double precision",
        FieldType::Date => "date",
        FieldType::Timestamp => "timestamp",
        _ => "text",
    }
}

/// `CREATE TABLE`s for the TPC-W schema: the same columns, keys and
/// foreign keys (RESTRICT / CASCADE as Silt's).
pub(super) fn tables(defs: &[DatasetDef]) -> Vec<String> {
    defs.iter()
        .map(|d| {
            let mut cols: Vec<String> = d
                .fields
                .iter()
                .map(|(f, t)| format!("{f} {}", pg_type(t)))
                .collect();
            cols.push(format!("PRIMARY KEY ({})", d.primary_key.join(", ")));
            for fk in &d.foreign_keys {
                let action = match fk.on_delete {
                    FkAction::Cascade => "CASCADE",
                    _ => "RESTRICT",
                };
                cols.push(format!(
                    "FOREIGN KEY ({}) REFERENCES {} ON DELETE {action}",
                    fk.fields.join(", "),
                    fk.parent
                ));
            }
            format!("CREATE TABLE {} ({})", d.name, cols.join(", "))
        })
        .collect()
}

/// The baseline's secondary indexes, as a DBA would make them for this
/// workload: one on each foreign key's column (`true`: Silt makes these
/// itself, PostgreSQL does not) and one on each column a statement
/// compares with a parameter, the keys aside. `(table, column, is_fk)`.
pub(super) fn index_columns(
    defs: &[DatasetDef],
    filters: &[(&str, &str)],
) -> Vec<(String, String, bool)> {
    let mut cols: Vec<(String, String, bool)> = Vec::new();
    for d in defs {
        for fk in &d.foreign_keys {
            cols.push((d.name.clone(), fk.fields.join(", "), true));
        }
    }
    for (t, c) in filters {
        let keyed = defs
            .iter()
            .any(|d| d.name == *t && d.primary_key.first().is_some_and(|k| k == c));
        if !keyed && !cols.iter().any(|(a, b, _)| a == t && b == c) {
            cols.push(((*t).to_owned(), (*c).to_owned(), false));
        }
    }
    cols
}

/// [`index_columns`] as PostgreSQL's `CREATE INDEX`es.
pub(super) fn indexes(defs: &[DatasetDef], filters: &[(&str, &str)]) -> Vec<String> {
    index_columns(defs, filters)
        .iter()
        .enumerate()
        .map(|(i, (t, c, _))| format!("CREATE INDEX {t}_x{i} ON {t} ({c})"))
        .collect()
}

/// One record as a line of COPY text, its fields in `def`'s order.
pub(super) fn copy_line(def: &DatasetDef, rec: &Value, out: &mut Vec<u8>) {
    for (i, (f, t)) in def.fields.iter().enumerate() {
        if i > 0 {
            out.push(b'\t');
        }
        let cell = match (rec.get(f), t) {
            (None | Some(Value::Null), _) => None,
            (Some(Value::Int(d)), FieldType::Date) => temporal::format_date(*d),
            (Some(Value::Int(us)), FieldType::Timestamp) => temporal::format_timestamp(*us, false),
            (Some(Value::Int(n)), _) => Some(n.to_string()),
            (Some(Value::Double(x)), _) => Some(format!("{x:?}")),
            (Some(Value::String(s)), _) => Some(s.clone()),
            (Some(other), _) => Some(format!("{other:?}")),
        };
        match cell {
            None => out.extend_from_slice(b"\\N"),
            Some(s) => {
                for ch in s.chars() {
                    match ch {
                        '\\' => out.extend_from_slice(b"\\\\"),
                        '\t' => out.extend_from_slice(b"\\t"),
                        '\n' => out.extend_from_slice(b"\\n"),
                        '\r' => out.extend_from_slice(b"\\r"),
                        c => {
                            let mut b = [0u8; 4];
                            out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
                        }
                    }
                }
            }
        }
    }
    out.push(b'\n');
}

/// SQL words: names (with `$n`), quoted strings, two-character
/// comparisons, and single punctuation.
fn tokens(sql: &str) -> Vec<String> {
    let c: Vec<char> = sql.chars().collect();
    let word = |ch: char| ch.is_alphanumeric() || ch == '_' || ch == '$';
    let (mut out, mut i) = (Vec::new(), 0);
    while i < c.len() {
        let start = i;
        if c[i].is_whitespace() {
            i += 1;
            continue;
        } else if c[i] == '\'' {
            i += 1;
            while i < c.len() {
                if c[i] == '\'' {
                    if c.get(i + 1) == Some(&'\'') {
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                i += 1;
            }
        } else if word(c[i]) {
            while i < c.len() && word(c[i]) {
                i += 1;
            }
        } else if i + 1 < c.len()
            && ["<>", "<=", ">=", "!=", "||"].contains(&&*c[i..i + 2].iter().collect::<String>())
        {
            i += 2;
        } else {
            i += 1;
        }
        out.push(c[start..i].iter().collect());
    }
    out
}

fn untokens(t: &[String]) -> String {
    let mut s = String::new();
    for (k, w) in t.iter().enumerate() {
        let glued =
            k == 0 || w == "." || w == "," || w == ")" || t[k - 1] == "." || t[k - 1] == "(";
        if !glued {
            s.push(' ');
        }
        s.push_str(w);
    }
    s
}

fn is(t: &str, kw: &str) -> bool {
    t.eq_ignore_ascii_case(kw)
}

/// An item of the top-level FROM: `table alias` or `(subquery) alias`,
/// and for a `JOIN` its one `ON` equality.
struct Item {
    /// Token range, `JOIN` to the end of its condition.
    span: (usize, usize),
    /// The token naming the table (none for a subquery).
    table: Option<usize>,
    alias: String,
    /// `(alias, column, alias, column)`.
    on: Option<(String, String, String, String)>,
}

fn ends_from(t: &str) -> bool {
    ["WHERE", "GROUP", "ORDER", "LIMIT", ")"]
        .iter()
        .any(|k| is(t, k))
}

/// The top-level FROM's items, or why they do not have the shape this
/// rewrite reads.
fn from_items(t: &[String]) -> Result<Vec<Item>> {
    let mut depth = 0i32;
    let mut from = None;
    for (i, w) in t.iter().enumerate() {
        match w.as_str() {
            "(" => depth += 1,
            ")" => depth -= 1,
            _ if depth == 0 && is(w, "FROM") => {
                from = Some(i);
                break;
            }
            _ => {}
        }
    }
    let mut i = from.ok_or_else(|| anyhow!("no FROM"))? + 1;
    let mut items = Vec::new();
    let mut first = true;
    while i < t.len() && !ends_from(&t[i]) {
        let start = i;
        if !first {
            if !is(&t[i], "JOIN") {
                bail!("`{}` in FROM: only JOIN ... ON is read", t[i]);
            }
            i += 1;
        }
        let table = if t.get(i).map(String::as_str) == Some("(") {
            let mut d = 0;
            while i < t.len() {
                match t[i].as_str() {
                    "(" => d += 1,
                    ")" => {
                        d -= 1;
                        if d == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            i += 1;
            None
        } else {
            i += 1;
            Some(i - 1)
        };
        if t.get(i).is_some_and(|w| is(w, "AS")) {
            i += 1;
        }
        let alias = match t.get(i) {
            Some(a) if !is(a, "JOIN") && !is(a, "ON") && !ends_from(a) => {
                i += 1;
                a.clone()
            }
            _ => table.map(|k| t[k].clone()).unwrap_or_default(),
        };
        let mut on = None;
        if !first {
            if !t.get(i).is_some_and(|w| is(w, "ON")) {
                bail!("a JOIN without ON");
            }
            match t.get(i + 1..i + 8) {
                Some([a, d1, x, eq, b, d2, y]) if d1 == "." && d2 == "." && eq == "=" => {
                    on = Some((a.clone(), x.clone(), b.clone(), y.clone()));
                    i += 8;
                }
                _ => bail!("an ON that is not one equality"),
            }
            if t.get(i).is_some_and(|w| is(w, "AND") || is(w, "OR")) {
                bail!("an ON of more than one condition");
            }
        }
        items.push(Item {
            span: (start, i),
            table,
            alias,
            on,
        });
        first = false;
    }
    Ok(items)
}

/// The items that are `view`'s relations joined along its edges, in path
/// order, among those not in `taken`.
fn match_view(t: &[String], items: &[Item], view: &ViewSpec) -> Option<Vec<usize>> {
    fn extend(t: &[String], items: &[Item], view: &ViewSpec, chosen: &mut Vec<usize>) -> bool {
        let k = chosen.len();
        if k == view.relations.len() {
            return true;
        }
        for (j, it) in items.iter().enumerate() {
            let Some(tt) = it.table else { continue };
            if t[tt] != view.relations[k] || chosen.contains(&j) {
                continue;
            }
            if k > 0 {
                let parent = &items[chosen[k - 1]].alias;
                let (pk, fk) = (&view.keys[k - 1], &view.edges[k - 1]);
                let linked = items
                    .iter()
                    .filter_map(|i| i.on.as_ref())
                    .any(|(a, x, b, y)| {
                        (a == &it.alias && x == fk && b == parent && y == pk)
                            || (b == &it.alias && y == fk && a == parent && x == pk)
                    });
                if !linked {
                    continue;
                }
            }
            chosen.push(j);
            if extend(t, items, view, chosen) {
                return true;
            }
            chosen.pop();
        }
        false
    }
    let mut chosen = Vec::new();
    extend(t, items, view, &mut chosen).then_some(chosen)
}

/// `sql` reading `views` (names, as Silt's rewrite used them, one entry
/// per use) in place of the joins they hold: each view's relations become
/// one FROM item (the first of them, renamed to the view), the JOINs of
/// the others go, and their columns are read from the view.
pub(super) fn rewrite(sql: &str, views: &[&ViewSpec]) -> Result<String> {
    let mut t = tokens(sql);
    let mut order: Vec<&ViewSpec> = views.to_vec();
    order.sort_by_key(|v| std::cmp::Reverse(v.relations.len()));
    for view in order {
        let items = from_items(&t)?;
        let chosen = match_view(&t, &items, view)
            .ok_or_else(|| anyhow!("view {} matches no join of {sql}", view.name))?;
        let Some(&kept) = chosen.iter().min() else {
            continue;
        };
        let mapped: Vec<(&str, &str)> = chosen
            .iter()
            .zip(&view.relations)
            .map(|(&j, r)| (items[j].alias.as_str(), r.as_str()))
            .collect();
        for &j in chosen.iter().filter(|&&j| j != kept) {
            let ok = items[j].on.as_ref().is_some_and(|(a, _, b, _)| {
                mapped.iter().any(|m| m.0 == a) && mapped.iter().any(|m| m.0 == b)
            });
            if !ok {
                bail!(
                    "the JOIN of {} joins outside view {}",
                    items[j].alias,
                    view.name
                );
            }
        }
        let keep_alias = items[kept].alias.clone();
        let mut next = t.clone();
        for p in 0..t.len().saturating_sub(2) {
            if t[p + 1] != "." || (p > 0 && t[p - 1] == ".") {
                continue;
            }
            if let Some((_, rel)) = mapped.iter().find(|m| m.0 == t[p]) {
                let col = view
                    .column(rel, &t[p + 2])
                    .ok_or_else(|| anyhow!("{} has no column for {rel}.{}", view.name, t[p + 2]))?;
                next[p] = keep_alias.clone();
                next[p + 2] = col.to_owned();
            }
        }
        if let Some(tt) = items[kept].table {
            next[tt] = view.name.clone();
            if items[kept].alias == t[tt] {
                // `FROM orders` without an alias keeps reading `orders.`.
                next.insert(tt + 1, keep_alias.clone());
            }
        }
        let mut drop: Vec<(usize, usize)> = chosen
            .iter()
            .filter(|&&j| j != kept)
            .map(|&j| items[j].span)
            .collect();
        drop.sort_unstable();
        let shift = usize::from(
            items[kept]
                .table
                .is_some_and(|tt| items[kept].alias == t[tt]),
        );
        for (s, e) in drop.into_iter().rev() {
            let (s, e) = if s > items[kept].span.0 {
                (s + shift, e + shift)
            } else {
                (s, e)
            };
            next.drain(s..e);
        }
        t = next;
    }
    Ok(untokens(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(
        name: &str,
        relations: &[&str],
        edges: &[&str],
        keys: &[&str],
        cols: &[(&str, &str)],
    ) -> ViewSpec {
        ViewSpec {
            name: name.into(),
            relations: relations.iter().map(|s| (*s).into()).collect(),
            edges: edges.iter().map(|s| (*s).into()).collect(),
            keys: keys.iter().map(|s| (*s).into()).collect(),
            columns: cols
                .iter()
                .map(|(r, f)| ViewColumn {
                    relation: (*r).into(),
                    field: (*f).into(),
                    name: (*f).into(),
                })
                .collect(),
            indexed: Vec::new(),
        }
    }

    #[test]
    fn a_join_is_read_from_its_view() {
        let v = spec(
            "author__item",
            &["author", "item"],
            &["i_a_id"],
            &["a_id", "i_id"],
            &[
                ("author", "a_id"),
                ("author", "a_fname"),
                ("item", "i_id"),
                ("item", "i_a_id"),
                ("item", "i_subject"),
            ],
        );
        let sql = "SELECT i.i_id, a.a_fname FROM (SELECT o_id FROM orders LIMIT 3) recent \
                   JOIN order_line ol ON ol.ol_o_id = recent.o_id JOIN item i ON ol.ol_i_id = i.i_id \
                   JOIN author a ON i.i_a_id = a.a_id WHERE i.i_subject = $1 ORDER BY a.a_fname";
        let got = rewrite(sql, &[&v]).unwrap();
        assert_eq!(
            got,
            "SELECT i.i_id, i.a_fname FROM (SELECT o_id FROM orders LIMIT 3) recent \
             JOIN order_line ol ON ol.ol_o_id = recent.o_id JOIN author__item i ON ol.ol_i_id = i.i_id \
             WHERE i.i_subject = $1 ORDER BY i.a_fname"
        );
        let twice = spec(
            "country__address",
            &["country", "address"],
            &["addr_co_id"],
            &["co_id", "addr_id"],
            &[
                ("country", "co_id"),
                ("country", "co_name"),
                ("address", "addr_id"),
                ("address", "addr_co_id"),
            ],
        );
        let sql = "SELECT b.addr_id, bc.co_name, s.addr_id, sc.co_name FROM orders o \
                   JOIN address b ON o.o_bill = b.addr_id JOIN country bc ON b.addr_co_id = bc.co_id \
                   JOIN address s ON o.o_ship = s.addr_id JOIN country sc ON s.addr_co_id = sc.co_id";
        assert_eq!(
            rewrite(sql, &[&twice, &twice]).unwrap(),
            "SELECT b.addr_id, b.co_name, s.addr_id, s.co_name FROM orders o \
             JOIN country__address b ON o.o_bill = b.addr_id JOIN country__address s ON o.o_ship = s.addr_id"
        );
        assert!(rewrite("SELECT * FROM item i WHERE i.i_id = $1", &[&v]).is_err());
    }

    #[test]
    fn a_view_whose_root_is_joined_second() {
        let v = spec(
            "customer__orders__cc_xacts",
            &["customer", "orders", "cc_xacts"],
            &["o_c_id", "cx_o_id"],
            &["c_id", "o_id", "cx_o_id"],
            &[
                ("customer", "c_id"),
                ("customer", "c_fname"),
                ("orders", "o_id"),
                ("orders", "o_c_id"),
                ("orders", "o_bill"),
                ("cc_xacts", "cx_o_id"),
                ("cc_xacts", "cx_type"),
            ],
        );
        let sql = "SELECT o.o_id, c.c_fname, cx.cx_type, b.addr_id FROM orders o JOIN customer c ON o.o_c_id = c.c_id \
                   JOIN cc_xacts cx ON cx.cx_o_id = o.o_id JOIN address b ON o.o_bill = b.addr_id WHERE o.o_id = $1";
        assert_eq!(
            rewrite(sql, &[&v]).unwrap(),
            "SELECT o.o_id, o.c_fname, o.cx_type, b.addr_id FROM customer__orders__cc_xacts o \
             JOIN address b ON o.o_bill = b.addr_id WHERE o.o_id = $1"
        );
        let w = spec(
            "customer__orders",
            &["customer", "orders"],
            &["o_c_id"],
            &["c_id", "o_id"],
            &[
                ("customer", "c_id"),
                ("customer", "c_uname"),
                ("orders", "o_id"),
                ("orders", "o_c_id"),
            ],
        );
        assert_eq!(
            rewrite("SELECT orders.o_id FROM customer JOIN orders ON customer.c_id = orders.o_c_id WHERE customer.c_uname = $1", &[&w]).unwrap(),
            "SELECT customer.o_id FROM customer__orders customer WHERE customer.c_uname = $1"
        );
    }
}
