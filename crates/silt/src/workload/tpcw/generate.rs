//! The record generators behind [`super::records`]: one seeded stream per
//! record, fields drawn by the specification's population rules.

use super::{
    BACKINGS, CARD_TYPES, DIGIT_SYLLABLES, DOMAINS, LOAD_DAY, NOW_US, SHIP_TYPES, STATUSES,
    SUBJECTS, SYLLABLES, Scale, country,
};
use crate::value::Value;
use crate::workload::SplitMix64;

const DAY_US: i64 = 86_400_000_000;

const T_AUTHOR: u64 = 2;
const T_ADDRESS: u64 = 3;
const T_CUSTOMER: u64 = 4;
const T_ITEM: u64 = 5;
const T_ORDER: u64 = 6;
const T_ORDER_LINE: u64 = 7;
const T_CC_XACT: u64 = 8;
const T_CART: u64 = 9;
const T_CART_LINE: u64 = 10;
const T_CART_ITEMS: u64 = 11;
/// Streams of the line-count permutations (added to a line table's tag).
const T_BLOCK: u64 = 100;

/// The generator's fixed inputs; each record is a function of them and
/// its key.
#[derive(Clone, Copy, Debug)]
pub(super) struct Gen {
    seed: u64,
    scale: Scale,
}

/// The lines of one order or cart, in key order.
pub(super) struct Lines {
    g: Gen,
    parent: u64,
    first: u64,
    next: u64,
    end: u64,
    /// For a cart: its first item (the lines hold consecutive items, so
    /// none twice); `None` for an order.
    cart_item: Option<u64>,
}

impl Iterator for Lines {
    type Item = Value;

    fn next(&mut self) -> Option<Value> {
        if self.next >= self.end {
            return None;
        }
        let id = self.next;
        self.next += 1;
        Some(match self.cart_item {
            None => self.g.order_line(self.parent, id),
            Some(first) => {
                let k = id - self.first;
                let item = (first - 1 + k) % self.g.scale.items() + 1;
                self.g.cart_line(self.parent, id, item)
            }
        })
    }
}

impl Gen {
    pub(super) fn new(seed: u64, scale: Scale) -> Gen {
        Gen { seed, scale }
    }

    /// The generator of record `id` of table `tag`: the seed and both
    /// numbers are hashed, so the streams start at unrelated points of
    /// SplitMix64's sequence (ids stay below 2^48, see [`Scale::new`]).
    fn rng(&self, tag: u64, id: u64) -> SplitMix64 {
        let h = SplitMix64::new((tag << 48) ^ id).next_u64();
        SplitMix64::new(SplitMix64::new(self.seed ^ h).next_u64())
    }

    /// The first line key and the line count of order (or cart) `parent`:
    /// blocks of 5 parents take 1..=5 lines in a seeded order, so block
    /// `b` starts at line `15 b + 1`.
    fn lines_of(&self, tag: u64, parent: u64) -> (u64, u64) {
        let (block, pos) = ((parent - 1) / 5, ((parent - 1) % 5) as usize);
        let mut counts = [1, 2, 3, 4, 5];
        let mut r = self.rng(tag + T_BLOCK, block);
        for i in (1..counts.len()).rev() {
            counts.swap(i, r.below(i as u64 + 1) as usize);
        }
        let before: u64 = counts[..pos].iter().sum();
        (block * 15 + before + 1, counts[pos])
    }

    pub(super) fn country(&self, id: u64) -> Value {
        let (name, currency, exchange) = country(id);
        obj(vec![
            ("co_id", int(id)),
            ("co_name", Value::String(name.into())),
            ("co_exchange", Value::Double(exchange)),
            ("co_currency", Value::String(currency.into())),
        ])
    }

    pub(super) fn author(&self, id: u64) -> Value {
        let r = &mut self.rng(T_AUTHOR, id);
        obj(vec![
            ("a_id", int(id)),
            ("a_fname", s(name(r, 3, 20))),
            ("a_lname", s(name(r, 1, 20))),
            ("a_mname", s(name(r, 1, 20))),
            // Born 35 to 225 years before the load.
            (
                "a_dob",
                Value::Int(LOAD_DAY - 12_784 - r.below(69_400) as i64),
            ),
            ("a_bio", s(text(r, 125, 500))),
        ])
    }

    pub(super) fn address(&self, id: u64) -> Value {
        let r = &mut self.rng(T_ADDRESS, id);
        obj(vec![
            ("addr_id", int(id)),
            ("addr_street1", s(street(r))),
            ("addr_street2", s(street(r))),
            ("addr_city", s(name(r, 4, 30))),
            ("addr_state", s(name(r, 2, 20))),
            ("addr_zip", s(digits(r, 5, 10))),
            ("addr_co_id", int(1 + r.below(Scale::COUNTRIES))),
        ])
    }

    /// A customer's first and last names: its generator's first draws,
    /// which a card transaction repeats.
    fn customer_names(&self, id: u64) -> (SplitMix64, String, String) {
        let mut r = self.rng(T_CUSTOMER, id);
        let first = name(&mut r, 8, 15);
        let last = name(&mut r, 8, 15);
        (r, first, last)
    }

    pub(super) fn customer(&self, id: u64) -> Value {
        let (mut r, first, last) = self.customer_names(id);
        let r = &mut r;
        let uname = user_name(id);
        let since = LOAD_DAY - 1 - r.below(730) as i64;
        let login = NOW_US - r.below(2 * 86_400) as i64 * 1_000_000;
        let email = format!("{}@{}", uname.to_lowercase(), DOMAINS[r.below(4) as usize]);
        obj(vec![
            ("c_id", int(id)),
            ("c_uname", s(uname.clone())),
            ("c_passwd", s(uname.to_lowercase())),
            ("c_fname", s(first)),
            ("c_lname", s(last)),
            ("c_addr_id", int(1 + r.below(self.scale.addresses()))),
            ("c_phone", s(digits(r, 9, 16))),
            ("c_email", s(email)),
            ("c_since", Value::Int(since)),
            (
                "c_last_login",
                Value::Int((since + r.below(61) as i64).min(LOAD_DAY)),
            ),
            ("c_login", Value::Int(login)),
            ("c_expiration", Value::Int(login + 7_200_000_000)),
            ("c_discount", cents(r.below(51))),
            ("c_balance", Value::Double(0.0)),
            ("c_ytd_pmt", cents(r.below(100_000))),
            // 18 to 100 years old.
            (
                "c_birthdate",
                Value::Int(LOAD_DAY - 6_575 - r.below(29_950) as i64),
            ),
            ("c_data", s(text(r, 100, 500))),
        ])
    }

    pub(super) fn item(&self, id: u64) -> Value {
        let r = &mut self.rng(T_ITEM, id);
        let items = self.scale.items();
        // Every author writes one of the first items; the rest at random.
        let author = if id <= self.scale.authors() {
            id
        } else {
            1 + r.below(self.scale.authors().max(1))
        };
        // Published from 1930-01-01 (day -14610) to the load day.
        let published = -14_610 + r.below((LOAD_DAY + 14_611) as u64) as i64;
        let srp = 100 + r.below(999_900);
        let cost = srp * (100 - r.below(51)) / 100;
        let mut fields = vec![
            ("i_id", int(id)),
            ("i_title", s(capitalized(text(r, 14, 60)))),
            ("i_a_id", int(author)),
            ("i_pub_date", Value::Int(published)),
            ("i_publisher", s(capitalized(text(r, 14, 60)))),
            ("i_subject", s(SUBJECTS[r.below(24) as usize].into())),
            ("i_desc", s(text(r, 100, 500))),
        ];
        for f in [
            "i_related1",
            "i_related2",
            "i_related3",
            "i_related4",
            "i_related5",
        ] {
            fields.push((f, int(1 + r.below(items))));
        }
        let dim = |r: &mut SplitMix64| format!("{:.2}", (100 + r.below(9_900)) as f64 / 100.0);
        let dimensions = format!("{}x{}x{}", dim(r), dim(r), dim(r));
        fields.extend([
            ("i_thumbnail", s(format!("img{}/thumb_{id}.gif", id % 100))),
            ("i_image", s(format!("img{}/image_{id}.gif", id % 100))),
            ("i_srp", cents(srp)),
            ("i_cost", cents(cost)),
            ("i_avail", Value::Int(published + 1 + r.below(30) as i64)),
            ("i_stock", Value::Int(10 + r.below(21) as i64)),
            ("i_isbn", s(isbn(r))),
            ("i_page", Value::Int(20 + r.below(9_980) as i64)),
            ("i_backing", s(BACKINGS[r.below(5) as usize].into())),
            ("i_dimensions", s(dimensions)),
        ]);
        obj(fields)
    }

    /// An order's customer, time (µs), and total, which its card
    /// transaction repeats; `r` continues with the order's other fields.
    fn order_head(&self, id: u64) -> (SplitMix64, u64, i64, i64, i64, i64) {
        let mut r = self.rng(T_ORDER, id);
        let customer = 1 + r.below(self.scale.customers);
        // 1 to 60 days before the load, at any second of the day.
        let date = NOW_US - (1 + r.below(60) as i64) * DAY_US - r.below(86_400) as i64 * 1_000_000;
        let sub = 1_000 + r.below(999_000) as i64;
        let tax = (sub * 825 + 5_000) / 10_000;
        let (_, lines) = self.lines_of(T_ORDER_LINE, id);
        let total = sub + tax + 300 + 100 * lines as i64;
        (r, customer, date, sub, tax, total)
    }

    pub(super) fn order(&self, id: u64) -> Value {
        let (mut r, customer, date, sub, tax, total) = self.order_head(id);
        let r = &mut r;
        let addresses = self.scale.addresses();
        obj(vec![
            ("o_id", int(id)),
            ("o_c_id", int(customer)),
            ("o_date", Value::Int(date)),
            ("o_sub_total", cents(sub as u64)),
            ("o_tax", cents(tax as u64)),
            ("o_total", cents(total as u64)),
            ("o_ship_type", s(SHIP_TYPES[r.below(6) as usize].into())),
            ("o_ship_date", Value::Int(date + r.below(8) as i64 * DAY_US)),
            ("o_bill_addr_id", int(1 + r.below(addresses))),
            ("o_ship_addr_id", int(1 + r.below(addresses))),
            ("o_status", s(STATUSES[r.below(4) as usize].into())),
        ])
    }

    fn order_line(&self, order: u64, id: u64) -> Value {
        let r = &mut self.rng(T_ORDER_LINE, id);
        obj(vec![
            ("ol_id", int(id)),
            ("ol_o_id", int(order)),
            ("ol_i_id", int(1 + r.below(self.scale.items()))),
            ("ol_qty", Value::Int(1 + r.below(300) as i64)),
            ("ol_discount", cents(r.below(4))),
            ("ol_comments", s(text(r, 20, 100))),
        ])
    }

    pub(super) fn cc_xact(&self, order: u64) -> Value {
        let (_, customer, date, _, _, total) = self.order_head(order);
        let (_, first, last) = self.customer_names(customer);
        let r = &mut self.rng(T_CC_XACT, order);
        obj(vec![
            ("cx_o_id", int(order)),
            ("cx_type", s(CARD_TYPES[r.below(5) as usize].into())),
            ("cx_num", s(digits(r, 16, 16))),
            ("cx_name", s(format!("{first} {last}"))),
            ("cx_expire", Value::Int(LOAD_DAY + 10 + r.below(721) as i64)),
            (
                "cx_auth_id",
                s(text(r, 15, 15).replace(' ', "x").to_uppercase()),
            ),
            ("cx_xact_amt", cents(total as u64)),
            ("cx_xact_date", Value::Int(date)),
            ("cx_co_id", int(1 + r.below(Scale::COUNTRIES))),
        ])
    }

    pub(super) fn order_lines(self, order: u64) -> Lines {
        let (first, n) = self.lines_of(T_ORDER_LINE, order);
        Lines {
            g: self,
            parent: order,
            first,
            next: first,
            end: first + n,
            cart_item: None,
        }
    }

    pub(super) fn cart_lines(self, cart: u64) -> Lines {
        let (first, n) = self.lines_of(T_CART_LINE, cart);
        let item = 1 + self.rng(T_CART_ITEMS, cart).below(self.scale.items());
        Lines {
            g: self,
            parent: cart,
            first,
            next: first,
            end: first + n,
            cart_item: Some(item),
        }
    }

    fn cart_line(&self, cart: u64, id: u64, item: u64) -> Value {
        let r = &mut self.rng(T_CART_LINE, id);
        obj(vec![
            ("scl_id", int(id)),
            ("scl_sc_id", int(cart)),
            ("scl_qty", Value::Int(1 + r.below(10) as i64)),
            ("scl_i_id", int(item)),
        ])
    }

    pub(super) fn cart(&self, id: u64) -> Value {
        let r = &mut self.rng(T_CART, id);
        obj(vec![
            ("sc_id", int(id)),
            (
                "sc_time",
                Value::Int(NOW_US - r.below(7_200) as i64 * 1_000_000),
            ),
        ])
    }
}

/// The user name of customer `id` (the specification's digit syllables).
pub fn user_name(id: u64) -> String {
    id.to_string()
        .bytes()
        .map(|d| DIGIT_SYLLABLES[usize::from(d - b'0')])
        .collect()
}

fn obj(fields: Vec<(&str, Value)>) -> Value {
    Value::Object(fields.into_iter().map(|(k, v)| (k.into(), v)).collect())
}

fn int(n: u64) -> Value {
    Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

fn s(text: String) -> Value {
    Value::String(text)
}

fn cents(c: u64) -> Value {
    Value::Double(c as f64 / 100.0)
}

/// Words of syllables, separated by spaces, `min..=max` characters (ASCII).
pub(super) fn text(r: &mut SplitMix64, min: u64, max: u64) -> String {
    let len = (min + r.below(max.saturating_sub(min) + 1)) as usize;
    let mut out = String::with_capacity(len + 8);
    while out.len() < len {
        if !out.is_empty() {
            out.push(' ');
        }
        for _ in 0..1 + r.below(4) {
            out.push_str(SYLLABLES[r.below(SYLLABLES.len() as u64) as usize]);
        }
    }
    out.truncate(len);
    if out.ends_with(' ') {
        out.pop();
        out.push('s');
    }
    out
}

/// One capitalized word of `min..=max` letters.
fn name(r: &mut SplitMix64, min: u64, max: u64) -> String {
    let len = (min + r.below(max.saturating_sub(min) + 1)) as usize;
    let mut out = String::with_capacity(len + 4);
    while out.len() < len {
        out.push_str(SYLLABLES[r.below(SYLLABLES.len() as u64) as usize]);
    }
    out.truncate(len);
    capitalized(out)
}

fn capitalized(mut t: String) -> String {
    if let Some(c) = t.get_mut(0..1) {
        c.make_ascii_uppercase();
    }
    t
}

/// `min..=max` decimal digits.
pub(super) fn digits(r: &mut SplitMix64, min: u64, max: u64) -> String {
    let len = min + r.below(max.saturating_sub(min) + 1);
    (0..len)
        .map(|_| char::from(b'0' + r.below(10) as u8))
        .collect()
}

/// A street: a house number and words, 15..=40 characters.
fn street(r: &mut SplitMix64) -> String {
    let n = 100 + r.below(9_900);
    let rest = capitalized(text(r, 11, 35));
    format!("{n} {rest}")
}

/// 13 upper-case letters and digits.
fn isbn(r: &mut SplitMix64) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    (0..13)
        .map(|_| char::from(A[r.below(A.len() as u64) as usize]))
        .collect()
}
