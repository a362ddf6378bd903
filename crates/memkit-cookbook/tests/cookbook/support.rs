//! Shared fixtures: an embedded store on a manual clock.

use std::sync::Arc;

use memkit_engine::{Embedded, EngineConfig};
use memkit_types::{Clock, ManualClock};

/// A Unix time that is a multiple of 600, 60 and 10: period boundaries line up.
pub const T0: u64 = 1_700_000_400;

/// A manual clock at [`T0`] and a 64 MiB embedded store on it.
pub fn store() -> (Embedded, ManualClock) {
    store_with_memory(64 << 20)
}

pub fn store_with_memory(bytes: usize) -> (Embedded, ManualClock) {
    let clock = ManualClock::new(T0);
    let mc = Embedded::new(EngineConfig::with_memory(bytes).clock(Arc::new(clock.clone())));
    (mc, clock)
}

pub fn dyn_clock(c: &ManualClock) -> Arc<dyn Clock> {
    Arc::new(c.clone())
}

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

pub fn mt_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .build()
        .unwrap()
}

/// A current-thread runtime with I/O and time, for network clients.
pub fn net_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A multi-threaded runtime with I/O and time, for network clients driven by many tasks.
pub fn mt_net_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
