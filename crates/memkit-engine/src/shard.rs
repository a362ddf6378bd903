//! One shard: a hash index over items packed in segments, and every command's semantics.
//!
//! A shard is the unit of locking: the engine hashes a key to a shard and holds that shard's
//! mutex for the whole command, which makes every command atomic without a global lock.
//!
//! Its parts:
//! - the [`Index`] (`index.rs`): key hash -> item location, a Robin Hood table of five-byte
//!   buckets holding the location and a few bits of hash tag. Keys are not stored in the
//!   index: the item record holds them;
//! - the [`Arena`] (`arena.rs`): segments, out-of-line blocks, the budget, and locations
//!   resolved to bytes;
//! - the eviction policy (`policy.rs`): which segment to empty next and which of its items
//!   to keep; `evict.rs` is the mechanism that makes room and empties segments;
//! - [`ShardStats`] (`stats.rs`): counters and size classes.
//!
//! This file links and unlinks items and writes their records; the commands are in
//! `shard/commands.rs`, what a storage hook needs in `shard/persist.rs`, the dump in
//! bounded batches in `shard/crawl.rs`, warm restart's part in `shard/restart.rs`.

use std::cell::Cell;
use std::hash::BuildHasher;

use memkit_types::Result;

mod commands;
pub(crate) mod crawl;
mod flash;
mod persist;
pub(crate) mod restart;

use crate::arena::{Arena, Loc, STUB_SEGMENTS};
use crate::engine::{KeyHasher, Prefetch};
use crate::index::{Index, Layout};
use crate::policy::{EvictionPolicy, Policy, ShardPolicy};
use crate::segment::{FETCHED, Header, ItemAt, VISITED, large_for};
use crate::stats::{EngineStats, ShardStats};
pub(crate) use crate::view::ItemView;

/// What a shard needs to know of the engine's configuration.
#[derive(Debug, Clone)]
pub(crate) struct ShardConfig {
    pub seg_size: usize,
    /// Bytes this shard may hold at first: segments, large blocks, index and the policy's
    /// metadata together ([`Shard::set_budget`] changes it).
    pub budget: usize,
    /// Evict when full (memcached's default) or refuse with out-of-memory (`-M`).
    pub evict: bool,
    pub class_sizes: std::sync::Arc<[u32]>,
    /// `-I`, applied with memcached's formula ([`memkit_types::item_fits`]).
    pub item_size_max: usize,
    /// Told about each eviction, if set (memkitd's `watch evictions`).
    pub evict_hook: std::sync::Arc<std::sync::OnceLock<crate::engine::EvictHook>>,
    /// Which segments to empty and which items to keep.
    pub policy: EvictionPolicy,
    /// The flash tier, if any.
    pub flash: Option<crate::flash::FlashTier>,
}

/// The times a write needs, already in engine seconds: the item's expiry (`T`), the vivify
/// TTL (`N`) and now.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Times {
    pub exptime: u32,
    pub vivify: Option<u32>,
    pub now: u32,
}

/// A read's times, in engine seconds: now; for a replicated node's read
/// (`GetOptions::replica`), a later second to judge liveness and TTLs at, and the expiry
/// the item had before the read's own touch through the log (0: none).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadTimes {
    pub now: u32,
    pub judge: Option<u32>,
    pub touched_from: Option<u32>,
}

pub(crate) enum Dead {
    Expired,
    Flushed,
}

enum Found {
    Live(Loc, ItemAt),
    Dead(Dead),
    Miss,
}

#[derive(Debug)]
pub(crate) struct Shard {
    pub cfg: ShardConfig,
    id: u64,
    shard_bits: u32,
    pub(crate) hasher: KeyHasher,
    pub(crate) index: Index,
    /// The index's bytes as charged to the budget (an insert may grow the table past them:
    /// see [`Self::link`]).
    pub(crate) index_bytes: usize,
    pub(crate) arena: Arena,
    pub(crate) policy: ShardPolicy,
    seq: u64,
    flush_seq: u64,
    flush_at: Option<u32>,
    pub(crate) stats: ShardStats,
    scratch: Vec<u8>,
    /// Where the expiry walk resumes (see `evict::reclaim_expired`).
    pub(crate) reclaim_cursor: usize,
    /// Reads of values on flash, for `ext_recache_rate`.
    pub(crate) flash_reads: u32,
    /// Where the flash tier's walks resume, in the policy's segments and in the stubs' (see
    /// `shard::flash`).
    pub(crate) flash_cursor: usize,
    pub(crate) stub_cursor: usize,
    /// The segments holding the stubs of values on flash, outside the eviction policy:
    /// sealed, oldest first, and the one being written.
    pub(crate) flash_segs: std::collections::VecDeque<u32>,
    pub(crate) flash_head: Option<u32>,
}

/// The index layout for a shard's segment size and budget: segment ids up to what the
/// budget maps, plus the segments for out-of-line values' stubs (`Arena::limit`), the two
/// segments of overdraft a relocation may take, and one for a budget's remainder.
fn layout_for(seg_size: usize, budget: usize) -> Layout {
    Layout::new(seg_size, budget / seg_size.max(1) + STUB_SEGMENTS + 3)
}

impl Shard {
    pub fn new(cfg: ShardConfig, id: u64, shard_bits: u32, hasher: KeyHasher) -> Self {
        Shard {
            index: Index::new(layout_for(cfg.seg_size, cfg.budget)),
            index_bytes: 0,
            arena: Arena::new(
                cfg.seg_size,
                cfg.budget,
                (cfg.flash.as_ref()).map(|f| (f.store.clone(), f.item_size)),
            ),
            policy: ShardPolicy::new(cfg.policy),
            stats: ShardStats::new(cfg.class_sizes.clone()),
            cfg,
            id,
            shard_bits,
            hasher,
            seq: 0,
            flush_seq: 0,
            flush_at: None,
            scratch: Vec::new(),
            reclaim_cursor: 0,
            flash_reads: 0,
            flash_cursor: 0,
            stub_cursor: 0,
            flash_segs: Default::default(),
            flash_head: None,
        }
    }

    /// Changes the budget (`cache_memlimit`). A larger one may need wider segment ids in the
    /// index; a smaller one is reached by eviction as items arrive.
    pub fn set_budget(&mut self, budget: usize) {
        self.arena.set_budget(budget);
        let want = layout_for(self.arena.seg_size(), budget);
        if want.max_segments() > self.index.layout().max_segments() {
            self.index.relayout(want);
        }
    }

    pub(crate) fn seq_value(&self) -> u64 {
        self.seq
    }

    /// Items with a sequence at or below this are flushed.
    pub(crate) fn flush_mark(&self) -> u64 {
        self.flush_seq
    }

    // ---- locating items ----

    /// [`crate::Engine::prefetch`] in this shard.
    pub(crate) fn prefetch(&self, h: u64, what: Prefetch) {
        match what {
            Prefetch::Bucket => self.index.prefetch(h),
            Prefetch::Record => {
                if let Some(e) = self.index.find(h, |_| true) {
                    self.arena.prefetch(e);
                }
            }
        }
    }

    /// The live entry for `key` and its parsed record: the key comparison parses the
    /// record, so the caller gets it rather than parsing it a second time.
    fn find(&self, h: u64, key: &[u8]) -> Option<(Loc, ItemAt)> {
        let hit = Cell::new(None);
        let e = self.index.find(h, |&e| {
            let at = self.arena.item_at(e);
            let same = self.arena.key_at(e, &at) == key;
            if same {
                hit.set(Some(at));
            }
            same
        })?;
        hit.get().map(|at| (e, at))
    }

    pub(crate) fn cas_of(&self, h: &Header) -> u64 {
        h.ext_cas.unwrap_or((h.seq << self.shard_bits) | self.id)
    }

    pub(crate) fn dead(&self, h: &Header, now: u32) -> Option<Dead> {
        if h.seq <= self.flush_seq {
            Some(Dead::Flushed)
        } else if h.exptime != 0 && h.exptime <= now {
            Some(Dead::Expired)
        } else {
            None
        }
    }

    /// Whether a live item is dead at the later second `judge`: expired by then, or under a
    /// delayed flush due by then (which covers every item now linked: all were written
    /// before its time).
    pub(crate) fn dead_later(&self, at: &ItemAt, judge: u32) -> Option<Dead> {
        if self.flush_at.is_some_and(|t| judge >= t) {
            Some(Dead::Flushed)
        } else {
            self.dead(&at.header, judge)
        }
    }

    /// Applies a delayed `flush_all` whose time has come. Items written up to now become
    /// invisible: O(1), by moving the flush mark to the current write sequence.
    pub fn apply_flush(&mut self, now: u32) {
        if let Some(at) = self.flush_at
            && now >= at
        {
            // memcached flushes items linked up to and during the flush second itself
            // (`oldest_live = now + delay - 1`): the mark keeps moving while that second
            // lasts and becomes final at the first command after it.
            self.flush_seq = self.seq;
            if now > at {
                self.flush_at = None;
            }
        }
    }

    /// `flush_all`: now (`at == None`) or at engine second `at`. A pending flush that is
    /// already due takes effect before a new one replaces it.
    pub fn flush(&mut self, at: Option<u32>, now: u32) {
        self.apply_flush(now);
        match at {
            None => {
                self.flush_seq = self.seq;
                self.flush_at = None;
            }
            Some(t) => {
                self.flush_at = Some(t);
                self.apply_flush(now);
            }
        }
    }

    fn lookup(&mut self, h: u64, key: &[u8], now: u32) -> Found {
        self.apply_flush(now);
        let Some((e, at)) = self.find(h, key) else {
            return Found::Miss;
        };
        match self.dead(&at.header, now) {
            // A value on a flash page reclaimed since is gone: the item with it.
            None if self.flash_stale(e, &at) => {
                self.unlink(h, e, &at, false);
                self.stats.counters.miss_from_extstore += 1;
                Found::Miss
            }
            None => Found::Live(e, at),
            Some(d) => {
                self.unlink_dead(h, e, &at, &d);
                Found::Dead(d)
            }
        }
    }

    // ---- linking and unlinking ----

    /// Removes the index entry and the bookkeeping of a live item; frees its large block
    /// unless `keep_large` (the record is being rewritten with the same block).
    pub(crate) fn unlink(&mut self, h: u64, e: Loc, at: &ItemAt, keep_large: bool) {
        self.index.remove(h, |&x| x == e);
        self.arena.release(e, at, keep_large);
        self.stats.unlinked(at.header.logical_len());
    }

    pub(crate) fn unlink_dead(&mut self, h: u64, e: Loc, at: &ItemAt, why: &Dead) {
        self.unlink(h, e, at, false);
        let unfetched = matches!(why, Dead::Expired) && at.header.bits & FETCHED == 0;
        self.stats.reclaimed(at.header.logical_len(), unfetched);
    }

    fn link(&mut self, h: u64, e: Loc, header: &Header, now: u32) {
        let (arena, hasher) = (&self.arena, &self.hasher);
        let left = (self.index).insert(h, e, |&x| hasher.hash_one(arena.key_of(x)));
        // An insert that crowds one home grows the table itself (see `Index::insert`): the
        // budget learns of it here, and the next `make_room` evicts for it.
        let index_bytes = self.index.bytes();
        if index_bytes != self.index_bytes {
            self.arena.recharge(self.index_bytes, index_bytes);
            self.index_bytes = index_bytes;
        }
        self.stats.linked(header.logical_len());
        self.drop_unplaced(left, now);
    }

    /// The base sequence of the write head, which a new record's size depends on.
    fn write_base(&self) -> u64 {
        (self.policy.write_head()).map_or(self.seq, |s| self.arena.seg(s).base_seq)
    }

    /// Writes a new version of `key` into the write head and points the index at it,
    /// replacing whatever version is there. `value` must not borrow segment memory: making
    /// room may recycle any sealed segment.
    fn write_new(
        &mut self,
        h: u64,
        key: &[u8],
        mut hdr: Header,
        value: [&[u8]; 2],
        now: u32,
    ) -> Result<u64> {
        let vlen = value[0].len() + value[1].len();
        hdr.klen = key.len() as u8;
        hdr.vlen = vlen as u32;
        hdr.large = large_for(vlen, self.arena.large_at());
        hdr.seq = self.seq + 1;
        let base = self.write_base();
        self.make_room(
            hdr.total_len(base),
            if hdr.large { vlen } else { 0 },
            true,
            now,
        )?;
        if let Some((old, at)) = self.find(h, key) {
            self.unlink(h, old, &at, false);
        } else {
            // A key with no live version: the policy may start it with bits of its own
            // (S3-FIFO: visited, when its ghost remembers dropping the key lately).
            hdr.bits |= self.policy.on_insert(h);
        }
        self.seq += 1;
        hdr.seq = self.seq;
        let handle;
        let stored: [&[u8]; 2] = if hdr.large {
            handle = self.arena.alloc_large(value)?.to_le_bytes();
            [&handle, &[]]
        } else {
            value
        };
        let e = self.append_record(key, &hdr, stored);
        self.link(h, e, &hdr, now);
        self.stats.counters.total_items += 1;
        if hdr.large {
            self.write_through(h, e, now);
        }
        Ok(self.cas_of(&hdr))
    }

    /// Appends a record to the write head, which [`Self::make_room`] made big enough.
    fn append_record(&mut self, key: &[u8], hdr: &Header, stored: [&[u8]; 2]) -> Loc {
        let head = self
            .policy
            .write_head()
            .expect("make_room leaves a write head");
        self.arena.append(head, key, hdr, stored)
    }

    /// Rewrites a live item with a changed header (TTL, stale mark, new CAS), keeping its
    /// value (and large block). Returns the header written, or `None` if making room evicted
    /// the item after all.
    pub(crate) fn rewrite(
        &mut self,
        h: u64,
        key: &[u8],
        e: Loc,
        now: u32,
        change: impl FnOnce(&mut Header, u64),
    ) -> Result<Option<Header>> {
        let at = self.arena.item_at(e);
        // Marked visited, the item is one the eviction that makes room keeps rather than
        // drops (the policy contract: `VISITED` means used since last decided).
        self.arena.set_bits(e, at.header.bits | VISITED);
        let mut hdr = at.header;
        change(&mut hdr, self.seq + 1);
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        scratch.extend_from_slice(self.arena.stored_value(e, &at));
        let base = self.write_base();
        let room = self.make_room(hdr.total_len(base), 0, false, now);
        let result = room.map(|()| {
            let (cur, cur_at) = self.find(h, key)?;
            self.unlink(h, cur, &cur_at, true);
            if hdr.seq > self.seq {
                self.seq = hdr.seq;
            }
            let e2 = self.append_record(key, &hdr, [&scratch, &[]]);
            self.link(h, e2, &hdr, now);
            Some(hdr)
        });
        self.scratch = scratch;
        result
    }

    /// The segments that hold records: the sealed ones in the policy's order (oldest first
    /// within a queue), then the open heads.
    pub(crate) fn segments(&self) -> impl Iterator<Item = u32> + '_ {
        let sealed = (0..self.policy.sealed_len()).map(|i| self.policy.sealed_at(i));
        let flash = self.flash_segs.iter().copied().chain(self.flash_head);
        sealed
            .chain(self.policy.heads().into_iter().flatten())
            .chain(flash)
    }

    /// Adds this shard to an engine-wide statistics snapshot: its counters and classes, its
    /// memory, and the age of its oldest sealed segments.
    pub(crate) fn add_stats(&self, out: &mut EngineStats, now: u32) {
        self.stats.add_to(out);
        out.mapped_bytes += self.arena.mapped() as u64;
        out.index_bytes += (self.index_bytes + self.policy.bytes()) as u64;
        out.segments += self.arena.mapped_segments() as u64;
        let (flash_items, flash_bytes) = self.arena.flash_usage();
        out.flash_items += flash_items as u64;
        out.flash_bytes += flash_bytes as u64;
        for s in self.policy.tails().into_iter().flatten() {
            let created = self.arena.seg(s).created;
            out.oldest_age = out.oldest_age.max(now.saturating_sub(created));
        }
    }
}
