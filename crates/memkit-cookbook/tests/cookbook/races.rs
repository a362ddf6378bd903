//! Races and losses the structures must survive, each scenario run against the embedded
//! store (on the system clock, each command yielding to the scheduler first, as a round trip
//! would), memkitd and real memcached. Counters and slots are deleted by
//! hand where the scenario needs a key evicted or expired, so nothing waits for a TTL.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use memkit_client::Client;
use memkit_cookbook::structures::incr_or_create;
use memkit_cookbook::*;
use memkit_engine::{Embedded, EngineConfig};
use memkit_types::{Exptime, Memcache};

use crate::servers::{Memcached, Memkitd};
use crate::support::Yielding;

/// A test per backend for `scenario(mc, backend_name)`.
macro_rules! on_every_backend {
    ($name:ident, $scenario:path) => {
        mod $name {
            use super::*;

            #[test]
            fn embedded() {
                let mc = Yielding(Embedded::new(EngineConfig::with_memory(64 << 20)));
                crate::support::mt_net_rt().block_on($scenario(mc, "embedded"));
            }

            #[test]
            fn memkitd() {
                let server = Memkitd::start();
                crate::support::mt_net_rt().block_on(async {
                    let mc = Arc::new(Client::connect(&server.addr).await.unwrap());
                    $scenario(mc, "memkitd").await;
                });
            }

            #[test]
            fn real_memcached() {
                let Some(server) = Memcached::start() else {
                    return;
                };
                crate::support::mt_net_rt().block_on(async {
                    let mc = Arc::new(Client::connect(&server.addr).await.unwrap());
                    $scenario(mc, "memcached").await;
                });
            }
        }
    };
}

async fn drain<M: Memcache>(q: &Queue<M, u32>) -> Vec<u32> {
    let mut out = Vec::new();
    while let Some(x) = q.pop().await.unwrap() {
        out.push(x);
    }
    out
}

/// The tail is lost while the head survives at 2, the consumed slots' tombstones are gone,
/// and one producer has already re-created the tail at 1. The next push reserves slot 2, at
/// the head: no consumer would ever claim it, so the push must not write there.
async fn queue_push_never_lands_at_or_below_the_head<M: Memcache + Clone>(mc: M, name: &str) {
    let q: Queue<_, u32> = Queue::new(mc.clone(), "race-push");
    for i in 1..=3 {
        q.push(&i).await.unwrap();
    }
    assert_eq!(q.pop().await.unwrap(), Some(1));
    assert_eq!(q.pop().await.unwrap(), Some(2));
    for key in ["tail", "1", "2"] {
        mc.delete(format!("queue:race-push:{key}").as_bytes())
            .await
            .unwrap();
    }
    let tail = b"queue:race-push:tail";
    assert_eq!(
        incr_or_create(&mc, tail, 1, Exptime::NEVER).await.unwrap(),
        1
    );
    q.push(&4).await.unwrap();
    assert_eq!(
        drain(&q).await,
        vec![3, 4],
        "{name}: an acknowledged push was lost"
    );
}

on_every_backend!(
    queue_push_at_the_head,
    queue_push_never_lands_at_or_below_the_head
);

/// The head is lost after 100 elements were consumed and their tombstones expired. With a
/// `hole_wait` of an hour, walking the 100 empty consumed slots would take 100 hours: the
/// recovery must restart below the waiting element instead, and close the empty slots just
/// under it to producers that reserved them and have not written yet.
async fn queue_head_recovery_skips_expired_tombstones<M: Memcache + Clone>(mc: M, name: &str) {
    let opts = QueueOptions {
        hole_wait: Duration::from_secs(3600),
        ..Default::default()
    };
    let q: Queue<_, u32> = Queue::with_options(mc.clone(), "race-head", opts);
    for i in 0..100 {
        q.push(&i).await.unwrap();
    }
    for i in 0..100 {
        assert_eq!(q.pop().await.unwrap(), Some(i));
    }
    mc.delete(b"queue:race-head:head").await.unwrap();
    for n in 1..=100 {
        mc.delete(format!("queue:race-head:{n}").as_bytes())
            .await
            .unwrap();
    }
    assert_eq!(q.push(&100).await.unwrap(), 101);
    let popped = tokio::time::timeout(Duration::from_secs(20), q.pop())
        .await
        .unwrap_or_else(|_| panic!("{name}: pop walked the consumed slots' holes"))
        .unwrap();
    assert_eq!(popped, Some(100), "{name}");
    assert_eq!(q.pop().await.unwrap(), None, "{name}");
    assert!(
        !mc.add(b"queue:race-head:100", b"I7", 0, Exptime::NEVER)
            .await
            .unwrap(),
        "{name}: a stalled producer could still write just below the recovered head"
    );
}

on_every_backend!(
    queue_head_recovery,
    queue_head_recovery_skips_expired_tombstones
);

/// Inserts and removes of the same elements interleave freely, as when their writers' lock
/// expired mid-write (a task deletes the lock key as fast as it can). Once they are done,
/// every element is listed exactly when its key is present: no listed ghost, no present
/// element missing from the list.
async fn table_insert_remove_after_lock_expiry<M: Memcache + Clone + Send + Sync + 'static>(
    mc: M,
    name: &str,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let breaker = {
        let (mc, stop) = (mc.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                mc.delete(b"lock:hash:race-set").await.unwrap();
                tokio::task::yield_now().await;
            }
        })
    };
    let opts = LockOptions::ttl_secs(5)
        .max_wait(Duration::from_secs(60))
        .backoff(Duration::from_micros(200), Duration::from_millis(2));
    let set = Arc::new(Set::with_lock_options(mc.clone(), "race-set", opts));
    for round in 0..20 {
        let mut tasks = Vec::new();
        for i in 0..40 {
            let k = format!("e{i}");
            let (a, b) = (set.clone(), set.clone());
            let k2 = k.clone();
            if (i + round) % 2 == 0 {
                tasks.push(tokio::spawn(async move { a.add(&k).await.map(|_| ()) }));
                tasks.push(tokio::spawn(async move { b.remove(&k2).await.map(|_| ()) }));
            } else {
                tasks.push(tokio::spawn(async move { b.remove(&k2).await.map(|_| ()) }));
                tasks.push(tokio::spawn(async move { a.add(&k).await.map(|_| ()) }));
            }
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
    }
    stop.store(true, Ordering::SeqCst);
    breaker.await.unwrap();
    let members = set.members().await.unwrap();
    let mut disagree = Vec::new();
    for i in 0..40 {
        let k = format!("e{i}");
        let listed = members.iter().filter(|m| **m == k).count();
        let present = set.contains(&k).await.unwrap();
        if listed != usize::from(present) {
            disagree.push((k, listed, present));
        }
    }
    assert!(
        disagree.is_empty(),
        "{name}: (element, times listed, present): {disagree:?}"
    );
}

on_every_backend!(
    table_after_lock_expiry,
    table_insert_remove_after_lock_expiry
);

/// Users come online (some leave) on eight tasks while another compacts the buckets in a
/// loop: no user who is online is ever dropped from the list, and the ones who left are gone
/// once a last compaction ran.
async fn online_users_touch_races_compact<M: Memcache + Clone + Send + Sync + 'static>(
    mc: M,
    name: &str,
) {
    let users = Arc::new(OnlineUsers::new(
        mc,
        "race-users",
        300,
        4,
        Arc::new(memkit_types::SystemClock),
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let compactor = {
        let (users, stop) = (users.clone(), stop.clone());
        tokio::spawn(async move {
            let mut runs = 0u32;
            while !stop.load(Ordering::SeqCst) {
                users.compact().await.unwrap();
                runs += 1;
            }
            runs
        })
    };
    let mut tasks = Vec::new();
    for t in 0..8u64 {
        let users = users.clone();
        tasks.push(tokio::spawn(async move {
            for id in (t * 50)..(t * 50 + 50) {
                users.touch(id).await.unwrap();
                if id % 5 == 0 {
                    users.leave(id).await.unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    let runs = compactor.await.unwrap();
    users.compact().await.unwrap();
    let listed: Vec<u64> = users.list().await.unwrap().iter().map(|u| u.0).collect();
    let want: Vec<u64> = (0..400).filter(|id| id % 5 != 0).collect();
    assert_eq!(listed, want, "{name} ({runs} concurrent compactions)");
}

on_every_backend!(online_users_compact, online_users_touch_races_compact);

/// 200 concurrent first views of a page whose counter is missing: the source of truth is
/// asked, the counter created once, and every view counted once.
async fn view_counter_concurrent_hits<M: Memcache + Clone + Send + Sync + 'static>(
    mc: M,
    name: &str,
) {
    let views = Arc::new(ViewCounter::new(mc, "race-views"));
    let mut tasks = Vec::new();
    for _ in 0..200 {
        let views = views.clone();
        tasks.push(tokio::spawn(async move {
            views
                .hit(|| async { Ok::<_, std::io::Error>(1_000) })
                .await
                .unwrap()
        }));
    }
    let mut seen = Vec::new();
    for t in tasks {
        seen.push(t.await.unwrap());
    }
    seen.sort_unstable();
    assert_eq!(seen, (1_001..=1_200).collect::<Vec<_>>(), "{name}");
}

on_every_backend!(view_counter_concurrency, view_counter_concurrent_hits);

/// Four producers push 100 elements each while four consumers pop: every element comes out
/// exactly once.
async fn stack_concurrent_push_pop<M: Memcache + Clone + Send + Sync + 'static>(mc: M, name: &str) {
    let opts = QueueOptions {
        hole_wait: Duration::from_millis(50),
        ..Default::default()
    };
    let stack: Arc<Stack<M, u32>> = Arc::new(Stack::with_options(mc, "race-stack", opts));
    let mut producers = Vec::new();
    for p in 0..4u32 {
        let stack = stack.clone();
        producers.push(tokio::spawn(async move {
            for i in 0..100 {
                stack.push(&(p * 100 + i)).await.unwrap();
            }
        }));
    }
    let popped: Arc<std::sync::Mutex<Vec<u32>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let mut consumers = Vec::new();
    for _ in 0..4 {
        let (stack, popped, done) = (stack.clone(), popped.clone(), done.clone());
        consumers.push(tokio::spawn(async move {
            loop {
                match stack.pop().await.unwrap() {
                    Some(x) => popped.lock().unwrap().push(x),
                    None if done.load(Ordering::SeqCst) => return,
                    None => tokio::task::yield_now().await,
                }
            }
        }));
    }
    for p in producers {
        p.await.unwrap();
    }
    done.store(true, Ordering::SeqCst);
    for c in consumers {
        c.await.unwrap();
    }
    while let Some(x) = stack.pop().await.unwrap() {
        popped.lock().unwrap().push(x);
    }
    let mut got = popped.lock().unwrap().clone();
    got.sort_unstable();
    assert_eq!(got, (0..400).collect::<Vec<_>>(), "{name}");
}

on_every_backend!(stack_concurrency, stack_concurrent_push_pop);

/// Three locks, each taken by A with a 1 s TTL; A stalls past it while B waits in `lock()`
/// and takes it (with a 30 s TTL); A's late unlock must not free B's lock (C still cannot
/// get in).
async fn lock_late_unlock_under_concurrency<M: Memcache + Clone + Send + Sync + 'static>(
    mc: M,
    name: &str,
) {
    let mut rounds = Vec::new();
    for i in 0..3 {
        let mc = mc.clone();
        rounds.push(tokio::spawn(async move {
            let key = format!("race-lock-{i}");
            let short = LockOptions::ttl_secs(1);
            let long = LockOptions::ttl_secs(30)
                .max_wait(Duration::from_secs(10))
                .backoff(Duration::from_millis(5), Duration::from_millis(20));
            let lock = Lock::with_options(mc.clone(), &key, short);
            let a = lock.try_lock().await.unwrap().expect("A first");
            let b = tokio::spawn({
                let lock = Lock::with_options(mc, &key, long);
                async move { lock.lock().await.unwrap() }
            });
            tokio::time::sleep(Duration::from_millis(2_200)).await; // A stalls past its TTL
            let b = b.await.unwrap();
            let a_freed = a.unlock().await.unwrap();
            let c = lock.try_lock().await.unwrap();
            (a_freed, b.is_held().await.unwrap(), c.is_none())
        }));
    }
    for r in rounds {
        let (a_freed, b_held, c_out) = r.await.unwrap();
        assert!(!a_freed, "{name}: A's late unlock freed a lock");
        assert!(
            b_held && c_out,
            "{name}: B lost its lock to A's late unlock"
        );
    }
}

on_every_backend!(lock_late_unlock, lock_late_unlock_under_concurrency);
