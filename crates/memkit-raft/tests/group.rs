//! A three-node group on 127.0.0.1: election, replication with identical CAS values,
//! `add` and `incr` decided once, TTLs identical everywhere, writes sharing entries, the
//! leader's lease, a leader killed. Restarts, snapshots and the log's durability are in
//! `storage.rs`. Every wait is bounded.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use memkit_raft::{ArithResult, Mode, NodeId, Reply, StoreResult, entry_of_cas};
use memkit_types::{Clock, SystemClock};
use tokio::time::{Instant, sleep};

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
        g.shutdown().await;
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
        g.shutdown().await;
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
        g.shutdown().await;
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
        g.shutdown().await;
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
        g.shutdown().await;
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
        g.shutdown().await;
    })
    .await;
}
