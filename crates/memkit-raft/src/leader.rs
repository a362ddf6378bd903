//! What only the leader does, shared by a node's own callers and the peers that forward to
//! it: proposing a write with the leader's time stamp, and confirming leadership for a
//! linearizable read.

use memkit_types::{Clock, SystemClock};
use openraft::BasicNode;
use openraft::error::{CheckIsLeaderError, ClientWriteError, ForwardToLeader, RaftError};

use crate::error::ClusterError;
use crate::types::{NodeId, Proposal, Raft, Reply, Write};

fn not_leader(f: &ForwardToLeader<NodeId, BasicNode>) -> ClusterError {
    match f.leader_id {
        Some(l) => ClusterError::NotLeader(Some(l)),
        None => ClusterError::NoLeader,
    }
}

/// Proposes `write` stamped with this node's clock (the leader's: a node that is not the
/// leader is refused by openraft before anything is appended) and waits until it is
/// committed and applied here. Returns the outcome and the entry's log index.
pub async fn propose(raft: &Raft, write: Write) -> Result<(Reply, u64), ClusterError> {
    let p = Proposal {
        stamp_ms: SystemClock.now_millis(),
        write,
    };
    match raft.client_write(p).await {
        Ok(r) => Ok((r.data, r.log_id.index)),
        Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => Err(not_leader(&f)),
        Err(RaftError::APIError(e)) => Err(ClusterError::Stopped(e.to_string())),
        Err(RaftError::Fatal(e)) => Err(ClusterError::Stopped(e.to_string())),
    }
}

/// Confirms this node still leads (a heartbeat round with a majority) and waits until its
/// state machine has applied everything committed before: returns the log index a reader
/// anywhere must have applied to read linearizably.
pub async fn read_index(raft: &Raft) -> Result<u64, ClusterError> {
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
