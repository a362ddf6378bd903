//! Compaction: when free pages run low, the page with the smallest live share is read back,
//! the records the cache still wants are appended again, and the page is reclaimed.
//!
//! The compactor holds no lock while it reads or calls the owner (whose methods take cache
//! shard locks, under which `append` takes the write lock). The page may be evicted under
//! it meanwhile (the appender found no free page); every step checks the version, and a
//! page that changed is left alone.

use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use crate::page::{Page, PageMeta, PageState};
use crate::record;
use crate::store::{Inner, bump};
use crate::{FlashLoc, Owner};

/// The compactor's tick when nothing pokes it.
const TICK: Duration = Duration::from_millis(100);
/// Pages compacted at most per tick, so that a stop request is seen soon.
const PAGES_PER_TICK: usize = 4;
/// How long a rescue waits for the writer when it lags, before counting the record lost.
const LAG_WAIT: Duration = Duration::from_millis(200);

/// The compactor thread.
pub(crate) fn run(inner: Arc<Inner>) {
    loop {
        {
            let mut poked = inner.compact_poke.lock();
            if !*poked {
                inner.compact_cv.wait_for(&mut poked, TICK);
            }
            *poked = false;
        }
        if inner.stop.load(SeqCst) {
            return;
        }
        inner.compact_pass();
    }
}

impl Inner {
    /// Reclaims the used pages nothing lives on, then compacts while free pages are fewer
    /// than `compact_under`.
    pub(crate) fn compact_pass(&self) {
        self.reclaim_empty();
        for _ in 0..PAGES_PER_TICK {
            if self.stop.load(SeqCst) || self.ws.lock().free.len() >= self.set.compact_under {
                return;
            }
            let Some(owner) = self.owner() else { return };
            let Some((page, version, end, target)) = self.pick() else {
                return;
            };
            if !self.compact_page(&*owner, page, version, end, target) {
                return;
            }
        }
    }

    fn reclaim_empty(&self) {
        let mut ws = self.ws.lock();
        let ws = &mut *ws;
        for p in 0..self.pages.len() {
            if ws.meta[p].state == PageState::Used && self.pages[p].live().1 == 0 {
                self.reclaim(&mut ws.meta, &mut ws.free, p as u32);
            }
        }
    }

    /// Back to the free list (the caller holds the write lock and checked the page is used).
    fn reclaim(&self, meta: &mut [PageMeta], free: &mut std::collections::VecDeque<u32>, p: u32) {
        self.pages[p as usize].bump();
        meta[p as usize] = PageMeta::FREE;
        free.push_back(p);
        bump(&self.c.page_reclaims, 1);
    }

    /// The used page with the smallest live share under `max_frag`: its number, version,
    /// end of records, and the writer count to wait for before its bytes are all on file.
    fn pick(&self) -> Option<(u32, u32, u32, u64)> {
        let ws = self.ws.lock();
        let page_size = self.set.page_size as f64;
        let (p, share) = (ws.meta.iter().enumerate())
            .filter(|(_, m)| m.state == PageState::Used)
            .map(|(p, _)| (p, self.pages[p].live().0 as f64 / page_size))
            .min_by(|a, b| a.1.total_cmp(&b.1))?;
        if share >= self.set.max_frag {
            return None;
        }
        let version = self.pages[p].version();
        Some((p as u32, version, ws.meta[p].write_off, Inner::handed(&ws)))
    }

    /// Rescues what the owner wants from the page and reclaims it. `false` if the store is
    /// stopping or the page could not be read.
    fn compact_page(&self, owner: &dyn Owner, p: u32, version: u32, end: u32, target: u64) -> bool {
        if self.wait_written(&mut self.ws.lock(), target).is_err() {
            return false;
        }
        let page = &self.pages[p as usize];
        let mut win = Window::new(self, page, end);
        let mut off = 0u32;
        while let Ok(Some(header)) = win.get(off, record::HEADER) {
            let Some(len) = record::announced_len(header).filter(|&l| l <= self.set.wbuf_size)
            else {
                // A header no append wrote: the rest of the page cannot be parsed.
                bump(&self.c.compact_lost, 1);
                break;
            };
            let Ok(Some(rec)) = win.get(off, len) else {
                break;
            };
            if self.stop.load(SeqCst) || page.version() != version {
                return false;
            }
            let at = FlashLoc {
                page: p,
                version,
                offset: off,
                len: len as u32,
            };
            off += len as u32;
            match record::parse(rec, version) {
                Some((key, value)) => self.rescue(owner, key, value, at),
                None => bump(&self.c.compact_lost, 1),
            }
        }
        let mut ws = self.ws.lock();
        let ws = &mut *ws;
        if page.version() == version && ws.meta[p as usize].state == PageState::Used {
            self.reclaim(&mut ws.meta, &mut ws.free, p);
        }
        true
    }

    fn rescue(&self, owner: &dyn Owner, key: &[u8], value: &[u8], at: FlashLoc) {
        let Some(read) = owner.wanted(key, at) else {
            bump(&self.c.compact_skipped, 1);
            return;
        };
        if self.set.drop_unread && !read {
            bump(&self.c.compact_lost, 1);
            return;
        }
        let new = self.append(key, value).or_else(|| {
            self.wait_room(LAG_WAIT);
            self.append(key, value)
        });
        match new {
            None => bump(&self.c.compact_lost, 1),
            Some(to) if owner.moved(key, at, to) => bump(&self.c.compact_rescues, 1),
            Some(to) => {
                // Changed or deleted since `wanted`: the copy is dead on arrival.
                self.release(to);
                bump(&self.c.compact_skipped, 1);
            }
        }
    }

    pub(crate) fn release(&self, at: FlashLoc) {
        if let Some(page) = self.pages.get(at.page as usize) {
            page.release(at.version, at.len);
        }
    }
}

/// A sliding window over a page's records, one write buffer long: a record is never longer
/// than a buffer, so it always fits once the window starts at it.
struct Window<'a> {
    inner: &'a Inner,
    page: &'a Page,
    buf: Vec<u8>,
    start: u32,
    len: usize,
    end: u32,
}

impl<'a> Window<'a> {
    fn new(inner: &'a Inner, page: &'a Page, end: u32) -> Window<'a> {
        Window {
            inner,
            page,
            buf: vec![0; inner.set.wbuf_size],
            start: 0,
            len: 0,
            end,
        }
    }

    /// Bytes `off..off + n` of the page, if they are before the end of its records.
    fn get(&mut self, off: u32, n: usize) -> io::Result<Option<&[u8]>> {
        let (off, end) = (off as usize, self.end as usize);
        if off + n > end {
            return Ok(None);
        }
        let start = self.start as usize;
        if off < start || off + n > start + self.len {
            let len = self.buf.len().min(end - off);
            let file = &self.inner.files[self.page.file];
            file.read_exact_at(&mut self.buf[..len], self.page.file_off + off as u64)?;
            (self.start, self.len) = (off as u32, len);
        }
        let from = off - self.start as usize;
        Ok(Some(&self.buf[from..from + n]))
    }
}
