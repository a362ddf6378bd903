//! Membership changes as the leader makes them ([`apply`]), for its own callers and for the
//! peers that forward them ([`crate::Node::add_learner`] and the others).
//!
//! Each [`Change`] names a target state (node N a learner at ADDR, N a voter, N absent)
//! rather than a step, and [`apply`] first looks at where the membership stands. So a change
//! sent again after an unclear ending finishes what is left instead of repeating it, and
//! that is what a change interrupted midway needs: openraft changes voters in two entries
//! (joint consensus, the old and the new set both deciding, then the new set alone), and a
//! leader lost between them leaves the group in the joint configuration, where it still
//! works but needs a majority of both sets. The next leader does not finish it by itself:
//! the same change sent to it does (openraft moves a joint configuration whose new set is
//! the goal straight to that set).
//!
//! Guards openraft does not have, because a wrong change can wedge a group for good:
//! - a learner is promoted only once it has caught up (by log or by snapshot) to the entry
//!   that made the current membership, so a voter that lags does not stall commits;
//! - a change of voters is proposed only if a majority of the new voter set answers a ping
//!   now: removing a live node while another is down, or promoting a dead learner into a
//!   group one failure from its limit, would leave no majority able to commit the change or
//!   anything after it.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;

use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::metrics::WaitError;
use openraft::{BasicNode, ChangeMembers, EffectiveMembership, RaftMetrics, ServerState};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::error::ClusterError;
use crate::status::Membership;
use crate::types::{NodeId, Raft};

/// A membership change, as a target state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Change {
    /// Node `id` is a member at `addr` (a new node joins as a learner) and has caught up.
    AddLearner {
        /// The node.
        id: NodeId,
        /// Its peer address, `HOST:PORT`.
        addr: String,
    },
    /// Node `id`, a member, votes.
    Promote(NodeId),
    /// Node `id` is not a member.
    Remove(NodeId),
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::AddLearner { id, addr } => write!(f, "add node {id} at {addr}"),
            Change::Promote(id) => write!(f, "promote node {id}"),
            Change::Remove(id) => write!(f, "remove node {id}"),
        }
    }
}

type Effective = Arc<EffectiveMembership<NodeId, BasicNode>>;

/// Makes `change` on this node, which must lead, by `deadline`. `live` says whether a peer
/// answers now (see the module's guards). Returns the membership after the change.
pub async fn apply<L, F>(
    raft: &Raft,
    change: Change,
    deadline: Instant,
    live: L,
) -> Result<Membership, ClusterError>
where
    L: Fn(NodeId) -> F,
    F: Future<Output = bool>,
{
    let work = async {
        match &change {
            Change::AddLearner { id, addr } => add_learner(raft, *id, addr, deadline).await,
            Change::Promote(id) => promote(raft, *id, deadline, &live).await,
            Change::Remove(id) => remove(raft, *id, &live).await,
        }
    };
    match tokio::time::timeout_at(deadline, work).await {
        Ok(r) => r,
        // Dropping the work does not withdraw what openraft was given: it goes on.
        Err(_) => Err(ClusterError::Unfinished(format!(
            "{change}: the deadline passed"
        ))),
    }
}

/// The membership to change, if this node leads and the last change is committed (openraft
/// takes one change at a time).
async fn current(raft: &Raft) -> Result<Effective, ClusterError> {
    let state = raft
        .with_raft_state(|st| {
            let ms = &st.membership_state;
            let committed = ms.committed().log_id() == ms.effective().log_id();
            (st.server_state, ms.effective().clone(), committed)
        })
        .await
        .map_err(|e| ClusterError::Stopped(e.to_string()))?;
    match state {
        (ServerState::Leader, eff, true) => Ok(eff),
        (ServerState::Leader, _, false) => Err(ClusterError::ChangeInProgress),
        _ => Err(not_leader(raft.metrics().borrow().current_leader)),
    }
}

fn not_leader(leader: Option<NodeId>) -> ClusterError {
    match leader {
        Some(l) => ClusterError::NotLeader(Some(l)),
        None => ClusterError::NoLeader,
    }
}

/// The membership as this node's log has it now.
pub async fn view(raft: &Raft) -> Result<Membership, ClusterError> {
    raft.with_raft_state(|st| {
        let ms = &st.membership_state;
        let committed = ms.committed().log_id() == ms.effective().log_id();
        Membership::of_effective(ms.effective(), committed)
    })
    .await
    .map_err(|e| ClusterError::Stopped(e.to_string()))
}

async fn add_learner(
    raft: &Raft,
    id: NodeId,
    addr: &str,
    deadline: Instant,
) -> Result<Membership, ClusterError> {
    let eff = current(raft).await?;
    let index = match eff.get_node(&id) {
        // Already there (a change sent again): only the catching up may be left to do.
        Some(n) if n.addr == addr => eff.log_id().map_or(0, |l| l.index),
        Some(n) => {
            return Err(ClusterError::Rejected(format!(
                "node {id} is a member at {}: remove it first",
                n.addr
            )));
        }
        None => {
            let r = raft
                .add_learner(id, BasicNode::new(addr), false)
                .await
                .map_err(change_err)?;
            r.log_id.index
        }
    };
    caught_up(raft, id, index, deadline).await?;
    view(raft).await
}

async fn promote<L, F>(
    raft: &Raft,
    id: NodeId,
    deadline: Instant,
    live: &L,
) -> Result<Membership, ClusterError>
where
    L: Fn(NodeId) -> F,
    F: Future<Output = bool>,
{
    let eff = current(raft).await?;
    let m = eff.membership();
    if m.get_node(&id).is_none() {
        return Err(ClusterError::Rejected(format!(
            "node {id} is not a member: add it as a learner first"
        )));
    }
    let last = last_config(&eff);
    if last.contains(&id) && m.get_joint_config().len() == 1 {
        return view(raft).await;
    }
    if !last.contains(&id) {
        caught_up(raft, id, eff.log_id().map_or(0, |l| l.index), deadline).await?;
    }
    let mut goal = last;
    goal.insert(id);
    live_majority(raft, &goal, live).await?;
    let add = ChangeMembers::AddVoterIds(BTreeSet::from([id]));
    change_voters(raft, add).await
}

async fn remove<L, F>(raft: &Raft, id: NodeId, live: &L) -> Result<Membership, ClusterError>
where
    L: Fn(NodeId) -> F,
    F: Future<Output = bool>,
{
    let eff = current(raft).await?;
    let m = eff.membership();
    let voter = m.get_joint_config().iter().any(|c| c.contains(&id));
    if voter {
        let mut goal = last_config(&eff);
        goal.remove(&id);
        if goal.is_empty() {
            return Err(ClusterError::Rejected(format!(
                "node {id} is the last voter"
            )));
        }
        live_majority(raft, &goal, live).await?;
        let drop = ChangeMembers::RemoveVoters(BTreeSet::from([id]));
        change_voters(raft, drop).await
    } else if m.get_node(&id).is_some() {
        // A learner: one entry, no joint consensus (it never voted).
        let drop = ChangeMembers::RemoveNodes(BTreeSet::from([id]));
        raft.change_membership(drop, false)
            .await
            .map_err(change_err)?;
        view(raft).await
    } else {
        view(raft).await
    }
}

/// The voter set a change starts from: the newest of a joint configuration's two.
fn last_config(eff: &EffectiveMembership<NodeId, BasicNode>) -> BTreeSet<NodeId> {
    eff.membership()
        .get_joint_config()
        .last()
        .cloned()
        .unwrap_or_default()
}

/// Changes the voters through joint consensus; `retain: false`, so a voter removed leaves
/// the membership rather than staying on as a learner.
async fn change_voters(
    raft: &Raft,
    change: ChangeMembers<NodeId, BasicNode>,
) -> Result<Membership, ClusterError> {
    let r = raft
        .change_membership(change, false)
        .await
        .map_err(change_err)?;
    match r.membership {
        // Answered once the entry is committed and applied.
        Some(m) => Ok(Membership::of(&m, Some(r.log_id.index), true)),
        None => view(raft).await,
    }
}

fn change_err(e: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>) -> ClusterError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => not_leader(f.leader_id),
        RaftError::APIError(ClientWriteError::ChangeMembershipError(c)) => match c {
            ChangeMembershipError::InProgress(_) => ClusterError::ChangeInProgress,
            other => ClusterError::Rejected(other.to_string()),
        },
        RaftError::Fatal(f) => ClusterError::Stopped(f.to_string()),
    }
}

/// The last log index the leader knows `id` holds.
fn matched(m: &RaftMetrics<NodeId, BasicNode>, id: NodeId) -> Option<u64> {
    m.replication
        .as_ref()?
        .get(&id)
        .copied()
        .flatten()
        .map(|l| l.index)
}

/// Waits until `id` holds the log up to `index` (by log or by snapshot), as the leader's
/// replication metrics say.
async fn caught_up(
    raft: &Raft,
    id: NodeId,
    index: u64,
    deadline: Instant,
) -> Result<(), ClusterError> {
    let left = deadline.saturating_duration_since(Instant::now());
    let waited = raft
        .wait(Some(left))
        .metrics(
            |m| m.state != ServerState::Leader || matched(m, id) >= Some(index),
            "learner caught up",
        )
        .await;
    match waited {
        Ok(m) if m.state == ServerState::Leader => Ok(()),
        Ok(m) => Err(ClusterError::Unfinished(format!(
            "the leader changed (now {:?}) while node {id} caught up",
            m.current_leader
        ))),
        Err(WaitError::Timeout(..)) => {
            let m = matched(&raft.metrics().borrow(), id);
            Err(ClusterError::Unfinished(format!(
                "node {id} has not caught up: it holds the log up to {m:?}, not yet {index}"
            )))
        }
        Err(WaitError::ShuttingDown) => Err(ClusterError::Stopped("shutting down".into())),
    }
}

/// Refuses a change of voters to `goal` unless a majority of `goal` answers now (this
/// node, the leader, counts without asking).
async fn live_majority<L, F>(
    raft: &Raft,
    goal: &BTreeSet<NodeId>,
    live: &L,
) -> Result<(), ClusterError>
where
    L: Fn(NodeId) -> F,
    F: Future<Output = bool>,
{
    let me = raft.metrics().borrow().id;
    let mut down = Vec::new();
    for id in goal {
        if *id != me && !live(*id).await {
            down.push(*id);
        }
    }
    if (goal.len() - down.len()) * 2 > goal.len() {
        Ok(())
    } else {
        Err(ClusterError::Rejected(format!(
            "the voters would be {goal:?}, and {down:?} do not answer: no majority could \
             commit the change or anything after it"
        )))
    }
}
