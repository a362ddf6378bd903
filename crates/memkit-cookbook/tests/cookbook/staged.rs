//! Races staged step by step on the embedded store: each caller is an actor of
//! `memkit_cookbook::testing::Scripted`, stopped before (or after) a chosen command while
//! the others run, so every interleaving here happens on every run. Each test pins one
//! fix; its comment says the interleaving and what went wrong without the fix.

use std::future::Future;
use std::time::Duration;

use memkit_cookbook::testing::{At, Op, Scripted};
use memkit_cookbook::*;
use memkit_engine::Embedded;
use memkit_types::Memcache;

use crate::support::rt;

fn opts() -> QueueOptions {
    QueueOptions {
        hole_wait: Duration::from_millis(20),
        ..Default::default()
    }
}

fn queue(mc: Scripted<Embedded>) -> Queue<Scripted<Embedded>, u32> {
    Queue::with_options(mc, "staged", opts())
}

fn spawn<T: Send + 'static>(f: impl Future<Output = Result<T>> + Send + 'static) -> Task<T> {
    tokio::spawn(f)
}

type Task<T> = tokio::task::JoinHandle<Result<T>>;

async fn done<T>(t: Task<T>) -> T {
    t.await.unwrap().unwrap()
}

async fn drain<M: Memcache>(q: &Queue<M, u32>) -> Vec<u32> {
    let mut out = Vec::new();
    while let Some(x) = q.pop().await.unwrap() {
        out.push(x);
    }
    out
}

/// A fresh queue: P1 and P2 reserve slots 1 and 2 and stop before writing. A consumer finds
/// no head and scans slots 2 and 1, both empty; P2 writes slot 2; the consumer closes the
/// empty slots below the element and pops it; then P1 writes. A recovery that closed slot 2
/// first, failed there and restarted the head at 1 left slot 1 open under the head: P1's
/// write succeeded and its element was never popped.
#[test]
fn queue_head_recovery_closes_every_slot_under_the_head() {
    rt().block_on(async {
        let store = Scripted::new(Embedded::with_defaults());
        let (p1, p2, c) = (store.actor("P1"), store.actor("P2"), store.actor("C"));
        let write1 = p1.pause(At::before(Op::Add, 1));
        let write2 = p2.pause(At::before(Op::Add, 1));
        let close = c.pause(At::before(Op::Add, 1));
        let push1 = spawn(async move { queue(p1).push(&1).await });
        write1.reached().await;
        let push2 = spawn(async move { queue(p2).push(&2).await });
        write2.reached().await;
        let pop = spawn(async move { queue(c).pop().await });
        close.reached().await; // scanned: both slots empty, no tombstone
        write2.release();
        assert_eq!(done(push2).await, 2);
        close.release();
        let mut popped: Vec<u32> = done(pop).await.into_iter().collect();
        assert_eq!(popped, [2]);
        write1.release();
        done(push1).await;
        popped.extend(drain(&queue(store)).await);
        popped.sort_unstable();
        assert_eq!(popped, [1, 2], "an acknowledged push was never popped");
    });
}

/// As above, but P1 writes slot 1 after the consumer's scan and P2 has not written yet:
/// the consumer restarts the head below P1's element. Then the head is lost again before
/// anyone popped. A recovery that had tombstoned slot 2 before finding slot 1 written left
/// a tombstone above a waiting element, and the second recovery, which restarts at the
/// highest tombstone, skipped P1's element.
#[test]
fn queue_head_recovery_leaves_no_tombstone_above_a_waiting_element() {
    rt().block_on(async {
        let store = Scripted::new(Embedded::with_defaults());
        let (p1, p2, c) = (store.actor("P1"), store.actor("P2"), store.actor("C"));
        let write1 = p1.pause(At::before(Op::Add, 1));
        let write2 = p2.pause(At::before(Op::Add, 1));
        let close = c.pause(At::before(Op::Add, 1));
        let reread = c.pause(At::before(Op::Get, 2).key("queue:staged:head"));
        let push1 = spawn(async move { queue(p1).push(&1).await });
        write1.reached().await;
        let push2 = spawn(async move { queue(p2).push(&2).await });
        write2.reached().await;
        let pop = spawn(async move { queue(c).pop().await });
        close.reached().await; // scanned: both slots empty, no tombstone
        write1.release();
        assert_eq!(done(push1).await, 1);
        close.release();
        reread.reached().await; // the head is set; the consumer is about to read it
        assert!(store.delete(b"queue:staged:head").await.unwrap());
        reread.release();
        let mut popped: Vec<u32> = done(pop).await.into_iter().collect();
        write2.release();
        done(push2).await;
        popped.extend(drain(&queue(store)).await);
        assert_eq!(popped, [1, 2], "an acknowledged push was skipped");
    });
}

/// A producer stops before reserving its slot. Meanwhile the two waiting elements are
/// popped (the head moves to 2), their tombstones expire and the tail is lost. The
/// producer then re-creates the tail at 1 and reserves slot 1, below the head. A push that
/// compared its slot with a head read before the reservation (0, the head was missing)
/// wrote there, and its element was never popped.
#[test]
fn queue_push_checks_its_slot_against_the_head_after_reserving() {
    rt().block_on(async {
        let store = Scripted::new(Embedded::with_defaults());
        let q = queue(store.clone());
        q.push(&1).await.unwrap();
        q.push(&2).await.unwrap();
        let p = store.actor("P");
        let reserve = p.pause(At::before(Op::Arith, 1));
        let push = spawn(async move { queue(p).push(&3).await });
        reserve.reached().await;
        assert_eq!(q.pop().await.unwrap(), Some(1));
        assert_eq!(q.pop().await.unwrap(), Some(2));
        for key in ["tail", "1", "2"] {
            let key = format!("queue:staged:{key}");
            assert!(store.delete(key.as_bytes()).await.unwrap(), "{key}");
        }
        reserve.release();
        let slot = done(push).await;
        assert!(slot > 2, "pushed to slot {slot}, at or below the head");
        assert_eq!(
            drain(&q).await,
            [3],
            "an acknowledged push was never popped"
        );
    });
}
