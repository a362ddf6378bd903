//! Each policy on the embedded store, time on tokio's paused clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use memkit_types::{DeleteOptions, GetOptions, Memcache};

use super::{TokioClock, embedded};
use crate::caching::{
    Cache, FileTrace, MemoryTrace, OnTimeout, Policy, Protection, Reason, Source, TraceSink,
};
use crate::testing::{At, Op as TestOp, Scripted};

const KEY: &str = "report:1";

fn cache_with(trace: Arc<MemoryTrace>) -> (Cache<memkit_engine::Embedded>, Arc<TokioClock>) {
    let clock = TokioClock::new();
    let cache = Cache::builder(embedded(clock.clone()))
        .clock(clock.clone())
        .trace(trace)
        .seed(7)
        .build();
    (cache, clock)
}

async fn ok(v: u32) -> Result<u32, std::io::Error> {
    Ok(v)
}

#[tokio::test(start_paused = true)]
async fn cache_aside_hits_and_traces_mlwuh() {
    let trace = MemoryTrace::new();
    let (cache, _) = cache_with(trace.clone());
    let p = Policy::ttl(Duration::from_secs(10)).no_jitter();
    let f = cache.fetch(KEY, &p, |_| ok(1)).await.unwrap();
    assert_eq!(f.source, Source::Computed);
    for _ in 0..3 {
        let f = cache.fetch(KEY, &p, |_| ok(2)).await.unwrap();
        assert_eq!((f.value, f.source), (1, Source::Hit));
    }
    assert_eq!(trace.letters(KEY), "MLWUHHH");
    let s = cache.stats();
    assert_eq!((s.hits, s.misses, s.loads), (3, 1, 1));
}

#[tokio::test(start_paused = true)]
async fn soft_expiry_keeps_the_item_and_rebuilds_once() {
    let trace = MemoryTrace::new();
    let (cache, _) = cache_with(trace.clone());
    let p = Policy::ttl(Duration::from_secs(10)).no_jitter();
    cache.fetch(KEY, &p, |_| ok(1)).await.unwrap();
    tokio::time::advance(Duration::from_secs(11)).await;
    // Soft-expired but still in memcached (grace): the stale value is readable.
    let raw = cache.store().get(KEY.as_bytes()).await.unwrap();
    assert!(raw.is_some(), "the item outlives its soft expiry");
    let f = cache
        .fetch(KEY, &p, |ctx| async move {
            assert_eq!(ctx.reason, Reason::Expired);
            Ok::<_, std::io::Error>(2u32)
        })
        .await
        .unwrap();
    assert_eq!((f.value, f.source), (2, Source::Computed));
    // After soft + grace (60 s default), memcached drops it: a plain miss.
    tokio::time::advance(Duration::from_secs(75)).await;
    assert!(cache.store().get(KEY.as_bytes()).await.unwrap().is_none());
}

#[tokio::test(start_paused = true)]
async fn busy_lock_serves_stale_or_waits() {
    let trace = MemoryTrace::new();
    let (cache, _) = cache_with(trace.clone());
    let stale = Policy::ttl(Duration::from_secs(10))
        .no_jitter()
        .serve_stale();
    cache.fetch(KEY, &stale, |_| ok(1)).await.unwrap();
    tokio::time::advance(Duration::from_secs(11)).await;
    // Someone holds the rebuild lock.
    let lock = crate::Lock::new(cache.store().clone(), KEY);
    let held = lock.try_lock().await.unwrap().expect("free");
    let f = cache.fetch(KEY, &stale, |_| ok(9)).await.unwrap();
    assert_eq!((f.value, f.source), (1, Source::Stale));
    // Waiting runs out -> the stale value, never the loader.
    let wait = Policy::ttl(Duration::from_secs(10))
        .no_jitter()
        .max_wait(Duration::from_millis(300));
    let t0 = tokio::time::Instant::now();
    let f = cache.fetch(KEY, &wait, |_| ok(9)).await.unwrap();
    assert_eq!((f.value, f.source), (1, Source::Stale));
    assert!(t0.elapsed() >= Duration::from_millis(300));
    assert!(
        t0.elapsed() <= Duration::from_millis(400),
        "bounded: {:?}",
        t0.elapsed()
    );
    held.unlock().await.unwrap();
    assert_eq!(cache.stats().loads, 1);
    let letters = trace.letters(KEY);
    assert!(letters.starts_with("MLWU") && letters.contains("MLS") && letters.ends_with('S'));
}

/// A lock whose holder died: by default the waiter keeps contending until the lock expires
/// and wins it; `Fail` gives up at `max_wait`; `Compute` loads at `max_wait` beside the lock.
#[tokio::test(start_paused = true)]
async fn waiting_without_stale_contends_fails_or_computes() {
    let (cache, _) = cache_with(MemoryTrace::new());
    let dead =
        crate::Lock::with_options(cache.store().clone(), KEY, crate::LockOptions::ttl_secs(2));
    let p = Policy::ttl(Duration::from_secs(10)).max_wait(Duration::from_millis(50));
    let strict = p.clone().on_timeout(OnTimeout::Fail);
    dead.try_lock().await.unwrap().expect("free").forget();
    let e = cache.fetch(KEY, &strict, |_| ok(4)).await.unwrap_err();
    assert!(matches!(e, crate::Error::LockTimeout(_)), "{e}");
    let f = cache.fetch(KEY, &p, |_| ok(3)).await.unwrap();
    assert_eq!(
        (f.value, f.source),
        (3, Source::Computed),
        "won the expired lock"
    );
    cache.remove(KEY).await.unwrap();
    let held = dead
        .try_lock()
        .await
        .unwrap()
        .expect("released by the winner");
    let eager = p.clone().on_timeout(OnTimeout::Compute);
    let f = cache.fetch(KEY, &eager, |_| ok(5)).await.unwrap();
    assert_eq!(
        (f.value, f.source),
        (5, Source::Computed),
        "beside the lock"
    );
    held.forget();
}

#[tokio::test(start_paused = true)]
async fn loader_errors_release_the_lock_and_are_traced() {
    let trace = MemoryTrace::new();
    let (cache, _) = cache_with(trace.clone());
    let p = Policy::ttl(Duration::from_secs(10));
    let e = cache
        .fetch(KEY, &p, |_| async {
            Err::<u32, _>(std::io::Error::other("db down"))
        })
        .await
        .unwrap_err();
    assert!(matches!(e, crate::Error::Source(_)));
    assert_eq!(trace.letters(KEY), "MLEU");
    // The lock is free: the next caller rebuilds at once.
    let f = cache.fetch(KEY, &p, |_| ok(5)).await.unwrap();
    assert_eq!((f.value, f.source), (5, Source::Computed));
    assert_eq!(cache.stats().load_errors, 1);
}

#[tokio::test(start_paused = true)]
async fn ttl_jitter_stays_in_range() {
    let (cache, clock) = cache_with(MemoryTrace::new());
    let p = Policy::ttl(Duration::from_secs(100)).protection(Protection::None);
    let mut seen = Vec::new();
    for i in 0..200 {
        let key = format!("j:{i}");
        cache.fetch(&key, &p, |_| ok(1)).await.unwrap();
        let it = cache
            .store()
            .get_with(
                key.as_bytes(),
                &GetOptions {
                    meta: true,
                    ..Default::default()
                },
            )
            .await
            .unwrap()
            .unwrap();
        let rec: serde_json::Value = serde_json::from_slice(&it.value).unwrap();
        let ttl_ms = rec["u"].as_u64().unwrap() - memkit_types::Clock::now_millis(&*clock);
        assert!((95_000..=105_000).contains(&ttl_ms), "{ttl_ms}");
        seen.push(ttl_ms);
    }
    seen.sort();
    assert!(
        seen[190] - seen[10] > 5_000,
        "spread out: {:?}",
        (seen[0], seen[199])
    );
}

#[tokio::test(start_paused = true)]
async fn xfetch_recomputes_early_with_the_papers_probability() {
    // delta = 1 s, beta = 1: at 1 s before expiry the chance is e^-1 per read.
    let (cache, _) = cache_with(MemoryTrace::new());
    let p = Policy::ttl(Duration::from_secs(60))
        .no_jitter()
        .protection(Protection::None)
        .xfetch(1.0);
    cache
        .fetch(KEY, &p, |_| async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Ok::<_, std::io::Error>(0u32)
        })
        .await
        .unwrap();
    tokio::time::advance(Duration::from_secs(59)).await;
    let n = 2000;
    let mut early = 0;
    for _ in 0..n {
        // Read without storing: a loader that fails keeps the old record for the next read.
        let f = cache
            .fetch(KEY, &p, |ctx| async move {
                assert_eq!(ctx.reason, Reason::Early);
                Err::<u32, _>(std::io::Error::other("probe"))
            })
            .await;
        if f.is_err() {
            early += 1;
        }
    }
    let rate = early as f64 / n as f64;
    assert!((rate - (-1.0f64).exp()).abs() < 0.05, "rate {rate}");
    // Far from expiry, practically never.
    let (cache, _) = cache_with(MemoryTrace::new());
    cache.put(KEY, &p, &0u32).await.unwrap();
    let f = cache.fetch(KEY, &p, |_| ok(1)).await.unwrap();
    assert_eq!(f.source, Source::Hit, "delta 0 never recomputes early");
}

#[tokio::test(start_paused = true)]
async fn lease_hands_one_win_serves_stale_to_the_others() {
    let trace = MemoryTrace::new();
    let (cache, _) = cache_with(trace.clone());
    let p = Policy::ttl(Duration::from_secs(30))
        .no_jitter()
        .protection(Protection::Lease)
        .serve_stale();
    let f = cache.fetch(KEY, &p, |_| ok(1)).await.unwrap();
    assert_eq!(f.source, Source::Computed);
    assert_eq!(
        cache.fetch(KEY, &p, |_| ok(2)).await.unwrap().source,
        Source::Hit
    );
    // Invalidate server-side (md I): the next reader wins, the others are served stale.
    let o = DeleteOptions {
        invalidate: true,
        ..Default::default()
    };
    cache.store().delete_with(KEY.as_bytes(), &o).await.unwrap();
    let mc = cache.store().clone();
    let first = mc
        .get_with(
            KEY.as_bytes(),
            &GetOptions {
                vivify: Some(memkit_types::Exptime(10)),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert!(first.win && first.stale, "someone else won the recompute");
    let f = cache.fetch(KEY, &p, |_| ok(3)).await.unwrap();
    assert_eq!((f.value, f.source), (1, Source::Stale));
    assert_eq!(cache.stats().loads, 1);
    // Recache window: below R seconds left, exactly one reader recomputes early while
    // the value is still valid.
    let k2 = "report:2";
    cache.fetch(k2, &p, |_| ok(4)).await.unwrap();
    tokio::time::advance(Duration::from_secs(28)).await; // 2 s left < R = 3 s
    let a = cache.fetch(k2, &p, |_| ok(5)).await.unwrap();
    let b = cache.fetch(k2, &p, |_| ok(6)).await.unwrap();
    assert_eq!((a.value, a.source), (5, Source::Computed));
    assert_eq!((b.value, b.source), (5, Source::Hit));
    assert!(trace.letters(KEY).contains("MLWU"));
}

/// The first reader in the recache window wins an early recompute, and its loader fails.
/// The value is still fresh: it stays fresh for the others (a value marked stale would be
/// served as stale and send the next reader to the source).
#[tokio::test(start_paused = true)]
async fn a_failed_early_lease_recompute_leaves_the_value_fresh() {
    let (cache, _) = cache_with(MemoryTrace::new());
    let p = Policy::ttl(Duration::from_secs(30))
        .no_jitter()
        .protection(Protection::Lease);
    cache.fetch(KEY, &p, |_| ok(1)).await.unwrap();
    tokio::time::advance(Duration::from_secs(28)).await; // 2 s left < R = 3 s
    let e = cache
        .fetch(KEY, &p, |ctx| async move {
            assert_eq!(ctx.reason, Reason::Early);
            Err::<u32, _>(std::io::Error::other("db down"))
        })
        .await
        .unwrap_err();
    assert!(matches!(e, crate::Error::Source(_)));
    let raw = cache.store().get(KEY.as_bytes()).await.unwrap().unwrap();
    assert!(!raw.stale, "a fresh value was marked stale");
    let f = cache.fetch(KEY, &p, |_| ok(2)).await.unwrap();
    assert_eq!((f.value, f.source), (1, Source::Hit));
    assert_eq!(cache.stats().loads, 2);
}

/// The lease winner's loader has read the source; before its value is stored, the source
/// changes and the key is invalidated (`md I`, or a plain delete). The winner's store must
/// not put the value read before the change back over the invalidation: the next reader
/// recomputes. The winner traces no `W`: nothing was written.
pub(super) async fn invalidation_during_a_lease_load<M: Memcache + Clone + 'static>(
    name: &str,
    store: M,
    clock: Arc<dyn memkit_types::Clock>,
) {
    let store = Scripted::new(store);
    for mark_stale in [true, false] {
        let key = format!("lease:invalidated:{mark_stale}");
        let trace = MemoryTrace::new();
        let winner = store.actor("winner");
        let build = |mc| {
            Cache::builder(mc)
                .clock(clock.clone())
                .trace(trace.clone())
                .build()
        };
        let (cache, other) = (build(winner.clone()), build(store.clone()));
        let p = Policy::ttl(Duration::from_secs(30))
            .no_jitter()
            .protection(Protection::Lease);
        let write = winner.pause(At::before(TestOp::Store, 1));
        let load = tokio::spawn({
            let (p, key) = (p.clone(), key.clone());
            async move { cache.fetch(&key, &p, |_| ok(1)).await }
        });
        write.reached().await; // the loader returned the rows from before the change
        let o = DeleteOptions {
            invalidate: mark_stale,
            ..Default::default()
        };
        store.delete_with(key.as_bytes(), &o).await.unwrap();
        write.release();
        let f = load.await.unwrap().unwrap();
        assert_eq!((f.value, f.source), (1, Source::Computed), "{name}");
        let f = other.fetch(&key, &p, |_| ok(2)).await.unwrap();
        assert_eq!(
            (f.value, f.source),
            (2, Source::Computed),
            "{name}, md I: {mark_stale}: the value read before the invalidation was stored over it"
        );
        assert_eq!(trace.letters(&key), "MLUMLWU", "{name}, md I: {mark_stale}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_invalidation_during_a_lease_load_is_not_overwritten() {
    let clock = TokioClock::new();
    invalidation_during_a_lease_load("embedded", embedded(clock.clone()), clock).await;
}

/// `W` means the new value was stored: a store that fails (a value over the item size
/// limit) traces none.
#[tokio::test(start_paused = true)]
async fn a_failed_store_traces_no_write() {
    let trace = MemoryTrace::new();
    let (cache, _) = cache_with(trace.clone());
    let p = Policy::ttl(Duration::from_secs(10)).no_jitter();
    let big = "x".repeat(2 << 20);
    let f = cache
        .fetch(KEY, &p, |_| async move { Ok::<_, std::io::Error>(big) })
        .await
        .unwrap();
    assert_eq!(f.source, Source::Computed);
    assert!(cache.store().get(KEY.as_bytes()).await.unwrap().is_none());
    assert_eq!(trace.letters(KEY), "MLU");
}

#[tokio::test(start_paused = true)]
async fn lease_waiters_get_the_winners_value() {
    let (cache, _) = cache_with(MemoryTrace::new());
    let p = Policy::ttl(Duration::from_secs(30))
        .protection(Protection::Lease)
        .max_wait(Duration::from_secs(2));
    let loads = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (cache, p, loads) = (cache.clone(), p.clone(), loads.clone());
        tasks.push(tokio::spawn(async move {
            cache
                .fetch(KEY, &p, move |_| async move {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    loads.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, std::io::Error>(7u32)
                })
                .await
                .unwrap()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().value, 7);
    }
    assert_eq!(loads.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn background_refresh_keeps_registered_keys_fresh() {
    let (cache, _) = cache_with(MemoryTrace::new());
    let p = Policy::ttl(Duration::from_secs(10)).no_jitter();
    let loads = Arc::new(AtomicU32::new(0));
    let l = loads.clone();
    cache.register(KEY, p.clone(), move |ctx| {
        let l = l.clone();
        async move {
            assert_eq!(ctx.reason, Reason::Refresh);
            Ok::<_, std::io::Error>(l.fetch_add(1, Ordering::SeqCst) + 1)
        }
    });
    assert_eq!(cache.registered(), vec![KEY.to_owned()]);
    let r = cache.refresh_registered(Duration::from_secs(2)).await;
    assert_eq!(r.refreshed, 1, "missing -> built");
    let r = cache.refresh_registered(Duration::from_secs(2)).await;
    assert_eq!((r.refreshed, r.skipped), (0, 1), "fresh -> skipped");
    let handle = cache.spawn_refresher(Duration::from_secs(1), Duration::from_secs(2));
    // 60 s of traffic: every read is a hit, the refresher rebuilds ahead of expiry.
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let f = cache.fetch(KEY, &p, |_| ok(0)).await.unwrap();
        assert_eq!(f.source, Source::Hit);
    }
    handle.abort();
    let n = loads.load(Ordering::SeqCst);
    assert!((6..=9).contains(&n), "about one rebuild per 8-10 s: {n}");
    assert!(cache.unregister(KEY));
}

#[tokio::test(start_paused = true)]
async fn warm_up_loads_only_what_is_missing() {
    let (cache, _) = cache_with(MemoryTrace::new());
    let p = Policy::ttl(Duration::from_secs(60));
    cache.put("w:3", &p, &"old".to_string()).await.unwrap();
    let keys: Vec<String> = (0..10).map(|i| format!("w:{i}")).collect();
    let r = cache
        .warm_up(keys.clone(), &p, 4, |key, _ctx| async move {
            if key == "w:7" {
                Err(std::io::Error::other("row gone"))
            } else {
                Ok(format!("value of {key}"))
            }
        })
        .await
        .unwrap();
    assert_eq!((r.loaded, r.present, r.failed.len()), (8, 1, 1));
    assert_eq!(r.failed[0].0, "w:7");
    let v: Option<String> = cache.get("w:5", &p).await.unwrap();
    assert_eq!(v.as_deref(), Some("value of w:5"));
}

#[tokio::test(start_paused = true)]
async fn replica_lag_routes_rebuilds_to_the_master() {
    let (cache, _) = cache_with(MemoryTrace::new());
    let p = Policy::ttl(Duration::from_secs(60))
        .tags(["blog:35"])
        .replica_lag(Duration::from_secs(2));
    let master =
        |ctx: crate::caching::LoadContext| async move { Ok::<_, std::io::Error>(ctx.read_master) };
    // A tag that does not exist yet cannot tell whether it was lost after an invalidation:
    // the master. Once created on first use it is not a change: the replica is fine.
    assert!(cache.get_or_compute("posts", &p, master).await.unwrap());
    cache.remove("posts").await.unwrap();
    assert!(!cache.get_or_compute("posts", &p, master).await.unwrap());
    cache.invalidate_tag("blog:35").await.unwrap();
    assert!(
        cache.get_or_compute("posts", &p, master).await.unwrap(),
        "just changed"
    );
    assert!(
        cache
            .tags()
            .must_read_master(&p.tags, Duration::from_secs(2))
            .await
            .unwrap()
    );
    tokio::time::advance(Duration::from_secs(3)).await;
    cache.invalidate_tag("other").await.unwrap();
    cache.remove("posts").await.unwrap();
    assert!(
        !cache.get_or_compute("posts", &p, master).await.unwrap(),
        "lag passed"
    );
}

#[tokio::test(start_paused = true)]
async fn file_trace_is_tail_friendly() {
    let dir = std::env::temp_dir().join(format!("memkit-cache-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sink = Arc::new(FileTrace::keys(&dir, &[KEY]));
    let clock = TokioClock::new();
    let cache = Cache::builder(embedded(clock.clone()))
        .clock(clock)
        .trace(sink.clone() as Arc<dyn TraceSink>)
        .build();
    let p = Policy::ttl(Duration::from_secs(5));
    for _ in 0..4 {
        cache.fetch(KEY, &p, |_| ok(1)).await.unwrap();
        cache.fetch("untraced", &p, |_| ok(1)).await.unwrap();
    }
    let text = std::fs::read_to_string(sink.path_for(KEY).unwrap()).unwrap();
    assert_eq!(text, "MLWUHHH");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The tag was invalidated, then its key was lost (the server holding it restarted) before
/// anyone rebuilt: the next rebuild cannot know how recent the change is and must read the
/// master, although the tag it finds once re-created looks like one first used now.
#[tokio::test(start_paused = true)]
async fn a_lost_tag_sends_the_rebuild_to_the_master() {
    let (cache, _) = cache_with(MemoryTrace::new());
    super::net::master_after_tag_loss("embedded", &cache).await;
}

/// Two refreshers find the value due; the second reaches the rebuild lock only after the
/// first rebuilt and released it. It must see the fresh value and not rebuild again.
pub(super) async fn refresh_rechecks<M: memkit_types::Memcache + Clone + 'static>(
    name: &str,
    store: M,
    clock: Arc<dyn memkit_types::Clock>,
) {
    let store = Scripted::new(store);
    let second = store.actor("second refresher");
    let gate = second.pause(At::before(TestOp::Add, 1).key("lock:"));
    let slow = Cache::builder(second).clock(clock.clone()).build();
    let fast = Cache::builder(store).clock(clock).build();
    let p = Policy::ttl(Duration::from_secs(30)).no_jitter();
    let due = Policy::ttl(Duration::from_secs(1)).no_jitter();
    fast.put("refresh:race", &due, &0u32).await.unwrap();
    let loads = Arc::new(AtomicU32::new(0));
    let counting = |loads: Arc<AtomicU32>| {
        move |_| async move { Ok::<_, std::io::Error>(loads.fetch_add(1, Ordering::SeqCst) + 1) }
    };
    let ahead = Duration::from_secs(5);
    let second = {
        let (p, loads) = (p.clone(), loads.clone());
        tokio::spawn(async move {
            slow.refresh_if_due("refresh:race", &p, ahead, counting(loads))
                .await
        })
    };
    gate.reached().await; // the second refresher found the value due
    let first = fast.refresh_if_due("refresh:race", &p, ahead, counting(loads.clone()));
    assert!(first.await.unwrap(), "{name}: the first refresher rebuilds");
    gate.release();
    let again = second.await.unwrap().unwrap();
    assert!(!again, "{name}: the value is fresh again");
    assert_eq!(loads.load(Ordering::SeqCst), 1, "{name}: one rebuild");
}

#[tokio::test(start_paused = true)]
async fn refresh_if_due_rechecks_under_the_lock() {
    let clock = TokioClock::new();
    refresh_rechecks("embedded", embedded(clock.clone()), clock).await;
}
