//! Snapshots: the engine's live items, with their CAS values and absolute expiries, plus the
//! log clock and a pending delayed flush, as JSON ([`SnapState`]).
//!
//! Why a dump through the public API ([`Engine::for_each_item`], then a read of each value)
//! rather than `warm_save`: the warm restart file is tied to the memory limit and removed
//! once read, and its key hash seed and layout are a process's; a snapshot must move
//! between nodes and be read again after every restart. Items come back through `store`
//! with their CAS as the `E` option and their expiry as an absolute time, so the restored
//! engine answers every later entry as the original one would. What a snapshot does not
//! carry: the meta protocol's stale marks and win tokens (an item marked stale by
//! `md ... I` comes back not stale) and access bits (fetched, last access).
//!
//! On disk: `DIR/snapshot`, written to `snapshot.tmp`, synced, renamed: 4 bytes of metadata
//! length (big-endian), the metadata as JSON, then the data. One snapshot is kept.

use std::fs::{self, File};
use std::io::{self, Read, Write as _};
use std::path::{Path, PathBuf};

use memkit_engine::Engine;
use memkit_types::{Clock, GetOptions, StoreMode, StoreOptions};
use openraft::{AnyError, RaftSnapshotBuilder, Snapshot, StorageIOError};
use serde::{Deserialize, Serialize};

use crate::types::{
    ExptimeUnix, LogId, SnapshotMeta, StorageError, StoredMembership, TypeConfig, to_exptime,
};

/// One item of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapItem {
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// Client flags.
    pub flags: u32,
    /// The CAS (derived from the log when it was written).
    pub cas: u64,
    /// Absolute expiry.
    pub exptime_unix: ExptimeUnix,
}

/// A snapshot's data: the state machine at its last applied entry.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SnapState {
    /// The log clock (Unix milliseconds) at that entry.
    pub clock_ms: u64,
    /// The engine's mark of the last delayed flush, Unix seconds, if any.
    pub pending_flush: Option<u64>,
    /// Every live item.
    pub items: Vec<SnapItem>,
}

pub(crate) fn read_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::read_snapshot(None, AnyError::new(&e)).into()
}

fn write_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_snapshot(None, AnyError::new(&e)).into()
}

impl SnapState {
    /// Copies `engine`'s live items. Nothing may be applied meanwhile (the caller holds the
    /// state machine); reads may run, and change nothing a snapshot holds.
    pub fn capture(engine: &Engine, clock_ms: u64, pending_flush: Option<u64>) -> SnapState {
        let mut metas = Vec::new();
        engine.for_each_item(|it| {
            metas.push((it.key.to_vec(), it.flags, it.cas, it.exptime_unix));
        });
        let opts = GetOptions {
            no_bump: true,
            ..Default::default()
        };
        // `for_each_item` lends keys under a shard lock, where the engine may not be
        // called again: values are read after, one by one.
        let items = metas
            .into_iter()
            .filter_map(|(key, flags, cas, exptime_unix)| {
                let item = engine.get(&key, &opts).ok().flatten()?;
                Some(SnapItem {
                    value: item.value.to_vec(),
                    key,
                    flags,
                    cas,
                    exptime_unix,
                })
            })
            .collect();
        SnapState {
            clock_ms,
            pending_flush,
            items,
        }
    }

    /// Stores every item into `engine` (fresh, on a clock standing at `clock_ms`), then
    /// re-arms a delayed flush still to come.
    pub fn fill(&self, engine: &Engine) -> Result<(), memkit_types::Error> {
        for it in &self.items {
            let opts = StoreOptions {
                mode: StoreMode::Set,
                flags: it.flags,
                exptime: to_exptime(it.exptime_unix),
                new_cas: Some(it.cas),
                ..Default::default()
            };
            engine.store(&it.key, &it.value, &opts)?;
        }
        // At or after the snapshot's second: every restored item counts as written before
        // it, as every live item was on the node that took the snapshot.
        if let Some(at) = self.pending_flush
            && at >= engine.clock().now_secs()
        {
            engine.restore_pending_flush(at);
        }
        Ok(())
    }
}

fn path(dir: &Path) -> PathBuf {
    dir.join("snapshot")
}

/// Writes `meta` and `data` as the node's snapshot, durably.
pub fn save(dir: &Path, meta: &SnapshotMeta, data: &[u8]) -> Result<(), StorageError> {
    let meta_json = serde_json::to_vec(meta).map_err(write_err)?;
    let len = u32::try_from(meta_json.len()).map_err(write_err)?;
    let tmp = dir.join("snapshot.tmp");
    let write = || -> io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(&len.to_be_bytes())?;
        f.write_all(&meta_json)?;
        f.write_all(data)?;
        f.sync_all()?;
        fs::rename(&tmp, path(dir))?;
        File::open(dir)?.sync_all()
    };
    write().map_err(write_err)
}

/// The node's snapshot, if it has one.
pub fn load(dir: &Path) -> Result<Option<(SnapshotMeta, Vec<u8>)>, StorageError> {
    let mut bytes = Vec::new();
    match File::open(path(dir)) {
        Ok(mut f) => f.read_to_end(&mut bytes).map_err(read_err)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_err(e)),
    };
    let bad = || read_err(io::Error::other("snapshot file is truncated"));
    let (len, rest) = bytes.split_first_chunk::<4>().ok_or_else(bad)?;
    let len = u32::from_be_bytes(*len) as usize;
    let (meta, data) = rest.split_at_checked(len).ok_or_else(bad)?;
    let meta = serde_json::from_slice(meta).map_err(read_err)?;
    Ok(Some((meta, data.to_vec())))
}

/// Builds a snapshot from a [`SnapState`] captured by the state machine: serializes it and
/// saves it in the node's directory, off the state machine's task.
#[derive(Debug)]
pub struct SnapshotBuilder {
    dir: PathBuf,
    last_applied: Option<LogId>,
    membership: StoredMembership,
    state: SnapState,
}

impl SnapshotBuilder {
    pub(crate) fn new(
        dir: PathBuf,
        last_applied: Option<LogId>,
        membership: StoredMembership,
        state: SnapState,
    ) -> SnapshotBuilder {
        SnapshotBuilder {
            dir,
            last_applied,
            membership,
            state,
        }
    }
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let data = serde_json::to_vec(&self.state).map_err(write_err)?;
        let snapshot_id = match self.last_applied {
            Some(l) => format!("{}-{}-{}", l.leader_id.term, l.index, self.state.clock_ms),
            None => format!("empty-{}", self.state.clock_ms),
        };
        let meta = SnapshotMeta {
            last_log_id: self.last_applied,
            last_membership: self.membership.clone(),
            snapshot_id,
        };
        save(&self.dir, &meta, &data)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(io::Cursor::new(data)),
        })
    }
}
