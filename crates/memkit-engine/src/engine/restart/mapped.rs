//! The restore's reading side: the warm restart file mapped and read in place, a section's
//! records parsed one by one, and the pages already read and checksummed given back (see
//! the parent module's comment for why).

use std::fs::File;
use std::io;

use super::{WarmError, u64_at};
use crate::shard::restart::{RECORD_HEAD, RecordHead};

/// Bytes read between two checksum updates and page releases.
pub(super) const RELEASE_STEP: u64 = 4 << 20;

/// The file, mapped: records are read in place, and once read and checksummed their pages
/// are given back (`MADV_REMOVE`; the file is already unlinked) for the segments to reuse;
/// a file opened read-only keeps them until it is closed. Each
/// restore thread reads and releases only inside its own sections, never the blocks they
/// share with their neighbours, and drops every slice before its pages are released.
pub(super) struct Mapped {
    raw: memmap2::MmapRaw,
    release: bool,
}

impl Mapped {
    pub(super) fn open(file: &File, release: bool) -> io::Result<Mapped> {
        let raw = match release {
            true => memmap2::MmapRaw::map_raw(file)?,
            false => memmap2::MmapOptions::new().map_raw_read_only(file)?,
        };
        Ok(Mapped { raw, release })
    }

    /// `len` bytes at `at`, which the header's layout check put inside the file and no
    /// [`Self::release`] has reached.
    pub(super) fn bytes(&self, at: u64, len: usize) -> &[u8] {
        debug_assert!(at as usize + len <= self.raw.len());
        // SAFETY: in bounds (above); the pages are mapped and not released (the caller's
        // order: see the type's comment); nothing in this process writes to the mapping.
        unsafe { std::slice::from_raw_parts(self.raw.as_ptr().add(at as usize), len) }
    }

    /// Maps in the pages of `[from, to)` in one call rather than a fault every few pages.
    pub(super) fn populate(&self, from: u64, to: u64) {
        let _ = (self.raw).advise_range(
            memmap2::Advice::PopulateRead,
            from as usize,
            to.saturating_sub(from) as usize,
        );
    }

    /// Gives back the pages of `[from, to)` in whole 64 KiB blocks (a multiple of every page
    /// size Linux uses, so the kernel never rounds the range out past `to`); returns where
    /// the next release starts.
    fn release(&self, from: u64, to: u64) -> u64 {
        const BLOCK: u64 = 64 << 10;
        let (from, to) = (from.next_multiple_of(BLOCK), to / BLOCK * BLOCK);
        if !self.release || to <= from {
            return from;
        }
        // SAFETY: in bounds; no slice into these pages is alive, and none is made again (a
        // section is read once, front to back). A file system without MADV_REMOVE keeps
        // the pages until the file is closed, which is all a failure costs.
        let _ = unsafe {
            self.raw.unchecked_advise_range(
                memmap2::UncheckedAdvice::Remove,
                from as usize,
                (to - from) as usize,
            )
        };
        to
    }
}

/// A section's records as they are read: where the next one starts, the checksum of what
/// has been read so far (up to `checked`), where the next release starts, and the highest
/// sequence number seen.
pub(super) struct Cursor<'a> {
    map: &'a Mapped,
    pub pos: u64,
    pub end: u64,
    checked: u64,
    released: u64,
    pub crc: crc32fast::Hasher,
    pub max_seq: u64,
}

impl<'a> Cursor<'a> {
    /// At the start of the section of `len` bytes at `offset`.
    pub(super) fn new(map: &'a Mapped, offset: u64, len: u64) -> Cursor<'a> {
        let end = offset + len;
        map.populate(offset, end.min(offset + RELEASE_STEP));
        Cursor {
            map,
            pos: offset,
            end,
            checked: offset,
            released: offset,
            crc: crc32fast::Hasher::new(),
            max_seq: 0,
        }
    }

    /// The next record's head and where its key starts (its value follows the key).
    pub(super) fn next(&mut self, item_size_max: usize) -> Result<(RecordHead, u64), WarmError> {
        let short = || WarmError::Corrupt("a record runs past the end of its section".into());
        if self.end - self.pos < RECORD_HEAD as u64 {
            return Err(short());
        }
        let head: &[u8; RECORD_HEAD] = self.map.bytes(self.pos, RECORD_HEAD).try_into().unwrap();
        let mut rec = RecordHead::decode(head, item_size_max)
            .ok_or_else(|| WarmError::Corrupt("a record no save writes".into()))?;
        self.pos += RECORD_HEAD as u64;
        if rec.explicit_cas {
            if self.end - self.pos < 8 {
                return Err(short());
            }
            rec.cas = Some(u64_at(self.map.bytes(self.pos, 8), 0));
            self.pos += 8;
        }
        let kv = (rec.klen + rec.stored_len()) as u64;
        if self.end - self.pos < kv {
            return Err(short());
        }
        let key_at = self.pos;
        self.pos += kv;
        self.max_seq = self.max_seq.max(rec.seq);
        Ok((rec, key_at))
    }

    /// Checksums what was read since the last call and gives its pages back; with `all`,
    /// the end of the section, else only once [`RELEASE_STEP`] bytes have been read.
    pub(super) fn checkpoint(&mut self, all: bool) {
        if !all && self.pos - self.checked < RELEASE_STEP {
            return;
        }
        let read = self
            .map
            .bytes(self.checked, (self.pos - self.checked) as usize);
        self.crc.update(read);
        self.released = self.map.release(self.released, self.pos);
        self.checked = self.pos;
        (self.map).populate(self.pos, self.end.min(self.pos + RELEASE_STEP));
    }
}
