//! Making room: the budget, eviction and compaction, over whichever eviction policy the shard
//! runs (`policy.rs` holds the contract between the two).
//!
//! A write first makes room ([`Shard::make_room`]): a slot in the index, the budget of an
//! out-of-line value, and space in the write head. Memory comes back a whole segment at a
//! time, freed one of two ways:
//! - *compaction*, when dead bytes rather than live data fill the shard (its sealed segments
//!   are less than three quarters live): the sparsest segment is emptied keeping every live
//!   item in it — memcached evicts nothing while the live data fits, and neither should we;
//! - *eviction* otherwise: the policy names the victim segment and decides, item by item,
//!   what is kept (copied to its keep head) and what is dropped.
//!
//! Emptying a segment is compaction either way: the dead bytes of overwritten, deleted and
//! expired items come back with it. Expired and flushed items met on the way are reclaimed,
//! never kept. In no-evict mode (`-M`) live items are all kept and only dead ones go; if
//! that frees nothing, the store answers out-of-memory.
//!
//! Dead items also stop holding memory without being read: [`Shard::reclaim_expired`] walks
//! a bounded number of segments per call.

use std::hash::BuildHasher;

use memkit_types::{Error, Result};

use crate::arena::{Arena, Loc, large_cost, pack, seg_of};
use crate::policy::{Policy, Victim};
use crate::segment::{FETCHED, Header, ItemAt, read_item};
use crate::shard::Shard;

/// Segments an eviction may map past the budget while it copies kept items: the victim is
/// unmapped at the end if the shard is over budget. Without it, a victim full of kept items
/// could not move them all (re-based headers can grow a byte or two) and they would be
/// dropped.
pub(crate) const OVERDRAFT_SEGMENTS: usize = 2;

impl Shard {
    /// Makes sure a record of `len` bytes fits in the write head and, when `large > 0`, that
    /// a large block of that many bytes fits in the budget. `new_entry` also reserves an
    /// index slot. May evict.
    pub(crate) fn make_room(
        &mut self,
        len: usize,
        large: usize,
        new_entry: bool,
        now: u32,
    ) -> Result<()> {
        self.arena.reserve(0);
        if new_entry && !self.index.has_room() {
            self.grow_index(now)?;
        }
        // The large block's budget first: freeing it may have to evict the write head itself
        // (when every stub lives there), which the head step below then replaces.
        if large > 0 {
            let cost = large_cost(large);
            self.reclaim(cost, now)?;
            self.arena.reserve(cost);
        }
        let head_fits =
            (self.policy.write_head()).is_some_and(|s| self.arena.seg(s).free_space() >= len);
        if !head_fits {
            self.policy.seal_write_head();
            let s = self.take_segment(now)?;
            self.arena.open(s, self.seq_value(), now);
            self.policy.open_write_head(s);
        }
        Ok(())
    }

    /// Finds the budget for the index's next table and the policy's metadata sized for it,
    /// then grows both.
    fn grow_index(&mut self, now: u32) -> Result<()> {
        let (bytes, capacity) = self.index.next_bytes_and_capacity();
        let want = bytes + self.policy.bytes_for(capacity);
        let held = self.index_bytes + self.policy.bytes();
        self.reclaim(want.saturating_sub(held), now)?;
        // Eviction may have made room: its removals free index buckets too.
        if !self.index.has_room() {
            let (arena, hasher) = (&self.arena, &self.hasher);
            let left = (self.index).grow(|&x| hasher.hash_one(arena.key_of(x)));
            self.policy.resize(self.index.capacity());
            self.index_bytes = self.index.bytes();
            (self.arena).recharge(held, self.index_bytes + self.policy.bytes());
            self.drop_unplaced(left, now);
        }
        Ok(())
    }

    /// Evicts the items the index had no bucket for (keys crowding one home: see
    /// `index.rs`). They are no longer in the index; their records become dead bytes.
    pub(crate) fn drop_unplaced(&mut self, left: Vec<Loc>, now: u32) {
        for e in left {
            let at = self.arena.item_at(e);
            let h = self.hasher.hash_one(self.arena.key_at(e, &at));
            self.drop_item(h, e, &at, false, now);
        }
    }

    /// Frees budget until `bytes` more fit: gives back empty segments first, then evicts.
    fn reclaim(&mut self, bytes: usize, now: u32) -> Result<()> {
        let mut rounds = self.eviction_rounds();
        while !self.arena.fits(bytes) {
            if self.arena.unmap_one_free() {
                continue;
            }
            if rounds == 0 {
                self.stats.counters.store_no_memory += 1;
                return Err(Error::OutOfMemory);
            }
            rounds -= 1;
            self.evict_one(bytes, now)?;
        }
        Ok(())
    }

    /// An empty segment: from the free list, newly mapped within budget, or by eviction.
    fn take_segment(&mut self, now: u32) -> Result<u32> {
        let mut rounds = self.eviction_rounds();
        let max_ids = self.index.layout().max_segments();
        loop {
            if let Some(s) = self.arena.take_segment(0, max_ids) {
                return Ok(s);
            }
            if rounds == 0 {
                self.stats.counters.store_no_memory += 1;
                return Err(Error::OutOfMemory);
            }
            rounds -= 1;
            self.evict_one(self.arena.seg_size(), now)?;
        }
    }

    /// Bounds the work of one allocation: every segment emptied twice is more than enough
    /// (a policy that keeps an item spends its bits, so the first lap clears them all).
    fn eviction_rounds(&self) -> usize {
        2 * self.policy.sealed_len() + 4
    }

    /// Frees one segment: by compaction when dead bytes are what fills the shard, else by
    /// emptying the policy's victim. An eviction stops part way once `want` more bytes fit
    /// in the budget: a segment of stubs can stand for many times its size in out-of-line
    /// values, and emptying it whole would drop far more than the write needs.
    pub(crate) fn evict_one(&mut self, want: usize, now: u32) -> Result<()> {
        // The stubs of values on flash first, when they are what fills the shard.
        if self.free_flash_segment(false, now) {
            return Ok(());
        }
        if let Some(i) = self.sparse_victim() {
            let victim = self.policy.take_sealed(i);
            return self.finish_emptying(victim, true, None, now);
        }
        let Some(victim) = self.policy.next_victim() else {
            if self.free_flash_segment(true, now) {
                return Ok(());
            }
            self.stats.counters.store_no_memory += 1;
            return Err(Error::OutOfMemory);
        };
        self.finish_emptying(victim, false, Some(want), now)
    }

    /// The sealed segment to compact, by its index in the policy's order, if dead bytes are
    /// what fills the shard: its sealed segments are less than three quarters live (with
    /// `-M`, whatever they hold), and the sparsest of them is at most half live — compacting
    /// a segment that is mostly live frees too little to be worth the copy.
    fn sparse_victim(&self) -> Option<usize> {
        let seg_size = self.arena.seg_size();
        let (mut count, mut live, mut least) = (0usize, 0usize, None::<(usize, usize)>);
        let sealed = self.policy.sealed_slices().into_iter().flatten();
        for (i, &s) in sealed.enumerate() {
            let seg = self.arena.seg(s);
            // A segment under eviction is on its way out, dead bytes and all.
            if seg.evict_pos != 0 {
                continue;
            }
            let l = seg.live_bytes as usize;
            count += 1;
            live += l;
            if least.is_none_or(|(m, _)| l < m) {
                least = Some((l, i));
            }
        }
        if count < 2 || (self.cfg.evict && live * 4 >= count * seg_size * 3) {
            return None;
        }
        let (least, i) = least?;
        (least * 2 <= seg_size).then_some(i)
    }

    /// Empties `victim` and frees it, or hands it back to the policy if the eviction stopped
    /// once `want` bytes fit or could not move a live item in no-evict mode.
    fn finish_emptying(
        &mut self,
        victim: Victim,
        compact: bool,
        want: Option<usize>,
        now: u32,
    ) -> Result<()> {
        match self.empty_segment(&victim, compact, want, now) {
            Ok(true) => {
                self.policy.emptied(&victim);
                self.arena.retire(victim.seg, now);
                self.stats.counters.segments_evicted += 1;
                Ok(())
            }
            Ok(false) => {
                self.policy.put_back(victim);
                Ok(())
            }
            Err(e) => {
                self.policy.put_back(victim);
                self.stats.counters.store_no_memory += 1;
                Err(e)
            }
        }
    }

    /// Drops, reclaims or moves every item of `victim` so that it holds nothing live.
    /// `compact` keeps every live item with its bits as they are; otherwise the policy
    /// decides. With `want` it stops as soon as that many bytes fit in the budget, and says
    /// whether the segment was emptied; it resumes at the segment's `evict_pos`.
    fn empty_segment(
        &mut self,
        victim: &Victim,
        compact: bool,
        want: Option<usize>,
        now: u32,
    ) -> Result<bool> {
        let s = victim.seg;
        let mut off = self.arena.seg(s).evict_pos as usize;
        while off < self.arena.seg(s).write_pos as usize {
            if want.is_some_and(|w| self.arena.fits(w)) {
                self.arena.seg_mut(s).evict_pos = off as u32;
                return Ok(false);
            }
            let seg = self.arena.seg(s);
            let at = read_item(seg.bytes(), off, seg.base_seq, self.arena.large_at());
            let h = self.hasher.hash_one(at.key(seg.bytes()));
            let e = pack(s, off);
            off += at.len;
            if self.index.find(h, |&x| x == e).is_none() {
                continue; // overwritten or deleted earlier: already dead bytes
            }
            if let Some(why) = self.dead(&at.header, now) {
                self.unlink_dead(h, e, &at, &why);
                continue;
            }
            let kept = if compact {
                Some(at.header.bits)
            } else {
                self.policy.decide(victim, at.header.bits)
            };
            // No-evict mode keeps what the policy would drop, bits unchanged.
            let bits = kept.or((!self.cfg.evict).then_some(at.header.bits));
            if let Some(bits) = bits
                && self.relocate(h, e, &at, bits, now)
            {
                self.stats.counters.evict_retained += 1;
                continue;
            }
            if !self.cfg.evict {
                return Err(Error::OutOfMemory);
            }
            // The flash tier may take the value; the stub stays.
            if kept.is_none() && !compact && self.demote(h, e, &at, now) {
                continue;
            }
            self.drop_item(h, e, &at, kept.is_some(), now);
            if !compact {
                self.policy.on_evicted(victim, h);
            }
        }
        Ok(true)
    }

    /// Evicts a live item: tells the evict hook, unlinks it, counts it. `active`: the policy
    /// had kept it, but no segment could take it (memcached's `evicted_active`).
    pub(crate) fn drop_item(&mut self, h: u64, e: Loc, at: &ItemAt, active: bool, now: u32) {
        let fetched = at.header.bits & FETCHED != 0;
        if let Some(hook) = self.cfg.evict_hook.get() {
            let seg = self.arena.seg(seg_of(e));
            hook.call(&crate::engine::Evicted {
                key: at.key(seg.bytes()),
                fetched,
                ttl: (at.header.exptime != 0).then(|| at.header.exptime.saturating_sub(now)),
                age: now.saturating_sub(seg.created),
                size: at.header.logical_len(),
            });
        }
        self.unlink(h, e, at, false);
        let size = at.header.logical_len();
        (self.stats).evicted(size, fetched, at.header.exptime != 0, active);
    }

    /// Copies a live item to the policy's keep head with policy bits `bits`. Never evicts
    /// (this runs inside an eviction): `false` when no segment can be had without one.
    pub(crate) fn relocate(&mut self, h: u64, e: Loc, at: &ItemAt, bits: u8, now: u32) -> bool {
        let hdr = Header { bits, ..at.header };
        let fits = |arena: &Arena, m: u32| {
            let seg = arena.seg(m);
            seg.free_space() >= hdr.total_len(seg.base_seq)
        };
        let to = match self.policy.keep_head() {
            Some(m) if fits(&self.arena, m) => m,
            _ => {
                let overdraft = OVERDRAFT_SEGMENTS * self.arena.seg_size();
                let max_ids = self.index.layout().max_segments();
                let Some(fresh) = self.arena.take_segment(overdraft, max_ids) else {
                    return false;
                };
                // Headers store seq relative to the segment's base: moved items carry their
                // old seqs, so the base is the first one's (its neighbours in the victim were
                // written about when it was), not the shard's current seq.
                self.arena.open(fresh, at.header.seq, now);
                self.policy.open_keep_head(fresh);
                if !fits(&self.arena, fresh) {
                    return false;
                }
                fresh
            }
        };
        let Some(moved) = self.arena.copy(e, at, &hdr, to) else {
            return false;
        };
        self.index.replace(h, |&x| x == e, moved);
        true
    }

    /// Proactive reclamation: walks up to `max_segments` sealed segments (a cursor goes round
    /// them without reordering them) unlinking expired and flushed items, and frees segments
    /// left empty, so dead items stop holding memory even if nobody reads them. Returns the
    /// number of items reclaimed.
    pub(crate) fn reclaim_expired(&mut self, now: u32, max_segments: usize) -> u64 {
        self.apply_flush(now);
        let before = self.stats.counters.reclaimed;
        // At most one pass over the sealed segments per call, whatever `max_segments` says.
        let pass = max_segments.min(self.policy.sealed_len());
        for _ in 0..pass {
            let total = self.policy.sealed_len();
            if total == 0 {
                break;
            }
            let pos = self.reclaim_cursor % total;
            let s = self.policy.sealed_at(pos);
            self.unlink_dead_in(s, now);
            if self.arena.seg(s).live_bytes == 0 {
                let victim = self.policy.take_sealed(pos);
                self.policy.emptied(&victim);
                self.arena.retire(s, now);
            } else {
                self.reclaim_cursor = pos + 1;
            }
        }
        // Memory of reclaimed segments goes back to the OS, but for one kept for the next head.
        self.arena.trim_free(1);
        // The heads hold the newest items, but a short TTL expires there too. A head left
        // with nothing live is rewound and written over.
        for head in self.policy.heads().into_iter().flatten() {
            self.unlink_dead_in(head, now);
            let seg = self.arena.seg_mut(head);
            if seg.live_bytes == 0 {
                let base = seg.base_seq;
                seg.reset(base, seg.created);
            }
        }
        self.stats.counters.reclaimed - before
    }

    fn unlink_dead_in(&mut self, s: u32, now: u32) {
        // Nothing here can expire, and no flush since the last walk: nothing to find.
        let flush_mark = self.flush_mark();
        let seg = self.arena.seg_mut(s);
        if seg.expiring == 0 && seg.walked_flush == flush_mark {
            return;
        }
        seg.walked_flush = flush_mark;
        let mut off = 0;
        while off < self.arena.seg(s).write_pos as usize {
            let seg = self.arena.seg(s);
            let at = read_item(seg.bytes(), off, seg.base_seq, self.arena.large_at());
            let e = pack(s, off);
            off += at.len;
            let Some(why) = self.dead(&at.header, now) else {
                continue;
            };
            let h = self.hasher.hash_one(at.key(seg.bytes()));
            if self.index.find(h, |&x| x == e).is_some() {
                self.unlink_dead(h, e, &at, &why);
            }
        }
    }
}
