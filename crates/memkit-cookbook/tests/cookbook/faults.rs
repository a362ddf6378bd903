//! Keys evicted, deleted or flushed mid-way: each structure degrades as its page says.

use std::collections::HashSet;
use std::time::Duration;

use memkit_cookbook::*;
use memkit_types::{Exptime, Memcache};

use crate::support::{T0, dyn_clock, store, store_with_memory};
use crate::units::{Ev, ev};

fn fast() -> QueueOptions {
    QueueOptions {
        hole_wait: Duration::from_millis(20),
        ..Default::default()
    }
}

/// docs/cookbook/lock.md: the lock lives in its key; if the key goes, a second holder may
/// enter (efficiency lock), and the first holder's unlock does not disturb the second.
#[tokio::test]
async fn lock_key_lost_lets_a_second_holder_in_without_harm() {
    let (mc, _clock) = store();
    let lock = Lock::new(mc.clone(), "l");
    let a = lock.try_lock().await.unwrap().unwrap();
    mc.flush_all(0).await.unwrap();
    let b = lock
        .try_lock()
        .await
        .unwrap()
        .expect("the key is gone: B gets in");
    assert!(!a.unlock().await.unwrap());
    assert!(b.is_held().await.unwrap());
    assert!(b.unlock().await.unwrap());
}

/// docs/cookbook/counter.md: an evicted counter restarts from zero; it never errors.
#[tokio::test]
async fn counter_restarts_after_eviction() {
    let (mc, _clock) = store();
    let c = Counter::new(mc.clone(), "c");
    c.incr(5).await.unwrap();
    mc.delete(c.key()).await.unwrap();
    assert_eq!(c.value().await.unwrap(), 0);
    assert_eq!(c.incr(1).await.unwrap(), 1);
    // view counter: re-seeded from the source of truth
    let v = ViewCounter::new(mc.clone(), "v");
    v.hit(|| async { Ok::<_, std::io::Error>(10) })
        .await
        .unwrap();
    mc.flush_all(0).await.unwrap();
    assert_eq!(
        v.hit(|| async { Ok::<_, std::io::Error>(11) })
            .await
            .unwrap(),
        12
    );
}

/// docs/cookbook/event-log.md: losing a chunk key loses that chunk's events only.
#[tokio::test]
async fn event_log_lost_chunk_loses_only_its_events() {
    let (mc, clock) = store();
    let log: EventLog<_, Ev> = EventLog::new(mc.clone(), "e", 10, 6, dyn_clock(&clock));
    clock.advance(30);
    for t in 0..30 {
        log.put(&ev(T0 + t, 0, t as u32)).await.unwrap();
    }
    mc.delete(&log.chunk_key((T0 + 10) / 10)).await.unwrap();
    let got = log.fetch(None, None).await.unwrap();
    assert_eq!(got.len(), 20);
    assert!(got.iter().all(|e| !(T0 + 10..T0 + 20).contains(&e.at)));
    // new events for that chunk start it again
    log.put(&ev(T0 + 15, 1, 0)).await.unwrap();
    assert_eq!(
        log.fetch(Some(T0 + 10), Some(T0 + 19)).await.unwrap().len(),
        1
    );
}

/// A store far too small for what is written: structures keep answering, the event log
/// returns a subset without duplicates, and counters never over-count.
#[tokio::test]
async fn tiny_store_evicts_without_errors_or_duplicates() {
    let (mc, clock) = store_with_memory(1 << 20);
    let log: EventLog<_, Ev> = EventLog::new(mc.clone(), "e", 10, 6, dyn_clock(&clock));
    let c = Counter::new(mc.clone(), "c");
    let junk = vec![b'x'; 4000];
    for i in 0..2000u32 {
        log.put(&ev(T0, 0, i)).await.unwrap();
        c.incr(1).await.unwrap();
        mc.set(format!("junk{i}").as_bytes(), &junk, 0, Exptime::NEVER)
            .await
            .unwrap();
    }
    let got = log.fetch(None, None).await.unwrap();
    let unique: HashSet<u32> = got.iter().map(|e| e.seq).collect();
    assert_eq!(unique.len(), got.len());
    assert!(c.value().await.unwrap() <= 2000);
}

/// docs/cookbook/queue.md: head lost — recovered by scanning back from the tail; no element
/// is delivered twice and the waiting ones are still delivered.
#[tokio::test]
async fn queue_head_lost_recovers_without_duplicates() {
    let (mc, _clock) = store();
    let q: Queue<_, u32> = Queue::with_options(mc.clone(), "q", fast());
    for i in 0..200 {
        q.push(&i).await.unwrap();
    }
    for i in 0..50 {
        assert_eq!(q.pop().await.unwrap(), Some(i));
    }
    mc.delete(b"queue:q:head").await.unwrap();
    let mut rest = Vec::new();
    while let Some(x) = q.pop().await.unwrap() {
        rest.push(x);
    }
    assert_eq!(rest, (50..200).collect::<Vec<_>>());
}

/// Tail lost while the head survives: the next push moves the tail past the head, so new
/// elements are delivered (nothing pushed before is duplicated).
#[tokio::test]
async fn queue_tail_lost_is_repaired_by_the_next_push() {
    let (mc, _clock) = store();
    let q: Queue<_, u32> = Queue::with_options(mc.clone(), "q", fast());
    for i in 0..10 {
        q.push(&i).await.unwrap();
    }
    for i in 0..4 {
        assert_eq!(q.pop().await.unwrap(), Some(i));
    }
    mc.delete(b"queue:q:tail").await.unwrap();
    assert_eq!(q.pop().await.unwrap(), None, "looks empty: head >= tail");
    q.push(&100).await.unwrap();
    q.push(&101).await.unwrap();
    // The tail jumps to the head; the waiting elements' slots are occupied, so the new
    // pushes land after them and everything comes out once, in order.
    let mut rest = Vec::new();
    while let Some(x) = q.pop().await.unwrap() {
        rest.push(x);
    }
    assert_eq!(rest, vec![4, 5, 6, 7, 8, 9, 100, 101]);
}

/// flush_all: every structure is empty afterwards and works again.
#[tokio::test]
async fn flush_empties_and_structures_keep_working() {
    let (mc, clock) = store();
    let q: Queue<_, u32> = Queue::with_options(mc.clone(), "q", fast());
    let s: Stack<_, u32> = Stack::with_options(mc.clone(), "s", fast());
    let a: AppendArray<_, u32> = AppendArray::new(mc.clone(), "a");
    let set = Set::new(mc.clone(), "set");
    let users = OnlineUsers::new(mc.clone(), "u", 300, 4, dyn_clock(&clock));
    q.push(&1).await.unwrap();
    s.push(&1).await.unwrap();
    a.add(&1).await.unwrap();
    set.add("x").await.unwrap();
    users.touch(1).await.unwrap();
    mc.flush_all(0).await.unwrap();
    assert_eq!(q.pop().await.unwrap(), None);
    assert_eq!(s.pop().await.unwrap(), None);
    assert!(a.fetch().await.unwrap().is_empty());
    assert!(set.members().await.unwrap().is_empty());
    assert_eq!(users.count().await.unwrap(), 0);
    q.push(&2).await.unwrap();
    s.push(&2).await.unwrap();
    a.add(&2).await.unwrap();
    set.add("y").await.unwrap();
    users.touch(2).await.unwrap();
    assert_eq!(q.pop().await.unwrap(), Some(2));
    assert_eq!(s.pop().await.unwrap(), Some(2));
    assert_eq!(a.fetch().await.unwrap(), vec![2]);
    assert_eq!(set.members().await.unwrap(), vec!["y"]);
    assert_eq!(users.count().await.unwrap(), 1);
}

/// docs/cookbook/online.md: a lost bucket hides its users until their key expires and they
/// come back; a lost user key just means "offline".
#[tokio::test]
async fn online_users_lost_bucket_hides_until_rejoin() {
    let (mc, clock) = store();
    let u = OnlineUsers::new(mc.clone(), "u", 60, 2, dyn_clock(&clock));
    u.touch(1).await.unwrap();
    u.touch(2).await.unwrap();
    mc.delete(&u.bucket_key(1)).await.unwrap();
    assert_eq!(u.list().await.unwrap().len(), 1, "user 1 is hidden");
    assert!(
        u.is_online(1).await.unwrap(),
        "but the membership test still works"
    );
    clock.advance(60);
    u.touch(1).await.unwrap();
    assert_eq!(u.list().await.unwrap(), vec![(1, T0 + 60)]);
}

/// docs/cookbook/table.md: the element keys answer membership even when the list key is
/// lost; the list is then incomplete until the elements are written again.
#[tokio::test]
async fn table_list_key_lost() {
    let (mc, _clock) = store();
    let s = Set::new(mc.clone(), "t");
    s.add("a").await.unwrap();
    mc.delete(b"array:hash:t:keys").await.unwrap();
    assert!(s.contains("a").await.unwrap());
    assert!(s.members().await.unwrap().is_empty());
    s.add("a").await.unwrap();
    assert_eq!(s.members().await.unwrap(), vec!["a"]);
}
