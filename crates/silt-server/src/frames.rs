//! Checking PostgreSQL frontend messages before `pgwire` decodes them.
//!
//! `pgwire` 0.42.1 decodes a message's body without bounding it by the
//! message's length: a `Parse` whose length is 4 (no body) makes
//! `<Parse as Message>::decode_body` call `Buf::get_u16` on an empty
//! buffer, which panics ("advance out of bounds"), and a body shorter or
//! longer than its length is read into the next message. [`FrameGuard`]
//! sits between the socket (or the TLS stream) and `pgwire`'s codec: it
//! hands `pgwire` only whole messages whose length and layout it checked
//! (every field of every frontend message type, exactly filling the
//! length), and turns anything else into an error, after which the
//! connection answers `08P01` (protocol violation) and closes. It also
//! caps a message's length (`--max-request-bytes`), so that a length field
//! cannot make the server buffer a gigabyte.
//!
//! The startup phase has untyped messages (`StartupMessage`,
//! `CancelRequest`; `SSLRequest` and `GSSENCRequest` are consumed by
//! `pgwire`'s TLS negotiation before the guard starts); then every message
//! has a type byte. A `p` message is a password, a SASL initial response
//! or a SASL response depending on what the server asked for, so the
//! guard watches the authentication requests the server writes.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A malformed frontend message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid frontend message: {0}")]
pub struct FrameError(pub String);

/// The largest startup-phase message (`pgwire`'s own limit).
const MAX_STARTUP: usize = 10_000;
const CANCEL_CODE: u32 = 80_877_102;
const SSL_CODE: u32 = 80_877_103;
const GSS_CODE: u32 = 80_877_104;

/// What the next `p` message is, from the server's last authentication
/// request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Anything (no request seen, or authentication is over: `pgwire`
    /// keeps a `p` message as raw bytes until a handler reads it).
    Any,
    /// A password (cleartext or MD5): one string.
    Password,
    /// A SASL initial response: mechanism, then a length-prefixed blob.
    SaslInitial,
}

/// Watches the messages the server writes for authentication requests.
#[derive(Debug)]
struct Outgoing {
    /// The first bytes of the current message (type, length, auth code).
    head: [u8; 9],
    have: usize,
    /// Bytes of the current message still to skip after its head.
    skip: usize,
    /// Stop watching once authentication is over.
    done: bool,
}

impl Outgoing {
    fn new() -> Outgoing {
        Outgoing {
            head: [0; 9],
            have: 0,
            skip: 0,
            done: false,
        }
    }

    /// The length of the current message, type byte included.
    fn total(&self) -> usize {
        let len = u32::from_be_bytes([self.head[1], self.head[2], self.head[3], self.head[4]]);
        1 + (len as usize).max(4)
    }

    /// Look at bytes written; returns a new expectation when an
    /// authentication request went out.
    fn observe(&mut self, mut data: &[u8]) -> Option<Expect> {
        let mut expect = None;
        while !self.done {
            if self.skip > 0 {
                if data.is_empty() {
                    break;
                }
                let n = self.skip.min(data.len());
                self.skip -= n;
                data = &data[n..];
                continue;
            }
            // The head: type and length, and for `R` the auth code too.
            let want = if self.have < 5 {
                5
            } else if self.head[0] == b'R' {
                self.total().min(9)
            } else {
                self.have
            };
            if self.have < want {
                if data.is_empty() {
                    break;
                }
                let n = (want - self.have).min(data.len());
                self.head[self.have..self.have + n].copy_from_slice(&data[..n]);
                self.have += n;
                data = &data[n..];
                continue;
            }
            if self.head[0] == b'R' && self.have == 9 {
                let code =
                    u32::from_be_bytes([self.head[5], self.head[6], self.head[7], self.head[8]]);
                expect = Some(match code {
                    10 => Expect::SaslInitial,
                    3 | 5 => Expect::Password,
                    0 => {
                        self.done = true;
                        Expect::Any
                    }
                    _ => Expect::Any,
                });
            }
            self.skip = self.total().saturating_sub(self.have);
            self.have = 0;
        }
        expect
    }
}

/// A reader of one message body that fails instead of running short.
struct Body<'a> {
    b: &'a [u8],
    what: &'static str,
}

impl<'a> Body<'a> {
    fn err(&self, msg: &str) -> FrameError {
        FrameError(format!("{}: {msg}", self.what))
    }

    fn cstr(&mut self) -> Result<&'a [u8], FrameError> {
        match self.b.iter().position(|&c| c == 0) {
            Some(i) => {
                let s = &self.b[..i];
                self.b = &self.b[i + 1..];
                Ok(s)
            }
            None => Err(self.err("a string without its terminating zero byte")),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], FrameError> {
        if self.b.len() < n {
            return Err(self.err("shorter than its fields"));
        }
        let (a, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(a)
    }

    fn u16(&mut self) -> Result<u16, FrameError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, FrameError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn end(&self) -> Result<(), FrameError> {
        if self.b.is_empty() {
            Ok(())
        } else {
            Err(self.err("longer than its fields"))
        }
    }
}

/// Check the body of a typed message (after its type and length).
fn check_typed(kind: u8, body: &[u8], expect: Expect) -> Result<(), FrameError> {
    let what = match kind {
        b'Q' => "Query",
        b'P' => "Parse",
        b'B' => "Bind",
        b'E' => "Execute",
        b'D' => "Describe",
        b'C' => "Close",
        b'H' => "Flush",
        b'S' => "Sync",
        b'X' => "Terminate",
        b'd' => "CopyData",
        b'c' => "CopyDone",
        b'f' => "CopyFail",
        b'p' => "password message",
        other => {
            return Err(FrameError(format!(
                "unknown message type {:?} (0x{other:02x})",
                char::from(other)
            )));
        }
    };
    let mut b = Body { b: body, what };
    match kind {
        b'Q' | b'f' => {
            b.cstr()?;
        }
        b'P' => {
            b.cstr()?;
            b.cstr()?;
            let n = usize::from(b.u16()?);
            b.take(n * 4)?;
        }
        b'B' => {
            b.cstr()?;
            b.cstr()?;
            let formats = usize::from(b.u16()?);
            b.take(formats * 2)?;
            let params = b.u16()?;
            for _ in 0..params {
                match b.i32()? {
                    -1 => {}
                    n if n >= 0 => {
                        b.take(n as usize)?;
                    }
                    n => return Err(b.err(&format!("parameter length {n}"))),
                }
            }
            let results = usize::from(b.u16()?);
            b.take(results * 2)?;
        }
        b'E' => {
            b.cstr()?;
            b.i32()?;
        }
        b'D' | b'C' => {
            let target = b.take(1)?[0];
            if target != b'S' && target != b'P' {
                return Err(b.err("the target is neither 'S' nor 'P'"));
            }
            b.cstr()?;
        }
        b'H' | b'S' | b'X' | b'c' => {}
        b'd' => {
            b.take(body.len())?;
        }
        b'p' => match expect {
            Expect::Any => {
                b.take(body.len())?;
            }
            Expect::Password => {
                b.cstr()?;
            }
            Expect::SaslInitial => {
                b.cstr()?;
                match b.i32()? {
                    -1 => {}
                    n if n >= 0 => {
                        b.take(n as usize)?;
                    }
                    n => return Err(b.err(&format!("data length {n}"))),
                }
            }
        },
        _ => {}
    }
    b.end()
}

/// Check a startup-phase message (`body` after its length); returns
/// whether it starts the typed phase (a startup message).
fn check_startup(body: &[u8]) -> Result<bool, FrameError> {
    let mut b = Body {
        b: body,
        what: "startup message",
    };
    let code = b.i32()? as u32;
    match code {
        CANCEL_CODE => {
            b.what = "CancelRequest";
            b.i32()?;
            if !(4..=256).contains(&b.b.len()) {
                return Err(b.err("a secret key of a bad length"));
            }
            Ok(false)
        }
        SSL_CODE | GSS_CODE => Err(b.err("an encryption request after the negotiation")),
        c if c >> 16 == 3 => {
            // Parameters: name and value strings, then an empty name.
            loop {
                let name = b.cstr()?;
                if name.is_empty() {
                    break;
                }
                b.cstr()?;
            }
            b.end()?;
            Ok(true)
        }
        c => Err(b.err(&format!(
            "unsupported protocol version {}.{} (this server speaks 3.x)",
            c >> 16,
            c & 0xffff
        ))),
    }
}

/// Splits a byte stream into checked messages.
#[derive(Debug)]
pub struct Checker {
    typed: bool,
    max: usize,
    expect: Expect,
}

impl Checker {
    /// A checker at the start of the startup phase, for messages of at
    /// most `max` bytes (zero: `pgwire`'s own limits only).
    pub fn new(max: usize) -> Checker {
        Checker {
            typed: false,
            max: if max == 0 { usize::MAX } else { max },
            expect: Expect::Any,
        }
    }

    /// The length of the first message of `buf` when it is complete and
    /// valid; `Ok(None)` when more bytes are needed.
    pub fn next_frame(&mut self, buf: &[u8]) -> Result<Option<usize>, FrameError> {
        let off = usize::from(self.typed);
        if buf.len() < off + 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([buf[off], buf[off + 1], buf[off + 2], buf[off + 3]]);
        let len = len as usize;
        let limit = if self.typed { self.max } else { MAX_STARTUP };
        let least = if self.typed { 4 } else { 8 };
        if len < least {
            return Err(FrameError(format!(
                "a message length of {len} (at least {least})"
            )));
        }
        if len > limit {
            return Err(FrameError(format!(
                "a message of {len} bytes, more than the limit of {limit} (--max-request-bytes)"
            )));
        }
        if self.typed && !b"QPBEDCHSXdcfp".contains(&buf[0]) {
            return Err(FrameError(format!(
                "unknown message type {:?} (0x{:02x})",
                char::from(buf[0]),
                buf[0]
            )));
        }
        let total = off + len;
        if buf.len() < total {
            return Ok(None);
        }
        let body = &buf[off + 4..total];
        if self.typed {
            check_typed(buf[0], body, self.expect)?;
            if buf[0] == b'p' && self.expect != Expect::Any {
                self.expect = Expect::Any;
            }
        } else if check_startup(body)? {
            self.typed = true;
        }
        Ok(Some(total))
    }

    fn observe_written(&mut self, out: &mut Outgoing, data: &[u8]) {
        if let Some(e) = out.observe(data) {
            self.expect = e;
        }
    }
}

/// A stream that only lets checked whole messages through to its reader.
#[derive(Debug)]
pub struct FrameGuard<S> {
    io: S,
    checker: Checker,
    outgoing: Outgoing,
    /// Read but not yet checked.
    inbox: BytesMut,
    /// Checked, for the reader.
    outbox: BytesMut,
    failed: Option<FrameError>,
    eof: bool,
}

impl<S> FrameGuard<S> {
    /// Guard `io`, whose first `already` bytes were read before (by the
    /// TLS negotiation) and are checked first.
    pub fn new(io: S, already: BytesMut, max: usize) -> FrameGuard<S> {
        let mut g = FrameGuard {
            io,
            checker: Checker::new(max),
            outgoing: Outgoing::new(),
            inbox: already,
            outbox: BytesMut::new(),
            failed: None,
            eof: false,
        };
        g.check();
        g
    }

    /// Move the complete checked messages from the inbox to the outbox.
    fn check(&mut self) {
        while self.failed.is_none() {
            match self.checker.next_frame(&self.inbox) {
                Ok(Some(n)) => {
                    let frame = self.inbox.split_to(n);
                    self.outbox.extend_from_slice(&frame);
                }
                Ok(None) => break,
                Err(e) => self.failed = Some(e),
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for FrameGuard<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if !this.outbox.is_empty() {
                let n = buf.remaining().min(this.outbox.len());
                buf.put_slice(&this.outbox[..n]);
                this.outbox.advance(n);
                return Poll::Ready(Ok(()));
            }
            if let Some(e) = &this.failed {
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e.clone())));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; 8192];
            let mut rb = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.io).poll_read(cx, &mut rb))?;
            if rb.filled().is_empty() {
                // A partial message at the end is dropped with the stream.
                this.eof = true;
                continue;
            }
            this.inbox.extend_from_slice(rb.filled());
            this.check();
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for FrameGuard<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let n = ready!(Pin::new(&mut this.io).poll_write(cx, buf))?;
        if let Some(written) = buf.get(..n) {
            this.checker.observe_written(&mut this.outgoing, written);
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![kind];
        v.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
        v.extend_from_slice(body);
        v
    }

    fn startup() -> Vec<u8> {
        let body = b"\x00\x03\x00\x00user\0me\0\0";
        let mut v = ((body.len() + 4) as u32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    fn started() -> Checker {
        let mut c = Checker::new(1 << 20);
        let s = startup();
        assert_eq!(c.next_frame(&s).unwrap(), Some(s.len()));
        c
    }

    #[test]
    fn whole_valid_messages_pass() {
        let mut c = started();
        for m in [
            typed(b'Q', b"SELECT 1\0"),
            typed(b'P', b"\0SELECT $1\0\x00\x01\x00\x00\x00\x17"),
            typed(b'B', b"\0\0\x00\x00\x00\x01\x00\x00\x00\x011\x00\x00"),
            typed(b'B', b"\0\0\x00\x00\x00\x01\xff\xff\xff\xff\x00\x00"),
            typed(b'E', b"\0\x00\x00\x00\x00"),
            typed(b'D', b"S\0"),
            typed(b'C', b"Pportal\0"),
            typed(b'S', b""),
            typed(b'H', b""),
            typed(b'd', b"anything"),
            typed(b'c', b""),
            typed(b'f', b"why\0"),
            typed(b'X', b""),
        ] {
            assert_eq!(c.next_frame(&m).unwrap(), Some(m.len()), "{m:?}");
            // Incomplete: wait for more.
            assert_eq!(c.next_frame(&m[..m.len() - 1]).unwrap(), None);
        }
    }

    #[test]
    fn malformed_messages_fail() {
        let mut c = started();
        // The frame of issue #28: a Parse of length 4.
        assert!(c.next_frame(b"P\x00\x00\x00\x04").is_err());
        for m in [
            typed(b'Q', b"SELECT 1"),
            typed(b'Q', b"SELECT 1\0trailing"),
            typed(b'P', b"\0SELECT 1\0\x00\x02\x00\x00\x00\x17"),
            typed(b'B', b"\0\0\x00\x00\x00\x01\x00\x00\x00\x09x\x00\x00"),
            typed(b'B', b"\0\0\x00\x00\x00\x01\xff\xff\xff\xfe\x00\x00"),
            typed(b'E', b"\0\x00"),
            typed(b'D', b"X\0"),
            typed(b'S', b"x"),
            typed(b'Z', b""),
        ] {
            assert!(c.next_frame(&m).is_err(), "{m:?}");
        }
        // Lengths below 4 or over the limit fail before the body arrives.
        assert!(c.next_frame(b"Q\x00\x00\x00\x02").is_err());
        assert!(c.next_frame(b"Q\x7f\xff\xff\xff").is_err());
        assert!(c.next_frame(b"Q\xff\xff\xff\xff").is_err());
    }

    #[test]
    fn startup_phase() {
        let mut c = Checker::new(0);
        let mut cancel = 16u32.to_be_bytes().to_vec();
        cancel.extend_from_slice(&CANCEL_CODE.to_be_bytes());
        cancel.extend_from_slice(&[0, 0, 0, 7, 1, 2, 3, 4]);
        assert_eq!(c.next_frame(&cancel).unwrap(), Some(16));
        for bad in [
            b"\x00\x00\x00\x04".to_vec(),
            b"\x00\x00\x00\x08\x04\xd2\x16\x2f".to_vec(),
            b"\x00\x00\x00\x0c\x00\x02\x00\x00user".to_vec(),
            b"\x00\x00\x00\x0d\x00\x03\x00\x00user\0".to_vec(),
        ] {
            assert!(Checker::new(0).next_frame(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sasl_initial_response_is_checked_when_asked_for() {
        let mut c = started();
        let mut out = Outgoing::new();
        // AuthenticationSASL (R, code 10, one mechanism), written in pieces.
        let mut r = vec![b'R'];
        let body = b"\x00\x00\x00\x0aSCRAM-SHA-256\0\0";
        r.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
        r.extend_from_slice(body);
        c.observe_written(&mut out, &r[..3]);
        c.observe_written(&mut out, &r[3..]);
        assert!(c.next_frame(&typed(b'p', b"SCRAM-SHA-256\0")).is_err());
        c.observe_written(&mut out, &r);
        let ok = typed(b'p', b"SCRAM-SHA-256\0\x00\x00\x00\x03abc");
        assert_eq!(c.next_frame(&ok).unwrap(), Some(ok.len()));
        // After it, a SASL response is raw bytes.
        let raw = typed(b'p', b"c=biws,r=...");
        assert_eq!(c.next_frame(&raw).unwrap(), Some(raw.len()));
    }
}
