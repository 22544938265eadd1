//! Errors of the replication layer.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The replica's log could not be written or synced: its state on disk is
    /// unknown, so it stops (fail-stop; restarting it recovers from the file).
    #[error("the replica stopped: {0}")]
    Failed(String),
    #[error("cannot encode a log record: {0}")]
    Encode(String),
    #[error("invalid replica configuration: {0}")]
    Config(String),
    /// This replica is not the leader; `leader` is the one it knows of.
    #[error("not the leader (leader: {leader:?})")]
    NotLeader { leader: Option<u64> },
}

impl ReplicaError {
    pub fn io(path: &Path, source: std::io::Error) -> ReplicaError {
        ReplicaError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

pub type Result<T> = std::result::Result<T, ReplicaError>;
