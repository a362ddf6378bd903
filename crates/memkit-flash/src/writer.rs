//! Appending: records go into a write buffer that maps to a region of the open page, full
//! buffers queue for the one writer thread, and until a buffer's write completes reads of
//! its records are served from it.
//!
//! `append` runs under a cache shard's lock, so it never does I/O and never waits: when the
//! writer lags (`wbufs` buffers queued), or writes failed less than a second ago, it refuses
//! and the cache keeps the value in RAM only.

use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use parking_lot::MutexGuard;

use crate::FlashLoc;
use crate::buffers::{Buf, WriteState};
use crate::page::{PageMeta, PageState};
use crate::record;
use crate::store::{Inner, bump};

/// How long appends are refused after a failed write.
const DEGRADED_FOR: Duration = Duration::from_secs(1);

impl Inner {
    pub(crate) fn append(&self, key: &[u8], value: &[u8]) -> Option<FlashLoc> {
        let len = record::len(key.len(), value.len());
        if key.len() > record::MAX_KEY || len > self.set.wbuf_size {
            return None;
        }
        let mut ws = self.ws.lock();
        if ws.stopped {
            return None;
        }
        if let Some(until) = ws.degraded_until {
            if Instant::now() < until {
                return None;
            }
            ws.degraded_until = None;
        }
        let fits = ws
            .cur
            .as_ref()
            .is_some_and(|b| b.data.len() + len <= b.cap as usize);
        if !fits {
            let must_queue = ws.cur.as_ref().is_some_and(|b| !b.data.is_empty());
            if must_queue && ws.queued.len() >= self.set.wbufs {
                return None;
            }
            self.hand_off(&mut ws);
            self.open_buf(&mut ws, len);
        }
        let ws = &mut *ws;
        let b = ws.cur.as_mut()?;
        let at = FlashLoc {
            page: b.page,
            version: b.version,
            offset: b.base + b.data.len() as u32,
            len: len as u32,
        };
        record::encode(&mut b.data, b.version, key, value);
        ws.meta[b.page as usize].write_off = at.offset + at.len;
        self.pages[b.page as usize].add(at.len);
        bump(&self.c.objects_written, 1);
        bump(&self.c.bytes_written, len as u64);
        Some(at)
    }

    /// Queues the current buffer for the writer (an empty one is just recycled).
    pub(crate) fn hand_off(&self, ws: &mut WriteState) {
        let Some(b) = ws.cur.take() else { return };
        if b.data.is_empty() {
            ws.spare.push(b.data);
            return;
        }
        ws.queued.push_back(Arc::new(b));
        ws.handed += 1;
        self.work_cv.notify_one();
    }

    /// Opens a buffer with room for `len` bytes: on the open page if it has them, else on a
    /// new page.
    fn open_buf(&self, ws: &mut WriteState, len: usize) {
        let page_size = self.set.page_size as u32;
        let room = |ws: &WriteState, p: u32| page_size - ws.meta[p as usize].write_off;
        let page = match ws.open {
            Some(p) if room(ws, p) as usize >= len => p,
            _ => self.take_page(ws),
        };
        let base = ws.meta[page as usize].write_off;
        let mut data = ws
            .spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(self.set.wbuf_size));
        data.clear();
        ws.cur = Some(Buf {
            page,
            version: self.pages[page as usize].version(),
            base,
            cap: (self.set.wbuf_size as u32).min(room(ws, page)),
            data,
        });
    }

    /// Closes the open page and opens another: a free one, or else the oldest used one,
    /// evicted. The scan for the oldest is linear, once a page fill.
    fn take_page(&self, ws: &mut WriteState) -> u32 {
        if let Some(p) = ws.open.take() {
            ws.meta[p as usize].state = PageState::Used;
        }
        let page = match ws.free.pop_front() {
            Some(p) => p,
            None => {
                let oldest = (ws.meta.iter().enumerate())
                    .filter(|(_, m)| m.state == PageState::Used)
                    .min_by_key(|(_, m)| m.seq)
                    .map_or(0, |(i, _)| i as u32);
                let (bytes, objects) = self.pages[oldest as usize].bump();
                bump(&self.c.page_evictions, 1);
                bump(&self.c.objects_evicted, objects);
                bump(&self.c.bytes_evicted, bytes);
                oldest
            }
        };
        // A fresh version on allocation too: no location handed out before (even one a
        // restored index still holds) can name this incarnation.
        self.pages[page as usize].bump();
        ws.meta[page as usize] = PageMeta {
            state: PageState::Open,
            write_off: 0,
            seq: ws.next_seq,
        };
        ws.next_seq += 1;
        ws.open = Some(page);
        bump(&self.c.page_allocs, 1);
        if ws.free.len() < self.set.compact_under {
            self.poke_compactor();
        }
        page
    }

    /// Blocks until every record appended so far is on the file.
    pub(crate) fn flush(&self) -> io::Result<()> {
        let mut ws = self.ws.lock();
        self.hand_off(&mut ws);
        let target = ws.handed;
        self.wait_written(&mut ws, target)
    }

    /// Waits until the writer finished the first `target` buffers handed to it.
    pub(crate) fn wait_written(
        &self,
        ws: &mut MutexGuard<'_, WriteState>,
        target: u64,
    ) -> io::Result<()> {
        while ws.written < target {
            if !ws.writer_alive {
                return Err(io::Error::other("flash: the writer thread is gone"));
            }
            self.done_cv.wait(ws);
        }
        Ok(())
    }

    /// The number of buffers handed to the writer so far (for `wait_written`).
    pub(crate) fn handed(ws: &WriteState) -> u64 {
        ws.handed
    }

    /// Waits (up to `limit`) until the writer has room for another buffer.
    pub(crate) fn wait_room(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let mut ws = self.ws.lock();
        while ws.queued.len() >= self.set.wbufs && ws.writer_alive && !ws.stopped {
            if self.done_cv.wait_until(&mut ws, deadline).timed_out() {
                return;
            }
        }
    }

    fn write_buf(&self, b: &Buf) -> io::Result<()> {
        if self
            .fail_writes
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(io::Error::other("flash: injected write failure"));
        }
        let page = &self.pages[b.page as usize];
        self.files[page.file].write_all_at(&b.data, page.file_off + u64::from(b.base))
    }

    /// A write failed: the page's incarnation is lost (its locations go stale) and appends
    /// stop for a while, so that a full or failing disk costs the cache its flash tier, not
    /// errors to clients.
    fn write_failed(&self, ws: &mut WriteState, b: &Buf) {
        bump(&self.c.write_errors, 1);
        ws.degraded_until = Some(Instant::now() + DEGRADED_FOR);
        let page = &self.pages[b.page as usize];
        if page.version() != b.version {
            return;
        }
        let (bytes, objects) = page.bump();
        bump(&self.c.objects_evicted, objects);
        bump(&self.c.bytes_evicted, bytes);
        if ws.open == Some(b.page) {
            ws.open = None;
            if let Some(cur) = ws.cur.take() {
                ws.spare.push(cur.data);
            }
        }
        ws.meta[b.page as usize] = PageMeta::FREE;
        ws.free.push_back(b.page);
    }
}

/// Marks the writer gone however it ends, so that flushes fail instead of hanging.
struct AliveGuard<'a>(&'a Inner);

impl Drop for AliveGuard<'_> {
    fn drop(&mut self) {
        self.0.ws.lock().writer_alive = false;
        self.0.done_cv.notify_all();
    }
}

/// The writer thread: writes queued buffers in order; on shutdown it drains the queue first.
pub(crate) fn run(inner: Arc<Inner>) {
    let _alive = AliveGuard(&inner);
    loop {
        let buf = {
            let mut ws = inner.ws.lock();
            loop {
                if let Some(b) = ws.queued.front() {
                    break Arc::clone(b);
                }
                if ws.stopped {
                    return;
                }
                inner.work_cv.wait(&mut ws);
            }
        };
        #[cfg(test)]
        while inner.stall.load(SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // A buffer of an evicted incarnation is not worth writing.
        let live = inner.pages[buf.page as usize].version() == buf.version;
        let res = if live { inner.write_buf(&buf) } else { Ok(()) };
        let mut ws = inner.ws.lock();
        ws.queued.pop_front();
        ws.written += 1;
        if res.is_err() {
            inner.write_failed(&mut ws, &buf);
        }
        // A reader may still hold the Arc for a moment; then the allocation is just dropped.
        match Arc::try_unwrap(buf) {
            Ok(b) if ws.spare.len() <= inner.set.wbufs => ws.spare.push(b.data),
            _ => {}
        }
        drop(ws);
        inner.done_cv.notify_all();
    }
}
