//! The atomic counter (seed 000 "Атомарный счетчик") and the view counter (seed 003/004
//! "Счетчик просмотров").
//!
//! See `docs/cookbook/counter.md` and `docs/cookbook/view-counter.md`.
//!
//! [`Counter::incr`] is one `ma <key> N0 J<delta> D<delta>`: increment, or create holding
//! `delta` when absent, atomically. Two processes that both find the key missing cannot both
//! create it (the seed's `incr`/`add`/`incr` loop made the same guarantee in up to three
//! round trips). No increment is lost or doubled while the key lives; if memcached evicts it,
//! counting restarts from zero.
//!
//! [`ViewCounter::hit`] counts a view of something whose total lives in a database: `incr`;
//! on a miss, read the total from the caller's source of truth, and `add` total + 1. If
//! another process `add`ed first, `incr` its counter instead: no view is lost (the seeds'
//! `set` lost one).
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use memkit_cookbook::{Counter, ViewCounter};
//! use memkit_engine::Embedded;
//!
//! let mc = Embedded::with_defaults();
//! let downloads = Counter::new(mc.clone(), "downloads");
//! assert_eq!(downloads.incr(1).await?, 1);
//! assert_eq!(downloads.incr(5).await?, 6);
//! assert_eq!(downloads.value().await?, 6);
//!
//! let views = ViewCounter::new(mc.clone(), "article:42");
//! // On a miss the total comes from the database (here: 1000 views so far).
//! let n = views.hit(|| async { Ok::<u64, std::io::Error>(1000) }).await?;
//! assert_eq!(n, 1001);
//! assert_eq!(views.hit(|| async { Ok::<u64, std::io::Error>(0) }).await?, 1002);
//! # Ok::<(), memkit_cookbook::Error>(()) }).unwrap();
//! ```

use std::future::Future;

use memkit_types::{ArithMode, Exptime, Memcache};

use super::{MAX_ATTEMPTS, arith_or_create, ttl_secs};
use crate::codec::parse_u64;
use crate::{Error, Result};

/// A counter that many processes increment at once (key `counter:<name>`).
#[derive(Debug, Clone)]
pub struct Counter<M> {
    mc: M,
    key: Vec<u8>,
    ttl: Exptime,
}

impl<M: Memcache> Counter<M> {
    /// The counter `name`, never expiring.
    pub fn new(mc: M, name: &str) -> Self {
        Counter {
            mc,
            key: crate::codec::key("counter", name),
            ttl: Exptime::NEVER,
        }
    }

    /// The same counter, created with a TTL of `secs` seconds (0: never). The TTL is set
    /// when the key is created; increments do not extend it.
    pub fn with_ttl(mut self, secs: u64) -> Self {
        self.ttl = ttl_secs(secs);
        self
    }

    /// The key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// Adds `delta` and returns the new value (wrapping at 2^64, as memcached does). One
    /// round trip.
    pub async fn incr(&self, delta: u64) -> Result<u64> {
        arith_or_create(&self.mc, &self.key, ArithMode::Incr, delta, delta, self.ttl).await
    }

    /// Subtracts `delta`, stopping at 0, and returns the new value. One round trip.
    pub async fn decr(&self, delta: u64) -> Result<u64> {
        arith_or_create(&self.mc, &self.key, ArithMode::Decr, delta, 0, self.ttl).await
    }

    /// The current value; 0 when the key is absent. One round trip.
    pub async fn value(&self) -> Result<u64> {
        match self.mc.get_value(&self.key).await? {
            Some(v) => parse_u64(&v),
            None => Ok(0),
        }
    }

    /// Deletes the counter (back to 0).
    pub async fn reset(&self) -> Result<()> {
        self.mc.delete(&self.key).await?;
        Ok(())
    }
}

/// A view counter cached in memcached and seeded from a source of truth (key
/// `views:<name>`).
#[derive(Debug, Clone)]
pub struct ViewCounter<M> {
    mc: M,
    key: Vec<u8>,
    ttl: Exptime,
}

impl<M: Memcache> ViewCounter<M> {
    /// The view counter `name`, never expiring.
    pub fn new(mc: M, name: &str) -> Self {
        ViewCounter {
            mc,
            key: crate::codec::key("views", name),
            ttl: Exptime::NEVER,
        }
    }

    /// The same counter, cached for `secs` seconds after it is seeded (0: never).
    pub fn with_ttl(mut self, secs: u64) -> Self {
        self.ttl = ttl_secs(secs);
        self
    }

    /// The key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// Counts one view and returns the new total. One round trip on a hit; on a miss
    /// `load` is called (once) for the total so far, then `add` (two or three round trips).
    pub async fn hit<F, Fut, E>(&self, load: F) -> Result<u64>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = std::result::Result<u64, E>>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let mut load = Some(load);
        let mut base: Option<u64> = None;
        for _ in 0..MAX_ATTEMPTS {
            if let Some(v) = self.mc.incr(&self.key, 1).await? {
                return Ok(v);
            }
            let total = match base {
                Some(b) => b,
                None => {
                    let f = load.take().expect("loaded at most once");
                    let b = f().await.map_err(|e| Error::Source(e.into()))?;
                    base = Some(b);
                    b
                }
            };
            let next = total.wrapping_add(1);
            if self
                .mc
                .add(&self.key, next.to_string().as_bytes(), 0, self.ttl)
                .await?
            {
                return Ok(next);
            }
            // Someone else seeded it first: count our view on theirs.
        }
        Err(Error::Contended(MAX_ATTEMPTS))
    }

    /// The cached total, `None` when not cached (read the source of truth then).
    pub async fn cached(&self) -> Result<Option<u64>> {
        self.mc
            .get_value(&self.key)
            .await?
            .map(|v| parse_u64(&v))
            .transpose()
    }
}
