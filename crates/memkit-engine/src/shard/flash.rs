//! The flash tier in a shard (see `crate::flash`): values eviction lets go written to flash
//! with their stubs kept, reads of them finished, and compaction's questions answered.

use memkit_flash::FlashLoc;

use super::Shard;
use std::hash::BuildHasher;

use crate::arena::{Loc, Value, pack, seg_of};
use crate::policy::Policy;
use crate::segment::{FETCHED, HOT, ItemAt, VISITED, read_item};

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
    /// value leaves RAM and the stub stays, copied to the keep head unvisited (so it lasts
    /// one more lap in RAM unless read). Returns whether it did. Under eviction the item's
    /// age does not matter (memcached pushes out early when memory is short).
    pub(crate) fn demote(&mut self, h: u64, e: Loc, at: &ItemAt, now: u32) -> bool {
        let hdr = &at.header;
        if !self.flash_worthy(at, now) {
            return false;
        }
        let seg = self.arena.seg(seg_of(e));
        let Some(handle) = at.large_handle(seg.bytes()) else {
            return false;
        };
        // The key is copied out: the store's write happens with the arena borrowed mutably.
        let mut key = [0u8; 256];
        let k = at.key(seg.bytes());
        key[..k.len()].copy_from_slice(k);
        if !self.arena.demote(handle, &key[..k.len()]) {
            return false;
        }
        if !self.relocate(h, e, at, hdr.bits & !(VISITED | HOT), now) {
            return false; // the caller drops the item, and with it the value on flash
        }
        self.stats.counters.evicted_to_extstore += 1;
        true
    }

    /// The flash tier's walk of up to `max_segments` sealed segments (a cursor goes round
    /// them): stubs whose value's page was reclaimed since are unlinked (their memory comes
    /// back without waiting for a read), and with `ext_item_age` set, values idle that
    /// long go to flash without memory pressure, as memcached's storage thread writes them;
    /// their stubs stay where they are. Returns the values written.
    pub(crate) fn flash_walk(&mut self, now: u32, max_segments: usize) -> u64 {
        let Some(age) = self.cfg.flash.as_ref().map(|t| t.item_age) else {
            return 0;
        };
        let mut written = 0;
        for _ in 0..max_segments.min(self.policy.sealed_len()) {
            let pos = self.flash_cursor % self.policy.sealed_len();
            self.flash_cursor = pos + 1;
            let s = self.policy.sealed_at(pos);
            let idle = now.saturating_sub(self.arena.seg(s).created) >= age;
            let mut off = 0;
            while off < self.arena.seg(s).write_pos as usize {
                let seg = self.arena.seg(s);
                let at = read_item(seg.bytes(), off, seg.base_seq, self.arena.large_at());
                let e = pack(s, off);
                off += at.len;
                if !at.header.large {
                    continue;
                }
                let h = self.hasher.hash_one(at.key(seg.bytes()));
                if self.index.find(h, |&x| x == e).is_none() {
                    continue;
                }
                if self.flash_stale(e, &at) {
                    self.unlink(h, e, &at, false);
                } else if idle && self.flash_worthy(&at, now) && self.write_in_place(e, &at) {
                    written += 1;
                }
            }
        }
        written
    }

    /// With `ext_item_age=0` (idle for no time at all is idle enough), a value goes to flash
    /// as it is stored: the limit of memcached's storage thread writing every item old
    /// enough, and a way to have every read of a large value come from flash.
    pub(crate) fn write_through(&mut self, e: Loc, now: u32) {
        if self.cfg.flash.as_ref().is_none_or(|t| t.item_age != 0) {
            return;
        }
        let at = self.arena.item_at(e);
        if self.flash_worthy(&at, now) {
            self.write_in_place(e, &at);
        }
    }

    /// Writes the value of the RAM item at `e` to flash, its stub staying where it is.
    fn write_in_place(&mut self, e: Loc, at: &ItemAt) -> bool {
        let seg = self.arena.seg(seg_of(e));
        let Some(handle) = at.large_handle(seg.bytes()) else {
            return false;
        };
        let mut key = [0u8; 256];
        let k = at.key(seg.bytes());
        key[..k.len()].copy_from_slice(k);
        let done = self.arena.demote(handle, &key[..k.len()]);
        self.stats.counters.evicted_to_extstore += u64::from(done);
        done
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
