//! Intervals (SQL's `INTERVAL`): months, days and microseconds, kept
//! apart as PostgreSQL keeps them (a month is not a fixed number of days,
//! nor a day a fixed number of seconds across a clock change).
//!
//! A declared `interval` field stores its canonical ISO 8601 text
//! ([`Interval::to_iso`]: `P1Y2M3DT4H5M6.5S`, `PT0S` for zero; each part
//! signed on its own). [`parse`] reads that, and PostgreSQL's input forms:
//! `1 year 2 mons 3 days 04:05:06.5`, `2 hours 30 minutes`, `-1 day
//! +02:00`, `1.5 days`, `3 weeks ago`, a bare number of seconds.
//! [`Interval::to_postgres`] writes PostgreSQL's default output
//! (`IntervalStyle = postgres`).
//!
//! Bounds: months and days fit in an i32 and the time part in an i64 of
//! nanoseconds (about ±292 years), so that every interval has an Arrow
//! `IntervalMonthDayNano` form.

/// An interval: `months`, then `days`, then `micros` microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Interval {
    pub months: i32,
    pub days: i32,
    pub micros: i64,
}

const MICROS_PER_SEC: i64 = 1_000_000;
const MICROS_PER_MIN: i64 = 60 * MICROS_PER_SEC;
const MICROS_PER_HOUR: i64 = 60 * MICROS_PER_MIN;
const MICROS_PER_DAY: i64 = 24 * MICROS_PER_HOUR;
/// The largest time part: what fits in i64 nanoseconds.
const MAX_MICROS: i64 = i64::MAX / 1000;

impl Interval {
    /// The interval of Arrow's `IntervalMonthDayNano` parts, if its time
    /// part is whole microseconds within bounds.
    pub fn from_month_day_nano(months: i32, days: i32, nanos: i64) -> Interval {
        Interval {
            months,
            days,
            micros: nanos / 1000,
        }
    }

    /// The nanoseconds of the time part (exact: the bounds keep it in an
    /// i64).
    pub fn nanos(&self) -> i64 {
        self.micros.saturating_mul(1000)
    }

    /// ISO 8601 duration text, the stored form: `P1Y2M3DT4H5M6.5S`, each
    /// part with its own sign, zero parts left out, `PT0S` for zero.
    pub fn to_iso(&self) -> String {
        let mut s = String::from("P");
        let (y, m) = (self.months / 12, self.months % 12);
        if y != 0 {
            s.push_str(&format!("{y}Y"));
        }
        if m != 0 {
            s.push_str(&format!("{m}M"));
        }
        if self.days != 0 {
            s.push_str(&format!("{}D", self.days));
        }
        if self.micros != 0 {
            s.push('T');
            let (h, rest) = (self.micros / MICROS_PER_HOUR, self.micros % MICROS_PER_HOUR);
            let (mi, us) = (rest / MICROS_PER_MIN, rest % MICROS_PER_MIN);
            if h != 0 {
                s.push_str(&format!("{h}H"));
            }
            if mi != 0 {
                s.push_str(&format!("{mi}M"));
            }
            if us != 0 {
                s.push_str(&seconds_text(us));
                s.push('S');
            }
        }
        if s == "P" {
            s.push_str("T0S");
        }
        s
    }

    /// PostgreSQL's output (`IntervalStyle = postgres`): `1 year 2 mons 3
    /// days 04:05:06.5`, `-1 days +02:00:00`, `00:00:00` for zero.
    pub fn to_postgres(&self) -> String {
        let mut out = String::new();
        let mut is_zero = true;
        let mut is_before = false;
        let (y, m) = (self.months / 12, self.months % 12);
        for (v, unit) in [(y, "year"), (m, "mon"), (self.days, "day")] {
            if v == 0 {
                continue;
            }
            if !is_zero {
                out.push(' ');
            }
            if is_before && v > 0 {
                out.push('+');
            }
            out.push_str(&format!("{v} {unit}{}", if v != 1 { "s" } else { "" }));
            is_before = v < 0;
            is_zero = false;
        }
        if is_zero || self.micros != 0 {
            let minus = self.micros < 0;
            let a = self.micros.unsigned_abs();
            let (h, rest) = (a / MICROS_PER_HOUR as u64, a % MICROS_PER_HOUR as u64);
            let (mi, us) = (rest / MICROS_PER_MIN as u64, rest % MICROS_PER_MIN as u64);
            if !is_zero {
                out.push(' ');
            }
            if minus {
                out.push('-');
            } else if is_before {
                out.push('+');
            }
            let secs = seconds_text(us as i64);
            let pad = if us < 10 * MICROS_PER_SEC as u64 {
                "0"
            } else {
                ""
            };
            out.push_str(&format!("{h:02}:{mi:02}:{pad}{secs}"));
        }
        out
    }
}

/// Seconds and a trimmed fraction of `us` microseconds (under a minute
/// or not): `6`, `6.5`, `0.000001`.
fn seconds_text(us: i64) -> String {
    let (s, f) = (us / MICROS_PER_SEC, (us % MICROS_PER_SEC).abs());
    let sign = if us < 0 && s == 0 { "-" } else { "" };
    if f == 0 {
        return format!("{sign}{s}");
    }
    let frac = format!("{f:06}");
    format!("{sign}{s}.{}", frac.trim_end_matches('0'))
}

/// Read an interval from ISO 8601 or PostgreSQL text; the error says what
/// was wrong.
pub fn parse(text: &str) -> Result<Interval, String> {
    let t = text.trim();
    let bad = |why: &str| format!("invalid input syntax for type interval: \"{text}\" ({why})");
    if t.is_empty() {
        return Err(bad("empty"));
    }
    let mut acc = Acc::default();
    if t.starts_with(['P', 'p']) {
        iso(&t[1..], &mut acc).map_err(|w| bad(&w))?;
    } else {
        postgres(t, &mut acc).map_err(|w| bad(&w))?;
    }
    acc.finish().map_err(|w| bad(&w))
}

/// Parts as read, before they are checked against the bounds.
#[derive(Default)]
struct Acc {
    months: f64,
    days: f64,
    micros: f64,
}

impl Acc {
    /// Add `n` of `unit`; a fraction spills to the next smaller part as
    /// PostgreSQL spills it (a month is 30 days, a day 24 hours).
    fn add(&mut self, n: f64, unit: Unit) {
        match unit {
            Unit::Months(k) => {
                let m = n * f64::from(k);
                self.months += m.trunc();
                self.days += m.fract() * 30.0;
            }
            Unit::Days(k) => {
                let d = n * f64::from(k);
                self.days += d.trunc();
                self.micros += d.fract() * MICROS_PER_DAY as f64;
            }
            Unit::Micros(k) => self.micros += n * k as f64,
        }
    }

    fn finish(self) -> Result<Interval, String> {
        let days = self.days.trunc();
        let micros = (self.micros + self.days.fract() * MICROS_PER_DAY as f64).round();
        let fits32 = |v: f64| v.is_finite() && v >= f64::from(i32::MIN) && v <= f64::from(i32::MAX);
        if !fits32(self.months) || !fits32(days) {
            return Err("out of range: months and days must fit in 32 bits".to_owned());
        }
        if !micros.is_finite() || micros.abs() > MAX_MICROS as f64 {
            return Err("out of range: the time part must be under about 292 years".to_owned());
        }
        Ok(Interval {
            months: self.months as i32,
            days: days as i32,
            micros: micros as i64,
        })
    }
}

#[derive(Clone, Copy)]
enum Unit {
    Months(i32),
    Days(i32),
    Micros(i64),
}

fn unit_of(word: &str) -> Option<Unit> {
    Some(match word.to_ascii_lowercase().as_str() {
        "millennium" | "millennia" | "millenniums" => Unit::Months(12_000),
        "century" | "centuries" | "c" => Unit::Months(1200),
        "decade" | "decades" | "dec" | "decs" => Unit::Months(120),
        "year" | "years" | "yr" | "yrs" | "y" => Unit::Months(12),
        "month" | "months" | "mon" | "mons" => Unit::Months(1),
        "week" | "weeks" | "w" => Unit::Days(7),
        "day" | "days" | "d" => Unit::Days(1),
        "hour" | "hours" | "hr" | "hrs" | "h" => Unit::Micros(MICROS_PER_HOUR),
        "minute" | "minutes" | "min" | "mins" | "m" => Unit::Micros(MICROS_PER_MIN),
        "second" | "seconds" | "sec" | "secs" | "s" => Unit::Micros(MICROS_PER_SEC),
        "millisecond" | "milliseconds" | "msec" | "msecs" | "ms" => Unit::Micros(1000),
        "microsecond" | "microseconds" | "usec" | "usecs" | "us" => Unit::Micros(1),
        _ => return None,
    })
}

/// PostgreSQL's form: `<number> <unit>` pairs, `[+-]HH:MM[:SS[.f]]`, a
/// bare number (seconds), `@` ignored, a final `ago` negating all.
fn postgres(t: &str, acc: &mut Acc) -> Result<(), String> {
    let mut words: Vec<&str> = t
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty() && *w != "@")
        .collect();
    let ago = words.last().is_some_and(|w| w.eq_ignore_ascii_case("ago"));
    if ago {
        words.pop();
    }
    let mut i = 0;
    let mut read = Acc::default();
    while i < words.len() {
        let w = words[i];
        if w.contains(':') {
            clock(w, &mut read)?;
            i += 1;
            continue;
        }
        // `10days` and `10 days` alike.
        let split = w.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(w.len());
        let (num, glued) = w.split_at(split);
        let n: f64 = num
            .parse()
            .map_err(|_| format!("`{w}` is not a number or a time"))?;
        if !n.is_finite() {
            return Err(format!("`{w}` is not a finite number"));
        }
        let unit_word = if !glued.is_empty() {
            Some(glued)
        } else if let Some(next) = words.get(i + 1)
            && unit_of(next).is_some()
        {
            i += 1;
            Some(*next)
        } else {
            None
        };
        match unit_word {
            Some(u) => {
                let unit = unit_of(u).ok_or_else(|| format!("unknown unit `{u}`"))?;
                read.add(n, unit);
            }
            // A number alone is seconds.
            None => read.add(n, Unit::Micros(MICROS_PER_SEC)),
        }
        i += 1;
    }
    let sign = if ago { -1.0 } else { 1.0 };
    acc.months += sign * read.months;
    acc.days += sign * read.days;
    acc.micros += sign * read.micros;
    Ok(())
}

/// `[+-]HH:MM[:SS[.ffffff]]`.
fn clock(w: &str, acc: &mut Acc) -> Result<(), String> {
    let (neg, body) = match w.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, w.strip_prefix('+').unwrap_or(w)),
    };
    let parts: Vec<&str> = body.split(':').collect();
    if parts.len() < 2 || parts.len() > 3 {
        return Err(format!("`{w}` is not a time of the form HH:MM[:SS]"));
    }
    let h: f64 = parts[0]
        .parse()
        .map_err(|_| format!("bad hours in `{w}`"))?;
    let m: f64 = parts[1]
        .parse()
        .map_err(|_| format!("bad minutes in `{w}`"))?;
    let s: f64 = match parts.get(2) {
        Some(p) => p.parse().map_err(|_| format!("bad seconds in `{w}`"))?,
        None => 0.0,
    };
    if !(h.is_finite() && m.is_finite() && s.is_finite()) || m >= 60.0 || s >= 60.0 {
        return Err(format!("`{w}` is not a valid time"));
    }
    let us = h * MICROS_PER_HOUR as f64 + m * MICROS_PER_MIN as f64 + s * MICROS_PER_SEC as f64;
    acc.micros += if neg { -us } else { us };
    Ok(())
}

/// ISO 8601 after the `P`: `nY nM nW nD`, then `T nH nM nS`.
fn iso(body: &str, acc: &mut Acc) -> Result<(), String> {
    let mut in_time = false;
    let mut num = String::new();
    let mut any = false;
    for c in body.chars() {
        match c {
            'T' | 't' => {
                if in_time || !num.is_empty() {
                    return Err("misplaced `T`".to_owned());
                }
                in_time = true;
            }
            '0'..='9' | '.' | '-' | '+' => num.push(c),
            _ => {
                let n: f64 = num
                    .parse()
                    .map_err(|_| format!("`{num}{c}` has no number"))?;
                num.clear();
                let unit = match (c.to_ascii_uppercase(), in_time) {
                    ('Y', false) => Unit::Months(12),
                    ('M', false) => Unit::Months(1),
                    ('W', false) => Unit::Days(7),
                    ('D', false) => Unit::Days(1),
                    ('H', true) => Unit::Micros(MICROS_PER_HOUR),
                    ('M', true) => Unit::Micros(MICROS_PER_MIN),
                    ('S', true) => Unit::Micros(MICROS_PER_SEC),
                    _ => return Err(format!("unknown designator `{c}`")),
                };
                acc.add(n, unit);
                any = true;
            }
        }
    }
    if !num.is_empty() {
        return Err(format!("`{num}` has no designator"));
    }
    if !any {
        return Err("no parts".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn iv(months: i32, days: i32, micros: i64) -> Interval {
        Interval {
            months,
            days,
            micros,
        }
    }

    #[test]
    fn postgresql_input_forms() {
        assert_eq!(parse("1 day").unwrap(), iv(0, 1, 0));
        assert_eq!(
            parse("1 year 2 mons 3 days 04:05:06.5").unwrap(),
            iv(14, 3, 4 * MICROS_PER_HOUR + 5 * MICROS_PER_MIN + 6_500_000)
        );
        assert_eq!(
            parse("2 hours 30 minutes").unwrap(),
            iv(0, 0, 150 * MICROS_PER_MIN)
        );
        assert_eq!(
            parse("-1 day +02:00").unwrap(),
            iv(0, -1, 2 * MICROS_PER_HOUR)
        );
        assert_eq!(parse("1.5 days").unwrap(), iv(0, 1, 12 * MICROS_PER_HOUR));
        assert_eq!(parse("1.5 months").unwrap(), iv(1, 15, 0));
        assert_eq!(parse("3 weeks ago").unwrap(), iv(0, -21, 0));
        assert_eq!(parse("90").unwrap(), iv(0, 0, 90 * MICROS_PER_SEC));
        assert_eq!(parse("10days").unwrap(), iv(0, 10, 0));
        assert_eq!(parse("@ 1 hour").unwrap(), iv(0, 0, MICROS_PER_HOUR));
        assert_eq!(
            parse("1 day, 02:00:00").unwrap(),
            iv(0, 1, 2 * MICROS_PER_HOUR)
        );
        for bad in ["", "x", "1 fortnight", "1:99", "P", "P1X", "1e400 days"] {
            assert!(parse(bad).is_err(), "{bad:?} must be refused");
        }
        let e = parse("1 fortnight").unwrap_err();
        assert!(e.contains("fortnight"), "{e}");
    }

    #[test]
    fn iso_forms() {
        assert_eq!(
            parse("P1Y2M3DT4H5M6.5S").unwrap(),
            parse("1 year 2 mons 3 days 04:05:06.5").unwrap()
        );
        assert_eq!(parse("PT0S").unwrap(), iv(0, 0, 0));
        assert_eq!(parse("P2W").unwrap(), iv(0, 14, 0));
        assert_eq!(iv(14, 3, 6_500_000).to_iso(), "P1Y2M3DT6.5S");
        assert_eq!(iv(0, 0, 0).to_iso(), "PT0S");
        assert_eq!(iv(-1, 0, -90 * MICROS_PER_SEC).to_iso(), "P-1MT-1M-30S");
    }

    #[test]
    fn postgresql_output() {
        assert_eq!(iv(0, 0, 0).to_postgres(), "00:00:00");
        assert_eq!(iv(0, 1, 0).to_postgres(), "1 day");
        assert_eq!(
            iv(14, 3, 4 * MICROS_PER_HOUR + 5 * MICROS_PER_MIN + 6_500_000).to_postgres(),
            "1 year 2 mons 3 days 04:05:06.5"
        );
        assert_eq!(
            iv(0, -1, 2 * MICROS_PER_HOUR).to_postgres(),
            "-1 days +02:00:00"
        );
        assert_eq!(iv(0, 0, -MICROS_PER_HOUR).to_postgres(), "-01:00:00");
        assert_eq!(iv(-13, 0, 0).to_postgres(), "-1 years -1 mons");
        assert_eq!(iv(0, 2, 1).to_postgres(), "2 days 00:00:00.000001");
    }

    proptest! {
        #[test]
        fn iso_and_postgres_text_read_back(
            months in -1_000_000i32..1_000_000,
            days in -1_000_000i32..1_000_000,
            micros in -MAX_MICROS / 2..MAX_MICROS / 2,
        ) {
            let v = iv(months, days, micros);
            prop_assert_eq!(parse(&v.to_iso()).unwrap(), v);
            prop_assert_eq!(parse(&v.to_postgres()).unwrap(), v);
        }
    }
}
