//! Why a write, a read or a membership change through the group did not get an answer.
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
    /// A membership change the group refuses as asked (promoting a node that is not a
    /// member, an id already used at another address, a change that would leave the voters
    /// without a reachable majority): nothing was proposed, and the same request would be
    /// refused again until the group changes.
    Rejected(String),
    /// Another membership change is not committed yet (openraft takes one at a time):
    /// nothing was proposed, retrying is safe.
    ChangeInProgress,
    /// A membership change was proposed but not seen through: the leader changed or the
    /// deadline passed, perhaps with the group left in joint consensus or a learner still
    /// catching up. Membership changes name a target state (a learner at an address, a
    /// voter, an absent node), so sending the same change again finishes it: retrying is
    /// safe.
    Unfinished(String),
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
            ClusterError::Rejected(m) => write!(f, "change refused: {m}"),
            ClusterError::ChangeInProgress => {
                f.write_str("another membership change is being committed")
            }
            ClusterError::Unfinished(m) => write!(f, "change unfinished (safe to retry): {m}"),
        }
    }
}

impl std::error::Error for ClusterError {}

impl ClusterError {
    /// Whether sending the request again is safe: it surely was not proposed, or it is a
    /// membership change, which proposing again finishes rather than repeats
    /// ([`ClusterError::Unfinished`]).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ClusterError::NoLeader
                | ClusterError::NotLeader(_)
                | ClusterError::Unreachable(_)
                | ClusterError::ChangeInProgress
                | ClusterError::Unfinished(_)
        )
    }
}

/// A write's failure.
pub type WriteError = ClusterError;
/// A read's failure.
pub type ReadError = ClusterError;
