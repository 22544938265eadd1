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
    /// The state machine's durable position is below the log's trimmed
    /// index: the entries between were trimmed after every replica said it
    /// had applied them durably, so this replica's state was lost or rolled
    /// back and must be rebuilt (from another replica) before it rejoins.
    #[error(
        "the state machine is applied up to entry {applied} but the log was trimmed up to {compacted}: \
         this replica's state is older than its log (restore it, or rebuild the replica from another one)"
    )]
    BehindTrim { applied: usize, compacted: usize },
    /// Entries from `from` were asked for, but the log starts at `trimmed`.
    #[error("log entries from {from} were asked for, but the log was trimmed up to {trimmed}")]
    Trimmed { from: usize, trimmed: usize },
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
