//! What only the leader does for a node's own callers and the peers that ask it:
//! confirming leadership for a linearizable read (by its lease, `crate::lease`, or a
//! heartbeat round). (Proposing is the proposer's:
//! `crate::proposer`.)

use openraft::BasicNode;
use openraft::error::{CheckIsLeaderError, ForwardToLeader, RaftError};

use crate::error::ClusterError;
use crate::lease::Lease;
use crate::types::{NodeId, Raft};

pub(crate) fn not_leader(f: &ForwardToLeader<NodeId, BasicNode>) -> ClusterError {
    match f.leader_id {
        Some(l) => ClusterError::NotLeader(Some(l)),
        None => ClusterError::NoLeader,
    }
}

/// Confirms this node still leads and waits until its state machine has applied everything
/// committed before: returns the log index a reader anywhere must have applied to read
/// linearizably. By the lease when it holds (no message sent), else by a heartbeat round
/// with a majority.
pub async fn read_index(raft: &Raft, lease: &Lease) -> Result<u64, ClusterError> {
    if let Some(index) = lease.read_index(raft) {
        return Ok(index);
    }
    match raft.ensure_linearizable().await {
        Ok(id) => Ok(id.map_or(0, |l| l.index)),
        Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => Err(not_leader(&f)),
        // A leader that cannot reach a majority may have been replaced: ask again later.
        Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(_))) => {
            Err(ClusterError::NoLeader)
        }
        Err(RaftError::Fatal(e)) => Err(ClusterError::Stopped(e.to_string())),
    }
}
