//! The Raft log on fjall: one database in `DIR/log`, two keyspaces.
//!
//! - `entries`: each entry in postcard ([`crate::codec`]), keyed by its index big-endian
//!   (so key order is index order and a range of indexes is a range of keys);
//! - `meta`: the vote, the committed log id and the last purged log id, postcard each, and
//!   the log's format ([`FORMAT`]): a log written in another encoding (earlier versions'
//!   JSON, or their one write an entry) is refused at open rather than misread.
//!
//! Durability: the vote is synced to disk (`PersistMode::SyncAll`) before openraft is told
//! it is saved, always: a vote forgotten in a crash could let a node vote twice in a term.
//! Its sync runs on tokio's blocking pool, off the runtime's workers that carry heartbeats.
//! Appended entries follow the node's [`Durability`] (memkitd's `--durability`):
//! - `sync` (the default): synced before openraft counts them, so a write acknowledged is
//!   on disk on a majority. Group-committed: an append writes its entries and returns, and
//!   hands openraft's `LogFlushed` callback to a syncer thread, which syncs once for every
//!   callback waiting and then answers them in order; openraft goes on meanwhile (it counts
//!   an entry toward a commit only once its callback has fired);
//! - `periodic:MS`: counted once written to the OS (they survive the process's crash), and
//!   synced within MS of being written; a power loss on a majority within that window can
//!   lose acknowledged writes;
//! - `none`: counted once written to the OS, never synced by memkit.
//!
//! Truncation, purge and the committed id are written without a sync: a
//! truncation lost in a crash is redone by the leader, a purge lost leaves entries the
//! snapshot already covers, and the committed id is a hint openraft may lose.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::path::Path;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use memkit_persist::Durability;
use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{AnyError, LogState, OptionalSend, RaftLogReader, StorageIOError, Vote};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::codec;
use crate::types::{Entry, LogId, NodeId, StorageError, TypeConfig};

const VOTE: &[u8] = b"vote";
const COMMITTED: &[u8] = b"committed";
const PURGED: &[u8] = b"purged";
const FORMAT_KEY: &[u8] = b"format";

/// The log's encoding, stored under `meta`'s `format` key when the log is created. 2:
/// an entry carries many writes.
pub const FORMAT: &[u8] = b"memkit-raft log: postcard 2";

/// The log of one node. Clones share the database (the log reader openraft asks for is
/// a clone) and the syncer.
#[derive(Clone)]
pub struct LogStore {
    db: Database,
    entries: Keyspace,
    meta: Keyspace,
    syncer: Syncer,
    /// Syncs of appended entries so far (votes not counted).
    syncs: Arc<AtomicU64>,
}

/// Where an append's callback goes (see the module notes).
#[derive(Clone)]
enum Syncer {
    /// `sync`: to the syncer thread, answered once synced.
    Each(std::sync::mpsc::Sender<LogFlushed<TypeConfig>>),
    /// `periodic`: answered at once; the thread is told something waits for a sync.
    Later(std::sync::mpsc::Sender<()>),
    /// `none`: answered at once.
    Never,
}

impl Debug for LogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LogStore")
    }
}

fn read_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::read_logs(AnyError::new(&e)).into()
}

fn write_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_logs(AnyError::new(&e)).into()
}

impl LogStore {
    /// Opens (or creates) the log in `dir`, its appends durable as `durability` says.
    pub fn open(dir: &Path, durability: Durability) -> Result<LogStore, fjall::Error> {
        // One background worker: the log is small and the group's nodes may share a machine
        // (tests run three on two cores).
        let db = Database::builder(dir).worker_threads(1).open()?;
        let entries = db.keyspace("entries", KeyspaceCreateOptions::default)?;
        let meta = db.keyspace("meta", KeyspaceCreateOptions::default)?;
        match meta.get(FORMAT_KEY)? {
            Some(f) if *f == *FORMAT => {}
            Some(_) => return Err(unknown_format()),
            None if meta.iter().next().is_some() || entries.iter().next().is_some() => {
                return Err(unknown_format());
            }
            None => meta.insert(FORMAT_KEY, FORMAT)?,
        }
        let syncs = Arc::new(AtomicU64::new(0));
        let syncer = match durability {
            Durability::Sync => Syncer::Each(start_syncer(db.clone(), syncs.clone())?),
            Durability::Periodic(ms) => {
                let every = std::time::Duration::from_millis(ms);
                Syncer::Later(start_periodic(db.clone(), every, syncs.clone())?)
            }
            Durability::None => Syncer::Never,
        };
        Ok(LogStore {
            db,
            entries,
            meta,
            syncer,
            syncs,
        })
    }

    /// How many times appended entries were synced so far (votes not counted).
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    fn get_meta<T: serde::de::DeserializeOwned>(
        &self,
        key: &[u8],
    ) -> Result<Option<T>, StorageError> {
        let Some(v) = self.meta.get(key).map_err(read_err)? else {
            return Ok(None);
        };
        codec::from_slice(&v).map(Some).map_err(read_err)
    }

    fn put_meta<T: serde::Serialize>(&self, key: &[u8], value: &T) -> Result<(), StorageError> {
        let v = codec::to_vec(value).map_err(write_err)?;
        self.meta.insert(key, v).map_err(write_err)
    }

    /// Syncs the journal to disk on the blocking pool.
    async fn sync(&self) -> Result<(), fjall::Error> {
        let db = self.db.clone();
        match tokio::task::spawn_blocking(move || db.persist(PersistMode::SyncAll)).await {
            Ok(r) => r,
            Err(e) => Err(fjall::Error::Io(std::io::Error::other(e.to_string()))),
        }
    }

    fn last_entry(&self) -> Result<Option<Entry>, StorageError> {
        let Some(kv) = self.entries.iter().next_back() else {
            return Ok(None);
        };
        let v = kv.value().map_err(read_err)?;
        codec::from_slice(&v).map(Some).map_err(read_err)
    }
}

/// The syncer thread: for every batch of appends' callbacks waiting, one sync of the
/// journal, then each callback with its outcome, in the order the appends came. It ends
/// when the last [`LogStore`] clone is dropped.
fn start_syncer(
    db: Database,
    syncs: Arc<AtomicU64>,
) -> Result<std::sync::mpsc::Sender<LogFlushed<TypeConfig>>, fjall::Error> {
    let (tx, rx) = std::sync::mpsc::channel::<LogFlushed<TypeConfig>>();
    std::thread::Builder::new()
        .name("raft-log-sync".into())
        .spawn(move || {
            while let Ok(first) = rx.recv() {
                // Every callback taken here belongs to an append whose entries were
                // written before it was sent: this sync covers them all.
                let waiting: Vec<_> = std::iter::once(first).chain(rx.try_iter()).collect();
                let synced = db.persist(PersistMode::SyncAll);
                syncs.fetch_add(1, Ordering::Relaxed);
                for cb in waiting {
                    let r = match &synced {
                        Ok(()) => Ok(()),
                        Err(e) => Err(std::io::Error::other(e.to_string())),
                    };
                    cb.log_io_completed(r);
                }
            }
        })
        .map_err(fjall::Error::Io)?;
    Ok(tx)
}

/// The periodic syncer: once told an append waits, it sleeps `every` and syncs everything
/// written by then. It ends when the last [`LogStore`] clone is dropped. A failed sync is
/// logged and tried again at the next append (the appends it covered were answered already:
/// `periodic` promises the OS has them, not the disk).
fn start_periodic(
    db: Database,
    every: std::time::Duration,
    syncs: Arc<AtomicU64>,
) -> Result<std::sync::mpsc::Sender<()>, fjall::Error> {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("raft-log-sync".into())
        .spawn(move || {
            while rx.recv().is_ok() {
                std::thread::sleep(every);
                rx.try_iter().for_each(drop);
                match db.persist(PersistMode::SyncAll) {
                    Ok(()) => {
                        syncs.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => tracing::error!("syncing the raft log failed: {e}"),
                }
            }
        })
        .map_err(fjall::Error::Io)?;
    Ok(tx)
}

fn unknown_format() -> fjall::Error {
    fjall::Error::Io(std::io::Error::other(
        "the log was written in another format (an earlier memkit-raft): start on an \
         empty directory",
    ))
}

fn bound_key(b: Bound<&u64>) -> Bound<[u8; 8]> {
    match b {
        Bound::Included(i) => Bound::Included(i.to_be_bytes()),
        Bound::Excluded(i) => Bound::Excluded(i.to_be_bytes()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let keys = (bound_key(range.start_bound()), bound_key(range.end_bound()));
        let mut out = Vec::new();
        for kv in self.entries.range(keys) {
            let v = kv.value().map_err(read_err)?;
            out.push(codec::from_slice(&v).map_err(read_err)?);
        }
        Ok(out)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged_log_id: Option<LogId> = self.get_meta(PURGED)?;
        let last = self.last_entry()?.map(|e| e.log_id);
        Ok(LogState {
            last_purged_log_id,
            last_log_id: last.or(last_purged_log_id),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError> {
        self.put_meta(VOTE, vote)?;
        self.sync()
            .await
            .map_err(|e| StorageIOError::write_vote(AnyError::new(&e)).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError> {
        self.get_meta(VOTE)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        self.put_meta(COMMITTED, &committed)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.get_meta::<Option<LogId>>(COMMITTED)?.flatten())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut batch = self.db.batch();
        for e in entries {
            let v = codec::to_vec(&e).map_err(write_err)?;
            batch.insert(&self.entries, e.log_id.index.to_be_bytes(), v);
        }
        batch.commit().map_err(write_err)?;
        match &self.syncer {
            // Only once on disk may openraft count these entries toward a commit: the
            // syncer answers the callback then.
            Syncer::Each(tx) => {
                if let Err(e) = tx.send(callback) {
                    let gone = std::io::Error::other("the log's syncer has stopped");
                    e.0.log_io_completed(Err(gone));
                }
            }
            // Written to the OS by the commit (fjall's journal, not in manual mode).
            Syncer::Later(tx) => {
                let _ = tx.send(());
                callback.log_io_completed(Ok(()));
            }
            Syncer::Never => callback.log_io_completed(Ok(())),
        }
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let from = log_id.index.to_be_bytes();
        let keys: Vec<_> = self
            .entries
            .range(from..)
            .map(|kv| kv.key())
            .collect::<Result<_, _>>()
            .map_err(read_err)?;
        for k in keys {
            self.entries.remove(k).map_err(write_err)?;
        }
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        // The purge mark first: a crash between the two leaves entries below it, which
        // reads never ask for, rather than a gap openraft does not know about.
        self.put_meta(PURGED, &log_id)?;
        let upto = log_id.index.to_be_bytes();
        let keys: Vec<_> = self
            .entries
            .range(..=upto)
            .map(|kv| kv.key())
            .collect::<Result<_, _>>()
            .map_err(read_err)?;
        for k in keys {
            self.entries.remove(k).map_err(write_err)?;
        }
        Ok(())
    }
}
