//! A clock that lies: another clock shifted by a signed offset, for running one client ahead
//! of or behind the server (and the other clients) it shares keys with.
//!
//! Hosts' clocks disagree by NTP's error, and memcached's own clock ticks once a second at a
//! phase of its own. Recipes that derive keys or TTLs from the time must hold under such
//! disagreement; a test gives each simulated host a [`SkewedClock`] over the real one.
//!
//! ```
//! use memkit_testkit::clock::SkewedClock;
//! use memkit_types::{Clock, ManualClock};
//! use std::sync::Arc;
//!
//! let real = ManualClock::new(1_700_000_000);
//! let ahead = SkewedClock::new(Arc::new(real.clone()), 2_000);
//! assert_eq!(ahead.now_secs(), 1_700_000_002);
//! ahead.set_offset_millis(-1_500);
//! assert_eq!(ahead.now_millis(), 1_699_999_998_500);
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use memkit_types::{Clock, SystemClock};

/// `inner`'s time plus an offset in milliseconds (negative: behind). Clones share the offset,
/// so a test can move a running client's clock.
#[derive(Debug, Clone)]
pub struct SkewedClock {
    inner: Arc<dyn Clock>,
    offset_ms: Arc<AtomicI64>,
}

impl SkewedClock {
    /// `inner` shifted by `offset_ms` milliseconds.
    pub fn new(inner: Arc<dyn Clock>, offset_ms: i64) -> Self {
        SkewedClock {
            inner,
            offset_ms: Arc::new(AtomicI64::new(offset_ms)),
        }
    }

    /// The system clock shifted by `offset_ms` milliseconds.
    pub fn system(offset_ms: i64) -> Self {
        Self::new(Arc::new(SystemClock), offset_ms)
    }

    /// The current offset in milliseconds.
    pub fn offset_millis(&self) -> i64 {
        self.offset_ms.load(Ordering::SeqCst)
    }

    /// Changes the offset for this clock and its clones.
    pub fn set_offset_millis(&self, offset_ms: i64) {
        self.offset_ms.store(offset_ms, Ordering::SeqCst);
    }
}

impl Clock for SkewedClock {
    fn now_millis(&self) -> u64 {
        self.inner
            .now_millis()
            .saturating_add_signed(self.offset_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memkit_types::ManualClock;

    #[test]
    fn behind_saturates_at_the_epoch_and_clones_share_the_offset() {
        let real = ManualClock::new(1);
        let c = SkewedClock::new(Arc::new(real.clone()), -5_000);
        assert_eq!(c.now_millis(), 0);
        let twin = c.clone();
        twin.set_offset_millis(250);
        assert_eq!(c.now_millis(), 1_250);
        real.advance(1);
        assert_eq!(c.now_secs(), 2);
    }
}
