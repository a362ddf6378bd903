//! The arena: a shard's memory and the locations of the items in it.
//!
//! It holds the segments (mapped and in use, mapped and free, or given back to the OS), the
//! out-of-line blocks of large values, and the budget all of them are counted against, with
//! the tables kept beside them (the index, the eviction policy's metadata) charged through
//! [`Arena::recharge`]. A shard never maps past its [`Arena::limit`]: its budget, plus three
//! segments while it holds out-of-line values; to make room it evicts (see `evict.rs`), and
//! that is what keeps the process's RSS next to `-m`.
//!
//! A [`Loc`] names a record: a segment id and a byte offset in it. The arena resolves it to
//! bytes; it knows nothing of keys, the index or the eviction order.

use std::sync::Arc;

use memkit_flash::{FlashLoc, FlashStore};
use memkit_types::{Error, Result};

use crate::segment::{Header, ItemAt, LargeBlock, MUTABLE_BITS, Segment, read_item, write_item};

/// Where an item lives: segment (12 bits) and byte offset (20 bits). The index stores it in
/// the bits a shard actually needs and a hash tag in the rest (`index::Layout`).
pub(crate) type Loc = u32;

/// Segments a shard may have (12 bits of [`Loc`]).
pub(crate) const MAX_SEGMENTS: usize = 1 << 12;
/// The largest segment (20 bits of offset).
pub(crate) const MAX_SEGMENT_SIZE: usize = 1 << 20;

#[inline]
pub(crate) fn pack(seg: u32, off: usize) -> Loc {
    debug_assert!((seg as usize) < MAX_SEGMENTS && off < MAX_SEGMENT_SIZE);
    (seg << 20) | off as u32
}
#[inline]
pub(crate) fn seg_of(e: Loc) -> u32 {
    e >> 20
}
#[inline]
pub(crate) fn off_of(e: Loc) -> usize {
    (e & 0xF_FFFF) as usize
}

/// What a large block of `len` bytes is charged: glibc malloc's chunk, its 8-byte size word
/// plus the data rounded up to 16 bytes. Blocks come from the global allocator at their
/// exact size (a page-rounded mapping of their own would waste up to 4 KiB each, a third of
/// an 8.2 KB value). Blocks past glibc's mmap threshold (128 KiB at first) are page-rounded
/// in RSS: at most 3% more than charged.
pub(crate) fn large_cost(len: usize) -> usize {
    (len + 8).next_multiple_of(16).max(32)
}

/// Segments a shard holding out-of-line values may map beyond its budget, for those values'
/// stubs while it evicts them: the policy's two heads (S3-FIFO's main head opens when a read,
/// or a ghost fingerprint that matches by chance, promotes a stub) and the segment under
/// eviction. memcached needs none (an item's header and key share its value's chunk);
/// charged to the budget, they cost a shard of values that fill memcached's 512 KiB chunk one
/// item of sixteen. Three of about 256 segments a shard (why not two: `docs/BENCHMARKS.md`,
/// "Warm-up fills and mixed value sizes"): 3/256 of `-m`, 768 KiB at `-m 64`, where
/// memcached's hash table takes 512 KiB outside it.
pub(crate) const STUB_SEGMENTS: usize = 3;

/// An out-of-line value: its bytes in RAM, or where the flash tier wrote them when RAM let
/// it go (`-o ext_path`). The record's stub, with the key and metadata, stays in a segment
/// either way, so every command finds and judges the item as before.
#[derive(Debug)]
pub(crate) enum Large {
    Ram(LargeBlock),
    Flash(FlashLoc),
}

/// What a value slot is charged beside its bytes: the slot table grows with out-of-line
/// values (and so with flash-resident ones) and is never shrunk.
const SLOT_COST: usize = std::mem::size_of::<Option<Large>>();

/// A live item's value as the arena holds it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Value<'a> {
    Bytes(&'a [u8]),
    Flash(FlashLoc),
}

/// A shard's segments, large blocks and budget.
#[derive(Debug)]
pub(crate) struct Arena {
    seg_size: usize,
    /// Values longer than this live out of line (`segment::large_for`).
    large_at: usize,
    /// The flash tier, if any: where values RAM lets go are written.
    flash: Option<Arc<FlashStore>>,
    /// Bytes the shard may hold: segments, large blocks and the charged tables together
    /// ([`Self::limit`] adds segments for the stubs of out-of-line values).
    budget: usize,
    segs: Vec<Segment>,
    /// Mapped, empty segments.
    free: Vec<u32>,
    /// Segment ids whose memory was given back.
    unmapped: Vec<u32>,
    large: Vec<Option<Large>>,
    large_free: Vec<u32>,
    /// Bytes held from the OS: mapped segments, large blocks, charged tables.
    mapped: usize,
    /// Budget set aside by `make_room` for a large block about to be allocated.
    reserved: usize,
    /// Values on flash, and the bytes of their records there.
    flash_items: usize,
    flash_bytes: usize,
}

impl Arena {
    pub fn new(seg_size: usize, budget: usize, flash: Option<(Arc<FlashStore>, usize)>) -> Arena {
        let large_at = crate::segment::large_threshold(seg_size, flash.as_ref().map(|f| f.1));
        Arena {
            seg_size,
            large_at,
            flash: flash.map(|f| f.0),
            budget,
            segs: Vec::new(),
            free: Vec::new(),
            unmapped: Vec::new(),
            large: Vec::new(),
            large_free: Vec::new(),
            mapped: 0,
            reserved: 0,
            flash_items: 0,
            flash_bytes: 0,
        }
    }

    // ---- the budget ----

    pub fn seg_size(&self) -> usize {
        self.seg_size
    }

    /// Values longer than this live out of line.
    pub fn large_at(&self) -> usize {
        self.large_at
    }

    /// The flash tier, if the shard has one.
    pub fn flash(&self) -> Option<&Arc<FlashStore>> {
        self.flash.as_ref()
    }

    /// Bytes the shard may hold (before the stub segments of [`Self::limit`]).
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// A smaller budget is reached by eviction as items arrive.
    pub fn set_budget(&mut self, budget: usize) {
        self.budget = budget;
    }

    /// Bytes held from the OS.
    pub fn mapped(&self) -> usize {
        self.mapped
    }

    /// What the shard may map: its budget, plus [`STUB_SEGMENTS`] segments while it holds (or
    /// is about to allocate) out-of-line values. A shard of inline values only gets nothing,
    /// so the small-value figures count every byte against the budget.
    #[inline]
    pub fn limit(&self) -> usize {
        let holds_large = self.reserved > 0 || self.large.len() > self.large_free.len();
        let stubs = if holds_large { STUB_SEGMENTS } else { 0 };
        self.budget + stubs * self.seg_size
    }

    /// Whether `extra` more bytes fit beside what is held and reserved.
    #[inline]
    pub fn fits(&self, extra: usize) -> bool {
        self.mapped + self.reserved + extra <= self.limit()
    }

    /// Sets budget aside for a large block the next [`Self::alloc_large`] takes.
    pub fn reserve(&mut self, bytes: usize) {
        self.reserved = bytes;
    }

    /// Counts a table held beside the segments growing from `from` to `to` bytes.
    pub fn recharge(&mut self, from: usize, to: usize) {
        self.mapped = self.mapped + to - from;
    }

    // ---- locations ----

    #[inline]
    pub fn seg(&self, s: u32) -> &Segment {
        &self.segs[s as usize]
    }

    #[inline]
    pub fn item_at(&self, e: Loc) -> ItemAt {
        let s = self.seg(seg_of(e));
        read_item(s.bytes(), off_of(e), s.base_seq, self.large_at)
    }

    /// Starts loading the first two cache lines of the record at `e`: its header and key,
    /// and for a small item its value.
    pub fn prefetch(&self, e: Loc) {
        let Some(s) = self.segs.get(seg_of(e) as usize) else {
            return;
        };
        let at = s.bytes().as_ptr().wrapping_add(off_of(e));
        prefetch_line(at);
        prefetch_line(at.wrapping_add(64));
    }

    #[inline]
    pub fn key_of(&self, e: Loc) -> &[u8] {
        self.key_at(e, &self.item_at(e))
    }

    /// The key of the record `at` parsed at `e`.
    #[inline]
    pub fn key_at(&self, e: Loc, at: &ItemAt) -> &[u8] {
        at.key(self.seg(seg_of(e)).bytes())
    }

    /// The value of a live item: inline in its segment, its large block, or where it is
    /// on flash.
    #[inline]
    pub fn value_of(&self, e: Loc, at: &ItemAt) -> Value<'_> {
        let seg = self.seg(seg_of(e)).bytes();
        match at.large_handle(seg) {
            Some(h) => match &self.large[h as usize] {
                Some(Large::Ram(block)) => Value::Bytes(&block[..at.header.vlen as usize]),
                Some(Large::Flash(loc)) => Value::Flash(*loc),
                None => Value::Bytes(&[]),
            },
            None => Value::Bytes(at.stored_value(seg)),
        }
    }

    /// Writes the RAM block `handle` to flash and frees it, keeping the location instead:
    /// `false` if there is no flash tier, the value is not in RAM, or the store refused it
    /// (full of buffers waiting for the writer, or a failing disk).
    pub fn demote(&mut self, handle: u32, key: &[u8]) -> bool {
        let (Some(flash), Some(Some(Large::Ram(block)))) =
            (&self.flash, self.large.get(handle as usize))
        else {
            return false;
        };
        let Some(loc) = flash.append(key, block) else {
            return false;
        };
        self.mapped -= large_cost(block.len());
        self.flash_items += 1;
        self.flash_bytes += loc.len as usize;
        self.large[handle as usize] = Some(Large::Flash(loc));
        true
    }

    /// Brings a flash value back to RAM in the slot that pointed at `loc` (a recache): the
    /// budget was made room for by `make_room`. `false` if the slot moved on meanwhile.
    pub fn recache(&mut self, handle: u32, loc: FlashLoc, value: &[u8]) -> Result<bool> {
        if !matches!(self.large.get(handle as usize), Some(Some(Large::Flash(l))) if *l == loc) {
            self.reserved = 0;
            return Ok(false);
        }
        let mut block = Vec::new();
        block
            .try_reserve_exact(value.len())
            .map_err(|_| Error::OutOfMemory)?;
        block.extend_from_slice(value);
        self.mapped += large_cost(value.len());
        self.reserved = 0;
        self.large[handle as usize] = Some(Large::Ram(block.into_boxed_slice()));
        self.flash_gone(loc);
        Ok(true)
    }

    /// A slot for a value already on flash at `loc` (a warm restart's stub).
    pub fn adopt_flash(&mut self, loc: FlashLoc) -> u32 {
        self.flash_items += 1;
        self.flash_bytes += loc.len as usize;
        let slot = Some(Large::Flash(loc));
        match self.large_free.pop() {
            Some(h) => {
                self.large[h as usize] = slot;
                h
            }
            None => {
                self.large.push(slot);
                self.mapped += SLOT_COST;
                (self.large.len() - 1) as u32
            }
        }
    }

    /// Points slot `handle` at `to` if it points at `from` (compaction moved the value).
    pub fn moved(&mut self, handle: u32, from: FlashLoc, to: FlashLoc) -> bool {
        match self.large.get_mut(handle as usize) {
            Some(Some(Large::Flash(l))) if *l == from => {
                *l = to;
                true
            }
            _ => false,
        }
    }

    /// The value as the record stores it: inline bytes, or a large value's handle.
    #[inline]
    pub fn stored_value(&self, e: Loc, at: &ItemAt) -> &[u8] {
        at.stored_value(self.seg(seg_of(e)).bytes())
    }

    /// The large block the record at `e` points to, if its value is out of line.
    #[inline]
    pub fn large_handle(&self, e: Loc, at: &ItemAt) -> Option<u32> {
        at.large_handle(self.seg(seg_of(e)).bytes())
    }

    /// Rewrites the record's policy and meta bits in place; the rest describe its layout.
    #[inline]
    pub fn set_bits(&mut self, e: Loc, bits: u8) {
        let off = off_of(e);
        let seg = self.segs[seg_of(e) as usize].bytes_mut();
        seg[off] = (seg[off] & !MUTABLE_BITS) | bits;
    }

    /// Rewrites the record's expiry in place; `false` if it has no exptime field.
    pub fn set_exptime(&mut self, e: Loc, at: &ItemAt, exptime: u32) -> bool {
        let Some(field) = at.header.exptime_off(at.key_off - off_of(e)) else {
            return false;
        };
        let off = off_of(e) + field;
        self.segs[seg_of(e) as usize].bytes_mut()[off..off + 4]
            .copy_from_slice(&exptime.to_le_bytes());
        true
    }

    /// Appends a record to segment `s`, which must have room for it.
    #[inline]
    pub fn append(&mut self, s: u32, key: &[u8], hdr: &Header, stored: [&[u8]; 2]) -> Loc {
        let seg = &mut self.segs[s as usize];
        let off = seg.write_pos as usize;
        let base = seg.base_seq;
        let n = write_item(&mut seg.bytes_mut()[off..], base, hdr, key, &stored);
        seg.write_pos += n as u32;
        seg.live_bytes += n as u32;
        seg.expiring += u32::from(hdr.exptime != 0);
        pack(s, off)
    }

    /// Copies the record at `e` to the end of segment `to` with header `hdr` (its value, or
    /// its large block's handle, unchanged); the old copy becomes dead bytes. `None` if `to`
    /// is the record's own segment.
    pub fn copy(&mut self, e: Loc, at: &ItemAt, hdr: &Header, to: u32) -> Option<Loc> {
        let [from, dst] = self
            .segs
            .get_disjoint_mut([seg_of(e) as usize, to as usize])
            .ok()?;
        let off = dst.write_pos as usize;
        let base = dst.base_seq;
        let n = write_item(
            &mut dst.bytes_mut()[off..],
            base,
            hdr,
            at.key(from.bytes()),
            &[at.stored_value(from.bytes())],
        );
        dst.write_pos += n as u32;
        dst.live_bytes += n as u32;
        dst.expiring += u32::from(hdr.exptime != 0);
        from.live_bytes -= at.len as u32;
        Some(pack(to, off))
    }

    /// The record at `e` is no longer pointed at: its bytes are dead, and its large block
    /// is freed unless `keep_large` (the record is being rewritten with the same block).
    #[inline]
    pub fn release(&mut self, e: Loc, at: &ItemAt, keep_large: bool) {
        self.segs[seg_of(e) as usize].live_bytes -= at.len as u32;
        if !keep_large && let Some(handle) = self.large_handle(e, at) {
            self.free_large(handle);
        }
    }

    // ---- segments ----

    /// Segments mapped.
    pub fn mapped_segments(&self) -> usize {
        self.segs.iter().filter(|s| s.is_mapped()).count()
    }

    /// A free segment, or a newly mapped one if it fits `overdraft` bytes past the budget and
    /// its id is below `max_ids`. The caller resets it before use.
    pub fn take_segment(&mut self, overdraft: usize, max_ids: usize) -> Option<u32> {
        if let Some(s) = self.free.pop() {
            return Some(s);
        }
        if self.mapped + self.reserved + self.seg_size > self.limit() + overdraft {
            return None;
        }
        let s = match self.unmapped.pop() {
            Some(s) => s,
            None => {
                if self.segs.len() >= max_ids {
                    return None;
                }
                self.segs.push(Segment::unmapped());
                (self.segs.len() - 1) as u32
            }
        };
        if self.segs[s as usize].map(self.seg_size).is_err() {
            self.unmapped.push(s);
            return None;
        }
        self.mapped += self.seg_size;
        Some(s)
    }

    /// Makes `s` an empty segment that records are written to from now on: relative seqs
    /// count from `base_seq`, its items' age from `now`.
    pub fn open(&mut self, s: u32, base_seq: u64, now: u32) {
        self.segs[s as usize].reset(base_seq, now);
    }

    /// Gives one free segment's memory back to the OS; `false` if none is free.
    pub fn unmap_one_free(&mut self) -> bool {
        let Some(s) = self.free.pop() else {
            return false;
        };
        self.unmap(s);
        true
    }

    /// Gives back the memory of every free segment but `keep`.
    pub fn trim_free(&mut self, keep: usize) {
        while self.free.len() > keep && self.unmap_one_free() {}
    }

    fn unmap(&mut self, s: u32) {
        self.segs[s as usize].unmap();
        self.unmapped.push(s);
        self.mapped -= self.seg_size;
    }

    /// Takes back a segment that holds nothing live: free for the next head, or unmapped if
    /// the shard is over its limit (an eviction's overdraft, repaid here).
    pub fn retire(&mut self, s: u32, now: u32) {
        self.segs[s as usize].reset(0, now);
        if self.mapped > self.limit() {
            self.unmap(s);
        } else {
            self.free.push(s);
        }
    }

    pub fn seg_mut(&mut self, s: u32) -> &mut Segment {
        &mut self.segs[s as usize]
    }

    // ---- large blocks ----

    /// Copies `parts` into a new large block; the budget was made room for by `make_room`.
    pub fn alloc_large(&mut self, parts: [&[u8]; 2]) -> Result<u32> {
        let len = parts[0].len() + parts[1].len();
        let mut block = Vec::new();
        block
            .try_reserve_exact(len)
            .map_err(|_| Error::OutOfMemory)?;
        block.extend_from_slice(parts[0]);
        block.extend_from_slice(parts[1]);
        let block = Large::Ram(block.into_boxed_slice());
        self.mapped += large_cost(len);
        self.reserved = 0;
        Ok(match self.large_free.pop() {
            Some(h) => {
                self.large[h as usize] = Some(block);
                h
            }
            None => {
                self.large.push(Some(block));
                self.mapped += SLOT_COST;
                (self.large.len() - 1) as u32
            }
        })
    }

    /// A value on flash is no longer pointed at: its bytes there are dead (the file is not
    /// touched: compaction or the page's reuse takes them back).
    fn flash_gone(&mut self, loc: FlashLoc) {
        self.flash_items -= 1;
        self.flash_bytes -= loc.len as usize;
        if let Some(flash) = &self.flash {
            flash.release(loc);
        }
    }

    /// Values on flash, and the bytes of their records there.
    pub fn flash_usage(&self) -> (usize, usize) {
        (self.flash_items, self.flash_bytes)
    }

    fn free_large(&mut self, handle: u32) {
        match self.large.get_mut(handle as usize).and_then(Option::take) {
            Some(Large::Ram(block)) => self.mapped -= large_cost(block.len()),
            Some(Large::Flash(loc)) => self.flash_gone(loc),
            None => return,
        }
        self.large_free.push(handle);
    }
}

/// Asks the CPU to start loading the cache line holding `p`, without waiting for it. Any
/// address will do: a prefetch never faults.
#[inline]
pub(crate) fn prefetch_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and never faults; SSE, which it
    // needs, is part of x86_64.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    /// A value slot (RAM block or flash location) is what `docs/flash.md` charges a value on
    /// flash beside its stub: 24 bytes.
    #[test]
    fn a_value_slot_is_24_bytes() {
        assert_eq!(super::SLOT_COST, 24);
    }
}
