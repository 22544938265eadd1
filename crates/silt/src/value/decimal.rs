//! Exact decimals as stored: a `decimal(p, s)` field holds its canonical
//! text, `-123.45`: an optional minus, the integer digits without leading
//! zeros (`0` when there are none), and exactly `s` digits after the point
//! (no point when `s` is 0). Text keeps every digit and reads the same in
//! JSON, the CLI and SQL. The price is order: text does not sort as
//! numbers do, so decimal fields are not keys or B+-tree fields (a query
//! on them filters instead).
//!
//! Values are rounded to `s` digits half away from zero and must then have
//! at most `p - s` integer digits, as PostgreSQL's `numeric(p, s)` asks;
//! `p` is 1..=38 (what a 128-bit decimal holds).

/// The largest precision: every value fits an `i128` of units.
pub const MAX_PRECISION: u8 = 38;

/// Why text is not a value of a `decimal(p, s)`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecimalError {
    /// Not a decimal number (SQLSTATE 22P02).
    #[error("invalid input syntax for type numeric: {0}")]
    Syntax(String),
    /// Too many integer digits once rounded (SQLSTATE 22003).
    #[error(
        "numeric field overflow: a field with precision {precision}, scale {scale} must round to an absolute value less than 10^{}",
        i16::from(*precision) - i16::from(*scale)
    )]
    Overflow { precision: u8, scale: u8 },
}

/// The canonical text of `text` (a decimal number, optionally with an
/// exponent: `1.5e3`) as `decimal(precision, scale)`, or why not.
pub fn normalize(text: &str, precision: u8, scale: u8) -> Result<String, DecimalError> {
    let t = text.trim();
    let bad = || {
        DecimalError::Syntax(
            serde_json::to_string(&t.chars().take(60).collect::<String>()).unwrap_or_default(),
        )
    };
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (mantissa, exp) = match body.find(['e', 'E']) {
        Some(i) => {
            let e: i64 = body[i + 1..].parse().map_err(|_| bad())?;
            (&body[..i], e)
        }
        None => (body, 0),
    };
    let (int_part, frac_part) = match mantissa.find('.') {
        Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
        None => (mantissa, ""),
    };
    let digits_ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int_part.is_empty() && frac_part.is_empty())
        || !digits_ok(int_part)
        || !digits_ok(frac_part)
    {
        return Err(bad());
    }
    let mut digits: Vec<u8> = int_part
        .bytes()
        .chain(frac_part.bytes())
        .map(|b| b - b'0')
        .collect();
    // `point`: how many of `digits` come before the decimal point.
    let mut point = (int_part.len() as i64).saturating_add(exp);
    let lead = digits.iter().take_while(|d| **d == 0).count();
    digits.drain(..lead);
    point = point.saturating_sub(lead as i64);
    let int_room = i64::from(precision) - i64::from(scale);
    let overflow = || DecimalError::Overflow { precision, scale };
    if digits.is_empty() || point < -i64::from(scale) - 1 {
        return Ok(render(false, &[], 0, scale));
    }
    if point > int_room {
        return Err(overflow());
    }
    // Keep the digits down to 10^-scale, rounding half away from zero.
    let keep = point + i64::from(scale);
    let mut kept: Vec<u8> = if keep <= 0 {
        Vec::new()
    } else {
        let keep = keep as usize;
        let mut v: Vec<u8> = digits.iter().copied().take(keep).collect();
        v.resize(keep, 0);
        v
    };
    let round_digit = if keep < 0 {
        0
    } else {
        digits.get(keep as usize).copied().unwrap_or(0)
    };
    // (With `keep < 0` the value is below half of the last kept digit.)
    if keep >= 0 && round_digit >= 5 {
        let mut i = kept.len();
        loop {
            if i == 0 {
                kept.insert(0, 1);
                point += 1;
                break;
            }
            i -= 1;
            if kept[i] == 9 {
                kept[i] = 0;
            } else {
                kept[i] += 1;
                break;
            }
        }
    }
    if point > int_room {
        return Err(overflow());
    }
    let zero = kept.iter().all(|d| *d == 0);
    Ok(render(neg && !zero, &kept, point, scale))
}

/// `digits` with the point after `point` of them (`point` may be ≤ 0:
/// leading fraction zeros), exactly `scale` fraction digits.
fn render(neg: bool, digits: &[u8], point: i64, scale: u8) -> String {
    let mut s = String::with_capacity(digits.len() + 4);
    if neg {
        s.push('-');
    }
    let ch = |d: u8| char::from(b'0' + d);
    if point <= 0 {
        s.push('0');
    } else {
        for i in 0..point as usize {
            s.push(ch(digits.get(i).copied().unwrap_or(0)));
        }
    }
    if scale > 0 {
        s.push('.');
        for k in 0..i64::from(scale) {
            let i = point + k;
            let d = if i < 0 {
                0
            } else {
                digits.get(i as usize).copied().unwrap_or(0)
            };
            s.push(ch(d));
        }
    }
    s
}

/// The canonical text of `units` × 10^-`scale`.
pub fn format_units(units: i128, scale: u8) -> String {
    let neg = units < 0;
    let mut digits = units.unsigned_abs().to_string();
    let scale = usize::from(scale);
    if digits.len() <= scale {
        digits = format!("{}{digits}", "0".repeat(scale + 1 - digits.len()));
    }
    let (int, frac) = digits.split_at(digits.len() - scale);
    let mut s = String::with_capacity(digits.len() + 2);
    if neg {
        s.push('-');
    }
    s.push_str(int);
    if scale > 0 {
        s.push('.');
        s.push_str(frac);
    }
    s
}

/// The units (value × 10^`scale`) of a stored decimal's text; text with
/// another scale is rounded to this one first. None for text that is not
/// a decimal or does not fit 38 digits.
pub fn units(text: &str, scale: u8) -> Option<i128> {
    let fast = match text.find('.') {
        Some(i) => text.len() - i - 1 == usize::from(scale),
        None => scale == 0,
    };
    if fast {
        let mut v: i128 = 0;
        let (neg, body) = match text.strip_prefix('-') {
            Some(b) => (true, b),
            None => (false, text),
        };
        let mut any = false;
        for b in body.bytes() {
            match b {
                b'0'..=b'9' => {
                    v = v.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
                    any = true;
                }
                b'.' => {}
                _ => return None,
            }
        }
        return any.then_some(if neg { -v } else { v });
    }
    let canon = normalize(text, MAX_PRECISION, scale).ok()?;
    units(&canon, scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_as_postgres_numeric() {
        let n = |s: &str, p: u8, sc: u8| normalize(s, p, sc);
        assert_eq!(n("12.5", 10, 2).as_deref(), Ok("12.50"));
        assert_eq!(n("-0.005", 10, 2).as_deref(), Ok("-0.01"));
        assert_eq!(n("-0.004", 10, 2).as_deref(), Ok("0.00"));
        assert_eq!(n("0.004", 10, 2).as_deref(), Ok("0.00"));
        assert_eq!(n("007", 5, 0).as_deref(), Ok("7"));
        assert_eq!(n("2.5", 5, 0).as_deref(), Ok("3"));
        assert_eq!(n("-2.5", 5, 0).as_deref(), Ok("-3"));
        assert_eq!(n("1.5e3", 10, 1).as_deref(), Ok("1500.0"));
        assert_eq!(n("15e-3", 10, 3).as_deref(), Ok("0.015"));
        assert_eq!(n(".5", 3, 1).as_deref(), Ok("0.5"));
        assert_eq!(n("5.", 3, 1).as_deref(), Ok("5.0"));
        assert_eq!(n("+99.994", 4, 2).as_deref(), Ok("99.99"));
        assert_eq!(n("0", 1, 0).as_deref(), Ok("0"));
        assert_eq!(n("1e-999999", 5, 2).as_deref(), Ok("0.00"));
        assert!(
            n("99.995", 4, 2)
                .unwrap_err()
                .to_string()
                .contains("numeric field overflow")
        );
        assert!(
            n("1e999999", 38, 0)
                .unwrap_err()
                .to_string()
                .contains("overflow")
        );
        assert!(
            n("100", 4, 2)
                .unwrap_err()
                .to_string()
                .contains("less than 10^2")
        );
        for bad in ["", ".", "-", "1.2.3", "1e", "abc", "1,5", "NaN", "1 2"] {
            assert!(
                n(bad, 10, 2)
                    .unwrap_err()
                    .to_string()
                    .contains("invalid input syntax"),
                "{bad}"
            );
        }
    }

    #[test]
    fn units_and_text() {
        assert_eq!(format_units(1250, 2), "12.50");
        assert_eq!(format_units(-5, 3), "-0.005");
        assert_eq!(format_units(7, 0), "7");
        assert_eq!(units("12.50", 2), Some(1250));
        assert_eq!(units("-0.005", 3), Some(-5));
        assert_eq!(units("12.5", 2), Some(1250));
        assert_eq!(units("x", 2), None);
        let max = "9".repeat(38);
        assert_eq!(units(&max, 0), Some(10i128.pow(38) - 1));
        for u in [0i128, 1, -1, 123_456_789, -10i128.pow(37)] {
            assert_eq!(units(&format_units(u, 4), 4), Some(u));
        }
    }

    proptest::proptest! {
        /// Against a model in exact integer arithmetic: `units` at scale
        /// `from`, written as text (with an exponent sometimes), rounded to
        /// scale `to` half away from zero; too many digits is an overflow.
        #[test]
        fn rounding_matches_integer_model(
            units in -10i128.pow(20)..10i128.pow(20),
            from in 0u8..12,
            to in 0u8..12,
            precision in 1u8..=38,
            exp_form in proptest::bool::ANY,
        ) {
            let text = format_units(units, from);
            let text = if exp_form {
                // The same number as digits × 10^-from.
                format!("{units}e-{from}")
            } else {
                text
            };
            let model: i128 = if to >= from {
                units * 10i128.pow(u32::from(to - from))
            } else {
                let d = 10i128.pow(u32::from(from - to));
                let q = units / d;
                let r = (units % d).abs();
                if 2 * r >= d { q + units.signum() } else { q }
            };
            let got = normalize(&text, precision, to.min(precision));
            if to > precision {
                return Ok(());
            }
            let limit = 10i128.pow(u32::from(precision));
            if model.abs() >= limit {
                proptest::prop_assert!(got.unwrap_err().to_string().contains("overflow"));
            } else {
                let got = got.unwrap();
                proptest::prop_assert_eq!(&got, &format_units(model, to));
                proptest::prop_assert_eq!(units_of(&got, to), Some(model));
            }
        }
    }

    fn units_of(text: &str, scale: u8) -> Option<i128> {
        units(text, scale)
    }
}
