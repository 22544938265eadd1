//! Rows of `COPY ... FROM STDIN` data, read as the data arrives: in
//! PostgreSQL's text, CSV and binary formats, from pieces that need not
//! end at a row's end.
//!
//! A [`Decoder`] is handed the unread bytes and returns one row at a time:
//! its fields, unescaped into a scratch buffer the row borrows (no
//! allocation per field), and how many bytes it used. A row that is not
//! complete yet is [`Step::NeedMore`]: the caller keeps the bytes and calls
//! again with more appended. At the end of the data ([`Decoder::next`] with
//! `last`), a final text or CSV line without its newline is a row.

use std::ops::Range;

use super::{CopyFormat, CopyOptions};

/// The signature that starts binary COPY data.
pub const BINARY_SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";

/// What one call of [`Decoder::next`] found.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// A row: `used` bytes were read; its fields are in [`Decoder::fields`].
    Row { used: usize },
    /// Bytes that are not a row (the header line, the binary header):
    /// `used` bytes were read.
    Skip { used: usize },
    /// The bytes hold no complete row: send more.
    NeedMore,
    /// The end-of-data marker (`\.` alone on a line, or the binary
    /// trailer): whatever follows is ignored.
    End { used: usize },
}

/// A row or file that does not follow the format (SQLSTATE 22P04).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FormatError(pub String);

fn bad(msg: impl Into<String>) -> FormatError {
    FormatError(msg.into())
}

/// Reads rows of one `COPY ... FROM STDIN`.
#[derive(Debug)]
pub struct Decoder {
    format: CopyFormat,
    delimiter: u8,
    quote: u8,
    escape: u8,
    null: Vec<u8>,
    /// Columns each row must have.
    columns: usize,
    /// The header (CSV/text line, or the binary signature) is still to come.
    header_pending: bool,
    scratch: Vec<u8>,
    fields: Vec<Option<Range<usize>>>,
    /// Per field: was it quoted (CSV: a quoted empty string is not NULL).
    quoted: Vec<bool>,
    /// CSV's `FORCE_NOT_NULL` and `FORCE_NULL`, per field.
    force_not_null: Vec<bool>,
    force_null: Vec<bool>,
}

impl Decoder {
    pub fn new(opts: &CopyOptions, columns: usize) -> Decoder {
        Decoder {
            format: opts.format,
            delimiter: opts.delimiter,
            quote: opts.quote,
            escape: opts.escape,
            null: opts.null.as_bytes().to_vec(),
            columns,
            header_pending: opts.header || opts.format == CopyFormat::Binary,
            scratch: Vec::new(),
            fields: Vec::with_capacity(columns),
            quoted: Vec::with_capacity(columns),
            force_not_null: vec![false; columns],
            force_null: vec![false; columns],
        }
    }

    /// CSV only: per field, an unquoted NULL string is text
    /// (`FORCE_NOT_NULL`), a quoted one is NULL (`FORCE_NULL`).
    pub fn with_forced(mut self, force_not_null: Vec<bool>, force_null: Vec<bool>) -> Decoder {
        self.force_not_null = force_not_null;
        self.force_null = force_null;
        self
    }

    /// The fields of the last row: `None` for NULL, else the bytes.
    pub fn fields(&self) -> impl ExactSizeIterator<Item = Option<&[u8]>> + '_ {
        self.fields
            .iter()
            .map(|f| f.as_ref().map(|r| &self.scratch[r.clone()]))
    }

    /// Read the next row from `buf` (`last`: no more bytes will come).
    pub fn next(&mut self, buf: &[u8], last: bool) -> Result<Step, FormatError> {
        self.scratch.clear();
        self.fields.clear();
        self.quoted.clear();
        match self.format {
            CopyFormat::Binary => self.next_binary(buf, last),
            CopyFormat::Text | CopyFormat::Csv => {
                let step = if self.format == CopyFormat::Text {
                    self.next_text(buf, last)?
                } else {
                    self.next_csv(buf, last)?
                };
                match step {
                    Step::Row { used } if self.header_pending => {
                        self.header_pending = false;
                        Ok(Step::Skip { used })
                    }
                    Step::Row { used } => {
                        self.check_width()?;
                        Ok(Step::Row { used })
                    }
                    other => Ok(other),
                }
            }
        }
    }

    fn check_width(&self) -> Result<(), FormatError> {
        let n = self.fields.len();
        if n < self.columns {
            return Err(bad(format!(
                "missing data: the row has {n} of the {} columns",
                self.columns
            )));
        }
        if n > self.columns {
            return Err(bad(format!(
                "extra data after last expected column: the row has {n} fields for {} columns",
                self.columns
            )));
        }
        Ok(())
    }

    /// Text format: one line per row; fields split at the delimiter;
    /// backslash escapes; the NULL string compared before unescaping.
    fn next_text(&mut self, buf: &[u8], last: bool) -> Result<Step, FormatError> {
        let (line, used) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], i + 1),
            None if last && !buf.is_empty() => (buf, buf.len()),
            None => return Ok(Step::NeedMore),
        };
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line == b"\\." {
            return Ok(Step::End { used });
        }
        let mut start = 0;
        let mut i = 0;
        while i <= line.len() {
            if i == line.len() || line[i] == self.delimiter {
                let raw = &line[start..i];
                if raw == self.null.as_slice() {
                    self.fields.push(None);
                } else {
                    let from = self.scratch.len();
                    unescape_text(raw, &mut self.scratch);
                    self.fields.push(Some(from..self.scratch.len()));
                }
                start = i + 1;
                i += 1;
            } else if line[i] == b'\\' {
                i += 2;
                if i > line.len() {
                    // A backslash at the end of the line: PostgreSQL's
                    // "end-of-copy marker corrupt" unless it is a field.
                    return Err(bad("a backslash at the end of a line"));
                }
            } else {
                i += 1;
            }
        }
        Ok(Step::Row { used })
    }

    /// CSV: fields split at the delimiter outside quotes; a quoted field
    /// may hold delimiters and newlines; an unquoted field equal to the
    /// NULL string is NULL.
    fn next_csv(&mut self, buf: &[u8], last: bool) -> Result<Step, FormatError> {
        let (q, e, d) = (self.quote, self.escape, self.delimiter);
        // The end-of-data marker, alone on its line.
        for marker in [&b"\\.\n"[..], b"\\.\r\n"] {
            if buf.starts_with(marker) {
                return Ok(Step::End { used: marker.len() });
            }
        }
        if buf == b"\\." && last {
            return Ok(Step::End { used: 2 });
        }
        let mut i = 0;
        let mut field_start = self.scratch.len();
        let mut raw_start = 0;
        let mut quoted = false;
        let mut in_quotes = false;
        loop {
            if i >= buf.len() {
                if !last || in_quotes {
                    if last && in_quotes {
                        return Err(bad("unterminated CSV quoted field"));
                    }
                    return Ok(Step::NeedMore);
                }
                if buf.is_empty() {
                    return Ok(Step::NeedMore);
                }
                self.end_csv_field(&buf[raw_start..i], field_start, quoted);
                return Ok(Step::Row { used: i });
            }
            let b = buf[i];
            if in_quotes {
                if b == e && e != q && i + 1 < buf.len() && (buf[i + 1] == q || buf[i + 1] == e) {
                    self.scratch.push(buf[i + 1]);
                    i += 2;
                } else if b == q {
                    if e == q && i + 1 < buf.len() && buf[i + 1] == q {
                        self.scratch.push(q);
                        i += 2;
                    } else if e == q && i + 1 == buf.len() && !last {
                        // Is it `""` or the closing quote? Wait and see.
                        return Ok(Step::NeedMore);
                    } else {
                        in_quotes = false;
                        i += 1;
                    }
                } else {
                    self.scratch.push(b);
                    i += 1;
                }
            } else if b == q {
                in_quotes = true;
                quoted = true;
                i += 1;
            } else if b == d {
                self.end_csv_field(&buf[raw_start..i], field_start, quoted);
                i += 1;
                field_start = self.scratch.len();
                raw_start = i;
                quoted = false;
            } else if b == b'\n' || b == b'\r' {
                self.end_csv_field(&buf[raw_start..i], field_start, quoted);
                let used = if b == b'\r' {
                    if i + 1 < buf.len() {
                        i + 1 + usize::from(buf[i + 1] == b'\n')
                    } else if last {
                        i + 1
                    } else {
                        return Ok(Step::NeedMore);
                    }
                } else {
                    i + 1
                };
                return Ok(Step::Row { used });
            } else {
                self.scratch.push(b);
                i += 1;
            }
        }
    }

    fn end_csv_field(&mut self, raw: &[u8], from: usize, quoted: bool) {
        let i = self.fields.len();
        let flag = |v: &[bool]| v.get(i).copied().unwrap_or(false);
        let is_null = if quoted {
            flag(&self.force_null) && self.scratch[from..] == *self.null.as_slice()
        } else {
            raw == self.null.as_slice() && !flag(&self.force_not_null)
        };
        if is_null {
            self.scratch.truncate(from);
            self.fields.push(None);
        } else {
            self.fields.push(Some(from..self.scratch.len()));
        }
        self.quoted.push(quoted);
    }

    /// Binary format: the signature, flags and header extension, then per
    /// row a 16-bit field count and per field a 32-bit length (-1: NULL)
    /// and the bytes; a count of -1 ends the data.
    fn next_binary(&mut self, buf: &[u8], last: bool) -> Result<Step, FormatError> {
        let need_more = |what: &str| {
            if last {
                Err(bad(format!("the binary COPY data ends inside {what}")))
            } else {
                Ok(Step::NeedMore)
            }
        };
        if self.header_pending {
            if buf.len() < BINARY_SIGNATURE.len() + 8 {
                if !BINARY_SIGNATURE.starts_with(&buf[..buf.len().min(11)]) {
                    return Err(bad(
                        "the binary COPY data does not start with PGCOPY's signature",
                    ));
                }
                return need_more("the header");
            }
            if &buf[..11] != BINARY_SIGNATURE {
                return Err(bad(
                    "the binary COPY data does not start with PGCOPY's signature",
                ));
            }
            let flags = be_i32(&buf[11..15]);
            if flags & 0x0001_0000 != 0 {
                return Err(bad("binary COPY data with OIDs is not supported"));
            }
            if flags as u32 & 0xFFFE_0000 != 0 {
                return Err(bad("unrecognized critical flags in the binary COPY header"));
            }
            let ext = usize::try_from(be_i32(&buf[15..19]))
                .map_err(|_| bad("a negative header extension length"))?;
            let used = 19 + ext;
            if buf.len() < used {
                return need_more("the header");
            }
            self.header_pending = false;
            return Ok(Step::Skip { used });
        }
        if buf.len() < 2 {
            // Data that ends between rows without the trailer ends there.
            return if buf.is_empty() {
                Ok(Step::NeedMore)
            } else {
                need_more("a row")
            };
        }
        let count = i16::from_be_bytes([buf[0], buf[1]]);
        if count == -1 {
            return Ok(Step::End { used: 2 });
        }
        if usize::try_from(count).ok() != Some(self.columns) {
            return Err(bad(format!(
                "a row has {count} fields, expected {}",
                self.columns
            )));
        }
        let mut at = 2;
        for _ in 0..self.columns {
            if buf.len() < at + 4 {
                return need_more("a row");
            }
            let len = be_i32(&buf[at..at + 4]);
            at += 4;
            if len == -1 {
                self.fields.push(None);
                continue;
            }
            let len = usize::try_from(len).map_err(|_| bad(format!("a field length of {len}")))?;
            if buf.len() < at + len {
                return need_more("a row");
            }
            let from = self.scratch.len();
            self.scratch.extend_from_slice(&buf[at..at + len]);
            self.fields.push(Some(from..self.scratch.len()));
            at += len;
        }
        Ok(Step::Row { used: at })
    }
}

fn be_i32(b: &[u8]) -> i32 {
    i32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// The text format's backslash escapes: `\b \f \n \r \t \v`, octal
/// `\ooo`, hex `\xhh`; any other escaped byte stands for itself.
fn unescape_text(raw: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if b != b'\\' || i + 1 == raw.len() {
            out.push(b);
            i += 1;
            continue;
        }
        let c = raw[i + 1];
        i += 2;
        match c {
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(11),
            b'0'..=b'7' => {
                let mut v = u32::from(c - b'0');
                for _ in 0..2 {
                    match raw.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            v = v * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                out.push((v & 0xFF) as u8);
            }
            b'x' => {
                let hex = |b: u8| (b as char).to_digit(16);
                match raw.get(i).copied().and_then(hex) {
                    Some(h) => {
                        i += 1;
                        let mut v = h;
                        if let Some(l) = raw.get(i).copied().and_then(hex) {
                            v = v * 16 + l;
                            i += 1;
                        }
                        out.push(v as u8);
                    }
                    None => out.push(b'x'),
                }
            }
            other => out.push(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(format: CopyFormat) -> CopyOptions {
        CopyOptions::defaults(format)
    }

    /// Every row of `data` fed in pieces of `piece` bytes, as text.
    fn rows(
        opts: &CopyOptions,
        columns: usize,
        data: &[u8],
        piece: usize,
    ) -> Vec<Vec<Option<String>>> {
        let mut d = Decoder::new(opts, columns);
        let mut buf: Vec<u8> = Vec::new();
        let mut out = Vec::new();
        let mut fed = 0;
        loop {
            let last = fed >= data.len();
            match d.next(&buf, last).expect("decode") {
                Step::Row { used } => {
                    out.push(
                        d.fields()
                            .map(|f| f.map(|b| String::from_utf8_lossy(b).into_owned()))
                            .collect(),
                    );
                    buf.drain(..used);
                }
                Step::Skip { used } => {
                    buf.drain(..used);
                }
                Step::End { .. } => break,
                Step::NeedMore if last => break,
                Step::NeedMore => {
                    let n = piece.min(data.len() - fed);
                    buf.extend_from_slice(&data[fed..fed + n]);
                    fed += n;
                }
            }
        }
        out
    }

    fn s(v: &str) -> Option<String> {
        Some(v.to_owned())
    }

    #[test]
    fn text_rows_split_anywhere_read_the_same() {
        let data = b"1\ta\\tb\t\\N\n2\tx\\\\y\\nz\t\\101\\x42\r\n3\t\t3.5";
        let want = vec![
            vec![s("1"), s("a\tb"), None],
            vec![s("2"), s("x\\y\nz"), s("AB")],
            vec![s("3"), s(""), s("3.5")],
        ];
        for piece in [1, 2, 3, 7, 100] {
            assert_eq!(
                rows(&opts(CopyFormat::Text), 3, data, piece),
                want,
                "piece {piece}"
            );
        }
    }

    #[test]
    fn text_end_marker_stops_and_escaped_delimiter_stays() {
        let data = b"a\\\tb\tc\n\\.\nignored\tjunk\n";
        assert_eq!(
            rows(&opts(CopyFormat::Text), 2, data, 4),
            vec![vec![s("a\tb"), s("c")]]
        );
    }

    #[test]
    fn csv_quotes_newlines_and_null() {
        let mut o = opts(CopyFormat::Csv);
        o.header = true;
        let data = b"id,name,note\n1,\"a,b\",\n2,\"say \"\"hi\"\"\nthere\",\"\"\r\n3,plain,x";
        let want = vec![
            vec![s("1"), s("a,b"), None],
            vec![s("2"), s("say \"hi\"\nthere"), s("")],
            vec![s("3"), s("plain"), s("x")],
        ];
        for piece in [1, 2, 5, 100] {
            assert_eq!(rows(&o, 3, data, piece), want, "piece {piece}");
        }
    }

    #[test]
    fn csv_with_its_own_escape_character() {
        let mut o = opts(CopyFormat::Csv);
        o.escape = b'\\';
        assert_eq!(
            rows(&o, 2, b"\"a\\\"b\",\"c\\\\d\"\n", 3),
            vec![vec![s("a\"b"), s("c\\d")]]
        );
    }

    #[test]
    fn wrong_widths_are_format_errors() {
        let mut d = Decoder::new(&opts(CopyFormat::Text), 2);
        let e = d.next(b"1\n", false).expect_err("short row");
        assert!(e.0.contains("missing data"), "{e}");
        let e = d.next(b"1\t2\t3\n", false).expect_err("long row");
        assert!(e.0.contains("extra data"), "{e}");
        let mut d = Decoder::new(&opts(CopyFormat::Csv), 2);
        assert!(d.next(b"\"open", true).is_err());
    }

    #[test]
    fn binary_rows_in_pieces() {
        let mut data = BINARY_SIGNATURE.to_vec();
        data.extend_from_slice(&0i32.to_be_bytes());
        data.extend_from_slice(&0i32.to_be_bytes());
        for (id, name) in [(7i64, Some("seven")), (8, None)] {
            data.extend_from_slice(&2i16.to_be_bytes());
            data.extend_from_slice(&8i32.to_be_bytes());
            data.extend_from_slice(&id.to_be_bytes());
            match name {
                Some(n) => {
                    data.extend_from_slice(&(n.len() as i32).to_be_bytes());
                    data.extend_from_slice(n.as_bytes());
                }
                None => data.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        data.extend_from_slice(&(-1i16).to_be_bytes());
        for piece in [1, 3, 1000] {
            let got = rows(&opts(CopyFormat::Binary), 2, &data, piece);
            assert_eq!(got.len(), 2);
            assert_eq!(got[0][1], s("seven"));
            assert_eq!(got[1][1], None);
        }
        let mut d = Decoder::new(&opts(CopyFormat::Binary), 2);
        assert!(
            d.next(b"NOTCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0", false)
                .is_err()
        );
    }
}
