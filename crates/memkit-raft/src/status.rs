//! [`Status`]: the group as an operator sees it from one node: this node's role and
//! indexes, the membership with every member's address, and how far each follower is
//! behind the leader.
//!
//! Only the leader knows how far followers are (openraft's replication metrics live there),
//! so a follower asks it over the peer protocol ([`crate::Node::status`]); with no leader to
//! ask, the status is this node's own view and says so ([`View::Local`]).

use std::collections::BTreeMap;

use openraft::{BasicNode, EffectiveMembership, ServerState};
use serde::{Deserialize, Serialize};

use crate::types::{NodeId, Raft};

/// A node's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// Leads the group.
    Leader,
    /// Follows a leader.
    Follower,
    /// Standing for election.
    Candidate,
    /// Not a voter: a learner, a node not yet (or no longer) in a membership.
    Learner,
    /// Shut down.
    Shutdown,
}

impl From<ServerState> for Role {
    fn from(s: ServerState) -> Role {
        match s {
            ServerState::Leader => Role::Leader,
            ServerState::Follower => Role::Follower,
            ServerState::Candidate => Role::Candidate,
            ServerState::Learner => Role::Learner,
            ServerState::Shutdown => Role::Shutdown,
        }
    }
}

/// The group's members as one log entry set them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    /// The index of the log entry that set this membership.
    pub log_index: Option<u64>,
    /// Whether that entry is committed. Until it is, openraft takes no other change.
    pub committed: bool,
    /// The voter sets whose majorities decide: one, or two (the old set, then the new)
    /// while a change of voters goes through joint consensus. Two sets once the change is
    /// committed mean it was interrupted (its leader lost): sending it again finishes it.
    pub configs: Vec<Vec<NodeId>>,
    /// Voters and their peer addresses.
    pub voters: BTreeMap<NodeId, String>,
    /// Learners (replicated to, not voting) and their peer addresses.
    pub learners: BTreeMap<NodeId, String>,
}

impl Membership {
    /// The view of openraft's `membership`, set by the entry at `log_index`.
    pub(crate) fn of(
        m: &openraft::Membership<NodeId, BasicNode>,
        log_index: Option<u64>,
        committed: bool,
    ) -> Membership {
        let configs: Vec<Vec<NodeId>> = m
            .get_joint_config()
            .iter()
            .map(|c| c.iter().copied().collect())
            .collect();
        let mut voters = BTreeMap::new();
        let mut learners = BTreeMap::new();
        for (id, node) in m.nodes() {
            if configs.iter().any(|c| c.contains(id)) {
                voters.insert(*id, node.addr.clone());
            } else {
                learners.insert(*id, node.addr.clone());
            }
        }
        Membership {
            log_index,
            committed,
            configs,
            voters,
            learners,
        }
    }

    pub(crate) fn of_effective(
        m: &EffectiveMembership<NodeId, BasicNode>,
        committed: bool,
    ) -> Membership {
        Membership::of(m.membership(), m.log_id().map(|l| l.index), committed)
    }

    /// Whether a change of voters is half done (two voter sets).
    pub fn is_joint(&self) -> bool {
        self.configs.len() > 1
    }

    /// The address of member `id`, voter or learner.
    pub fn addr(&self, id: NodeId) -> Option<&str> {
        self.voters
            .get(&id)
            .or_else(|| self.learners.get(&id))
            .map(String::as_str)
    }
}

/// How far one follower (voter or learner) is behind the leader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Follower {
    /// The follower.
    pub id: NodeId,
    /// Whether it votes.
    pub voter: bool,
    /// The last log index the leader knows it holds (`None`: nothing yet).
    pub matched: Option<u64>,
    /// The entries it lacks: from `matched` to the leader's last log index. A follower
    /// that is down keeps its `matched`, so its lag grows with every write.
    pub lag: u64,
}

/// The leader's replication, follower by follower.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replication {
    /// The leader.
    pub leader: NodeId,
    /// The last index in the leader's log.
    pub last_log_index: Option<u64>,
    /// Every other member, by id.
    pub followers: Vec<Follower>,
}

/// Whose view [`Status::membership`] and [`Status::replication`] are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum View {
    /// The leader's (this node's, if it leads): the membership it proposes under, and its
    /// replication.
    Leader(NodeId),
    /// This node's own, because no leader answered: the membership its log last named
    /// (perhaps behind the group's), and no replication.
    Local,
}

/// What [`crate::Node::status`] reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// This node.
    pub id: NodeId,
    /// Its role.
    pub role: Role,
    /// The leader it knows of.
    pub leader: Option<NodeId>,
    /// Its current term.
    pub term: u64,
    /// The last index in its log.
    pub last_log_index: Option<u64>,
    /// The last index it knows committed.
    pub commit_index: Option<u64>,
    /// The last index its state machine applied.
    pub applied_index: Option<u64>,
    /// The last index its latest snapshot covers.
    pub snapshot_index: Option<u64>,
    /// Whose view the two fields below are.
    pub view: View,
    /// The group's members.
    pub membership: Membership,
    /// Each follower's progress, from the leader; `None` in a [`View::Local`].
    pub replication: Option<Replication>,
}

impl Status {
    /// This node's own status: with the replication if it leads.
    pub(crate) async fn local(raft: &Raft) -> Status {
        let m = raft.metrics().borrow().clone();
        // The effective membership and whether it is committed, read together.
        let state = raft
            .with_raft_state(|st| {
                let ms = &st.membership_state;
                let committed = ms.committed().log_id() == ms.effective().log_id();
                (
                    st.committed.map(|l| l.index),
                    ms.effective().clone(),
                    committed,
                )
            })
            .await;
        let (commit_index, membership) = match state {
            Ok((c, eff, committed)) => (c, Membership::of_effective(&eff, committed)),
            // Stopped: what the last metrics said.
            Err(_) => (None, metrics_membership(&m)),
        };
        let replication = match (&m.replication, m.state) {
            (Some(r), ServerState::Leader) => Some(Replication {
                leader: m.id,
                last_log_index: m.last_log_index,
                followers: r
                    .iter()
                    .filter(|(id, _)| **id != m.id)
                    .map(|(id, matched)| Follower {
                        id: *id,
                        voter: membership.voters.contains_key(id),
                        matched: matched.map(|l| l.index),
                        lag: entries_upto(m.last_log_index)
                            .saturating_sub(entries_upto(matched.map(|l| l.index))),
                    })
                    .collect(),
            }),
            _ => None,
        };
        Status {
            id: m.id,
            role: m.state.into(),
            leader: m.current_leader,
            term: m.current_term,
            last_log_index: m.last_log_index,
            commit_index,
            applied_index: m.last_applied.map(|l| l.index),
            snapshot_index: m.snapshot.map(|l| l.index),
            view: if replication.is_some() {
                View::Leader(m.id)
            } else {
                View::Local
            },
            membership,
            replication,
        }
    }

    /// This status with the leader's membership and replication (its view of the group).
    pub(crate) fn with_leader_view(mut self, leader: Status) -> Status {
        self.view = leader.view;
        self.membership = leader.membership;
        self.replication = leader.replication;
        self
    }
}

/// The membership openraft's metrics name (the effective one); whether it is committed is
/// not known there: said uncommitted.
fn metrics_membership(m: &openraft::RaftMetrics<NodeId, BasicNode>) -> Membership {
    let stored = &m.membership_config;
    Membership::of(stored.membership(), stored.log_id().map(|l| l.index), false)
}

/// How many entries a log holding up to `index` has (the first entry is index 0).
fn entries_upto(index: Option<u64>) -> u64 {
    index.map_or(0, |i| i + 1)
}
