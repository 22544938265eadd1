//! A TPC-W data set and its database workload, as the Synergy evaluation
//! uses them (seed 004 §4.8.4): the ten tables with their keys and
//! foreign keys ([`schema`]), a seeded, streaming generator of every
//! table's records ([`records`], sized by a [`Scale`]), and the SQL
//! statements the 14 servlets send to the database ([`statements`]).
//!
//! Written from the TPC-W specification's table layouts and population
//! rules (field lengths, ranges, the subject and backing lists, the digit
//! syllables of user names), not from any implementation. Where it departs
//! from the specification, and why:
//!
//! - **10 orders per customer**, not 0.9: the paper changes the
//!   Customer:Orders cardinality to 10 (and sets NUM_ITEMS = 10 ×
//!   NUM_CUST), so one-to-many joins from a customer are wide enough to
//!   matter.
//! - **Global line keys**: `order_line` and `shopping_cart_line` are keyed
//!   by one int (`ol_id`, `scl_id`, counting over the whole table) instead
//!   of the specification's composite (order, line number) and (cart,
//!   item) keys, so every table has a one-column int key; the parent
//!   columns stay, as foreign keys (what the schema graph is made of).
//! - **Lines per order are stratified**: each block of 5 consecutive
//!   orders takes 1, 2, 3, 4 and 5 lines in a seeded random order, so each
//!   order's count is still uniform on 1..=5 (mean 3) but the table has
//!   exactly 3 lines per order and [`Scale::order_lines`] is exact.
//! - **Carts can be loaded**: the specification loads no shopping carts
//!   (sessions make them); [`Scale::with_carts`] adds some, 1..=5 distinct
//!   items each, so the cart statements have something to read.
//! - **Fixed clock**: "now" is [`LOAD_DAY`] (2025-01-01), so a seed fixes
//!   every date; the specification uses the population time.
//! - **Strings are pronounceable words** of the specification's lengths
//!   (its a-strings are random characters), and the 92 countries are real
//!   ones with approximate exchange rates.
//! - `i_related1..5` hold item ids but are not declared foreign keys (a
//!   self-reference would make the schema graph cyclic); `cx_name` is the
//!   ordering customer's name, as the specification has it.

mod generate;
mod joins;
mod statements;
#[cfg(test)]
mod tests;

pub use generate::user_name;
pub use statements::{Kind, Param, Statement, statements};

use generate::{Gen, Lines};

use crate::schema::{DatasetDef, FkAction};
use crate::value::{FieldType, Value};

/// The load's "now": 2025-01-01, as days since 1970-01-01. Every generated
/// date and time is relative to it.
pub const LOAD_DAY: i64 = 20_089;
const NOW_US: i64 = LOAD_DAY * 86_400_000_000;

/// The TPC-W subjects (`i_subject`), which the searches filter on.
pub const SUBJECTS: [&str; 24] = [
    "ARTS",
    "BIOGRAPHIES",
    "BUSINESS",
    "CHILDREN",
    "COMPUTERS",
    "COOKING",
    "HEALTH",
    "HISTORY",
    "HOME",
    "HUMOR",
    "LITERATURE",
    "MYSTERY",
    "NON-FICTION",
    "PARENTING",
    "POLITICS",
    "REFERENCE",
    "RELIGION",
    "ROMANCE",
    "SELF-HELP",
    "SCIENCE-NATURE",
    "SCIENCE-FICTION",
    "SPORTS",
    "YOUTH",
    "TRAVEL",
];
const BACKINGS: [&str; 5] = ["HARDBACK", "PAPERBACK", "USED", "AUDIO", "LIMITED-EDITION"];
const SHIP_TYPES: [&str; 6] = ["AIR", "UPS", "FEDEX", "SHIP", "COURIER", "MAIL"];
const STATUSES: [&str; 4] = ["PROCESSING", "SHIPPED", "PENDING", "DENIED"];
const CARD_TYPES: [&str; 5] = ["VISA", "MASTERCARD", "DISCOVER", "AMEX", "DINERS"];
const DOMAINS: [&str; 4] = ["example.com", "mail.test", "books.test", "inbox.test"];
/// The syllables of a user name's digits (`c_uname` of customer 1 is `OG`,
/// of 30 is `RIBA`): user names follow from ids, so parameters can name a
/// loaded customer without a lookup.
const DIGIT_SYLLABLES: [&str; 10] = ["BA", "OG", "AL", "RI", "RE", "SE", "AT", "UL", "IN", "NG"];
const SYLLABLES: [&str; 24] = [
    "ba", "ce", "di", "fo", "gu", "ha", "je", "ki", "lo", "mu", "na", "pe", "qui", "ro", "sa",
    "te", "vi", "wo", "xa", "yu", "zo", "an", "el", "or",
];

/// The 92 countries (`name:currency:units per US dollar`), `co_id` 1..=92
/// in this order.
const COUNTRIES: &str = "United States:Dollars:1;United Kingdom:Pounds:0.79;Canada:Dollars:1.36;\
Germany:Euros:0.92;France:Euros:0.92;Japan:Yen:148;Netherlands:Euros:0.92;Italy:Euros:0.92;\
Switzerland:Francs:0.88;Australia:Dollars:1.52;Algeria:Dinars:134;Argentina:Pesos:830;\
Armenia:Drams:400;Austria:Euros:0.92;Azerbaijan:Manats:1.7;Bahamas:Dollars:1;Bahrain:Dinars:0.376;\
Bangladesh:Taka:110;Barbados:Dollars:2;Belarus:Rubles:3.27;Belgium:Euros:0.92;Bermuda:Dollars:1;\
Bolivia:Bolivianos:6.91;Botswana:Pula:13.6;Brazil:Reais:4.95;Bulgaria:Leva:1.8;\
Cayman Islands:Dollars:0.83;Chad:Francs:605;Chile:Pesos:940;China:Yuan:7.19;\
Christmas Island:Dollars:1.52;Colombia:Pesos:3900;Croatia:Euros:0.92;Cuba:Pesos:24;\
Cyprus:Euros:0.92;Czech Republic:Koruny:23.4;Denmark:Kroner:6.87;Dominican Republic:Pesos:58.7;\
Eastern Caribbean:Dollars:2.7;Ecuador:Dollars:1;Egypt:Pounds:30.9;El Salvador:Dollars:1;\
Estonia:Euros:0.92;Ethiopia:Birr:56.5;Falkland Islands:Pounds:0.79;Faroe Islands:Kroner:6.87;\
Fiji:Dollars:2.25;Finland:Euros:0.92;Gabon:Francs:605;Gibraltar:Pounds:0.79;Greece:Euros:0.92;\
Guam:Dollars:1;Hong Kong:Dollars:7.82;Hungary:Forint:360;Iceland:Kronur:137;India:Rupees:83;\
Indonesia:Rupiah:15600;Iran:Rials:42000;Iraq:Dinars:1310;Ireland:Euros:0.92;Israel:Shekels:3.65;\
Jamaica:Dollars:155;Jordan:Dinars:0.709;Kazakhstan:Tenge:450;Kuwait:Dinars:0.307;\
Lebanon:Pounds:15000;Luxembourg:Euros:0.92;Malaysia:Ringgit:4.7;Mexico:Pesos:17.1;\
Mauritius:Rupees:45.5;New Zealand:Dollars:1.63;Norway:Kroner:10.5;Pakistan:Rupees:279;\
Philippines:Pesos:55.9;Poland:Zlotych:4;Portugal:Euros:0.92;Romania:Lei:4.58;Russia:Rubles:91;\
Saudi Arabia:Riyals:3.75;Singapore:Dollars:1.34;Slovakia:Euros:0.92;South Africa:Rand:18.9;\
South Korea:Won:1330;Spain:Euros:0.92;Sudan:Pounds:600;Sweden:Kronor:10.4;Taiwan:Dollars:31.3;\
Thailand:Baht:35.6;Trinidad and Tobago:Dollars:6.78;Turkey:Lira:30.5;Venezuela:Bolivares:36;\
Zambia:Kwacha:26";

/// Country `co_id` (1-based): name, currency, exchange rate.
fn country(co_id: u64) -> (&'static str, &'static str, f64) {
    let i = usize::try_from(co_id.saturating_sub(1)).unwrap_or(usize::MAX);
    let mut f = COUNTRIES.split(';').nth(i).unwrap_or("").split(':');
    let (name, currency) = (f.next().unwrap_or(""), f.next().unwrap_or(""));
    (
        name,
        currency,
        f.next().and_then(|x| x.parse().ok()).unwrap_or(1.0),
    )
}

/// The tables in creation order (every parent before its children): each
/// name with its `column type` list, the first column its key.
const TABLES: [(&str, &str); 10] = [
    (
        "country",
        "co_id int, co_name text, co_exchange double, co_currency text",
    ),
    (
        "author",
        "a_id int, a_fname text, a_lname text, a_mname text, a_dob date, a_bio text",
    ),
    (
        "address",
        "addr_id int, addr_street1 text, addr_street2 text, addr_city text, addr_state text, \
         addr_zip text, addr_co_id int",
    ),
    (
        "customer",
        "c_id int, c_uname text, c_passwd text, c_fname text, c_lname text, c_addr_id int, \
         c_phone text, c_email text, c_since date, c_last_login date, c_login timestamp, \
         c_expiration timestamp, c_discount double, c_balance double, c_ytd_pmt double, \
         c_birthdate date, c_data text",
    ),
    (
        "item",
        "i_id int, i_title text, i_a_id int, i_pub_date date, i_publisher text, i_subject text, \
         i_desc text, i_related1 int, i_related2 int, i_related3 int, i_related4 int, \
         i_related5 int, i_thumbnail text, i_image text, i_srp double, i_cost double, \
         i_avail date, i_stock int, i_isbn text, i_page int, i_backing text, i_dimensions text",
    ),
    (
        "orders",
        "o_id int, o_c_id int, o_date timestamp, o_sub_total double, o_tax double, \
         o_total double, o_ship_type text, o_ship_date timestamp, o_bill_addr_id int, \
         o_ship_addr_id int, o_status text",
    ),
    (
        "order_line",
        "ol_id int, ol_o_id int, ol_i_id int, ol_qty int, ol_discount double, ol_comments text",
    ),
    (
        "cc_xacts",
        "cx_o_id int, cx_type text, cx_num text, cx_name text, cx_expire date, cx_auth_id text, \
         cx_xact_amt double, cx_xact_date timestamp, cx_co_id int",
    ),
    ("shopping_cart", "sc_id int, sc_time timestamp"),
    (
        "shopping_cart_line",
        "scl_id int, scl_sc_id int, scl_qty int, scl_i_id int",
    ),
];

/// The foreign keys: (child, column, parent, on delete).
const FOREIGN_KEYS: [(&str, &str, &str, FkAction); 12] = [
    ("address", "addr_co_id", "country", FkAction::Restrict),
    ("customer", "c_addr_id", "address", FkAction::Restrict),
    ("item", "i_a_id", "author", FkAction::Restrict),
    ("orders", "o_c_id", "customer", FkAction::Restrict),
    ("orders", "o_bill_addr_id", "address", FkAction::Restrict),
    ("orders", "o_ship_addr_id", "address", FkAction::Restrict),
    ("order_line", "ol_o_id", "orders", FkAction::Cascade),
    ("order_line", "ol_i_id", "item", FkAction::Restrict),
    ("cc_xacts", "cx_o_id", "orders", FkAction::Cascade),
    ("cc_xacts", "cx_co_id", "country", FkAction::Restrict),
    (
        "shopping_cart_line",
        "scl_sc_id",
        "shopping_cart",
        FkAction::Cascade,
    ),
    ("shopping_cart_line", "scl_i_id", "item", FkAction::Restrict),
];

/// The ten tables in creation order (every parent before its children),
/// keyed by their first column, every column's type declared. Foreign keys
/// RESTRICT, except that deleting an order deletes its lines and its card
/// transaction, and deleting a cart its lines (CASCADE): those children
/// are parts of their parent. Each dataset has one partition and an 8 MiB
/// memory budget.
pub fn schema() -> Vec<DatasetDef> {
    TABLES
        .iter()
        .map(|&(name, columns)| {
            let columns: Vec<(&str, &str)> = columns
                .split(',')
                .filter_map(|c| c.trim().split_once(' '))
                .collect();
            let key = columns.first().map_or("", |c| c.0);
            let mut def = DatasetDef::new(name, &[key]).memory_budget(8 << 20);
            for (column, ty) in columns {
                // The types above are all known ones (a test checks).
                def = def.field(column, FieldType::parse(ty).unwrap_or(FieldType::Any));
            }
            for &(_, column, parent, action) in FOREIGN_KEYS.iter().filter(|f| f.0 == name) {
                def = def.references(&[column], parent, action);
            }
            def
        })
        .collect()
}

/// The size of a data set: the number of customers, and every other
/// table's count derived from it as the specification and the paper say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scale {
    customers: u64,
    carts: u64,
}

impl Scale {
    /// The specification's fixed country count.
    pub const COUNTRIES: u64 = 92;

    /// A data set of `customers` customers (1 to 2^40) and no shopping
    /// carts, as the specification loads it.
    pub fn new(customers: u64) -> Scale {
        Scale {
            customers: customers.clamp(1, 1 << 40),
            carts: 0,
        }
    }

    /// The same with `carts` shopping carts loaded too (at most 2^40,
    /// rounded up to a multiple of 5 for exact line counts), so the cart
    /// statements have carts to read and change; the specification loads
    /// none.
    pub fn with_carts(self, carts: u64) -> Scale {
        Scale {
            carts: carts.min(1 << 40).div_ceil(5) * 5,
            ..self
        }
    }

    pub fn customers(&self) -> u64 {
        self.customers
    }
    /// NUM_ITEMS = 10 × NUM_CUST (the paper's setting).
    pub fn items(&self) -> u64 {
        self.customers * 10
    }
    /// A quarter of the items (the specification).
    pub fn authors(&self) -> u64 {
        self.items() / 4
    }
    /// Two per customer (the specification).
    pub fn addresses(&self) -> u64 {
        self.customers * 2
    }
    /// 10 per customer (the paper; the specification has 0.9).
    pub fn orders(&self) -> u64 {
        self.customers * 10
    }
    /// 1..=5 per order, exactly 3 on average (see the module doc).
    pub fn order_lines(&self) -> u64 {
        self.orders() * 3
    }
    /// One card transaction per order.
    pub fn cc_xacts(&self) -> u64 {
        self.orders()
    }
    pub fn shopping_carts(&self) -> u64 {
        self.carts
    }
    /// 1..=5 per cart, exactly 3 on average.
    pub fn shopping_cart_lines(&self) -> u64 {
        self.carts * 3
    }

    /// The record count of `table` (0 for a name not in [`schema`]).
    pub fn count(&self, table: &str) -> u64 {
        match table {
            "country" => Self::COUNTRIES,
            "author" => self.authors(),
            "address" => self.addresses(),
            "customer" => self.customers,
            "item" => self.items(),
            "orders" => self.orders(),
            "order_line" => self.order_lines(),
            "cc_xacts" => self.cc_xacts(),
            "shopping_cart" => self.shopping_carts(),
            "shopping_cart_line" => self.shopping_cart_lines(),
            _ => 0,
        }
    }
}

/// Every table's records, `(table, record)`, table by table in [`schema`]
/// order, so each foreign key names a record already produced. Keys count
/// from 1. Each record is drawn from its own generator, seeded by `seed`,
/// its table and its key, so the stream holds nothing but counters (a
/// million orders need no memory) and a record can be recomputed alone (a
/// card transaction repeats its order's total and customer name).
pub fn records(scale: &Scale, seed: u64) -> impl Iterator<Item = (&'static str, Value)> {
    let (g, s) = (Gen::new(seed, *scale), *scale);
    let each = move |table: &'static str, n: u64, f: fn(&Gen, u64) -> Value| {
        (1..=n).map(move |id| (table, f(&g, id)))
    };
    let lines = move |table: &'static str, n: u64, f: fn(Gen, u64) -> Lines| {
        (1..=n).flat_map(move |id| f(g, id).map(move |r| (table, r)))
    };
    each("country", Scale::COUNTRIES, Gen::country)
        .chain(each("author", s.authors(), Gen::author))
        .chain(each("address", s.addresses(), Gen::address))
        .chain(each("customer", s.customers, Gen::customer))
        .chain(each("item", s.items(), Gen::item))
        .chain(each("orders", s.orders(), Gen::order))
        .chain(lines("order_line", s.orders(), Gen::order_lines))
        .chain(each("cc_xacts", s.orders(), Gen::cc_xact))
        .chain(each("shopping_cart", s.carts, Gen::cart))
        .chain(lines("shopping_cart_line", s.carts, Gen::cart_lines))
}
