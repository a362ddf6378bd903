//! memkitd's place in a replicated group (`--raft-*`): the `raft_*` lines of its `stats` as
//! `memkit_raft_*` gauges, and, from the leader, each follower's progress. A server that is
//! not in a group reports no `raft_*` line, and so gets none of these families.
//!
//! Every role is written, 1 for the current one and 0 for the others, so that a role change
//! moves a value instead of starting and ending series (`memkit_raft_role{role="leader"} ==
//! 1` counts the leaders of a group).

use crate::{Families, Kind, label_set, lookup, number};

/// How far one follower (voter or learner) is behind the leader, as the leader sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Follower {
    /// The follower's node id.
    pub node: u64,
    /// The last log index the leader knows it holds (`None`: nothing yet).
    pub matched: Option<u64>,
    /// The log entries it lacks.
    pub lag: u64,
}

// (metric, stat, help): every one a gauge.
const RAFT: &[(&str, &str, &str)] = &[
    (
        "memkit_raft_node",
        "raft_node",
        "This server's node id in its replicated group.",
    ),
    (
        "memkit_raft_leader",
        "raft_leader",
        "The node id of the leader this node knows of (0: none).",
    ),
    (
        "memkit_raft_term",
        "raft_term",
        "This node's current Raft term.",
    ),
    (
        "memkit_raft_last_log_index",
        "raft_last_log_index",
        "The last index in this node's log.",
    ),
    (
        "memkit_raft_commit_index",
        "raft_commit_index",
        "The last log index this node knows committed.",
    ),
    (
        "memkit_raft_applied_index",
        "raft_applied_index",
        "The last log index this node's store applied.",
    ),
];

/// The roles `raft_role` names (memkit-raft's), each written as its own series.
const ROLES: [&str; 5] = ["leader", "follower", "candidate", "learner", "shutdown"];

impl Families {
    /// The `memkit_raft_*` families of a server whose `stats` (`general`) carry `raft_role`,
    /// and the leader's view of its `followers`.
    pub(crate) fn push_raft(
        &mut self,
        base: &[(&str, &str)],
        general: &[(String, String)],
        followers: &[Follower],
    ) {
        let Some(role) = lookup(general, "raft_role") else {
            return;
        };
        for r in ROLES {
            self.push(
                "memkit_raft_role",
                Kind::Gauge,
                "1 for this node's Raft role (leader, follower, candidate, learner), 0 for the \
                 others.",
                label_set(base, &[("role", r)]),
                if r == role { "1" } else { "0" }.into(),
            );
        }
        for (metric, stat, help) in RAFT {
            if let Some(v) = lookup(general, stat).and_then(number) {
                self.push(metric, Kind::Gauge, help, label_set(base, &[]), v);
            }
        }
        for f in followers {
            let node = f.node.to_string();
            let labels = label_set(base, &[("node", &node)]);
            self.push(
                "memkit_raft_follower_lag",
                Kind::Gauge,
                "Log entries a follower lacks, as its leader sees it (written by the leader only).",
                labels.clone(),
                f.lag.to_string(),
            );
            if let Some(m) = f.matched {
                self.push(
                    "memkit_raft_follower_matched_index",
                    Kind::Gauge,
                    "The last log index the leader knows a follower holds (written by the leader \
                     only).",
                    labels,
                    m.to_string(),
                );
            }
        }
    }
}
