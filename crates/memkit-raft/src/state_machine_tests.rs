//! The state machine over its store: a restart resumes at the marker without replaying
//! what the store holds, and a store whose snapshot install was cut off (or that is
//! missing) comes back as the node's snapshot.

use memkit_types::SystemClock;
use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine};
use openraft::{CommittedLeaderId, Entry};

use super::*;
use crate::types::Vivify;

/// A directory of its own, removed at the end.
struct Tmp(std::path::PathBuf);

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tmp(name: &str) -> Tmp {
    Tmp(std::env::temp_dir().join(format!(
        "memkit-raft-sm-{name}-{}-{}",
        std::process::id(),
        SystemClock.now_millis()
    )))
}

fn entry(index: u64, writes: Vec<Write>) -> Entry<TypeConfig> {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Normal(Proposal {
            stamp_ms: SystemClock.now_millis(),
            writes,
        }),
    }
}

fn set(key: &str) -> Write {
    Write::set(key, b"v".as_slice())
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

fn value(sm: &StateMachine, key: &str) -> Option<Vec<u8>> {
    let read = sm.store().read(key.as_bytes()).unwrap();
    read.map(|(item, _)| item.value.to_vec())
}

async fn applied(sm: &mut StateMachine) -> Option<u64> {
    sm.applied_state().await.unwrap().0.map(|l| l.index)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_resumes_at_the_marker_and_a_cut_off_install_at_the_snapshot() {
    let dir = tmp("restart");
    let mut sm = StateMachine::open(&dir.0, 16 << 20).unwrap();
    // Entries 1-3, a snapshot of them, then 4-5.
    let first = vec![
        entry(1, vec![set("a"), incr("n")]),
        entry(2, vec![incr("n"), set("b")]),
        entry(3, vec![incr("n")]),
    ];
    sm.apply(first).await.unwrap();
    let mut builder = sm.get_snapshot_builder().await;
    let snap = builder.build_snapshot().await.unwrap();
    assert_eq!(snap.meta.last_log_id.map(|l| l.index), Some(3));
    drop((builder, snap));
    let later = vec![
        entry(4, vec![set("c"), incr("n")]),
        entry(5, vec![incr("n")]),
    ];
    sm.apply(later).await.unwrap();
    assert_eq!(value(&sm, "n").as_deref(), Some(&b"4"[..]));
    drop(sm);

    // Back at entry 5 from the store alone: nothing applied twice.
    let mut sm = StateMachine::open(&dir.0, 16 << 20).unwrap();
    assert_eq!(applied(&mut sm).await, Some(5));
    assert_eq!(value(&sm, "n").as_deref(), Some(&b"4"[..]));
    assert!(value(&sm, "c").is_some());
    // An install cut off after it began: the items are no state of the log.
    let installing = Applied {
        installing: true,
        ..Applied::default()
    };
    sm.store.commit(&installing, true).unwrap();
    drop(sm);

    // Back at the snapshot (entry 3); openraft would re-apply 4-5 from its log.
    let mut sm = StateMachine::open(&dir.0, 16 << 20).unwrap();
    assert_eq!(applied(&mut sm).await, Some(3));
    assert_eq!(value(&sm, "n").as_deref(), Some(&b"2"[..]));
    assert!(value(&sm, "b").is_some());
    assert_eq!(value(&sm, "c"), None);
    drop(sm);

    // A store lost whole (or left by an earlier version, items in RAM): the same.
    std::fs::remove_dir_all(dir.0.join("state")).unwrap();
    let mut sm = StateMachine::open(&dir.0, 16 << 20).unwrap();
    assert_eq!(applied(&mut sm).await, Some(3));
    assert_eq!(value(&sm, "n").as_deref(), Some(&b"2"[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_fails_stops_the_state_machine_rather_than_answer() {
    let dir = tmp("fail");
    let mut sm = StateMachine::open(&dir.0, 16 << 20).unwrap();
    sm.apply(vec![entry(1, vec![set("a")])]).await.unwrap();
    // The disk fails the sync before a snapshot: the store fails, and so does every
    // entry after.
    let fault: memkit_persist::SyncFault =
        std::sync::Arc::new(|| Err(std::io::Error::other("injected")));
    sm.store.disk().set_sync_fault(Some(fault));
    let mut builder = sm.get_snapshot_builder().await;
    assert!(builder.build_snapshot().await.is_err());
    drop(builder);
    let r = sm.apply(vec![entry(2, vec![set("b")])]).await;
    assert!(r.is_err(), "applied on a failed store: {r:?}");
    drop(sm);
    let mut sm = StateMachine::open(&dir.0, 16 << 20).unwrap();
    assert_eq!(applied(&mut sm).await, Some(1));
    assert_eq!(value(&sm, "b"), None);
}
