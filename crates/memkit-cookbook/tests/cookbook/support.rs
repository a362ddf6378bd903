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

/// A store whose every command first yields to the scheduler, as a network round trip does:
/// the embedded store's futures complete on first poll, so without this, tasks racing on it
/// would interleave only at the runtime's whim, never between two commands of one call.
#[derive(Debug, Clone)]
pub struct Yielding<M>(pub M);

impl<M: memkit_types::Memcache> memkit_types::Memcache for Yielding<M> {
    async fn get_multi(
        &self,
        keys: &[&[u8]],
        opts: &memkit_types::GetOptions,
    ) -> memkit_types::Result<Vec<Option<memkit_types::Item>>> {
        tokio::task::yield_now().await;
        self.0.get_multi(keys, opts).await
    }

    async fn store(
        &self,
        key: &[u8],
        value: &[u8],
        opts: &memkit_types::StoreOptions,
    ) -> memkit_types::Result<memkit_types::Stored> {
        tokio::task::yield_now().await;
        self.0.store(key, value, opts).await
    }

    async fn delete_with(
        &self,
        key: &[u8],
        opts: &memkit_types::DeleteOptions,
    ) -> memkit_types::Result<memkit_types::DeleteOutcome> {
        tokio::task::yield_now().await;
        self.0.delete_with(key, opts).await
    }

    async fn arithmetic(
        &self,
        key: &[u8],
        opts: &memkit_types::ArithOptions,
    ) -> memkit_types::Result<memkit_types::ArithOutcome> {
        tokio::task::yield_now().await;
        self.0.arithmetic(key, opts).await
    }

    async fn touch(
        &self,
        key: &[u8],
        exptime: memkit_types::Exptime,
    ) -> memkit_types::Result<bool> {
        tokio::task::yield_now().await;
        self.0.touch(key, exptime).await
    }

    async fn flush_all(&self, delay: u32) -> memkit_types::Result<()> {
        tokio::task::yield_now().await;
        self.0.flush_all(delay).await
    }
}
