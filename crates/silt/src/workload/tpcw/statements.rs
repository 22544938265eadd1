//! The TPC-W database workload: every SQL statement the 14 servlets send,
//! minus those the paper leaves out (§4.8.4.1: `DELETE FROM
//! shopping_cart_line WHERE scl_sc_id = ?`, which clears a whole cart, and
//! the title and author searches, which need soundex), written here in
//! plain SQL that PostgreSQL and DataFusion both plan: `$n` parameters,
//! joins as `JOIN ... ON` equalities between key and foreign-key columns,
//! `ORDER BY` / `LIMIT` instead of vendor row limits.
//!
//! Departures from the servlets' SQL, and why:
//!
//! - Times are parameters instead of `CURRENT_DATE` / `CURRENT_TIMESTAMP`,
//!   and new keys are parameters instead of `MAX(id) + 1` / `COUNT(*)`
//!   (whose reads are kept as statements of their own): a statement's
//!   effect is then fixed by its parameters.
//! - The best sellers and the related-items query of the admin update read
//!   "the most recent orders" as a derived table of the newest 3333 (10000)
//!   orders, as the paper's Table 4.4 has them ("Orders tmp table"), and
//!   the related items are those bought in the same order (Q11: order_line
//!   joined to itself), where the servlet looked at the same customer.
//! - The card transaction's country is read from the billing address
//!   alone (`addr_co_id`, equal to the country's key by the foreign key)
//!   rather than joined to `country`, so the workload's joins are the 11 of
//!   the paper's Table 4.4.
//! - The most recent order is ordered by date and id both descending (the
//!   servlet's date ordering was ascending, which reads the oldest).
//! - `getCAddr` reads the customer's address record by its key;
//!   `enterCCXact.country` is the billing address's country (see above).

use super::generate::{digits, text, user_name};
use super::{CARD_TYPES, LOAD_DAY, NOW_US, SHIP_TYPES, SUBJECTS, Scale, country};
use crate::value::{Value, temporal};
use crate::workload::SplitMix64;

/// Whether a statement reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Read,
    Write,
}

/// What a statement's parameter holds, so [`Statement::params`] can draw a
/// valid value for it at a [`Scale`]. Dates and times are ISO text
/// (`2025-01-01`, `2025-01-01 10:30:00`), relative to the load's day.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// The key of a loaded record of the table: uniform in `1..=count`
    /// (`1` when the table is loaded empty: with no carts loaded, the cart
    /// statements name cart 1, which `createEmptyCart` must make first).
    Key(&'static str),
    /// A key of the table that no loaded record holds, for an insert:
    /// uniform in `count + 1 ..= count + 2^50`, so a repeat is expected
    /// only after some 47 million draws. `enterCCXact`'s order is one of
    /// these: it must be the order that `enterOrder` made (buy-confirm
    /// runs the two in one transaction), so a caller passes that key.
    NewKey(&'static str),
    /// The user name of a loaded customer.
    UserName,
    /// One of the 24 subjects.
    Subject,
    /// The name of one of the 92 countries.
    CountryName,
    /// An int in `lo..=hi` (`lo` when `hi < lo`, as for the ranges below).
    Int(i64, i64),
    /// An amount of money, `lo..=hi` cents, as a double.
    Money(u64, u64),
    /// Words of `min..=max` characters.
    Text(u64, u64),
    /// `min..=max` decimal digits, as text.
    Digits(u64, u64),
    /// One of these words.
    OneOf(&'static [&'static str]),
    /// A date `lo..=hi` days after the load's day.
    Day(i64, i64),
    /// A time `lo..=hi` seconds after the load's instant.
    Time(i64, i64),
}

/// One SQL statement of the workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    /// The servlet database call it comes from (`getBook`), and which of
    /// its statements when there are several (`getMostRecentOrder.lines`).
    pub name: &'static str,
    /// Its name in the paper's Tables 4.4 and 4.5 (`Q1`..`Q11` for the
    /// joins, `W1`..`W13` for the writes), if it has one.
    pub paper: Option<&'static str>,
    /// The SQL, parameters `$1`, `$2`, ... (one may appear twice).
    pub sql: &'static str,
    pub kind: Kind,
    /// What `$1`, `$2`, ... hold, in order.
    pub params: Vec<Param>,
}

impl Statement {
    /// Values for `$1`, `$2`, ... drawn for a data set of `scale`.
    pub fn params(&self, scale: &Scale, rng: &mut SplitMix64) -> Vec<Value> {
        self.params.iter().map(|p| draw(*p, scale, rng)).collect()
    }
}

fn draw(p: Param, scale: &Scale, r: &mut SplitMix64) -> Value {
    let int = |n: u64| Value::Int(i64::try_from(n).unwrap_or(i64::MAX));
    match p {
        Param::Key(t) => int(1 + r.below(scale.count(t).max(1))),
        Param::NewKey(t) => int(scale.count(t) + 1 + r.below(1 << 50)),
        Param::UserName => Value::String(user_name(1 + r.below(scale.customers()))),
        Param::Subject => Value::String(SUBJECTS[r.below(24) as usize].into()),
        Param::CountryName => Value::String(country(1 + r.below(Scale::COUNTRIES)).0.into()),
        Param::Int(lo, hi) => Value::Int(lo.saturating_add(span(r, lo, hi))),
        Param::Money(lo, hi) => {
            Value::Double((lo + r.below(hi.saturating_sub(lo) + 1)) as f64 / 100.0)
        }
        Param::Text(lo, hi) => Value::String(text(r, lo, hi.max(lo))),
        Param::Digits(lo, hi) => Value::String(digits(r, lo, hi.max(lo))),
        Param::OneOf(words) => words
            .get(r.below(words.len() as u64) as usize)
            .map_or(Value::Null, |w| Value::String((*w).into())),
        Param::Day(lo, hi) => {
            let day = LOAD_DAY.saturating_add(lo).saturating_add(span(r, lo, hi));
            temporal::format_date(day).map_or(Value::Null, Value::String)
        }
        Param::Time(lo, hi) => {
            let s = lo.saturating_add(span(r, lo, hi));
            let us = NOW_US.saturating_add(s.saturating_mul(1_000_000));
            temporal::format_timestamp(us, false).map_or(Value::Null, Value::String)
        }
    }
}

/// Uniform in `0..=hi - lo` (0 when `hi <= lo`).
fn span(r: &mut SplitMix64, lo: i64, hi: i64) -> i64 {
    let width = u64::try_from(hi.saturating_sub(lo)).unwrap_or(0);
    i64::try_from(r.below(width.saturating_add(1))).unwrap_or(0)
}

/// The workload: 31 reads (the 11 joins of the paper's Table 4.4 among
/// them) and 14 writes (the 13 of Table 4.5 and `setStock`), in servlet
/// order.
pub fn statements() -> Vec<Statement> {
    use Param::*;
    // A statement; `paper` is "" when the paper does not name it.
    let st = |name, paper: &'static str, sql: &'static str, params: &[Param]| Statement {
        name,
        paper: (!paper.is_empty()).then_some(paper),
        sql,
        kind: if sql.starts_with("SELECT") {
            Kind::Read
        } else {
            Kind::Write
        },
        params: params.to_vec(),
    };
    let address = [
        Text(15, 40),
        Text(15, 40),
        Text(4, 30),
        Text(2, 20),
        Digits(5, 10),
    ];
    let new_address: Vec<Param> = [NewKey("address")]
        .into_iter()
        .chain(address)
        .chain([Key("country")])
        .collect();
    let match_address: Vec<Param> = address.into_iter().chain([Key("country")]).collect();
    vec![
        st(
            "getName",
            "",
            "SELECT c_fname, c_lname FROM customer WHERE c_id = $1",
            &[Key("customer")],
        ),
        st(
            "getBook",
            "Q6",
            "SELECT * FROM item i JOIN author a ON i.i_a_id = a.a_id WHERE i.i_id = $1",
            &[Key("item")],
        ),
        st(
            "getCustomer",
            "Q3",
            "SELECT * FROM customer c JOIN address ad ON c.c_addr_id = ad.addr_id \
            JOIN country co ON ad.addr_co_id = co.co_id WHERE c.c_uname = $1",
            &[UserName],
        ),
        st(
            "doSubjectSearch",
            "Q4",
            "SELECT * FROM item i JOIN author a ON i.i_a_id = a.a_id \
            WHERE i.i_subject = $1 ORDER BY i.i_title LIMIT 50",
            &[Subject],
        ),
        st(
            "getNewProducts",
            "Q5",
            "SELECT i.i_id, i.i_title, a.a_fname, a.a_lname FROM item i \
            JOIN author a ON i.i_a_id = a.a_id WHERE i.i_subject = $1 \
            ORDER BY i.i_pub_date DESC, i.i_title LIMIT 50",
            &[Subject],
        ),
        st(
            "getBestSellers",
            "Q10",
            "SELECT i.i_id, i.i_title, a.a_fname, a.a_lname, SUM(ol.ol_qty) AS sold \
            FROM (SELECT o_id FROM orders ORDER BY o_date DESC, o_id DESC LIMIT 3333) recent \
            JOIN order_line ol ON ol.ol_o_id = recent.o_id JOIN item i ON ol.ol_i_id = i.i_id \
            JOIN author a ON i.i_a_id = a.a_id WHERE i.i_subject = $1 \
            GROUP BY i.i_id, i.i_title, a.a_fname, a.a_lname ORDER BY sold DESC, i.i_id LIMIT 50",
            &[Subject],
        ),
        st(
            "getRelated",
            "Q9",
            "SELECT j.i_id, j.i_thumbnail FROM item i JOIN item j \
            ON j.i_id = i.i_related1 OR j.i_id = i.i_related2 OR j.i_id = i.i_related3 \
            OR j.i_id = i.i_related4 OR j.i_id = i.i_related5 WHERE i.i_id = $1",
            &[Key("item")],
        ),
        st(
            "adminUpdate",
            "W9",
            "UPDATE item SET i_cost = $1, i_image = $2, i_thumbnail = $3, \
            i_pub_date = $4 WHERE i_id = $5",
            &[
                Money(100, 999_999),
                Text(15, 30),
                Text(15, 30),
                Day(0, 0),
                Key("item"),
            ],
        ),
        st(
            "adminUpdate.related",
            "Q11",
            "SELECT ol2.ol_i_id, SUM(ol2.ol_qty) AS sold \
            FROM (SELECT o_id FROM orders ORDER BY o_date DESC, o_id DESC LIMIT 10000) recent \
            JOIN order_line ol ON ol.ol_o_id = recent.o_id JOIN order_line ol2 ON ol2.ol_o_id = ol.ol_o_id \
            WHERE ol.ol_i_id = $1 AND ol2.ol_i_id <> $1 \
            GROUP BY ol2.ol_i_id ORDER BY sold DESC, ol2.ol_i_id LIMIT 5",
            &[Key("item")],
        ),
        st(
            "adminUpdate.setRelated",
            "W10",
            "UPDATE item SET i_related1 = $1, i_related2 = $2, \
            i_related3 = $3, i_related4 = $4, i_related5 = $5 WHERE i_id = $6",
            &[Key("item"); 6],
        ),
        st(
            "getUserName",
            "",
            "SELECT c_uname FROM customer WHERE c_id = $1",
            &[Key("customer")],
        ),
        st(
            "getPassword",
            "",
            "SELECT c_passwd FROM customer WHERE c_uname = $1",
            &[UserName],
        ),
        st(
            "getRelated1",
            "",
            "SELECT i_related1 FROM item WHERE i_id = $1",
            &[Key("item")],
        ),
        st(
            "getMostRecentOrder.id",
            "Q2",
            "SELECT o.o_id FROM customer c JOIN orders o ON c.c_id = o.o_c_id \
            WHERE c.c_uname = $1 ORDER BY o.o_date DESC, o.o_id DESC LIMIT 1",
            &[UserName],
        ),
        st(
            "getMostRecentOrder.order",
            "Q7",
            "SELECT o.o_id, o.o_c_id, o.o_date, o.o_sub_total, o.o_tax, \
            o.o_total, o.o_ship_type, o.o_ship_date, o.o_status, c.c_fname, c.c_lname, c.c_phone, c.c_email, \
            cx.cx_type, bill.addr_street1 AS bill_street1, bill.addr_street2 AS bill_street2, \
            bill.addr_city AS bill_city, bill.addr_state AS bill_state, bill.addr_zip AS bill_zip, \
            bill_co.co_name AS bill_country, ship.addr_street1 AS ship_street1, \
            ship.addr_street2 AS ship_street2, ship.addr_city AS ship_city, ship.addr_state AS ship_state, \
            ship.addr_zip AS ship_zip, ship_co.co_name AS ship_country \
            FROM orders o JOIN customer c ON o.o_c_id = c.c_id JOIN cc_xacts cx ON cx.cx_o_id = o.o_id \
            JOIN address bill ON o.o_bill_addr_id = bill.addr_id JOIN country bill_co ON bill.addr_co_id = bill_co.co_id \
            JOIN address ship ON o.o_ship_addr_id = ship.addr_id JOIN country ship_co ON ship.addr_co_id = ship_co.co_id \
            WHERE o.o_id = $1",
            &[Key("orders")],
        ),
        st(
            "getMostRecentOrder.lines",
            "Q1",
            "SELECT ol.ol_i_id, i.i_title, i.i_publisher, i.i_cost, \
            ol.ol_qty, ol.ol_discount, ol.ol_comments FROM order_line ol JOIN item i ON ol.ol_i_id = i.i_id \
            WHERE ol.ol_o_id = $1",
            &[Key("orders")],
        ),
        st(
            "createEmptyCart.count",
            "",
            "SELECT COUNT(*) FROM shopping_cart",
            &[],
        ),
        st(
            "createEmptyCart",
            "W6",
            "INSERT INTO shopping_cart (sc_id, sc_time) VALUES ($1, $2)",
            &[NewKey("shopping_cart"), Time(0, 86_400)],
        ),
        st(
            "addItem.qty",
            "",
            "SELECT scl_qty FROM shopping_cart_line WHERE scl_sc_id = $1 AND scl_i_id = $2",
            &[Key("shopping_cart"), Key("item")],
        ),
        st(
            "addItem",
            "W7",
            "INSERT INTO shopping_cart_line (scl_id, scl_sc_id, scl_qty, scl_i_id) \
            VALUES ($1, $2, $3, $4)",
            &[
                NewKey("shopping_cart_line"),
                Key("shopping_cart"),
                Int(1, 10),
                Key("item"),
            ],
        ),
        st(
            "refreshCart.delete",
            "W8",
            "DELETE FROM shopping_cart_line WHERE scl_sc_id = $1 AND scl_i_id = $2",
            &[Key("shopping_cart"), Key("item")],
        ),
        st(
            "refreshCart.update",
            "W12",
            "UPDATE shopping_cart_line SET scl_qty = $1 \
            WHERE scl_sc_id = $2 AND scl_i_id = $3",
            &[Int(1, 10), Key("shopping_cart"), Key("item")],
        ),
        st(
            "addRandomItemToCartIfNecessary",
            "",
            "SELECT COUNT(*) FROM shopping_cart_line WHERE scl_sc_id = $1",
            &[Key("shopping_cart")],
        ),
        st(
            "resetCartTime",
            "W11",
            "UPDATE shopping_cart SET sc_time = $1 WHERE sc_id = $2",
            &[Time(0, 86_400), Key("shopping_cart")],
        ),
        st(
            "getCart",
            "Q8",
            "SELECT scl.scl_i_id, scl.scl_qty, i.i_title, i.i_cost, i.i_srp, i.i_backing \
            FROM shopping_cart_line scl JOIN item i ON scl.scl_i_id = i.i_id WHERE scl.scl_sc_id = $1",
            &[Key("shopping_cart")],
        ),
        st(
            "refreshSession",
            "W13",
            "UPDATE customer SET c_login = $1, c_expiration = $2 WHERE c_id = $3",
            &[Time(0, 86_400), Time(7_200, 93_600), Key("customer")],
        ),
        st(
            "createNewCustomer.maxId",
            "",
            "SELECT MAX(c_id) FROM customer",
            &[],
        ),
        st(
            "createNewCustomer",
            "W4",
            "INSERT INTO customer (c_id, c_uname, c_passwd, c_fname, c_lname, \
            c_addr_id, c_phone, c_email, c_since, c_last_login, c_login, c_expiration, c_discount, c_balance, \
            c_ytd_pmt, c_birthdate, c_data) \
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
            &[
                NewKey("customer"),
                Text(8, 20),
                Text(8, 20),
                Text(8, 15),
                Text(8, 15),
                Key("address"),
                Digits(9, 16),
                Text(10, 50),
                Day(0, 0),
                Day(0, 0),
                Time(0, 0),
                Time(7_200, 7_200),
                Money(0, 50),
                Money(0, 0),
                Money(0, 0),
                Day(-36_500, -6_575),
                Text(100, 500),
            ],
        ),
        st(
            "getCDiscount",
            "",
            "SELECT c_discount FROM customer WHERE c_id = $1",
            &[Key("customer")],
        ),
        st(
            "getCAddrID",
            "",
            "SELECT c_addr_id FROM customer WHERE c_id = $1",
            &[Key("customer")],
        ),
        st(
            "getCAddr",
            "",
            "SELECT addr_street1, addr_street2, addr_city, addr_state, addr_zip, addr_co_id \
            FROM address WHERE addr_id = $1",
            &[Key("address")],
        ),
        st(
            "enterAddress.country",
            "",
            "SELECT co_id FROM country WHERE co_name = $1",
            &[CountryName],
        ),
        st(
            "enterAddress.match",
            "",
            "SELECT addr_id FROM address WHERE addr_street1 = $1 AND addr_street2 = $2 \
            AND addr_city = $3 AND addr_state = $4 AND addr_zip = $5 AND addr_co_id = $6",
            &match_address,
        ),
        st(
            "enterAddress.maxId",
            "",
            "SELECT MAX(addr_id) FROM address",
            &[],
        ),
        st(
            "enterAddress",
            "W5",
            "INSERT INTO address (addr_id, addr_street1, addr_street2, addr_city, \
            addr_state, addr_zip, addr_co_id) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &new_address,
        ),
        st("enterOrder.maxId", "", "SELECT MAX(o_id) FROM orders", &[]),
        st(
            "enterOrder",
            "W1",
            "INSERT INTO orders (o_id, o_c_id, o_date, o_sub_total, o_tax, o_total, \
            o_ship_type, o_ship_date, o_bill_addr_id, o_ship_addr_id, o_status) \
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            &[
                NewKey("orders"),
                Key("customer"),
                Time(0, 86_400),
                Money(1_000, 999_999),
                Money(83, 82_500),
                Money(1_400, 1_083_000),
                OneOf(&SHIP_TYPES),
                Time(86_400, 8 * 86_400),
                Key("address"),
                Key("address"),
                OneOf(&["PENDING"]),
            ],
        ),
        st(
            "addOrderLine",
            "W3",
            "INSERT INTO order_line (ol_id, ol_o_id, ol_i_id, ol_qty, ol_discount, \
            ol_comments) VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                NewKey("order_line"),
                Key("orders"),
                Key("item"),
                Int(1, 300),
                Money(0, 3),
                Text(20, 100),
            ],
        ),
        st(
            "getStock",
            "",
            "SELECT i_stock FROM item WHERE i_id = $1",
            &[Key("item")],
        ),
        st(
            "setStock",
            "",
            "UPDATE item SET i_stock = $1 WHERE i_id = $2",
            &[Int(10, 30), Key("item")],
        ),
        st(
            "enterCCXact.country",
            "",
            "SELECT addr_co_id FROM address WHERE addr_id = $1",
            &[Key("address")],
        ),
        st(
            "enterCCXact",
            "W2",
            "INSERT INTO cc_xacts (cx_o_id, cx_type, cx_num, cx_name, cx_expire, \
            cx_auth_id, cx_xact_amt, cx_xact_date, cx_co_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[
                NewKey("orders"),
                OneOf(&CARD_TYPES),
                Digits(16, 16),
                Text(17, 31),
                Day(10, 730),
                Text(15, 15),
                Money(1_400, 1_083_000),
                Time(0, 86_400),
                Key("country"),
            ],
        ),
        st(
            "verifyDBConsistency.customers",
            "",
            "SELECT c_id FROM customer",
            &[],
        ),
        st(
            "verifyDBConsistency.items",
            "",
            "SELECT i_id FROM item",
            &[],
        ),
        st(
            "verifyDBConsistency.addresses",
            "",
            "SELECT addr_id FROM address",
            &[],
        ),
    ]
}
