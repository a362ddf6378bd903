//! The visitor counter with current and shadow keys (seed 000/001 "Счетчик посетителей").
//!
//! See `docs/cookbook/visitor-counter.md`.
//!
//! Time is cut into periods of `T` seconds, numbered `p = now / T`. Visitors of period `p`
//! are counted in the *shadow* key `visitors:<name>:<p>`; [`VisitorCounter::value`] reads
//! the *current* key, the previous period's `visitors:<name>:<p - 1>`, which no longer
//! changes. Both are chosen from the clock on every call rather than flipped by a timer.
//!
//! The shadow key is created with the seed discussion's compensated TTL `2T - now % T`, so
//! it lives to the end of the period in which it is read however late in its own period it
//! was created, plus [`MAX_CLOCK_SKEW_SECS`](super::MAX_CLOCK_SKEW_SECS) + 1 so that memcached's
//! once-a-second clock and a producer whose clock runs ahead cannot end it while it is still
//! read. The seed alternated two keys, so the TTL had to end exactly when the key became the
//! shadow again; any disagreement between clocks then added one period's count to the next.
//! Keys named by period number are never reused, so the margin is safe. (The seed's first
//! listing used a plain `2T`, and read `T` without `self.`; here the period is a field.)
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use std::sync::Arc;
//! use memkit_cookbook::VisitorCounter;
//! use memkit_engine::{Embedded, EngineConfig};
//! use memkit_types::ManualClock;
//!
//! let clock = ManualClock::new(1_700_000_400); // a multiple of T = 300
//! let mc = Embedded::new(EngineConfig::with_memory(64 << 20).clock(Arc::new(clock.clone())));
//! let visitors = VisitorCounter::new(mc, "site", 300, Arc::new(clock.clone()));
//! for _ in 0..3 {
//!     visitors.increment().await?; // counted in the shadow key
//! }
//! assert_eq!(visitors.value().await?, 0); // the current key shows the previous period
//! clock.advance(300);
//! assert_eq!(visitors.value().await?, 3);
//! # Ok::<(), memkit_cookbook::Error>(()) }).unwrap();
//! ```

use std::sync::Arc;

use memkit_types::{Clock, Exptime, Memcache};

use super::{EXPIRY_MARGIN_SECS, incr_or_create};
use crate::codec::parse_u64;
use crate::{Error, Result};

/// Unique visitors over the last completed period of `T` seconds.
#[derive(Debug, Clone)]
pub struct VisitorCounter<M> {
    mc: M,
    name: String,
    period: u64,
    clock: Arc<dyn Clock>,
}

impl<M: Memcache> VisitorCounter<M> {
    /// The counter `name` with period `period` seconds, on `clock`.
    ///
    /// # Panics
    /// If `period` is 0 or above 15 days minus the expiry margin (the shadow TTL must stay a
    /// relative expiry, at most 30 days).
    pub fn new(mc: M, name: &str, period: u64, clock: Arc<dyn Clock>) -> Self {
        assert!(
            period >= 1 && 2 * period + EXPIRY_MARGIN_SECS <= 30 * 86_400,
            "period must be 1 s ..= 15 days"
        );
        VisitorCounter {
            mc,
            name: name.to_owned(),
            period,
            clock,
        }
    }

    /// The period `T` in seconds.
    pub fn period(&self) -> u64 {
        self.period
    }

    /// The number of the period `now` falls in: `now / T`.
    pub fn period_at(&self, now: u64) -> u64 {
        now / self.period
    }

    /// The key counting period `p` (the shadow during `p`, the current key during `p + 1`).
    pub fn key_for(&self, p: u64) -> Vec<u8> {
        crate::codec::key("visitors", &format!("{}:{p}", self.name))
    }

    /// The keys at `now`: `[current (read), shadow (incremented)]`.
    pub fn keys_at(&self, now: u64) -> [Vec<u8>; 2] {
        let p = self.period_at(now);
        [self.key_for(p.saturating_sub(1)), self.key_for(p)]
    }

    /// The TTL a shadow key created at `now` gets: `2T - now % T` — the end of the period
    /// after the current one — plus the expiry margin.
    pub fn shadow_ttl_at(&self, now: u64) -> u64 {
        2 * self.period - now % self.period + EXPIRY_MARGIN_SECS
    }

    /// Counts one visitor (unique within `T`, which the caller decides — e.g. by a
    /// timestamp in the session) in the shadow key. One round trip.
    pub async fn increment(&self) -> Result<u64> {
        let now = self.clock.now_secs();
        let [_, shadow] = self.keys_at(now);
        let ttl = Exptime::secs(self.shadow_ttl_at(now) as u32);
        incr_or_create(&self.mc, &shadow, 1, ttl).await
    }

    /// Visitors counted during the previous period (0 if its key is gone). One round trip.
    pub async fn value(&self) -> Result<u64> {
        let [current, _] = self.keys_at(self.clock.now_secs());
        match self.mc.get_value(&current).await? {
            Some(v) => parse_u64(&v),
            None => Ok(0),
        }
    }
    /// [`value`](Self::value) with the seed's cosmetic suggestion: a small bump (up to
    /// `percent`% of the value, taken from `noise` in `0.0..=1.0`) so the shown number does not
    /// stand still for a whole period. The caller supplies the randomness.
    pub async fn value_for_display(&self, percent: f64, noise: f64) -> Result<u64> {
        if !(0.0..=1.0).contains(&noise) {
            return Err(Error::Invalid("noise must be in 0..=1".into()));
        }
        let v = self.value().await?;
        Ok(v + (v as f64 * percent / 100.0 * noise).round() as u64)
    }
}
