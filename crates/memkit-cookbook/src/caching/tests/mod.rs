//! Tests of the caching module: keys (property tests), policies and the stampede on the
//! embedded store under tokio's paused clock, tags (property test), trace, refresh and
//! warm-up, and the same techniques against memkitd and real memcached through the client.

mod cluster;
mod copies;
mod keys;
mod net;
mod policies;
mod stampede;
mod tags;

use std::sync::Arc;

use memkit_engine::{Embedded, EngineConfig};
use memkit_types::Clock;

/// A wall clock that follows tokio's (pausable) clock: the engine's expiry, soft expiry
/// and tag versions all move with `tokio::time::advance` and auto-advance.
#[derive(Debug)]
pub(crate) struct TokioClock {
    base_ms: u64,
    start: tokio::time::Instant,
}

impl TokioClock {
    /// Must be created inside the runtime.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(TokioClock {
            base_ms: 1_704_067_200_000,
            start: tokio::time::Instant::now(),
        })
    }
}

impl Clock for TokioClock {
    fn now_millis(&self) -> u64 {
        self.base_ms + self.start.elapsed().as_millis() as u64
    }
}

/// An embedded store on `clock`.
pub(crate) fn embedded(clock: Arc<dyn Clock>) -> Embedded {
    Embedded::new(EngineConfig::with_memory(64 << 20).clock(clock))
}
