//! Warm restart (`-e FILE`, memcached 1.5.18+'s restartable cache): a graceful stop
//! (`SIGUSR1`, or `shutdown graceful` with `-A`, which raises it as memcached does) writes
//! the cache to FILE; the next start with the same `-m`, `-I` and `-e` serves it again.
//! The file format and its checks are the engine's ([`memkit_engine::Engine::warm_save`],
//! [`memkit_engine::Engine::warm_restore`]); this is when they run and what is logged.
//!
//! memcached stops gracefully on `SIGUSR1` with or without `-e` ("Gracefully stopping"), so
//! memkitd does too; only with `-e` is anything written.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use memkit_engine::Engine;

use crate::Settings;
use crate::state::Shared;

/// Set once this process listens for `SIGUSR1`: only then may `shutdown graceful` raise it
/// (in a process that does not, such as a test running servers in-process, the signal's
/// default action would kill it).
static USR1_HANDLED: AtomicBool = AtomicBool::new(false);

/// The engine of `cfg` for a start with `-e`: what the file holds, or an empty one with the
/// reason logged. Without `-e`, an empty engine. (With the flash tier, `cfg` holds the store,
/// already restored: the file's stubs are kept where it still holds their values.)
pub fn engine_for(settings: &Settings, cfg: memkit_engine::EngineConfig) -> Engine {
    let Some(path) = &settings.memory_file else {
        return Engine::new(cfg);
    };
    let (engine, outcome) = Engine::warm_restore(cfg, path);
    match outcome {
        Ok(r) => tracing::info!(
            target: crate::log::LIFECYCLE,
            "warm restart: restored {} items ({:.1} MiB) from {} in {} ms; \
             {} expired during the {} s down{}",
            r.items,
            r.bytes as f64 / f64::from(1 << 20),
            path.display(),
            r.elapsed.as_millis(),
            r.expired,
            r.gap_secs,
            match r.dropped {
                0 => String::new(),
                n => format!(", {n} did not fit"),
            }
        ),
        Err(e) => tracing::warn!("warm restart: {} {e}; starting empty", path.display()),
    }
    engine
}

/// How the server was told to stop: a graceful stop keeps the cache (with `-e`).
#[derive(Debug, Default)]
pub struct Stop {
    graceful: Arc<AtomicBool>,
}

impl Stop {
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Resolves when `other` does (SIGINT, SIGTERM, ...) or at `SIGUSR1`, which marks the
    /// stop graceful. Must be called inside the runtime.
    pub fn or_usr1(&self, other: impl Future<Output = ()>) -> impl Future<Output = ()> {
        use tokio::signal::unix::{SignalKind, signal};
        let usr1 = signal(SignalKind::user_defined1()).ok();
        USR1_HANDLED.store(usr1.is_some(), Ordering::Relaxed);
        let graceful = self.graceful.clone();
        let other = Box::pin(other);
        async move {
            let Some(mut usr1) = usr1 else {
                return other.await;
            };
            tokio::select! {
                _ = other => {}
                _ = usr1.recv() => {
                    // memcached's line for a graceful stop.
                    tracing::info!(target: crate::log::LIFECYCLE, "Gracefully stopping");
                    graceful.store(true, Ordering::Relaxed);
                }
            }
        }
    }

    /// Whether it was `SIGUSR1` (or `shutdown graceful`).
    pub fn is_graceful(&self) -> bool {
        self.graceful.load(Ordering::Relaxed)
    }
}

/// After the listeners have stopped: with `-e` and a graceful stop, writes the cache to the
/// file for the next start, and the flash tier's state beside it ([`crate::flash::save`]).
pub fn save_on_stop(shared: &Shared, stop: &Stop) {
    let Some(path) = &shared.settings.memory_file else {
        return;
    };
    if !stop.is_graceful() || shared.persist.is_some() {
        return;
    }
    match shared.engine.warm_save_and_clear(path) {
        Ok(s) => {
            tracing::info!(
                target: crate::log::LIFECYCLE,
                "warm restart: saved {} items ({:.1} MiB) to {} in {} ms",
                s.items,
                s.bytes as f64 / f64::from(1 << 20),
                path.display(),
                s.elapsed.as_millis()
            );
            crate::flash::save(&shared.engine, path);
        }
        Err(e) => tracing::error!(
            "warm restart: could not save to {}: {e}; the next start will be empty",
            path.display()
        ),
    }
}

/// `shutdown graceful`: as memcached, raise `SIGUSR1` so it stops as the signal would.
/// Returns `false` when this process does not handle the signal (the caller then stops
/// the server as a plain `shutdown` does).
pub fn raise_graceful() -> bool {
    if !USR1_HANDLED.load(Ordering::Relaxed) {
        return false;
    }
    // SAFETY: raise(2) with a valid signal number has no memory-safety preconditions.
    unsafe { libc::raise(libc::SIGUSR1) == 0 }
}
