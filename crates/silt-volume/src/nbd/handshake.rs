//! The fixed newstyle handshake: greeting, client flags, then options until
//! the client picks the export (`NBD_OPT_GO` or `NBD_OPT_EXPORT_NAME`) or
//! gives up (`NBD_OPT_ABORT`, or closing the socket).

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::BlockDevice;
use super::proto::{self, OptionHeader, ProtoError};
use super::transmission::discard;

/// The one export a server serves.
pub(crate) struct Export {
    pub name: String,
    pub device: std::sync::Arc<dyn BlockDevice>,
}

impl Export {
    /// Clients naming no export (`""`, the spec's "default export") get ours.
    fn matches(&self, name: &str) -> bool {
        name.is_empty() || name == self.name
    }
}

/// How a handshake ended without error.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The client entered transmission on the export, which then had `size`
    /// bytes (the size every request of the connection is checked against).
    Transmission { size: u64 },
    /// The client sent `NBD_OPT_ABORT` (answered) or closed the socket.
    Aborted,
}

/// Why a handshake ended the connection.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HandshakeError {
    #[error("I/O: {0}")]
    Io(#[from] io::Error),
    #[error(transparent)]
    Proto(#[from] ProtoError),
    /// `NBD_OPT_EXPORT_NAME` cannot be answered with an error: the spec says
    /// to close the connection.
    #[error("NBD_OPT_EXPORT_NAME for unknown export {0:?}")]
    UnknownExport(String),
    #[error("NBD_OPT_EXPORT_NAME with a malformed name ({0} bytes)")]
    BadExportName(u32),
}

/// Reads exactly `buf.len()` bytes; `Ok(false)` if the peer closed first
/// (before any byte), which during option haggling is a client giving up.
async fn read_or_eof<S: AsyncRead + Unpin>(s: &mut S, buf: &mut [u8]) -> io::Result<bool> {
    match s.read_exact(buf).await {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

/// Runs the handshake on `s` for `export`.
pub(crate) async fn negotiate<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    export: &Export,
) -> Result<Outcome, HandshakeError> {
    s.write_all(&proto::greeting()).await?;
    s.flush().await?;
    let mut flags = [0; 4];
    if !read_or_eof(s, &mut flags).await? {
        return Ok(Outcome::Aborted);
    }
    // Clients without FIXED_NEWSTYLE are still answered as fixed newstyle
    // (the spec allows it); only unknown bits end the connection.
    let no_zeroes = proto::parse_client_flags(u32::from_be_bytes(flags))?;

    loop {
        let mut header = [0; proto::OPTION_HEADER_LEN];
        if !read_or_eof(s, &mut header).await? {
            return Ok(Outcome::Aborted);
        }
        let OptionHeader { option, len } = proto::parse_option_header(&header)?;
        if len > proto::MAX_OPTION_DATA {
            discard(s, u64::from(len)).await?;
            if option == proto::OPT_EXPORT_NAME {
                return Err(HandshakeError::BadExportName(len));
            }
            reply(s, option, proto::REP_ERR_INVALID, b"option data too long").await?;
            continue;
        }
        let mut data = vec![0; len as usize];
        s.read_exact(&mut data).await?;

        match option {
            proto::OPT_EXPORT_NAME => {
                let name = proto::parse_export_name(&data)
                    .map_err(|_| HandshakeError::BadExportName(len))?;
                if !export.matches(&name) {
                    return Err(HandshakeError::UnknownExport(name));
                }
                let size = export.device.size();
                s.write_all(&proto::export_name_reply(
                    size,
                    proto::TRANSMISSION_FLAGS,
                    no_zeroes,
                ))
                .await?;
                s.flush().await?;
                return Ok(Outcome::Transmission { size });
            }
            proto::OPT_ABORT => {
                // The client may already have closed: a failed ACK is fine.
                let _ = reply(s, option, proto::REP_ACK, &[]).await;
                return Ok(Outcome::Aborted);
            }
            proto::OPT_LIST => {
                if !data.is_empty() {
                    reply(
                        s,
                        option,
                        proto::REP_ERR_INVALID,
                        b"NBD_OPT_LIST takes no data",
                    )
                    .await?;
                    continue;
                }
                let mut out = proto::option_reply(
                    option,
                    proto::REP_SERVER,
                    &proto::rep_server(&export.name),
                );
                out.extend_from_slice(&proto::option_reply(option, proto::REP_ACK, &[]));
                s.write_all(&out).await?;
                s.flush().await?;
            }
            proto::OPT_INFO | proto::OPT_GO => {
                let request = match proto::parse_info_request(&data) {
                    Ok(r) => r,
                    Err(e) => {
                        reply(s, option, proto::REP_ERR_INVALID, e.to_string().as_bytes()).await?;
                        continue;
                    }
                };
                if !export.matches(&request.name) {
                    reply(s, option, proto::REP_ERR_UNKNOWN, b"no such export").await?;
                    continue;
                }
                let size = export.device.size();
                // INFO_EXPORT is mandatory; BLOCK_SIZE is sent even unasked
                // (the spec allows it) so that every client sees the device's
                // granularity; NAME only when asked.
                let mut out = proto::option_reply(
                    option,
                    proto::REP_INFO,
                    &proto::info_export(size, proto::TRANSMISSION_FLAGS),
                );
                out.extend_from_slice(&proto::option_reply(
                    option,
                    proto::REP_INFO,
                    &proto::info_block_size(export.device.block_size()),
                ));
                if request.infos.contains(&proto::INFO_NAME) {
                    out.extend_from_slice(&proto::option_reply(
                        option,
                        proto::REP_INFO,
                        &proto::info_name(&export.name),
                    ));
                }
                out.extend_from_slice(&proto::option_reply(option, proto::REP_ACK, &[]));
                s.write_all(&out).await?;
                s.flush().await?;
                if option == proto::OPT_GO {
                    return Ok(Outcome::Transmission { size });
                }
            }
            // STARTTLS, STRUCTURED_REPLY, the metadata contexts and anything
            // newer: unsupported, which clients handle by doing without.
            _ => reply(s, option, proto::REP_ERR_UNSUP, &[]).await?,
        }
    }
}

async fn reply<S: AsyncWrite + Unpin>(
    s: &mut S,
    option: u32,
    reply_type: u32,
    data: &[u8],
) -> io::Result<()> {
    s.write_all(&proto::option_reply(option, reply_type, data))
        .await?;
    s.flush().await
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::io::DuplexStream;

    use super::*;
    use crate::nbd::MemoryDevice;

    fn export() -> Export {
        Export {
            name: "hydra".into(),
            device: Arc::new(MemoryDevice::new(1 << 20, 4096)),
        }
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    async fn send_option(c: &mut DuplexStream, option: u32, data: &[u8]) {
        let mut m = b"IHAVEOPT".to_vec();
        m.extend_from_slice(&option.to_be_bytes());
        m.extend_from_slice(&(data.len() as u32).to_be_bytes());
        m.extend_from_slice(data);
        c.write_all(&m).await.expect("send option");
    }

    async fn read_reply(c: &mut DuplexStream) -> (u32, u32, Vec<u8>) {
        let mut h = [0; 20];
        c.read_exact(&mut h).await.expect("reply header");
        assert_eq!(&h[..8], &proto::OPTION_REPLY_MAGIC.to_be_bytes());
        let opt = u32::from_be_bytes([h[8], h[9], h[10], h[11]]);
        let ty = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
        let len = u32::from_be_bytes([h[16], h[17], h[18], h[19]]);
        let mut d = vec![0; len as usize];
        c.read_exact(&mut d).await.expect("reply data");
        (opt, ty, d)
    }

    async fn start(
        client_flags: u32,
    ) -> (
        DuplexStream,
        tokio::task::JoinHandle<Result<Outcome, HandshakeError>>,
    ) {
        let (mut c, mut s) = tokio::io::duplex(1 << 16);
        let task = tokio::spawn(async move { negotiate(&mut s, &export()).await });
        let mut g = [0; 18];
        c.read_exact(&mut g).await.expect("greeting");
        assert_eq!(g, proto::greeting());
        c.write_all(&client_flags.to_be_bytes())
            .await
            .expect("flags");
        (c, task)
    }

    fn info_data(name: &str, infos: &[u16]) -> Vec<u8> {
        let mut d = (name.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(name.as_bytes());
        d.extend_from_slice(&(infos.len() as u16).to_be_bytes());
        for i in infos {
            d.extend_from_slice(&i.to_be_bytes());
        }
        d
    }

    #[test]
    fn options_then_go() {
        rt().block_on(async {
            let (mut c, task) = start(3).await;
            send_option(&mut c, 0x4242, b"junk").await;
            assert_eq!(
                read_reply(&mut c).await,
                (0x4242, proto::REP_ERR_UNSUP, vec![])
            );
            send_option(&mut c, proto::OPT_LIST, &[]).await;
            let (_, ty, d) = read_reply(&mut c).await;
            assert_eq!((ty, d), (proto::REP_SERVER, proto::rep_server("hydra")));
            assert_eq!(read_reply(&mut c).await.1, proto::REP_ACK);
            send_option(&mut c, proto::OPT_LIST, b"x").await;
            assert_eq!(read_reply(&mut c).await.1, proto::REP_ERR_INVALID);
            send_option(&mut c, proto::OPT_INFO, &info_data("nope", &[])).await;
            assert_eq!(read_reply(&mut c).await.1, proto::REP_ERR_UNKNOWN);
            send_option(&mut c, proto::OPT_INFO, b"\0\0").await;
            assert_eq!(read_reply(&mut c).await.1, proto::REP_ERR_INVALID);
            // An oversized option is drained and refused; haggling goes on.
            send_option(&mut c, proto::OPT_GO, &vec![0; 100_000]).await;
            assert_eq!(read_reply(&mut c).await.1, proto::REP_ERR_INVALID);

            send_option(&mut c, proto::OPT_GO, &info_data("", &[proto::INFO_NAME])).await;
            let (_, ty, d) = read_reply(&mut c).await;
            assert_eq!(ty, proto::REP_INFO);
            assert_eq!(d, proto::info_export(1 << 20, proto::TRANSMISSION_FLAGS));
            let (_, ty, d) = read_reply(&mut c).await;
            assert_eq!((ty, d), (proto::REP_INFO, proto::info_block_size(4096)));
            let (_, ty, d) = read_reply(&mut c).await;
            assert_eq!((ty, d), (proto::REP_INFO, proto::info_name("hydra")));
            assert_eq!(read_reply(&mut c).await.1, proto::REP_ACK);
            let outcome = task.await.expect("join").expect("handshake");
            assert_eq!(outcome, Outcome::Transmission { size: 1 << 20 });
        });
    }

    #[test]
    fn export_name_with_and_without_zeroes() {
        rt().block_on(async {
            for (flags, extra) in [(1u32, 124usize), (3, 0)] {
                let (mut c, task) = start(flags).await;
                send_option(&mut c, proto::OPT_EXPORT_NAME, b"hydra").await;
                let mut r = vec![0; 10 + extra];
                c.read_exact(&mut r).await.expect("export reply");
                assert_eq!(&r[..8], &(1u64 << 20).to_be_bytes());
                assert_eq!(&r[8..10], &proto::TRANSMISSION_FLAGS.to_be_bytes());
                let outcome = task.await.expect("join").expect("handshake");
                assert_eq!(outcome, Outcome::Transmission { size: 1 << 20 });
            }
        });
    }

    #[test]
    fn connection_ending_cases() {
        rt().block_on(async {
            let (mut c, task) = start(3).await;
            send_option(&mut c, proto::OPT_EXPORT_NAME, b"other").await;
            assert!(matches!(
                task.await.expect("join"),
                Err(HandshakeError::UnknownExport(n)) if n == "other"
            ));

            let (_c, task) = start(8).await;
            assert!(matches!(
                task.await.expect("join"),
                Err(HandshakeError::Proto(ProtoError::UnknownClientFlags(8)))
            ));

            let (mut c, task) = start(3).await;
            c.write_all(&[0; 16]).await.expect("write");
            assert!(matches!(
                task.await.expect("join"),
                Err(HandshakeError::Proto(ProtoError::OptionMagic(0)))
            ));

            let (mut c, task) = start(3).await;
            send_option(&mut c, proto::OPT_ABORT, &[]).await;
            assert_eq!(read_reply(&mut c).await.1, proto::REP_ACK);
            assert_eq!(task.await.expect("join").expect("abort"), Outcome::Aborted);

            let (c, task) = start(3).await;
            drop(c);
            assert_eq!(task.await.expect("join").expect("eof"), Outcome::Aborted);
        });
    }
}
