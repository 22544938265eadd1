//! The CHECKPOINT file (000 §3.3.3): the low-water mark recovery reads the
//! log from, and the next transaction id. Its bytes are written down in
//! `docs/format/checkpoint.md`.

use crate::error::{Error, Result};
use crate::storage::fsutil::{create_dir_all, write_atomic};
use serde::{Deserialize, Serialize};
use std::fs;
use std::io;
use std::path::Path;

/// Name of the checkpoint file inside the directory given to [`write_checkpoint`].
pub const CHECKPOINT_FILE: &str = "CHECKPOINT";
/// Start of the header line, with the format version.
const CHECKPOINT_MAGIC: &str = "silt-checkpoint v1";

/// Contents of the checkpoint file (000 §3.3.3).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Recovery reads the log from here: every record below it is reflected in
    /// durable (flushed) components. Log files wholly below it may be deleted.
    pub low_water_lsn: u64,
    /// End of the log when the checkpoint was taken (informational).
    pub end_lsn: u64,
    /// Smallest transaction id not yet used, so that ids stay unique across
    /// restarts even after the log that mentions them is deleted.
    pub next_txn_id: u64,
}

/// Write `dir/CHECKPOINT` atomically (temporary file, fsync, rename, directory
/// fsync). The file is `silt-checkpoint v1 crc32c=<8 hex>\n` followed by the
/// JSON of `cp`; the checksum covers the JSON bytes.
pub fn write_checkpoint(dir: &Path, cp: &Checkpoint) -> Result<()> {
    let json = serde_json::to_vec(cp)
        .map_err(|e| Error::Config(format!("cannot serialize checkpoint: {e}")))?;
    let mut bytes =
        format!("{CHECKPOINT_MAGIC} crc32c={:08x}\n", crc32c::crc32c(&json)).into_bytes();
    bytes.extend_from_slice(&json);
    create_dir_all(dir)?;
    write_atomic(&dir.join(CHECKPOINT_FILE), &bytes)
}

/// Read `dir/CHECKPOINT`: `None` if there is none, [`Error::Corrupt`] if it
/// fails its checksum or does not parse.
pub fn read_checkpoint(dir: &Path) -> Result<Option<Checkpoint>> {
    let path = dir.join(CHECKPOINT_FILE);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(&path, e)),
    };
    let nl = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| Error::corrupt(&path, "checkpoint header line is missing"))?;
    let header = std::str::from_utf8(&bytes[..nl])
        .map_err(|_| Error::corrupt(&path, "checkpoint header is not text"))?;
    let crc_hex = header
        .strip_prefix(CHECKPOINT_MAGIC)
        .and_then(|r| r.strip_prefix(" crc32c="))
        .ok_or_else(|| {
            Error::corrupt(
                &path,
                format!("not a checkpoint file of this version (header `{header}`)"),
            )
        })?;
    let crc = u32::from_str_radix(crc_hex, 16)
        .map_err(|_| Error::corrupt(&path, format!("bad checksum field `{crc_hex}`")))?;
    let json = &bytes[nl + 1..];
    if crc32c::crc32c(json) != crc {
        return Err(Error::corrupt(&path, "checkpoint checksum mismatch"));
    }
    serde_json::from_slice(json)
        .map(Some)
        .map_err(|e| Error::corrupt(&path, format!("checkpoint does not parse: {e}")))
}
