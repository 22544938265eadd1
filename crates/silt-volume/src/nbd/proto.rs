//! NBD wire constants and the pure (I/O-free) parts of the protocol:
//! decoding headers, encoding replies and judging requests, kept apart from
//! the sockets so they are unit-tested byte for byte.

use super::MAX_PAYLOAD;

/// `NBDMAGIC`, the first 8 bytes the server sends.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: second server magic, and the magic of every client option.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Magic of an option reply.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Magic of a transmission request.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Magic of a simple reply.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;

// Handshake flags (server) and client flags.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

// Transmission flags.
pub const FLAG_HAS_FLAGS: u16 = 1 << 0;
pub const FLAG_SEND_FLUSH: u16 = 1 << 2;
pub const FLAG_SEND_FUA: u16 = 1 << 3;
pub const FLAG_SEND_TRIM: u16 = 1 << 5;
pub const FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const FLAG_CAN_MULTI_CONN: u16 = 1 << 8;

/// What this server always advertises. `CAN_MULTI_CONN` is safe because all
/// connections share one `BlockDevice` whose `flush` covers every completed
/// write (the trait's contract), so a flush or FUA on one connection is
/// visible on all of them when answered.
pub const TRANSMISSION_FLAGS: u16 = FLAG_HAS_FLAGS
    | FLAG_SEND_FLUSH
    | FLAG_SEND_FUA
    | FLAG_SEND_TRIM
    | FLAG_SEND_WRITE_ZEROES
    | FLAG_CAN_MULTI_CONN;

// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;

// Option reply types.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
pub const REP_ERR_INVALID: u32 = (1 << 31) + 3;
pub const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;

// Info types of NBD_OPT_INFO/GO.
pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_BLOCK_SIZE: u16 = 3;

// Commands.
pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_WRITE_ZEROES: u16 = 6;

// Command flags.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;

// Error values (the spec's fixed set, not the host's errno).
pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const ESHUTDOWN: u32 = 108;

/// Longest option payload read into memory. The largest legitimate one is an
/// `NBD_OPT_GO` with a 4096-byte name (the spec's limit) and a few info
/// requests; longer ones are drained and refused, so a client cannot make
/// the server allocate up to 4 GiB during the handshake.
pub const MAX_OPTION_DATA: u32 = 16 << 10;
/// Longest export name the spec allows.
pub const MAX_NAME: usize = 4096;

/// Length of the server's greeting and of a client option header.
pub const GREETING_LEN: usize = 18;
pub const OPTION_HEADER_LEN: usize = 16;
/// Length of a request header.
pub const REQUEST_LEN: usize = 28;

fn be_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}
fn be_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// The server's first message: magics and handshake flags.
pub fn greeting() -> [u8; GREETING_LEN] {
    let mut g = [0; GREETING_LEN];
    g[..8].copy_from_slice(&NBDMAGIC.to_be_bytes());
    g[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    g[16..].copy_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    g
}

/// A client option header (its data follows on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionHeader {
    pub option: u32,
    pub len: u32,
}

/// Protocol violations that end a connection.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtoError {
    #[error("client flags {0:#x} include unknown bits")]
    UnknownClientFlags(u32),
    #[error("option magic {0:#018x} is not IHAVEOPT")]
    OptionMagic(u64),
    #[error("request magic {0:#010x} is not NBD_REQUEST_MAGIC")]
    RequestMagic(u32),
}

/// Checks the client's flags; unknown bits must end the connection.
pub fn parse_client_flags(flags: u32) -> Result<bool, ProtoError> {
    if flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
        return Err(ProtoError::UnknownClientFlags(flags));
    }
    Ok(flags & FLAG_C_NO_ZEROES != 0)
}

pub fn parse_option_header(b: &[u8; OPTION_HEADER_LEN]) -> Result<OptionHeader, ProtoError> {
    let magic = be_u64(b, 0);
    if magic != IHAVEOPT {
        return Err(ProtoError::OptionMagic(magic));
    }
    Ok(OptionHeader {
        option: be_u32(b, 8),
        len: be_u32(b, 12),
    })
}

/// Encodes one option reply.
pub fn option_reply(option: u32, reply_type: u32, data: &[u8]) -> Vec<u8> {
    let mut r = Vec::with_capacity(20 + data.len());
    r.extend_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
    r.extend_from_slice(&option.to_be_bytes());
    r.extend_from_slice(&reply_type.to_be_bytes());
    // Callers build `data` from bounded pieces (names <= 4096 bytes).
    r.extend_from_slice(&(data.len() as u32).to_be_bytes());
    r.extend_from_slice(data);
    r
}

/// The data of an `NBD_OPT_INFO` or `NBD_OPT_GO`: a name and the info types
/// the client asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoRequest {
    pub name: String,
    pub infos: Vec<u16>,
}

/// Why an option's data is malformed (answered `NBD_REP_ERR_INVALID`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OptionDataError {
    #[error("option data is truncated")]
    Truncated,
    #[error("option data has {0} trailing bytes")]
    Trailing(usize),
    #[error("export name is longer than 4096 bytes or not UTF-8")]
    BadName,
}

fn parse_name(b: &[u8]) -> Result<String, OptionDataError> {
    if b.len() > MAX_NAME {
        return Err(OptionDataError::BadName);
    }
    String::from_utf8(b.to_vec()).map_err(|_| OptionDataError::BadName)
}

/// Parses `NBD_OPT_EXPORT_NAME`'s data (the whole payload is the name).
pub fn parse_export_name(data: &[u8]) -> Result<String, OptionDataError> {
    parse_name(data)
}

/// Parses `NBD_OPT_INFO`/`NBD_OPT_GO` data: u32 name length, name, u16 count,
/// count u16 info types; the lengths must add up exactly.
pub fn parse_info_request(data: &[u8]) -> Result<InfoRequest, OptionDataError> {
    if data.len() < 4 {
        return Err(OptionDataError::Truncated);
    }
    let name_len = be_u32(data, 0) as usize;
    let rest = &data[4..];
    if rest.len() < name_len.saturating_add(2) {
        return Err(OptionDataError::Truncated);
    }
    let name = parse_name(&rest[..name_len])?;
    let rest = &rest[name_len..];
    let count = be_u16(rest, 0) as usize;
    let rest = &rest[2..];
    if rest.len() < count * 2 {
        return Err(OptionDataError::Truncated);
    }
    if rest.len() > count * 2 {
        return Err(OptionDataError::Trailing(rest.len() - count * 2));
    }
    let infos = rest.chunks_exact(2).map(|c| be_u16(c, 0)).collect();
    Ok(InfoRequest { name, infos })
}

/// `NBD_REP_INFO` payload for `NBD_INFO_EXPORT`.
pub fn info_export(size: u64, flags: u16) -> Vec<u8> {
    let mut d = Vec::with_capacity(12);
    d.extend_from_slice(&INFO_EXPORT.to_be_bytes());
    d.extend_from_slice(&size.to_be_bytes());
    d.extend_from_slice(&flags.to_be_bytes());
    d
}

/// `NBD_REP_INFO` payload for `NBD_INFO_BLOCK_SIZE`: the device's block size
/// as both minimum and preferred (clients then align their requests),
/// [`MAX_PAYLOAD`] as maximum.
pub fn info_block_size(block_size: u32) -> Vec<u8> {
    let mut d = Vec::with_capacity(14);
    d.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
    d.extend_from_slice(&block_size.to_be_bytes());
    d.extend_from_slice(&block_size.to_be_bytes());
    d.extend_from_slice(&MAX_PAYLOAD.to_be_bytes());
    d
}

/// `NBD_REP_INFO` payload for `NBD_INFO_NAME`.
pub fn info_name(name: &str) -> Vec<u8> {
    let mut d = Vec::with_capacity(2 + name.len());
    d.extend_from_slice(&INFO_NAME.to_be_bytes());
    d.extend_from_slice(name.as_bytes());
    d
}

/// `NBD_REP_SERVER` payload: u32 name length and the name.
pub fn rep_server(name: &str) -> Vec<u8> {
    let mut d = Vec::with_capacity(4 + name.len());
    d.extend_from_slice(&(name.len() as u32).to_be_bytes());
    d.extend_from_slice(name.as_bytes());
    d
}

/// What `NBD_OPT_EXPORT_NAME` answers: size, flags and, unless the client
/// negotiated `NO_ZEROES`, 124 reserved zero bytes.
pub fn export_name_reply(size: u64, flags: u16, no_zeroes: bool) -> Vec<u8> {
    let mut r = Vec::with_capacity(10 + 124);
    r.extend_from_slice(&size.to_be_bytes());
    r.extend_from_slice(&flags.to_be_bytes());
    if !no_zeroes {
        r.resize(r.len() + 124, 0);
    }
    r
}

/// A transmission request header (a write's payload follows on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub flags: u16,
    pub command: u16,
    pub handle: u64,
    pub offset: u64,
    pub len: u32,
}

pub fn parse_request(b: &[u8; REQUEST_LEN]) -> Result<Request, ProtoError> {
    let magic = be_u32(b, 0);
    if magic != REQUEST_MAGIC {
        return Err(ProtoError::RequestMagic(magic));
    }
    Ok(Request {
        flags: be_u16(b, 4),
        command: be_u16(b, 6),
        handle: be_u64(b, 8),
        offset: be_u64(b, 16),
        len: be_u32(b, 24),
    })
}

/// Encodes a simple reply header (a successful read's data follows).
pub fn simple_reply(error: u32, handle: u64) -> [u8; 16] {
    let mut r = [0; 16];
    r[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    r[4..8].copy_from_slice(&error.to_be_bytes());
    r[8..].copy_from_slice(&handle.to_be_bytes());
    r
}

/// What to do with a request that passed [`check_request`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read {
        offset: u64,
        len: u32,
    },
    Write {
        offset: u64,
        len: u32,
        fua: bool,
    },
    Flush,
    Trim {
        offset: u64,
        len: u32,
        fua: bool,
    },
    WriteZeroes {
        offset: u64,
        len: u32,
        fua: bool,
        no_hole: bool,
    },
    Disconnect,
}

/// Judges a request against the export's size: the operation to run, or the
/// NBD error to answer without touching the device. Errors follow the spec's
/// advice: `EINVAL` for unknown commands or flags, flags not valid for the
/// command, reads or trims past the end and payloads over [`MAX_PAYLOAD`];
/// `ENOSPC` for writes past the end.
pub fn check_request(req: &Request, size: u64) -> Result<Op, u32> {
    let fua = req.flags & CMD_FLAG_FUA != 0;
    // FUA is accepted on every command (the spec requires that once SEND_FUA
    // is advertised); NO_HOLE only on write-zeroes; nothing else is known.
    let allowed = match req.command {
        CMD_WRITE_ZEROES => CMD_FLAG_FUA | CMD_FLAG_NO_HOLE,
        _ => CMD_FLAG_FUA,
    };
    if req.flags & !allowed != 0 {
        return Err(EINVAL);
    }
    let in_range = req
        .offset
        .checked_add(u64::from(req.len))
        .is_some_and(|end| end <= size);
    let (offset, len) = (req.offset, req.len);
    match req.command {
        CMD_READ => {
            if len > MAX_PAYLOAD || !in_range {
                return Err(EINVAL);
            }
            Ok(Op::Read { offset, len })
        }
        CMD_WRITE => {
            if len > MAX_PAYLOAD {
                return Err(EINVAL);
            }
            if !in_range {
                return Err(ENOSPC);
            }
            Ok(Op::Write { offset, len, fua })
        }
        // Offset and length of DISC and FLUSH "MUST be zero"; clients that
        // send junk there gain nothing by being refused, so it is ignored.
        CMD_DISC => Ok(Op::Disconnect),
        CMD_FLUSH => Ok(Op::Flush),
        CMD_TRIM => {
            if !in_range {
                return Err(EINVAL);
            }
            Ok(Op::Trim { offset, len, fua })
        }
        CMD_WRITE_ZEROES => {
            if !in_range {
                return Err(ENOSPC);
            }
            let no_hole = req.flags & CMD_FLAG_NO_HOLE != 0;
            Ok(Op::WriteZeroes {
                offset,
                len,
                fua,
                no_hole,
            })
        }
        _ => Err(EINVAL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request_bytes(
        magic: u32,
        flags: u16,
        cmd: u16,
        handle: u64,
        off: u64,
        len: u32,
    ) -> [u8; 28] {
        let mut b = [0; 28];
        b[..4].copy_from_slice(&magic.to_be_bytes());
        b[4..6].copy_from_slice(&flags.to_be_bytes());
        b[6..8].copy_from_slice(&cmd.to_be_bytes());
        b[8..16].copy_from_slice(&handle.to_be_bytes());
        b[16..24].copy_from_slice(&off.to_be_bytes());
        b[24..].copy_from_slice(&len.to_be_bytes());
        b
    }

    fn req(flags: u16, command: u16, offset: u64, len: u32) -> Request {
        Request {
            flags,
            command,
            handle: 7,
            offset,
            len,
        }
    }

    proptest::proptest! {
        /// Arbitrary client bytes never panic the parsers, and every request
        /// let through to the device lies inside it.
        #[test]
        fn arbitrary_input_is_parsed_or_refused(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..48),
            flags: u16, command: u16, offset: u64, len: u32, size: u64,
        ) {
            let _ = parse_info_request(&data);
            let _ = parse_export_name(&data);
            if let Ok(header) = <[u8; REQUEST_LEN]>::try_from(&data[..data.len().min(REQUEST_LEN)]) {
                let _ = parse_request(&header);
            }
            let request = Request { flags, command, handle: 0, offset, len };
            match check_request(&request, size) {
                Ok(Op::Read { offset, len } | Op::Write { offset, len, .. }) => {
                    proptest::prop_assert!(len <= MAX_PAYLOAD);
                    proptest::prop_assert!(offset.checked_add(u64::from(len)).is_some_and(|e| e <= size));
                }
                Ok(Op::Trim { offset, len, .. } | Op::WriteZeroes { offset, len, .. }) => {
                    proptest::prop_assert!(offset.checked_add(u64::from(len)).is_some_and(|e| e <= size));
                }
                Ok(Op::Flush | Op::Disconnect) | Err(_) => {}
            }
        }
    }

    #[test]
    fn greeting_is_nbdmagic_ihaveopt_and_flags() {
        let g = greeting();
        assert_eq!(&g[..8], b"NBDMAGIC");
        assert_eq!(&g[8..16], b"IHAVEOPT");
        assert_eq!(&g[16..], &[0, 3]);
    }

    #[test]
    fn client_flags() {
        assert_eq!(parse_client_flags(0), Ok(false));
        assert_eq!(parse_client_flags(1), Ok(false));
        assert_eq!(parse_client_flags(3), Ok(true));
        assert_eq!(
            parse_client_flags(4),
            Err(ProtoError::UnknownClientFlags(4))
        );
    }

    #[test]
    fn option_header_parses_and_checks_magic() {
        let mut b = [0; 16];
        b[..8].copy_from_slice(b"IHAVEOPT");
        b[8..12].copy_from_slice(&7u32.to_be_bytes());
        b[12..].copy_from_slice(&9u32.to_be_bytes());
        assert_eq!(
            parse_option_header(&b),
            Ok(OptionHeader { option: 7, len: 9 })
        );
        b[0] = b'X';
        assert!(matches!(
            parse_option_header(&b),
            Err(ProtoError::OptionMagic(_))
        ));
    }

    #[test]
    fn option_reply_layout() {
        let r = option_reply(OPT_LIST, REP_SERVER, &rep_server("ab"));
        assert_eq!(&r[..8], &OPTION_REPLY_MAGIC.to_be_bytes());
        assert_eq!(&r[8..12], &3u32.to_be_bytes());
        assert_eq!(&r[12..16], &2u32.to_be_bytes());
        assert_eq!(&r[16..20], &6u32.to_be_bytes());
        assert_eq!(&r[20..], &[0, 0, 0, 2, b'a', b'b']);
    }

    #[test]
    fn info_request_parses_exactly() {
        let mut d = Vec::new();
        d.extend_from_slice(&5u32.to_be_bytes());
        d.extend_from_slice(b"hydra");
        d.extend_from_slice(&2u16.to_be_bytes());
        d.extend_from_slice(&3u16.to_be_bytes());
        d.extend_from_slice(&1u16.to_be_bytes());
        assert_eq!(
            parse_info_request(&d),
            Ok(InfoRequest {
                name: "hydra".into(),
                infos: vec![3, 1]
            })
        );
        // Every truncation is refused, never a panic.
        for cut in 0..d.len() {
            assert!(parse_info_request(&d[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = d.clone();
        long.push(0);
        assert_eq!(parse_info_request(&long), Err(OptionDataError::Trailing(1)));
        // A name length near u32::MAX must not overflow.
        let mut huge = u32::MAX.to_be_bytes().to_vec();
        huge.extend_from_slice(&[0, 0]);
        assert_eq!(parse_info_request(&huge), Err(OptionDataError::Truncated));
        // Non-UTF-8 names are refused.
        let bad = [0, 0, 0, 1, 0xff, 0, 0];
        assert_eq!(parse_info_request(&bad), Err(OptionDataError::BadName));
    }

    #[test]
    fn info_payloads() {
        assert_eq!(
            info_export(0x1_0000_0000, 0x15d),
            vec![0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0x01, 0x5d]
        );
        let b = info_block_size(4096);
        assert_eq!(&b[..2], &[0, 3]);
        assert_eq!(&b[2..6], &4096u32.to_be_bytes());
        assert_eq!(&b[6..10], &4096u32.to_be_bytes());
        assert_eq!(&b[10..], &(32u32 << 20).to_be_bytes());
        assert_eq!(info_name("x"), vec![0, 1, b'x']);
    }

    #[test]
    fn export_name_reply_zeroes() {
        assert_eq!(export_name_reply(1, 1, true).len(), 10);
        let r = export_name_reply(1, 1, false);
        assert_eq!(r.len(), 134);
        assert!(r[10..].iter().all(|&b| b == 0));
    }

    #[test]
    fn request_parses_and_checks_magic() {
        let b = request_bytes(REQUEST_MAGIC, 1, CMD_WRITE, 0xdead_beef, 4096, 512);
        assert_eq!(
            parse_request(&b),
            Ok(Request {
                flags: 1,
                command: CMD_WRITE,
                handle: 0xdead_beef,
                offset: 4096,
                len: 512
            })
        );
        let b = request_bytes(0x1234_5678, 0, CMD_READ, 1, 0, 0);
        assert_eq!(
            parse_request(&b),
            Err(ProtoError::RequestMagic(0x1234_5678))
        );
    }

    #[test]
    fn simple_reply_layout() {
        let r = simple_reply(EINVAL, 0x0102_0304_0506_0708);
        assert_eq!(&r[..4], &[0x67, 0x44, 0x66, 0x98]);
        assert_eq!(&r[4..8], &[0, 0, 0, 22]);
        assert_eq!(&r[8..], &[1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn requests_are_judged() {
        let size = 1 << 20;
        assert_eq!(
            check_request(&req(0, CMD_READ, 0, 4096), size),
            Ok(Op::Read {
                offset: 0,
                len: 4096
            })
        );
        // Unaligned requests go through: the device is byte-addressed.
        assert_eq!(
            check_request(&req(0, CMD_READ, 1, 3), size),
            Ok(Op::Read { offset: 1, len: 3 })
        );
        assert_eq!(
            check_request(&req(0, CMD_READ, size - 1, 2), size),
            Err(EINVAL)
        );
        assert_eq!(
            check_request(&req(0, CMD_READ, u64::MAX, 2), size),
            Err(EINVAL)
        );
        assert_eq!(
            check_request(&req(0, CMD_READ, 0, MAX_PAYLOAD + 1), u64::MAX),
            Err(EINVAL)
        );
        assert_eq!(
            check_request(&req(0, CMD_WRITE, size, 1), size),
            Err(ENOSPC)
        );
        assert_eq!(
            check_request(&req(CMD_FLAG_FUA, CMD_WRITE, 0, 1), size),
            Ok(Op::Write {
                offset: 0,
                len: 1,
                fua: true
            })
        );
        assert_eq!(
            check_request(&req(0, CMD_WRITE, 0, MAX_PAYLOAD + 1), u64::MAX),
            Err(EINVAL)
        );
        // FUA is accepted anywhere; NO_HOLE only on write-zeroes.
        assert_eq!(
            check_request(&req(CMD_FLAG_FUA, CMD_FLUSH, 0, 0), size),
            Ok(Op::Flush)
        );
        assert_eq!(
            check_request(&req(CMD_FLAG_NO_HOLE, CMD_WRITE, 0, 1), size),
            Err(EINVAL)
        );
        assert_eq!(
            check_request(
                &req(CMD_FLAG_NO_HOLE | CMD_FLAG_FUA, CMD_WRITE_ZEROES, 0, 9),
                size
            ),
            Ok(Op::WriteZeroes {
                offset: 0,
                len: 9,
                fua: true,
                no_hole: true
            })
        );
        // Trim and write-zeroes have no payload, so no payload limit.
        assert_eq!(
            check_request(&req(0, CMD_TRIM, 0, u32::MAX), u64::MAX),
            Ok(Op::Trim {
                offset: 0,
                len: u32::MAX,
                fua: false
            })
        );
        assert_eq!(check_request(&req(0, CMD_TRIM, size, 1), size), Err(EINVAL));
        assert_eq!(
            check_request(&req(0, CMD_WRITE_ZEROES, size, 1), size),
            Err(ENOSPC)
        );
        // DF (1 << 2) needs structured replies; unknown flags and commands.
        assert_eq!(
            check_request(&req(1 << 2, CMD_READ, 0, 1), size),
            Err(EINVAL)
        );
        assert_eq!(
            check_request(&req(1 << 15, CMD_READ, 0, 1), size),
            Err(EINVAL)
        );
        assert_eq!(check_request(&req(0, 5, 0, 1), size), Err(EINVAL));
        assert_eq!(check_request(&req(0, 7, 0, 1), size), Err(EINVAL));
        assert_eq!(
            check_request(&req(0, CMD_DISC, 0, 0), size),
            Ok(Op::Disconnect)
        );
    }
}
