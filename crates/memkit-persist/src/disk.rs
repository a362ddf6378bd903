//! [`DiskStore`]: the engine's [`StoreHook`] on fjall — loads what RAM lost, records every
//! change, remembers `flush_all`, and reserves CAS values and write stamps so that a restart
//! never hands one out twice.
//!
//! Every hook call runs with the key's engine shard locked (see `memkit_engine::hook`), so
//! the order of writes to one key on disk is the engine's order, and a load never races a
//! write of the same key.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};

use memkit_engine::{Change, Flush, Loaded, Record, StoreHook};
use memkit_types::{Clock, Error, Result};
use parking_lot::{Mutex, RwLock};

use crate::Durability;
use crate::commit::{SyncFault, Waiter};
use crate::record::{self, FlushState};
use crate::space::Space;

/// CAS values and stamps are reserved this many at a time; one durable write per range.
const RESERVE: u64 = 1 << 32;
/// A new range is reserved once the old one has less than this left, long before it runs
/// out, so the reservation is durable before any value in it is handed out.
const MARGIN: u64 = 1 << 31;

const META_RESERVED: &str = "reserved";
pub(crate) const META_FLUSH: &str = "flush";
/// The `items` memtable size the store's keyspaces were created with (fjall keeps it).
const META_MEMTABLE: &str = "memtable";

/// What the durability committer and the server share: tickets taken by writes, and how far
/// the journal is known to be on disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DurableState {
    /// Every write whose ticket is at most this is durable.
    pub upto: u64,
    /// A journal flush failed: nothing more will become durable (the disk is full or broken).
    pub failed: bool,
}

/// Counters for `stats`.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub writes: AtomicU64,
    pub bytes_written: AtomicU64,
    pub loads: AtomicU64,
    pub purged: AtomicU64,
    pub flushes: AtomicU64,
    pub last_flush_unix: AtomicU64,
    pub write_errors: AtomicU64,
    /// Writes refused because free space fell below the reserve.
    pub refused_full: AtomicU64,
}

/// The persistent store under a memkit engine.
pub struct DiskStore {
    pub(crate) db: fjall::Database,
    pub(crate) items: fjall::Keyspace,
    pub(crate) meta: fjall::Keyspace,
    pub(crate) durability: Durability,
    pub(crate) clock: Arc<dyn Clock>,
    /// The next write stamp.
    stamp: AtomicU64,
    stamp_reserved: AtomicU64,
    cas_reserved: AtomicU64,
    reserve_lock: Mutex<()>,
    flush: RwLock<FlushState>,
    /// Taken (incremented) after each write reached the journal.
    pub(crate) tickets: AtomicU64,
    /// The highest ticket a connection waits for (sync mode).
    pub(crate) wanted: AtomicU64,
    pub(crate) durable: AtomicU64,
    pub(crate) failed: AtomicBool,
    pub(crate) durable_tx: tokio::sync::watch::Sender<DurableState>,
    /// Callbacks waiting for a ticket to be durable ([`DiskStore::when_durable`]).
    pub(crate) waiters: Mutex<Vec<Waiter>>,
    /// What the committer's fsyncs go through first ([`DiskStore::set_sync_fault`]).
    pub(crate) sync_fault: Mutex<Option<SyncFault>>,
    pub(crate) committer: std::sync::OnceLock<std::thread::Thread>,
    pub(crate) counters: Counters,
    /// The store directory, and the committer's descriptor of the active journal.
    pub(crate) dir: std::path::PathBuf,
    pub(crate) journal_fd: Mutex<Option<(u64, std::fs::File)>>,
    /// Free-space admission (see [`crate::space`]).
    pub(crate) space: Space,
    /// Live records counted by the sweeper's last whole pass; `u64::MAX` before the first.
    pub(crate) counted_items: AtomicU64,
    /// Where the store rotates the `items` memtable itself, and how many bytes written
    /// between two checks of it; `None` leaves rotation to fjall (see
    /// [`DiskStore::bound_memtable`]).
    rotate: Option<Rotate>,
    /// Batched mode's changes not yet committed (see [`crate::batch`]); `None`: direct.
    pub(crate) pending: Option<Mutex<Pending>>,
}

/// Batched mode's changes not yet committed (see [`crate::batch`]): the last version of each key changed (`None`: removed),
/// and `meta` keyspace entries.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    pub items: std::collections::HashMap<Vec<u8>, Option<fjall::Slice>>,
    pub meta: std::collections::HashMap<&'static str, Vec<u8>>,
}

impl Pending {
    /// Bytes held, keys and values.
    pub(crate) fn bytes(&self) -> usize {
        let items: usize = self
            .items
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, |v| v.len()))
            .sum();
        items + self.meta.values().map(Vec::len).sum::<usize>()
    }
}

#[derive(Debug, Clone, Copy)]
struct Rotate {
    at: u64,
    check_every: u64,
}

/// What [`DiskStore`] is opened with, besides fjall's handles.
#[derive(Debug, Clone)]
pub(crate) struct StoreConfig {
    pub durability: Durability,
    pub clock: Arc<dyn Clock>,
    pub dir: std::path::PathBuf,
    /// Free bytes to keep (see [`crate::space`]).
    pub reserve: u64,
    /// The `items` memtable's size limit.
    pub memtable_max: u64,
    /// The keyspaces were created by this open (with `memtable_max`).
    pub created: bool,
    /// Changes wait for [`DiskStore::commit`] (see [`crate::batch`]).
    pub batched: bool,
}

impl std::fmt::Debug for DiskStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskStore")
            .field("durability", &self.durability)
            .field("tickets", &self.tickets)
            .field("durable", &self.durable)
            .finish_non_exhaustive()
    }
}

/// What a client is told when new data does not fit on disk: `SERVER_ERROR out of disk
/// space storing object`, worded after memcached's `out of memory storing object`.
pub const DISK_FULL: &str = "out of disk space storing object";

fn disk_full() -> Error {
    Error::Server(DISK_FULL.into())
}

/// What a client is told of every change after the store failed (a journal fsync or
/// write failed, or fjall poisoned itself): `SERVER_ERROR persistent store failed, writes
/// refused until restart`.
pub const FAILED: &str = "persistent store failed, writes refused until restart";

pub(crate) fn failed() -> Error {
    Error::Server(FAILED.into())
}

/// A failed disk write, as the client sees it (see `docs/persistence.md`).
pub(crate) fn write_err(e: fjall::Error) -> Error {
    // The I/O error may sit under fjall's or lsm-tree's wrapper: walk the chain.
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(c) = cause {
        if c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::StorageFull)
        {
            return disk_full();
        }
        cause = c.source();
    }
    Error::Server(format!("persistent store write failed: {e}"))
}

fn read_err(e: fjall::Error) -> Error {
    Error::Server(format!("persistent store read failed: {e}"))
}

impl DiskStore {
    pub(crate) fn new(
        db: fjall::Database,
        items: fjall::Keyspace,
        meta: fjall::Keyspace,
        cfg: StoreConfig,
    ) -> std::result::Result<DiskStore, fjall::Error> {
        let StoreConfig {
            durability,
            clock,
            dir,
            reserve,
            memtable_max,
            created,
            batched,
        } = cfg;
        let [cas_reserved, stamp_reserved] = meta
            .get(META_RESERVED)?
            .map_or([0, 0], |b| record::decode_u64s::<2>(&b));
        let mut flush = meta
            .get(META_FLUSH)?
            .map_or_else(FlushState::default, |b| FlushState::decode(&b));
        flush.settle(clock.now_secs());
        let created_with = if created {
            meta.insert(META_MEMTABLE, record::encode_u64s(&[memtable_max]))?;
            Some(memtable_max)
        } else {
            meta.get(META_MEMTABLE)?
                .map(|b| record::decode_u64s::<1>(&b)[0])
        };
        // fjall rotates at the size recorded at creation. Only where that is well above this
        // run's limit does the store rotate itself: below it, rotating earlier than fjall
        // would only add rotations (and requests to fjall's worker queue, see
        // `bound_memtable`). A store without the record is left to fjall.
        let rotate = created_with
            .filter(|&c| c > memtable_max + memtable_max / 8)
            .map(|_| Rotate {
                at: memtable_max,
                check_every: (memtable_max / 8).max(64 << 10),
            });
        Ok(DiskStore {
            db,
            items,
            meta,
            durability,
            clock,
            // Stamps handed out before the restart are all below the reservation.
            stamp: AtomicU64::new(stamp_reserved),
            stamp_reserved: AtomicU64::new(stamp_reserved),
            cas_reserved: AtomicU64::new(cas_reserved),
            reserve_lock: Mutex::new(()),
            flush: RwLock::new(flush),
            tickets: AtomicU64::new(0),
            wanted: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            durable_tx: tokio::sync::watch::Sender::new(DurableState::default()),
            waiters: Mutex::new(Vec::new()),
            sync_fault: Mutex::new(None),
            committer: std::sync::OnceLock::new(),
            counters: Counters::default(),
            space: Space::new(dir.clone(), reserve),
            counted_items: AtomicU64::new(u64::MAX),
            dir,
            journal_fd: Mutex::new(None),
            rotate,
            pending: batched.then(Mutex::default),
        })
    }

    /// Every CAS issued before this run is below this value.
    pub(crate) fn cas_floor(&self) -> u64 {
        self.cas_reserved.load(Acquire)
    }

    /// The delayed `flush_all` the engine must re-arm after a restart: one not yet due, or
    /// one that came due in the current second. memcached's rule (`realtime(delay) - 1`)
    /// makes a delayed flush also void items written later in its own second; the disk
    /// applies that rule by itself, so RAM must too, or an item written now would live in
    /// RAM and be dead on disk.
    pub(crate) fn pending_flush(&self) -> Option<u64> {
        let f = self.flush.read();
        f.pending_unix.or_else(|| {
            (f.upto_unix != 0 && f.upto_unix >= self.clock.now_secs()).then_some(f.upto_unix)
        })
    }

    /// Makes sure `cas` and `stamp` lie inside durable reservations, extending them (one
    /// synchronous journal flush) when they come near the end.
    fn reserve(&self, cas: u64, stamp: u64) -> Result<()> {
        let near = |v: u64, r: &AtomicU64| v.saturating_add(MARGIN) > r.load(Acquire);
        if !near(cas, &self.cas_reserved) && !near(stamp, &self.stamp_reserved) {
            return Ok(());
        }
        let _g = self.reserve_lock.lock();
        let c = self
            .cas_reserved
            .load(Acquire)
            .max(cas.saturating_add(RESERVE));
        let s = self
            .stamp_reserved
            .load(Acquire)
            .max(stamp.saturating_add(RESERVE));
        self.meta
            .insert(META_RESERVED, record::encode_u64s(&[c, s]))
            .and_then(|()| self.db.persist(fjall::PersistMode::SyncData))
            .map_err(|e| self.write_failed(e))?;
        self.cas_reserved.store(c, Release);
        self.stamp_reserved.store(s, Release);
        Ok(())
    }

    /// A write reached the journal: take its ticket.
    fn wrote(&self, bytes: usize) {
        self.counters.writes.fetch_add(1, Relaxed);
        let n = bytes as u64;
        let before = self.counters.bytes_written.fetch_add(n, Relaxed);
        self.tickets.fetch_add(1, Release);
        if let Some(r) = self.rotate
            && (before + n) / r.check_every != before / r.check_every
        {
            self.bound_memtable(r.at);
        }
    }

    /// In `periodic` and `none` mode a write reaches the OS before it is acknowledged.
    /// fjall keeps a keyspace's journal setting from the keyspace's creation, whatever a
    /// later run opens it with, so the keyspaces are created with the journal buffer left
    /// to memkit (`manual_journal_persist`) and it is written out here, in whichever mode
    /// this run is in. (`sync` mode's committer writes it out before each fsync.)
    fn handed_to_os(&self) -> fjall::Result<()> {
        if self.durability == Durability::Sync || self.pending.is_some() {
            return Ok(());
        }
        self.db.persist(fjall::PersistMode::Buffer)
    }

    /// Keeps the `items` memtable within this run's limit where fjall's recorded one is
    /// well above it: a memtable past `at` is rotated here, on the writing thread (fjall's
    /// worker then flushes it, as after its own rotations). Checked once per
    /// `check_every` bytes written, so a memtable may pass `at` by about that much.
    ///
    /// Safe only because fjall never asks for a rotation itself here (its memtable never
    /// reaches the recorded size): fjall's writers queue a rotation request on every write
    /// past that size, and its worker blocks sending on that queue when it is full, so
    /// rotating beside a flood of requests could leave the worker and this thread both
    /// waiting on the full queue. `tree` and `rotate_memtable` are fjall 3's public but
    /// undocumented API.
    fn bound_memtable(&self, at: u64) {
        use fjall::AbstractTree;
        if self.items.tree.active_memtable().size() > at {
            let _ = self.items.rotate_memtable();
        }
    }

    /// Bytes in the `items` keyspace's active memtable (fjall's estimate).
    pub fn memtable_bytes(&self) -> u64 {
        use fjall::AbstractTree;
        self.items.tree.active_memtable().size()
    }

    /// A write to fjall failed. fjall poisons itself after a failed journal write (every
    /// later write fails too), so the store is marked failed (see `commit.rs`).
    pub(crate) fn write_failed(&self, e: fjall::Error) -> Error {
        self.counters.write_errors.fetch_add(1, Relaxed);
        self.mark_failed();
        write_err(e)
    }

    fn dead(&self, h: &record::Header, now_unix: u64) -> bool {
        h.expired(now_unix) || self.flush.read().flushed(h, now_unix)
    }

    /// Removes `key` from disk if its record is expired or flushed. The caller holds the
    /// key's shard lock (the sweeper goes through `Engine::with_key_locked`).
    pub(crate) fn purge_if_dead(&self, key: &[u8]) -> Result<bool> {
        if self.failed.load(Acquire) {
            return Err(failed());
        }
        let purged = self.remove_if_dead(key, self.clock.now_secs())?;
        if purged {
            self.wrote(0);
            self.counters.purged.fetch_add(1, Relaxed);
        }
        Ok(purged)
    }

    /// A read from fjall failed. In batched mode that is final, as a failed write is: a
    /// command answered differently on this node than on its replicas would make them
    /// differ, so the store fails and its owner stops (see [`crate::batch`]).
    pub(crate) fn read_failed(&self, e: fjall::Error) -> Error {
        if self.pending.is_some() {
            self.mark_failed();
        }
        read_err(e)
    }

    /// A new record of `r` for this store (its own write stamp, written now), for
    /// [`DiskStore::replace_all`].
    pub fn encode(&self, r: &Record<'_>) -> Vec<u8> {
        let stamp = self.stamp.fetch_add(1, AcqRel);
        record::encode(r, stamp, self.clock.now_secs())
    }

    /// Replaces the flush state (written at once).
    pub(crate) fn reset_flush(&self, st: FlushState) -> fjall::Result<()> {
        self.meta.insert(META_FLUSH, st.encode())?;
        *self.flush.write() = st;
        Ok(())
    }

    /// The flush state recorded in `meta` bytes (for a frozen view, see `batch.rs`).
    pub(crate) fn flush_state(v: Option<&[u8]>) -> FlushState {
        v.map_or_else(FlushState::default, FlushState::decode)
    }

    /// Whether the record bytes `v` are dead now (for the sweeper's first pass).
    pub(crate) fn is_dead_record(&self, v: &[u8], now_unix: u64) -> bool {
        record::decode(v).is_none_or(|h| self.dead(&h, now_unix))
    }
}

impl StoreHook for DiskStore {
    fn load(&self, key: &[u8], now_unix: u64) -> Result<Option<Loaded>> {
        let Some(v) = self.record_bytes(key)? else {
            return Ok(None);
        };
        match record::decode(&v) {
            Some(h) if !self.dead(&h, now_unix) => {
                self.counters.loads.fetch_add(1, Relaxed);
                Ok(Some(record::loaded(&h, &v)))
            }
            _ => {
                // Expired, flushed (or unreadable): gone for memcached, so gone from disk
                // too. The shard lock is held, so nothing rewrites the key meanwhile. A
                // failed store writes nothing more: the record stays, still dead to reads.
                // Batched mode checks again under the pending lock (see `crate::batch`).
                let removed = || match self.pending {
                    Some(_) => self.remove_if_dead(key, now_unix) == Ok(true),
                    None => self.items.remove(key).is_ok(),
                };
                if !self.failed.load(Acquire) && removed() {
                    self.wrote(0);
                    self.counters.purged.fetch_add(1, Relaxed);
                }
                Ok(None)
            }
        }
    }

    fn changed(&self, change: &Change<'_>, issued_cas: u64) -> Result<()> {
        // After a failure nothing more is journaled: a change that can never become
        // durable is refused, so the engine drops the key from RAM and the next command
        // sees the stored version (see `memkit_engine::hook`).
        if self.failed.load(Acquire) {
            return Err(failed());
        }
        let r = match change {
            Change::Put { record, meta_only } => {
                // New data waits for space; removals go through (they are how space is
                // given back, and a tombstone is a few bytes of the reserve).
                // Not in batched mode: a refusal there would be this node's alone (its
                // owner's replicas have their own disks); a full disk fails the store.
                if self.pending.is_none()
                    && self.space.low(self.counters.bytes_written.load(Relaxed))
                {
                    self.counters.refused_full.fetch_add(1, Relaxed);
                    return Err(disk_full());
                }
                let old = if *meta_only {
                    let v = self.record_bytes(record.key)?;
                    v.as_deref().and_then(record::decode)
                } else {
                    None
                };
                // A TTL or stale-mark change keeps the version's place against flush_all.
                let (stamp, written) = match old {
                    Some(h) => (h.stamp, h.written_unix),
                    None => (self.stamp.fetch_add(1, AcqRel), self.clock.now_secs()),
                };
                self.reserve(issued_cas, stamp)?;
                let enc = record::encode(record, stamp, written);
                let n = enc.len() + record.key.len();
                self.put_item(record.key, Some(enc)).map(|()| n)
            }
            Change::Remove { key } => {
                self.reserve(issued_cas, self.stamp.load(Acquire))?;
                self.put_item(key, None).map(|()| key.len())
            }
        };
        match r.and_then(|n| self.handed_to_os().map(|()| n)) {
            Ok(n) => {
                self.wrote(n);
                Ok(())
            }
            Err(e) => Err(self.write_failed(e)),
        }
    }

    fn flush(&self, flush: Flush, now_unix: u64) -> Result<()> {
        if self.failed.load(Acquire) {
            return Err(failed());
        }
        let mut st = *self.flush.read();
        // Called with every shard locked: no stamp is being handed out, so every earlier
        // write has a stamp below this and every later one does not.
        let stamp = self.stamp.load(Acquire);
        // A delayed flush due in this very second voids every write so far and would go on
        // voiding the rest of the second. The engine (memcached's single `oldest_live`)
        // instead applies it to what was written so far and lets the new flush replace it;
        // the disk does the same, by stamp, or a write acknowledged after this flush could
        // be void on disk while RAM still serves it.
        let due_now = |t: u64| t != 0 && t == now_unix;
        if st.pending_unix.is_some_and(due_now) || due_now(st.upto_unix) {
            st.before_stamp = stamp;
            st.pending_unix = None;
            st.upto_unix = 0;
        }
        st.settle(now_unix);
        match flush {
            Flush::Now => {
                // Every earlier write is below the stamp: the second-based marks have
                // nothing left to void.
                st.before_stamp = stamp;
                st.upto_unix = 0;
                st.pending_unix = None;
            }
            Flush::At(t) => st.pending_unix = Some(t),
        }
        self.put_meta(META_FLUSH, st.encode())
            .and_then(|()| self.handed_to_os())
            .map_err(|e| self.write_failed(e))?;
        *self.flush.write() = st;
        self.wrote(0);
        Ok(())
    }
}
