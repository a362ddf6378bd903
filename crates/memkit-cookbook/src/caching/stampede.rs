//! A stampede harness: many concurrent callers on one expensive key, to see what a
//! [`Policy`] does under a dog-pile. The tests, `examples/stampede.rs` and
//! `docs/cookbook/caching-stampede.md` use it; it is public so you can run it against your
//! own backend and loader times.
//!
//! Needs a tokio runtime (it spawns one task per caller). Under tokio's paused clock
//! (`start_paused`) the results are deterministic: the loader's sleep and the waiters'
//! back-off advance virtual time only.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use memkit_types::Memcache;
use tokio::time::Instant;

use super::cache::{Cache, Source};
use super::policy::Policy;

/// What the callers of one stampede saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StampedeReport {
    /// Callers.
    pub callers: usize,
    /// Loader runs.
    pub loads: u32,
    /// Callers served a fresh cached value at once.
    pub hits: usize,
    /// Callers served a fresh value after waiting for someone's rebuild.
    pub waited: usize,
    /// Callers whose own loader ran.
    pub computed: usize,
    /// Callers served the stale value.
    pub stale: usize,
    /// Callers that got an error.
    pub errors: usize,
    /// Each caller's latency, sorted ascending.
    pub latencies: Vec<Duration>,
}

impl StampedeReport {
    /// The latency at quantile `q` in `[0, 1]`.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let i = ((self.latencies.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
        self.latencies[i]
    }

    /// Callers that returned without waiting (latency zero on a paused clock).
    pub fn not_waiting(&self) -> usize {
        self.latencies.iter().filter(|d| d.is_zero()).count()
    }
}

/// `callers` concurrent `fetch`es of `key` with `policy`; the loader sleeps `loader_time`
/// (tokio's timer) and returns the number of loads so far.
pub async fn run<M>(
    cache: &Cache<M>,
    key: &str,
    policy: &Policy,
    callers: usize,
    loader_time: Duration,
) -> StampedeReport
where
    M: Memcache + Clone + Send + Sync + 'static,
{
    let loads = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::with_capacity(callers);
    for _ in 0..callers {
        let (cache, key, policy, loads) =
            (cache.clone(), key.to_owned(), policy.clone(), loads.clone());
        tasks.push(tokio::spawn(async move {
            let start = Instant::now();
            let out = cache
                .fetch(&key, &policy, move |_ctx| async move {
                    tokio::time::sleep(loader_time).await;
                    let n = loads.fetch_add(1, Ordering::SeqCst) + 1;
                    Ok::<u64, std::io::Error>(u64::from(n))
                })
                .await;
            (out.map(|f| f.source), start.elapsed())
        }));
    }
    let mut r = StampedeReport {
        callers,
        ..Default::default()
    };
    for t in tasks {
        match t.await {
            Ok((Ok(source), lat)) => {
                match source {
                    Source::Hit => r.hits += 1,
                    Source::Waited => r.waited += 1,
                    Source::Computed => r.computed += 1,
                    Source::Stale => r.stale += 1,
                }
                r.latencies.push(lat);
            }
            Ok((Err(_), lat)) => {
                r.errors += 1;
                r.latencies.push(lat);
            }
            Err(_) => r.errors += 1,
        }
    }
    r.latencies.sort();
    r.loads = loads.load(Ordering::SeqCst);
    r
}

/// What one XFetch run saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct XFetchReport {
    /// Loader runs after the priming one.
    pub loads: u32,
    /// How long before the value's expiry the first recompute started (`None`: no
    /// recompute started before expiry).
    pub lead: Option<Duration>,
    /// Callers that arrived after expiry and found the value expired (missed).
    pub expired_reads: usize,
}

/// Primes `key` (the loader takes `loader_time`, which XFetch records as `delta`), then sends
/// `callers` requests spaced `spacing` apart, the last one arriving at the value's expiry
/// (`policy.ttl` after priming; use a policy without jitter). Reports whether a recompute
/// started before expiry.
pub async fn run_xfetch<M>(
    cache: &Cache<M>,
    key: &str,
    policy: &Policy,
    callers: usize,
    spacing: Duration,
    loader_time: Duration,
) -> XFetchReport
where
    M: Memcache + Clone + Send + Sync + 'static,
{
    let loads = Arc::new(AtomicU32::new(0));
    let first_start: Arc<std::sync::Mutex<Option<Instant>>> = Arc::default();
    let _ = cache
        .fetch(key, policy, move |_ctx| async move {
            tokio::time::sleep(loader_time).await;
            Ok::<u64, std::io::Error>(0)
        })
        .await;
    let expiry = Instant::now() + policy.ttl;
    let first = expiry
        .checked_sub(spacing * (callers.saturating_sub(1) as u32))
        .unwrap_or_else(Instant::now);
    let mut tasks = Vec::with_capacity(callers);
    for i in 0..callers {
        let (cache, key, policy, loads, first_start) = (
            cache.clone(),
            key.to_owned(),
            policy.clone(),
            loads.clone(),
            first_start.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let arrive = first + spacing * i as u32;
            tokio::time::sleep_until(arrive).await;
            let out = cache
                .fetch(&key, &policy, move |_ctx| async move {
                    {
                        let mut f = first_start.lock().unwrap_or_else(|e| e.into_inner());
                        f.get_or_insert_with(Instant::now);
                    }
                    tokio::time::sleep(loader_time).await;
                    loads.fetch_add(1, Ordering::SeqCst);
                    Ok::<u64, std::io::Error>(1)
                })
                .await;
            arrive >= expiry && !matches!(out.map(|f| f.source), Ok(Source::Hit))
        }));
    }
    let mut expired_reads = 0;
    for t in tasks {
        if t.await.unwrap_or(false) {
            expired_reads += 1;
        }
    }
    let started = *first_start.lock().unwrap_or_else(|e| e.into_inner());
    XFetchReport {
        loads: loads.load(Ordering::SeqCst),
        lead: started.and_then(|s| (s < expiry).then(|| expiry - s)),
        expired_reads,
    }
}
