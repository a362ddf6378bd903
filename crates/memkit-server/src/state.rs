//! The state every connection shares ([`Shared`]): the engine and the persistent store under
//! it, the settings, the counters, the connection registry ([`live`]), and what `-Y` and `-Z`
//! loaded ([`Security`]).
//!
//! A leaf: nothing here knows how a connection's bytes move. The accept loop
//! ([`crate::server`]) and the drivers ([`crate::evloop`], [`crate::task`]) sit above it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::Instant;

use memkit_engine::Engine;
use memkit_persist::DiskStore;
use memkit_protocol::Limits;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::config::Settings;
use crate::watch::Watchers;

pub mod gate;
pub mod live;
pub use live::{ConnAddrs, ConnLive, ConnState, Moved, Registered};

/// A counter every request adds to, kept a stripe a thread and summed when read: worker
/// threads adding to one cache line would pass it between their cores at each request.
#[derive(Debug, Default)]
pub struct Striped([Stripe; STRIPES]);

/// Stripes of a [`Striped`]: threads past this many share them.
const STRIPES: usize = 8;

#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe(AtomicU64);

thread_local! {
    /// This thread's stripe, dealt in turn to threads as they first count.
    static STRIPE: usize = {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES
    };
}

impl Striped {
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        let i = STRIPE.with(|i| *i);
        self.0[i].0.fetch_add(n, Ordering::Relaxed);
    }

    /// The sum of every stripe.
    pub fn load(&self) -> u64 {
        self.0.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
    }

    /// Back to zero (`stats reset`).
    pub fn reset(&self) {
        self.0.iter().for_each(|s| s.0.store(0, Ordering::Relaxed));
    }
}

/// Server-level counters (the engine keeps the item counters).
#[derive(Debug, Default)]
pub struct Counters {
    pub curr_connections: AtomicU64,
    pub total_connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub bytes_read: Striped,
    pub bytes_written: Striped,
    pub cmd_meta: AtomicU64,
    /// SASL attempts and failures (`auth_cmds` / `auth_errors` add the `-Y` ones).
    pub sasl_cmds: AtomicU64,
    pub sasl_errors: AtomicU64,
    /// Connections closed by `-o idle_timeout`.
    pub idle_kicks: AtomicU64,
    /// Times a worker loop's connection gave way to its neighbours after `-R` requests with
    /// more input waiting (memcached's `conn_yields`).
    pub conn_yields: AtomicU64,
    /// Times an io_uring worker loop moved between its ring and its epoll, its load
    /// crossing the line between them (`memkit_io_moves`).
    pub io_moves: AtomicU64,
    /// Accept failures (out of descriptors...) after which accepting paused, and the time
    /// paused (memcached's `listen_disabled_num`, `time_in_listen_disabled_us`).
    pub listen_disabled_num: AtomicU64,
    pub time_in_listen_disabled_us: AtomicU64,
    /// In such a pause now (`accepting_conns` 0).
    pub listen_paused: std::sync::atomic::AtomicBool,
}

impl Counters {
    /// `stats reset`: counters to zero, gauges kept.
    pub fn reset(&self) {
        self.bytes_read.reset();
        self.bytes_written.reset();
        for c in [
            &self.total_connections,
            &self.rejected_connections,
            &self.cmd_meta,
            &self.sasl_cmds,
            &self.sasl_errors,
            &self.idle_kicks,
            &self.conn_yields,
            &self.io_moves,
            &self.listen_disabled_num,
            &self.time_in_listen_disabled_us,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// Everything connections share.
#[derive(Debug)]
pub struct Shared {
    pub engine: Arc<Engine>,
    /// The persistent store under the engine (`--persist`); `None` in memcached mode.
    pub persist: Option<Arc<DiskStore>>,
    pub settings: Settings,
    pub limits: Limits,
    pub started: Instant,
    /// Whole seconds since `started`, advanced by the housekeeping tick (memcached's
    /// `current_time`): what a connection stamps its last command with, without reading
    /// the clock per request.
    pub uptime_secs: AtomicU64,
    pub counters: Counters,
    pub verbosity: AtomicU8,
    pub conns: Mutex<HashMap<u64, Arc<ConnLive>>>,
    pub watchers: Watchers,
    /// Per-prefix statistics (`stats detail`).
    pub detail: crate::detail::Detail,
    pub class_sizes: Vec<u32>,
    next_conn: AtomicU64,
    /// Set when the server stops: connections answer what they have read and leave.
    stopping: AtomicBool,
    /// Notified by the `shutdown` command.
    pub shutdown: Notify,
    /// ASCII authentication (`-Y`); `None` when off.
    pub auth: Option<Arc<crate::auth::Auth>>,
    /// TLS (`-Z`); `None` when off.
    pub tls: Option<Arc<crate::tls::Tls>>,
    /// What replies to writes wait for before they leave (`--persist` `sync`: the fsync);
    /// unset, they leave at once.
    gate: std::sync::OnceLock<Arc<dyn gate::Gate>>,
    /// The replicated group this server is a node of (`--raft-*`), if any.
    replica: std::sync::OnceLock<Arc<crate::replica::Replica>>,
    /// The router this server is (`--route`), if it is one.
    router: std::sync::OnceLock<Arc<crate::router::Router>>,
}

impl Shared {
    /// Whether the server is stopping: a connection checks before each read, so one whose
    /// client keeps sending still leaves.
    #[inline]
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// Tells every connection to leave once it has answered what it has read: the flag, and
    /// the reading side of each socket shut, which wakes a connection waiting for input
    /// with an end of file. A connection so holds nothing for the stop signal while idle (a
    /// channel waiter would add 180 bytes to every idle connection's task).
    pub(crate) fn stop_connections(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        for c in self.conns.lock().values() {
            c.shut_reading();
        }
    }

    /// A run of the server starts: connections are served (a later run over the same state
    /// starts afresh after an earlier one stopped).
    pub(crate) fn start_serving(&self) {
        self.stopping.store(false, Ordering::Relaxed);
    }

    /// The id of the next connection accepted.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    /// What replies to writes wait for, if anything.
    #[inline]
    pub fn gate(&self) -> Option<&Arc<dyn gate::Gate>> {
        self.gate.get()
    }

    /// The replicated group this server is a node of, if any.
    #[inline]
    pub fn replica(&self) -> Option<&Arc<crate::replica::Replica>> {
        self.replica.get()
    }

    /// A store the codec refused as too large: counted, and for `set` the old value removed
    /// as memcached does, except in a replicated group, where the engine changes only
    /// through the log (removing it on this node alone would make the nodes differ): there
    /// the old value stays (`docs/replication.md`).
    pub fn refuse_too_large(&self, unlink: Option<&[u8]>) {
        let unlink = if self.replica().is_some() {
            None
        } else {
            unlink
        };
        self.engine.refuse_too_large(unlink);
    }

    /// The router this server is (`--route`), if it is one.
    #[inline]
    pub fn router(&self) -> Option<&Arc<crate::router::Router>> {
        self.router.get()
    }

    /// Makes this server a router (once, before it serves); `false` if it is one already.
    pub fn set_router(&self, router: Arc<crate::router::Router>) -> bool {
        self.router.set(router).is_ok()
    }

    /// Makes this server a node of `replica`'s group (once, before it serves: its engine
    /// must be the one the server was built over); `false` if one was set already.
    pub fn set_replica(&self, replica: Arc<crate::replica::Replica>) -> bool {
        self.replica.set(replica).is_ok()
    }

    /// Makes replies to writes wait for `gate` (once, before the server serves: a session
    /// reads it when its connection opens); `false` if a gate was set already.
    pub fn set_gate(&self, gate: Arc<dyn gate::Gate>) -> bool {
        self.gate.set(gate).is_ok()
    }

    /// State for a server over `engine` with `settings`.
    pub fn new(engine: Arc<Engine>, settings: Settings) -> Arc<Shared> {
        Self::with_persist(engine, None, settings)
    }

    /// State for a server over `engine`, which `persist` backs (`--persist`).
    ///
    /// # Panics
    /// When the settings ask for authentication (`-Y`) or TLS (`-Z`) and the files cannot
    /// be loaded: a server told to require passwords or encryption must not start without.
    /// [`Shared::try_with_persist`] returns the error instead.
    pub fn with_persist(
        engine: Arc<Engine>,
        persist: Option<Arc<DiskStore>>,
        settings: Settings,
    ) -> Arc<Shared> {
        Self::try_with_persist(engine, persist, settings).unwrap_or_else(|e| panic!("{}", e.1))
    }

    /// As [`Shared::with_persist`], loading the auth file and certificates the settings
    /// name. The error is memcached's exit code and message.
    pub fn try_with_persist(
        engine: Arc<Engine>,
        persist: Option<Arc<DiskStore>>,
        settings: Settings,
    ) -> Result<Arc<Shared>, (i32, String)> {
        let security = Security::load(&settings)?;
        Self::try_with_security(engine, persist, settings, security)
    }

    /// State with the auth file and certificates already loaded (memkitd reads them before
    /// it gives up root).
    pub fn try_with_security(
        engine: Arc<Engine>,
        persist: Option<Arc<DiskStore>>,
        settings: Settings,
        security: Security,
    ) -> Result<Arc<Shared>, (i32, String)> {
        settings.validate()?;
        let Security { auth, tls } = security;
        let limits = Limits {
            max_item_size: settings.item_size_max,
            ..Limits::default()
        };
        let class_sizes = engine.stats().classes.iter().map(|c| c.size).collect();
        let shared = Arc::new(Shared {
            verbosity: AtomicU8::new(settings.verbose),
            detail: crate::detail::Detail::new(settings.prefix_delimiter, settings.detail_enabled),
            engine,
            persist,
            settings,
            limits,
            started: Instant::now(),
            uptime_secs: AtomicU64::new(0),
            counters: Counters::default(),
            conns: Mutex::new(HashMap::new()),
            watchers: Watchers::default(),
            class_sizes,
            next_conn: AtomicU64::new(16),
            stopping: AtomicBool::new(false),
            shutdown: Notify::new(),
            auth,
            tls,
            gate: std::sync::OnceLock::new(),
            replica: std::sync::OnceLock::new(),
            router: std::sync::OnceLock::new(),
        });
        if let Some(store) = shared.persist.clone().filter(|p| p.acks_wait()) {
            shared.set_gate(Arc::new(gate::Durable(store)));
        }
        // Evictions happen inside the engine; `watch evictions` hears of them through this
        // hook, which costs one upgrade and one relaxed load while nobody watches.
        let weak = Arc::downgrade(&shared);
        shared.engine.set_evict_hook(move |ev| {
            if let Some(sh) = weak.upgrade()
                && sh.watchers.watching(crate::watch::EVICTIONS)
            {
                sh.watchers.emit(|| crate::watch::Event::eviction(ev));
            }
        });
        Ok(shared)
    }
}

/// What `-Y` and `-Z` load: the auth file and the TLS certificates.
#[derive(Debug, Default)]
pub struct Security {
    pub auth: Option<Arc<crate::auth::Auth>>,
    pub tls: Option<Arc<crate::tls::Tls>>,
}

impl Security {
    /// Loads the files the settings name. The error is memcached's exit code and message.
    pub fn load(settings: &Settings) -> Result<Security, (i32, String)> {
        // memcached exits with EXIT_FAILURE when the auth file cannot be read.
        let auth = match &settings.auth_file {
            Some(path) => Some(Arc::new(crate::auth::Auth::load(path).map_err(|e| (1, e))?)),
            None => None,
        };
        // memcached exits with EX_USAGE when TLS cannot be set up.
        let tls = match settings.ssl.enabled {
            true => Some(Arc::new(
                crate::tls::Tls::load(&settings.ssl).map_err(|e| (64, e))?,
            )),
            false => None,
        };
        Ok(Security { auth, tls })
    }
}
