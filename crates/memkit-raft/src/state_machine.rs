//! The state machine: committed [`Proposal`]s applied to an in-memory engine.
//!
//! The engine never evicts (`EngineConfig::evict = false`): a replicated store must not
//! lose an acknowledged write silently. A write that meets a full memory is answered with
//! the engine's refusal ([`Reply::Refused`]), which is then that entry's outcome.
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
use memkit_types::{
    ArithMode, ArithOptions, Clock, DeleteOptions, Error as EngineError, GetOptions, Item,
    ReplicaRead, StoreOptions, SystemClock, Ttl,
};
use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, OptionalSend, Snapshot};

use crate::clock::LogClock;
use crate::snapshot::{self, Files, Header, SnapshotBuilder};
use crate::types::{
    Entry, ExptimeUnix, LogId, Proposal, Refusal, Reply, SnapshotMeta, StorageError,
    StoredMembership, TypeConfig, Write, cas_for, to_exptime,
};

/// The log clock's start: 2 s after the epoch, so the first engine's epoch (its clock's
/// time at construction less 2 s) is 0 and lies before every stamp it will apply.
const START_MS: u64 = 2_000;

/// What reads share with the state machine: the engine (emptied and refilled by a snapshot
/// install) and the log clock it runs on.
#[derive(Debug)]
pub struct Store {
    engine: Arc<Engine>,
    clock: LogClock,
    /// The index of the last entry applied to the engine (see [`Store::applied`]).
    applied: std::sync::atomic::AtomicU64,
}

impl Store {
    fn new(memory_limit: usize) -> Store {
        let clock = LogClock::at(START_MS);
        let engine = Arc::new(Engine::new(engine_config(memory_limit, &clock)));
        Store {
            engine,
            clock,
            applied: Default::default(),
        }
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

fn engine_config(memory_limit: usize, clock: &LogClock) -> EngineConfig {
    EngineConfig {
        memory_limit,
        evict: false,
        clock: Arc::new(clock.clone()),
        ..Default::default()
    }
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
    /// The state machine in `dir`: from the last snapshot saved there, if any (openraft
    /// then re-applies the committed entries after it), else empty.
    pub fn open(dir: &Path, memory_limit: usize) -> Result<StateMachine, StorageError> {
        let mut sm = StateMachine {
            store: Arc::new(Store::new(memory_limit)),
            last_applied: None,
            membership: StoredMembership::default(),
            pending_flush: None,
            files: Arc::new(Files::new(dir)),
        };
        if let Some(mut file) = sm.files.open_current().map_err(snapshot::read_err)? {
            let header = restore(&sm.store, &mut file, None)?;
            sm.installed(&header);
        }
        Ok(sm)
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

    fn apply_entry(&mut self, entry: Entry) -> Vec<Reply> {
        self.last_applied = Some(entry.log_id);
        let replies = match entry.payload {
            EntryPayload::Blank => Vec::new(),
            EntryPayload::Membership(m) => {
                self.membership = StoredMembership::new(Some(entry.log_id), m);
                Vec::new()
            }
            EntryPayload::Normal(p) => self.apply_proposal(p, entry.log_id.index),
        };
        self.store.set_applied(Some(entry.log_id.index));
        replies
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

/// Replaces `store`'s engine's items with a snapshot file's, once the whole file is
/// checked (a damaged one, or one whose metadata is not the `expected`, leaves the engine
/// as it was). Blocking: a million items take a while.
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
    // Emptied in place, not replaced: a server reads this very engine (and reports its
    // statistics). Its epoch, the log clock's start, lies before every stamp to come.
    store.clock.set(header.clock_ms);
    let engine = store.engine();
    engine.clear();
    snapshot::fill(file, &engine).map_err(snapshot::read_err)?;
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
        Ok(entries.into_iter().map(|e| self.apply_entry(e)).collect())
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
        // Written here, where no entry can be applied meanwhile (openraft holds the state
        // machine for this call): the file is exactly the state at `last_applied`. On the
        // blocking pool, so heartbeats go on; synced later, by the builder.
        let (engine, path) = (self.store.engine(), self.files.tmp_path());
        let written = tokio::task::spawn_blocking(move || {
            snapshot::write_engine(&path, &header, &engine).map(|f| (header, f))
        })
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        SnapshotBuilder::new(self.files.clone(), written)
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
            let header = restore(&store, &mut file, Some(&expected))?;
            // Kept once installed: a crash before this restarts from the older snapshot
            // and the log, which the leader then brings up to date again.
            let recv = files.recv_path();
            files
                .publish(&recv, header.meta.last_log_id)
                .map_err(snapshot::read_err)?;
            Ok(header)
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
