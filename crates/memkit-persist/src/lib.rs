//! memkit-persist: memkitd's persistent mode — MemcacheDB's idea (the memcached protocol
//! over a disk store) made crash-safe, with memcached's exact semantics.
//!
//! Map:
//! - [`open`] / [`Persistent`]: opens (recovers) a directory and builds an engine over it;
//!   [`PersistOptions`], [`Durability`], the recovery [`Recovery`] report, [`PersistStats`].
//! - [`disk`]: [`DiskStore`], the engine's `StoreHook` on fjall: read-through loads, change
//!   records, `flush_all` marks, CAS and stamp reservations.
//! - [`commit`]: the committer thread; tickets and group commit; what `sync` acks await
//!   (a tokio wait or a callback); what a failed fsync does; the fsync fault hook.
//! - [`sweep`]: purges expired and flushed items from disk over time.
//! - [`files`]: the store directory and fjall's files in it are private (`0700`).
//! - [`batch`]: batched mode, for a replicated state machine: changes held until their owner
//!   commits them in one atomic batch with its own metadata; [`batch::Frozen`], the
//!   committed state at one moment, for snapshots.
//! - [`space`]: free-space admission — new data is refused before the disk is full.
//! - [`record`]: the on-disk encoding.
//!
//! How it fits: the engine stays the single place where memcached's rules live, and its
//! RAM is a cache of hot items bounded by the memory budget. Under each command's shard lock
//! the engine asks the hook for a key RAM lost and hands it every change, which fjall
//! journals before the lock is released; RAM eviction never touches the disk.
//!
//! Goals: crash safety in `sync` mode (an acknowledged write survives `kill -9` and power
//! loss), group commit, data sets larger than RAM, restarts that keep CAS values unique.
//! Non-goals: replication (memkit-raft builds it on batched mode), multi-process access to one directory, a file format of our own.
//! Design, formats and numbers: `docs/persistence.md`.

pub mod batch;
pub mod commit;
pub mod disk;
pub mod files;
pub mod record;
pub mod space;
pub mod sweep;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering::*;
use std::time::{Duration, Instant};

use memkit_engine::{Engine, EngineConfig};

pub use commit::{DurableCallback, NotDurable, SyncFault};
pub use disk::{DiskStore, DurableState};

/// When an acknowledged write is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// A write is acknowledged only once it is fsynced; concurrent writes share one fsync.
    #[default]
    Sync,
    /// Writes reach the OS at once (they survive a crash of memkitd) and are fsynced every
    /// this many milliseconds (a power loss may lose that much).
    Periodic(u64),
    /// Writes reach the OS at once and are never fsynced by memkitd: they survive a crash
    /// of memkitd, not of the machine.
    None,
}

impl std::str::FromStr for Durability {
    type Err = String;
    /// `sync`, `periodic`, `periodic:MS` or `none`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            None if s == "sync" => Ok(Durability::Sync),
            None if s == "none" => Ok(Durability::None),
            None if s == "periodic" => Ok(Durability::Periodic(1000)),
            Some(("periodic", ms)) => ms
                .parse()
                .ok()
                .filter(|&m| m > 0)
                .map(Durability::Periodic)
                .ok_or_else(|| format!("bad period {ms:?} (milliseconds, > 0)")),
            _ => Err(format!(
                "unknown durability {s:?}: sync, periodic[:MS] or none"
            )),
        }
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Durability::Sync => f.write_str("sync"),
            Durability::Periodic(ms) => write!(f, "periodic:{ms}"),
            Durability::None => f.write_str("none"),
        }
    }
}

/// How to open a persistent store.
#[derive(Debug, Clone)]
pub struct PersistOptions {
    /// The directory (created if missing).
    pub dir: PathBuf,
    pub durability: Durability,
    /// How often the sweeper purges expired items from disk.
    pub sweep_every: Duration,
    /// Refuse new data while fewer bytes than this are free on the store's filesystem
    /// (`None`: [`default_reserve`]; `Some(0)`: never refuse, let fjall meet ENOSPC).
    /// Not in batched mode, which never refuses (see [`batch`]).
    pub reserve: Option<u64>,
    /// Changes wait for [`DiskStore::commit`] ([`batch`]): the mode of memkit-raft's state
    /// machine, which owns durability (`durability` should be `None` then).
    pub batched: bool,
}

impl PersistOptions {
    /// `sync` durability, sweeping every 10 seconds.
    pub fn new(dir: impl AsRef<Path>) -> Self {
        PersistOptions {
            dir: dir.as_ref().to_path_buf(),
            durability: Durability::Sync,
            sweep_every: Duration::from_secs(10),
            reserve: None,
            batched: false,
        }
    }
}

/// What start-up found.
#[derive(Debug, Clone, Copy)]
pub struct Recovery {
    /// Items on disk (fjall's estimate: exact after a clean shutdown and compaction).
    pub items: u64,
    /// Bytes the store takes on disk.
    pub bytes_on_disk: u64,
    /// Time to open and replay the journal.
    pub elapsed: Duration,
    /// Every CAS this run issues is above this.
    pub cas_floor: u64,
}

/// A snapshot of the persistence counters, for `stats`.
#[derive(Debug, Clone, Default)]
pub struct PersistStats {
    pub durability: String,
    pub writes: u64,
    pub bytes_written: u64,
    pub loads: u64,
    pub purged: u64,
    pub flushes: u64,
    pub last_flush_unix: u64,
    pub bytes_on_disk: u64,
    /// Live items on disk, as counted by the sweeper's last whole pass over the `items`
    /// keyspace (it lags by up to one pass); fjall's estimate until a pass completes.
    pub items: u64,
    /// fjall's estimate: counts overwritten versions and tombstones not yet compacted away.
    pub items_approx: u64,
    pub write_errors: u64,
    /// A journal fsync or write failed (or fjall poisoned itself): every change is refused
    /// until the process opens the store again (`commit.rs`).
    pub failed: bool,
    /// Writes refused for lack of disk space (see [`space`]).
    pub refused_full: u64,
    /// Free bytes on the store's filesystem at the last check, and the reserve kept.
    pub disk_free: u64,
    pub disk_reserve: u64,
    /// The last check found free space below the reserve: new data is being refused.
    pub disk_low: bool,
}

/// An engine over a persistent store.
#[derive(Debug, Clone)]
pub struct Persistent {
    pub engine: Arc<Engine>,
    pub store: Arc<DiskStore>,
    pub recovery: Recovery,
}

/// How the memory budget is split: the engine's RAM cache gets three quarters, fjall's
/// block cache and its memtables (an active and a sealed one, each at most half of their
/// share) an eighth each.
pub fn split_budget(total: usize) -> (usize, u64, u64) {
    let cache = (total / 8).max(4 << 20);
    let write_buffer = (total / 8).max(8 << 20);
    let engine = total.saturating_sub(cache + write_buffer).max(8 << 20);
    (engine, cache as u64, write_buffer as u64)
}

/// The free space kept for fjall's own work when none is configured: room for the
/// memtables in flight to be flushed and for a compaction's output to coexist with its
/// input at small sizes — four times the memtable budget, at least 64 MiB. A heuristic: a
/// compaction of large levels can need more (see `docs/persistence.md`).
pub fn default_reserve(write_buffer: u64) -> u64 {
    (4 * write_buffer).max(64 << 20)
}

/// Opens (or creates) the store in `opts.dir` and builds an engine over it, RAM bounded by
/// `engine_cfg.memory_limit` (split with fjall, see [`split_budget`]). Eviction is always
/// on: RAM is a cache here, nothing persistent is lost when it evicts.
pub fn open(opts: &PersistOptions, engine_cfg: EngineConfig) -> Result<Persistent, String> {
    let started = Instant::now();
    files::create_private(&opts.dir)
        .map_err(|e| format!("cannot create {}: {e}", opts.dir.display()))?;
    let (engine_bytes, cache, write_buffer) = split_budget(engine_cfg.memory_limit);
    // fjall records a keyspace's options (journal persistence, memtable size) when it
    // creates the keyspace and uses those on every later open, whatever that open asks.
    // So what the mode decides is applied by the store itself on each write, in the mode
    // of this run: the journal buffer is left to memkit (in sync mode the committer's
    // flush writes it out, one write(2) + fdatasync per group; otherwise every write hands
    // it to the OS, see `DiskStore::handed_to_os`), and the memtable limit is kept by
    // `DiskStore::bound_memtable`.
    let memtable_max = (write_buffer / 2).max(1 << 20);
    // One background worker. With more, fjall's worker 0 hands every compaction request
    // back to the queue and takes it again (its "leave a worker free for flushes" rule in
    // `worker_pool.rs`, fjall 3.1.13): while another worker compacts, worker 0 spins on
    // that queue. On a 2-core machine that spin competed with the connections for CPU and
    // halved durable sets/s (measured: `docs/persistence.md`). One worker flushes and
    // compacts in turn; fjall's own backpressure (4 sealed memtables) bounds the backlog.
    let db = fjall::Database::builder(&opts.dir)
        .worker_threads(1)
        .cache_size(cache)
        .manual_journal_persist(true)
        .open()
        .map_err(|e| format!("cannot open {}: {e}", opts.dir.display()))?;
    let created = !db.keyspace_exists("items");
    let ks = |name: &str| {
        db.keyspace(name, || {
            fjall::KeyspaceCreateOptions::default()
                .manual_journal_persist(true)
                .max_memtable_size(memtable_max)
        })
        .map_err(|e| format!("cannot open keyspace {name}: {e}"))
    };
    let (items, meta) = (ks("items")?, ks("meta")?);
    files::make_private(&opts.dir);
    let cfg = disk::StoreConfig {
        durability: opts.durability,
        clock: engine_cfg.clock.clone(),
        dir: opts.dir.clone(),
        reserve: opts
            .reserve
            .unwrap_or_else(|| default_reserve(write_buffer)),
        memtable_max,
        created,
        batched: opts.batched,
    };
    let store = DiskStore::new(db.clone(), items.clone(), meta, cfg)
        .map_err(|e| format!("cannot read {}: {e}", opts.dir.display()))?;
    let store = Arc::new(store);
    let cas_floor = store.cas_floor();
    let cfg = EngineConfig {
        memory_limit: engine_bytes,
        evict: true,
        ..engine_cfg
    };
    let engine = Arc::new(Engine::with_hook(cfg, store.clone(), cas_floor));
    if let Some(at) = store.pending_flush() {
        engine.restore_pending_flush(at);
    }
    commit::spawn(&store).map_err(|e| format!("cannot start the committer: {e}"))?;
    sweep::spawn(&engine, &store, opts.sweep_every);
    let recovery = Recovery {
        items: items.approximate_len() as u64,
        bytes_on_disk: db.disk_space().unwrap_or(0),
        elapsed: started.elapsed(),
        cas_floor,
    };
    Ok(Persistent {
        engine,
        store,
        recovery,
    })
}

impl DiskStore {
    /// The persistence counters.
    pub fn stats(&self) -> PersistStats {
        let c = &self.counters;
        PersistStats {
            durability: self.durability.to_string(),
            writes: c.writes.load(Relaxed),
            bytes_written: c.bytes_written.load(Relaxed),
            loads: c.loads.load(Relaxed),
            purged: c.purged.load(Relaxed),
            flushes: c.flushes.load(Relaxed),
            last_flush_unix: c.last_flush_unix.load(Relaxed),
            bytes_on_disk: self.db.disk_space().unwrap_or(0),
            items: match self.counted_items.load(Relaxed) {
                u64::MAX => self.items.approximate_len() as u64,
                n => n,
            },
            items_approx: self.items.approximate_len() as u64,
            write_errors: c.write_errors.load(Relaxed),
            failed: self.failed.load(Relaxed),
            refused_full: c.refused_full.load(Relaxed),
            disk_free: self.space.free.load(Relaxed),
            disk_reserve: self.space.reserve,
            disk_low: self.space.is_low(),
        }
    }
}
