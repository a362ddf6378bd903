//! memkit-flash: the flash tier under the engine (memcached's extstore, `-o ext_path`).
//!
//! Large values the cache evicts from RAM are appended to one or more files in large pages;
//! the cache keeps only a [`FlashLoc`] per value. It is a cache, not a database: nothing is
//! fsynced, but a read never returns wrong bytes. A location whose page was reclaimed since
//! reads as [`ReadError::Stale`]; a record that fails its checksum, holds another key or is
//! short reads as [`ReadError::BadCrc`]. Both are a miss for the cache.
//!
//! ```text
//! lib.rs      the public API (fixed: the engine codes against it), the threads' lifecycle
//! record.rs   the record format: crc32 | key_len u8 | value_len u32 | key | value
//! page.rs     the page size rule; per page: version and live counts (lock-free release)
//! store.rs    `Inner`, what the handle and the threads share; settings; stats
//! buffers.rs  the state under its locks: write buffers and the appender's (`WriteState`),
//!             the readers' queue; data only, so writer.rs and reader.rs need not each other
//! writer.rs   append into write buffers, the writer thread, write failures, flush
//! reader.rs   read (pread or a buffer not yet written), submitted batches, reader threads
//! compact.rs  the compactor thread: rescue what the owner wants, reclaim pages
//! state.rs    save_state / restore for a warm restart
//! ```
//!
//! **Pages.** Every file is cut into pages of one size for the whole store: `page_size`,
//! capped to a quarter of the smallest file, rounded down to 4 KiB, at least 64 KiB and at
//! most 1 GiB (a file smaller than one page is refused). Pages are numbered file after file.
//! A page's version changes whenever it is allocated, evicted or reclaimed; a location
//! carries the version it was written under, so reclaiming a page stales everything on it
//! at once without touching the cache's index.
//!
//! **Writes.** `append` copies the record into the current write buffer (at most
//! `wbuf_size`, a region of the open page) and returns its location at once; full buffers go
//! to one writer thread. `append` does no I/O and never waits: it returns `None` when the
//! record is larger than a buffer or its key longer than 255 bytes, when `wbufs` buffers
//! are already waiting for the writer, for a second after a failed write (whose page is
//! evicted), and after `shutdown`. When no page is free the oldest page is evicted.
//!
//! **Threads.** One writer, `io_threads` readers (for [`FlashStore::submit`]), one
//! compactor. They hold the shared state, never the [`FlashStore`] handle: dropping the last
//! handle runs [`FlashStore::shutdown`], which drains the writer and the read queue and
//! joins them.
//!
//! **Memory.** The store's RAM is its write buffers (`wbufs + 1` of `wbuf_size`), one more
//! buffer's worth while the compactor reads a page, and a few dozen bytes per page.

mod buffers;
mod compact;
mod page;
mod reader;
mod record;
mod state;
mod store;
mod writer;

#[cfg(test)]
mod tests;

use std::io;
use std::path::PathBuf;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Weak};
use std::thread::{self, JoinHandle};

use parking_lot::Mutex;

use store::{Inner, Settings};

/// One `ext_path=PATH:SIZE`.
#[derive(Debug, Clone)]
pub struct FileSpec {
    pub path: PathBuf,
    pub size: u64,
}

/// The `ext_*` settings the store uses, with memcached's defaults in `Default`.
#[derive(Debug, Clone)]
pub struct FlashConfig {
    pub files: Vec<FileSpec>,
    /// `ext_page_size` in bytes (memcached: 64 MiB).
    pub page_size: u64,
    /// `ext_wbuf_size` in bytes (memcached: 4 MiB).
    pub wbuf_size: usize,
    /// Write buffers that may be full and waiting for the writer at once (past that,
    /// `append` refuses: the writer lags, RAM evicts as without flash).
    pub wbufs: usize,
    /// `ext_threads`: reader threads.
    pub io_threads: usize,
    /// `ext_compact_under`: compact when fewer pages than this are free.
    pub compact_under: usize,
    /// `ext_max_frag`: a page whose live share is under this is worth compacting.
    pub max_frag: f64,
    /// `ext_drop_unread`: compaction drops values never read since written.
    pub drop_unread: bool,
}

/// Where a value is: a page, the page's version when written (a reclaimed page has a new
/// one, so every location into it goes stale at once), byte offset in the page, record length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlashLoc {
    pub page: u32,
    pub version: u32,
    pub offset: u32,
    pub len: u32,
}

/// Why a read found no value.
#[derive(Debug)]
pub enum ReadError {
    /// The page was reclaimed or evicted since the value was written.
    Stale,
    /// The bytes read fail their checksum, or hold another key, or are short.
    BadCrc,
    /// The read itself failed.
    Io(io::Error),
}

/// What compaction asks the cache about a record it found on a page it empties.
pub trait Owner: Send + Sync {
    /// Whether the cache still points at `at` for `key`; `Some(read)` if it does, `read`
    /// telling whether the value was read since it was written (for `ext_drop_unread`).
    fn wanted(&self, key: &[u8], at: FlashLoc) -> Option<bool>;
    /// The record was rewritten at `to`: the cache points there instead of `from`, if it
    /// still pointed at `from` (`false`, and the store releases `to`, if not).
    fn moved(&self, key: &[u8], from: FlashLoc, to: FlashLoc) -> bool;
}

/// Counters with memcached's `stats` names (without the `extstore_` prefix where it has one).
#[derive(Debug, Clone, Default)]
pub struct FlashStats {
    pub compact_lost: u64,
    pub compact_rescues: u64,
    pub compact_skipped: u64,
    pub page_allocs: u64,
    pub page_evictions: u64,
    pub page_reclaims: u64,
    pub pages_free: u64,
    pub pages_used: u64,
    pub objects_evicted: u64,
    pub objects_read: u64,
    pub objects_written: u64,
    pub objects_used: u64,
    pub bytes_evicted: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
    pub bytes_used: u64,
    pub bytes_fragmented: u64,
    pub limit_maxbytes: u64,
    pub io_queue: u64,
    /// Writes that failed (a full or failing disk); not a memcached name.
    pub write_errors: u64,
}

/// One page for `stats extstore`.
#[derive(Debug, Clone, Default)]
pub struct PageStats {
    pub version: u32,
    pub bytes: u64,
    pub objects: u64,
    pub free: bool,
}

/// The completion of a batch of reads, called once on a reader thread.
pub type ReadDone = Box<dyn FnOnce(Vec<Result<Vec<u8>, ReadError>>) + Send>;

/// The flash store. Cheap to share (`Arc`); every method takes `&self`.
pub struct FlashStore {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for FlashStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl Default for FlashConfig {
    /// memcached's defaults; `files` is empty (`open` refuses that), `wbufs` is 4.
    fn default() -> FlashConfig {
        FlashConfig {
            files: Vec::new(),
            page_size: 64 << 20,
            wbuf_size: 4 << 20,
            wbufs: 4,
            io_threads: 1,
            compact_under: 0,
            max_frag: 0.8,
            drop_unread: false,
        }
    }
}

impl FlashStore {
    /// Cold start: creates or truncates every file, sizes it, and starts the threads. What
    /// the files held before is gone. Zero `compact_under` means memcached's default (a
    /// quarter of the pages); `wbuf_size` is kept within 4 KiB and the page size, `wbufs`
    /// and `io_threads` at least 1.
    pub fn open(cfg: FlashConfig) -> io::Result<Arc<FlashStore>> {
        let set = Settings::new(&cfg)?;
        let files = set.open_files(true)?;
        let pages = set.pages().len();
        FlashStore::start(Inner::new(set, files, Inner::fresh_state(pages)))
    }

    /// Warm restart from [`save_state`](Self::save_state)'s bytes: reopens the files as they
    /// are. Every location valid at the save reads back its value. A state that is corrupt,
    /// or was saved with other files, sizes or page size, is an `InvalidData` error saying
    /// which.
    pub fn restore(cfg: FlashConfig, state: &[u8]) -> io::Result<Arc<FlashStore>> {
        let set = Settings::new(&cfg)?;
        let (ws, saved) = state::parse(&set, state)?;
        let files = set.open_files(false)?;
        let inner = Inner::new(set, files, ws);
        for (page, s) in inner.pages.iter().zip(&saved) {
            page.set(s.version, s.bytes, s.objects);
        }
        FlashStore::start(inner)
    }

    fn start(inner: Arc<Inner>) -> io::Result<Arc<FlashStore>> {
        let store = Arc::new(FlashStore {
            inner,
            threads: Mutex::new(Vec::new()),
        });
        let spawn = |name: &str, f: fn(Arc<Inner>)| {
            let inner = Arc::clone(&store.inner);
            let handle = thread::Builder::new()
                .name(name.into())
                .spawn(move || f(inner))?;
            store.threads.lock().push(handle);
            io::Result::Ok(())
        };
        spawn("flash-writer", writer::run)?;
        for _ in 0..store.inner.set.io_threads {
            spawn("flash-reader", reader::run)?;
        }
        spawn("flash-compact", compact::run)?;
        Ok(store)
    }

    /// The cache compaction asks about records (held weakly: the cache owns the store).
    pub fn set_owner(&self, owner: Weak<dyn Owner>) {
        *self.inner.owner.lock() = Some(owner);
    }

    /// Bytes a record of this key and value takes on the file (`FlashLoc::len`).
    pub fn record_len(key_len: usize, value_len: usize) -> usize {
        record::len(key_len, value_len)
    }

    /// Stores the record; `None` if it cannot now (see the crate doc). No I/O, no waiting.
    pub fn append(&self, key: &[u8], value: &[u8]) -> Option<FlashLoc> {
        self.inner.append(key, value)
    }

    /// The value at `at`, checked to be `key`'s (synchronous: a pread, or a copy out of a
    /// buffer not yet written).
    pub fn read(&self, at: FlashLoc, key: &[u8]) -> Result<Vec<u8>, ReadError> {
        self.inner.read(at, key)
    }

    /// Reads the batch on a reader thread, in order, and calls `done` once with one result
    /// per read. After `shutdown` the batch runs on the caller's thread.
    pub fn submit(&self, reads: Vec<(FlashLoc, Vec<u8>)>, done: ReadDone) {
        self.inner.submit(reads, done)
    }

    /// The cache no longer points at `at`: its bytes stop counting as live (if its page was
    /// not reclaimed since). No I/O, no lock.
    pub fn release(&self, at: FlashLoc) {
        self.inner.release(at)
    }

    /// Whether `at`'s page is still the incarnation it was written to.
    pub fn is_live(&self, at: FlashLoc) -> bool {
        self.inner
            .pages
            .get(at.page as usize)
            .is_some_and(|p| p.version() == at.version)
    }

    /// Blocks until every record appended so far is on the file (or its write failed).
    pub fn flush(&self) -> io::Result<()> {
        self.inner.flush()
    }

    /// Flushes and returns the page table for [`restore`](Self::restore). Call it after
    /// the last `append`: a location handed out later is not covered (it may read as a miss
    /// after the restore, never as wrong bytes).
    pub fn save_state(&self) -> io::Result<Vec<u8>> {
        self.inner.save_state()
    }

    /// The counters, and the page table's sums (taken under the write lock, briefly).
    pub fn stats(&self) -> FlashStats {
        self.inner.stats()
    }

    /// One entry per page, in page order.
    pub fn page_stats(&self) -> Vec<PageStats> {
        self.inner.page_stats()
    }

    /// Writes what is buffered, finishes the queued reads, and joins the threads. Later
    /// appends return `None`; reads still work. Idempotent.
    pub fn shutdown(&self) {
        {
            let mut ws = self.inner.ws.lock();
            self.inner.hand_off(&mut ws);
            ws.stopped = true;
        }
        self.inner.stop.store(true, SeqCst);
        self.inner.work_cv.notify_all();
        self.inner.stop_readers();
        self.inner.poke_compactor();
        let handles = std::mem::take(&mut *self.threads.lock());
        let me = thread::current().id();
        for h in handles {
            // The last handle may be dropped on one of the store's own threads (in a read's
            // completion, or in the owner during compaction): that thread sees the stop
            // flag and ends by itself.
            if h.thread().id() != me {
                let _ = h.join();
            }
        }
    }

    /// Makes the next `n` buffer writes fail as a full disk would (for tests of the
    /// degraded mode, here and in the engine).
    #[doc(hidden)]
    pub fn fail_next_writes(&self, n: u32) {
        self.inner.fail_writes.store(n, SeqCst);
    }

    /// Makes every reader thread wait `millis` before each batch from now on, as a slow
    /// disk would (for tests that a wait for flash holds up only its own connection).
    #[doc(hidden)]
    pub fn slow_reads(&self, millis: u64) {
        self.inner.slow_reads.store(millis, SeqCst);
    }
}

impl Drop for FlashStore {
    fn drop(&mut self) {
        self.shutdown();
    }
}
