//! `memkit-bench raft-snapshot` on a small group: every phase runs and the wiped follower
//! ends up with every item intact. Correctness only, never timing.

use memkit_bench::raft_snapshot::{self, RaftSnapshotArgs};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wiped_follower_gets_every_item_back() {
    let a = RaftSnapshotArgs {
        writers: 16,
        phase_timeout_secs: 60,
        ..RaftSnapshotArgs::with_items(20_000)
    };
    let r = raft_snapshot::run(&a, &mut |_| {}).await.expect("run");
    assert_eq!(r.checked, 20_000);
    assert_eq!(r.bad, 0, "{r:?}");
    // Entries carry many writes each: fewer than the items, never none.
    assert!(r.snapshot_index > 0, "{r:?}");
    assert!(r.snapshot_bytes as usize > 20_000 * a.value_size, "{r:?}");
    assert!(r.fill.as_secs_f64() > 0.0 && r.install.as_secs_f64() > 0.0);
}
