//! The page table: where each page lives, and its version and live counts.
//!
//! A page's version and live bytes share one atomic word, and its version and live objects
//! another, so that `release` is a compare-and-swap that only lands on the incarnation it
//! was meant for: a release racing a reclaim either counts against the old incarnation
//! (which the reclaim then zeroes) or sees the new version and does nothing.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use crate::FileSpec;

/// Smallest page the store uses: below this, per-page overhead and evictions of whole
/// pages dominate.
pub(crate) const MIN_PAGE: u64 = 64 * 1024;
/// Largest page: offsets and live bytes are 32-bit (`FlashLoc::offset`, the packed words).
pub(crate) const MAX_PAGE: u64 = 1 << 30;
const ALIGN: u64 = 4096;

/// The store's one page size: `cfg_page` capped to a quarter of the smallest file, rounded
/// down to 4 KiB, within `MIN_PAGE..=MAX_PAGE`. Every file must hold at least one page.
pub(crate) fn page_size(cfg_page: u64, files: &[FileSpec]) -> io::Result<u64> {
    let Some(smallest) = files.iter().map(|f| f.size).min() else {
        return Err(invalid_input("flash: no ext_path file configured"));
    };
    let size = cfg_page.min(smallest / 4).min(MAX_PAGE) / ALIGN * ALIGN;
    let size = size.max(MIN_PAGE);
    if smallest < size {
        return Err(invalid_input(&format!(
            "flash: a file of {smallest} bytes is smaller than one page ({size} bytes)"
        )));
    }
    Ok(size)
}

fn invalid_input(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.to_owned())
}

/// One page: where it is on disk, and its shared counters.
#[derive(Debug)]
pub(crate) struct Page {
    pub(crate) file: usize,
    pub(crate) file_off: u64,
    /// version << 32 | live bytes.
    live: AtomicU64,
    /// version << 32 | live objects.
    objects: AtomicU64,
}

fn word(version: u32, low: u64) -> u64 {
    (u64::from(version) << 32) | (low & 0xffff_ffff)
}

impl Page {
    pub(crate) fn new(file: usize, file_off: u64) -> Page {
        Page {
            file,
            file_off,
            live: AtomicU64::new(0),
            objects: AtomicU64::new(0),
        }
    }

    pub(crate) fn version(&self) -> u32 {
        (self.live.load(SeqCst) >> 32) as u32
    }

    /// Live bytes and objects of the current incarnation.
    pub(crate) fn live(&self) -> (u64, u64) {
        (
            self.live.load(SeqCst) & 0xffff_ffff,
            self.objects.load(SeqCst) & 0xffff_ffff,
        )
    }

    /// Counts a record appended to this (open) page. Only the appender calls it, under the
    /// write lock, so the version cannot move meanwhile; a page holds fewer than 2^32 bytes,
    /// so the low half never carries into the version.
    pub(crate) fn add(&self, len: u32) {
        self.live.fetch_add(u64::from(len), SeqCst);
        self.objects.fetch_add(1, SeqCst);
    }

    /// Uncounts one record of incarnation `version`, if that is still the current one.
    pub(crate) fn release(&self, version: u32, len: u32) {
        if sub_if(&self.live, version, u64::from(len)) {
            sub_if(&self.objects, version, 1);
        }
    }

    /// Starts a new incarnation with nothing live; returns the old one's live bytes and
    /// objects. Only called under the write lock, which serializes version changes.
    pub(crate) fn bump(&self) -> (u64, u64) {
        let next = self.version().wrapping_add(1);
        let bytes = self.live.swap(word(next, 0), SeqCst) & 0xffff_ffff;
        let objects = self.objects.swap(word(next, 0), SeqCst) & 0xffff_ffff;
        (bytes, objects)
    }

    /// Sets the page as a saved state described it.
    pub(crate) fn set(&self, version: u32, bytes: u64, objects: u64) {
        self.live.store(word(version, bytes), SeqCst);
        self.objects.store(word(version, objects), SeqCst);
    }
}

/// Subtracts `n` (saturating) from the low half of `w` if its high half is `version`.
fn sub_if(w: &AtomicU64, version: u32, n: u64) -> bool {
    let mut cur = w.load(SeqCst);
    loop {
        if (cur >> 32) as u32 != version {
            return false;
        }
        let next = word(version, (cur & 0xffff_ffff).saturating_sub(n));
        match w.compare_exchange_weak(cur, next, SeqCst, SeqCst) {
            Ok(_) => return true,
            Err(seen) => cur = seen,
        }
    }
}

/// Where a page is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PageState {
    Free,
    /// The page the appender fills.
    Open,
    /// Filled (or closed early by a restart), waiting for compaction or eviction.
    Used,
}

/// What the appender keeps per page, under the write lock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PageMeta {
    pub(crate) state: PageState,
    /// End of the bytes handed out on this page (records are contiguous from 0).
    pub(crate) write_off: u32,
    /// When the page was last allocated: eviction takes the lowest.
    pub(crate) seq: u64,
}

impl PageMeta {
    pub(crate) const FREE: PageMeta = PageMeta {
        state: PageState::Free,
        write_off: 0,
        seq: 0,
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn spec(size: u64) -> FileSpec {
        FileSpec {
            path: PathBuf::from("x"),
            size,
        }
    }

    #[test]
    fn page_size_rule() {
        let mib = 1 << 20;
        assert_eq!(page_size(64 * mib, &[spec(1024 * mib)]).unwrap(), 64 * mib);
        assert_eq!(
            page_size(64 * mib, &[spec(1024 * mib), spec(40 * mib)]).unwrap(),
            10 * mib
        );
        assert_eq!(page_size(64 * mib, &[spec(1_000_000)]).unwrap(), 249_856);
        assert_eq!(page_size(64 * mib, &[spec(100_000)]).unwrap(), MIN_PAGE);
        assert!(page_size(64 * mib, &[spec(60_000)]).is_err());
        assert!(page_size(64 * mib, &[]).is_err());
    }

    #[test]
    fn release_only_lands_on_its_incarnation() {
        let p = Page::new(0, 0);
        p.add(100);
        p.add(50);
        p.release(0, 50);
        assert_eq!(p.live(), (100, 1));
        p.release(0, 500);
        assert_eq!(p.live(), (0, 0), "saturating");
        p.add(10);
        assert_eq!(p.bump(), (10, 1));
        assert_eq!(p.version(), 1);
        p.add(20);
        p.release(0, 20);
        assert_eq!(p.live(), (20, 1), "a stale release does nothing");
    }
}
