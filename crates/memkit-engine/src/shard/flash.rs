//! The flash tier in a shard (see `crate::flash`): values eviction lets go written to flash
//! with their stubs kept, reads of them finished, and compaction's questions answered.
//!
//! The stubs of values on flash live in segments of their own (`Shard::flash_segs`, a FIFO
//! beside the eviction policy's queues). A stub stands for a value many times its size
//! elsewhere: among the policy's segments, whose queue sizes count segments, stubs would be
//! chosen as victims as often as the segments of RAM values they are nothing like, and a
//! segment of them emptied to make room for one value would drop a thousand from flash.
//! Out of the policy they cost RAM and are paid for like anything (within the budget), and
//! they go in an order of their own: a segment left half dead by deletes, overwrites and
//! reads that brought values back is compacted; when stubs take more than
//! [`FLASH_STUB_SHARE`] of the budget, or nothing else is left to evict, the oldest segment
//! of them is dropped, its values with it. A value read back to RAM (a recache) takes its
//! stub back into the policy's write head.
use memkit_flash::FlashLoc;

use super::Shard;
use std::hash::BuildHasher;

use crate::arena::{Loc, Value, pack, seg_of};
use crate::evict::OVERDRAFT_SEGMENTS;
use crate::policy::Policy;
use crate::segment::{FETCHED, HOT, Header, ItemAt, VISITED, read_item};

/// The share of a shard's budget the stubs of values on flash may hold before the oldest
/// of them are dropped to make room: a half (the other half keeps RAM values).
const FLASH_STUB_SHARE: (usize, usize) = (1, 2);

impl Shard {
    /// Whether the item's value may go to flash: out of line, over `ext_item_size`, and
    /// not about to expire (`ext_low_ttl`).
    fn flash_worthy(&self, at: &ItemAt, now: u32) -> bool {
        let Some(tier) = &self.cfg.flash else {
            return false;
        };
        let hdr = &at.header;
        hdr.large
            && hdr.vlen as usize > tier.item_size
            && (hdr.exptime == 0 || hdr.exptime.saturating_sub(now) >= tier.low_ttl)
    }

    /// Eviction is about to drop the item at `e`: if the flash tier takes its value, the
    /// value leaves RAM and the stub stays, moved to the stub segments unvisited. Returns
    /// whether it did. Under eviction the item's
    /// age does not matter (memcached pushes out early when memory is short).
    pub(crate) fn demote(&mut self, h: u64, e: Loc, at: &ItemAt, now: u32) -> bool {
        if !self.flash_worthy(at, now) || !self.value_to_flash(e, at) {
            return false;
        }
        // Unkept, the caller drops the item, and with it the value on flash.
        self.keep_stub(h, e, at, at.header.bits & !(VISITED | HOT), now)
    }

    /// Writes the RAM value of the record at `e` to flash and frees its block; counted.
    fn value_to_flash(&mut self, e: Loc, at: &ItemAt) -> bool {
        let seg = self.arena.seg(seg_of(e));
        let Some(handle) = at.large_handle(seg.bytes()) else {
            return false;
        };
        // The key is copied out: the store's write happens with the arena borrowed mutably.
        let mut key = [0u8; 256];
        let k = at.key(seg.bytes());
        key[..k.len()].copy_from_slice(k);
        let done = self.arena.demote(handle, &key[..k.len()]);
        self.stats.counters.evicted_to_extstore += u64::from(done);
        done
    }

    /// Copies the stub at `e` to the flash head with policy bits `bits`, opening a new head
    /// when it is full (within the eviction's overdraft: this runs inside one). `false`
    /// when no segment can be had.
    fn keep_stub(&mut self, h: u64, e: Loc, at: &ItemAt, bits: u8, now: u32) -> bool {
        let hdr = Header { bits, ..at.header };
        let Some(to) = self.flash_room(&hdr, at.header.seq, OVERDRAFT_SEGMENTS, now) else {
            return false;
        };
        let Some(moved) = self.arena.copy(e, at, &hdr, to) else {
            return false;
        };
        self.index.replace(h, |&x| x == e, moved);
        true
    }

    /// The flash head if a record with `hdr` fits in it, else a new one (sealing the old),
    /// up to `overdraft` segments past the budget; its base sequence is `base`.
    fn flash_room(&mut self, hdr: &Header, base: u64, overdraft: usize, now: u32) -> Option<u32> {
        let fits = |arena: &crate::arena::Arena, m: u32| {
            let seg = arena.seg(m);
            seg.free_space() >= hdr.total_len(seg.base_seq)
        };
        if let Some(m) = self.flash_head
            && fits(&self.arena, m)
        {
            return Some(m);
        }
        let overdraft = overdraft * self.arena.seg_size();
        let max_ids = self.index.layout().max_segments();
        let fresh = self.arena.take_segment(overdraft, max_ids)?;
        self.arena.open(fresh, base, now);
        if let Some(old) = self.flash_head.replace(fresh) {
            self.flash_segs.push_back(old);
        }
        fits(&self.arena, fresh).then_some(fresh)
    }

    /// A warm restart's stub of a value on flash: appended to the flash head, within the
    /// budget. `None` if there is no room.
    pub(crate) fn append_stub(
        &mut self,
        key: &[u8],
        hdr: &Header,
        stored: [&[u8]; 2],
        now: u32,
    ) -> Option<Loc> {
        let to = self.flash_room(hdr, hdr.seq, 0, now)?;
        Some(self.arena.append(to, key, hdr, stored))
    }

    /// Frees a segment of stubs, if one should go: a sealed one at most half live is
    /// compacted into the head (nothing lost); else, when the stubs hold more than their
    /// share of the budget or `force` (nothing else is left to evict), the oldest is
    /// emptied, its values dropped from flash. Returns whether a segment was freed.
    pub(crate) fn free_flash_segment(&mut self, force: bool, now: u32) -> bool {
        let seg_size = self.arena.seg_size();
        let sparse = (self.flash_segs.iter())
            .position(|&s| self.arena.seg(s).live_bytes as usize * 2 <= seg_size);
        if let Some(i) = sparse {
            let s = self.flash_segs[i];
            if self.empty_stub_segment(s, true, now) {
                self.flash_segs.remove(i);
                self.arena.retire(s, now);
                return true;
            }
        }
        let held = (self.flash_segs.len() + usize::from(self.flash_head.is_some())) * seg_size;
        let (num, den) = FLASH_STUB_SHARE;
        // With `-M` nothing live is dropped, stubs included.
        if !self.cfg.evict || (!force && held * den <= self.arena.budget() * num) {
            return false;
        }
        let Some(s) = self
            .flash_segs
            .pop_front()
            .or_else(|| self.flash_head.take())
        else {
            return false;
        };
        self.empty_stub_segment(s, false, now);
        self.arena.retire(s, now);
        true
    }

    /// The next record of segment `s` from `*off` on that the index still points to (its
    /// key hash, location and parse), moving `*off` past it; `None` at the segment's end.
    /// Records are read again after each call, so the caller may unlink or move them.
    fn next_live(&self, s: u32, off: &mut usize) -> Option<(u64, Loc, ItemAt)> {
        while *off < self.arena.seg(s).write_pos as usize {
            let seg = self.arena.seg(s);
            let at = read_item(seg.bytes(), *off, seg.base_seq, self.arena.large_at());
            let e = pack(s, *off);
            *off += at.len;
            let h = self.hasher.hash_one(at.key(seg.bytes()));
            if self.index.find(h, |&x| x == e).is_some() {
                return Some((h, e, at));
            }
        }
        None
    }

    /// Moves (`keep`) or drops every live stub of segment `s`. A move that finds no room
    /// stops and says so, leaving the segment as it was from there on.
    fn empty_stub_segment(&mut self, s: u32, keep: bool, now: u32) -> bool {
        let mut off = 0;
        while let Some((h, e, at)) = self.next_live(s, &mut off) {
            if let Some(why) = self.dead(&at.header, now) {
                self.unlink_dead(h, e, &at, &why);
            } else if !keep {
                self.drop_item(h, e, &at, false, now);
            } else if !self.keep_stub(h, e, &at, at.header.bits, now) {
                return false;
            }
        }
        true
    }

    /// The flash tier's walk of up to `max_segments` sealed segments of the policy (a
    /// cursor goes round them): with `ext_item_age` set, values idle that long go to flash
    /// without memory pressure, as memcached's storage thread writes them. Then as many
    /// stub segments (another cursor) and the stub head: stubs whose value's page was
    /// reclaimed since, or that expired, are unlinked (their memory comes back without
    /// waiting for a read), and segments left half dead are compacted. Returns the values
    /// written.
    pub(crate) fn flash_walk(&mut self, now: u32, max_segments: usize) -> u64 {
        let Some(age) = self.cfg.flash.as_ref().map(|t| t.item_age) else {
            return 0;
        };
        self.apply_flush(now);
        let mut written = 0;
        if age != u32::MAX {
            for _ in 0..max_segments.min(self.policy.sealed_len()) {
                let pos = self.flash_cursor % self.policy.sealed_len();
                self.flash_cursor = pos + 1;
                let s = self.policy.sealed_at(pos);
                if now.saturating_sub(self.arena.seg(s).created) >= age {
                    written += self.write_idle(s, now);
                }
            }
        }
        let stubs = self.flash_segs.len();
        for _ in 0..max_segments.min(stubs) {
            let s = self.flash_segs[self.stub_cursor % stubs];
            self.stub_cursor = (self.stub_cursor + 1) % stubs;
            self.unlink_gone_stubs(s, now);
        }
        if let Some(head) = self.flash_head {
            self.unlink_gone_stubs(head, now);
        }
        while self.free_flash_segment(false, now) {}
        written
    }

    /// Writes the values of segment `s` that may go to flash.
    fn write_idle(&mut self, s: u32, now: u32) -> u64 {
        let mut written = 0;
        let mut off = 0;
        while let Some((h, e, at)) = self.next_live(s, &mut off) {
            if at.header.large
                && self.flash_loc(e, &at).is_none()
                && self.dead(&at.header, now).is_none()
                && self.flash_worthy(&at, now)
                && self.write_in_place(h, e, &at, now)
            {
                written += 1;
            }
        }
        written
    }

    /// Unlinks the stubs of segment `s` whose value's page is gone, or that are dead.
    fn unlink_gone_stubs(&mut self, s: u32, now: u32) {
        let mut off = 0;
        while let Some((h, e, at)) = self.next_live(s, &mut off) {
            if let Some(why) = self.dead(&at.header, now) {
                self.unlink_dead(h, e, &at, &why);
            } else if self.flash_stale(e, &at) {
                self.unlink(h, e, &at, false);
            }
        }
    }

    /// With `ext_item_age=0` (idle for no time at all is idle enough), a value goes to flash
    /// as it is stored: the limit of memcached's storage thread writing every item old
    /// enough, and a way to have every read of a large value come from flash.
    pub(crate) fn write_through(&mut self, h: u64, e: Loc, now: u32) {
        if self.cfg.flash.as_ref().is_none_or(|t| t.item_age != 0) {
            return;
        }
        let at = self.arena.item_at(e);
        if self.flash_worthy(&at, now) {
            self.write_in_place(h, e, &at, now);
        }
    }

    /// Writes the value of the RAM item at `e` to flash outside an eviction: its stub moves
    /// to the stub segments with its bits (or stays where it is if they have no room).
    fn write_in_place(&mut self, h: u64, e: Loc, at: &ItemAt, now: u32) -> bool {
        if !self.value_to_flash(e, at) {
            return false;
        }
        self.keep_stub(h, e, at, at.header.bits, now);
        true
    }

    /// Where `key`'s value is on flash and its length, if the item is live and it is.
    pub(crate) fn flash_value(&self, h: u64, key: &[u8], now: u32) -> Option<(FlashLoc, usize)> {
        let (e, at) = self.find(h, key)?;
        if self.dead(&at.header, now).is_some() {
            return None;
        }
        Some((self.flash_loc(e, &at)?, at.header.vlen as usize))
    }

    /// Where the value of the record at `e` is on flash, if it is.
    pub(crate) fn flash_loc(&self, e: Loc, at: &ItemAt) -> Option<FlashLoc> {
        match self.arena.value_of(e, at) {
            Value::Flash(loc) => Some(loc),
            Value::Bytes(_) => None,
        }
    }

    /// Whether the record at `e` points at a flash page that has been reclaimed or evicted
    /// since its value was written there.
    pub(crate) fn flash_stale(&self, e: Loc, at: &ItemAt) -> bool {
        let Some(store) = self.arena.flash() else {
            return false;
        };
        at.header.large && self.flash_loc(e, at).is_some_and(|loc| !store.is_live(loc))
    }

    /// A flash read of `key`'s value at `loc` failed: counted, and the stub unlinked if it
    /// still points there.
    pub(crate) fn flash_read_failed(&mut self, h: u64, key: &[u8], loc: FlashLoc, badcrc: bool) {
        let counters = &mut self.stats.counters;
        counters.miss_from_extstore += 1;
        counters.badcrc_from_extstore += u64::from(badcrc);
        if let Some((e, at)) = self.find(h, key)
            && self.flash_loc(e, &at) == Some(loc)
        {
            self.unlink(h, e, &at, false);
        }
    }

    /// Brings `key`'s value, read from flash at `loc`, back into RAM if the item still
    /// points there and room can be made for it.
    pub(crate) fn recache(&mut self, h: u64, key: &[u8], loc: FlashLoc, value: &[u8], now: u32) {
        match self.find(h, key) {
            Some((e, at)) if self.flash_loc(e, &at) == Some(loc) => {}
            _ => return,
        }
        if self.make_room(0, value.len(), false, now).is_err() {
            self.arena.reserve(0);
            return;
        }
        // Making room may have moved the stub (or evicted it).
        let Some((e, at)) = self.find(h, key) else {
            self.arena.reserve(0);
            return;
        };
        let Some(handle) = self.arena.large_handle(e, &at) else {
            self.arena.reserve(0);
            return;
        };
        if let Ok(true) = self.arena.recache(handle, loc, value) {
            self.stats.counters.recache_from_extstore += 1;
            // Back in RAM, the item is the policy's again: its stub leaves the flash
            // segments for the write head (same CAS, bits and handle).
            if self.flash_segs.contains(&seg_of(e)) || self.flash_head == Some(seg_of(e)) {
                let _ = self.rewrite(h, key, e, now, |_, _| {});
            }
        }
    }

    /// Compaction asks whether `key`'s value at `at` is still wanted: `Some(read)` if the
    /// item points there, `read` telling whether it was ever fetched.
    pub(crate) fn flash_wanted(&self, h: u64, key: &[u8], at: FlashLoc) -> Option<bool> {
        let (e, item) = self.find(h, key)?;
        (self.flash_loc(e, &item) == Some(at)).then_some(item.header.bits & FETCHED != 0)
    }

    /// Compaction rewrote `key`'s value from `from` to `to`.
    pub(crate) fn flash_moved(&mut self, h: u64, key: &[u8], from: FlashLoc, to: FlashLoc) -> bool {
        let Some((e, at)) = self.find(h, key) else {
            return false;
        };
        match self.arena.large_handle(e, &at) {
            Some(handle) => self.arena.moved(handle, from, to),
            None => false,
        }
    }
}
