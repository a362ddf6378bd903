//! memkit-flash: the flash tier under the engine (memcached's extstore, `-o ext_path`).
//!
//! API SKELETON: bodies to be written (see the task). Signatures are fixed: the engine
//! codes against them.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Weak};

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

#[derive(Debug)]
pub struct FlashStore {}

impl FlashStore {
    pub fn open(cfg: FlashConfig) -> io::Result<Arc<FlashStore>> {
        let _ = cfg;
        todo!()
    }
    pub fn restore(cfg: FlashConfig, state: &[u8]) -> io::Result<Arc<FlashStore>> {
        let _ = (cfg, state);
        todo!()
    }
    pub fn set_owner(&self, owner: Weak<dyn Owner>) {
        let _ = owner;
        todo!()
    }
    pub fn record_len(key_len: usize, value_len: usize) -> usize {
        let _ = (key_len, value_len);
        todo!()
    }
    pub fn append(&self, key: &[u8], value: &[u8]) -> Option<FlashLoc> {
        let _ = (key, value);
        todo!()
    }
    pub fn read(&self, at: FlashLoc, key: &[u8]) -> Result<Vec<u8>, ReadError> {
        let _ = (at, key);
        todo!()
    }
    pub fn submit(&self, reads: Vec<(FlashLoc, Vec<u8>)>, done: ReadDone) {
        let _ = (reads, done);
        todo!()
    }
    pub fn release(&self, at: FlashLoc) {
        let _ = at;
        todo!()
    }
    pub fn is_live(&self, at: FlashLoc) -> bool {
        let _ = at;
        todo!()
    }
    pub fn flush(&self) -> io::Result<()> {
        todo!()
    }
    pub fn save_state(&self) -> io::Result<Vec<u8>> {
        todo!()
    }
    pub fn stats(&self) -> FlashStats {
        todo!()
    }
    pub fn page_stats(&self) -> Vec<PageStats> {
        todo!()
    }
    pub fn shutdown(&self) {
        todo!()
    }
}
