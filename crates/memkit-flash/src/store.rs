//! The store's shared state (`Inner`): what the public handle and every thread hold.
//!
//! Threads hold an `Arc<Inner>`, never the public `FlashStore`: the handle's `Drop` stops and
//! joins them, so the last user dropping the handle ends the store.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};

use parking_lot::{Condvar, Mutex};

use crate::buffers::{ReadQueue, WriteState};
use crate::page::{self, Page, PageMeta, PageState};
use crate::{FileSpec, FlashConfig, FlashStats, Owner, PageStats};

/// Event counters, bumped without a lock.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) compact_lost: AtomicU64,
    pub(crate) compact_rescues: AtomicU64,
    pub(crate) compact_skipped: AtomicU64,
    pub(crate) page_allocs: AtomicU64,
    pub(crate) page_evictions: AtomicU64,
    pub(crate) page_reclaims: AtomicU64,
    pub(crate) objects_evicted: AtomicU64,
    pub(crate) objects_read: AtomicU64,
    pub(crate) objects_written: AtomicU64,
    pub(crate) bytes_evicted: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    pub(crate) bytes_read: AtomicU64,
    pub(crate) io_queue: AtomicU64,
    pub(crate) write_errors: AtomicU64,
}

pub(crate) fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Relaxed);
}

/// The settings after the store's adjustments (see `FlashStore::open`).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) files: Vec<FileSpec>,
    pub(crate) page_size: u64,
    pub(crate) wbuf_size: usize,
    pub(crate) wbufs: usize,
    pub(crate) io_threads: usize,
    pub(crate) compact_under: usize,
    pub(crate) max_frag: f64,
    pub(crate) drop_unread: bool,
}

impl Settings {
    pub(crate) fn new(cfg: &FlashConfig) -> io::Result<Settings> {
        let page_size = page::page_size(cfg.page_size, &cfg.files)?;
        let pages: u64 = cfg.files.iter().map(|f| f.size / page_size).sum();
        if pages > u64::from(u32::MAX) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "flash: too many pages",
            ));
        }
        let compact_under = match cfg.compact_under {
            // memcached's default: a quarter of the pages.
            0 => (pages / 4) as usize,
            n => n,
        };
        Ok(Settings {
            files: cfg.files.clone(),
            page_size,
            wbuf_size: cfg.wbuf_size.clamp(4096, page_size as usize),
            wbufs: cfg.wbufs.max(1),
            io_threads: cfg.io_threads.max(1),
            compact_under,
            max_frag: cfg.max_frag,
            drop_unread: cfg.drop_unread,
        })
    }

    /// The page table the files make: pages numbered file after file.
    pub(crate) fn pages(&self) -> Vec<Page> {
        let mut pages = Vec::new();
        for (i, f) in self.files.iter().enumerate() {
            for j in 0..f.size / self.page_size {
                pages.push(Page::new(i, j * self.page_size));
            }
        }
        pages
    }

    /// Opens every file: a cold start truncates and sizes it, a restore takes it as it is
    /// (and checks its size).
    pub(crate) fn open_files(&self, truncate: bool) -> io::Result<Vec<File>> {
        let mut out = Vec::with_capacity(self.files.len());
        for f in &self.files {
            let file = if truncate {
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&f.path)?;
                file.set_len(f.size)?;
                file
            } else {
                let file = OpenOptions::new().read(true).write(true).open(&f.path)?;
                let len = file.metadata()?.len();
                if len != f.size {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "flash: {} is {len} bytes, the configuration says {}",
                            f.path.display(),
                            f.size
                        ),
                    ));
                }
                file
            };
            out.push(file);
        }
        Ok(out)
    }
}

/// Everything the handle and the threads share.
pub(crate) struct Inner {
    pub(crate) set: Settings,
    pub(crate) files: Vec<File>,
    pub(crate) pages: Vec<Page>,
    /// The appender's state; the writer, flush and buffer lookups take it briefly.
    pub(crate) ws: Mutex<WriteState>,
    /// The writer waits here for buffers.
    pub(crate) work_cv: Condvar,
    /// Flushes and lagging compactions wait here for the writer.
    pub(crate) done_cv: Condvar,
    pub(crate) reads: Mutex<ReadQueue>,
    pub(crate) read_cv: Condvar,
    /// Set by `append` when free pages run low: the compactor looks without waiting its tick.
    pub(crate) compact_poke: Mutex<bool>,
    pub(crate) compact_cv: Condvar,
    pub(crate) owner: Mutex<Option<Weak<dyn Owner>>>,
    pub(crate) stop: AtomicBool,
    pub(crate) c: Counters,
    /// Writes still to fail on purpose (`FlashStore::fail_next_writes`).
    pub(crate) fail_writes: AtomicU32,
    /// Milliseconds each reader waits before a batch (a test's slow disk).
    pub(crate) slow_reads: AtomicU64,
    /// Holds the writer back while set, so tests can see buffers queued.
    #[cfg(test)]
    pub(crate) stall: AtomicBool,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlashStore")
            .field("files", &self.set.files)
            .field("page_size", &self.set.page_size)
            .field("pages", &self.pages.len())
            .finish_non_exhaustive()
    }
}

impl Inner {
    pub(crate) fn new(set: Settings, files: Vec<File>, ws: WriteState) -> Arc<Inner> {
        let pages = set.pages();
        Arc::new(Inner {
            set,
            files,
            pages,
            ws: Mutex::new(ws),
            work_cv: Condvar::new(),
            done_cv: Condvar::new(),
            reads: Mutex::new(ReadQueue::default()),
            read_cv: Condvar::new(),
            compact_poke: Mutex::new(false),
            compact_cv: Condvar::new(),
            owner: Mutex::new(None),
            stop: AtomicBool::new(false),
            c: Counters::default(),
            fail_writes: AtomicU32::new(0),
            slow_reads: AtomicU64::new(0),
            #[cfg(test)]
            stall: AtomicBool::new(false),
        })
    }

    /// A cold start's page table: every page free, in order.
    pub(crate) fn fresh_state(pages: usize) -> WriteState {
        WriteState::new(
            vec![PageMeta::FREE; pages],
            (0..pages as u32).collect::<VecDeque<_>>(),
            0,
        )
    }

    pub(crate) fn owner(&self) -> Option<Arc<dyn Owner>> {
        self.owner.lock().as_ref().and_then(Weak::upgrade)
    }

    pub(crate) fn poke_compactor(&self) {
        *self.compact_poke.lock() = true;
        self.compact_cv.notify_one();
    }

    pub(crate) fn stats(&self) -> FlashStats {
        let c = &self.c;
        let mut s = FlashStats {
            compact_lost: c.compact_lost.load(Relaxed),
            compact_rescues: c.compact_rescues.load(Relaxed),
            compact_skipped: c.compact_skipped.load(Relaxed),
            page_allocs: c.page_allocs.load(Relaxed),
            page_evictions: c.page_evictions.load(Relaxed),
            page_reclaims: c.page_reclaims.load(Relaxed),
            objects_evicted: c.objects_evicted.load(Relaxed),
            objects_read: c.objects_read.load(Relaxed),
            objects_written: c.objects_written.load(Relaxed),
            bytes_evicted: c.bytes_evicted.load(Relaxed),
            bytes_written: c.bytes_written.load(Relaxed),
            bytes_read: c.bytes_read.load(Relaxed),
            io_queue: c.io_queue.load(Relaxed),
            write_errors: c.write_errors.load(Relaxed),
            limit_maxbytes: self.pages.len() as u64 * self.set.page_size,
            ..FlashStats::default()
        };
        let ws = self.ws.lock();
        for (p, m) in self.pages.iter().zip(&ws.meta) {
            if m.state == PageState::Free {
                s.pages_free += 1;
                continue;
            }
            let (bytes, objects) = p.live();
            s.pages_used += 1;
            s.bytes_used += bytes;
            s.objects_used += objects;
            // As memcached: a used page's dead bytes and its unwritten tail alike.
            s.bytes_fragmented += self.set.page_size.saturating_sub(bytes);
        }
        s
    }

    pub(crate) fn page_stats(&self) -> Vec<PageStats> {
        let ws = self.ws.lock();
        self.pages
            .iter()
            .zip(&ws.meta)
            .map(|(p, m)| {
                let (bytes, objects) = p.live();
                PageStats {
                    version: p.version(),
                    bytes,
                    objects,
                    free: m.state == PageState::Free,
                }
            })
            .collect()
    }
}
