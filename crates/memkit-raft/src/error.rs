//! Why a write or a read through the group did not get an answer from the state machine.
//! Outcomes the engine decides (NOT_STORED, EXISTS, out of memory, ...) are not errors here:
//! they are a [`crate::Reply`].

use serde::{Deserialize, Serialize};

use crate::types::{NodeId, Refusal};

/// A write's or a read's failure in the group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClusterError {
    /// No leader is known (an election is under way, or no majority is up). The write was
    /// not proposed: retrying is safe.
    NoLeader,
    /// The node asked is not the leader (the leader changed while the request travelled):
    /// the write was not proposed, retrying is safe.
    NotLeader(Option<NodeId>),
    /// The leader could not be reached: nothing was sent, retrying is safe.
    Unreachable(String),
    /// The request was sent and no answer came back: it may or may not have been applied
    /// (an `incr` retried after this may count twice).
    Indeterminate(String),
    /// A read refused by the engine (a bad key).
    Engine(Refusal),
    /// The deadline passed before the group answered.
    Timeout,
    /// This node's Raft stopped (shut down, or a storage failure).
    Stopped(String),
}

impl std::fmt::Display for ClusterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClusterError::NoLeader => f.write_str("no leader"),
            ClusterError::NotLeader(l) => write!(f, "not the leader (leader: {l:?})"),
            ClusterError::Unreachable(m) => write!(f, "leader unreachable: {m}"),
            ClusterError::Indeterminate(m) => write!(f, "outcome unknown: {m}"),
            ClusterError::Engine(r) => write!(f, "refused: {r:?}"),
            ClusterError::Timeout => f.write_str("timed out"),
            ClusterError::Stopped(m) => write!(f, "raft stopped: {m}"),
        }
    }
}

impl std::error::Error for ClusterError {}

impl ClusterError {
    /// Whether the request surely was not proposed, so that it may be sent again.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ClusterError::NoLeader | ClusterError::NotLeader(_) | ClusterError::Unreachable(_)
        )
    }
}

/// A write's failure.
pub type WriteError = ClusterError;
/// A read's failure.
pub type ReadError = ClusterError;
