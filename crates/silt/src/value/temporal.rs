//! Dates and timestamps as stored: a `date` field holds an int, days since
//! 1970-01-01; `timestamp` and `timestamptz` hold an int, microseconds
//! since 1970-01-01 00:00:00 (UTC for `timestamptz`). Ints keep the key
//! encoding's order, so dates and times are keys and B+-tree fields whose
//! ranges read in time order.
//!
//! Text is read as PostgreSQL reads it in ISO form: `2024-03-01`,
//! `2024-03-01 12:30:00`, `2024-03-01T12:30:00.123456`, with an optional
//! zone `Z`, `+02`, `+02:00` or `-0530` (a `timestamptz` is shifted to
//! UTC; a `timestamp` ignores the zone, as PostgreSQL does). Text without
//! a zone is UTC for `timestamptz` (Silt's sessions run in UTC). More than
//! six fractional digits round to the microsecond. Years run from -262143
//! to 262142 (chrono's range), which every stored value stays inside, so
//! every stored value can be printed.

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta};

const UNIX_EPOCH_DAYS_FROM_CE: i32 = 719_163;

/// Microseconds in a day.
pub const MICROS_PER_DAY: i64 = 86_400_000_000;

/// The days since 1970-01-01 of a date.
pub fn date_days(d: NaiveDate) -> i64 {
    i64::from(d.num_days_from_ce() - UNIX_EPOCH_DAYS_FROM_CE)
}

/// The date `days` after 1970-01-01, when within the supported years.
pub fn days_date(days: i64) -> Option<NaiveDate> {
    let d = i32::try_from(days).ok()?;
    NaiveDate::from_num_days_from_ce_opt(d.checked_add(UNIX_EPOCH_DAYS_FROM_CE)?)
}

/// The date and time `micros` after 1970-01-01 00:00:00, when within the
/// supported years.
pub fn micros_datetime(micros: i64) -> Option<NaiveDateTime> {
    DateTime::from_timestamp_micros(micros).map(|t| t.naive_utc())
}

/// Whether an int is a storable date (days within the supported years).
pub fn valid_days(days: i64) -> bool {
    days_date(days).is_some()
}

/// Whether an int is a storable timestamp (microseconds within the
/// supported years).
pub fn valid_micros(micros: i64) -> bool {
    micros_datetime(micros).is_some()
}

/// Parse a date: `YYYY-MM-DD` (a time after it is refused, as PostgreSQL
/// does for a bare time-of-day; use a timestamp for that).
pub fn parse_date(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let (date, rest) = split_date(t);
    if !rest.trim().is_empty() {
        return Err(format!(
            "invalid input syntax for type date: {}; expected YYYY-MM-DD",
            quoted(text)
        ));
    }
    let d = NaiveDate::parse_from_str(date, "%Y-%m-%d").map_err(|e| {
        format!(
            "invalid input syntax for type date: {} ({e}); expected YYYY-MM-DD",
            quoted(text)
        )
    })?;
    Ok(date_days(d))
}

/// Parse a timestamp to microseconds since the epoch. `with_zone`:
/// `timestamptz` (a zone in the text shifts the value to UTC); otherwise a
/// zone in the text is ignored.
pub fn parse_timestamp(text: &str, with_zone: bool) -> Result<i64, String> {
    let ty = if with_zone {
        "timestamp with time zone"
    } else {
        "timestamp"
    };
    let bad = |why: &str| {
        format!(
            "invalid input syntax for type {ty}: {}{why}; expected YYYY-MM-DD[ HH:MM[:SS[.ffffff]]][zone]",
            quoted(text)
        )
    };
    let t = text.trim();
    let (date, rest) = split_date(t);
    let d = NaiveDate::parse_from_str(date, "%Y-%m-%d").map_err(|e| bad(&format!(" ({e})")))?;
    let rest = rest.trim_start_matches(['T', 't', ' ']);
    let (time, zone) = split_zone(rest);
    let offset_secs = match zone {
        "" => 0,
        z => parse_offset(z).ok_or_else(|| bad(&format!(" (zone `{z}`)")))?,
    };
    let (time, nanos_extra) = if time.is_empty() {
        (NaiveTime::MIN, 0)
    } else {
        parse_time(time).ok_or_else(|| bad(""))?
    };
    let mut dt = d.and_time(time);
    if with_zone {
        dt = dt
            .checked_sub_signed(TimeDelta::seconds(i64::from(offset_secs)))
            .ok_or_else(|| bad(" (out of range)"))?;
    }
    let micros = dt.and_utc().timestamp_micros();
    let micros = micros
        .checked_add(nanos_extra)
        .filter(|m| valid_micros(*m))
        .ok_or_else(|| bad(" (out of range)"))?;
    Ok(micros)
}

/// `YYYY-MM-DD` and what follows it. The year may have a sign and more
/// than four digits.
fn split_date(t: &str) -> (&str, &str) {
    let start = usize::from(t.starts_with(['-', '+']));
    let mut dashes = 0;
    for (i, c) in t.char_indices().skip(start) {
        match c {
            '-' => dashes += 1,
            c if c.is_ascii_digit() => {}
            _ => return (&t[..i], &t[i..]),
        }
        if dashes > 2 {
            return (&t[..i], &t[i..]);
        }
    }
    (t, "")
}

/// `HH:MM[:SS[.f]]` and its zone (`Z`, `+HH`, `+HH:MM`, `-HHMM`, ` UTC`).
fn split_zone(rest: &str) -> (&str, &str) {
    let r = rest.trim_end();
    if let Some(stripped) = r.strip_suffix(['Z', 'z']) {
        return (stripped.trim_end(), "+00");
    }
    for suffix in [" UTC", " utc", " GMT", " gmt"] {
        if let Some(stripped) = r.strip_suffix(suffix) {
            return (stripped.trim_end(), "+00");
        }
    }
    match r.rfind(['+', '-']) {
        Some(i) => (r[..i].trim_end(), &r[i..]),
        None => (r, ""),
    }
}

/// `+HH`, `+HH:MM`, `+HHMM`, `+HH:MM:SS` in seconds east of UTC.
fn parse_offset(z: &str) -> Option<i32> {
    let (sign, body) = match z.as_bytes().first()? {
        b'+' => (1, &z[1..]),
        b'-' => (-1, &z[1..]),
        _ => return None,
    };
    let digits: String = body.chars().filter(|c| *c != ':').collect();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let num = |s: &str| s.parse::<i32>().ok();
    let (h, m, s) = match digits.len() {
        1 | 2 => (num(&digits)?, 0, 0),
        4 => (num(&digits[..2])?, num(&digits[2..])?, 0),
        6 => (num(&digits[..2])?, num(&digits[2..4])?, num(&digits[4..])?),
        _ => return None,
    };
    if h > 15 || m > 59 || s > 59 {
        return None;
    }
    Some(sign * (h * 3600 + m * 60 + s))
}

/// `HH:MM[:SS[.f]]`: the time to the microsecond and, when rounding the
/// fraction carries into the next second, the microseconds to add.
fn parse_time(t: &str) -> Option<(NaiveTime, i64)> {
    let (hms, frac) = match t.find('.') {
        Some(i) => (&t[..i], &t[i + 1..]),
        None => (t, ""),
    };
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut parts = hms.split(':');
    let h: u32 = parts.next()?.parse().ok()?;
    let m: u32 = parts.next()?.parse().ok()?;
    let s: u32 = match parts.next() {
        Some(s) => s.parse().ok()?,
        None if frac.is_empty() => 0,
        None => return None,
    };
    if parts.next().is_some() {
        return None;
    }
    // Microseconds, rounded half up on the seventh digit.
    let mut micros: i64 = 0;
    for i in 0..6 {
        let d = frac.as_bytes().get(i).map_or(0, |b| i64::from(b - b'0'));
        micros = micros * 10 + d;
    }
    if frac.as_bytes().get(6).is_some_and(|b| *b >= b'5') {
        micros += 1;
    }
    // 24:00:00 is midnight of the next day, as in PostgreSQL.
    if h == 24 && m == 0 && s == 0 && micros == 0 {
        return Some((NaiveTime::MIN, 86_400_000_000));
    }
    let base = NaiveTime::from_hms_opt(h, m, s)?;
    Some((base, micros))
}

/// A date as PostgreSQL prints it: `2024-03-01` (`-0044-03-15` before year 1).
pub fn format_date(days: i64) -> Option<String> {
    days_date(days).map(|d| d.format("%Y-%m-%d").to_string())
}

/// A timestamp as PostgreSQL prints it: `2024-03-01 12:30:00[.123456]`,
/// with `+00` after it for `timestamptz`.
pub fn format_timestamp(micros: i64, with_zone: bool) -> Option<String> {
    let dt = micros_datetime(micros)?;
    let mut s = if micros.rem_euclid(1_000_000) == 0 {
        dt.format("%Y-%m-%d %H:%M:%S").to_string()
    } else {
        let mut s = dt.format("%Y-%m-%d %H:%M:%S%.6f").to_string();
        while s.ends_with('0') {
            s.pop();
        }
        s
    };
    if with_zone {
        s.push_str("+00");
    }
    Some(s)
}

fn quoted(s: &str) -> String {
    let shown: String = s.chars().take(60).collect();
    serde_json::to_string(&shown).unwrap_or(shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(parse_date("1970-01-01"), Ok(0));
        assert_eq!(parse_date(" 2024-03-01 "), Ok(19_783));
        assert_eq!(parse_date("1969-12-31"), Ok(-1));
        assert_eq!(format_date(19_783).as_deref(), Some("2024-03-01"));
        assert!(parse_date("2024-02-30").unwrap_err().contains("type date"));
        assert!(parse_date("2024-03-01 10:00").is_err());
        assert!(parse_date("yesterday").is_err());
        assert!(valid_days(0) && !valid_days(i64::MAX));
    }

    #[test]
    fn timestamps() {
        let t = |s: &str| parse_timestamp(s, false);
        let tz = |s: &str| parse_timestamp(s, true);
        assert_eq!(t("1970-01-01 00:00:01"), Ok(1_000_000));
        assert_eq!(t("1970-01-01T00:00:01.5"), Ok(1_500_000));
        assert_eq!(t("1970-01-01"), Ok(0));
        assert_eq!(t("1970-01-01 00:01"), Ok(60_000_000));
        // A zone is ignored without time zone, applied with one.
        assert_eq!(t("1970-01-01 02:00:00+02"), Ok(7_200_000_000));
        assert_eq!(tz("1970-01-01 02:00:00+02"), Ok(0));
        assert_eq!(tz("1970-01-01 02:00:00+02:00"), Ok(0));
        assert_eq!(tz("1969-12-31 18:30:00-0530"), Ok(0));
        assert_eq!(tz("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(tz("1970-01-01 00:00:00 UTC"), Ok(0));
        assert_eq!(tz("1970-01-01 00:00:00"), Ok(0));
        // Rounding to the microsecond, carrying into the second.
        assert_eq!(t("1970-01-01 00:00:00.0000015"), Ok(2));
        assert_eq!(t("1970-01-01 00:00:00.9999996"), Ok(1_000_000));
        assert_eq!(t("1970-01-01 24:00:00"), Ok(86_400_000_000));
        assert_eq!(t("1969-12-31 23:59:59.999999"), Ok(-1));
        for bad in [
            "",
            "1970-13-01",
            "1970-01-01 25:00",
            "1970-01-01 10",
            "1970-01-01 10:00:00+99",
            "1970-01-01 10:00:xx",
            "now",
        ] {
            let e = t(bad).unwrap_err();
            assert!(
                e.contains("invalid input syntax for type timestamp"),
                "{bad}: {e}"
            );
        }
        assert_eq!(
            format_timestamp(1_500_000, false).as_deref(),
            Some("1970-01-01 00:00:01.5")
        );
        assert_eq!(
            format_timestamp(0, true).as_deref(),
            Some("1970-01-01 00:00:00+00")
        );
        assert_eq!(
            format_timestamp(-1, false).as_deref(),
            Some("1969-12-31 23:59:59.999999")
        );
        assert!(!valid_micros(i64::MAX) && valid_micros(0));
    }

    #[test]
    fn text_round_trips() {
        for m in [0i64, 1, -1, 1_700_000_000_123_456, -62_000_000_000_000_000] {
            let s = format_timestamp(m, false).expect("in range");
            assert_eq!(parse_timestamp(&s, false), Ok(m), "{s}");
            let s = format_timestamp(m, true).expect("in range");
            assert_eq!(parse_timestamp(&s, true), Ok(m), "{s}");
        }
        for d in [0i64, -1, 19_783, -700_000, 2_000_000] {
            let s = format_date(d).expect("in range");
            assert_eq!(parse_date(&s), Ok(d), "{s}");
        }
    }

    proptest::proptest! {
        /// Every storable time prints and reads back to itself, with and
        /// without a zone, and shifting by a zone moves it by that much.
        #[test]
        fn any_time_round_trips(
            micros in -8_000_000_000_000_000_000i64..8_000_000_000_000_000_000i64,
            offset_min in -(15 * 60 - 1)..(15 * 60i32),
        ) {
            proptest::prop_assume!(valid_micros(micros));
            let s = format_timestamp(micros, false).unwrap();
            proptest::prop_assert_eq!(parse_timestamp(&s, false), Ok(micros));
            let s = format_timestamp(micros, true).unwrap();
            proptest::prop_assert_eq!(parse_timestamp(&s, true), Ok(micros));
            let sign = if offset_min < 0 { '-' } else { '+' };
            let m = offset_min.abs();
            let zoned = format!(
                "{}{sign}{:02}:{:02}",
                format_timestamp(micros, false).unwrap(),
                m / 60,
                m % 60
            );
            if let Ok(t) = parse_timestamp(&zoned, true) {
                proptest::prop_assert_eq!(t, micros - i64::from(offset_min) * 60_000_000);
            }
            let days = micros.div_euclid(86_400_000_000);
            let d = format_date(days).unwrap();
            proptest::prop_assert_eq!(parse_date(&d), Ok(days));
        }
    }
}
