//! [`Cache`]: cache-aside `get_or_compute` with the policies of [`Policy`].
//!
//! What is stored under a cache key (JSON, one record):
//!
//! ```text
//! {"u":<valid until, ms since epoch>,"d":<last recompute took, ms>,"t":[["tag",<version>],...],"v":<the value>}
//! ```
//!
//! `u` is seed 003's "годен до" (soft expiry), `d` is XFetch's `delta`, `t` the tag versions
//! read before the loader ran. An empty value is a lease placeholder (`mg ... N`), never a
//! record; a value that does not decode is a miss and is overwritten.
//!
//! With [`Policy::hot_copies`] / [`Policy::replicas`] the same record is stored under every
//! copy key `<key>#<i>` ([`copy_key`](super::copy_key)); the rebuild lock, the trace and
//! [`LoadContext::key`] stay on the logical `key`.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memkit_types::{
    Clock, DeleteOptions, Exptime, GetOptions, Item, Memcache, StoreMode, StoreOptions,
    SystemClock, validate_key,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tracing::Instrument;

use super::policy::{Copies, OnBusy, OnTimeout, Policy, Protection, WaitOptions};
use super::tags::{Tags, must_read_master_at};
use super::trace::{Letter, TraceSink};
use crate::structures::sleep;
use crate::{Error, Lock, LockOptions, Result};

/// Client flags of a cache record.
pub const FLAG_RECORD: u32 = 0x6d6b; // "mk"

/// Why the loader is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The key was absent (or held a placeholder or an undecodable value).
    Miss,
    /// The value's soft expiry passed (or the server marked it stale).
    Expired,
    /// A tag of the value was invalidated (or its key was lost).
    TagChanged,
    /// XFetch (or a lease's recache window) chose to recompute a still-fresh value.
    Early,
    /// Background refresh.
    Refresh,
}

/// What the loader is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadContext {
    /// The cache key being rebuilt.
    pub key: String,
    /// Why.
    pub reason: Reason,
    /// The seed's replica-lag rule: a tag of this value was invalidated less than the
    /// policy's `replica_lag` ago (or its key is missing), so read the DB master, not a
    /// replica that may not have the change yet.
    pub read_master: bool,
}

/// Where a returned value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A fresh value from the cache, first read.
    Hit,
    /// A fresh value from the cache after waiting for another caller's rebuild.
    Waited,
    /// Our loader ran.
    Computed,
    /// A stale value (someone else is rebuilding, or waiting ran out).
    Stale,
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Fetched<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub source: Source,
}

#[derive(Serialize)]
struct EnvelopeOut<'a, T> {
    u: u64,
    d: u64,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    t: &'a [(String, u64)],
    v: &'a T,
}

#[derive(Deserialize)]
struct Envelope<T> {
    u: u64,
    d: u64,
    #[serde(default)]
    t: Vec<(String, u64)>,
    v: T,
}

enum State<T> {
    Fresh(Envelope<T>),
    Stale(Envelope<T>),
    Gone(Reason),
}

/// Counters of one [`Cache`] (all clones share them).
#[derive(Debug, Default)]
pub struct CacheStats {
    hits: AtomicU64,
    misses: AtomicU64,
    stale_served: AtomicU64,
    waited_hits: AtomicU64,
    loads: AtomicU64,
    load_errors: AtomicU64,
    early_recomputes: AtomicU64,
    lock_attempts: AtomicU64,
    polls: AtomicU64,
}

/// A copy of [`CacheStats`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Fresh values served on the first read.
    pub hits: u64,
    /// Reads that found the value absent, expired or invalid.
    pub misses: u64,
    /// Stale values served.
    pub stale_served: u64,
    /// Fresh values served after waiting for someone else's rebuild.
    pub waited_hits: u64,
    /// Loader runs (rebuilds), including early and background ones.
    pub loads: u64,
    /// Loader failures.
    pub load_errors: u64,
    /// XFetch / recache-window early recomputes started.
    pub early_recomputes: u64,
    /// Lock or lease attempts.
    pub lock_attempts: u64,
    /// Back-off sleeps while waiting for a rebuild.
    pub polls: u64,
}

impl CacheStats {
    fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> StatsSnapshot {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StatsSnapshot {
            hits: g(&self.hits),
            misses: g(&self.misses),
            stale_served: g(&self.stale_served),
            waited_hits: g(&self.waited_hits),
            loads: g(&self.loads),
            load_errors: g(&self.load_errors),
            early_recomputes: g(&self.early_recomputes),
            lock_attempts: g(&self.lock_attempts),
            polls: g(&self.polls),
        }
    }
}

pub(crate) type RefreshFn<M> = Arc<
    dyn Fn(Cache<M>, Duration) -> Pin<Box<dyn Future<Output = Result<bool>> + Send>> + Send + Sync,
>;

struct Inner<M> {
    mc: M,
    clock: Arc<dyn Clock>,
    tags: Tags<M>,
    trace: Option<Arc<dyn TraceSink>>,
    stats: CacheStats,
    rng: Mutex<SmallRng>,
    pub(crate) refreshers: Mutex<HashMap<String, RefreshFn<M>>>,
}

/// Cache-aside over any [`Memcache`] backend, with dog-pile protection, XFetch, TTL jitter,
/// tags, tracing and background refresh. Cheap to clone: clones share everything.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// use std::time::Duration;
/// use memkit_cookbook::caching::{Cache, Policy, Source};
/// use memkit_engine::Embedded;
///
/// let cache = Cache::new(Embedded::with_defaults());
/// let policy = Policy::ttl(Duration::from_secs(60));
/// let load = |_ctx| async { Ok::<_, std::io::Error>(vec![1, 2, 3]) };
/// let first = cache.fetch("top-posts", &policy, load).await?;
/// assert_eq!(first.source, Source::Computed);
/// let again: Vec<i32> = cache.get_or_compute("top-posts", &policy, load).await?;
/// assert_eq!(again, vec![1, 2, 3]);
/// assert_eq!(cache.stats().hits, 1);
/// # Ok::<(), memkit_cookbook::Error>(()) }).unwrap();
/// ```
pub struct Cache<M> {
    inner: Arc<Inner<M>>,
}

impl<M> Clone for Cache<M> {
    fn clone(&self) -> Self {
        Cache {
            inner: self.inner.clone(),
        }
    }
}

impl<M> std::fmt::Debug for Cache<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("stats", &self.inner.stats.snapshot())
            .finish_non_exhaustive()
    }
}

/// Builds a [`Cache`].
pub struct CacheBuilder<M> {
    mc: M,
    clock: Arc<dyn Clock>,
    trace: Option<Arc<dyn TraceSink>>,
    seed: Option<u64>,
    tag_local_ttl: Duration,
}

impl<M> std::fmt::Debug for CacheBuilder<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheBuilder")
            .field("clock", &self.clock)
            .field("trace", &self.trace)
            .field("seed", &self.seed)
            .field("tag_local_ttl", &self.tag_local_ttl)
            .finish_non_exhaustive()
    }
}

impl<M: Memcache + Clone + 'static> CacheBuilder<M> {
    /// The clock for soft expiry, XFetch and tag versions (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Where trace letters go (default: nowhere).
    pub fn trace(mut self, sink: Arc<dyn TraceSink>) -> Self {
        self.trace = Some(sink);
        self
    }

    /// Seeds the random numbers of jitter and XFetch (default: from the OS).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Caches tag versions in this process for `ttl` (default: off).
    pub fn tag_local_ttl(mut self, ttl: Duration) -> Self {
        self.tag_local_ttl = ttl;
        self
    }

    /// The cache.
    pub fn build(self) -> Cache<M> {
        let rng = match self.seed {
            Some(s) => SmallRng::seed_from_u64(s),
            None => SmallRng::from_os_rng(),
        };
        Cache {
            inner: Arc::new(Inner {
                tags: Tags::new(self.mc.clone(), self.clock.clone())
                    .with_local_ttl(self.tag_local_ttl),
                mc: self.mc,
                clock: self.clock,
                trace: self.trace,
                stats: CacheStats::default(),
                rng: Mutex::new(rng),
                refreshers: Mutex::new(HashMap::new()),
            }),
        }
    }
}

impl<M: Memcache + Clone + 'static> Cache<M> {
    /// A cache on `mc` with the system clock, no trace.
    pub fn new(mc: M) -> Self {
        Self::builder(mc).build()
    }

    /// A builder for a cache on `mc`.
    pub fn builder(mc: M) -> CacheBuilder<M> {
        CacheBuilder {
            mc,
            clock: Arc::new(SystemClock),
            trace: None,
            seed: None,
            tag_local_ttl: Duration::ZERO,
        }
    }

    /// The backend.
    pub fn store(&self) -> &M {
        &self.inner.mc
    }

    /// The tag versions this cache checks.
    pub fn tags(&self) -> &Tags<M> {
        &self.inner.tags
    }

    /// Invalidates every value carrying `tag`. Returns the new version.
    pub async fn invalidate_tag(&self, tag: &str) -> Result<u64> {
        self.inner.tags.invalidate(tag).await
    }

    /// The counters.
    pub fn stats(&self) -> StatsSnapshot {
        self.inner.stats.snapshot()
    }

    /// Removes the cached value of `key` (one item; for a value with copies use
    /// [`Cache::remove_with`]).
    pub async fn remove(&self, key: &str) -> Result<bool> {
        Ok(self.inner.mc.delete(key.as_bytes()).await?)
    }

    /// Removes the cached value of `key` stored with `policy`: every copy of it. Tries every
    /// copy; `true` if one existed. Fails with the first error when a copy could not be
    /// deleted (e.g. its server is down: that copy may come back with its server).
    pub async fn remove_with(&self, key: &str, policy: &Policy) -> Result<bool> {
        let mut found = false;
        let mut first_err = None;
        for k in item_keys(key, policy)? {
            match self.inner.mc.delete(k.as_bytes()).await {
                Ok(b) => found |= b,
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e.into()),
            None => Ok(found),
        }
    }

    pub(crate) fn now_ms(&self) -> u64 {
        self.inner.clock.now_millis()
    }

    pub(crate) fn trace(&self, key: &str, l: Letter) {
        if let Some(t) = &self.inner.trace {
            t.record(key, l);
        }
    }

    fn random(&self) -> f64 {
        self.inner
            .rng
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .random::<f64>()
    }

    /// The cached value of `key` if it is fresh and its tags are current; never loads.
    pub async fn get<T: DeserializeOwned>(&self, key: &str, policy: &Policy) -> Result<Option<T>> {
        let policy = &*policy.effective();
        Ok(match self.lookup::<T>(key, policy).await? {
            State::Fresh(env) => Some(env.v),
            _ => None,
        })
    }

    /// Stores `value` under `key` as `policy` says, recording the current tag versions.
    pub async fn put<T: Serialize>(&self, key: &str, policy: &Policy, value: &T) -> Result<()> {
        let policy = &*policy.effective();
        let keys = item_keys(key, policy)?;
        let versions = self.tag_versions(policy).await?;
        let (bytes, opts) = self.record(policy, value, &versions, 0)?;
        self.write_copies(&keys, &bytes, &opts).await
    }

    /// Cache-aside: the cached value of `key`, or the loader's (stored for next time).
    /// See [`Cache::fetch`].
    pub async fn get_or_compute<T, F, Fut, E>(
        &self,
        key: &str,
        policy: &Policy,
        loader: F,
    ) -> Result<T>
    where
        T: Serialize + DeserializeOwned + Send,
        F: FnOnce(LoadContext) -> Fut + Send,
        Fut: Future<Output = std::result::Result<T, E>> + Send,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        Ok(self.fetch(key, policy, loader).await?.value)
    }

    /// Cache-aside with the policy's protection; says where the value came from.
    ///
    /// The loader runs at most once per call. When the backend is unreachable
    /// ([`memkit_types::Error::is_unavailable`]) the read counts as a miss and the loader's
    /// value is returned uncached.
    pub async fn fetch<T, F, Fut, E>(
        &self,
        key: &str,
        policy: &Policy,
        loader: F,
    ) -> Result<Fetched<T>>
    where
        T: Serialize + DeserializeOwned + Send,
        F: FnOnce(LoadContext) -> Fut + Send,
        Fut: Future<Output = std::result::Result<T, E>> + Send,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        // One span per call, so that a `tracing` subscriber sees each fetch's duration with
        // its trace letters (TracingTrace events) inside and where the value came from.
        let span = tracing::trace_span!(
            target: "memkit::cache",
            "fetch",
            key,
            source = tracing::field::Empty
        );
        let fetched = async {
            let policy = &*policy.effective();
            let out = match policy.protection {
                Protection::Lease => self.fetch_lease(key, policy, loader).await,
                _ => self.fetch_soft(key, policy, loader).await,
            };
            match out {
                Err(Unavailable(loader)) => {
                    CacheStats::bump(&self.inner.stats.misses);
                    self.trace(key, Letter::Miss);
                    let ctx = LoadContext {
                        key: key.to_owned(),
                        reason: Reason::Miss,
                        read_master: policy.replica_lag.is_some(),
                    };
                    let value = self.run_loader(key, loader, ctx).await?.0;
                    Ok(Fetched {
                        value,
                        source: Source::Computed,
                    })
                }
                Ok(r) => r,
            }
        }
        .instrument(span.clone())
        .await;
        if let Ok(f) = &fetched {
            span.record("source", tracing::field::debug(f.source));
        }
        fetched
    }

    // ---- the soft-expiry paths: Protection::None and Protection::Lock ----

    async fn fetch_soft<T, F, Fut, E>(
        &self,
        key: &str,
        policy: &Policy,
        loader: F,
    ) -> std::result::Result<Result<Fetched<T>>, Unavailable<F>>
    where
        T: Serialize + DeserializeOwned + Send,
        F: FnOnce(LoadContext) -> Fut + Send,
        Fut: Future<Output = std::result::Result<T, E>> + Send,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let first = match self.lookup::<T>(key, policy).await {
            Ok(s) => s,
            Err(Error::Store(e)) if e.is_unavailable() => return Err(Unavailable(loader)),
            Err(e) => return Ok(Err(e)),
        };
        Ok(self.soft_after(key, policy, first, loader).await)
    }

    async fn soft_after<T, F, Fut, E>(
        &self,
        key: &str,
        policy: &Policy,
        first: State<T>,
        loader: F,
    ) -> Result<Fetched<T>>
    where
        T: Serialize + DeserializeOwned + Send,
        F: FnOnce(LoadContext) -> Fut + Send,
        Fut: Future<Output = std::result::Result<T, E>> + Send,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let st = &self.inner.stats;
        let (stale, reason) = match first {
            State::Fresh(env) => {
                if !self.xfetch_early(&env, policy) {
                    CacheStats::bump(&st.hits);
                    self.trace(key, Letter::Hit);
                    return Ok(Fetched {
                        value: env.v,
                        source: Source::Hit,
                    });
                }
                CacheStats::bump(&st.early_recomputes);
                if policy.protection == Protection::None {
                    return self.load(key, policy, Reason::Early, loader).await;
                }
                // Early recompute under the lock; whoever loses keeps the still-fresh value.
                CacheStats::bump(&st.lock_attempts);
                self.trace(key, Letter::Lock);
                let lock = self.lock_for(key, policy);
                return match lock.try_lock().await? {
                    Some(guard) => {
                        let out = self.load(key, policy, Reason::Early, loader).await;
                        let _ = guard.unlock().await;
                        self.trace(key, Letter::Unlock);
                        out
                    }
                    None => {
                        CacheStats::bump(&st.hits);
                        self.trace(key, Letter::Hit);
                        Ok(Fetched {
                            value: env.v,
                            source: Source::Hit,
                        })
                    }
                };
            }
            State::Stale(env) => (Some(env), Reason::Expired),
            State::Gone(r) => (None, r),
        };
        CacheStats::bump(&st.misses);
        self.trace(key, Letter::Miss);
        if policy.protection == Protection::None {
            return self.load(key, policy, reason, loader).await;
        }
        self.rebuild_locked(key, policy, stale, reason, loader)
            .await
    }

    /// Seed 003's algorithm: try the rebuild lock; the winner double-checks and rebuilds;
    /// the others serve stale or poll with back-off until the value is fresh, the lock is
    /// free again, or the wait budget is spent.
    async fn rebuild_locked<T, F, Fut, E>(
        &self,
        key: &str,
        policy: &Policy,
        mut stale: Option<Envelope<T>>,
        mut reason: Reason,
        loader: F,
    ) -> Result<Fetched<T>>
    where
        T: Serialize + DeserializeOwned + Send,
        F: FnOnce(LoadContext) -> Fut + Send,
        Fut: Future<Output = std::result::Result<T, E>> + Send,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let st = &self.inner.stats;
        let lock = self.lock_for(key, policy);
        let w = &policy.wait;
        let mut waited = Duration::ZERO;
        let mut attempt: u32 = 1;
        loop {
            CacheStats::bump(&st.lock_attempts);
            self.trace(key, Letter::Lock);
            if let Some(guard) = lock.try_lock().await? {
                // Double-check: the previous holder may have written between our read and
                // our lock; then its value is ours and the loader does not run again.
                if let State::Fresh(env) = self.lookup::<T>(key, policy).await? {
                    let _ = guard.unlock().await;
                    self.trace(key, Letter::Unlock);
                    CacheStats::bump(&st.waited_hits);
                    self.trace(key, Letter::Hit);
                    return Ok(Fetched {
                        value: env.v,
                        source: Source::Waited,
                    });
                }
                let out = self.load(key, policy, reason, loader).await;
                let _ = guard.unlock().await;
                self.trace(key, Letter::Unlock);
                return out;
            }
            if policy.on_busy == OnBusy::ServeStale
                && let Some(env) = stale
            {
                return Ok(self.serve_stale(key, env));
            }
            if waited >= w.max_wait
                && let Some(env) = stale
            {
                return Ok(self.serve_stale(key, env));
            }
            if waited >= w.budget() {
                if w.on_timeout == OnTimeout::Compute {
                    return self.load(key, policy, reason, loader).await;
                }
                return Err(Error::LockTimeout(key.to_owned()));
            }
            let nap = nap_after(w, attempt, waited);
            CacheStats::bump(&st.polls);
            sleep(nap).await;
            waited += nap;
            attempt = attempt.saturating_add(1);
            match self.lookup::<T>(key, policy).await? {
                State::Fresh(env) => {
                    CacheStats::bump(&st.waited_hits);
                    self.trace(key, Letter::Hit);
                    return Ok(Fetched {
                        value: env.v,
                        source: Source::Waited,
                    });
                }
                State::Stale(env) => stale = Some(env),
                State::Gone(r) => {
                    if r == Reason::TagChanged {
                        stale = None;
                    }
                    reason = r;
                }
            }
        }
    }

    // ---- the lease path: Protection::Lease ----

    async fn fetch_lease<T, F, Fut, E>(
        &self,
        key: &str,
        policy: &Policy,
        loader: F,
    ) -> std::result::Result<Result<Fetched<T>>, Unavailable<F>>
    where
        T: Serialize + DeserializeOwned + Send,
        F: FnOnce(LoadContext) -> Fut + Send,
        Fut: Future<Output = std::result::Result<T, E>> + Send,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let st = &self.inner.stats;
        let w = &policy.wait;
        let opts = GetOptions {
            vivify: Some(Exptime::secs(w.lock_ttl.max(1))),
            recache_below: policy.recache_secs(policy.ttl.as_millis() as u64),
            ..Default::default()
        };
        let mut waited = Duration::ZERO;
        let mut attempt: u32 = 1;
        let mut missed = false;
        loop {
            let item = match self.inner.mc.get_with(key.as_bytes(), &opts).await {
                Ok(i) => i,
                Err(e) if e.is_unavailable() && attempt == 1 => return Err(Unavailable(loader)),
                Err(e) => return Ok(Err(e.into())),
            };
            let Some(item) = item else {
                // A backend that ignored N: plain cache-aside.
                CacheStats::bump(&st.misses);
                self.trace(key, Letter::Miss);
                return Ok(self.load(key, policy, Reason::Miss, loader).await);
            };
            let env = decode::<T>(&item.value);
            let tags_ok = match &env {
                Some(e) => match self.tags_current(&e.t, policy).await {
                    Ok(ok) => ok,
                    Err(e) => return Ok(Err(e)),
                },
                None => false,
            };
            if item.win {
                let reason = match (&env, tags_ok, item.stale) {
                    (None, _, _) => Reason::Miss,
                    (Some(_), false, _) => Reason::TagChanged,
                    (Some(_), true, true) => Reason::Expired,
                    (Some(_), true, false) => Reason::Early,
                };
                if reason == Reason::Early {
                    CacheStats::bump(&st.early_recomputes);
                } else if !missed {
                    CacheStats::bump(&st.misses);
                    self.trace(key, Letter::Miss);
                }
                CacheStats::bump(&st.lock_attempts);
                self.trace(key, Letter::Lock);
                let out = self.load(key, policy, reason, loader).await;
                if out.is_err() {
                    // Give the win back: drop our placeholder, or re-mark the stale value so
                    // the next reader wins.
                    let _ = if item.value.is_empty() {
                        self.inner
                            .mc
                            .delete_cas(key.as_bytes(), item.cas)
                            .await
                            .map(|_| ())
                    } else {
                        let o = DeleteOptions {
                            invalidate: true,
                            ..Default::default()
                        };
                        self.inner
                            .mc
                            .delete_with(key.as_bytes(), &o)
                            .await
                            .map(|_| ())
                    };
                }
                // The store of the new value released the lease.
                self.trace(key, Letter::Unlock);
                return Ok(out);
            }
            let env = match env {
                Some(env) if tags_ok && !item.stale => {
                    let source = if missed {
                        CacheStats::bump(&st.waited_hits);
                        Source::Waited
                    } else {
                        CacheStats::bump(&st.hits);
                        Source::Hit
                    };
                    self.trace(key, Letter::Hit);
                    return Ok(Ok(Fetched {
                        value: env.v,
                        source,
                    }));
                }
                other => other,
            };
            if !missed {
                missed = true;
                CacheStats::bump(&st.misses);
                self.trace(key, Letter::Miss);
            }
            let servable = if tags_ok { env } else { None };
            if env_is_some_and_not_taken(&item, tags_ok) {
                // A tag made the value invalid but nobody was told: mark it stale, so the
                // next `mg` hands exactly one caller the win.
                let o = DeleteOptions {
                    invalidate: true,
                    ..Default::default()
                };
                if let Err(e) = self.inner.mc.delete_with(key.as_bytes(), &o).await {
                    return Ok(Err(e.into()));
                }
                attempt = attempt.saturating_add(1);
                if attempt < 8 {
                    continue;
                }
            }
            CacheStats::bump(&st.lock_attempts);
            self.trace(key, Letter::Lock);
            if policy.on_busy == OnBusy::ServeStale
                && let Some(env) = servable
            {
                return Ok(Ok(self.serve_stale(key, env)));
            }
            if waited >= w.max_wait
                && let Some(env) = servable
            {
                return Ok(Ok(self.serve_stale(key, env)));
            }
            if waited >= w.budget() {
                if w.on_timeout == OnTimeout::Compute {
                    return Ok(self.load(key, policy, Reason::Miss, loader).await);
                }
                return Ok(Err(Error::LockTimeout(key.to_owned())));
            }
            let nap = nap_after(w, attempt, waited);
            CacheStats::bump(&st.polls);
            sleep(nap).await;
            waited += nap;
            attempt = attempt.saturating_add(1);
        }
    }

    // ---- shared pieces ----

    fn lock_for(&self, key: &str, policy: &Policy) -> Lock<M> {
        Lock::with_options(
            self.inner.mc.clone(),
            key,
            LockOptions::ttl_secs(policy.wait.lock_ttl),
        )
    }

    fn serve_stale<T>(&self, key: &str, env: Envelope<T>) -> Fetched<T> {
        CacheStats::bump(&self.inner.stats.stale_served);
        self.trace(key, Letter::Stale);
        Fetched {
            value: env.v,
            source: Source::Stale,
        }
    }

    /// XFetch: `now - delta * beta * ln(rand) >= expiry`, rand uniform in (0, 1].
    fn xfetch_early<T>(&self, env: &Envelope<T>, policy: &Policy) -> bool {
        let Some(beta) = policy.xfetch_beta else {
            return false;
        };
        let r = 1.0 - self.random(); // (0, 1]
        let gap = (env.d as f64) * beta * -r.ln();
        (self.now_ms() as f64) + gap >= env.u as f64
    }

    /// Reads `key` and classifies it (one get, plus one multi-get of its tags).
    async fn lookup<T: DeserializeOwned>(&self, key: &str, policy: &Policy) -> Result<State<T>> {
        let Some(item) = self.read_item(key, policy).await? else {
            return Ok(State::Gone(Reason::Miss));
        };
        let Some(env) = decode::<T>(&item.value) else {
            return Ok(State::Gone(Reason::Miss));
        };
        if !self.tags_current(&env.t, policy).await? {
            return Ok(State::Gone(Reason::TagChanged));
        }
        if policy.protection != Protection::Lease && self.now_ms() >= env.u {
            return Ok(State::Stale(env));
        }
        Ok(State::Fresh(env))
    }

    /// The item holding `key`'s value. With copies: one copy (copy 0 for replicas, a random
    /// one for hot keys), and only when it is missing or its server unavailable, the others
    /// in one multi-get, the first present in copy order winning. Unavailable only when
    /// every copy was.
    async fn read_item(&self, key: &str, policy: &Policy) -> Result<Option<Item>> {
        let keys = item_keys(key, policy)?;
        let n = keys.len();
        if n == 1 {
            return Ok(self.inner.mc.get(keys[0].as_bytes()).await?);
        }
        let first = match policy.copies {
            Copies::Hot(_) => self
                .inner
                .rng
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .random_range(0..n),
            _ => 0,
        };
        let down = match self.inner.mc.get(keys[first].as_bytes()).await {
            Ok(Some(item)) => return Ok(Some(item)),
            Ok(None) => None,
            Err(e) if e.is_unavailable() => Some(e),
            Err(e) => return Err(e.into()),
        };
        let rest: Vec<&[u8]> = (1..n).map(|d| keys[(first + d) % n].as_bytes()).collect();
        match self.inner.mc.get_multi(&rest, &GetOptions::default()).await {
            Ok(items) => Ok(items.into_iter().flatten().next()),
            Err(e) if e.is_unavailable() => match down {
                Some(d) => Err(d.into()),
                None => Ok(None),
            },
            Err(e) => Err(e.into()),
        }
    }

    /// Stores one record under every item key. Succeeds when one copy was stored (the
    /// others are logged); fails with the first error when none was.
    async fn write_copies(&self, keys: &[String], bytes: &[u8], opts: &StoreOptions) -> Result<()> {
        let mut stored = false;
        let mut first_err = None;
        for k in keys {
            match self.inner.mc.store(k.as_bytes(), bytes, opts).await {
                Ok(_) => stored = true,
                Err(e) => {
                    tracing::debug!(target: "memkit::cache", key = %k, error = %e, "storing a copy failed");
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) if !stored => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// Whether the value's recorded tags are the policy's tags at their current versions.
    async fn tags_current(&self, stored: &[(String, u64)], policy: &Policy) -> Result<bool> {
        if stored.len() != policy.tags.len()
            || stored.iter().zip(&policy.tags).any(|((n, _), p)| n != p)
        {
            return Ok(false);
        }
        self.inner.tags.still_valid(stored).await
    }

    async fn tag_versions(&self, policy: &Policy) -> Result<Vec<(String, u64)>> {
        Ok(self.tag_versions_and_master(policy).await?.0)
    }

    /// The versions a new value records, and whether its loader must read the master. The
    /// master decision is taken from the first read: a tag missing there (evicted, or its
    /// server restarted after an invalidation) cannot say when it last changed, so the
    /// loader reads the master; once re-created it would look like a tag first used now.
    async fn tag_versions_and_master(&self, policy: &Policy) -> Result<(Vec<(String, u64)>, bool)> {
        if policy.tags.is_empty() {
            return Ok((Vec::new(), false));
        }
        let tags = &self.inner.tags;
        let first = tags.versions(&policy.tags).await?;
        let read_master = policy
            .replica_lag
            .is_some_and(|lag| must_read_master_at(&first, self.now_ms(), lag));
        let v = tags.create_missing(&policy.tags, first).await?;
        let versions = policy
            .tags
            .iter()
            .cloned()
            .zip(v.into_iter().map(|v| v.version))
            .collect();
        Ok((versions, read_master))
    }

    async fn run_loader<T, F, Fut, E>(
        &self,
        key: &str,
        loader: F,
        ctx: LoadContext,
    ) -> Result<(T, u64)>
    where
        F: FnOnce(LoadContext) -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        CacheStats::bump(&self.inner.stats.loads);
        let start = self.now_ms();
        match loader(ctx).await {
            Ok(v) => Ok((v, self.now_ms().saturating_sub(start))),
            Err(e) => {
                CacheStats::bump(&self.inner.stats.load_errors);
                self.trace(key, Letter::Error);
                Err(Error::Source(e.into()))
            }
        }
    }

    /// Reads the tag versions (before the loader: an invalidation during the load must win),
    /// runs the loader, stores the record. A failed store still returns the value.
    pub(crate) async fn load<T, F, Fut, E>(
        &self,
        key: &str,
        policy: &Policy,
        reason: Reason,
        loader: F,
    ) -> Result<Fetched<T>>
    where
        T: Serialize,
        F: FnOnce(LoadContext) -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (versions, read_master) = self.tag_versions_and_master(policy).await?;
        let ctx = LoadContext {
            key: key.to_owned(),
            reason,
            read_master,
        };
        let (value, delta) = self.run_loader(key, loader, ctx).await?;
        let stored = match (
            self.record(policy, &value, &versions, delta),
            item_keys(key, policy),
        ) {
            (Ok((bytes, opts)), Ok(keys)) => self.write_copies(&keys, &bytes, &opts).await,
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
        if let Err(e) = stored {
            tracing::warn!(target: "memkit::cache", key, error = %e, "storing the rebuilt value failed");
        }
        self.trace(key, Letter::Write);
        Ok(Fetched {
            value,
            source: Source::Computed,
        })
    }

    /// The record for `value` and how to store it (sync: no reference to `value` is held
    /// across an await, so `T` need not be `Sync`).
    fn record<T: Serialize>(
        &self,
        policy: &Policy,
        value: &T,
        versions: &[(String, u64)],
        delta: u64,
    ) -> Result<(Vec<u8>, StoreOptions)> {
        let factor = match policy.jitter {
            Some((lo, hi)) if hi > lo => lo + (hi - lo) * self.random(),
            Some((lo, _)) => lo,
            None => 1.0,
        };
        let ttl_ms = ((policy.ttl.as_millis() as f64) * factor).max(1.0) as u64;
        let hard_ms = match policy.protection {
            Protection::Lock => ttl_ms.saturating_add(policy.grace_ms()),
            Protection::None | Protection::Lease => ttl_ms,
        };
        let hard_secs = hard_ms.div_ceil(1000).clamp(1, u64::from(u32::MAX)) as u32;
        let bytes = serde_json::to_vec(&EnvelopeOut {
            u: self.now_ms().saturating_add(ttl_ms),
            d: delta,
            t: versions,
            v: value,
        })?;
        let opts = StoreOptions::new(StoreMode::Set, FLAG_RECORD, Exptime::secs(hard_secs));
        Ok((bytes, opts))
    }

    /// Recomputes `key` now if it is missing or expires within `ahead`, under the rebuild
    /// lock (skipped when someone holds it). `true` if this call rebuilt it.
    pub async fn refresh_if_due<T, F, Fut, E>(
        &self,
        key: &str,
        policy: &Policy,
        ahead: Duration,
        loader: F,
    ) -> Result<bool>
    where
        T: Serialize + DeserializeOwned + Send,
        F: FnOnce(LoadContext) -> Fut + Send,
        Fut: Future<Output = std::result::Result<T, E>> + Send,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let policy = &*policy.effective();
        if let State::Fresh(env) = self.lookup::<T>(key, policy).await?
            && env.u > self.now_ms().saturating_add(ahead.as_millis() as u64)
        {
            return Ok(false);
        }
        CacheStats::bump(&self.inner.stats.lock_attempts);
        self.trace(key, Letter::Lock);
        let Some(guard) = self.lock_for(key, policy).try_lock().await? else {
            return Ok(false);
        };
        // Another refresher may have rebuilt and released the lock between our read and our
        // lock: then the value is no longer due and one rebuild was enough.
        if let State::Fresh(env) = self.lookup::<T>(key, policy).await?
            && env.u > self.now_ms().saturating_add(ahead.as_millis() as u64)
        {
            let _ = guard.unlock().await;
            return Ok(false);
        }
        let out = self.load(key, policy, Reason::Refresh, loader).await;
        let _ = guard.unlock().await;
        self.trace(key, Letter::Unlock);
        out.map(|_| true)
    }

    pub(crate) fn refreshers(&self) -> &Mutex<HashMap<String, RefreshFn<M>>> {
        &self.inner.refreshers
    }
}

/// The backend could not be reached on the first read: the caller gets the loader back to
/// run it uncached.
struct Unavailable<F>(F);

/// The `attempt`-th back-off: linear, capped, and ending when the wait budget does (at
/// `max_wait` first, where a stale value is served).
fn nap_after(w: &WaitOptions, attempt: u32, waited: Duration) -> Duration {
    let until = if waited < w.max_wait {
        w.max_wait
    } else {
        w.budget()
    };
    w.backoff_step
        .saturating_mul(attempt)
        .min(w.max_backoff)
        .min(until.saturating_sub(waited))
        .max(Duration::from_millis(1))
}

fn env_is_some_and_not_taken(item: &memkit_types::Item, tags_ok: bool) -> bool {
    !item.value.is_empty() && !tags_ok && !item.win_taken && !item.stale
}

/// The memcached keys of `key`'s value under `policy`, each checked to be a valid key.
fn item_keys(key: &str, policy: &Policy) -> Result<Vec<String>> {
    let keys = policy.item_keys(key);
    if keys.len() > 1 {
        for k in &keys {
            validate_key(k.as_bytes())?;
        }
    }
    Ok(keys)
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Option<Envelope<T>> {
    if bytes.is_empty() {
        return None;
    }
    match serde_json::from_slice(bytes) {
        Ok(env) => Some(env),
        Err(e) => {
            tracing::debug!(target: "memkit::cache", error = %e, "undecodable cache record: a miss");
            None
        }
    }
}
