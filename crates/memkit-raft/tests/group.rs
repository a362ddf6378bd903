//! A three-node group on 127.0.0.1: election, replication with identical CAS values,
//! `add` and `incr` decided once, TTLs identical everywhere, a leader killed, a node
//! restarted, a node wiped and rebuilt from a snapshot. Every wait is bounded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use memkit_raft::{
    ArithResult, Config, Mode, Node, NodeId, Reply, Role, StoreResult, Vivify, Write, entry_of_cas,
};
use memkit_types::{Clock, SystemClock};
use tokio::time::{Instant, sleep, timeout};

/// Whole-test bound: a hung election fails the test instead of the run.
const TEST_LIMIT: Duration = Duration::from_secs(40);

/// Timeouts with room for a loaded two-core machine (twelve nodes of four tests at once,
/// each syncing its log): a follower waits ten heartbeats or more before it stands, so a
/// busy scheduler or a slow fsync does not depose a healthy leader. Nothing waits on an
/// election finishing within a tight time: `Group::leader` allows 10 s, writes and reads
/// retry until `request_timeout`.
fn config() -> Config {
    Config {
        memory_limit: 8 << 20,
        heartbeat_ms: 100,
        election_timeout_ms: (1000, 2000),
        request_timeout: Duration::from_secs(5),
        ..Config::default()
    }
}

struct Group {
    dirs: Vec<PathBuf>,
    peers: BTreeMap<NodeId, String>,
    nodes: BTreeMap<NodeId, Node>,
    _tmp: Tmp,
}

/// A temporary directory removed at the end.
struct Tmp(PathBuf);

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

impl Group {
    async fn start(name: &str) -> Group {
        Group::start_with(name, config).await
    }

    async fn start_with(name: &str, cfg: impl Fn() -> Config) -> Group {
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

    fn dir(&self, id: NodeId) -> &Path {
        &self.dirs[id as usize - 1]
    }

    async fn boot(&mut self, id: NodeId, cfg: Config) {
        let addr = self.peers[&id].clone();
        let dir = self.dir(id).to_path_buf();
        let node = Node::start_with(id, &dir, &addr, self.peers.clone(), cfg)
            .await
            .expect("node starts");
        self.nodes.insert(id, node);
    }

    async fn kill(&mut self, id: NodeId) {
        let node = self.nodes.remove(&id).expect("running");
        node.shutdown().await;
    }

    fn node(&self, id: NodeId) -> &Node {
        &self.nodes[&id]
    }

    /// Waits until the running nodes agree on one leader among them.
    async fn leader(&self) -> NodeId {
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
    async fn applied_everywhere(&self, index: u64) {
        for n in self.nodes.values() {
            n.raft()
                .wait(Some(Duration::from_secs(10)))
                .applied_index_at_least(Some(index), "test")
                .await
                .expect("applied in time");
        }
    }
}

fn set(key: &str, value: &str) -> Write {
    store(key, value, Mode::Set, None)
}

fn store(key: &str, value: &str, mode: Mode, exptime_unix: Option<u64>) -> Write {
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

fn cas_set(key: &str, value: &str, cas: u64) -> Write {
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

fn incr(key: &str) -> Write {
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
fn incr_existing(key: &str) -> Write {
    Write::Arith {
        key: key.into(),
        incr: true,
        delta: 1,
        cas: None,
        vivify: None,
        set_exptime: None,
    }
}

fn stored_cas(r: Reply) -> u64 {
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
fn entry_index(r: Reply) -> u64 {
    entry_of_cas(stored_cas(r))
}

async fn bounded<F: std::future::Future<Output = ()>>(f: F) {
    timeout(TEST_LIMIT, f).await.expect("test took too long");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_replicate_with_one_cas_and_one_expiry() {
    bounded(async {
        let g = Group::start("replicate").await;
        g.leader().await;
        // Through every node, the leader and the followers (forwarded).
        let mut cas = BTreeMap::new();
        for id in 1..=3 {
            let key = format!("k{id}");
            let r = g
                .node(id)
                .write(set(&key, &format!("v{id}")))
                .await
                .unwrap();
            cas.insert(key, stored_cas(r));
        }
        g.applied_everywhere(entry_of_cas(*cas.values().max().unwrap()))
            .await;
        for id in 1..=3 {
            for (key, c) in &cas {
                let (item, _) = g.node(id).read_local(key.as_bytes()).unwrap().unwrap();
                assert_eq!(item.cas, *c, "node {id}, {key}");
                assert_eq!(item.flags, 7);
                let lin = g.node(id).read_linearizable(key.as_bytes()).await.unwrap();
                assert_eq!(lin.unwrap().cas, *c);
            }
        }
        // CAS values come from log indexes: distinct, and a `cas` with one works on all
        // nodes.
        let k1 = cas["k1"];
        let r = g.node(2).write(cas_set("k1", "v1b", k1)).await.unwrap();
        let new = stored_cas(r);
        assert!(new > k1);
        let stale = g.node(3).write(cas_set("k1", "v1c", k1)).await.unwrap();
        assert!(matches!(
            stale,
            Reply::Stored {
                outcome: StoreResult::Exists,
                ..
            }
        ));

        // add of an existing key: refused, and the same everywhere (nothing changed).
        let r = g
            .node(3)
            .write(store("k2", "other", Mode::Add, None))
            .await
            .unwrap();
        assert!(matches!(
            r,
            Reply::Stored {
                outcome: StoreResult::NotStored,
                ..
            }
        ));

        // A TTL: one absolute expiry on every node.
        let at = SystemClock.now_secs() + 100;
        let r = g
            .node(1)
            .write(store("ttl", "x", Mode::Set, Some(at)))
            .await
            .unwrap();
        g.applied_everywhere(entry_index(r)).await;
        for id in 1..=3 {
            let (item, exp) = g.node(id).read_local(b"ttl").unwrap().unwrap();
            assert_eq!(exp, Some(at), "node {id}");
            assert_eq!(&item.value[..], b"x");
            let (k2, _) = g.node(id).read_local(b"k2").unwrap().unwrap();
            assert_eq!(&k2.value[..], b"v2");
            let (k1, _) = g.node(id).read_local(b"k1").unwrap().unwrap();
            assert_eq!((&k1.value[..], k1.cas), (&b"v1b"[..], new));
        }
        // An expiry already past: gone everywhere.
        g.node(2)
            .write(store(
                "old",
                "x",
                Mode::Set,
                Some(SystemClock.now_secs() - 5),
            ))
            .await
            .unwrap();
        for id in 1..=3 {
            assert!(
                g.node(id)
                    .read_linearizable(b"old")
                    .await
                    .unwrap()
                    .is_none()
            );
        }
        for (_, n) in g.nodes {
            n.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_incr_from_every_node_counts_exactly() {
    bounded(async {
        let g = Group::start("incr").await;
        g.leader().await;
        g.node(2).write(set("n", "0")).await.unwrap();
        let tasks = (1..=3).map(|id| {
            let node = g.node(id);
            async move {
                for _ in 0..50 {
                    let r = node.write(incr_existing("n")).await.unwrap();
                    assert!(
                        matches!(r, Reply::Arith(ArithResult::Value { .. })),
                        "{r:?}"
                    );
                }
            }
        });
        futures_join(tasks).await;
        for id in 1..=3 {
            let item = g.node(id).read_linearizable(b"n").await.unwrap().unwrap();
            assert_eq!(&item.value[..], b"150", "node {id}");
        }
        for (_, n) in g.nodes {
            n.shutdown().await;
        }
    })
    .await;
}

/// Writes waiting together share an entry (`proposer`): 64 writers through every node take
/// far fewer entries than writes, every CAS stays distinct and names its entry, and one
/// caller's writes (`write_all`) land in one entry in their order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_waiting_together_share_entries() {
    bounded(async {
        let g = Group::start("share").await;
        g.leader().await;
        let cas = std::sync::Mutex::new(Vec::new());
        let tasks = (0..64u64).map(|i| {
            let (node, cas) = (g.node(1 + i % 3), &cas);
            async move {
                for j in 0..5 {
                    let r = node.write(set(&format!("w{i}-{j}"), "v")).await.unwrap();
                    cas.lock().unwrap().push(stored_cas(r));
                }
            }
        });
        futures_join(tasks).await;
        let mut cas = cas.into_inner().unwrap();
        cas.sort_unstable();
        cas.dedup();
        assert_eq!(cas.len(), 320, "one CAS a write");
        let mut entries: Vec<u64> = cas.iter().map(|&c| entry_of_cas(c)).collect();
        entries.dedup();
        assert!(
            entries.len() < 200,
            "320 writes took {} entries",
            entries.len()
        );
        g.applied_everywhere(*entries.last().unwrap()).await;
        for id in 1..=3 {
            let (item, _) = g.node(id).read_local(b"w63-4").unwrap().unwrap();
            assert!(cas.binary_search(&item.cas).is_ok(), "node {id}");
        }

        let (replies, index) = g
            .node(2)
            .write_all(vec![set("o", "1"), incr_existing("o"), incr_existing("o")])
            .await
            .unwrap();
        let got: Vec<_> = replies
            .iter()
            .map(|r| match r {
                Reply::Arith(ArithResult::Value { value, cas, .. }) => (*value, *cas),
                Reply::Stored { cas, .. } => (0, *cas),
                other => panic!("{other:?}"),
            })
            .collect();
        let want: Vec<_> = [(0, 0), (2, 1), (3, 2)]
            .iter()
            .map(|&(v, pos)| (v, memkit_raft::cas_for(index, pos)))
            .collect();
        assert_eq!(got, want);
        for (_, n) in g.nodes {
            n.shutdown().await;
        }
    })
    .await;
}

/// The leader reads by its lease (`memkit_raft::lease`) while a majority answers it, a
/// follower never does, and a leader whose followers are gone stops within half the lease
/// (the election timeout's top) of their last answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_reads_by_its_lease_only_while_a_majority_answers() {
    bounded(async {
        let mut g = Group::start("lease").await;
        let l = g.leader().await;
        g.node(l).write(set("k", "v")).await.unwrap();
        let until = Instant::now() + Duration::from_secs(5);
        while !g.node(l).reads_by_lease() {
            assert!(Instant::now() < until, "no lease on a steady leader");
            sleep(Duration::from_millis(20)).await;
        }
        let followers: Vec<NodeId> = (1..=3).filter(|&id| id != l).collect();
        for &f in &followers {
            assert!(!g.node(f).reads_by_lease(), "follower {f}");
        }
        for f in followers {
            g.kill(f).await;
        }
        let half = Duration::from_millis(config().election_timeout_ms.1 / 2);
        sleep(half + Duration::from_millis(200)).await;
        assert!(!g.node(l).reads_by_lease(), "a lease with no majority left");
        for (_, n) in g.nodes {
            n.shutdown().await;
        }
    })
    .await;
}

/// Runs the futures together on this task (no extra dependency for `join_all`).
async fn futures_join<F: std::future::Future<Output = ()>>(fs: impl Iterator<Item = F>) {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_then_writes_continue_and_nothing_acknowledged_is_lost() {
    bounded(async {
        let mut g = Group::start("failover").await;
        let old = g.leader().await;
        for i in 0..20 {
            g.node(1 + i % 3)
                .write(set(&format!("a{i}"), &format!("{i}")))
                .await
                .unwrap();
        }
        g.kill(old).await;
        let new = g.leader().await;
        assert_ne!(new, old);
        let survivor = *g.nodes.keys().find(|id| **id != new).unwrap();
        let mut last = 0;
        for i in 20..30 {
            let r = g
                .node(survivor)
                .write(set(&format!("a{i}"), &format!("{i}")))
                .await
                .unwrap();
            last = entry_index(r);
        }
        for id in g.nodes.keys() {
            for i in 0..30 {
                let item = g
                    .node(*id)
                    .read_linearizable(format!("a{i}").as_bytes())
                    .await
                    .unwrap();
                assert_eq!(item.unwrap().value, format!("{i}").into_bytes(), "a{i}");
            }
        }
        // The old leader comes back from its directory and catches up by log replay.
        g.boot(old, config()).await;
        g.applied_everywhere(last).await;
        let (item, _) = g.node(old).read_local(b"a29").unwrap().unwrap();
        assert_eq!(&item.value[..], b"29");
        for (_, n) in g.nodes {
            n.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_follower_catches_up_and_wiped_one_gets_a_snapshot() {
    bounded(async {
        // Nothing kept behind a snapshot, so a purge reaches it.
        let mut g = Group::start_with("snapshot", || Config {
            keep_behind_snapshot: 0,
            ..config()
        })
        .await;
        let leader = g.leader().await;
        let follower = (1..=3).find(|id| *id != leader).unwrap();
        let mut cas = Vec::new();
        for i in 0..10 {
            let r = g
                .node(leader)
                .write(set(&format!("s{i}"), "before"))
                .await
                .unwrap();
            cas.push(stored_cas(r));
        }
        // Restart: down while writes go on, then back from its directory.
        g.kill(follower).await;
        for i in 10..20 {
            let r = g
                .node(leader)
                .write(set(&format!("s{i}"), "during"))
                .await
                .unwrap();
            cas.push(stored_cas(r));
        }
        g.boot(follower, config()).await;
        g.applied_everywhere(entry_of_cas(cas[19])).await;
        let (item, _) = g.node(follower).read_local(b"s19").unwrap().unwrap();
        assert_eq!(&item.value[..], b"during");

        // A snapshot on every node, and the logs behind it purged.
        let at = SystemClock.now_secs() + 500;
        let r = g
            .node(leader)
            .write(store("exp", "e", Mode::Set, Some(at)))
            .await
            .unwrap();
        let applied = entry_index(r);
        g.applied_everywhere(applied).await;
        let cas_before = g.node(leader).read_local(b"s3").unwrap().unwrap().0.cas;
        assert_eq!(cas_before, cas[3], "s3's CAS is its write's");
        for n in g.nodes.values() {
            n.snapshot(Duration::from_secs(10)).await.unwrap();
            n.raft().trigger().purge_log(applied).await.unwrap();
        }
        // Wiped: its directory deleted, started again (not bootstrapping: the group
        // exists). The leader's log no longer reaches back: it must send the snapshot.
        g.kill(follower).await;
        std::fs::remove_dir_all(g.dir(follower)).unwrap();
        let cfg = Config {
            bootstrap: false,
            keep_behind_snapshot: 0,
            ..config()
        };
        g.boot(follower, cfg).await;
        let r = g.node(leader).write(set("after", "wipe")).await.unwrap();
        g.applied_everywhere(entry_index(r)).await;
        let m = g.node(follower).metrics().await;
        assert!(m.snapshot_index.is_some(), "installed a snapshot: {m:?}");
        for i in 0..20 {
            assert!(
                g.node(follower)
                    .read_local(format!("s{i}").as_bytes())
                    .unwrap()
                    .is_some()
            );
        }
        let (s3, _) = g.node(follower).read_local(b"s3").unwrap().unwrap();
        assert_eq!(s3.cas, cas_before, "CAS kept through the snapshot");
        let (_, exp) = g.node(follower).read_local(b"exp").unwrap().unwrap();
        assert_eq!(exp, Some(at), "absolute expiry kept through the snapshot");
        assert!(g.node(follower).read_local(b"after").unwrap().is_some());
        // And it serves linearizable reads and forwards writes like the others.
        // Auto-create, as memcached's `ma N J0`: the first creates 0, the second adds 1.
        g.node(follower).write(incr("c")).await.unwrap();
        g.node(follower).write(incr("c")).await.unwrap();
        let c = g
            .node(leader)
            .read_linearizable(b"c")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&c.value[..], b"1");
        for (_, n) in g.nodes {
            n.shutdown().await;
        }
    })
    .await;
}

/// `Node::snapshot` while writes go on: the snapshot openraft builds covers whatever is
/// applied by then, later than the index the call read first, and a trigger that meets a
/// build still under way (one an earlier call started) is dropped. The call must return
/// once a snapshot covering its index is saved: it used to wait for one at exactly that
/// index, which never came, and timed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_taken_while_writes_go_on_is_reported() {
    bounded(async {
        let g = Group::start("snapshot-busy").await;
        let leader = g.leader().await;
        let stop = std::sync::atomic::AtomicBool::new(false);
        // A writer through every node, so entries are applied all the time.
        let writers = futures_join((1..=3).map(|id| {
            let (node, stop) = (g.node(id), &stop);
            async move {
                let mut i = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    node.write(set(&format!("w{id}-{i}"), "x")).await.unwrap();
                    i += 1;
                }
            }
        }));
        let snapshots = async {
            let mut last = 0;
            for _ in 0..12 {
                // Applied when the call starts: the snapshot covers at least this much.
                let before = g.node(leader).metrics().await.applied_index.unwrap();
                let at = g
                    .node(leader)
                    .snapshot(Duration::from_secs(2))
                    .await
                    .expect("snapshot reported in time");
                assert!(at >= before && at >= last, "{at} >= {before}, {last}");
                last = at;
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        };
        tokio::join!(writers, snapshots);
        for (_, n) in g.nodes {
            n.shutdown().await;
        }
    })
    .await;
}

/// The state machine's items live in each node's store on disk, RAM a cache of them: a
/// group holds three times its memory limit, every node reads every item back, and so
/// does a node restarted (from its store, with nothing to replay).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_holds_more_than_its_memory() {
    bounded(async {
        let mut g = Group::start("beyond-ram").await;
        let leader = g.leader().await;
        // 3,000 values of 8 KiB: 24 MiB against the nodes' 8 MiB (`config`).
        let (n, writers) = (3_000usize, 12);
        let value = "v".repeat(8 << 10);
        let last = std::sync::atomic::AtomicU64::new(0);
        futures_join((0..writers).map(|w| {
            let (node, value, last) = (g.node(leader), &value, &last);
            async move {
                for i in (w..n).step_by(writers) {
                    let r = node.write(set(&format!("big{i}"), value)).await.unwrap();
                    last.fetch_max(entry_index(r), std::sync::atomic::Ordering::Relaxed);
                }
            }
        }))
        .await;
        g.applied_everywhere(last.into_inner()).await;
        let every_node_reads_all = |g: &Group| {
            for node in g.nodes.values() {
                for i in 0..n {
                    let key = format!("big{i}");
                    let (item, _) = node.read_local(key.as_bytes()).unwrap().expect("lost");
                    assert_eq!(item.value.len(), value.len(), "{key}");
                }
            }
        };
        every_node_reads_all(&g);
        let follower = (1..=3).find(|id| *id != leader).unwrap();
        g.kill(follower).await;
        g.boot(follower, config()).await;
        every_node_reads_all(&g);
        for (_, n) in g.nodes {
            n.shutdown().await;
        }
    })
    .await;
}

/// A value near 1 MiB (memcached's default item size limit) replicates through a follower
/// while each append must answer within a 30 ms heartbeat (openraft 0.9's hard deadline for
/// an append). Its entry crosses the codec several times (the leader's log, the peer frame,
/// the follower's log) as one byte string (`serde_bytes`): as a sequence of u8s, a debug
/// build took about 60 ms to encode and decode 1 MiB each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mebibyte_value_replicates_through_a_follower() {
    bounded(async {
        // A heartbeat of 30 ms (the deadline of each append), elections as usual.
        let g = Group::start_with("mebibyte", || Config {
            heartbeat_ms: 30,
            ..config()
        })
        .await;
        let leader = g.leader().await;
        let follower = (1..=3).find(|id| *id != leader).unwrap();
        // Within the item size limit with the key and the item's header.
        let len = (1 << 20) - 1024;
        let value = "m".repeat(len);
        let mut last = 0;
        for i in 0..4 {
            let r = g
                .node(follower)
                .write(set(&format!("mib{i}"), &value))
                .await;
            last = entry_index(r.expect("a 1 MiB write is acknowledged"));
        }
        g.applied_everywhere(last).await;
        for node in g.nodes.values() {
            for i in 0..4 {
                let (item, _) = node
                    .read_local(format!("mib{i}").as_bytes())
                    .unwrap()
                    .unwrap();
                assert_eq!(item.value.len(), len);
            }
        }
        for (_, n) in g.nodes {
            n.shutdown().await;
        }
    })
    .await;
}

/// The log's durability (memkitd's `--durability`): `sync` syncs appended entries before
/// they count, `periodic` syncs them within its period after acknowledging, `none` never
/// syncs them (votes are synced in every mode). Writes are acknowledged in each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_syncs_as_its_durability_says() {
    use memkit_persist::Durability;
    bounded(async {
        for mode in [Durability::None, Durability::Periodic(50), Durability::Sync] {
            let g = Group::start_with(&format!("durability-{mode}"), || Config {
                durability: mode,
                ..config()
            })
            .await;
            let leader = g.leader().await;
            let mut last = 0;
            for i in 0..20 {
                let r = g.node(leader).write(set(&format!("d{i}"), "x")).await;
                last = entry_index(r.unwrap());
            }
            g.applied_everywhere(last).await;
            // A periodic sync comes within its period of the append it follows.
            sleep(Duration::from_millis(300)).await;
            for node in g.nodes.values() {
                let syncs = node.metrics().await.log_syncs;
                match mode {
                    Durability::None => assert_eq!(syncs, 0, "{mode}"),
                    _ => assert!(syncs > 0, "{mode}: no sync"),
                }
                assert!(node.read_local(b"d19").unwrap().is_some());
            }
            for (_, n) in g.nodes {
                n.shutdown().await;
            }
        }
    })
    .await;
}

/// A follower may apply an entry before the leader does (the leader tells it the commit,
/// then applies in its own time). A read there that sees the entry's write must not be
/// followed by a read through the leader that does not: the leader's lease reads at the
/// highest commit index it has told anyone, and waits until it has applied that far. Here
/// the leader's state machine is held up on one key (its shard locked), while the
/// follower applies a later write to another key and reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_never_reads_behind_what_a_follower_has_shown() {
    bounded(async {
        let g = Group::start("lease-behind").await;
        let leader = g.leader().await;
        let follower = (1..=3).find(|id| *id != leader).unwrap();
        let r = g.node(leader).write(set("k", "old")).await.unwrap();
        g.applied_everywhere(entry_index(r)).await;
        // The leader's engine: one key's shard held for 1.5 s, from a thread of its own.
        let engine = g.node(leader).store().engine();
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let holder = std::thread::spawn(move || {
            engine.with_key_locked(b"blocker", || {
                held_tx.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(1500));
            })
        });
        held_rx.recv().unwrap();
        // Two writes through the follower, in two entries: the leader's state machine stops
        // at the first (its key's shard is held); the follower applies both.
        let writer = {
            let node = g.node(follower);
            async move {
                node.write(set("blocker", "x")).await.unwrap();
            }
        };
        let second = async {
            sleep(Duration::from_millis(50)).await;
            g.node(follower).write(set("k", "new")).await.unwrap();
        };
        let reads = async {
            let until = Instant::now() + Duration::from_secs(5);
            loop {
                let seen = g.node(follower).read_local(b"k").unwrap();
                if seen.is_some_and(|(item, _)| &item.value[..] == b"new") {
                    break;
                }
                assert!(
                    Instant::now() < until,
                    "the follower never applied the write"
                );
                sleep(Duration::from_millis(5)).await;
            }
            let at_follower = g.node(follower).read_linearizable(b"k").await.unwrap();
            assert_eq!(&at_follower.unwrap().value[..], b"new");
            // The leader has not applied it yet (still held up): its read must wait.
            let at_leader = g.node(leader).read_linearizable(b"k").await.unwrap();
            assert_eq!(
                &at_leader.unwrap().value[..],
                b"new",
                "the leader read behind"
            );
        };
        tokio::join!(writer, second, reads);
        holder.join().unwrap();
        for (_, n) in g.nodes {
            n.shutdown().await;
        }
    })
    .await;
}
