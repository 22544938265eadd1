//! The frame every Silt replication and volume connection speaks: body
//! length (u32 LE), CRC32C of the body (u32 LE), body (`postcard`).

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::io::{self, Read, Write};

/// Write `msg` as one frame (not flushed).
pub fn write_frame<M: Serialize>(w: &mut impl Write, msg: &M) -> io::Result<()> {
    let body = postcard::to_stdvec(msg).map_err(io::Error::other)?;
    let mut head = [0u8; 8];
    head[..4].copy_from_slice(&(body.len() as u32).to_le_bytes());
    head[4..].copy_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    w.write_all(&head)?;
    w.write_all(&body)
}

/// Read one frame of at most `max` body bytes; a longer frame, a failed
/// checksum or an undecodable body is `InvalidData`.
pub fn read_frame<M: DeserializeOwned>(r: &mut impl Read, max: usize) -> io::Result<M> {
    let mut head = [0u8; 8];
    r.read_exact(&mut head)?;
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes (at most {max})"),
        ));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    if crc32c::crc32c(&body) != crc {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a frame failed its checksum",
        ));
    }
    postcard::from_bytes(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_bad_ones_are_refused() {
        let mut buf = Vec::new();
        write_frame(&mut buf, &(7u32, "block".to_string())).unwrap();
        let back: (u32, String) = read_frame(&mut buf.as_slice(), 1024).unwrap();
        assert_eq!(back, (7, "block".to_string()));
        assert!(read_frame::<(u32, String)>(&mut buf.as_slice(), 3).is_err());
        let last = buf.len() - 1;
        buf[last] ^= 1;
        let e = read_frame::<(u32, String)>(&mut buf.as_slice(), 1024).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }
}
