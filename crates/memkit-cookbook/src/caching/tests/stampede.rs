//! The stampede: 1,000 concurrent callers on one expired key whose loader takes 200 ms, on
//! tokio's paused clock (deterministic; the 200 ms and every back-off are virtual).

use std::time::Duration;

use memkit_types::{DeleteOptions, Memcache};

use super::{TokioClock, embedded};
use crate::caching::stampede::{StampedeReport, run, run_xfetch};
use crate::caching::{Cache, Policy, Protection};

const KEY: &str = "front-page";
const CALLERS: usize = 1000;
const LOADER: Duration = Duration::from_millis(200);
const MAX_WAIT: Duration = Duration::from_secs(1);

fn cache(seed: u64) -> Cache<memkit_engine::Embedded> {
    let clock = TokioClock::new();
    Cache::builder(embedded(clock.clone()))
        .clock(clock)
        .seed(seed)
        .build()
}

/// A key whose value exists but expired (soft) `ttl` ago.
async fn expired(cache: &Cache<memkit_engine::Embedded>, p: &Policy) {
    cache.put(KEY, p, &0u64).await.unwrap();
    tokio::time::advance(p.ttl + Duration::from_secs(1)).await;
}

fn show(name: &str, r: &StampedeReport) {
    eprintln!(
        "{name}: loads={} hit={} waited={} computed={} stale={} errors={} p50={:?} max={:?}",
        r.loads,
        r.hits,
        r.waited,
        r.computed,
        r.stale,
        r.errors,
        r.quantile(0.5),
        r.quantile(1.0)
    );
}

#[tokio::test(start_paused = true)]
async fn lock_policy_loads_once_and_everyone_gets_a_value_within_the_bound() {
    let c = cache(1);
    let p = Policy::ttl(Duration::from_secs(10))
        .no_jitter()
        .max_wait(MAX_WAIT);
    expired(&c, &p).await;
    let r = run(&c, KEY, &p, CALLERS, LOADER).await;
    show("lock/wait, expired", &r);
    assert_eq!(r.loads, 1);
    assert_eq!((r.errors, r.stale), (0, 0));
    assert_eq!(r.computed + r.waited + r.hits, CALLERS);
    assert!(r.quantile(1.0) <= MAX_WAIT, "{:?}", r.quantile(1.0));
    // The same on a cold key (no stale value at all).
    let c = cache(2);
    let r = run(&c, KEY, &p, CALLERS, LOADER).await;
    show("lock/wait, cold", &r);
    assert_eq!((r.loads, r.errors, r.stale), (1, 0, 0));
    assert!(r.quantile(1.0) <= MAX_WAIT);
}

#[tokio::test(start_paused = true)]
async fn stale_serving_makes_nobody_wait() {
    let c = cache(3);
    let p = Policy::ttl(Duration::from_secs(10))
        .no_jitter()
        .serve_stale();
    expired(&c, &p).await;
    let r = run(&c, KEY, &p, CALLERS, LOADER).await;
    show("lock/stale", &r);
    assert_eq!(r.loads, 1);
    assert_eq!((r.computed, r.stale), (1, CALLERS - 1));
    assert_eq!(
        r.not_waiting(),
        CALLERS - 1,
        "only the rebuilder spends time"
    );
}

#[tokio::test(start_paused = true)]
async fn leases_load_once_cold_and_serve_stale_when_marked() {
    let p = Policy::ttl(Duration::from_secs(10))
        .no_jitter()
        .protection(Protection::Lease)
        .max_wait(MAX_WAIT);
    let c = cache(4);
    let r = run(&c, KEY, &p, CALLERS, LOADER).await;
    show("lease/wait, cold", &r);
    assert_eq!((r.loads, r.errors, r.stale), (1, 0, 0));
    assert!(r.quantile(1.0) <= MAX_WAIT);
    // Mark the value stale server-side (`md I`): one winner, everyone else served stale.
    let o = DeleteOptions {
        invalidate: true,
        ..Default::default()
    };
    c.store().delete_with(KEY.as_bytes(), &o).await.unwrap();
    let r = run(&c, KEY, &p.clone().serve_stale(), CALLERS, LOADER).await;
    show("lease/stale", &r);
    assert_eq!((r.loads, r.computed, r.stale), (1, 1, CALLERS - 1));
    assert_eq!(r.not_waiting(), CALLERS - 1);
}

#[tokio::test(start_paused = true)]
async fn without_protection_everyone_loads() {
    let c = cache(5);
    let p = Policy::ttl(Duration::from_secs(10))
        .no_jitter()
        .protection(Protection::None);
    expired(&c, &p).await;
    let r = run(&c, KEY, &p, CALLERS, LOADER).await;
    show("none", &r);
    // Reported, not a property: on this scheduler every caller misses before the first write.
    assert!(r.loads > 1);
    assert_eq!(r.computed, CALLERS);
}

#[tokio::test(start_paused = true)]
async fn xfetch_recomputes_before_expiry_in_most_runs() {
    // 1,000 callers over the last 5 s before expiry (one per 5 ms), delta = 200 ms, beta = 1.
    let runs = 30;
    let mut before = 0;
    let mut total_loads = 0;
    for seed in 0..runs {
        let c = cache(100 + seed);
        let p = Policy::ttl(Duration::from_secs(60))
            .no_jitter()
            .xfetch(1.0)
            .serve_stale();
        let r = run_xfetch(&c, KEY, &p, CALLERS, Duration::from_millis(5), LOADER).await;
        if r.lead.is_some() {
            before += 1;
        }
        total_loads += r.loads;
        assert_eq!(r.expired_reads, 0, "nobody saw it expire: {r:?}");
    }
    eprintln!("xfetch: recompute before expiry in {before}/{runs} runs, {total_loads} loads");
    assert!(before * 10 >= runs * 9, "{before}/{runs}");
    assert!(
        total_loads as u64 <= runs * 2,
        "the lock keeps early recomputes single"
    );
}

/// A cold key whose loader is slower than `max_wait`, then one whose winner died holding the
/// lock (or the lease placeholder): with the default `OnTimeout::Contend`, one load in each
/// case — the slow winner's value reaches the waiters, the dead winner's lock expires and one
/// waiter wins it — and nobody fails. `OnTimeout::Compute` is the herd.
#[tokio::test(start_paused = true)]
async fn a_slow_or_dead_winner_is_not_a_herd() {
    let cache = cache(11);
    for protection in [Protection::Lock, Protection::Lease] {
        let p = Policy::ttl(Duration::from_secs(30))
            .no_jitter()
            .protection(protection)
            .max_wait(Duration::from_millis(100))
            .lock_ttl(2);
        let slow = format!("slow:{protection:?}");
        let r = run(&cache, &slow, &p, CALLERS, Duration::from_millis(500)).await;
        show(&slow, &r);
        assert_eq!((r.loads, r.computed, r.errors), (1, 1, 0), "{slow}");

        let dead = format!("dead:{protection:?}");
        super::net::die_holding_the_rebuild(cache.store(), &dead, protection, 2).await;
        let r = run(&cache, &dead, &p, CALLERS, LOADER).await;
        show(&dead, &r);
        assert_eq!((r.loads, r.computed, r.errors), (1, 1, 0), "{dead}");

        let herd = format!("herd:{protection:?}");
        let eager = p.clone().on_timeout(crate::caching::OnTimeout::Compute);
        let r = run(&cache, &herd, &eager, CALLERS, Duration::from_millis(500)).await;
        assert!(
            r.loads > 1,
            "{herd}: Compute is the dog-pile: {} loads",
            r.loads
        );
    }
}
