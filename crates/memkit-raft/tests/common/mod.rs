//! What memkit-raft's group tests share: a group of nodes in one process on 127.0.0.1
//! (three to start with, each with its own config if need be, more joining later; their
//! directories removed at the end), the writes they send, and bounded waits.
//! `linearizable.rs` keeps its own cluster (relays in front of the nodes) but takes the
//! ports and the writes from here.

// Each test file uses its own part of this module.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use memkit_raft::{
    Config, Mode, Node, NodeId, Reply, Role, StoreResult, Vivify, Write, entry_of_cas,
};
use memkit_testkit::tempdir::{TempDir, tempdir};
use tokio::time::{Instant, sleep, timeout};

/// Whole-test bound: a hung election or membership change fails the test instead of the
/// run.
pub const TEST_LIMIT: Duration = Duration::from_secs(60);

/// Timeouts with room for a loaded two-core machine (twelve nodes of four tests at once,
/// each syncing its log): a follower waits ten heartbeats or more before it stands, so a
/// busy scheduler or a slow fsync does not depose a healthy leader. Nothing waits on an
/// election finishing within a tight time: `Group::leader` allows 15 s, writes and reads
/// retry until `request_timeout`.
pub fn config() -> Config {
    Config {
        memory_limit: 8 << 20,
        heartbeat_ms: 100,
        election_timeout_ms: (1000, 2000),
        request_timeout: Duration::from_secs(5),
        ..Config::default()
    }
}

pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Nodes of one group, each in `n{id}` under one temporary directory; a node down is
/// absent from `nodes`.
pub struct Group {
    /// Every node's peer address, those added later included.
    pub addrs: BTreeMap<NodeId, String>,
    pub nodes: BTreeMap<NodeId, Node>,
    // Last: dropped after the nodes, whose files it removes.
    dir: TempDir,
}

impl Group {
    pub async fn start(name: &str) -> Group {
        Group::start_with(name, config).await
    }

    pub async fn start_with(name: &str, cfg: impl Fn() -> Config) -> Group {
        Group::start_each(name, |_| cfg()).await
    }

    /// Nodes 1, 2 and 3, node `id` started with `cfg(id)` (the TLS tests give each its own
    /// certificates).
    pub async fn start_each(name: &str, cfg: impl Fn(NodeId) -> Config) -> Group {
        let mut g = Group {
            addrs: (1..=3)
                .map(|id| (id, format!("127.0.0.1:{}", free_port())))
                .collect(),
            nodes: BTreeMap::new(),
            dir: tempdir(&format!("raft-{name}")),
        };
        for id in 1..=3 {
            g.boot(id, cfg(id)).await;
        }
        g
    }

    pub fn dir(&self, id: NodeId) -> PathBuf {
        self.dir.path().join(format!("n{id}"))
    }

    /// Starts node `id` on its directory, with every address known so far as its peers.
    pub async fn boot(&mut self, id: NodeId, cfg: Config) {
        let node = Node::start_with(id, &self.dir(id), &self.addrs[&id], self.addrs.clone(), cfg)
            .await
            .expect("node starts");
        self.nodes.insert(id, node);
    }

    /// Starts node `id` on an empty directory to join the group: bootstrap off, and the
    /// nodes known so far as its peers (whom it admits until it learns the membership).
    pub async fn start_new(&mut self, id: NodeId, cfg: Config) -> String {
        let addr = format!("127.0.0.1:{}", free_port());
        self.addrs.insert(id, addr.clone());
        let cfg = Config {
            bootstrap: false,
            ..cfg
        };
        self.boot(id, cfg).await;
        addr
    }

    pub async fn kill(&mut self, id: NodeId) {
        self.nodes.remove(&id).expect("running").shutdown().await;
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[&id]
    }

    fn running(&self) -> Vec<NodeId> {
        self.nodes.keys().copied().collect()
    }

    /// Waits until the running nodes agree on one leader among them.
    pub async fn leader(&self) -> NodeId {
        self.leader_of(&self.running()).await
    }

    /// Waits until the nodes `ids` agree on one leader among them (the others may be down,
    /// or unable to hear it).
    pub async fn leader_of(&self, ids: &[NodeId]) -> NodeId {
        let until = Instant::now() + Duration::from_secs(15);
        loop {
            let leaders: Vec<NodeId> = ids
                .iter()
                .filter(|&&id| self.node(id).metrics_now().role == Role::Leader)
                .copied()
                .collect();
            if let [l] = leaders[..]
                && ids
                    .iter()
                    .all(|&id| self.node(id).metrics_now().leader == Some(l))
            {
                return l;
            }
            assert!(Instant::now() < until, "no leader elected among {ids:?}");
            sleep(Duration::from_millis(25)).await;
        }
    }

    /// Waits until every running node has applied `index`: pass a write's own log index
    /// (see [`entry_index`]), not a node's `applied_index` metric. openraft publishes that
    /// metric after it has answered the client, so right after a write returns, even on the
    /// leader, it may still name the entry before the write's.
    pub async fn applied_everywhere(&self, index: u64) {
        self.applied(&self.running(), index).await;
    }

    /// Waits until the nodes `ids` have applied `index`, as [`Group::applied_everywhere`].
    pub async fn applied(&self, ids: &[NodeId], index: u64) {
        for id in ids {
            self.node(*id)
                .raft()
                .wait(Some(Duration::from_secs(10)))
                .applied_index_at_least(Some(index), "test")
                .await
                .expect("applied in time");
        }
    }

    /// Shuts every running node down, then removes their directories.
    pub async fn shutdown(self) {
        for (_, n) in self.nodes {
            n.shutdown().await;
        }
    }
}

/// A value is a string or bytes: `linearizable.rs` writes the byte strings its history
/// records.
pub fn set(key: &str, value: &(impl AsRef<[u8]> + ?Sized)) -> Write {
    store(key, value, Mode::Set, None)
}

pub fn store(
    key: &str,
    value: &(impl AsRef<[u8]> + ?Sized),
    mode: Mode,
    exptime_unix: Option<u64>,
) -> Write {
    Write::Store {
        key: key.into(),
        value: value.as_ref().to_vec(),
        flags: 7,
        exptime_unix,
        mode,
        cas: None,
        invalidate: false,
        vivify: None,
    }
}

pub fn cas_set(key: &str, value: &(impl AsRef<[u8]> + ?Sized), cas: u64) -> Write {
    match set(key, value) {
        Write::Store {
            key,
            value,
            flags,
            exptime_unix,
            mode,
            ..
        } => Write::Store {
            key,
            value,
            flags,
            exptime_unix,
            mode,
            cas: Some(cas),
            invalidate: false,
            vivify: None,
        },
        _ => unreachable!(),
    }
}

pub fn incr(key: &str) -> Write {
    Write::Arith {
        key: key.into(),
        incr: true,
        delta: 1,
        cas: None,
        vivify: Some(Vivify {
            initial: 0,
            exptime_unix: None,
        }),
        set_exptime: None,
    }
}

/// `incr` without auto-create (which, as memcached's `ma N`, creates the item holding its
/// initial value rather than adding to it).
pub fn incr_existing(key: &str) -> Write {
    Write::Arith {
        key: key.into(),
        incr: true,
        delta: 1,
        cas: None,
        vivify: None,
        set_exptime: None,
    }
}

pub fn stored_cas(r: Reply) -> u64 {
    match r {
        Reply::Stored {
            outcome: StoreResult::Stored,
            cas,
        } => cas,
        other => panic!("not stored: {other:?}"),
    }
}

/// The log index of a write's entry, from its reply: a stored item's CAS names the entry
/// that stored it (see `memkit_raft::cas_for`).
pub fn entry_index(r: Reply) -> u64 {
    entry_of_cas(stored_cas(r))
}

pub async fn bounded<F: std::future::Future<Output = ()>>(f: F) {
    timeout(TEST_LIMIT, f).await.expect("test took too long");
}

/// Runs the futures together on this task (no extra dependency for `join_all`).
pub async fn futures_join<F: std::future::Future<Output = ()>>(fs: impl Iterator<Item = F>) {
    let mut set = Vec::new();
    for f in fs {
        set.push(Box::pin(f));
    }
    let mut pending: Vec<_> = set.iter_mut().map(Some).collect();
    std::future::poll_fn(|cx| {
        let mut left = 0;
        for slot in pending.iter_mut() {
            if let Some(f) = slot {
                if f.as_mut().poll(cx).is_ready() {
                    *slot = None;
                } else {
                    left += 1;
                }
            }
        }
        if left == 0 {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
}
