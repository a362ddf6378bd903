//! Durability: the committer thread, group commit, and what a connection awaits.
//!
//! Writes never wait inside the engine. Each write takes a *ticket* once it is in the
//! journal's buffer. In `sync` mode a connection, after dispatching a batch of requests,
//! asks for "durable >= the current ticket" and awaits it before writing the batch's
//! replies; the committer thread flushes and fsyncs the journal once for everything
//! buffered so far, then publishes how far that covered. While one fsync runs, more writes
//! pile up behind it and share the next: group commit, with no timer to tune.
//!
//! Why "the current ticket" is enough: a write takes its ticket *after* its journal append
//! returned, and the committer reads the ticket counter *before* it flushes, so every
//! write with a ticket up to what it read is in the flush.
//!
//! A failed fsync is final for the process: the pages it should have written may be gone
//! from the page cache while the file still looks written, so retrying cannot make those
//! writes durable. The store is marked failed, every wait ends with [`NotDurable`], and
//! [`DiskStore`] refuses every change from then on (see `disk.rs`).

use std::sync::Weak;
use std::sync::atomic::Ordering::*;
use std::time::{Duration, Instant};

use crate::Durability;
use crate::disk::{DiskStore, DurableState};

/// A stand-in for the disk, for tests: called before every journal fsync the committer
/// makes; an `Err` is taken as that fsync's failure (see [`DiskStore::set_sync_fault`]).
pub type SyncFault = std::sync::Arc<dyn Fn() -> std::io::Result<()> + Send + Sync>;

/// Starts the committer for `store`'s durability mode. It stops when the store is dropped
/// or has failed.
pub(crate) fn spawn(store: &std::sync::Arc<DiskStore>) -> std::io::Result<()> {
    let weak = std::sync::Arc::downgrade(store);
    let mode = store.durability;
    let handle = std::thread::Builder::new()
        .name("memkit-commit".into())
        .spawn(move || match mode {
            Durability::Sync => sync_loop(weak),
            Durability::Periodic(ms) => periodic_loop(weak, Duration::from_millis(ms.max(1))),
            Durability::None => {}
        })?;
    let _ = store.committer.set(handle.thread().clone());
    Ok(())
}

/// The journal fjall appends to now: the highest-numbered `N.jnl` in the store directory.
fn newest_journal(dir: &std::path::Path) -> Option<(u64, std::path::PathBuf)> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| {
            let p = e.ok()?.path();
            let id = p
                .file_name()?
                .to_str()?
                .strip_suffix(".jnl")?
                .parse()
                .ok()?;
            Some((id, p))
        })
        .max_by_key(|(id, _)| *id)
}

/// Makes everything written to the journal so far durable.
///
/// fjall's own `persist(SyncData)` holds the journal's writer lock through the fdatasync,
/// which stalls every writer (and with it the engine shard each one holds) for the whole
/// flush. So the buffered journal bytes are handed to the OS under the lock
/// (`PersistMode::Buffer`, a write(2)), and the fdatasync runs outside it on our own
/// descriptor of the same file: fsync applies to the file, whichever descriptor asks.
/// A journal fjall sealed meanwhile was fsynced by fjall before it switched files.
fn sync_journal(s: &DiskStore) -> std::io::Result<()> {
    s.db.persist(fjall::PersistMode::Buffer)
        .map_err(std::io::Error::other)?;
    let fault = s.sync_fault.lock().clone();
    if let Some(fault) = fault {
        fault()?;
    }
    let mut cached = s.journal_fd.lock();
    let Some((id, path)) = newest_journal(&s.dir) else {
        // Not the layout we know: let fjall do it, lock and all.
        return s
            .db
            .persist(fjall::PersistMode::SyncData)
            .map_err(std::io::Error::other);
    };
    if cached.as_ref().is_none_or(|(cid, _)| *cid != id) {
        *cached = Some((id, std::fs::File::open(path)?));
    }
    cached.as_ref().expect("just set").1.sync_data()
}

/// One journal fsync covering every write whose ticket was taken before it started.
fn flush_once(s: &DiskStore) {
    let target = s.tickets.load(Acquire);
    match sync_journal(s) {
        Ok(()) => {
            s.durable.store(target, Release);
            s.counters.flushes.fetch_add(1, Relaxed);
            s.counters
                .last_flush_unix
                .store(s.clock.now_secs(), Relaxed);
            // `failed` is left as it is: a writer may have set it meanwhile.
            s.durable_tx.send_modify(|d| d.upto = target);
        }
        Err(_) => s.mark_failed(),
    }
}

fn sync_loop(weak: Weak<DiskStore>) {
    loop {
        let Some(s) = weak.upgrade() else { return };
        if s.failed.load(Acquire) {
            return;
        }
        if s.wanted.load(Acquire) > s.durable.load(Acquire) {
            flush_once(&s);
            continue;
        }
        drop(s);
        // Woken by a wait (unpark); the timeout only notices a dropped store.
        std::thread::park_timeout(Duration::from_millis(100));
    }
}

/// Each fsync starts `every` after the one before it started (at once, if that one took
/// longer): a write acknowledged at time t is fsynced by t + `every` + the time of the
/// fsync that covers it (`docs/persistence.md`).
fn periodic_loop(weak: Weak<DiskStore>, every: Duration) {
    let mut next = Instant::now() + every;
    loop {
        let Some(s) = weak.upgrade() else { return };
        if s.failed.load(Acquire) {
            return;
        }
        let now = Instant::now();
        if now >= next {
            if s.tickets.load(Acquire) > s.durable.load(Acquire) {
                flush_once(&s);
            }
            next = now + every;
            continue;
        }
        drop(s);
        // Woken early by a failure (unpark); a dropped store is noticed at the tick.
        std::thread::park_timeout(next - now);
    }
}

/// The journal could not be flushed (disk full or failing): the writes waited for are not
/// durable and must not be acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotDurable;

impl std::fmt::Display for NotDurable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the persistent store could not flush its journal")
    }
}

impl std::error::Error for NotDurable {}

impl DiskStore {
    /// Whether replies must wait for durability (`sync` mode).
    pub fn acks_wait(&self) -> bool {
        self.durability == Durability::Sync
    }

    /// A receiver for [`Self::wait_durable`]; one per connection.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<DurableState> {
        self.durable_tx.subscribe()
    }

    /// Waits until every write made so far (by anyone) is durable. `Err` if the journal
    /// could not be flushed: those writes must not be acknowledged.
    pub async fn wait_durable(
        &self,
        rx: &mut tokio::sync::watch::Receiver<DurableState>,
    ) -> Result<(), NotDurable> {
        let t = self.tickets.load(Acquire);
        if self.durable.load(Acquire) >= t {
            return Ok(());
        }
        if self.durability == Durability::None && !self.failed.load(Acquire) {
            return Ok(());
        }
        self.want(t);
        match rx.wait_for(|d| d.upto >= t || d.failed).await {
            Ok(d) if d.upto >= t => Ok(()),
            _ => Err(NotDurable),
        }
    }

    /// The blocking form of [`Self::wait_durable`], for embedded use and tests.
    pub fn wait_durable_blocking(&self) -> Result<(), NotDurable> {
        let mut rx = self.subscribe();
        memkit_types::blocking::block_on(self.wait_durable(&mut rx))
    }

    /// Asks the committer for a flush covering `ticket` (`sync` mode; the `periodic`
    /// committer keeps its own time).
    fn want(&self, ticket: u64) {
        if self.durability == Durability::Sync
            && self.wanted.fetch_max(ticket, AcqRel) < ticket
            && let Some(c) = self.committer.get()
        {
            c.unpark();
        }
    }

    /// Nothing more will become durable: writes are refused from now on (`disk.rs`),
    /// `stats` says so, the waits end, and the committer, woken, stops.
    pub(crate) fn mark_failed(&self) {
        self.failed.store(true, Release);
        self.durable_tx.send_modify(|d| d.failed = true);
        if let Some(c) = self.committer.get() {
            c.unpark();
        }
    }

    /// Makes the committer's journal fsyncs go through `fault` first (`None`: the disk
    /// alone). For tests of a failing disk: an `Err` from `fault` is that fsync's failure,
    /// with all that follows (see the module notes and `docs/persistence.md`).
    pub fn set_sync_fault(&self, fault: Option<SyncFault>) {
        *self.sync_fault.lock() = fault;
    }
}
