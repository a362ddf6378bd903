//! Membership changes on real nodes (127.0.0.1): a fourth node joins by snapshot and is
//! promoted, and the group survives losing its old leader; a removed node is refused and
//! the rest go on; a dead node is replaced through a follower; the status shows roles,
//! membership and lag. Every wait is bounded, and waits on metrics rather than sleeping.

mod common;

use std::time::Duration;

use common::{Group, bounded, set};
use memkit_raft::network::{PeerClient, Request, Response};
use memkit_raft::{ClusterError, Config, Node, NodeId, Reply, Role, Status, StoreResult, View};

/// The common timeouts (`common::config`), and 20 s for a change: a learner's catching up
/// is bounded by it.
fn config() -> Config {
    Config {
        change_timeout: Duration::from_secs(20),
        ..common::config()
    }
}

/// Writes `key{from}..key{to}` through `node`; returns the last entry's index (a stored
/// item's CAS names its entry: `memkit_raft::entry_of_cas`).
async fn write_range(node: &Node, key: &str, from: u32, to: u32) -> u64 {
    let mut last = 0;
    for i in from..to {
        match node.write(set(&format!("{key}{i}"), &i.to_string())).await {
            Ok(Reply::Stored {
                outcome: StoreResult::Stored,
                cas,
            }) => last = memkit_raft::entry_of_cas(cas),
            other => panic!("{key}{i} not stored: {other:?}"),
        }
    }
    last
}

/// Asserts that `node` holds `key{from}..key{to}`, read from its own engine.
fn holds(node: &Node, key: &str, from: u32, to: u32) {
    for i in from..to {
        let (item, _) = node
            .read_local(format!("{key}{i}").as_bytes())
            .unwrap()
            .unwrap_or_else(|| panic!("node {} lacks {key}{i}", node.id()));
        assert_eq!(item.value, i.to_string().into_bytes());
    }
}

/// A peer-protocol ping to `addr` sent as node `from`: `true` for an answer, `false` for a
/// refusal.
async fn admitted(from: NodeId, addr: &str) -> bool {
    let mut c = PeerClient::new(from, 0, addr.to_string(), None);
    match c.call(Request::Ping, Duration::from_secs(2)).await {
        Ok(Response::Pong) => true,
        Ok(Response::Refused(_)) => false,
        other => panic!("ping to {addr}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_node_joins_by_snapshot_is_promoted_and_keeps_the_group_going() {
    bounded(async {
        // Nothing kept behind a snapshot, so the purged log cannot bring node 4 up.
        let cfg = || Config {
            keep_behind_snapshot: 0,
            ..config()
        };
        let mut g = Group::start_with("grow", cfg).await;
        let leader = g.leader_of(&[1, 2, 3]).await;
        let last = write_range(g.node(leader), "a", 0, 30).await;
        g.applied(&[1, 2, 3], last).await;
        for n in g.nodes.values() {
            n.snapshot(Duration::from_secs(10)).await.unwrap();
            n.raft().trigger().purge_log(last).await.unwrap();
        }

        let addr4 = g.start_new(4, cfg()).await;
        let m = g.node(leader).add_learner(4, &addr4).await.unwrap();
        assert_eq!(m.learners.get(&4), Some(&addr4), "{m:?}");
        assert_eq!(m.voters.len(), 3);
        let m4 = g.node(4).metrics().await;
        assert!(
            m4.snapshot_index >= Some(last),
            "caught up by snapshot: {m4:?}"
        );
        assert_eq!(m4.role, Role::Learner);
        g.applied(&[4], last).await;
        holds(g.node(4), "a", 0, 30);

        // Promoted through a follower (forwarded to the leader).
        let follower = (1..=3).find(|id| *id != leader).unwrap();
        let m = g.node(follower).promote(4).await.unwrap();
        assert_eq!(m.voters.keys().copied().collect::<Vec<_>>(), [1, 2, 3, 4]);
        assert!(
            m.learners.is_empty() && m.committed && !m.is_joint(),
            "{m:?}"
        );
        write_range(g.node(4), "b", 0, 10).await;

        // Four voters, the old leader stopped: the other three (node 4 among them) elect a
        // leader and commit, and every one of them is needed for a majority of four.
        g.kill(leader).await;
        let rest: Vec<NodeId> = g.nodes.keys().copied().collect();
        let new = g.leader_of(&rest).await;
        assert_ne!(new, leader);
        let last = write_range(g.node(4), "c", 0, 20).await;
        g.applied(&rest, last).await;
        for key in ["a", "b", "c"] {
            let n = if key == "a" {
                30
            } else if key == "b" {
                10
            } else {
                20
            };
            holds(g.node(4), key, 0, n);
        }
        let c19 = g.node(4).read_linearizable(b"c19").await.unwrap().unwrap();
        assert_eq!(&c19.value[..], b"19");
        g.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_node_is_refused_and_the_rest_still_commit() {
    bounded(async {
        let mut g = Group::start_with("remove", config).await;
        let leader = g.leader_of(&[1, 2, 3]).await;
        let gone = (1..=3).find(|id| *id != leader).unwrap();
        let kept: Vec<NodeId> = (1..=3).filter(|id| *id != gone).collect();
        write_range(g.node(gone), "a", 0, 5).await;
        for id in &kept {
            assert!(admitted(gone, &g.addrs[id]).await, "before the removal");
        }
        // A stranger is refused all along.
        assert!(!admitted(99, &g.addrs[&leader]).await);

        let m = g.node(leader).remove(gone).await.unwrap();
        assert_eq!(m.voters.keys().copied().collect::<Vec<_>>(), kept);
        assert!(m.committed && !m.learners.contains_key(&gone), "{m:?}");
        // Once each kept node knows the removal committed (it applied the entry), it
        // refuses the removed node's traffic.
        g.applied(&kept, m.log_index.unwrap()).await;
        for id in &kept {
            assert!(
                !admitted(gone, &g.addrs[id]).await,
                "node {id} still admits"
            );
        }
        // Removing it again: nothing left to do.
        let again = g.node(kept[1]).remove(gone).await.unwrap();
        assert_eq!(again.voters, m.voters);

        // The removed node is left out: whatever it tries, the two others commit without it.
        let last = write_range(g.node(kept[0]), "b", 0, 10).await;
        write_range(g.node(kept[1]), "c", 0, 10).await;
        g.applied(&kept, last).await;
        for id in &kept {
            let b9 = g.node(*id).read_linearizable(b"b9").await.unwrap().unwrap();
            assert_eq!(&b9.value[..], b"9");
        }
        assert!(g.node(gone).read_local(b"b9").unwrap().is_none());
        g.kill(gone).await;
        assert_eq!(g.leader_of(&kept).await, leader);
        g.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_removes_itself_and_the_others_go_on() {
    bounded(async {
        let g = Group::start_with("remove-leader", config).await;
        let leader = g.leader_of(&[1, 2, 3]).await;
        let kept: Vec<NodeId> = (1..=3).filter(|id| *id != leader).collect();
        write_range(g.node(kept[0]), "a", 0, 5).await;
        // Asked of a follower, carried out by the leader on itself.
        let m = g.node(kept[0]).remove(leader).await.unwrap();
        assert_eq!(m.voters.keys().copied().collect::<Vec<_>>(), kept);
        // It steps down once the change is committed; the two others elect one of them.
        g.node(leader)
            .raft()
            .wait(Some(Duration::from_secs(10)))
            .metrics(|m| !m.state.is_leader(), "stepped down")
            .await
            .expect("the removed leader steps down");
        let new = g.leader_of(&kept).await;
        assert_ne!(new, leader);
        let last = write_range(g.node(kept[1]), "b", 0, 5).await;
        g.applied(&kept, last).await;
        holds(g.node(kept[0]), "b", 0, 5);
        for id in &kept {
            assert!(
                !admitted(leader, &g.addrs[id]).await,
                "node {id} still admits"
            );
        }
        g.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_node_replaced_through_a_follower() {
    bounded(async {
        let mut g = Group::start_with("replace", config).await;
        g.leader_of(&[1, 2, 3]).await;
        write_range(g.node(1), "a", 0, 10).await;
        // Node 3 dies for good; 1 and 2 go on (a new election if 3 led).
        g.kill(3).await;
        let leader = g.leader_of(&[1, 2]).await;
        let follower = 3 - leader;
        write_range(g.node(follower), "b", 0, 10).await;

        // Removing a live node now would leave {the other, 3}: no majority answers.
        let refused = g.node(follower).remove(leader).await.unwrap_err();
        assert!(matches!(refused, ClusterError::Rejected(_)), "{refused:?}");
        assert!(!refused.is_retryable());

        let addr4 = g.start_new(4, config()).await;
        let m = g.node(follower).add(4, &addr4).await.unwrap();
        assert_eq!(m.voters.keys().copied().collect::<Vec<_>>(), [1, 2, 3, 4]);
        // Adding it again: already done.
        let again = g.node(follower).add(4, &addr4).await.unwrap();
        assert_eq!(again.voters, m.voters);
        // The same id at another address is a different node: refused.
        let other = g.node(follower).add(4, "127.0.0.1:1").await.unwrap_err();
        assert!(matches!(other, ClusterError::Rejected(_)), "{other:?}");

        let m = g.node(follower).remove(3).await.unwrap();
        assert_eq!(m.voters.keys().copied().collect::<Vec<_>>(), [1, 2, 4]);
        assert!(
            m.committed && !m.is_joint() && m.learners.is_empty(),
            "{m:?}"
        );

        let last = write_range(g.node(4), "c", 0, 10).await;
        g.applied(&[1, 2, 4], last).await;
        for key in ["a", "b", "c"] {
            holds(g.node(4), key, 0, 10);
        }
        // Node 4 counts: with node 1 or 2 stopped, the other and 4 are a majority of three.
        g.kill(follower).await;
        let last = write_range(g.node(4), "d", 0, 5).await;
        g.applied(&[leader, 4], last).await;
        holds(g.node(4), "d", 0, 5);
        g.shutdown().await;
    })
    .await;
}

/// The lag the leader reports for `id`, from `st`.
fn lag(st: &Status, id: NodeId) -> u64 {
    let r = st.replication.as_ref().expect("the leader's replication");
    r.followers
        .iter()
        .find(|f| f.id == id)
        .expect("a follower")
        .lag
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_roles_membership_and_lag() {
    bounded(async {
        let mut g = Group::start_with("status", config).await;
        let leader = g.leader_of(&[1, 2, 3]).await;
        let (f1, f2) = {
            let mut f = (1..=3).filter(|id| *id != leader);
            (f.next().unwrap(), f.next().unwrap())
        };
        let last = write_range(g.node(f1), "a", 0, 10).await;
        g.applied(&[1, 2, 3], last).await;

        let st = g.node(leader).status().await;
        assert_eq!(
            (st.id, st.role, st.leader),
            (leader, Role::Leader, Some(leader))
        );
        assert_eq!(st.view, View::Leader(leader));
        assert_eq!(st.membership.voters, g.addrs);
        assert!(st.commit_index >= Some(last) && st.applied_index >= Some(last));
        let r = st.replication.as_ref().unwrap();
        let ids: Vec<NodeId> = r.followers.iter().map(|f| f.id).collect();
        assert_eq!(ids, [f1, f2]);
        assert!(r.followers.iter().all(|f| f.voter));

        // A follower shows its own role and the leader's view.
        let st = g.node(f1).status().await;
        assert_eq!(
            (st.id, st.role, st.leader),
            (f1, Role::Follower, Some(leader))
        );
        assert_eq!(st.view, View::Leader(leader));
        assert!(st.replication.is_some());
        let bytes = memkit_raft::codec::to_vec(&st).unwrap();
        assert_eq!(
            memkit_raft::codec::from_slice::<Status>(&bytes).unwrap(),
            st
        );

        // A node not yet in any group has only its own view.
        let addr4 = g.start_new(4, config()).await;
        let st = g.node(4).status().await;
        assert_eq!((st.view, st.leader), (View::Local, None));
        assert!(st.replication.is_none() && st.membership.voters.is_empty());
        g.node(f2).add_learner(4, &addr4).await.unwrap();
        let st = g.node(f2).status().await;
        assert_eq!(st.membership.learners.get(&4), Some(&addr4));
        let r = st.replication.unwrap();
        assert!(r.followers.iter().any(|f| f.id == 4 && !f.voter));

        // A stopped follower's lag grows with every write; the others' does not.
        g.kill(f2).await;
        let last = write_range(g.node(f1), "b", 0, 10).await;
        replicated(g.node(leader), &[f1, 4], last).await;
        let before = g.node(f1).status().await;
        assert_eq!((lag(&before, f1), lag(&before, 4)), (0, 0), "{before:?}");
        let lag_before = lag(&before, f2);
        assert!(lag_before >= 10, "{before:?}");
        let last = write_range(g.node(leader), "c", 0, 10).await;
        replicated(g.node(leader), &[f1, 4], last).await;
        let after = g.node(f1).status().await;
        assert_eq!((lag(&after, f1), lag(&after, 4)), (0, 0), "{after:?}");
        assert!(lag(&after, f2) >= lag_before + 10, "{after:?}");
        let m = after.replication.unwrap();
        let gone = m.followers.iter().find(|f| f.id == f2).unwrap();
        assert_eq!(gone.lag, m.last_log_index.unwrap() - gone.matched.unwrap());
        g.shutdown().await;
    })
    .await;
}

/// Waits until the leader's replication metrics show `ids` holding the log up to `index`
/// (they follow the acknowledgements a moment after the writes return).
async fn replicated(leader: &Node, ids: &[NodeId], index: u64) {
    leader
        .raft()
        .wait(Some(Duration::from_secs(10)))
        .metrics(
            |m| {
                let r = m.replication.as_ref();
                ids.iter().all(|id| {
                    let matched = r.and_then(|r| r.get(id).copied().flatten());
                    matched.is_some_and(|l| l.index >= index)
                })
            },
            "replicated",
        )
        .await
        .expect("replicated in time");
}
