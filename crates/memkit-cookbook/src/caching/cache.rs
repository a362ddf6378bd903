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
//! copy key `<key>#<i>` ([`copy_key`](super::copy_key)), or, with a
//! [placement](CacheBuilder::placement), under names `<key>#<j>` chosen to land on distinct
//! servers ([`Cache::item_keys`]); the rebuild lock, the trace and [`LoadContext::key`] stay
//! on the logical `key`.
//!
//! The implementation is split by concern: `record` (the envelope, writing a record,
//! classifying a read), `copies` (item keys, reading one copy and falling back, writing
//! all), `soft` (soft expiry, XFetch, the rebuild lock and waiting), `lease` (the `mg N/R`
//! path) and `load` (tag versions, read-the-master, running the loader, storing its value).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memkit_types::{Clock, Memcache, SystemClock};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::Instrument;

use super::policy::{Policy, Protection};
use super::tags::Tags;
use super::trace::{Letter, TraceSink};
use crate::Result;

mod copies;
mod lease;
mod load;
mod record;
mod soft;

use record::State;

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

/// Where the backend keeps a key: the index of the server that holds it, `None` when
/// unknown ([`CacheBuilder::placement`]).
pub type ServerOf = Arc<dyn Fn(&[u8]) -> Option<usize> + Send + Sync>;

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
    placement: Option<ServerOf>,
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
    placement: Option<ServerOf>,
}

impl<M> std::fmt::Debug for CacheBuilder<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheBuilder")
            .field("clock", &self.clock)
            .field("trace", &self.trace)
            .field("seed", &self.seed)
            .field("tag_local_ttl", &self.tag_local_ttl)
            .field("placement", &self.placement.is_some())
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

    /// How the backend places keys: `server_of(key)` is the index of the server that holds
    /// `key`, `None` when unknown (default: unknown, for every key). With it, the copies of a
    /// value ([`Policy::hot_copies`], [`Policy::replicas`]) get names that land on distinct
    /// servers: copy 0 is `<key>#0`, and each next copy is the first `<key>#<j>` placed on a
    /// server holding no copy yet (on the least loaded one once every server holds one).
    /// [`Cache::item_keys`] lists them. Without it, the backend's [`Memcache::home_server`]
    /// decides: a `memkit_client::Cluster` answers from the ring of all its servers, which
    /// does not move when a server is marked down, so a value's copy names never change.
    /// When neither knows (`None`), copy `i` is `<key>#<i>` ([`Policy::item_keys`]), whose
    /// servers only the hash decides.
    ///
    /// Set it when the backend hides its placement: a wrapper that does not forward
    /// `home_server`, or a pool another client manages. `.placement(|_| None)` turns spreading
    /// off. See `docs/cookbook/caching-hot-keys.md`.
    pub fn placement<F>(mut self, server_of: F) -> Self
    where
        F: Fn(&[u8]) -> Option<usize> + Send + Sync + 'static,
    {
        self.placement = Some(Arc::new(server_of));
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
                placement: self.placement,
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
            placement: None,
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
        for k in self.item_keys(key, policy)? {
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
        let keys = self.item_keys(key, policy)?;
        let versions = self.tag_versions(policy).await?;
        let (bytes, opts) = self.record(policy, value, &versions, 0)?;
        self.write_copies(&keys, &bytes, &opts).await.map(|_| ())
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
