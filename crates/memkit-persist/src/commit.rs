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

use std::sync::Weak;
use std::sync::atomic::Ordering::*;
use std::time::Duration;

use crate::Durability;
pub use crate::disk::NotDurable;
use crate::disk::{DiskStore, DurableState, Waiter};

/// Starts the committer for `store`'s durability mode. It stops when the store is dropped.
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
            s.durable_tx.send_replace(DurableState {
                upto: target,
                failed: false,
            });
            s.wake_waiters(Some(target));
        }
        Err(_) => {
            // fjall poisons itself after a failed journal flush: every later write fails
            // too, and waiting connections are told rather than left hanging.
            s.failed.store(true, Release);
            s.durable_tx.send_modify(|d| d.failed = true);
            s.wake_waiters(None);
        }
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
        // Woken by `wait_durable` (unpark); the timeout only notices a dropped store.
        std::thread::park_timeout(Duration::from_millis(100));
    }
}

fn periodic_loop(weak: Weak<DiskStore>, every: Duration) {
    loop {
        std::thread::sleep(every);
        let Some(s) = weak.upgrade() else { return };
        if s.failed.load(Acquire) {
            return;
        }
        if s.tickets.load(Acquire) > s.durable.load(Acquire) {
            flush_once(&s);
        }
    }
}

impl DiskStore {
    /// The ticket covering every write made so far: a wait for it covers them all.
    pub fn ticket(&self) -> u64 {
        self.tickets.load(Acquire)
    }

    /// Whether every write up to `ticket` is durable.
    pub fn is_durable(&self, ticket: u64) -> bool {
        self.durable.load(Acquire) >= ticket
    }

    /// Calls `done` (from the committer's thread, or from this call) once every write up
    /// to `ticket` is durable, or with `Err` once the journal failed: those writes must not
    /// be acknowledged.
    pub fn when_durable(&self, ticket: u64, done: Box<dyn FnOnce(Result<(), NotDurable>) + Send>) {
        if self.is_durable(ticket) {
            return done(Ok(()));
        }
        {
            let mut w = self.waiters.lock();
            // Checked under the lock the committer takes to wake waiters: a failure or a
            // flush published before this point is seen here, one after it finds the entry.
            if self.failed.load(Acquire) {
                drop(w);
                return done(Err(NotDurable));
            }
            if self.is_durable(ticket) {
                drop(w);
                return done(Ok(()));
            }
            w.push((ticket, done));
        }
        if self.wanted.fetch_max(ticket, AcqRel) < ticket
            && let Some(c) = self.committer.get()
        {
            c.unpark();
        }
    }

    /// Calls the waiters a flush made durable (`upto`), or every waiter (`None`: the
    /// journal failed).
    fn wake_waiters(&self, upto: Option<u64>) {
        let ready: Vec<Waiter> = {
            let mut w = self.waiters.lock();
            match upto {
                Some(t) => w.extract_if(.., |(ticket, _)| *ticket <= t).collect(),
                None => w.drain(..).collect(),
            }
        };
        for (_, done) in ready {
            done(if upto.is_some() {
                Ok(())
            } else {
                Err(NotDurable)
            });
        }
    }

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
        if self.wanted.fetch_max(t, AcqRel) < t
            && let Some(c) = self.committer.get()
        {
            c.unpark();
        }
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
}
