//! The embedded store: the engine behind the [`Memcache`] trait, so code written against it
//! moves to a server or a cluster by changing its constructor.

use std::sync::Arc;
use std::time::Duration;

use memkit_types::{
    ArithOptions, ArithOutcome, DeleteOptions, DeleteOutcome, Exptime, GetOptions, Item, Memcache,
    Result, StoreOptions, Stored, validate_key,
};

use crate::{Engine, EngineConfig};

/// An in-process memcached. Cheap to clone: clones share the store.
#[derive(Debug, Clone)]
pub struct Embedded {
    engine: Arc<Engine>,
}

impl Embedded {
    /// A store with `cfg`.
    pub fn new(cfg: EngineConfig) -> Self {
        Self::from(Engine::new(cfg))
    }

    /// A store with memcached's defaults (64 MiB, 1 MiB items, evicting).
    pub fn with_defaults() -> Self {
        Self::new(EngineConfig::default())
    }

    /// The engine itself, for statistics or the synchronous API.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Starts a background thread that reclaims expired items every `every`, for as long as
    /// any clone of this store lives.
    pub fn spawn_reclaimer(&self, every: Duration) -> std::thread::JoinHandle<()> {
        let weak = Arc::downgrade(&self.engine);
        std::thread::spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.reclaim_expired(64);
                drop(engine);
                std::thread::sleep(every);
            }
        })
    }
}

impl Default for Embedded {
    fn default() -> Self {
        Self::with_defaults()
    }
}

impl From<Engine> for Embedded {
    fn from(engine: Engine) -> Self {
        let engine = Arc::new(engine);
        engine.attach_flash();
        Embedded { engine }
    }
}

impl From<Arc<Engine>> for Embedded {
    /// The [`Memcache`] face of an engine shared with others (a persistent engine, say).
    fn from(engine: Arc<Engine>) -> Self {
        Embedded { engine }
    }
}

// Keys are checked with the text protocol's rules here, not in the engine: the server's
// meta commands may carry binary keys (base64 `b` flag) that the engine must store, while an
// embedded caller must see exactly what a text-protocol client would.
impl Memcache for Embedded {
    async fn get_multi(&self, keys: &[&[u8]], opts: &GetOptions) -> Result<Vec<Option<Item>>> {
        keys.iter()
            .map(|k| {
                validate_key(k)?;
                self.engine.get(k, opts)
            })
            .collect()
    }

    async fn store(&self, key: &[u8], value: &[u8], opts: &StoreOptions) -> Result<Stored> {
        validate_key(key)?;
        self.engine.store(key, value, opts)
    }

    async fn delete_with(&self, key: &[u8], opts: &DeleteOptions) -> Result<DeleteOutcome> {
        validate_key(key)?;
        self.engine.delete(key, opts)
    }

    async fn arithmetic(&self, key: &[u8], opts: &ArithOptions) -> Result<ArithOutcome> {
        validate_key(key)?;
        self.engine.arithmetic(key, opts)
    }

    async fn touch(&self, key: &[u8], exptime: Exptime) -> Result<bool> {
        validate_key(key)?;
        self.engine.touch(key, exptime)
    }

    async fn flush_all(&self, delay: u32) -> Result<()> {
        // The trait takes memcached's argument (absolute above 30 days); the engine a delay.
        let now = self.engine.clock().now_secs();
        self.engine.try_flush_all(Exptime::flush_delay(delay, now))
    }
}
