//! Time, injected: the engine and the cookbook never read the system clock directly, so
//! tests advance a [`ManualClock`] instead of sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A source of wall-clock time.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_millis(&self) -> u64;

    /// Whole seconds since the Unix epoch: memcached's granularity.
    fn now_secs(&self) -> u64 {
        self.now_millis() / 1000
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now_millis(&self) -> u64 {
        (**self).now_millis()
    }
}

/// The system's real-time clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    /// Read once per command, so straight from clock_gettime(2): `SystemTime`'s checked
    /// subtraction and 128-bit millisecond arithmetic would cost twice the read itself.
    fn now_millis(&self) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime(2) writes the timespec it is given; CLOCK_REALTIME always
        // exists.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
        (ts.tv_sec.max(0) as u64) * 1000 + (ts.tv_nsec as u64) / 1_000_000
    }
}

/// A clock that moves only when told to. Clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    millis: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock standing at `unix_secs` seconds after the epoch.
    pub fn new(unix_secs: u64) -> Self {
        ManualClock {
            millis: Arc::new(AtomicU64::new(unix_secs * 1000)),
        }
    }

    /// Moves time forward by `secs` seconds.
    pub fn advance(&self, secs: u64) {
        self.millis.fetch_add(secs * 1000, Ordering::SeqCst);
    }

    /// Moves time forward by `millis` milliseconds.
    pub fn advance_millis(&self, millis: u64) {
        self.millis.fetch_add(millis, Ordering::SeqCst);
    }

    /// Sets the time to `unix_secs` seconds after the epoch.
    pub fn set(&self, unix_secs: u64) {
        self.millis.store(unix_secs * 1000, Ordering::SeqCst);
    }
}

impl Default for ManualClock {
    /// 2024-01-01T00:00:00Z: far enough from the epoch that absolute expiry times work.
    fn default() -> Self {
        ManualClock::new(1_704_067_200)
    }
}

impl Clock for ManualClock {
    fn now_millis(&self) -> u64 {
        self.millis.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(100);
        let shared = c.clone();
        assert_eq!(c.now_secs(), 100);
        c.advance(5);
        c.advance_millis(1500);
        assert_eq!(shared.now_millis(), 106_500);
        assert_eq!(shared.now_secs(), 106);
        c.set(7);
        assert_eq!(shared.now_secs(), 7);
    }

    #[test]
    fn system_clock_is_after_2020() {
        assert!(SystemClock.now_secs() > 1_577_836_800);
    }
}
