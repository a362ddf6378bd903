//! Durability: the committer thread, group commit, and what a connection awaits.
//!
//! Writes never wait inside the engine. Each write takes a *ticket* once it is in the
//! journal's buffer. In `sync` mode a connection, after dispatching a batch of requests,
//! asks for "durable >= the current ticket" and awaits it before writing the batch's
//! replies; the committer thread flushes and fsyncs the journal once for everything
//! buffered so far, then publishes how far that covered. While one fsync runs, more writes
//! pile up behind it and share the next: group commit, with no timer to tune.
//!
//! Two ways to wait: [`DiskStore::wait_durable`] (a tokio watch channel, for async code),
//! and [`DiskStore::when_durable`] (a callback the committer calls from its own thread,
//! for event loops that are not tokio's).
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

/// What [`DiskStore::when_durable`] calls: `Ok` once the writes waited for are durable,
/// `Err` if they never will be.
pub type DurableCallback = Box<dyn FnOnce(Result<(), NotDurable>) + Send>;

/// A registered [`DurableCallback`] and the ticket it waits for.
pub(crate) type Waiter = (u64, DurableCallback);

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

/// One journal fsync covering every write whose ticket was taken before it started; then
/// the waiters it covered are told. `ready` is the committer's scratch list.
fn flush_once(s: &DiskStore, ready: &mut Vec<Waiter>) {
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
            s.settle(target, ready);
        }
        Err(_) => {
            s.mark_failed();
            s.fail_waiters();
        }
    }
}

fn sync_loop(weak: Weak<DiskStore>) {
    let mut ready = Vec::new();
    loop {
        let Some(s) = weak.upgrade() else { return };
        if s.failed.load(Acquire) {
            s.fail_waiters();
            return;
        }
        if s.wanted.load(Acquire) > s.durable.load(Acquire) {
            flush_once(&s, &mut ready);
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
    let mut ready = Vec::new();
    let mut next = Instant::now() + every;
    loop {
        let Some(s) = weak.upgrade() else { return };
        if s.failed.load(Acquire) {
            s.fail_waiters();
            return;
        }
        let now = Instant::now();
        if now >= next {
            if s.tickets.load(Acquire) > s.durable.load(Acquire) {
                flush_once(&s, &mut ready);
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

    /// The current ticket: what a wait for "every write made so far" must cover. A write
    /// has its ticket once the engine call that made it returned.
    pub fn ticket(&self) -> u64 {
        self.tickets.load(Acquire)
    }

    /// Whether every write with a ticket up to `ticket` is durable already (a wait for it
    /// would be answered at once).
    pub fn is_durable(&self, ticket: u64) -> bool {
        self.durable.load(Acquire) >= ticket.min(self.tickets.load(Acquire))
    }

    /// Calls `done` once every write with a ticket up to `ticket` (a value [`Self::ticket`]
    /// returned; a larger one counts as the current ticket) is durable: `Ok`, or `Err` if
    /// the journal could not be flushed (those writes must not be acknowledged) or the
    /// store was dropped first. Every registered callback is called exactly once.
    ///
    /// Where `done` runs: at once on the calling thread when the answer is known now (the
    /// ticket is durable already, the store has failed, or the mode is `none`, where no
    /// fsync is waited for: a write reached the OS before it took its ticket); otherwise
    /// on the committer's thread, in no particular order among the callbacks one fsync
    /// covers, or on the thread dropping the store. It must be quick and must not call
    /// into the engine or the store's waits.
    ///
    /// Cost: one uncontended lock and a push onto a list the committer keeps (no
    /// allocation of its own once the list has grown to the number of waiters). In `sync`
    /// mode the committer is woken, as [`Self::wait_durable`] wakes it; in `periodic` mode
    /// the next periodic fsync answers.
    pub fn when_durable(&self, ticket: u64, done: DurableCallback) {
        let ticket = ticket.min(self.tickets.load(Acquire));
        let answer = {
            let mut waiters = self.waiters.lock();
            // Checked under the lock the committer takes after publishing `durable` and
            // after setting `failed`: a callback is either seen by it or answered here.
            if self.durable.load(Acquire) >= ticket {
                Ok(())
            } else if self.failed.load(Acquire) {
                Err(NotDurable)
            } else if self.durability == Durability::None {
                Ok(())
            } else {
                waiters.push((ticket, done));
                drop(waiters);
                self.want(ticket);
                return;
            }
        };
        done(answer);
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

    /// The writes up to `upto` are durable: calls the callbacks waiting for them.
    fn settle(&self, upto: u64, ready: &mut Vec<Waiter>) {
        {
            let mut waiters = self.waiters.lock();
            let mut i = 0;
            while i < waiters.len() {
                if waiters[i].0 <= upto {
                    ready.push(waiters.swap_remove(i));
                } else {
                    i += 1;
                }
            }
        }
        for (_, done) in ready.drain(..) {
            done(Ok(()));
        }
    }

    /// Nothing more will become durable: writes are refused from now on (`disk.rs`),
    /// `stats` says so, and the waits end. Callbacks are answered by the committer
    /// ([`Self::fail_waiters`]), which this wakes, never by the caller (a writer holding an
    /// engine shard lock).
    pub(crate) fn mark_failed(&self) {
        self.failed.store(true, Release);
        self.durable_tx.send_modify(|d| d.failed = true);
        if let Some(c) = self.committer.get() {
            c.unpark();
        }
    }

    /// Answers every registered callback with `Err` (after [`Self::mark_failed`]).
    pub(crate) fn fail_waiters(&self) {
        let waiters = std::mem::take(&mut *self.waiters.lock());
        for (_, done) in waiters {
            done(Err(NotDurable));
        }
    }

    /// Makes the committer's journal fsyncs go through `fault` first (`None`: the disk
    /// alone). For tests of a failing disk: an `Err` from `fault` is that fsync's failure,
    /// with all that follows (see the module notes and `docs/persistence.md`).
    pub fn set_sync_fault(&self, fault: Option<SyncFault>) {
        *self.sync_fault.lock() = fault;
    }
}

impl Drop for DiskStore {
    /// Callbacks still waiting are told their writes did not become durable, rather than
    /// being left hanging.
    fn drop(&mut self) {
        for (_, done) in std::mem::take(self.waiters.get_mut()) {
            done(Err(NotDurable));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::mpsc::{Receiver, channel};
    use std::time::Duration;

    use memkit_engine::{Embedded, EngineConfig};
    use memkit_types::{Blocking, Exptime};

    use super::*;
    use crate::{PersistOptions, Persistent};

    /// A store in a scratch directory, removed when dropped (after the store).
    struct Scratch(Option<Persistent>, std::path::PathBuf);

    impl Scratch {
        fn open(tag: &str, durability: Durability) -> Scratch {
            static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = N.fetch_add(1, Relaxed);
            let dir = std::env::temp_dir()
                .join(format!("memkit-commit-{tag}-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let opts = PersistOptions {
                durability,
                // No sweeper round during a test.
                sweep_every: Duration::from_secs(3600),
                ..PersistOptions::new(&dir)
            };
            let p = crate::open(&opts, EngineConfig::with_memory(16 << 20)).unwrap();
            Scratch(Some(p), dir)
        }
        fn p(&self) -> &Persistent {
            self.0.as_ref().unwrap()
        }
        fn store(&self) -> &Arc<DiskStore> {
            &self.p().store
        }
        fn set(&self, key: &str) {
            let c = Blocking(Embedded::from(self.p().engine.clone()));
            c.set(key.as_bytes(), b"v", 0, Exptime::NEVER).unwrap();
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            drop(self.0.take());
            let _ = std::fs::remove_dir_all(&self.1);
        }
    }

    /// Registers a callback for `ticket` that reports `(tag, outcome)` on `tx`.
    fn register(
        s: &DiskStore,
        ticket: u64,
        tag: u64,
        tx: &std::sync::mpsc::Sender<(u64, Result<(), NotDurable>)>,
    ) {
        let tx = tx.clone();
        s.when_durable(
            ticket,
            Box::new(move |r| {
                // The test may be over (a drop answering late): nobody to tell.
                let _ = tx.send((tag, r));
            }),
        );
    }

    /// The next answer; a generous bound, only so that a missing one fails the test.
    fn next(rx: &Receiver<(u64, Result<(), NotDurable>)>) -> (u64, Result<(), NotDurable>) {
        rx.recv_timeout(Duration::from_secs(30))
            .expect("a callback was called")
    }

    #[test]
    fn callbacks_are_answered_when_their_ticket_is_covered_whatever_the_order() {
        // Periodic with an hour's period: no fsync happens but the ones the test makes.
        let sc = Scratch::open("order", Durability::Periodic(3_600_000));
        let s = sc.store();
        let (tx, rx) = channel();
        sc.set("a");
        let t1 = s.ticket();
        sc.set("b");
        let t2 = s.ticket();
        assert!(t2 > t1 && t1 > 0);
        register(s, t2, 2, &tx);
        register(s, t1, 1, &tx);
        register(s, t2, 22, &tx);
        assert!(rx.try_recv().is_err(), "nothing is durable yet");
        // A flush that covered the first write only.
        s.durable.store(t1, Release);
        s.settle(t1, &mut Vec::new());
        assert_eq!(next(&rx), (1, Ok(())));
        assert!(rx.try_recv().is_err(), "ticket {t2} is not durable yet");
        flush_once(s, &mut Vec::new());
        let mut rest = [next(&rx), next(&rx)];
        rest.sort_by_key(|(tag, _)| *tag);
        assert_eq!(rest, [(2, Ok(())), (22, Ok(()))]);
        // Already durable: answered at once, on this thread.
        register(s, t1, 3, &tx);
        assert_eq!(rx.try_recv(), Ok((3, Ok(()))));
        // A ticket beyond the counter is the current one.
        register(s, u64::MAX, 4, &tx);
        assert_eq!(rx.try_recv(), Ok((4, Ok(()))));
        assert!(s.waiters.lock().is_empty());
    }

    #[test]
    fn registering_wakes_the_committer_in_sync_mode() {
        let sc = Scratch::open("wake", Durability::Sync);
        let s = sc.store();
        let (tx, rx) = channel();
        sc.set("a");
        let flushes = s.counters.flushes.load(Relaxed);
        register(s, s.ticket(), 1, &tx);
        assert_eq!(next(&rx), (1, Ok(())));
        assert!(s.counters.flushes.load(Relaxed) > flushes);
        assert!(s.durable.load(Acquire) >= s.ticket());
    }

    #[test]
    fn a_failed_fsync_answers_every_waiter_and_every_later_one_with_err() {
        let sc = Scratch::open("fail", Durability::Periodic(3_600_000));
        let s = sc.store();
        let (tx, rx) = channel();
        sc.set("a");
        let t1 = s.ticket();
        sc.set("b");
        for tag in 0..5 {
            register(s, if tag % 2 == 0 { t1 } else { s.ticket() }, tag, &tx);
        }
        s.set_sync_fault(Some(Arc::new(|| Err(std::io::Error::other("injected")))));
        flush_once(s, &mut Vec::new());
        let mut got: Vec<_> = (0..5).map(|_| next(&rx)).collect();
        got.sort_by_key(|(tag, _)| *tag);
        assert_eq!(
            got,
            (0..5).map(|t| (t, Err(NotDurable))).collect::<Vec<_>>()
        );
        assert!(s.stats().failed);
        register(s, s.ticket(), 9, &tx);
        assert_eq!(rx.try_recv(), Ok((9, Err(NotDurable))));
        assert_eq!(s.wait_durable_blocking(), Err(NotDurable));
    }

    #[test]
    fn the_sync_committer_answers_waiters_when_its_fsync_fails() {
        let sc = Scratch::open("fail-sync", Durability::Sync);
        let s = sc.store();
        let (tx, rx) = channel();
        s.set_sync_fault(Some(Arc::new(|| Err(std::io::Error::other("injected")))));
        sc.set("a");
        register(s, s.ticket(), 1, &tx);
        assert_eq!(next(&rx), (1, Err(NotDurable)));
        assert_eq!(s.wait_durable_blocking(), Err(NotDurable));
    }

    #[test]
    fn dropping_the_store_fails_the_callbacks_still_waiting() {
        let mut sc = Scratch::open("drop", Durability::Periodic(3_600_000));
        let (tx, rx) = channel();
        sc.set("a");
        let s = sc.store().clone();
        register(&s, s.ticket(), 1, &tx);
        register(&s, s.ticket(), 2, &tx);
        drop(s);
        assert!(rx.try_recv().is_err());
        drop(sc.0.take()); // the engine and the store, and with them the last reference
        let mut got = [next(&rx), next(&rx)];
        got.sort_by_key(|(tag, _)| *tag);
        assert_eq!(got, [(1, Err(NotDurable)), (2, Err(NotDurable))]);
    }

    #[test]
    fn in_none_mode_a_wait_ends_at_once() {
        let sc = Scratch::open("none", Durability::None);
        let s = sc.store();
        let (tx, rx) = channel();
        sc.set("a");
        register(s, s.ticket(), 1, &tx);
        assert_eq!(rx.try_recv(), Ok((1, Ok(()))));
        assert_eq!(s.wait_durable_blocking(), Ok(()));
    }
}
