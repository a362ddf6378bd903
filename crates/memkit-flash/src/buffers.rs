//! The state the store's threads share under its locks: the appender's (`WriteState`, with
//! the write buffers in memory) and the readers' queue (`ReadQueue`). Data only: what is done
//! with it is `writer.rs`'s and `reader.rs`'s, so that neither needs the other and the store
//! (`store.rs`) needs neither.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use crate::page::PageMeta;
use crate::{FlashLoc, ReadDone};

/// A write buffer: the bytes of one region of one page's incarnation.
#[derive(Debug)]
pub(crate) struct Buf {
    pub(crate) page: u32,
    pub(crate) version: u32,
    /// Page offset of `data[0]`.
    pub(crate) base: u32,
    /// Bytes the region may hold: the buffer size or what is left of the page.
    pub(crate) cap: u32,
    pub(crate) data: Vec<u8>,
}

impl Buf {
    /// The bytes of `at` if this buffer holds them.
    pub(crate) fn find(&self, at: FlashLoc) -> Option<&[u8]> {
        if self.page != at.page || self.version != at.version || at.offset < self.base {
            return None;
        }
        let start = (at.offset - self.base) as usize;
        self.data.get(start..start.checked_add(at.len as usize)?)
    }
}

/// The appender's state, under `Inner::ws`.
#[derive(Debug)]
pub(crate) struct WriteState {
    pub(crate) meta: Vec<PageMeta>,
    pub(crate) free: VecDeque<u32>,
    pub(crate) next_seq: u64,
    pub(crate) open: Option<u32>,
    pub(crate) cur: Option<Buf>,
    /// Handed to the writer, oldest first; the front one may be being written.
    pub(crate) queued: VecDeque<Arc<Buf>>,
    /// Written buffers' allocations, reused so the store's RAM stays `wbufs + 1` buffers.
    pub(crate) spare: Vec<Vec<u8>>,
    /// Buffers handed to the writer, and buffers it finished (written, skipped or failed).
    pub(crate) handed: u64,
    pub(crate) written: u64,
    pub(crate) degraded_until: Option<Instant>,
    pub(crate) stopped: bool,
    pub(crate) writer_alive: bool,
}

impl WriteState {
    pub(crate) fn new(meta: Vec<PageMeta>, free: VecDeque<u32>, next_seq: u64) -> WriteState {
        WriteState {
            meta,
            free,
            next_seq,
            open: None,
            cur: None,
            queued: VecDeque::new(),
            spare: Vec::new(),
            handed: 0,
            written: 0,
            degraded_until: None,
            stopped: false,
            writer_alive: true,
        }
    }

    /// A buffer's record and its location, if any buffer in memory holds it.
    pub(crate) fn lookup(&self, at: FlashLoc) -> Option<Result<Vec<u8>, Arc<Buf>>> {
        if let Some(b) = self.cur.as_ref().and_then(|b| b.find(at)) {
            return Some(Ok(b.to_vec()));
        }
        self.queued
            .iter()
            .find(|b| b.find(at).is_some())
            .map(|b| Err(Arc::clone(b)))
    }
}

/// One submitted batch.
pub(crate) struct ReadJob {
    pub(crate) reads: Vec<(FlashLoc, Vec<u8>)>,
    pub(crate) done: ReadDone,
}

/// Batches waiting for a reader thread.
#[derive(Default)]
pub(crate) struct ReadQueue {
    pub(crate) jobs: VecDeque<ReadJob>,
    /// Set under this lock at shutdown: a batch submitted after it runs on the caller's
    /// thread, so that every `done` is called exactly once.
    pub(crate) stopped: bool,
}
