//! Replication's flags (`--raft-*`, `--read-consistency`): a memkitd that is one node of a
//! replicated group (`crate::replica`). memcached has none of these.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{EX_USAGE, Refusal};

/// Replication's flags, as given.
#[derive(Debug, Clone, clap::Args)]
pub struct RaftArgs {
    /// With --persist: this node's id in a replicated group (a number from 1).
    #[arg(long = "raft-node", value_name = "N")]
    pub raft_node: Option<u64>,
    /// The address the group's peers reach this node at.
    #[arg(long = "raft-listen", value_name = "HOST:PORT")]
    pub raft_listen: Option<String>,
    /// The group: every node's id and peer address, this one's included. A node started
    /// with it on an empty --persist directory joins the group's first start (the lowest id
    /// bootstraps it); on a non-empty one it rejoins.
    #[arg(long = "raft-peers", value_name = "1=HOST:PORT,2=HOST:PORT,...")]
    pub raft_peers: Option<String>,
    /// linearizable (default: a read sees every write acknowledged before it began, on any
    /// node) or local (a node's own state, which may lag the leader's by what is not yet
    /// replicated to it).
    #[arg(
        long = "read-consistency",
        value_name = "MODE",
        default_value = "linearizable"
    )]
    pub read_consistency: String,
    /// How long a write or a linearizable read may wait for the group (a leader, a
    /// majority) before it is answered SERVER_ERROR.
    #[arg(long = "raft-timeout-ms", value_name = "MS", default_value_t = 5000)]
    pub raft_timeout_ms: u64,
    /// Heartbeat period; an election starts after 6 to 8 of them without a leader (openraft
    /// adds its leader lease to the election timeout).
    #[arg(
        long = "raft-heartbeat-ms",
        value_name = "MS",
        default_value_t = 100,
        hide = true
    )]
    pub raft_heartbeat_ms: u64,
    /// A snapshot after this many log entries since the last; the log keeps a tenth of
    /// that (at most 1000) behind it for followers slightly behind.
    #[arg(
        long = "raft-snapshot-after",
        value_name = "N",
        default_value_t = 10_000,
        hide = true
    )]
    pub raft_snapshot_after: u64,
}

/// What a read reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadConsistency {
    /// The leader confirms it still leads and names the commit index; the node reads once
    /// it has applied that far.
    Linearizable,
    /// The node's own state as it stands.
    Local,
}

/// A node of a replicated group, as the flags ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftSettings {
    /// `--raft-node`.
    pub node: u64,
    /// `--raft-listen`.
    pub listen: String,
    /// `--raft-peers`.
    pub peers: BTreeMap<u64, String>,
    /// `--read-consistency`.
    pub read: ReadConsistency,
    /// `--raft-timeout-ms`.
    pub timeout: Duration,
    /// The hidden `--raft-heartbeat-ms`.
    pub heartbeat_ms: u64,
    /// The hidden `--raft-snapshot-after`.
    pub snapshot_after: u64,
}

impl RaftSettings {
    /// The settings the flags ask for: `Ok(None)` when no `--raft-*` flag is given.
    pub fn from_args(a: &RaftArgs, persist: bool) -> Result<Option<RaftSettings>, Refusal> {
        let usage = |m: &str| Err(Refusal::new(EX_USAGE, m.to_string()));
        let read = match a.read_consistency.as_str() {
            "linearizable" => ReadConsistency::Linearizable,
            "local" => ReadConsistency::Local,
            _ => return usage("--read-consistency: linearizable or local"),
        };
        let (node, listen, peers) = match (a.raft_node, &a.raft_listen, &a.raft_peers) {
            (None, None, None) => return Ok(None),
            (Some(n), Some(l), Some(p)) => (n, l.clone(), parse_peers(p)?),
            _ => return usage("--raft-node, --raft-listen and --raft-peers go together"),
        };
        if !persist {
            return usage("--raft-node needs --persist DIR: the node keeps its log there");
        }
        if !peers.contains_key(&node) {
            return usage("--raft-peers must list this node's own id (--raft-node)");
        }
        if a.raft_timeout_ms == 0 || a.raft_heartbeat_ms == 0 {
            return usage("--raft-timeout-ms and --raft-heartbeat-ms must be above 0");
        }
        Ok(Some(RaftSettings {
            node,
            listen,
            peers,
            read,
            timeout: Duration::from_millis(a.raft_timeout_ms),
            heartbeat_ms: a.raft_heartbeat_ms,
            snapshot_after: a.raft_snapshot_after.max(1),
        }))
    }
}

/// `1=HOST:PORT,2=HOST:PORT`: ids from 1, each once.
fn parse_peers(list: &str) -> Result<BTreeMap<u64, String>, Refusal> {
    let bad = |m: String| Refusal::new(EX_USAGE, format!("--raft-peers: {m}"));
    let mut peers = BTreeMap::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let (id, addr) = part
            .split_once('=')
            .ok_or_else(|| bad(format!("{part:?} is not ID=HOST:PORT")))?;
        let id: u64 = id
            .trim()
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| bad(format!("{id:?} is not a node id (a number from 1)")))?;
        if !addr.contains(':') {
            return Err(bad(format!("{addr:?} is not HOST:PORT")));
        }
        if peers.insert(id, addr.trim().to_string()).is_some() {
            return Err(bad(format!("node {id} is listed twice")));
        }
    }
    if peers.is_empty() {
        return Err(bad("no node listed".into()));
    }
    Ok(peers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(node: Option<u64>, peers: Option<&str>) -> RaftArgs {
        RaftArgs {
            raft_node: node,
            raft_listen: node.map(|_| "127.0.0.1:7000".into()),
            raft_peers: peers.map(Into::into),
            read_consistency: "linearizable".into(),
            raft_timeout_ms: 5000,
            raft_heartbeat_ms: 100,
            raft_snapshot_after: 10_000,
        }
    }

    #[test]
    fn a_group_is_read_and_its_mistakes_refused() {
        assert_eq!(RaftSettings::from_args(&args(None, None), false), Ok(None));
        let s = RaftSettings::from_args(&args(Some(2), Some("1=a:1,2=b:2,3=c:3")), true)
            .unwrap()
            .unwrap();
        assert_eq!(s.peers.len(), 3);
        assert_eq!(s.peers[&2], "b:2");
        for (node, peers, persist) in [
            (Some(2), Some("1=a:1,2=b:2"), false),
            (Some(4), Some("1=a:1,2=b:2"), true),
            (Some(1), Some("1=a:1,1=b:2"), true),
            (Some(1), Some("0=a:1"), true),
            (Some(1), Some("1=nope"), true),
            (Some(1), None, true),
        ] {
            let r = RaftSettings::from_args(&args(node, peers), persist);
            assert!(r.is_err(), "{node:?} {peers:?} {persist}: {r:?}");
        }
    }
}
