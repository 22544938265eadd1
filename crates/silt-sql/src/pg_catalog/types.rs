//! The PostgreSQL types Silt names in its catalog (`pg_type`), and the
//! PostgreSQL type of each Arrow type and declared field type.
//!
//! Oids are PostgreSQL's own for its built-in types, so clients that know
//! them by number (psycopg, JDBC, SQLAlchemy) read them right. Silt's
//! geometry fields are `geometry` (WKT text on the wire, as PostGIS's
//! `ST_AsText` gives), an oid below the range relations get (see
//! [`super::snapshot`]).

use datafusion::arrow::datatypes::DataType;
use silt::FieldType;

/// One row of `pg_type`.
pub struct PgType {
    pub oid: i64,
    pub name: &'static str,
    /// Bytes, or -1 for variable length.
    pub len: i16,
    /// `typcategory`: B boolean, N numeric, S string, D date/time, U user,
    /// A array, G geometric, T timespan, P pseudo.
    pub category: char,
    /// The element type of an array type (0 otherwise).
    pub elem: i64,
    /// The array type of this type (0 when there is none).
    pub array: i64,
}

const fn t(oid: i64, name: &'static str, len: i16, category: char, array: i64) -> PgType {
    PgType {
        oid,
        name,
        len,
        category,
        elem: 0,
        array,
    }
}

const fn a(oid: i64, name: &'static str, elem: i64) -> PgType {
    PgType {
        oid,
        name,
        len: -1,
        category: 'A',
        elem,
        array: 0,
    }
}

/// The oid of `array_in`, every array type's `typinput`.
pub const ARRAY_IN: i64 = 750;

/// Silt's `geometry` type.
pub const GEOMETRY: i64 = 9_001;

/// Every type in `pg_type`.
pub const TYPES: &[PgType] = &[
    t(16, "bool", 1, 'B', 1000),
    t(17, "bytea", -1, 'U', 1001),
    t(18, "char", 1, 'Z', 1002),
    t(19, "name", 64, 'S', 1003),
    t(20, "int8", 8, 'N', 1016),
    t(21, "int2", 2, 'N', 1005),
    a(22, "int2vector", 21),
    t(23, "int4", 4, 'N', 1007),
    t(24, "regproc", 4, 'N', 1008),
    t(25, "text", -1, 'S', 1009),
    t(26, "oid", 4, 'N', 1028),
    t(28, "xid", 4, 'U', 1011),
    a(30, "oidvector", 26),
    t(114, "json", -1, 'U', 199),
    t(194, "pg_node_tree", -1, 'Z', 0),
    t(869, "inet", -1, 'I', 1041),
    t(1033, "aclitem", 12, 'U', 1034),
    t(3220, "pg_lsn", 8, 'U', 3221),
    t(700, "float4", 4, 'N', 1021),
    t(701, "float8", 8, 'N', 1022),
    t(705, "unknown", -2, 'X', 0),
    t(1042, "bpchar", -1, 'S', 1014),
    t(1043, "varchar", -1, 'S', 1015),
    t(1082, "date", 4, 'D', 1182),
    t(1083, "time", 8, 'D', 1183),
    t(1114, "timestamp", 8, 'D', 1115),
    t(1184, "timestamptz", 8, 'D', 1185),
    t(1186, "interval", 16, 'T', 1187),
    t(1700, "numeric", -1, 'N', 1231),
    t(2205, "regclass", 4, 'N', 2210),
    t(2206, "regtype", 4, 'N', 2211),
    t(2249, "record", -1, 'P', 2287),
    t(2277, "anyarray", -1, 'P', 0),
    t(2278, "void", 4, 'P', 0),
    t(2950, "uuid", 16, 'U', 2951),
    t(3802, "jsonb", -1, 'U', 3807),
    t(4089, "regnamespace", 4, 'N', 4090),
    t(GEOMETRY, "geometry", -1, 'U', GEOMETRY + 1),
    a(199, "_json", 114),
    a(1000, "_bool", 16),
    a(1001, "_bytea", 17),
    a(1002, "_char", 18),
    a(1003, "_name", 19),
    a(1005, "_int2", 21),
    a(1007, "_int4", 23),
    a(1008, "_regproc", 24),
    a(1009, "_text", 25),
    a(1011, "_xid", 28),
    a(1034, "_aclitem", 1033),
    a(1041, "_inet", 869),
    a(3221, "_pg_lsn", 3220),
    a(1014, "_bpchar", 1042),
    a(1015, "_varchar", 1043),
    a(1016, "_int8", 20),
    a(1021, "_float4", 700),
    a(1022, "_float8", 701),
    a(1028, "_oid", 26),
    a(1115, "_timestamp", 1114),
    a(1182, "_date", 1082),
    a(1183, "_time", 1083),
    a(1185, "_timestamptz", 1184),
    a(1187, "_interval", 1186),
    a(1231, "_numeric", 1700),
    a(2210, "_regclass", 2205),
    a(2211, "_regtype", 2206),
    a(2287, "_record", 2249),
    a(2951, "_uuid", 2950),
    a(3807, "_jsonb", 3802),
    a(4090, "_regnamespace", 4089),
    a(GEOMETRY + 1, "_geometry", GEOMETRY),
];

/// The type with this oid.
pub fn by_oid(oid: i64) -> Option<&'static PgType> {
    TYPES.iter().find(|t| t.oid == oid)
}

/// The type with this name (`typname`, or a common SQL spelling).
pub fn by_name(name: &str) -> Option<&'static PgType> {
    let name = name.to_ascii_lowercase();
    let canon = match name.as_str() {
        "boolean" => "bool",
        "smallint" => "int2",
        "integer" | "int" => "int4",
        "bigint" => "int8",
        "real" => "float4",
        "double precision" => "float8",
        "character varying" => "varchar",
        "character" => "bpchar",
        "decimal" => "numeric",
        "timestamp without time zone" => "timestamp",
        "timestamp with time zone" => "timestamptz",
        other => other,
    };
    TYPES.iter().find(|t| t.name == canon)
}

/// PostgreSQL's display name of a type (`format_type` without a modifier):
/// SQL's spelling for the standard types, `name[]` for arrays.
pub fn display_name(oid: i64) -> Option<String> {
    let ty = by_oid(oid)?;
    if ty.category == 'A' && ty.elem != 0 && !matches!(oid, 22 | 30) {
        return Some(format!("{}[]", display_name(ty.elem)?));
    }
    Some(
        match ty.name {
            "bool" => "boolean",
            "int2" => "smallint",
            "int4" => "integer",
            "int8" => "bigint",
            "float4" => "real",
            "float8" => "double precision",
            "varchar" => "character varying",
            "bpchar" => "character",
            "char" => "\"char\"",
            "timestamp" => "timestamp without time zone",
            "timestamptz" => "timestamp with time zone",
            "time" => "time without time zone",
            other => other,
        }
        .to_owned(),
    )
}

/// The type an Arrow column is described as.
pub fn of_arrow(dt: &DataType) -> i64 {
    match dt {
        DataType::Boolean => 16,
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => 21,
        DataType::Int32 | DataType::UInt16 => 23,
        DataType::Int64 | DataType::UInt32 => 20,
        DataType::UInt64
        | DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..) => 1700,
        DataType::Float16 | DataType::Float32 => 700,
        DataType::Float64 => 701,
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => 17,
        DataType::Date32 | DataType::Date64 => 1082,
        DataType::Time32(_) | DataType::Time64(_) => 1083,
        DataType::Timestamp(_, None) => 1114,
        DataType::Timestamp(_, Some(_)) => 1184,
        DataType::Interval(_) | DataType::Duration(_) => 1186,
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _) => {
            let elem = of_arrow(f.data_type());
            by_oid(elem).map_or(1009, |t| if t.array == 0 { 1009 } else { t.array })
        }
        DataType::Struct(_) => 2249,
        DataType::Dictionary(_, v) => of_arrow(v),
        _ => 25,
    }
}

/// PostgreSQL's type modifier of an Arrow type: `numeric(p,s)` for a
/// decimal, -1 otherwise.
pub fn typmod_of_arrow(dt: &DataType) -> i64 {
    match dt {
        DataType::Decimal128(p, s) => ((i64::from(*p) << 16) | i64::from(*s)) + 4,
        _ => -1,
    }
}

/// `numeric(p,s)` from a type modifier, `numeric` without one.
pub fn display_with_typmod(oid: i64, typmod: i64) -> Option<String> {
    if oid == 1700 && typmod >= 4 {
        let m = typmod - 4;
        return Some(format!("numeric({},{})", m >> 16, m & 0xffff));
    }
    if oid == 1043 && typmod >= 4 {
        return Some(format!("character varying({})", typmod - 4));
    }
    display_name(oid)
}

/// The type a field declared narrower than it is stored is described as.
pub fn of_narrow(n: silt::Narrow) -> i64 {
    match n {
        silt::Narrow::Int16 => 21,
        silt::Narrow::Int32 => 23,
        silt::Narrow::Varchar(_) => 1043,
    }
}

/// The type a declared field is described as.
pub fn of_field(ty: FieldType) -> i64 {
    match ty {
        FieldType::Bool => 16,
        FieldType::Int => 20,
        FieldType::Double => 701,
        FieldType::String | FieldType::Any => 25,
        FieldType::Binary => 17,
        FieldType::Date => 1082,
        FieldType::Timestamp => 1114,
        FieldType::TimestampTz => 1184,
        FieldType::Decimal { .. } => 1700,
        FieldType::Json => 3802,
        FieldType::Interval => 1186,
        FieldType::Array(e) => {
            let elem = of_field(e.field_type());
            by_oid(elem).map_or(1009, |t| if t.array == 0 { 1009 } else { t.array })
        }
        FieldType::Point | FieldType::Rectangle | FieldType::Polygon | FieldType::Geometry => {
            GEOMETRY
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_and_elements_point_at_each_other() {
        for ty in TYPES {
            if ty.array != 0 {
                let arr = by_oid(ty.array).expect("array type listed");
                assert_eq!(arr.elem, ty.oid, "{}", ty.name);
            }
            if ty.category == 'A' {
                assert!(by_oid(ty.elem).is_some(), "{}", ty.name);
            }
        }
        let mut oids: Vec<i64> = TYPES.iter().map(|t| t.oid).collect();
        oids.sort_unstable();
        oids.dedup();
        assert_eq!(oids.len(), TYPES.len(), "oids are unique");
    }

    #[test]
    fn display_names_follow_postgresql() {
        assert_eq!(display_name(20).as_deref(), Some("bigint"));
        assert_eq!(display_name(1016).as_deref(), Some("bigint[]"));
        assert_eq!(
            display_name(1184).as_deref(),
            Some("timestamp with time zone")
        );
        assert_eq!(display_name(22).as_deref(), Some("int2vector"));
        assert_eq!(by_name("double precision").map(|t| t.oid), Some(701));
        assert_eq!(of_arrow(&DataType::Utf8), 25);
    }
}
