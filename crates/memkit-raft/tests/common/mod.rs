//! What memkit-raft's group tests share: a three-node group in one process on 127.0.0.1
//! (its directories removed at the end), the writes they send, and bounded waits.

// Each test file uses its own part of this module.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use memkit_raft::{
    Config, Mode, Node, NodeId, Reply, Role, StoreResult, Vivify, Write, entry_of_cas,
};
use memkit_types::{Clock, SystemClock};
use tokio::time::{Instant, sleep, timeout};

/// Whole-test bound: a hung election fails the test instead of the run.
pub const TEST_LIMIT: Duration = Duration::from_secs(40);

/// Timeouts with room for a loaded two-core machine (twelve nodes of four tests at once,
/// each syncing its log): a follower waits ten heartbeats or more before it stands, so a
/// busy scheduler or a slow fsync does not depose a healthy leader. Nothing waits on an
/// election finishing within a tight time: `Group::leader` allows 10 s, writes and reads
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

pub struct Group {
    pub dirs: Vec<PathBuf>,
    pub peers: BTreeMap<NodeId, String>,
    pub nodes: BTreeMap<NodeId, Node>,
    _tmp: Tmp,
}

/// A temporary directory removed at the end.
pub struct Tmp(pub PathBuf);

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

impl Group {
    pub async fn start(name: &str) -> Group {
        Group::start_with(name, config).await
    }

    pub async fn start_with(name: &str, cfg: impl Fn() -> Config) -> Group {
        let root = std::env::temp_dir().join(format!(
            "memkit-raft-{name}-{}-{}",
            std::process::id(),
            SystemClock.now_millis()
        ));
        let peers: BTreeMap<NodeId, String> = (1..=3)
            .map(|id| (id, format!("127.0.0.1:{}", free_port())))
            .collect();
        let dirs: Vec<PathBuf> = (1..=3).map(|id| root.join(format!("n{id}"))).collect();
        let mut g = Group {
            dirs,
            peers,
            nodes: BTreeMap::new(),
            _tmp: Tmp(root),
        };
        for id in 1..=3 {
            g.boot(id, cfg()).await;
        }
        g
    }

    pub fn dir(&self, id: NodeId) -> &Path {
        &self.dirs[id as usize - 1]
    }

    pub async fn boot(&mut self, id: NodeId, cfg: Config) {
        let addr = self.peers[&id].clone();
        let dir = self.dir(id).to_path_buf();
        let node = Node::start_with(id, &dir, &addr, self.peers.clone(), cfg)
            .await
            .expect("node starts");
        self.nodes.insert(id, node);
    }

    pub async fn kill(&mut self, id: NodeId) {
        let node = self.nodes.remove(&id).expect("running");
        node.shutdown().await;
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[&id]
    }

    /// Waits until the running nodes agree on one leader among them.
    pub async fn leader(&self) -> NodeId {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let mut leaders = Vec::new();
            for n in self.nodes.values() {
                let m = n.metrics().await;
                if m.role == Role::Leader {
                    leaders.push(m.id);
                }
            }
            if let [l] = leaders[..]
                && self
                    .nodes
                    .values()
                    .all(|n| n.raft().metrics().borrow().current_leader == Some(l))
            {
                return l;
            }
            assert!(Instant::now() < until, "no leader elected");
            sleep(Duration::from_millis(25)).await;
        }
    }

    /// Waits until every running node has applied `index`: pass a write's own log index
    /// (see [`entry_index`]), not a node's `applied_index` metric. openraft publishes that
    /// metric after it has answered the client, so right after a write returns, even on the
    /// leader, it may still name the entry before the write's.
    pub async fn applied_everywhere(&self, index: u64) {
        for n in self.nodes.values() {
            n.raft()
                .wait(Some(Duration::from_secs(10)))
                .applied_index_at_least(Some(index), "test")
                .await
                .expect("applied in time");
        }
    }
}

pub fn set(key: &str, value: &str) -> Write {
    store(key, value, Mode::Set, None)
}

pub fn store(key: &str, value: &str, mode: Mode, exptime_unix: Option<u64>) -> Write {
    Write::Store {
        key: key.into(),
        value: value.into(),
        flags: 7,
        exptime_unix,
        mode,
        cas: None,
        invalidate: false,
        vivify: None,
    }
}

pub fn cas_set(key: &str, value: &str, cas: u64) -> Write {
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
