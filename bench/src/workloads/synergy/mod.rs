//! `synergy` (issue 22, seed 004 §4.8): materialized views kept by the
//! writing transaction under one hierarchical lock, against joins and
//! against PostgreSQL 15's ways of keeping a join: `CREATE MATERIALIZED
//! VIEW` + `REFRESH`, and a table kept by triggers.
//!
//! - [`micro`]: Fig. 4.9, view scan against join (Q1 Customer->Orders, Q2
//!   Customer->Orders->Order_line) as customers grow tenfold from 500.
//! - [`locks`]: Fig. 4.10, what a write transaction under views pays for
//!   its locks: one root lock against a lock per row.
//!
//! - [`tpcw`]: Tables 4.2/4.3, the sum of every TPC-W statement's time and
//!   the database sizes (`silt::workload::tpcw`), Silt without views, with
//!   Synergy's design, and with its views under row locks, beside
//!   PostgreSQL's joins, materialized views and trigger-kept tables.

mod locks;
mod micro;
mod tpcw;
mod tpcw_pg;

use anyhow::Result;

use super::{Ctx, Scale, Workload};
use crate::results::ResultRow;

pub struct Synergy;

/// The micro-benchmark's tables in Silt's SQL.
const SCHEMA_SILT: &str = "
CREATE TABLE customer (c_id BIGINT PRIMARY KEY, c_uname TEXT, c_lname TEXT, c_balance DOUBLE);
CREATE TABLE orders (o_id BIGINT PRIMARY KEY, o_c_id BIGINT NOT NULL REFERENCES customer,
                     o_total DOUBLE, o_status TEXT);
CREATE TABLE order_line (ol_id BIGINT PRIMARY KEY,
                         ol_o_id BIGINT NOT NULL REFERENCES orders ON DELETE CASCADE,
                         ol_qty BIGINT, ol_amount DOUBLE)";

/// The two views; Q2's has an index on its customer.
const VIEWS_SILT: &str = "
CREATE MATERIALIZED VIEW v_co AS SELECT c.c_id, c.c_uname, c.c_lname, c.c_balance,
    o.o_id, o.o_total, o.o_status
    FROM customer c JOIN orders o ON o.o_c_id = c.c_id;
CREATE MATERIALIZED VIEW v_col AS SELECT c.c_id, c.c_uname, c.c_lname, c.c_balance,
    o.o_id, o.o_total, o.o_status, l.ol_id, l.ol_qty, l.ol_amount
    FROM customer c JOIN orders o ON o.o_c_id = c.c_id JOIN order_line l ON l.ol_o_id = o.o_id;
CREATE INDEX v_col_c_id ON v_col USING btree (c_id)";

/// The same tables in PostgreSQL, with the indexes its joins use.
const SCHEMA_PG: &str = "
CREATE TABLE customer (c_id bigint PRIMARY KEY, c_uname text, c_lname text, c_balance double precision);
CREATE TABLE orders (o_id bigint PRIMARY KEY, o_c_id bigint NOT NULL REFERENCES customer,
                     o_total double precision, o_status text);
CREATE TABLE order_line (ol_id bigint PRIMARY KEY,
                         ol_o_id bigint NOT NULL REFERENCES orders ON DELETE CASCADE,
                         ol_qty bigint, ol_amount double precision);
CREATE INDEX orders_c ON orders (o_c_id);
CREATE INDEX order_line_o ON order_line (ol_o_id)";

/// PostgreSQL's materialized views (filled as they are made).
const VIEWS_PG: &str = "
CREATE MATERIALIZED VIEW mv_co AS SELECT c.c_id, c.c_uname, c.c_lname, c.c_balance,
    o.o_id, o.o_total, o.o_status
    FROM customer c JOIN orders o ON o.o_c_id = c.c_id;
CREATE MATERIALIZED VIEW mv_col AS SELECT c.c_id, c.c_uname, c.c_lname, c.c_balance,
    o.o_id, o.o_total, o.o_status, l.ol_id, l.ol_qty, l.ol_amount
    FROM customer c JOIN orders o ON o.o_c_id = c.c_id JOIN order_line l ON l.ol_o_id = o.o_id;
CREATE INDEX mv_col_c ON mv_col (c_id)";

/// The views as tables that row triggers keep, the way a PostgreSQL user
/// keeps a join fresh without REFRESH: each write of a table replaces the
/// view rows it changes, in the writing transaction.
const TRIGGERS_PG: &str = "
CREATE TABLE t_co AS SELECT c.c_id, c.c_uname, c.c_lname, c.c_balance, o.o_id, o.o_total, o.o_status
    FROM customer c JOIN orders o ON o.o_c_id = c.c_id;
ALTER TABLE t_co ADD PRIMARY KEY (o_id);
CREATE INDEX t_co_c ON t_co (c_id);
CREATE TABLE t_col AS SELECT c.c_id, c.c_uname, c.c_lname, c.c_balance, o.o_id, o.o_total, o.o_status,
    l.ol_id, l.ol_qty, l.ol_amount
    FROM customer c JOIN orders o ON o.o_c_id = c.c_id JOIN order_line l ON l.ol_o_id = o.o_id;
ALTER TABLE t_col ADD PRIMARY KEY (ol_id);
CREATE INDEX t_col_c ON t_col (c_id);
CREATE INDEX t_col_o ON t_col (o_id);
CREATE FUNCTION keep_line() RETURNS trigger AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN DELETE FROM t_col WHERE ol_id = OLD.ol_id; END IF;
  IF TG_OP <> 'DELETE' THEN
    INSERT INTO t_col SELECT c.c_id, c.c_uname, c.c_lname, c.c_balance, o.o_id, o.o_total,
        o.o_status, NEW.ol_id, NEW.ol_qty, NEW.ol_amount
      FROM orders o JOIN customer c ON c.c_id = o.o_c_id WHERE o.o_id = NEW.ol_o_id;
  END IF;
  RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER keep_line AFTER INSERT OR UPDATE OR DELETE ON order_line
  FOR EACH ROW EXECUTE FUNCTION keep_line();
CREATE FUNCTION keep_order() RETURNS trigger AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    DELETE FROM t_co WHERE o_id = OLD.o_id;
    DELETE FROM t_col WHERE o_id = OLD.o_id;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    INSERT INTO t_co SELECT c.c_id, c.c_uname, c.c_lname, c.c_balance, NEW.o_id, NEW.o_total, NEW.o_status
      FROM customer c WHERE c.c_id = NEW.o_c_id;
    INSERT INTO t_col SELECT c.c_id, c.c_uname, c.c_lname, c.c_balance, NEW.o_id, NEW.o_total,
        NEW.o_status, l.ol_id, l.ol_qty, l.ol_amount
      FROM customer c JOIN order_line l ON l.ol_o_id = NEW.o_id WHERE c.c_id = NEW.o_c_id;
  END IF;
  RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER keep_order AFTER INSERT OR UPDATE OR DELETE ON orders
  FOR EACH ROW EXECUTE FUNCTION keep_order();
CREATE FUNCTION keep_customer() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    DELETE FROM t_co WHERE c_id = OLD.c_id;
    DELETE FROM t_col WHERE c_id = OLD.c_id;
  ELSIF TG_OP = 'UPDATE' THEN
    UPDATE t_co SET c_id = NEW.c_id, c_uname = NEW.c_uname, c_lname = NEW.c_lname,
        c_balance = NEW.c_balance WHERE c_id = OLD.c_id;
    UPDATE t_col SET c_id = NEW.c_id, c_uname = NEW.c_uname, c_lname = NEW.c_lname,
        c_balance = NEW.c_balance WHERE c_id = OLD.c_id;
  END IF;
  RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER keep_customer AFTER UPDATE OR DELETE ON customer
  FOR EACH ROW EXECUTE FUNCTION keep_customer()";

fn customers(scale: Scale) -> &'static [u64] {
    match scale {
        Scale::Small => &[500, 5_000],
        Scale::Medium | Scale::Full => &[500, 5_000, 50_000],
    }
}

/// TPC-W customers (Table 4.2's data set; the paper's was 1 M) and the
/// measured rounds of every statement.
fn tpcw_scale(scale: Scale) -> (u64, usize) {
    match scale {
        Scale::Small => (10_000, 3),
        Scale::Medium | Scale::Full => (100_000, 5),
    }
}

fn reps(scale: Scale) -> usize {
    match scale {
        Scale::Small => 5,
        Scale::Medium | Scale::Full => 10,
    }
}

impl Workload for Synergy {
    fn name(&self) -> &'static str {
        "synergy"
    }

    fn description(&self) -> &'static str {
        "issue 22 (seed 004 §4.8): view scan vs join as customers grow (Fig. 4.9); one root lock vs row locks under views (Fig. 4.10); Silt vs PostgreSQL 15 joins, matviews + REFRESH, trigger-kept tables"
    }

    fn explanation(&self) -> &'static str {
        "Customer -> Orders -> Order_line, 10 orders per customer and 10 lines per order. \
         Fig. 4.9: Q1 (customer x orders) and Q2 (x order_line) answered in full (aggregates \
         return, so no result transfer), and Q2 for one customer; Silt through silt serve with \
         its materialized views (CREATE MATERIALIZED VIEW before the load, kept by it) read by \
         the query rewrite, and the same queries with silt.use_materialized_views = false \
         (joins); PostgreSQL 15 over the same client and loopback, its joins with indexes on \
         the foreign keys, and the queries written on its materialized views. Every answer is \
         checked against the others. Fig. 4.10: a transaction updating 10, 100, 1000 lines of \
         one customer under the views: Silt in process with the customer's hierarchy (one root \
         lock), without it (a lock per row and view row), without views; PostgreSQL plain, \
         with trigger-kept view tables, and with REFRESH MATERIALIZED VIEW after the commit. \
         Medians of the timed runs after a warm-up."
    }

    fn durability(&self) -> &'static str {
        "Fig. 4.10: Silt's log batched (200 ms), PostgreSQL synchronous_commit = off; Fig. 4.9 reads only"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let mut out = Vec::new();
        for &n in customers(scale) {
            micro::run(n, reps(scale), ctx, &mut out)?;
        }
        locks::run(reps(scale), ctx, &mut out)?;
        Ok(out)
    }
}

/// Tables 4.2 and 4.3: the TPC-W statements' summed times and the sizes.
pub struct SynergyTpcw;

impl Workload for SynergyTpcw {
    fn name(&self) -> &'static str {
        "synergy-tpcw"
    }

    fn description(&self) -> &'static str {
        "issue 22 (seed 004 Tables 4.2/4.3): the sum of every TPC-W statement's response time and the database sizes; Silt without views, with Synergy's design, with its views under row locks; PostgreSQL 15 joins, materialized views + REFRESH, trigger-kept view tables"
    }

    fn explanation(&self) -> &'static str {
        "TPC-W as the paper sets it (10 items and 10 orders per customer; a cart per 10 customers \
         loaded so the cart statements read something), 45 statements (31 reads, 14 writes) each \
         run once per round with fresh parameters, in servlet order, as text with literals, one \
         autocommit transaction each; a warm-up round, then the measured rounds; the sum of the \
         statements' times per round, its mean and standard error. Silt through silt serve: \
         loaded in process (2,000 records per transaction, foreign keys checked), compacted, \
         copied; Synergy's design (roots author, customer, country; views and view indexes from \
         the statements' joins and filters) installed on two copies, one without hierarchies \
         (row locks). PostgreSQL 15 over the same client: the same tables and foreign keys, an \
         index on every foreign key and filtered column, then Synergy's views as materialized \
         views (REFRESH after each write of their tables, timed with the write) and as tables \
         kept by row triggers; the reads Silt answered from views written on them. Every read's \
         answer is checked against silt-no-views'. Sizes after the load (Silt compacted; \
         PostgreSQL after VACUUM ANALYZE)."
    }

    fn durability(&self) -> &'static str {
        "every statement's commit synced: Silt's default (Sync), PostgreSQL synchronous_commit = on"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let mut out = Vec::new();
        let (customers, rounds) = tpcw_scale(scale);
        tpcw::run(customers, rounds, ctx, &mut out)?;
        Ok(out)
    }
}
