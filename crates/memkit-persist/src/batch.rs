//! Batched mode ([`PersistOptions::batched`](crate::PersistOptions::batched)): the engine's
//! changes are held in memory until the owner of the store says a unit of work is done,
//! and then written in one atomic fjall batch with the owner's own metadata.
//!
//! Why: memkit-raft's state machine applies a log entry's writes one by one and must
//! record "applied up to entry N" with exactly the effects of entries up to N. Written one
//! at a time, a crash could leave half of an entry on disk with the marker still at N-1;
//! replaying the entry would then apply its first half twice (an `incr` counted twice, an
//! `add` refused that had succeeded, and the replicas differ). fjall's batches are atomic
//! and its journal recovers a prefix of what was written, so a batch per entry holding the
//! entry's changes and the marker leaves the store at an entry boundary after any crash.
//!
//! What stays direct: removing a record found dead (expired or flushed at the engine's
//! clock) — dead is absent to every command, so whether the removal lands before or after
//! a batch changes no outcome — and the CAS and stamp reservations (they only grow).
//! Those removals take the pending lock around their check, and [`DiskStore::commit`]
//! holds it through the batch, so a removal never reads an old version on disk while its
//! replacement is between the pending set and the batch.
//!
//! Durability is the owner's: a commit reaches fjall's journal buffer, not the disk
//! ([`DiskStore::sync`] makes everything committed durable). memkit-raft syncs before a
//! snapshot lets the log be purged; until then the log replays whatever a crash lost.

use fjall::Slice;
use memkit_types::{Error, Result};

use crate::disk::{DiskStore, Pending};

impl DiskStore {
    /// Whether changes wait for [`DiskStore::commit`].
    pub fn is_batched(&self) -> bool {
        self.pending.is_some()
    }

    /// Writes every pending change, and `extra` (keys of the `meta` keyspace, which must
    /// not be the store's own), in one atomic batch. Batched mode only; in direct mode only
    /// `extra` is written. An `Err` marks the store failed (fjall poisons itself after a
    /// failed journal write): every later change and commit fails too.
    pub fn commit(&self, extra: &[(&[u8], &[u8])]) -> Result<()> {
        if self.failed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(crate::disk::failed());
        }
        let mut batch = self.db.batch();
        let mut held = self.pending.as_ref().map(|p| p.lock());
        if let Some(p) = held.as_deref_mut() {
            let n = p.bytes();
            for (k, v) in p.items.drain() {
                match v {
                    Some(v) => batch.insert(&self.items, k, v),
                    None => batch.remove(&self.items, k),
                }
            }
            for (k, v) in p.meta.drain() {
                batch.insert(&self.meta, k, v);
            }
            self.counters
                .bytes_written
                .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        }
        for (k, v) in extra {
            batch.insert(&self.meta, *k, *v);
        }
        // Committed with the pending lock held: see the module notes.
        let r = batch.commit();
        drop(held);
        r.map_err(|e| self.write_failed(e))
    }

    /// Makes everything committed so far durable (journal fsync), through the fault hook
    /// first ([`DiskStore::set_sync_fault`]). A failure fails the store, as the committer's.
    pub fn sync(&self) -> Result<()> {
        let fault = self.sync_fault.lock().clone();
        if let Some(Err(e)) = fault.map(|f| f()) {
            self.counters
                .write_errors
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.mark_failed();
            return Err(Error::Server(format!("persistent store sync failed: {e}")));
        }
        self.db
            .persist(fjall::PersistMode::SyncAll)
            .map_err(|e| self.write_failed(e))
    }

    /// A value of the `meta` keyspace, as committed.
    pub fn meta_value(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.meta
            .get(key)
            .map(|v| v.map(|v| v.to_vec()))
            .map_err(|e| Error::Server(format!("persistent store read failed: {e}")))
    }

    /// The record of `key`: pending, else on disk.
    pub(crate) fn record_bytes(&self, key: &[u8]) -> Result<Option<Slice>> {
        if let Some(p) = &self.pending
            && let Some(v) = p.lock().items.get(key)
        {
            return Ok(v.clone());
        }
        self.items.get(key).map_err(|e| self.read_failed(e))
    }

    /// Records `key`'s new version (`None`: removed): pending in batched mode, else
    /// written.
    pub(crate) fn put_item(&self, key: &[u8], v: Option<Vec<u8>>) -> fjall::Result<()> {
        if let Some(p) = &self.pending {
            p.lock().items.insert(key.to_vec(), v.map(Slice::from));
            return Ok(());
        }
        match v {
            Some(v) => self.items.insert(key, v),
            None => self.items.remove(key),
        }
    }

    /// Records a `meta` keyspace value: pending in batched mode, else written.
    pub(crate) fn put_meta(&self, key: &'static str, v: Vec<u8>) -> fjall::Result<()> {
        if let Some(p) = &self.pending {
            p.lock().meta.insert(key, v);
            return Ok(());
        }
        self.meta.insert(key, v)
    }

    /// Removes `key`'s record from disk if it is dead at `now_unix` and no change of it is
    /// pending. Returns whether it removed it.
    pub(crate) fn remove_if_dead(&self, key: &[u8], now_unix: u64) -> Result<bool> {
        let held = self.pending.as_ref().map(|p| p.lock());
        if held.as_ref().is_some_and(|p| p.items.contains_key(key)) {
            return Ok(false);
        }
        let Some(v) = self.items.get(key).map_err(|e| self.read_failed(e))? else {
            return Ok(false);
        };
        if !self.is_dead_record(&v, now_unix) {
            return Ok(false);
        }
        self.items.remove(key).map_err(crate::disk::write_err)?;
        Ok(true)
    }

    /// Replaces every item with `records` (keys and record bytes as [`DiskStore::encode`]
    /// makes them), written in batches of about `batch_bytes`, and forgets every `flush_all`
    /// but `pending_flush` (one still to come). Nothing may change the store meanwhile;
    /// pending changes are dropped. Not atomic: the owner marks the store as being
    /// replaced first (memkit-raft: its marker says "installing", and a restart installs
    /// again).
    pub fn replace_all(
        &self,
        records: &mut dyn Iterator<Item = std::io::Result<(Vec<u8>, Vec<u8>)>>,
        pending_flush: Option<u64>,
        batch_bytes: usize,
    ) -> std::io::Result<u64> {
        if let Some(p) = &self.pending {
            *p.lock() = Pending::default();
        }
        let io = |e: fjall::Error| std::io::Error::other(e.to_string());
        self.items.clear().map_err(io)?;
        let flush = crate::record::FlushState {
            pending_unix: pending_flush,
            ..Default::default()
        };
        self.reset_flush(flush).map_err(io)?;
        let (mut batch, mut bytes, mut count) = (self.db.batch(), 0, 0);
        for r in records {
            let (k, v) = r?;
            bytes += k.len() + v.len();
            batch.insert(&self.items, k, v);
            count += 1;
            if bytes >= batch_bytes {
                batch.commit().map_err(io)?;
                (batch, bytes) = (self.db.batch(), 0);
            }
        }
        batch.commit().map_err(io)?;
        Ok(count)
    }
}

/// The store's committed state at one moment (a fjall snapshot: later commits do not show
/// in it), for copying out while the store goes on.
pub struct Frozen {
    snap: fjall::Snapshot,
    items: fjall::Keyspace,
    flush: crate::record::FlushState,
}

impl std::fmt::Debug for Frozen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Frozen")
            .field("flush", &self.flush)
            .finish()
    }
}

impl DiskStore {
    /// The committed state now (pending changes are not in it: commit first).
    pub fn freeze(&self) -> Result<Frozen> {
        use fjall::Readable;
        let snap = self.db.snapshot();
        let flush = snap
            .get(&self.meta, crate::disk::META_FLUSH)
            .map_err(|e| self.read_failed(e))?;
        Ok(Frozen {
            flush: DiskStore::flush_state(flush.as_deref()),
            items: self.items.clone(),
            snap,
        })
    }
}

impl Frozen {
    /// Every item live at `now_unix` (neither expired nor flushed), in key order.
    pub fn live(
        &self,
        now_unix: u64,
    ) -> impl Iterator<Item = std::io::Result<(Slice, memkit_engine::Loaded)>> + '_ {
        use fjall::Readable;
        self.snap.iter(&self.items).filter_map(move |kv| {
            let (k, v) = match kv.into_inner() {
                Ok(kv) => kv,
                Err(e) => return Some(Err(std::io::Error::other(e.to_string()))),
            };
            let h = crate::record::decode(&v)?;
            let dead = h.expired(now_unix) || self.flush.flushed(&h, now_unix);
            (!dead).then(|| Ok((k, crate::record::loaded(&h, &v))))
        })
    }
}
