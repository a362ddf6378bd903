//! A three-node group on 127.0.0.1 and its disks: a follower restarted and one wiped and
//! rebuilt from a snapshot, snapshots taken under writes, more data than memory (the state
//! machine's store), a value near 1 MiB, the log's durability modes. Every wait is bounded.

mod common;

use std::time::Duration;

use common::*;
use memkit_raft::{Config, Mode, entry_of_cas};
use memkit_types::{Clock, SystemClock};
use tokio::time::sleep;

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
        g.shutdown().await;
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
        g.shutdown().await;
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
        g.shutdown().await;
    })
    .await;
}

/// A value near 1 MiB (memcached's default item size limit) replicates through a follower
/// while each append must answer within a 30 ms heartbeat (openraft 0.9's hard deadline for
/// an append). Its entry crosses the codec several times (the leader's log, the peer frame,
/// the follower's log) as one byte string (`serde_bytes`), copied rather than walked a byte
/// at a time, each within that deadline.
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
        g.shutdown().await;
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
            g.shutdown().await;
        }
    })
    .await;
}
