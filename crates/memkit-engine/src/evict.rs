//! Memory: the budget, segment allocation and eviction (S3-FIFO over segments).
//!
//! Every byte a shard holds from the OS is counted in `Shard::mapped`: mapped segments, the
//! out-of-line blocks of large values (exact-size allocations, charged as glibc's chunks) and
//! the hash index (its allocation size). A shard never maps past its budget; to make room it
//! evicts. That is what keeps the process's RSS next to `-m`.
//!
//! Eviction follows S3-FIFO (Yang et al., SOSP'23) at segment granularity:
//! - new items are written to the *small* queue's head segment;
//! - when the small queue holds more than a tenth of the sealed segments, its oldest segment
//!   is evicted: items read since they were written (the `VISITED` bit) are promoted to the
//!   *main* queue's head segment, the rest — mostly one-hit wonders — are dropped;
//! - otherwise the oldest *main* segment is evicted: visited items are reinserted at the main
//!   head with one access spent (a CLOCK lap), the rest are dropped. An item read twice
//!   since its last move (`HOT`) earns two laps: S3-FIFO's counter, capped at 2.
//!
//! Both steps empty a whole segment, so eviction doubles as compaction: dead bytes of
//! overwritten, deleted and expired items come back at the same time. Expired and flushed items
//! met on the way are reclaimed, never retained. In no-evict mode (`-M`) live items are all
//! retained and only dead ones go; if that frees nothing, the store answers out-of-memory.

use std::hash::BuildHasher;

use memkit_types::{Error, Result};

use crate::ghost::Ghost;
use crate::segment::{HOT, Header, LargeBlock, Segment, VISITED, read_item, write_item};
use crate::shard::{Loc, Shard, pack, seg_of};
use crate::stats::class_of;

/// What a large block of `len` bytes is charged: glibc malloc's chunk, its 8-byte size word
/// plus the data rounded up to 16 bytes. Blocks come from the global allocator at their
/// exact size; page-rounded mappings of their own wasted up to 4 KiB each (a third of an
/// 8.2 KB value), so a fill of such values held 0.72x memcached's items. Blocks past glibc's
/// mmap threshold (128 KiB at first) are page-rounded in RSS: at most 3% more than charged.
pub(crate) fn large_cost(len: usize) -> usize {
    (len + 8).next_multiple_of(16).max(32)
}

/// The small queue's share of the sealed segments is at most 1/`SMALL_SHARE`, S3-FIFO's
/// tenth. 1/25 missed 0.3% less on both Zipf benches but cost 1.45x CPU per operation when
/// keys exceed memory (an in-process get-then-set loop over 2M keys in 64 MiB: 1002 vs 688
/// ns): more items dropped early come back through the ghost and are copied.
const SMALL_SHARE: usize = 10;

/// Ghost fingerprints for an index of `capacity` entries: 5/8 of an entry each, between 0.6
/// and 1.2 bytes an item as the table fills (the old sizing, half a byte a bucket, was
/// 0.57 of capacity). Of 1/4 to 3/2, 5/8 missed least on the 32 MiB Zipf trace
/// (measured with the two-table index of commit 40b98e3).
fn ghost_slots(capacity: usize) -> usize {
    capacity * 5 / 8
}

impl Shard {
    /// Makes sure a record of `len` bytes fits in the small head and, when `large > 0`, that a
    /// large block of that many bytes fits in the budget. `new_entry` also reserves an index
    /// slot. May evict.
    pub(crate) fn make_room(
        &mut self,
        len: usize,
        large: usize,
        new_entry: bool,
        now: u32,
    ) -> Result<()> {
        self.reserved = 0;
        if new_entry && !self.index.has_room() {
            // The ghost is sized from the index, so both count here.
            let (bytes, capacity) = self.index.next_bytes_and_capacity();
            let want = bytes + Ghost::bytes_for(ghost_slots(capacity));
            let held = self.index_bytes + self.ghost.bytes();
            self.reclaim(want.saturating_sub(held), now)?;
            // Eviction may have made room: its removals free index buckets too.
            if !self.index.has_room() {
                let (segs, hasher) = (&self.segs, &self.hasher);
                self.index.grow(|&x| {
                    let s = &segs[seg_of(x) as usize];
                    hasher.hash_one(
                        read_item(s.bytes(), crate::shard::off_of(x), s.base_seq).key(s.bytes()),
                    )
                });
                self.ghost.grow_to(ghost_slots(self.index.capacity()));
                self.index_bytes = self.index.bytes();
                self.mapped = self.mapped + self.index_bytes + self.ghost.bytes() - held;
            }
        }
        // The large block's budget first: freeing it may have to evict the small head
        // itself (when every stub lives there), which the head step below then replaces.
        if large > 0 {
            let cost = large_cost(large);
            self.reclaim(cost, now)?;
            self.reserved = cost;
        }
        let head_fits = self
            .small_head
            .is_some_and(|s| self.segs[s as usize].free_space() >= len);
        if !head_fits {
            if let Some(old) = self.small_head.take() {
                self.seal_small(old);
            }
            let s = self.take_segment(now)?;
            let seq = self.seq_value();
            self.segs[s as usize].reset(seq, now);
            self.small_head = Some(s);
        }
        Ok(())
    }

    fn seal_small(&mut self, s: u32) {
        if self.segs[s as usize].write_pos == 0 {
            self.free.push(s);
        } else {
            self.small.push_back(s);
        }
    }

    /// Frees budget until `bytes` more fit: gives back empty segments first, then evicts.
    fn reclaim(&mut self, bytes: usize, now: u32) -> Result<()> {
        let mut rounds = self.eviction_rounds();
        while self.mapped + self.reserved + bytes > self.cfg.budget {
            if let Some(s) = self.free.pop() {
                self.segs[s as usize].unmap();
                self.unmapped.push(s);
                self.mapped -= self.cfg.seg_size;
                continue;
            }
            if rounds == 0 {
                self.stats.store_no_memory += 1;
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
        loop {
            if let Some(s) = self.try_segment_without_eviction() {
                return Ok(s);
            }
            if rounds == 0 {
                self.stats.store_no_memory += 1;
                return Err(Error::OutOfMemory);
            }
            rounds -= 1;
            self.evict_one(self.cfg.seg_size, now)?;
        }
    }

    /// Bounds the work of one allocation: every segment evicted twice is more than enough
    /// (the first lap clears every `VISITED` bit).
    fn eviction_rounds(&self) -> usize {
        2 * (self.small.len() + self.main.len()) + 4
    }

    fn try_segment_without_eviction(&mut self) -> Option<u32> {
        self.try_segment_within(self.cfg.budget)
    }

    /// A free segment, or a newly mapped one if `limit` allows.
    fn try_segment_within(&mut self, limit: usize) -> Option<u32> {
        if let Some(s) = self.free.pop() {
            return Some(s);
        }
        if self.mapped + self.reserved + self.cfg.seg_size > limit {
            return None;
        }
        let s = match self.unmapped.pop() {
            Some(s) => s,
            None => {
                if self.segs.len() >= self.index.layout().max_segments() {
                    return None;
                }
                self.segs.push(Segment::unmapped());
                (self.segs.len() - 1) as u32
            }
        };
        if self.segs[s as usize].map(self.cfg.seg_size).is_err() {
            self.unmapped.push(s);
            return None;
        }
        self.mapped += self.cfg.seg_size;
        Some(s)
    }

    /// Frees one segment: by compaction when dead bytes are what fills the shard, else by
    /// S3-FIFO eviction of the oldest segment of the queue it picks. An eviction stops part
    /// way once `want` more bytes fit in the budget: a segment of stubs can stand for many
    /// times its size in out-of-line values, and emptying it whole would drop far more than
    /// the write needs (a fill of 20 KB values kept a third of its budget that way).
    pub(crate) fn evict_one(&mut self, want: usize, now: u32) -> Result<()> {
        if let Some((in_small, i)) = self.sparse_victim() {
            let s = if in_small {
                self.small.remove(i)
            } else {
                self.main.remove(i)
            };
            if let Some(s) = s {
                return self.finish_emptying(s, in_small, true, None, now);
            }
        }
        let sealed = self.small.len() + self.main.len();
        let from_small = !self.small.is_empty()
            && (self.main.is_empty() || self.small.len() * SMALL_SHARE > sealed);
        let victim = if from_small {
            self.small.pop_front()
        } else {
            self.main.pop_front()
        };
        let Some(s) = victim else {
            // Nothing sealed: the heads are all there is, seal them and go round again.
            if let Some(m) = self.main_head.take() {
                self.main.push_back(m);
                return self.evict_one(want, now);
            }
            if let Some(h) = self
                .small_head
                .filter(|&h| self.segs[h as usize].write_pos > 0)
            {
                self.small_head = None;
                self.small.push_back(h);
                return self.evict_one(want, now);
            }
            self.stats.store_no_memory += 1;
            return Err(Error::OutOfMemory);
        };
        self.finish_emptying(s, from_small, false, Some(want), now)
    }

    /// Overwrites and deletes leave dead bytes in sealed segments. When those, not live data,
    /// are what fills the shard (its sealed segments are less than three quarters live), the
    /// segment with the least live data is emptied keeping everything live in it — memcached
    /// evicts nothing while the live data fits, and neither should we. With `-M` the sparsest
    /// segment is always the one to compact.
    fn sparse_victim(&self) -> Option<(bool, usize)> {
        // A segment under eviction is on its way out, dead bytes and all: it is left out.
        let whole = |s: &&u32| self.segs[**s as usize].evict_pos == 0;
        let sealed = self
            .small
            .iter()
            .chain(self.main.iter())
            .filter(whole)
            .count();
        if sealed < 2 {
            return None;
        }
        let live_of = |s: &u32| self.segs[*s as usize].live_bytes as usize;
        let live: usize = (self.small.iter().chain(self.main.iter()))
            .filter(whole)
            .map(live_of)
            .sum();
        if self.cfg.evict && live * 4 >= sealed * self.cfg.seg_size * 3 {
            return None;
        }
        let small = (self.small.iter().enumerate())
            .filter(|(_, s)| whole(s))
            .map(|(i, s)| (live_of(s), true, i));
        let main = (self.main.iter().enumerate())
            .filter(|(_, s)| whole(s))
            .map(|(i, s)| (live_of(s), false, i));
        let (least, in_small, i) = small.chain(main).min()?;
        // Compacting a segment that is mostly live frees too little to be worth the copy.
        (least * 2 <= self.cfg.seg_size).then_some((in_small, i))
    }

    /// Empties segment `s` (taken out of its queue) and frees it, or puts it back at the
    /// front of its queue if a live item could not be moved in no-evict mode, or if the
    /// eviction stopped once `want` bytes fit (see [`Self::evict_one`]).
    fn finish_emptying(
        &mut self,
        s: u32,
        from_small: bool,
        keep_all: bool,
        want: Option<usize>,
        now: u32,
    ) -> Result<()> {
        match self.empty_segment(s, from_small && !keep_all, keep_all, want, now) {
            Ok(false) => {
                if from_small {
                    self.small.push_front(s);
                } else {
                    self.main.push_front(s);
                }
                Ok(())
            }
            Ok(true) => {
                self.segs[s as usize].reset(0, now);
                if self.mapped > self.cfg.budget {
                    // Repay the overdraft a move took (see `relocate`).
                    self.segs[s as usize].unmap();
                    self.unmapped.push(s);
                    self.mapped -= self.cfg.seg_size;
                } else {
                    self.free.push(s);
                }
                self.stats.segments_evicted += 1;
                Ok(())
            }
            Err(e) => {
                // No-evict mode could not move a live item: the segment stays where it was.
                if from_small {
                    self.small.push_front(s);
                } else {
                    self.main.push_front(s);
                }
                self.stats.store_no_memory += 1;
                Err(e)
            }
        }
    }

    /// Drops, reclaims or moves every item of segment `s` so that it holds nothing live.
    /// `keep_all` (compaction) moves every live item with its access bit as it is; otherwise
    /// only visited items move, as S3-FIFO says, and spend their bit.
    /// `to_ghost`: dropped items are remembered in the ghost (S3-FIFO's small-queue rule).
    /// With `want` it stops as soon as that many bytes fit in the budget, and says whether
    /// the segment was emptied; it resumes at the segment's `evict_pos`.
    fn empty_segment(
        &mut self,
        s: u32,
        to_ghost: bool,
        keep_all: bool,
        want: Option<usize>,
        now: u32,
    ) -> Result<bool> {
        let mut off = self.segs[s as usize].evict_pos as usize;
        let mut key = [0u8; 256];
        while off < self.segs[s as usize].write_pos as usize {
            if let Some(want) = want
                && self.mapped + self.reserved + want <= self.cfg.budget
            {
                self.segs[s as usize].evict_pos = off as u32;
                return Ok(false);
            }
            let seg = &self.segs[s as usize];
            let at = read_item(seg.bytes(), off, seg.base_seq);
            let klen = at.header.klen as usize;
            key[..klen].copy_from_slice(at.key(seg.bytes()));
            let h = self.hasher.hash_one(&key[..klen]);
            let e = pack(s, off);
            off += at.len;
            if self.index.find(h, |&x| x == e).is_none() {
                continue; // overwritten or deleted earlier: already dead bytes
            }
            if let Some(why) = self.dead(&at.header, now) {
                self.unlink_dead(h, e, &at, &why);
                continue;
            }
            let keep = keep_all || !self.cfg.evict || at.header.bits & VISITED != 0;
            if keep && self.relocate(h, e, &at, !keep_all, now) {
                self.stats.evict_retained += 1;
                continue;
            }
            if !self.cfg.evict {
                return Err(Error::OutOfMemory);
            }
            if let Some(hook) = self.cfg.evict_hook.get() {
                let seg = &self.segs[s as usize];
                hook.call(&crate::engine::Evicted {
                    key: &key[..klen],
                    fetched: at.header.bits & crate::segment::FETCHED != 0,
                    ttl: (at.header.exptime != 0).then(|| at.header.exptime.saturating_sub(now)),
                    age: now.saturating_sub(seg.created),
                    size: at.header.logical_len(),
                });
            }
            self.unlink(h, e, &at, false);
            if to_ghost {
                self.ghost.remember(h);
            }
            self.stats.evictions += 1;
            let class = &mut self.classes[class_of(&self.cfg.class_sizes, at.header.logical_len())];
            class.evicted += 1;
            if at.header.bits & crate::segment::FETCHED == 0 {
                self.stats.evicted_unfetched += 1;
                class.counters.evicted_unfetched += 1;
            }
            if at.header.exptime != 0 {
                class.counters.evicted_nonzero += 1;
            }
            // Kept for its use, but no segment could take it: memcached's evicted_active.
            if keep {
                class.counters.evicted_active += 1;
            }
        }
        Ok(true)
    }

    /// Moves a live item to the main head, one policy bit spent if `spend_visit` (`HOT`
    /// first, then `VISITED`: a CLOCK lap). Never evicts (this runs inside an eviction):
    /// `false` when no segment can be had without one.
    fn relocate(
        &mut self,
        h: u64,
        e: Loc,
        at: &crate::segment::ItemAt,
        spend_visit: bool,
        now: u32,
    ) -> bool {
        let bits = if spend_visit && at.header.bits & HOT != 0 {
            at.header.bits & !HOT
        } else if spend_visit {
            at.header.bits & !VISITED
        } else {
            at.header.bits
        };
        let hdr = Header { bits, ..at.header };
        let fits = |shard: &Shard, m: u32| {
            let seg = &shard.segs[m as usize];
            seg.free_space() >= hdr.total_len(seg.base_seq)
        };
        let m = match self.main_head {
            Some(m) if fits(self, m) => m,
            _ => {
                // Within an eviction the budget may be overdrawn by up to two segments: the
                // victim is being emptied and is unmapped at the end if it must be. Without
                // this, a victim full of visited items could not move them all (re-based
                // headers can grow a byte or two) and hot items would be dropped.
                let overdraft = self.cfg.budget + 2 * self.cfg.seg_size;
                let Some(fresh) = self.try_segment_within(overdraft) else {
                    return false;
                };
                if let Some(old) = self.main_head.take() {
                    self.main.push_back(old);
                }
                // Headers store seq relative to the segment's base: moved items carry their
                // old seqs, so the base is the first one's (its neighbours in the victim were
                // written about when it was), not the shard's current seq.
                self.segs[fresh as usize].reset(at.header.seq, now);
                self.main_head = Some(fresh);
                if !fits(self, fresh) {
                    return false;
                }
                fresh
            }
        };
        let src = seg_of(e);
        let Ok([from, to]) = self.segs.get_disjoint_mut([src as usize, m as usize]) else {
            return false;
        };
        let dst_off = to.write_pos as usize;
        let base = to.base_seq;
        let n = write_item(
            &mut to.bytes_mut()[dst_off..],
            base,
            &hdr,
            at.key(from.bytes()),
            &[at.stored_value(from.bytes())],
        );
        to.write_pos += n as u32;
        to.live_bytes += n as u32;
        to.expiring += u32::from(hdr.exptime != 0);
        from.live_bytes -= at.len as u32;
        let new_e = pack(m, dst_off);
        self.index.replace(h, |&x| x == e, new_e);
        true
    }

    /// Copies `parts` into a new large block; the budget was made room for by `make_room`.
    pub(crate) fn alloc_large(&mut self, parts: [&[u8]; 2]) -> Result<u32> {
        let len = parts[0].len() + parts[1].len();
        let mut block = Vec::new();
        block
            .try_reserve_exact(len)
            .map_err(|_| Error::OutOfMemory)?;
        block.extend_from_slice(parts[0]);
        block.extend_from_slice(parts[1]);
        let block: LargeBlock = block.into_boxed_slice();
        self.mapped += large_cost(len);
        self.reserved = 0;
        Ok(match self.large_free.pop() {
            Some(h) => {
                self.large[h as usize] = Some(block);
                h
            }
            None => {
                self.large.push(Some(block));
                (self.large.len() - 1) as u32
            }
        })
    }

    pub(crate) fn free_large(&mut self, handle: u32) {
        if let Some(block) = self.large.get_mut(handle as usize).and_then(Option::take) {
            self.mapped -= large_cost(block.len());
            self.large_free.push(handle);
        }
    }

    /// Proactive reclamation: walks up to `max_segments` sealed segments (a cursor goes round
    /// both queues without reordering them) unlinking expired and flushed items, and frees
    /// segments left empty, so dead items stop holding memory even if nobody reads them.
    /// Returns the number of items reclaimed.
    pub(crate) fn reclaim_expired(&mut self, now: u32, max_segments: usize) -> u64 {
        self.apply_flush(now);
        let before = self.stats.reclaimed;
        // At most one pass over the sealed segments per call, whatever `max_segments` says.
        let pass = max_segments.min(self.small.len() + self.main.len());
        for _ in 0..pass {
            let total = self.small.len() + self.main.len();
            if total == 0 {
                break;
            }
            let pos = self.reclaim_cursor % total;
            let in_small = pos < self.small.len();
            let i = if in_small {
                pos
            } else {
                pos - self.small.len()
            };
            let s = if in_small {
                self.small[i]
            } else {
                self.main[i]
            };
            self.unlink_dead_in(s, now);
            if self.segs[s as usize].live_bytes == 0 {
                if in_small {
                    self.small.remove(i);
                } else {
                    self.main.remove(i);
                }
                self.segs[s as usize].reset(0, now);
                self.free.push(s);
            } else {
                self.reclaim_cursor = pos + 1;
            }
        }
        // Memory of reclaimed segments goes back to the OS, but for one kept for the next head.
        while self.free.len() > 1 {
            if let Some(s) = self.free.pop() {
                self.segs[s as usize].unmap();
                self.unmapped.push(s);
                self.mapped -= self.cfg.seg_size;
            }
        }
        // The heads hold the newest items, but a short TTL expires there too. A head left
        // with nothing live is rewound and written over.
        for head in [self.small_head, self.main_head].into_iter().flatten() {
            self.unlink_dead_in(head, now);
            let seg = &mut self.segs[head as usize];
            if seg.live_bytes == 0 {
                let base = seg.base_seq;
                seg.reset(base, seg.created);
            }
        }
        self.stats.reclaimed - before
    }

    fn unlink_dead_in(&mut self, s: u32, now: u32) {
        // Nothing here can expire, and no flush since the last walk: nothing to find.
        let flush_mark = self.flush_mark();
        let seg = &mut self.segs[s as usize];
        if seg.expiring == 0 && seg.walked_flush == flush_mark {
            return;
        }
        seg.walked_flush = flush_mark;
        let mut off = 0;
        let mut key = [0u8; 256];
        while off < self.segs[s as usize].write_pos as usize {
            let seg = &self.segs[s as usize];
            let at = read_item(seg.bytes(), off, seg.base_seq);
            let item_off = off;
            off += at.len;
            let Some(why) = self.dead(&at.header, now) else {
                continue;
            };
            let klen = at.header.klen as usize;
            key[..klen].copy_from_slice(at.key(seg.bytes()));
            let h = self.hasher.hash_one(&key[..klen]);
            let e = pack(s, item_off);
            if self.index.find(h, |&x| x == e).is_some() {
                self.unlink_dead(h, e, &at, &why);
            }
        }
    }
}
