//! The state machine: committed [`Proposal`]s applied to an engine over a persistent store
//! (memkit-persist, fjall, in `DIR/state`), as memkitd's `--persist` runs, RAM a cache of it.
//!
//! Crash safety: the store runs in batched mode (`memkit_persist::batch`): an entry's
//! changes reach fjall in one atomic batch with the `Applied` marker (last applied log id,
//! membership, log clock, pending flush), so after any crash the store is the state after
//! some entry, and the marker says which; openraft re-applies the log from there. The
//! store is synced before a snapshot is handed to openraft (which may then purge the log
//! up to it). A read or write the store fails is the node's end (openraft stops it), never a
//! reply: a refusal one node's disk made and its replicas' did not would make them differ.
//! For the same reason the store never refuses for low disk space: a full disk fails it.
//!
//! CAS: every write that gives an item a new CAS passes the engine its `E` option
//! (`new_cas`) set from the entry's log index and the write's place in it
//! ([`crate::types::cas_for`]), so every replica, and every replay after a restart, gives
//! the item the same CAS. Store, arith and delete-with-invalidate take it;
//! `touch` and `flush_all` keep CAS values as memcached does, so need none; the engine's own
//! CAS counter is never used.
//!
//! Time: see [`crate::clock`]. Snapshots: see [`crate::snapshot`].

use std::fs::File;
use std::io::Seek;
use std::path::Path;
use std::sync::Arc;

use memkit_engine::{Engine, EngineConfig};
use memkit_persist::{DiskStore, Durability, PersistOptions};
use memkit_types::{
    ArithMode, ArithOptions, Clock, DeleteOptions, Error as EngineError, GetOptions, Item,
    ReplicaRead, StoreOptions, SystemClock, Ttl,
};
use openraft::storage::RaftStateMachine;
use openraft::{AnyError, EntryPayload, OptionalSend, Snapshot, StorageIOError};
use serde::{Deserialize, Serialize};

use crate::clock::LogClock;
use crate::snapshot::{self, Files, Header, SnapshotBuilder};
use crate::types::{
    Entry, ExptimeUnix, LogId, Proposal, Refusal, Reply, SnapshotMeta, StorageError,
    StoredMembership, TypeConfig, Write, cas_for, to_exptime,
};

/// The log clock's start: 2 s after the epoch, so the first engine's epoch (its clock's
/// time at construction less 2 s) is 0 and lies before every stamp it will apply.
const START_MS: u64 = 2_000;

/// The key of the [`Applied`] marker in the store's `meta` keyspace.
const APPLIED: &[u8] = b"raft-applied";

/// What the store holds besides the items, committed with every entry's changes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Applied {
    last_applied: Option<LogId>,
    membership: StoredMembership,
    /// The log clock, Unix milliseconds.
    clock_ms: u64,
    pending_flush: Option<u64>,
    /// A snapshot install began and did not finish: the items are no state of the log; the
    /// current snapshot file is installed again at start.
    installing: bool,
}

/// What reads share with the state machine: the engine over the persistent store (emptied
/// and refilled by a snapshot install) and the log clock it runs on.
#[derive(Debug)]
pub struct Store {
    engine: Arc<Engine>,
    disk: Arc<DiskStore>,
    clock: LogClock,
    /// The index of the last entry applied to the engine (see [`Store::applied`]).
    applied: std::sync::atomic::AtomicU64,
}

impl Store {
    /// The store in `dir`, its engine's RAM (with fjall's caches) within `memory_limit`.
    fn open(dir: &Path, memory_limit: usize) -> Result<Store, StorageError> {
        let clock = LogClock::at(START_MS);
        let opts = PersistOptions {
            durability: Durability::None,
            batched: true,
            ..PersistOptions::new(dir)
        };
        let p = memkit_persist::open(&opts, engine_config(memory_limit, &clock))
            .map_err(|e| sm_err(std::io::Error::other(e)))?;
        Ok(Store {
            engine: p.engine,
            disk: p.store,
            clock,
            applied: Default::default(),
        })
    }

    /// The persistent store under the engine.
    pub fn disk(&self) -> &Arc<DiskStore> {
        &self.disk
    }

    fn marker(&self) -> Result<Option<Applied>, StorageError> {
        let Some(v) = self.disk.meta_value(APPLIED).map_err(sm_err)? else {
            return Ok(None);
        };
        crate::codec::from_slice(&v).map(Some).map_err(sm_err)
    }

    /// Commits the pending changes with `marker`; with `sync`, makes them durable too.
    fn commit(&self, marker: &Applied, sync: bool) -> Result<(), StorageError> {
        let v = crate::codec::to_vec(marker).map_err(sm_err)?;
        self.disk.commit(&[(APPLIED, &v)]).map_err(sm_err)?;
        if sync {
            self.disk.sync().map_err(sm_err)?;
        }
        Ok(())
    }

    /// The index of the last entry applied to the engine, set as soon as it is (openraft's
    /// `applied_index` metric comes later: after the entry's clients are answered).
    pub fn applied(&self) -> u64 {
        self.applied.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn set_applied(&self, index: Option<u64>) {
        let index = index.unwrap_or(0);
        self.applied
            .store(index, std::sync::atomic::Ordering::SeqCst);
    }

    /// The engine: always the same one (a snapshot install empties and refills it).
    pub fn engine(&self) -> Arc<Engine> {
        self.engine.clone()
    }

    /// The log clock: the largest leader stamp applied, Unix milliseconds.
    pub fn log_time_ms(&self) -> u64 {
        self.clock.now_millis()
    }

    /// Reads `key` from this node's engine, with its absolute expiry. Run at the log
    /// clock (see [`crate::clock`]); expiry is then judged against this node's own clock,
    /// never earlier than the log clock. `Item::ttl` is filled in against that time.
    pub fn read(&self, key: &[u8]) -> Result<Option<(Item, ExptimeUnix)>, EngineError> {
        let engine = self.engine();
        let opts = GetOptions {
            meta: true,
            no_bump: true,
            ..Default::default()
        };
        // The engine reports the remaining TTL against the log clock; an entry applied
        // meanwhile could move that clock, so read again until it stood still (a few
        // tries: entries arrive at most every few milliseconds per key).
        let mut tries = 0;
        let (item, log_now) = loop {
            let before = self.clock.now_secs();
            let item = engine.get(key, &opts)?;
            tries += 1;
            if self.clock.now_secs() == before || tries >= 8 {
                break (item, before);
            }
        };
        let Some(mut item) = item else {
            return Ok(None);
        };
        let exptime = match item.ttl {
            Some(Ttl::Secs(s)) => Some(log_now + u64::from(s)),
            _ => None,
        };
        let local_now = SystemClock.now_secs().max(log_now);
        if exptime.is_some_and(|t| t <= local_now) {
            return Ok(None);
        }
        item.ttl = Some(exptime.map_or(Ttl::Never, |t| {
            Ttl::Secs((t - local_now).min(u64::from(u32::MAX)) as u32)
        }));
        Ok(Some((item, exptime)))
    }
}

/// The engine over the store evicts: RAM is a cache, nothing is lost (see memkit-persist).
fn engine_config(memory_limit: usize, clock: &LogClock) -> EngineConfig {
    EngineConfig {
        memory_limit,
        clock: Arc::new(clock.clone()),
        ..Default::default()
    }
}

fn sm_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_state_machine(AnyError::new(&e)).into()
}

/// The state machine of one node.
#[derive(Debug)]
pub struct StateMachine {
    store: Arc<Store>,
    last_applied: Option<LogId>,
    membership: StoredMembership,
    /// The most recent delayed flush, as the engine records it (items written up to and
    /// during this Unix second go): a snapshot must carry it.
    pending_flush: Option<u64>,
    files: Arc<Files>,
}

impl StateMachine {
    /// The state machine in `dir`: the store in `dir/state` as its marker says (openraft
    /// then re-applies the committed entries after it). A store with no marker (a node of
    /// an earlier version, whose items were in RAM) or one whose snapshot install was cut
    /// off is refilled from the snapshot saved in `dir`, if any, else emptied.
    pub fn open(dir: &Path, memory_limit: usize) -> Result<StateMachine, StorageError> {
        let store = Arc::new(Store::open(&dir.join("state"), memory_limit)?);
        let mut sm = StateMachine {
            store,
            last_applied: None,
            membership: StoredMembership::default(),
            pending_flush: None,
            files: Arc::new(Files::new(dir)),
        };
        match sm.store.marker()? {
            Some(m) if !m.installing => {
                sm.store.clock.set(m.clock_ms);
                sm.pending_flush = m.pending_flush;
                sm.last_applied = m.last_applied;
                sm.membership = m.membership;
                sm.store.set_applied(sm.last_applied.map(|l| l.index));
            }
            _ => match sm.files.open_current().map_err(snapshot::read_err)? {
                Some(mut file) => {
                    let header = restore(&sm.store, &mut file, None)?;
                    sm.installed(&header);
                }
                None => {
                    let mut none = std::iter::empty();
                    sm.store
                        .disk
                        .replace_all(&mut none, None, 1)
                        .map_err(sm_err)?;
                    sm.store.engine.clear();
                    sm.store.commit(&Applied::default(), true)?;
                }
            },
        }
        Ok(sm)
    }

    /// The marker of the state now.
    fn marker(&self) -> Applied {
        Applied {
            last_applied: self.last_applied,
            membership: self.membership.clone(),
            clock_ms: self.store.clock.now_millis(),
            pending_flush: self.pending_flush,
            installing: false,
        }
    }

    /// The handle reads use.
    pub fn store(&self) -> Arc<Store> {
        self.store.clone()
    }

    /// Takes on what a restored snapshot's header says besides the items.
    fn installed(&mut self, header: &Header) {
        self.pending_flush = header.pending_flush;
        self.last_applied = header.meta.last_log_id;
        self.membership = header.meta.last_membership.clone();
        self.store.set_applied(self.last_applied.map(|l| l.index));
    }

    /// Applies one entry and commits its changes with the marker (see the module notes).
    fn apply_entry(&mut self, entry: Entry) -> Result<Vec<Reply>, StorageError> {
        self.last_applied = Some(entry.log_id);
        let replies = match entry.payload {
            EntryPayload::Blank => Vec::new(),
            EntryPayload::Membership(m) => {
                self.membership = StoredMembership::new(Some(entry.log_id), m);
                Vec::new()
            }
            EntryPayload::Normal(p) => self.apply_proposal(p, entry.log_id.index),
        };
        // A failed store read or write fails the commit too (the store is failed by then):
        // the replies made meanwhile are not this entry's outcomes everywhere.
        self.store.commit(&self.marker(), false)?;
        self.store.set_applied(Some(entry.log_id.index));
        Ok(replies)
    }

    fn apply_proposal(&mut self, p: Proposal, index: u64) -> Vec<Reply> {
        self.store.clock.advance_to(p.stamp_ms);
        let engine = self.store.engine();
        let mut replies = Vec::with_capacity(p.writes.len());
        for (pos, w) in p.writes.into_iter().enumerate() {
            let r = match w {
                Write::Flush { at_unix } => self.flush(&engine, at_unix).map(|()| Reply::Flushed),
                w => apply_write(&engine, w, cas_for(index, pos)),
            };
            replies.push(r.unwrap_or_else(|e| Reply::Refused(Refusal::from(e))));
        }
        replies
    }

    fn flush(&mut self, engine: &Engine, at_unix: Option<u64>) -> Result<(), EngineError> {
        let now = self.store.clock.now_secs();
        let delay = at_unix.map_or(0, |t| t.saturating_sub(now).min(u64::from(u32::MAX)) as u32);
        engine.try_flush_all(delay)?;
        // The engine's mark: `now + delay - 1` (memcached's), in Unix seconds.
        self.pending_flush = (delay > 0).then(|| now + u64::from(delay) - 1);
        Ok(())
    }
}

/// Replaces the store's items with a snapshot file's, once the whole file is checked (a
/// damaged one, or one whose metadata is not the `expected`, leaves the store as it was).
/// The marker says "installing" until the last item is in and synced: a crash meanwhile
/// installs the current snapshot file again at start. Blocking: a million items take a
/// while.
fn restore(
    store: &Store,
    file: &mut File,
    expected: Option<&SnapshotMeta>,
) -> Result<Header, StorageError> {
    let header = snapshot::verify(file).map_err(snapshot::read_err)?;
    if expected.is_some_and(|m| *m != header.meta) {
        let e = std::io::Error::other("the snapshot file's metadata is not openraft's");
        return Err(snapshot::read_err(e));
    }
    let installing = Applied {
        installing: true,
        ..Applied::default()
    };
    store.commit(&installing, true)?;
    // Emptied in place, not replaced: a server reads this very engine (and reports its
    // statistics). Its epoch, the log clock's start, lies before every stamp to come.
    store.clock.set(header.clock_ms);
    snapshot::fill(file, &store.disk, &store.engine).map_err(snapshot::read_err)?;
    let done = Applied {
        last_applied: header.meta.last_log_id,
        membership: header.meta.last_membership.clone(),
        clock_ms: header.clock_ms,
        pending_flush: header.pending_flush,
        installing: false,
    };
    store.commit(&done, true)?;
    Ok(header)
}

/// Applies every write but a flush, with `cas` as the CAS of whatever it creates.
fn apply_write(engine: &Engine, w: Write, cas: u64) -> Result<Reply, EngineError> {
    Ok(match w {
        Write::Store {
            key,
            value,
            flags,
            exptime_unix,
            mode,
            cas: compare,
            invalidate,
            vivify,
        } => {
            let opts = StoreOptions {
                mode: mode.into(),
                flags,
                exptime: to_exptime(exptime_unix),
                cas: compare,
                invalidate,
                vivify: vivify.map(|v| to_exptime(v.exptime_unix)),
                new_cas: Some(cas),
            };
            let s = engine.store(&key, &value, &opts)?;
            Reply::Stored {
                outcome: s.outcome.into(),
                cas: s.cas,
            }
        }
        Write::Delete {
            key,
            cas: compare,
            invalidate,
            stale_exptime,
            remove_value,
        } => {
            let opts = DeleteOptions {
                cas: compare,
                invalidate,
                stale_ttl: stale_exptime.map(|s| to_exptime(s.exptime_unix)),
                remove_value,
                new_cas: Some(cas),
            };
            Reply::Deleted(engine.delete(&key, &opts)?.into())
        }
        Write::Arith {
            key,
            incr,
            delta,
            cas: compare,
            vivify,
            set_exptime,
        } => {
            let opts = ArithOptions {
                mode: if incr {
                    ArithMode::Incr
                } else {
                    ArithMode::Decr
                },
                delta,
                vivify: vivify.map(|v| (v.initial, to_exptime(v.exptime_unix))),
                cas: compare,
                update_ttl: set_exptime.map(|s| to_exptime(s.exptime_unix)),
                new_cas: Some(cas),
            };
            Reply::Arith(engine.arithmetic(&key, &opts)?.into())
        }
        Write::Touch { key, exptime_unix } => {
            Reply::Touched(engine.touch(&key, to_exptime(exptime_unix))?)
        }
        Write::TouchRead {
            key,
            exptime_unix,
            classic,
        } => {
            // The expiry before the touch, by a read that counts nothing and hands out no
            // win token (those are each node's own: see `exec/replicate.rs` in memkitd).
            let now = engine.clock().now_secs();
            let peek = GetOptions {
                no_bump: true,
                classic: true,
                replica: Some(ReplicaRead {
                    at_unix: now,
                    touched_from: Some(None),
                }),
                ..Default::default()
            };
            // The engine's TTLs are against its clock, the log's.
            let before = engine.get_view(&key, &peek, |v| match v.ttl {
                Ttl::Secs(s) => Some(now + u64::from(s)),
                Ttl::Never => None,
            })?;
            // Then the touch, counted as memcached counts the read: a hit as a touch, a
            // miss as a touch for `gat`, as a get for `mg`.
            if before.is_some() || classic {
                engine.touch(&key, to_exptime(exptime_unix))?;
            } else {
                let count = GetOptions {
                    no_bump: true,
                    ..Default::default()
                };
                engine.get(&key, &count)?;
            }
            Reply::TouchedRead(before)
        }
        // `StateMachine::apply_proposal` takes flushes before they get here: it keeps
        // their mark for snapshots.
        Write::Flush { .. } => unreachable!("a flush is applied by the state machine"),
    })
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        Ok((self.last_applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Vec<Reply>>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        entries.into_iter().map(|e| self.apply_entry(e)).collect()
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        let (last, clock_ms) = (self.last_applied, self.store.clock.now_millis());
        let snapshot_id = match last {
            Some(l) => format!("{}-{}-{clock_ms}", l.leader_id.term, l.index),
            None => format!("empty-{clock_ms}"),
        };
        let header = Header {
            meta: SnapshotMeta {
                last_log_id: last,
                last_membership: self.membership.clone(),
                snapshot_id,
            },
            clock_ms,
            pending_flush: self.pending_flush,
        };
        // Frozen here, where no entry can be applied meanwhile (openraft holds the state
        // machine for this call) and every applied entry is committed: the view is exactly
        // the state at `last_applied`. The builder writes it out while entries go on.
        let frozen = self.store.disk.freeze();
        SnapshotBuilder::new(self.files.clone(), self.store.disk.clone(), header, frozen)
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<tokio::fs::File>, StorageError> {
        let file = self.files.create_recv().map_err(snapshot::read_err)?;
        Ok(Box::new(tokio::fs::File::from_std(file)))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<tokio::fs::File>,
    ) -> Result<(), StorageError> {
        let mut file = snapshot.into_std().await;
        let (store, files, expected) = (self.store.clone(), self.files.clone(), meta.clone());
        let header = tokio::task::spawn_blocking(move || -> Result<Header, StorageError> {
            file.sync_all().map_err(snapshot::read_err)?;
            let header = snapshot::verify(&mut file).map_err(snapshot::read_err)?;
            if header.meta != expected {
                let e = std::io::Error::other("the snapshot file's metadata is not openraft's");
                return Err(snapshot::read_err(e));
            }
            // The node's snapshot before the install starts: a crash during it installs
            // this file again at start (see `StateMachine::open`). Read through this
            // handle even if a snapshot covering more was kept instead.
            files
                .publish(&files.recv_path(), header.meta.last_log_id)
                .map_err(snapshot::read_err)?;
            restore(&store, &mut file, Some(&expected))
        })
        .await
        .map_err(snapshot::read_err)??;
        self.installed(&header);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let Some(mut file) = self.files.open_current().map_err(snapshot::read_err)? else {
            return Ok(None);
        };
        // The header only: the file was checked whole when it was written or received
        // (synced, then renamed) and when this node started.
        let (header, _) = snapshot::Reader::open(&mut file).map_err(snapshot::read_err)?;
        file.seek(std::io::SeekFrom::Start(0))
            .map_err(snapshot::read_err)?;
        Ok(Some(Snapshot {
            meta: header.meta,
            snapshot: Box::new(tokio::fs::File::from_std(file)),
        }))
    }
}

#[cfg(test)]
#[path = "state_machine_tests.rs"]
mod tests;
