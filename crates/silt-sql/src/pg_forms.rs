//! PostgreSQL's binary (send/receive) forms of the types Silt stores in
//! another shape: `date` (days since 2000-01-01 as an `int4`),
//! `timestamp`/`timestamptz` (microseconds since 2000-01-01 00:00:00 as an
//! `int8`) and `numeric` (base-10000 digits). `COPY ... (FORMAT binary)`
//! and the server's binary result and parameter formats use them; the
//! text forms are [`silt::value::temporal`]'s and the decimal text.

/// 2000-01-01 in days since 1970-01-01.
pub const PG_EPOCH_DAYS: i64 = 10_957;
/// 2000-01-01 00:00:00 in microseconds since 1970-01-01 00:00:00.
pub const PG_EPOCH_MICROS: i64 = PG_EPOCH_DAYS * 86_400_000_000;

const NUMERIC_POS: u16 = 0x0000;
const NUMERIC_NEG: u16 = 0x4000;

/// A date (days since 1970-01-01) in binary form.
pub fn date_send(days: i64) -> [u8; 4] {
    let d = days - PG_EPOCH_DAYS;
    i32::try_from(d)
        .unwrap_or(if d < 0 { i32::MIN } else { i32::MAX })
        .to_be_bytes()
}

/// A binary date as days since 1970-01-01 (`infinity` and dates outside
/// the supported years are `None`).
pub fn date_recv(b: &[u8]) -> Option<i64> {
    let d = i64::from(i32::from_be_bytes(b.try_into().ok()?)) + PG_EPOCH_DAYS;
    silt::value::temporal::valid_days(d).then_some(d)
}

/// A timestamp (microseconds since 1970-01-01) in binary form.
pub fn timestamp_send(micros: i64) -> [u8; 8] {
    micros.saturating_sub(PG_EPOCH_MICROS).to_be_bytes()
}

/// A binary timestamp as microseconds since 1970-01-01 (`infinity` and
/// times outside the supported years are `None`).
pub fn timestamp_recv(b: &[u8]) -> Option<i64> {
    let m = i64::from_be_bytes(b.try_into().ok()?).checked_add(PG_EPOCH_MICROS)?;
    silt::value::temporal::valid_micros(m).then_some(m)
}

/// `units` × 10^-`scale` in `numeric`'s binary form: digit count, weight
/// of the first digit (in powers of 10000), sign, display scale, digits.
pub fn numeric_send(units: i128, scale: u8, out: &mut Vec<u8>) {
    let text = units.unsigned_abs().to_string();
    let scale_n = usize::from(scale);
    let padded = if text.len() <= scale_n {
        format!("{}{text}", "0".repeat(scale_n + 1 - text.len()))
    } else {
        text
    };
    let (int, frac) = padded.split_at(padded.len() - scale_n);
    // Integer digits in groups of four from the point leftwards, fraction
    // digits in groups of four from the point rightwards.
    let lead = (4 - int.len() % 4) % 4;
    let int = format!("{}{int}", "0".repeat(lead));
    let trail = (4 - frac.len() % 4) % 4;
    let frac = format!("{frac}{}", "0".repeat(trail));
    let group = |s: &str| -> Vec<i16> {
        s.as_bytes()
            .chunks(4)
            .map(|c| c.iter().fold(0i16, |acc, d| acc * 10 + i16::from(d - b'0')))
            .collect()
    };
    let mut digits = group(&int);
    let int_groups = digits.len() as i16;
    digits.extend(group(&frac));
    let mut weight = int_groups - 1;
    let lead_zero = digits.iter().take_while(|d| **d == 0).count();
    digits.drain(..lead_zero);
    weight -= lead_zero as i16;
    while digits.last() == Some(&0) {
        digits.pop();
    }
    if digits.is_empty() {
        weight = 0;
    }
    let sign = if units < 0 { NUMERIC_NEG } else { NUMERIC_POS };
    out.extend_from_slice(&(digits.len() as i16).to_be_bytes());
    out.extend_from_slice(&weight.to_be_bytes());
    out.extend_from_slice(&sign.to_be_bytes());
    out.extend_from_slice(&u16::from(scale).to_be_bytes());
    for d in digits {
        out.extend_from_slice(&d.to_be_bytes());
    }
}

/// A binary `numeric` as plain decimal text with its display scale
/// (`NaN`, infinities and values beyond 38 digits are `None`: Silt's
/// decimals are finite `decimal(38)` at most).
pub fn numeric_recv(b: &[u8]) -> Option<String> {
    let word = |i: usize| -> Option<[u8; 2]> { b.get(i..i + 2)?.try_into().ok() };
    let ndigits = i16::from_be_bytes(word(0)?);
    let weight = i16::from_be_bytes(word(2)?);
    let sign = u16::from_be_bytes(word(4)?);
    let dscale = u16::from_be_bytes(word(6)?);
    if ndigits < 0 || b.len() != 8 + 2 * ndigits as usize {
        return None;
    }
    if sign != NUMERIC_POS && sign != NUMERIC_NEG {
        return None;
    }
    let mut digits = String::with_capacity(4 * ndigits as usize);
    for i in 0..ndigits as usize {
        let d = i16::from_be_bytes(word(8 + 2 * i)?);
        if !(0..10_000).contains(&d) {
            return None;
        }
        digits.push_str(&format!("{d:04}"));
    }
    // The digits are 0.dddd × 10000^(weight + 1).
    let exp = 4 * (i64::from(weight) + 1);
    let neg = if sign == NUMERIC_NEG { "-" } else { "" };
    let text = if digits.is_empty() {
        "0".to_owned()
    } else {
        format!("{neg}0.{digits}e{exp}")
    };
    let scale = u8::try_from(dscale)
        .ok()?
        .min(silt::value::decimal::MAX_PRECISION);
    silt::value::decimal::normalize(&text, silt::value::decimal::MAX_PRECISION, scale).ok()
}

/// PostgreSQL's binary interval: microseconds (i64), days (i32), months
/// (i32), big-endian.
pub fn interval_send(v: &silt::value::interval::Interval) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&v.micros.to_be_bytes());
    b[8..12].copy_from_slice(&v.days.to_be_bytes());
    b[12..].copy_from_slice(&v.months.to_be_bytes());
    b
}

/// [`interval_send`]'s bytes read back; `None` when not 16 bytes or the
/// time part is out of Silt's bounds.
pub fn interval_recv(b: &[u8]) -> Option<silt::value::interval::Interval> {
    let b: &[u8; 16] = b.try_into().ok()?;
    let micros = i64::from_be_bytes(b[..8].try_into().ok()?);
    let days = i32::from_be_bytes(b[8..12].try_into().ok()?);
    let months = i32::from_be_bytes(b[12..].try_into().ok()?);
    (micros.checked_mul(1000).is_some()).then_some(silt::value::interval::Interval {
        months,
        days,
        micros,
    })
}

/// The header of a one-dimensional array in binary form (`array_send`):
/// dimensions, a has-nulls flag, the element type's oid, then the length
/// and lower bound (1) of the dimension; an empty array has no dimension.
/// Each element follows as its length (-1 for null) and bytes.
pub fn array_header(elem_oid: u32, len: usize, has_nulls: bool, out: &mut Vec<u8>) {
    let ndim: i32 = if len == 0 { 0 } else { 1 };
    out.extend_from_slice(&ndim.to_be_bytes());
    out.extend_from_slice(&i32::from(has_nulls).to_be_bytes());
    out.extend_from_slice(&elem_oid.to_be_bytes());
    if len > 0 {
        out.extend_from_slice(&i32::try_from(len).unwrap_or(i32::MAX).to_be_bytes());
        out.extend_from_slice(&1i32.to_be_bytes());
    }
}

/// The elements (`None` for null) of a binary array, or why it does not
/// read: more than one dimension, a length past the end. The element
/// type's oid is not checked (clients send `int4` elements for `int8[]`).
pub fn array_recv(b: &[u8]) -> Result<Vec<Option<&[u8]>>, String> {
    let mut at = 0usize;
    let int = |b: &[u8], at: &mut usize| -> Result<i32, String> {
        let v = b
            .get(*at..*at + 4)
            .and_then(|s| s.try_into().ok())
            .map(i32::from_be_bytes)
            .ok_or_else(|| "the binary array ends early".to_owned())?;
        *at += 4;
        Ok(v)
    };
    let ndim = int(b, &mut at)?;
    let _has_nulls = int(b, &mut at)?;
    let _elem = int(b, &mut at)?;
    let len = match ndim {
        0 => 0usize,
        1 => {
            let len = int(b, &mut at)?;
            let _lower = int(b, &mut at)?;
            usize::try_from(len).map_err(|_| format!("a binary array of length {len}"))?
        }
        n => {
            return Err(format!(
                "a binary array of {n} dimensions; only one-dimensional arrays are supported"
            ));
        }
    };
    // Each element takes at least its 4-byte length: a claimed length
    // beyond that is refused before anything is allocated for it.
    if len > b.len().saturating_sub(at) / 4 {
        return Err(format!(
            "a binary array claims {len} elements in {} bytes",
            b.len()
        ));
    }
    let mut out = Vec::with_capacity(len);
    for _ in 0..len {
        let n = int(b, &mut at)?;
        if n < 0 {
            out.push(None);
            continue;
        }
        let n = n as usize;
        let e = b
            .get(at..at + n)
            .ok_or_else(|| "a binary array element runs past the end".to_owned())?;
        at += n;
        out.push(Some(e));
    }
    if at != b.len() {
        return Err(format!("{} bytes follow the binary array", b.len() - at));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use silt::value::decimal::units;

    fn round_trip(text: &str, scale: u8) -> String {
        let u = units(text, scale).expect("units");
        let mut b = Vec::new();
        numeric_send(u, scale, &mut b);
        numeric_recv(&b).expect("recv")
    }

    #[test]
    fn numerics_round_trip() {
        for (t, s) in [
            ("0", 0),
            ("0.00", 2),
            ("12.50", 2),
            ("-12.50", 2),
            ("10000", 0),
            ("123456789.123456789", 9),
            ("-0.0001", 4),
            ("99999999999999999999999999999999999999", 0),
        ] {
            assert_eq!(round_trip(t, s), t, "{t}");
        }
    }

    #[test]
    fn numeric_binary_matches_postgres() {
        // numeric_send('12.50'::numeric(10,2)): 2 digits, weight 0,
        // positive, dscale 2, digits 12 and 5000.
        let mut b = Vec::new();
        numeric_send(1250, 2, &mut b);
        assert_eq!(b, [0, 2, 0, 0, 0, 0, 0, 2, 0, 12, 0x13, 0x88]);
        // -10000: one digit 1 of weight 1.
        let mut b = Vec::new();
        numeric_send(-10000, 0, &mut b);
        assert_eq!(b, [0, 1, 0, 1, 0x40, 0, 0, 0, 0, 1]);
        assert_eq!(numeric_recv(&[0, 0, 0, 0, 0xC0, 0, 0, 0]), None);
        assert_eq!(numeric_recv(&[0, 1, 0, 0]), None);
    }

    #[test]
    fn dates_and_times() {
        assert_eq!(date_send(PG_EPOCH_DAYS), [0, 0, 0, 0]);
        assert_eq!(date_recv(&date_send(19_783)), Some(19_783));
        assert_eq!(date_recv(&i32::MAX.to_be_bytes()), None);
        assert_eq!(timestamp_recv(&timestamp_send(-5)), Some(-5));
        assert_eq!(timestamp_recv(&i64::MAX.to_be_bytes()), None);
        assert_eq!(timestamp_send(PG_EPOCH_MICROS), [0; 8]);
    }

    #[test]
    fn binary_arrays_round_trip_and_refuse_lies() {
        let mut b = Vec::new();
        array_header(20, 3, true, &mut b);
        for e in [Some(&7i64.to_be_bytes()[..]), None, Some(&[0u8; 8][..])] {
            match e {
                Some(x) => {
                    b.extend_from_slice(&(x.len() as i32).to_be_bytes());
                    b.extend_from_slice(x);
                }
                None => b.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        let got = array_recv(&b).expect("reads");
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], Some(&7i64.to_be_bytes()[..]));
        assert_eq!(got[1], None);
        let mut empty = Vec::new();
        array_header(20, 0, false, &mut empty);
        assert_eq!(
            array_recv(&empty).expect("empty"),
            Vec::<Option<&[u8]>>::new()
        );
        // A header claiming two billion elements is refused unallocated.
        let mut lie = Vec::new();
        array_header(20, 2_000_000_000, false, &mut lie);
        assert!(array_recv(&lie).expect_err("lie").contains("claims"));
        assert!(array_recv(&b[..b.len() - 1]).is_err());
        let mut two = Vec::new();
        two.extend_from_slice(&2i32.to_be_bytes());
        two.extend_from_slice(&[0u8; 8]);
        assert!(array_recv(&two).expect_err("2d").contains("dimensions"));
    }
}
