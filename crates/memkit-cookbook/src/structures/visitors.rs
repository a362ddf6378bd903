//! The visitor counter with current and shadow keys (seed 000/001 "Счетчик посетителей").
//!
//! See `docs/cookbook/visitor-counter.md`.
//!
//! Two keys, `visitors:<name>:0` and `visitors:<name>:1`. Time is cut into periods of `T`
//! seconds; in even periods key 0 is *current* (read) and key 1 is the *shadow* (incremented),
//! in odd periods the other way round. The choice is `now % 2T < T`, computed from the clock
//! on every call rather than flipped by a timer, so all hosts with synchronised clocks agree.
//!
//! The shadow key is created with the seed discussion's compensated TTL `2T - now % T`, so it
//! expires exactly at the end of the period in which it is read — the instant it becomes the
//! shadow again — however late in its shadow period it was created. (The seed's first listing
//! used a plain `2T`: a key created late in its period then survived into its next shadow
//! period, adding last cycle's count to the new one before vanishing mid-count. That listing
//! also read `T` without `self.`; here the period is a field.)
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use std::sync::Arc;
//! use memkit_cookbook::VisitorCounter;
//! use memkit_engine::{Embedded, EngineConfig};
//! use memkit_types::ManualClock;
//!
//! let clock = ManualClock::new(1_700_000_400); // a multiple of 2T = 600
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

use super::incr_or_create;
use crate::codec::parse_u64;
use crate::{Error, Result};

/// Unique visitors over the last completed period of `T` seconds.
#[derive(Debug, Clone)]
pub struct VisitorCounter<M> {
    mc: M,
    keys: [Vec<u8>; 2],
    period: u64,
    clock: Arc<dyn Clock>,
}

impl<M: Memcache> VisitorCounter<M> {
    /// The counter `name` with period `period` seconds, on `clock`.
    ///
    /// # Panics
    /// If `period` is 0 or above 15 days (the shadow TTL `2T` must stay a relative expiry,
    /// at most 30 days).
    pub fn new(mc: M, name: &str, period: u64, clock: Arc<dyn Clock>) -> Self {
        assert!(
            (1..=15 * 86_400).contains(&period),
            "period must be 1 s ..= 15 days"
        );
        VisitorCounter {
            mc,
            keys: [
                crate::codec::key("visitors", &format!("{name}:0")),
                crate::codec::key("visitors", &format!("{name}:1")),
            ],
            period,
            clock,
        }
    }

    /// The period `T` in seconds.
    pub fn period(&self) -> u64 {
        self.period
    }

    /// The index of the current (read) key at `now`: 0 or 1.
    pub fn active_at(&self, now: u64) -> usize {
        usize::from(now % (2 * self.period) >= self.period)
    }

    /// The TTL a shadow key created at `now` gets: `2T - now % T` — it expires exactly at
    /// the end of the period after the current one.
    pub fn shadow_ttl_at(&self, now: u64) -> u64 {
        2 * self.period - now % self.period
    }

    /// The two keys, `[key 0, key 1]`.
    pub fn keys(&self) -> &[Vec<u8>; 2] {
        &self.keys
    }

    /// Counts one visitor (unique within `T`, which the caller decides — e.g. by a
    /// timestamp in the session) in the shadow key. One round trip.
    pub async fn increment(&self) -> Result<u64> {
        let now = self.clock.now_secs();
        let shadow = &self.keys[1 - self.active_at(now)];
        let ttl = Exptime::secs(self.shadow_ttl_at(now) as u32);
        incr_or_create(&self.mc, shadow, 1, ttl).await
    }

    /// Visitors counted during the previous period (0 if its key is gone). One round trip.
    pub async fn value(&self) -> Result<u64> {
        let now = self.clock.now_secs();
        match self.mc.get_value(&self.keys[self.active_at(now)]).await? {
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
