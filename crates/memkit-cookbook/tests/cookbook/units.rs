//! Each structure alone, on the embedded store with a manual clock.

use std::time::Duration;

use memkit_cookbook::structures::array::fold;
use memkit_cookbook::*;
use memkit_types::{GetOptions, Memcache, Ttl};
use serde::{Deserialize, Serialize};

use crate::support::{T0, dyn_clock, store};

async fn ttl_of<M: Memcache>(mc: &M, key: &[u8]) -> Option<Ttl> {
    let opts = GetOptions {
        meta: true,
        ..Default::default()
    };
    mc.get_with(key, &opts).await.unwrap().and_then(|i| i.ttl)
}

// ---------------------------------------------------------------- lock

#[tokio::test]
async fn lock_excludes_and_unlock_frees() {
    let (mc, _clock) = store();
    let lock = Lock::new(mc.clone(), "l");
    let g = lock.try_lock().await.unwrap().expect("free");
    assert!(lock.try_lock().await.unwrap().is_none());
    assert!(lock.is_locked().await.unwrap());
    assert!(g.is_held().await.unwrap());
    assert_eq!(
        mc.get_value(lock.key()).await.unwrap().unwrap().as_ref(),
        g.token().as_bytes(),
        "the value is our owner token"
    );
    assert!(g.unlock().await.unwrap());
    assert!(!lock.is_locked().await.unwrap());
    let g2 = lock.try_lock().await.unwrap().expect("free again");
    assert!(g2.unlock().await.unwrap());
}

#[tokio::test]
async fn lock_ttl_boundary() {
    let (mc, clock) = store();
    let lock = Lock::with_options(mc, "l", LockOptions::ttl_secs(5));
    let g = lock.try_lock().await.unwrap().unwrap();
    clock.advance(4);
    assert!(lock.try_lock().await.unwrap().is_none(), "alive at ttl - 1");
    clock.advance(1);
    let other = lock.try_lock().await.unwrap().expect("expired at ttl");
    assert!(!g.is_held().await.unwrap());
    assert!(!g.unlock().await.unwrap(), "not ours any more");
    assert!(
        other.is_held().await.unwrap(),
        "the new holder is untouched"
    );
    assert!(other.unlock().await.unwrap());
}

#[tokio::test]
async fn lock_extend_only_while_ours() {
    let (mc, clock) = store();
    let lock = Lock::with_options(mc, "l", LockOptions::ttl_secs(5));
    let mut g = lock.try_lock().await.unwrap().unwrap();
    clock.advance(3);
    assert!(g.extend(10).await.unwrap());
    clock.advance(8);
    assert!(g.is_held().await.unwrap(), "extended to 10 s");
    assert!(
        g.unlock().await.unwrap(),
        "unlock after extend (CAS changed) still works"
    );

    let mut g = lock.try_lock().await.unwrap().unwrap();
    clock.advance(5);
    let other = lock.try_lock().await.unwrap().unwrap();
    assert!(
        !g.extend(10).await.unwrap(),
        "cannot extend someone else's lock"
    );
    assert!(other.is_held().await.unwrap());
    other.forget();
}

#[tokio::test]
async fn lock_waits_with_bounded_backoff() {
    let (mc, _clock) = store();
    let opts = LockOptions::ttl_secs(30)
        .max_wait(Duration::from_millis(40))
        .backoff(Duration::from_millis(2), Duration::from_millis(10));
    let lock = Lock::with_options(mc.clone(), "l", opts);
    let held = lock.try_lock().await.unwrap().unwrap();
    match lock.lock().await {
        Err(Error::LockTimeout(name)) => assert_eq!(name, "l"),
        other => panic!("expected a timeout, got {other:?}"),
    }
    // Released while a waiter backs off: the waiter gets it.
    let lock2 = Lock::with_options(
        mc,
        "l",
        LockOptions::ttl_secs(30).max_wait(Duration::from_secs(5)),
    );
    let waiter = tokio::spawn(async move { lock2.lock().await.map(|g| g.forget()) });
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(held.unlock().await.unwrap());
    waiter.await.unwrap().unwrap();
    assert!(lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn lock_guard_drop_releases_in_runtime_forget_does_not() {
    let (mc, _clock) = store();
    let lock = Lock::new(mc, "l");
    drop(lock.try_lock().await.unwrap().unwrap());
    for _ in 0..100 {
        if !lock.is_locked().await.unwrap() {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(!lock.is_locked().await.unwrap(), "spawned release ran");
    lock.try_lock().await.unwrap().unwrap().forget();
    tokio::task::yield_now().await;
    assert!(
        lock.is_locked().await.unwrap(),
        "forget leaves it to the TTL"
    );
}

#[test]
fn lock_guard_drop_outside_runtime_leaves_ttl() {
    let (mc, clock) = store();
    let lock = Lock::with_options(mc, "l", LockOptions::ttl_secs(3));
    let rt = crate::support::rt();
    let g = rt.block_on(lock.try_lock()).unwrap().unwrap();
    drop(g); // no runtime entered here: nothing to spawn on
    assert!(rt.block_on(lock.is_locked()).unwrap());
    clock.advance(3);
    assert!(!rt.block_on(lock.is_locked()).unwrap());
}

#[tokio::test]
async fn lock_with_lock_unlocks_on_error() {
    let (mc, _clock) = store();
    let lock = Lock::new(mc, "l");
    let r: Result<()> = lock
        .with_lock(|| async { Err(Error::Invalid("boom".into())) })
        .await;
    assert!(matches!(r, Err(Error::Invalid(_))));
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(lock.with_lock(|| async { Ok(7) }).await.unwrap(), 7);
}

// ---------------------------------------------------------------- counters

#[tokio::test]
async fn counter_incr_decr_value() {
    let (mc, clock) = store();
    let c = Counter::new(mc.clone(), "c");
    assert_eq!(c.value().await.unwrap(), 0);
    assert_eq!(c.incr(10).await.unwrap(), 10);
    assert_eq!(c.decr(1).await.unwrap(), 9);
    assert_eq!(c.value().await.unwrap(), 9, "memcached pads \"9 \"; parsed");
    assert_eq!(c.decr(100).await.unwrap(), 0, "stops at 0");
    assert_eq!(Counter::new(mc.clone(), "d").decr(5).await.unwrap(), 0);
    c.reset().await.unwrap();
    assert_eq!(c.value().await.unwrap(), 0);

    let t = Counter::new(mc, "t").with_ttl(10);
    t.incr(1).await.unwrap();
    clock.advance(9);
    assert_eq!(
        t.incr(1).await.unwrap(),
        2,
        "increments do not extend the TTL"
    );
    clock.advance(1);
    assert_eq!(t.value().await.unwrap(), 0);
}

#[tokio::test]
async fn view_counter_seeds_once_from_source() {
    let (mc, _clock) = store();
    let v = ViewCounter::new(mc, "article");
    assert_eq!(v.cached().await.unwrap(), None);
    let calls = std::sync::atomic::AtomicU32::new(0);
    let load = || async {
        calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok::<_, std::io::Error>(500)
    };
    assert_eq!(v.hit(load).await.unwrap(), 501);
    assert_eq!(v.hit(load).await.unwrap(), 502);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(v.cached().await.unwrap(), Some(502));
}

#[tokio::test]
async fn view_counter_source_error_is_reported() {
    let (mc, _clock) = store();
    let v = ViewCounter::new(mc, "article");
    let r = v
        .hit(|| async { Err::<u64, _>(std::io::Error::other("db down")) })
        .await;
    assert!(matches!(r, Err(Error::Source(e)) if e.to_string() == "db down"));
}

#[tokio::test]
async fn visitor_counter_rolls_over_each_period() {
    let (mc, clock) = store();
    let v = VisitorCounter::new(mc, "v", 60, dyn_clock(&clock));
    for _ in 0..5 {
        v.increment().await.unwrap();
    }
    assert_eq!(v.value().await.unwrap(), 0);
    clock.advance(59);
    assert_eq!(v.value().await.unwrap(), 0, "still the same period");
    v.increment().await.unwrap();
    clock.advance(1);
    assert_eq!(v.value().await.unwrap(), 6, "period 2 shows period 1");
    for _ in 0..2 {
        v.increment().await.unwrap();
    }
    clock.advance(60);
    assert_eq!(v.value().await.unwrap(), 2, "period 3 shows period 2");
    clock.advance(60);
    assert_eq!(v.value().await.unwrap(), 0, "nobody in period 3");
    let shown = v.value_for_display(5.0, 1.0).await.unwrap();
    assert_eq!(shown, 0);
}

#[tokio::test]
async fn online_counter_sums_completed_periods() {
    let (mc, clock) = store();
    let c = OnlineCounter::new(mc, "o", 6, 60, dyn_clock(&clock));
    // minute k gets k+1 hits, for six minutes
    for k in 0..6u64 {
        for _ in 0..=k {
            c.hit().await.unwrap();
        }
        clock.advance(60);
        // shown: the last min(k+1, 5) completed minutes
        let shown: u64 = (k.saturating_sub(4)..=k).map(|j| j + 1).sum();
        assert_eq!(c.value().await.unwrap(), shown, "after minute {k}");
    }
    // the window slides off with no new hits
    for left in (0..5u64).rev() {
        clock.advance(60);
        let shown: u64 = (6 - left..6).map(|j| j + 1).sum();
        assert_eq!(c.value().await.unwrap(), shown);
    }
}

#[tokio::test]
async fn online_counter_key_outlives_its_last_read_by_the_margin() {
    let (mc, clock) = store();
    let c = OnlineCounter::new(mc.clone(), "o", 3, 60, dyn_clock(&clock));
    clock.advance(50); // late in the minute
    c.hit().await.unwrap();
    let key = c.key_for(c.period_at(T0 + 50));
    let margin = MAX_CLOCK_SKEW_SECS + 1;
    assert_eq!(
        ttl_of(&mc, &key).await,
        Some(Ttl::Secs((3 * 60 - 50 + margin) as u32))
    );
    clock.advance(3 * 60 - 50 - 1);
    assert_eq!(c.value().await.unwrap(), 1, "the last minute that reads it");
    clock.advance(1);
    assert_eq!(c.value().await.unwrap(), 0, "no longer in the window");
    assert_eq!(c.hit().await.unwrap(), 1, "a new period starts a new key");
    clock.advance(margin);
    assert!(
        mc.get(&key).await.unwrap().is_none(),
        "gone after the margin"
    );
}

#[tokio::test]
async fn online_users_list_expire_compact() {
    let (mc, clock) = store();
    let u = OnlineUsers::new(mc.clone(), "u", 300, 4, dyn_clock(&clock));
    for id in [1, 2, 3, 5, 9] {
        u.touch(id).await.unwrap();
    }
    u.touch(1).await.unwrap(); // already online: replace only
    let ids: Vec<u64> = u.list().await.unwrap().iter().map(|p| p.0).collect();
    assert_eq!(ids, vec![1, 2, 3, 5, 9]);
    let bucket1 = mc.get_value(&u.bucket_key(1)).await.unwrap().unwrap();
    assert_eq!(
        bucket1.as_ref(),
        b"1 5 9 ",
        "ids 1, 5, 9 share bucket 1, listed once"
    );
    clock.advance(200);
    u.touch(2).await.unwrap();
    u.leave(3).await.unwrap();
    assert!(!u.is_online(3).await.unwrap());
    clock.advance(100);
    let list = u.list().await.unwrap();
    assert_eq!(list, vec![(2, T0 + 200)]);
    assert_eq!(u.compact().await.unwrap(), 4);
    assert!(mc.get(&u.bucket_key(1)).await.unwrap().is_none());
    assert_eq!(u.count().await.unwrap(), 1);
    u.touch(5).await.unwrap(); // comes back: re-listed
    assert_eq!(u.count().await.unwrap(), 2);
}

// ---------------------------------------------------------------- event log

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Ev {
    pub at: u64,
    pub who: u32,
    pub seq: u32,
}

impl Event for Ev {
    fn when(&self) -> u64 {
        self.at
    }
}

pub fn ev(at: u64, who: u32, seq: u32) -> Ev {
    Ev { at, who, seq }
}

#[tokio::test]
async fn event_log_fetch_ranges() {
    let (mc, clock) = store();
    let log: EventLog<_, Ev> = EventLog::new(mc.clone(), "e", 10, 5, dyn_clock(&clock));
    assert_eq!(log.capacity_secs(), 40);
    clock.advance(45);
    for t in 0..=45 {
        log.put(&ev(T0 + t, 0, t as u32)).await.unwrap_or_else(|e| {
            // chunk 0 (T0..T0+9) is already recycled at T0+45? No: it expires at T0+50.
            panic!("put {t}: {e}")
        });
    }
    let all = log.fetch(None, None).await.unwrap();
    assert_eq!(all.len(), 46);
    assert!(all.windows(2).all(|w| w[0].at <= w[1].at));
    let mid = log.fetch(Some(T0 + 13), Some(T0 + 27)).await.unwrap();
    assert_eq!(
        mid.iter().map(|e| e.at - T0).collect::<Vec<_>>(),
        (13..=27).collect::<Vec<_>>()
    );
    let one = log.fetch(Some(T0 + 44), Some(T0 + 44)).await.unwrap();
    assert_eq!(one, vec![ev(T0 + 44, 0, 44)]);
    assert!(
        log.fetch(Some(T0 + 30), Some(T0 + 20))
            .await
            .unwrap()
            .is_empty()
    );
    // chunk 0 expires exactly when its slot is reused (T0 + 50)
    clock.advance(4);
    assert_eq!(log.fetch(None, None).await.unwrap().len(), 46);
    clock.advance(1);
    let left = log.fetch(None, None).await.unwrap();
    assert_eq!(left.first().unwrap().at, T0 + 10);
    assert_eq!(left.len(), 36);
}

#[tokio::test]
async fn event_log_refuses_too_old_and_future_chunks() {
    let (mc, clock) = store();
    let log: EventLog<_, Ev> = EventLog::new(mc, "e", 10, 5, dyn_clock(&clock));
    clock.advance(100);
    // now = T0 + 100: the ring holds chunks T0+60 ..= T0+100 (slot of T0+50 is reused)
    assert!(matches!(
        log.put(&ev(T0 + 59, 0, 0)).await,
        Err(Error::Invalid(_))
    ));
    log.put(&ev(T0 + 60, 0, 0)).await.unwrap(); // oldest chunk still in the ring
    log.put(&ev(T0 + 109, 0, 0)).await.unwrap(); // current chunk, slightly ahead
    assert!(matches!(
        log.put(&ev(T0 + 110, 0, 0)).await,
        Err(Error::Invalid(_))
    ));
    let got = log.fetch(None, None).await.unwrap();
    assert_eq!(
        got.len(),
        2,
        "an event a few seconds ahead in this chunk is returned"
    );
}

#[tokio::test]
async fn event_log_poller_returns_each_event_once() {
    let (mc, clock) = store();
    let log: EventLog<_, Ev> = EventLog::new(mc, "e", 10, 6, dyn_clock(&clock));
    let mut p = log.poller();
    assert!(p.poll().await.unwrap().is_empty());
    log.put(&ev(T0, 1, 0)).await.unwrap();
    log.put(&ev(T0, 1, 0)).await.unwrap(); // an identical event twice: both delivered
    assert_eq!(p.poll().await.unwrap().len(), 2);
    assert!(p.poll().await.unwrap().is_empty());
    log.put(&ev(T0, 1, 0)).await.unwrap(); // a third identical one in the same second
    log.put(&ev(T0, 2, 1)).await.unwrap();
    assert_eq!(p.poll().await.unwrap(), vec![ev(T0, 1, 0), ev(T0, 2, 1)]);
    clock.advance(15);
    log.put(&ev(T0 + 15, 3, 2)).await.unwrap();
    assert_eq!(p.poll().await.unwrap(), vec![ev(T0 + 15, 3, 2)]);
    assert_eq!(p.last_seen(), Some(T0 + 15));
    assert!(p.poll().await.unwrap().is_empty());
}

#[tokio::test]
async fn event_log_poller_with_lag_catches_late_events() {
    let (mc, clock) = store();
    let log: EventLog<_, Ev> = EventLog::new(mc, "e", 10, 6, dyn_clock(&clock));
    let mut strict = log.poller();
    let mut lagged = log.poller_with_lag(3);
    clock.advance(5);
    log.put(&ev(T0 + 5, 1, 0)).await.unwrap();
    assert_eq!(strict.poll().await.unwrap().len(), 1);
    assert_eq!(lagged.poll().await.unwrap().len(), 1);
    // A producer stamped at T0+3 appends only now, after T0+5 was polled.
    log.put(&ev(T0 + 3, 2, 0)).await.unwrap();
    assert!(
        strict.poll().await.unwrap().is_empty(),
        "lag 0 misses late events"
    );
    assert_eq!(lagged.poll().await.unwrap(), vec![ev(T0 + 3, 2, 0)]);
    assert!(
        lagged.poll().await.unwrap().is_empty(),
        "and returns it once"
    );
    log.put(&ev(T0 + 1, 3, 0)).await.unwrap(); // later than the lag: missed by design
    assert!(lagged.poll().await.unwrap().is_empty());
}

// ---------------------------------------------------------------- arrays

#[tokio::test]
async fn array_change_and_update() {
    let (mc, _clock) = store();
    let a: Array<_, u32> = Array::new(mc.clone(), "a");
    assert!(a.fetch().await.unwrap().is_empty());
    a.change(&[1, 2, 3], &[]).await.unwrap();
    a.change(&[4], &[2]).await.unwrap();
    assert_eq!(a.fetch().await.unwrap(), vec![1, 3, 4]);
    a.update(|v| v.sort_by(|x, y| y.cmp(x))).await.unwrap();
    assert_eq!(a.fetch().await.unwrap(), vec![4, 3, 1]);
    let locked: Array<_, u32> = Array::new(mc, "a").with_lock(LockOptions::ttl_secs(5));
    locked.change(&[9], &[4]).await.unwrap();
    assert_eq!(a.fetch().await.unwrap(), vec![3, 1, 9]);
}

#[test]
fn append_array_fold() {
    let ops = b"+1\n+3\n+4\n-3\n+5\n";
    let folded: Vec<Vec<u8>> = fold(ops).unwrap();
    assert_eq!(folded, vec![b"1".to_vec(), b"4".to_vec(), b"5".to_vec()]);
    assert_eq!(fold(b"+1\n+1\n-1\n+1\n").unwrap(), vec![b"1".to_vec()]);
    assert!(fold(b"*1\n").is_err());
}

#[tokio::test]
async fn append_array_compacts_when_large() {
    let (mc, _clock) = store();
    let a: AppendArray<_, u32> = AppendArray::new(mc.clone(), "a").compact_above(200);
    for i in 0..40 {
        a.add(&i).await.unwrap();
        if i % 2 == 1 {
            a.remove(&i).await.unwrap();
        }
    }
    let raw_before = mc.get_value(&a.keys()[0]).await.unwrap().unwrap().len();
    assert!(raw_before > 200);
    let evens: Vec<u32> = (0..40).filter(|i| i % 2 == 0).collect();
    assert_eq!(
        a.fetch().await.unwrap(),
        evens,
        "fold, and compact on the way"
    );
    let raw_after = mc.get_value(&a.keys()[0]).await.unwrap().unwrap();
    assert!(raw_after.len() < raw_before);
    assert!(!raw_after.contains(&b'-'));
    assert_eq!(a.fetch().await.unwrap(), evens);
    assert_eq!(a.compact().await.unwrap(), 0, "nothing left to save");
}

#[tokio::test]
async fn append_array_sharded() {
    let (mc, _clock) = store();
    let a: AppendArray<_, String> = AppendArray::sharded(mc.clone(), "s", 4);
    let words: Vec<String> = (0..50).map(|i| format!("w{i}")).collect();
    for w in &words {
        a.add(w).await.unwrap();
    }
    a.remove(&"w7".to_string()).await.unwrap();
    let mut got = a.fetch().await.unwrap();
    got.sort();
    let mut want: Vec<String> = words.into_iter().filter(|w| w != "w7").collect();
    want.sort();
    assert_eq!(got, want);
    let mut used = 0;
    for k in a.keys() {
        used += usize::from(mc.get(k).await.unwrap().is_some());
    }
    assert!(used > 1, "spread over several keys");
}

#[tokio::test]
async fn append_array_remove_on_missing_key_is_noop() {
    let (mc, _clock) = store();
    let a: AppendArray<_, u32> = AppendArray::new(mc.clone(), "a");
    a.remove(&1).await.unwrap();
    assert!(mc.get(&a.keys()[0]).await.unwrap().is_none());
}

// ---------------------------------------------------------------- table

#[tokio::test]
async fn set_and_hash() {
    let (mc, _clock) = store();
    let s = Set::new(mc.clone(), "s");
    s.add("a").await.unwrap();
    s.add("b").await.unwrap();
    s.add("a").await.unwrap();
    s.add("with space and ~ tilde").await.unwrap();
    assert_eq!(
        s.members().await.unwrap(),
        vec!["a", "b", "with space and ~ tilde"]
    );
    assert!(s.contains("with space and ~ tilde").await.unwrap());
    assert!(!s.contains("c").await.unwrap());
    assert!(s.remove("a").await.unwrap());
    assert!(!s.remove("a").await.unwrap());
    assert!(!s.contains("a").await.unwrap());
    assert_eq!(
        s.members().await.unwrap(),
        vec!["b", "with space and ~ tilde"]
    );

    let h: Hash<_, Vec<u8>> = Hash::new(mc, "h");
    h.insert("k1", &vec![1]).await.unwrap();
    h.insert("k2", &vec![2]).await.unwrap();
    h.insert("k1", &vec![3]).await.unwrap();
    assert_eq!(h.get("k1").await.unwrap(), Some(vec![3]));
    assert_eq!(
        h.entries().await.unwrap(),
        vec![("k1".to_string(), vec![3]), ("k2".to_string(), vec![2])]
    );
}

#[tokio::test]
async fn hash_collision_cannot_answer_wrongly() {
    let (mc, _clock) = store();
    let h: Hash<_, u32> = Hash::new(mc.clone(), "h");
    h.insert("x y", &1).await.unwrap();
    // Forge a collision: element key of "x y" now holds another element.
    let ekey = h.element_key("x y");
    mc.set(&ekey, br#"["other",2]"#, 0, memkit_types::Exptime::NEVER)
        .await
        .unwrap();
    assert_eq!(h.get("x y").await.unwrap(), None);
}

// ---------------------------------------------------------------- queue / stack

fn fast() -> QueueOptions {
    QueueOptions {
        hole_wait: Duration::from_millis(20),
        ..Default::default()
    }
}

#[tokio::test]
async fn queue_fifo() {
    let (mc, _clock) = store();
    let q: Queue<_, u32> = Queue::with_options(mc, "q", fast());
    assert_eq!(q.pop().await.unwrap(), None);
    assert!(q.is_empty().await.unwrap());
    for i in 0..10 {
        q.push(&i).await.unwrap();
    }
    assert_eq!(q.len().await.unwrap(), 10);
    for i in 0..10 {
        assert_eq!(q.pop().await.unwrap(), Some(i));
    }
    assert_eq!(q.pop().await.unwrap(), None);
}

#[tokio::test]
async fn queue_hole_is_tombstoned_and_producer_repushes() {
    let (mc, _clock) = store();
    let q: Queue<_, u32> = Queue::with_options(mc.clone(), "q", fast());
    q.push(&1).await.unwrap();
    // A producer reserved slot 2 and stalled before writing it.
    assert_eq!(mc.incr(b"queue:q:tail", 1).await.unwrap(), Some(2));
    q.push(&3).await.unwrap(); // slot 3
    assert_eq!(q.pop().await.unwrap(), Some(1));
    assert_eq!(
        q.pop().await.unwrap(),
        Some(3),
        "the hole is skipped after hole_wait"
    );
    // The stalled producer's write now fails: the slot is a tombstone.
    assert!(
        !mc.add(b"queue:q:2", b"I2", 0, memkit_types::Exptime::NEVER)
            .await
            .unwrap()
    );
    // ...so a real push moves on to a fresh slot.
    assert_eq!(q.push(&2).await.unwrap(), 4);
    assert_eq!(q.pop().await.unwrap(), Some(2));
}

#[tokio::test]
async fn stack_lifo() {
    let (mc, _clock) = store();
    let s: Stack<_, String> = Stack::with_options(mc, "s", fast());
    assert_eq!(s.pop().await.unwrap(), None);
    for w in ["a", "b", "c"] {
        s.push(&w.to_string()).await.unwrap();
    }
    assert_eq!(s.len().await.unwrap(), 3);
    assert_eq!(s.pop().await.unwrap().as_deref(), Some("c"));
    s.push(&"d".to_string()).await.unwrap();
    assert_eq!(s.pop().await.unwrap().as_deref(), Some("d"));
    assert_eq!(s.pop().await.unwrap().as_deref(), Some("b"));
    assert_eq!(s.pop().await.unwrap().as_deref(), Some("a"));
    assert_eq!(s.pop().await.unwrap(), None);
    assert!(s.is_empty().await.unwrap());
}
