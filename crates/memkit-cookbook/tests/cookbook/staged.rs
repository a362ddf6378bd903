//! Races staged step by step on the embedded store: each caller is an actor of
//! `memkit_cookbook::testing::Scripted`, stopped before (or after) a chosen command while
//! the others run, and time, where it matters, is a manual clock, so every interleaving here
//! happens on every run. Each test pins one fix; its comment says the interleaving and what
//! went wrong without the fix.

use std::future::Future;
use std::time::Duration;

use memkit_cookbook::testing::{At, Gate, Op, Scripted};
use memkit_cookbook::*;
use memkit_engine::Embedded;
use memkit_types::Memcache;

use crate::support::{T0, dyn_clock, rt, store};
use crate::units::{Ev, ev};

fn opts() -> QueueOptions {
    QueueOptions {
        hole_wait: Duration::from_millis(20),
        ..Default::default()
    }
}

fn queue(mc: Scripted<Embedded>) -> Queue<Scripted<Embedded>, u32> {
    Queue::with_options(mc, "staged", opts())
}

fn stack(mc: Scripted<Embedded>) -> Stack<Scripted<Embedded>, String> {
    Stack::with_options(mc, "staged", opts())
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

/// Stack slots are reused as the top moves down and up. Consumers C1 and C2 each read B,
/// the element in slot 1, and stop before removing it (another element is pushed and
/// popped in between). A producer reserves slot 2 and stops before writing; a third
/// consumer waits out the empty slot, closes it and pops B; the producer's write fails on
/// the tombstone and it writes Y in slot 1 instead. C1 and C2 both lose the take of B: a
/// consumer that gave up there would return nothing; one that starts over from the top
/// takes Y, which comes out exactly once.
#[test]
fn stack_consumer_that_loses_the_take_starts_over_from_the_top() {
    rt().block_on(async {
        let store = Scripted::new(Embedded::with_defaults());
        let s = stack(store.clone());
        assert_eq!(s.push(&"B".to_string()).await.unwrap(), 1);
        let (c1, c2, p) = (store.actor("C1"), store.actor("C2"), store.actor("P"));
        let take1 = c1.pause(At::before(Op::Delete, 1));
        let pop1 = spawn(async move { stack(c1).pop().await });
        take1.reached().await; // top 1, C1 read B
        assert_eq!(s.push(&"X".to_string()).await.unwrap(), 2, "B is on top");
        assert_eq!(s.pop().await.unwrap().as_deref(), Some("X")); // top 1
        let take2 = c2.pause(At::before(Op::Delete, 1));
        let pop2 = spawn(async move { stack(c2).pop().await });
        take2.reached().await; // top 1, C2 read B
        let write = p.pause(At::before(Op::Add, 1));
        let push = spawn(async move { stack(p).push(&"Y".to_string()).await });
        write.reached().await; // top 2, Y not written yet
        assert_eq!(s.pop().await.unwrap().as_deref(), Some("B")); // slot 2 closed, top 0
        write.release();
        assert_eq!(done(push).await, 1);
        take1.release();
        let mut popped: Vec<String> = done(pop1).await.into_iter().collect();
        take2.release();
        popped.extend(done(pop2).await);
        while let Some(x) = s.pop().await.unwrap() {
            popped.push(x);
        }
        assert_eq!(popped, ["Y"], "an acknowledged push was stranded");
    });
}

/// Stack consumers remove an element before they move the top below its slot. Consumer C0
/// has read X0, the element on top (slot 1), and stops before removing it; push P reserves
/// a slot. Then, round after round while P stops before each new reservation: the
/// consumer removes its element, another push puts the next element on top, a new
/// consumer reads that one and stops before removing it, and P reserves again. Consumers
/// that moved the top below a slot before removing its element left the slot occupied
/// just above the top: each reservation of P landed on the element being taken, and the
/// push failed with `Contended` after 64 of them (the convoy a loaded scheduler repeated
/// in `races::stack_concurrency`).
#[test]
fn stack_push_never_lands_on_an_element_being_taken() {
    rt().block_on(async {
        let store = Scripted::new(Embedded::with_defaults());
        let s = stack(store.clone());
        s.push(&"X0".to_string()).await.unwrap();
        let (mut take, mut pop) = stop_before_take(&store, "C0").await;
        let p = store.actor("P");
        let mut reserve = p.pause(At::before(Op::Arith, 2));
        let mut push = push_task(p.clone(), "P");
        let mut pushed = vec!["X0".to_string()];
        let mut popped = Vec::new();
        let result = loop {
            if let Some(r) = stopped_or_done(&reserve, &mut push).await {
                break r;
            }
            // P's last reservation found the element C is taking.
            take.release();
            popped.extend(done(pop).await);
            let x = format!("X{}", pushed.len());
            s.push(&x).await.unwrap();
            (take, pop) = stop_before_take(&store, &format!("C{}", pushed.len())).await;
            pushed.push(x);
            let next = p.pause(At::before(Op::Arith, 1));
            reserve.release();
            reserve = next;
        };
        let rounds = pushed.len() - 1;
        assert!(result.is_ok(), "after {rounds} rounds: {result:?}");
        take.release();
        popped.extend(done(pop).await);
        while let Some(x) = s.pop().await.unwrap() {
            popped.push(x);
        }
        pushed.push("P".to_string());
        popped.sort();
        pushed.sort();
        assert_eq!(popped, pushed, "every element popped exactly once");
    });
}

/// Consumers skip a tombstone by moving the top below it. Push P reserves slot 1 and
/// stalls past `hole_wait`; consumer C closes the slot with a tombstone and stops before
/// moving the top; P's write fails on the tombstone and P stops before reserving again;
/// C moves the top below the tombstone. Then, round after round while P stops before each
/// reservation, a pop skips the tombstone if the top is on it. A push that reserved with a
/// plain `incr` landed on the tombstone every round (a consumer had just moved the top
/// back below it) and failed with `Contended` after 64 rounds.
#[test]
fn stack_push_gets_past_a_tombstone_that_consumers_keep_skipping() {
    rt().block_on(async {
        let store = Scripted::new(Embedded::with_defaults());
        let s = stack(store.clone());
        let (p, c) = (store.actor("P"), store.actor("C"));
        let write = p.pause(At::before(Op::Add, 1));
        let mut push = push_task(p.clone(), "P");
        write.reached().await; // top 1, slot 1 not written
        let closed = c.pause(At::after(Op::Add, 1));
        let pop = spawn(async move { stack(c).pop().await });
        closed.reached().await; // C waited hole_wait and closed slot 1
        let mut reserve = p.pause(At::before(Op::Arith, 1));
        write.release();
        reserve.reached().await; // P's write failed on the tombstone
        closed.release();
        assert_eq!(done(pop).await, None);
        let mut rounds = 0;
        let result = loop {
            if let Some(r) = stopped_or_done(&reserve, &mut push).await {
                break r;
            }
            assert_eq!(s.pop().await.unwrap(), None);
            rounds += 1;
            let next = p.pause(At::before(Op::Arith, 1));
            reserve.release();
            reserve = next;
        };
        assert!(result.is_ok(), "after {rounds} rounds: {result:?}");
        assert_eq!(s.pop().await.unwrap().as_deref(), Some("P"));
        assert_eq!(s.pop().await.unwrap(), None);
    });
}

fn push_task(mc: Scripted<Embedded>, x: &str) -> Task<u64> {
    let x = x.to_string();
    spawn(async move { stack(mc).push(&x).await })
}

/// A pop by a new actor `name`, stopped once it has read the top element, before removing it.
async fn stop_before_take(store: &Scripted<Embedded>, name: &str) -> (Gate, Task<Option<String>>) {
    let c = store.actor(name);
    let take = c.pause(At::before(Op::Delete, 1));
    let pop = spawn(async move { stack(c).pop().await });
    take.reached().await;
    (take, pop)
}

/// Waits until `gate` stops its actor or `task` ends; the task's result if it ended.
async fn stopped_or_done<T>(gate: &Gate, task: &mut Task<T>) -> Option<Result<T>> {
    tokio::select! {
        biased;
        r = task => Some(r.unwrap()),
        () = gate.reached() => None,
    }
}

/// The ring of 2 chunks of 10 s wraps: an event of chunk c + 2 is written while the key of
/// chunk c still lives (its TTL runs to the end of chunk c + 1, plus the skew margin). Had
/// the two chunks shared a key (one per ring slot), the event would have been appended to
/// chunk c's key and expired with it, inside the window the log guarantees.
#[test]
fn event_log_chunk_never_shares_a_key_with_an_older_chunk() {
    rt().block_on(async {
        let (mc, clock) = store();
        let log: EventLog<_, Ev> = EventLog::new(mc, "ring", 10, 2, dyn_clock(&clock));
        log.put(&ev(T0, 1, 1)).await.unwrap();
        clock.advance(20);
        log.put(&ev(T0 + 20, 1, 2)).await.unwrap();
        clock.advance(MAX_CLOCK_SKEW_SECS + 2); // the first chunk's key has expired
        assert_eq!(
            log.fetch(None, None).await.unwrap(),
            [ev(T0 + 20, 1, 2)],
            "an event of the current chunk was lost"
        );
    });
}
