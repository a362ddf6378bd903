//! The state machine's time: the log's, not the node's.
//!
//! Every replica must judge expiry the same way when it applies an entry, whenever it
//! applies it (at once, after a restart, from a snapshot a day later). So the engine under
//! the state machine reads [`LogClock`]: the largest leader stamp applied so far. It is a
//! function of the log prefix alone, and it never goes back, even when a new leader's
//! clock is behind the old one's (the max absorbs that).
//!
//! Reads happen between entries. A read runs the engine at the log clock too (so nothing a
//! read does, such as unlinking an item it finds expired, can happen at a time later than
//! an entry still to be applied: that would let a replica drop an item the leader's next
//! entry still sees), and then judges expiry itself against the node's own clock, bounded
//! below by the log clock (see `Store::read`; memkitd asks its engine the same with
//! `GetOptions::read_at_unix`, which leaves what is dead only then in place). The
//! assumption: nodes' clocks roughly agree, and expiry seen by reads is local to the node
//! reading.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use memkit_types::Clock;

/// The largest leader stamp applied, in Unix milliseconds. Clones share it.
#[derive(Debug, Clone, Default)]
pub struct LogClock {
    millis: Arc<AtomicU64>,
}

impl LogClock {
    /// A clock standing at `millis`.
    pub fn at(millis: u64) -> LogClock {
        LogClock {
            millis: Arc::new(AtomicU64::new(millis)),
        }
    }

    /// Moves to `stamp_ms` if that is later: applying an entry.
    pub fn advance_to(&self, stamp_ms: u64) {
        self.millis.fetch_max(stamp_ms, Ordering::SeqCst);
    }

    /// Sets the time outright: installing a snapshot, whose clock is the log's at its end.
    pub fn set(&self, millis: u64) {
        self.millis.store(millis, Ordering::SeqCst);
    }
}

impl Clock for LogClock {
    fn now_millis(&self) -> u64 {
        self.millis.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_goes_back() {
        let c = LogClock::at(5_000);
        c.advance_to(9_000);
        c.advance_to(7_000);
        assert_eq!(c.now_secs(), 9);
        c.set(1_000);
        assert_eq!(c.clone().now_millis(), 1_000);
    }
}
