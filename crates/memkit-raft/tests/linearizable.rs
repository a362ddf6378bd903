//! Linearizability of a three-node group under faults: four clients issue random `set`,
//! `get`, `gets` + `cas`, `incr` and `delete` on three keys, each operation on a node
//! picked at random (writes through [`Node::write`], reads through
//! [`Node::read_linearizable`]), while leaders are cut off, nodes restarted on their
//! directories and links slowed; the recorded history must pass
//! [`memkit_testkit::linear::check`]. A second test shows the check has teeth: local reads
//! on a follower cut off from the group are caught as stale.
//!
//! Topology: every node's address in the group (the `peers` map, so the membership) is a
//! [`Relay`] in front of its real listener. Cutting a node's relay stops every request *to*
//! it (forwarded writes and reads, a leader's appends, votes), and heals with every
//! connection through it reset. What the node sends itself goes through the others'
//! relays: a cut-off leader still reaches its followers, but no follower, client forward or
//! candidate reaches it; a cut-off follower hears no leader and stands for election,
//! deposing the leader. Together with restarts (a leader's log and state machine reopened
//! from disk) they make leader changes with writes in flight, writes whose answer is lost
//! (recorded as unknown: the checker lets them take effect or not), snapshots (taken every
//! 100 entries) and followers caught up from them.
//!
//! Rounds: 3 by default (about 9 s each); `MEMKIT_LINEAR_ROUNDS=N` runs N (a soak:
//! `MEMKIT_LINEAR_ROUNDS=100 cargo test -p memkit-raft --test linearizable --release`),
//! `MEMKIT_LINEAR_SEED` fixes the first round's seed (timing still varies). Each round
//! starts a fresh group, so every key starts absent, as the model assumes.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use common::{cas_set, free_port, incr_existing, set};
use memkit_raft::{
    ArithResult, Config, DeleteResult, Node, NodeId, Reply, Role, StoreResult, Write,
};
use memkit_testkit::fuzz::Rng;
use memkit_testkit::linear::{self, Op, Recorder, Ret};
use memkit_testkit::relay::Relay;
use memkit_testkit::tempdir::{TempDir, tempdir};
use tokio::sync::RwLock;
use tokio::time::{Instant, sleep, timeout};

const KEYS: [&str; 3] = ["a", "b", "c"];
const CLIENTS: u32 = 4;
/// How long the clients run in a round.
const RUN: Duration = Duration::from_secs(6);
/// A round's bound, start to check: a hang fails the test instead of the run.
const ROUND_LIMIT: Duration = Duration::from_secs(40);

/// Short timeouts, so that a four-second round sees several leader changes; a request
/// gives up after 2 s (its outcome then unknown to the history).
fn config() -> Config {
    Config {
        memory_limit: 8 << 20,
        heartbeat_ms: 100,
        election_timeout_ms: (800, 1600),
        snapshot_after: 100,
        keep_behind_snapshot: 20,
        request_timeout: Duration::from_secs(2),
        ..Config::default()
    }
}

/// Three nodes behind relays; a slot is empty while its node is down.
struct Cluster {
    dir: TempDir,
    real: BTreeMap<NodeId, String>,
    relays: BTreeMap<NodeId, Relay>,
    peers: BTreeMap<NodeId, String>,
    slots: Vec<RwLock<Option<Node>>>,
    cfg: Config,
}

impl Cluster {
    async fn start(cfg: Config) -> Cluster {
        let real: BTreeMap<NodeId, String> = (1..=3)
            .map(|id| (id, format!("127.0.0.1:{}", free_port())))
            .collect();
        let relays: BTreeMap<NodeId, Relay> = real
            .iter()
            .map(|(id, addr)| (*id, Relay::start(addr.parse().unwrap())))
            .collect();
        let peers = relays
            .iter()
            .map(|(id, r)| (*id, r.addr().to_string()))
            .collect();
        let c = Cluster {
            dir: tempdir("raft-linear"),
            real,
            relays,
            peers,
            slots: (1..=3).map(|_| RwLock::new(None)).collect(),
            cfg,
        };
        for id in 1..=3 {
            c.boot(id).await;
        }
        c
    }

    fn slot(&self, id: NodeId) -> &RwLock<Option<Node>> {
        &self.slots[id as usize - 1]
    }

    async fn boot(&self, id: NodeId) {
        let dir = self.dir.path().join(format!("n{id}"));
        let node = Node::start_with(
            id,
            &dir,
            &self.real[&id],
            self.peers.clone(),
            self.cfg.clone(),
        )
        .await
        .expect("node starts");
        *self.slot(id).write().await = Some(node);
    }

    /// Shuts node `id` down (once the operations under way on it are done).
    async fn stop(&self, id: NodeId) {
        let node = self.slot(id).write().await.take();
        if let Some(node) = node {
            node.shutdown().await;
        }
    }

    /// The node that leads the highest term among those running, if any.
    async fn leader(&self) -> Option<NodeId> {
        let mut best: Option<(u64, NodeId)> = None;
        for id in 1..=3 {
            if let Some(n) = self.slot(id).read().await.as_ref() {
                let m = n.metrics().await;
                if m.role == Role::Leader && best.is_none_or(|(t, _)| m.term > t) {
                    best = Some((m.term, id));
                }
            }
        }
        best.map(|(_, id)| id)
    }

    async fn wait_leader(&self) -> NodeId {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(l) = self.leader().await {
                return l;
            }
            assert!(Instant::now() < until, "no leader elected");
            sleep(Duration::from_millis(25)).await;
        }
    }

    /// The highest term a running node knows (how many elections the round saw, and more).
    async fn term(&self) -> u64 {
        let mut term = 0;
        for id in 1..=3 {
            if let Some(n) = self.slot(id).read().await.as_ref() {
                term = term.max(n.metrics().await.term);
            }
        }
        term
    }

    /// Heals every relay and starts every node that is down.
    async fn repair(&self) {
        for r in self.relays.values() {
            r.heal();
            r.delay(Duration::ZERO);
        }
        for id in 1..=3 {
            if self.slot(id).read().await.is_none() {
                self.boot(id).await;
            }
        }
    }

    async fn shutdown(self) {
        for id in 1..=3 {
            self.stop(id).await;
        }
        // A relay's drop joins its threads: off the runtime's workers.
        let relays = self.relays;
        tokio::task::spawn_blocking(move || drop(relays))
            .await
            .unwrap();
    }
}

/// A generator for `seed` (any seed: xorshift must not start at 0).
fn rng(seed: u64) -> Rng {
    Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
}

fn delete(key: &str) -> Write {
    Write::Delete {
        key: key.into(),
        cas: None,
        invalidate: false,
        stale_exptime: None,
        remove_value: false,
    }
}

/// What a write's reply means in the history's vocabulary.
fn ret_of(reply: Reply) -> Ret {
    match reply {
        Reply::Stored { outcome, .. } => match outcome {
            StoreResult::Stored => Ret::Stored,
            StoreResult::Exists => Ret::Exists,
            StoreResult::NotFound => Ret::NotFound,
            StoreResult::NotStored => panic!("set/cas answered NOT_STORED"),
        },
        Reply::Arith(ArithResult::Value { value, .. }) => Ret::Number(value),
        Reply::Arith(ArithResult::NotFound) => Ret::NotFound,
        Reply::Arith(ArithResult::NonNumeric) => Ret::NonNumeric,
        Reply::Deleted(DeleteResult::Deleted) => Ret::Deleted,
        Reply::Deleted(DeleteResult::NotFound) => Ret::NotFound,
        other => panic!("unexpected reply {other:?}"),
    }
}

/// One client: random operations on random nodes until `until`.
async fn client(c: u32, cluster: Arc<Cluster>, rec: Recorder, until: Instant, seed: u64) {
    let mut rng = rng(seed);
    // The last `gets` hit per key, for a `cas` (each used once).
    let mut seen: HashMap<&str, (Vec<u8>, u64)> = HashMap::new();
    let mut seq = 0u64;
    // Unanswered operations in a row.
    let mut failed = 0u32;
    while Instant::now() < until {
        seq += 1;
        let id = rng.below(3) as NodeId + 1;
        let key = KEYS[rng.below(KEYS.len())];
        let guard = cluster.slot(id).read().await;
        let Some(node) = guard.as_ref() else {
            drop(guard);
            sleep(Duration::from_millis(10)).await;
            continue;
        };
        // Unique values (see `linear`): numbers 2^20 apart, so `incr` never reaches another.
        let number = (u64::from(c) + 1) << 40 | seq << 20;
        let (op, write) = match rng.below(20) {
            0..=3 => (
                Op::Set {
                    value: number.to_string().into_bytes(),
                },
                None,
            ),
            4..=5 => (
                Op::Set {
                    value: format!("t{c}-{seq}").into_bytes(),
                },
                None,
            ),
            6..=9 => (Op::Get, None),
            10..=12 => (Op::Gets, None),
            13..=15 => match seen.remove(key) {
                Some((read, token)) => {
                    let value = format!("c{c}-{seq}").into_bytes();
                    let w = cas_set(key, &value, token);
                    (Op::Cas { read, token, value }, Some(w))
                }
                None => (Op::Gets, None),
            },
            16..=18 => (Op::Incr { delta: 1 }, Some(incr_existing(key))),
            _ => (Op::Delete, Some(delete(key))),
        };
        let write = match (&op, write) {
            (Op::Set { value }, _) => Some(set(key, value)),
            (_, w) => w,
        };
        let call = rec.invoke(c, key, op.clone());
        // Node's own request timeout bounds each call; this one bounds a hang.
        let limit = Duration::from_secs(5);
        match write {
            Some(w) => {
                if let Ok(Ok(reply)) = timeout(limit, node.write(w)).await {
                    rec.complete(call, ret_of(reply));
                    failed = 0;
                    continue;
                }
            }
            None => {
                if let Ok(Ok(item)) = timeout(limit, node.read_linearizable(key.as_bytes())).await {
                    let ret = match item {
                        None => Ret::Miss,
                        Some(item) => {
                            let gets = op == Op::Gets;
                            if gets {
                                seen.insert(key, (item.value.to_vec(), item.cas));
                            }
                            Ret::Hit {
                                value: item.value.to_vec(),
                                cas: gets.then_some(item.cas),
                            }
                        }
                    };
                    rec.complete(call, ret);
                    failed = 0;
                    continue;
                }
            }
        }
        // Unanswered: back off, as a client of a group without a leader would. A write
        // whose outcome is unknown stays open to the end of the history, and the search's
        // cost doubles with each open write on a key: a leader down for seconds, whose
        // forwards fail at once, made 50 of them in one round and a 147 s check.
        sleep(Duration::from_millis(100 << failed.min(3))).await;
        failed += 1;
    }
}

/// Random faults until `until`, each healed before the next; returns what was done, when.
async fn faults(cluster: Arc<Cluster>, start: Instant, until: Instant, seed: u64) -> Vec<String> {
    let mut rng = rng(seed);
    let mut log = Vec::new();
    let ms = |lo: u64, hi: u64, rng: &mut Rng| {
        Duration::from_millis(lo + rng.below((hi - lo) as usize) as u64)
    };
    loop {
        sleep(ms(100, 400, &mut rng)).await;
        if Instant::now() + Duration::from_millis(500) >= until {
            return log;
        }
        let leader = cluster.leader().await.unwrap_or(rng.below(3) as NodeId + 1);
        let other = (leader + rng.below(2) as NodeId) % 3 + 1; // not the leader
        let at = start.elapsed().as_millis();
        // Often long enough for an election: a follower that hears no leader stands about
        // 3 s after the last heartbeat (measured; a leader restarted sooner resumes its term
        // from its saved vote).
        let hold = ms(500, 4500, &mut rng);
        match rng.below(6) {
            0 => {
                log.push(format!("{at}ms: leader {leader} cut off for {hold:?}"));
                cluster.relays[&leader].cut();
                sleep(hold).await;
                cluster.relays[&leader].heal();
            }
            1 | 2 => {
                log.push(format!("{at}ms: follower {other} cut off for {hold:?}"));
                cluster.relays[&other].cut();
                sleep(hold).await;
                cluster.relays[&other].heal();
            }
            3 | 4 => {
                let id = if rng.below(3) == 0 { other } else { leader };
                log.push(format!(
                    "{at}ms: node {id} (leader: {leader}) down for {hold:?}"
                ));
                cluster.stop(id).await;
                sleep(hold).await;
                cluster.boot(id).await;
            }
            _ => {
                let d = ms(10, 80, &mut rng);
                log.push(format!(
                    "{at}ms: leader {leader} delayed {d:?} for {hold:?}"
                ));
                cluster.relays[&leader].delay(d);
                sleep(hold).await;
                cluster.relays[&leader].delay(Duration::ZERO);
            }
        }
    }
}

/// One round: a fresh group, the clients and the faults for [`RUN`], then the check.
async fn round(n: u64, seed: u64) {
    let cluster = Arc::new(Cluster::start(config()).await);
    cluster.wait_leader().await;
    let rec = Recorder::new();
    let start = Instant::now();
    let until = start + RUN;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let seed = seed ^ u64::from(c + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            tokio::spawn(client(c, cluster.clone(), rec.clone(), until, seed))
        })
        .collect();
    let log = faults(cluster.clone(), start, until, seed).await;
    for c in clients {
        c.await.expect("client panicked");
    }
    cluster.repair().await;
    let term = cluster.term().await;
    let history = rec.history();
    let ops = history.operations().len();
    let unknown = history.unknown();
    let checked = Instant::now();
    let verdict = linear::check(&history);
    eprintln!(
        "round {n} (seed {seed:#x}): {ops} operations ({unknown} unanswered), \
         {} faults, \
         term {term} at the end, checked in {:?}",
        log.len(),
        checked.elapsed()
    );
    eprintln!("  faults: {}", log.join("; "));
    if let Err(e) = verdict {
        panic!(
            "round {n} (seed {seed:#x}) is not linearizable:\n{e}\nfaults (ms since the \
             clients started, as the history's times):\n  {}",
            log.join("\n  ")
        );
    }
    assert!(
        ops - unknown > 50,
        "round {n}: too few operations answered to mean anything"
    );
    Arc::into_inner(cluster)
        .expect("clients done")
        .shutdown()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn histories_under_faults_are_linearizable() {
    let (rounds, first) = linear::soak_plan(3);
    for n in 0..rounds {
        let seed = first.wrapping_add(n);
        timeout(ROUND_LIMIT, round(n, seed))
            .await
            .unwrap_or_else(|_| panic!("round {n} (seed {seed:#x}) took too long"));
    }
}

/// The check has teeth: a follower cut off from the group keeps its old value, and a
/// local (non-linearizable) read there after a newer write was acknowledged is flagged.
/// Deterministic: nothing reaches the follower once its relay is cut, and its election
/// timeout (3 s or more here) is far longer than the test's write and read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_reads_on_a_cut_off_follower_are_caught() {
    let cfg = Config {
        election_timeout_ms: (3000, 6000),
        ..config()
    };
    let cluster = Cluster::start(cfg).await;
    let leader = cluster.wait_leader().await;
    let follower = leader % 3 + 1;
    let rec = Recorder::new();
    let leader_guard = cluster.slot(leader).read().await;
    let l = leader_guard.as_ref().unwrap();
    let follower_guard = cluster.slot(follower).read().await;
    let f = follower_guard.as_ref().unwrap();

    let call = rec.invoke(
        0,
        "k",
        Op::Set {
            value: b"v1".to_vec(),
        },
    );
    let reply = l.write(set("k", "v1")).await.unwrap();
    let Reply::Stored { cas, .. } = reply else {
        panic!("{reply:?}")
    };
    let index = memkit_raft::entry_of_cas(cas);
    rec.complete(call, ret_of(reply));
    f.raft()
        .wait(Some(Duration::from_secs(10)))
        .applied_index_at_least(Some(index), "v1")
        .await
        .unwrap();

    cluster.relays[&follower].cut();
    sleep(Duration::from_millis(100)).await; // past the relay's tick
    let call = rec.invoke(
        0,
        "k",
        Op::Set {
            value: b"v2".to_vec(),
        },
    );
    let reply = l.write(set("k", "v2")).await.unwrap();
    rec.complete(call, ret_of(reply));

    let call = rec.invoke(1, "k", Op::Get);
    let (item, _) = f.read_local(b"k").unwrap().expect("the follower has v1");
    rec.complete(
        call,
        Ret::Hit {
            value: item.value.to_vec(),
            cas: None,
        },
    );
    assert_eq!(
        &item.value[..],
        b"v1",
        "the cut-off follower cannot have v2"
    );
    let err = linear::check(&rec.history()).expect_err("a stale local read is not linearizable");
    assert!(
        err.contains("#2 client 1") && err.contains("<- here"),
        "{err}"
    );

    // The same read made linearizable waits for the group: it sees v2, and passes.
    let rec = Recorder::new();
    let call = rec.invoke(
        0,
        "k",
        Op::Set {
            value: b"v2".to_vec(),
        },
    );
    rec.complete(call, Ret::Stored);
    cluster.relays[&follower].heal();
    let call = rec.invoke(1, "k", Op::Get);
    let item = f.read_linearizable(b"k").await.unwrap().unwrap();
    rec.complete(
        call,
        Ret::Hit {
            value: item.value.to_vec(),
            cas: None,
        },
    );
    assert_eq!(linear::check(&rec.history()), Ok(()));
    drop((leader_guard, follower_guard));
    cluster.shutdown().await;
}
