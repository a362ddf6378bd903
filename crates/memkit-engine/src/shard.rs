//! One shard: a hash index over items packed in segments, and every command's semantics.
//!
//! A shard is the unit of locking: the engine hashes a key to a shard and holds that shard's
//! mutex for the whole command, which makes every command atomic without a global lock.
//!
//! The index is a SwissTable of packed `u64` locations (`segment:20 | offset:24 | tag:20`);
//! the tag is 20 more hash bits, so a probe rarely touches segment memory for a key that is
//! not the one sought. Keys are not stored in the index: the item record holds them.
//!
//! Memory and eviction live in [`crate::evict`]; this file is the command logic, which follows
//! memcached 1.6 (`do_store_item`, `do_add_delta`, `proto_parser.c`'s meta handlers).

use std::collections::VecDeque;
use std::hash::BuildHasher;

use hashbrown::DefaultHashBuilder;
use memkit_types::{
    ArithMode, ArithOptions, ArithOutcome, DeleteOptions, DeleteOutcome, GetOptions, Result,
    StoreMode, StoreOptions, StoreOutcome, Stored, Ttl,
};

mod persist;

use crate::ghost::Ghost;
use crate::index::{Index, Layout};
use crate::numeric;
use crate::segment::{
    FETCHED, HOT, Header, ItemAt, LargeBlock, STALE, Segment, VISITED, WIN_SENT, read_item,
    write_item,
};
use crate::stats::{ClassCounters, ClassStats, Counters, class_of};

/// What a shard needs to know of the engine's configuration.
#[derive(Debug, Clone)]
pub(crate) struct ShardConfig {
    pub seg_size: usize,
    /// Bytes this shard may hold: segments, large blocks and index together.
    pub budget: usize,
    /// Evict when full (memcached's default) or refuse with out-of-memory (`-M`).
    pub evict: bool,
    pub class_sizes: std::sync::Arc<[u32]>,
    /// `-I`, applied with memcached's formula (see `Engine::item_fits`).
    pub item_size_max: usize,
    /// Told about each eviction, if set (memkitd's `watch evictions`).
    pub evict_hook: std::sync::Arc<std::sync::OnceLock<crate::engine::EvictHook>>,
}

/// The times a write needs, already in engine seconds: the item's expiry (`T`), the vivify
/// TTL (`N`) and now.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Times {
    pub exptime: u32,
    pub vivify: Option<u32>,
    pub now: u32,
}

/// Called for each live item by [`Shard::for_each_live`]: key, header, CAS, age in seconds.
pub(crate) type ItemVisitor<'a> = dyn FnMut(&[u8], &Header, u64, u32) + 'a;

/// memcached's `sizeof(item)` plus the CAS field: what memcached counts against `-I` beyond
/// key and value.
const MEMCACHED_ITEM_OVERHEAD: usize = 48 + 8;

/// Whether memcached would accept an item of this shape under `-I` (`item_size_ok`).
pub(crate) fn item_fits(
    item_size_max: usize,
    key_len: usize,
    value_len: usize,
    flags: u32,
) -> bool {
    let suffix = if flags == 0 { 0 } else { 4 };
    MEMCACHED_ITEM_OVERHEAD + key_len + 1 + suffix + value_len + 2 <= item_size_max
}

/// A borrowed view of an item during a read, before the shard lock is released.
#[derive(Debug, Clone, Copy)]
pub struct ItemView<'a> {
    /// The key.
    pub key: &'a [u8],
    /// The value bytes.
    pub value: &'a [u8],
    /// Client flags.
    pub flags: u32,
    /// CAS token.
    pub cas: u64,
    /// Remaining TTL.
    pub ttl: Ttl,
    /// Remaining TTL before this read's `T` (for a vivified item: `Never`, as memcached's
    /// stub starts without one): what `mg` reports when its `t` comes before `T`/`N`.
    pub ttl_before: Ttl,
    /// This read created the item (`N` on a miss).
    pub created: bool,
    /// Fetched before this request (`h`).
    pub fetched: bool,
    /// Seconds since last access (`l`); see `docs/protocol-notes.md` for how it is derived.
    pub last_access: u32,
    /// `W`.
    pub win: bool,
    /// `X`.
    pub stale: bool,
    /// `Z`.
    pub win_taken: bool,
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
    pub(crate) hasher: DefaultHashBuilder,
    pub(crate) index: Index,
    pub(crate) segs: Vec<Segment>,
    /// Mapped, empty segments.
    pub(crate) free: Vec<u32>,
    /// Segment ids whose memory was given back.
    pub(crate) unmapped: Vec<u32>,
    /// Sealed segments, oldest first: S3-FIFO's small (probation) and main queues.
    pub(crate) small: VecDeque<u32>,
    pub(crate) main: VecDeque<u32>,
    /// Where new items are written.
    pub(crate) small_head: Option<u32>,
    /// Where items that earned another lap are moved.
    pub(crate) main_head: Option<u32>,
    pub(crate) large: Vec<Option<LargeBlock>>,
    pub(crate) large_free: Vec<u32>,
    /// Bytes held from the OS: mapped segments, large blocks, index.
    pub(crate) mapped: usize,
    pub(crate) index_bytes: usize,
    /// Budget set aside by `make_room` for a large block about to be allocated.
    pub(crate) reserved: usize,
    seq: u64,
    flush_seq: u64,
    flush_at: Option<u32>,
    pub(crate) stats: Counters,
    pub(crate) classes: Vec<ClassStats>,
    pub(crate) scratch: Vec<u8>,
    pub(crate) reclaim_cursor: usize,
    /// Keys the small queue dropped lately (S3-FIFO's ghost queue).
    pub(crate) ghost: Ghost,
}

/// Where an item lives: segment (12 bits) and byte offset (20 bits). The index stores it in
/// the bits a shard actually needs and a hash tag in the rest (`index::Layout`).
pub(crate) type Loc = u32;

/// Segments a shard may have (12 bits of [`Loc`]).
pub(crate) const MAX_SEGMENTS: usize = 1 << 12;
/// The largest segment (20 bits of offset).
pub(crate) const MAX_SEGMENT_SIZE: usize = 1 << 20;

pub(crate) fn pack(seg: u32, off: usize) -> Loc {
    debug_assert!((seg as usize) < MAX_SEGMENTS && off < MAX_SEGMENT_SIZE);
    (seg << 20) | off as u32
}
pub(crate) fn seg_of(e: Loc) -> u32 {
    e >> 20
}
pub(crate) fn off_of(e: Loc) -> usize {
    (e & 0xF_FFFF) as usize
}

/// The index layout for a shard's segment size and budget: segment ids up to what the
/// budget maps, plus the two segments of overdraft a relocation may take, plus one.
fn layout_for(cfg: &ShardConfig) -> Layout {
    Layout::new(cfg.seg_size, cfg.budget / cfg.seg_size.max(1) + 3)
}

impl Shard {
    pub fn new(cfg: ShardConfig, id: u64, shard_bits: u32, hasher: DefaultHashBuilder) -> Self {
        let layout = layout_for(&cfg);
        let classes = cfg
            .class_sizes
            .iter()
            .map(|&size| ClassStats {
                size,
                ..Default::default()
            })
            .collect();
        Shard {
            cfg,
            id,
            shard_bits,
            hasher,
            index: Index::new(layout),
            segs: Vec::new(),
            free: Vec::new(),
            unmapped: Vec::new(),
            small: VecDeque::new(),
            main: VecDeque::new(),
            small_head: None,
            main_head: None,
            large: Vec::new(),
            large_free: Vec::new(),
            mapped: 0,
            index_bytes: 0,
            reserved: 0,
            seq: 0,
            flush_seq: 0,
            flush_at: None,
            stats: Counters::default(),
            classes,
            scratch: Vec::new(),
            reclaim_cursor: 0,
            ghost: Ghost::default(),
        }
    }

    /// Changes the budget (`cache_memlimit`). A larger one may need wider segment ids in the
    /// index; a smaller one is reached by eviction as items arrive.
    pub fn set_budget(&mut self, budget: usize) {
        self.cfg.budget = budget;
        let want = layout_for(&self.cfg);
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

    pub(crate) fn item_at(&self, e: Loc) -> ItemAt {
        let s = &self.segs[seg_of(e) as usize];
        read_item(s.bytes(), off_of(e), s.base_seq)
    }

    pub(crate) fn key_of(&self, e: Loc) -> &[u8] {
        let s = &self.segs[seg_of(e) as usize];
        read_item(s.bytes(), off_of(e), s.base_seq).key(s.bytes())
    }

    fn find(&self, h: u64, key: &[u8]) -> Option<Loc> {
        self.index.find(h, |&e| self.key_of(e) == key)
    }

    /// The value of a live item: inline in its segment, or its large block.
    fn value_of(&self, e: Loc, at: &ItemAt) -> &[u8] {
        let seg = self.segs[seg_of(e) as usize].bytes();
        match at.large_handle(seg) {
            Some(h) => match &self.large[h as usize] {
                Some(block) => &block[..at.header.vlen as usize],
                None => &[],
            },
            None => at.stored_value(seg),
        }
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
        let Some(e) = self.find(h, key) else {
            return Found::Miss;
        };
        let at = self.item_at(e);
        match self.dead(&at.header, now) {
            None => Found::Live(e, at),
            Some(d) => {
                self.unlink_dead(h, e, &at, &d);
                Found::Dead(d)
            }
        }
    }

    // ---- linking and unlinking ----

    pub(crate) fn set_bits(&mut self, e: Loc, bits: u8) {
        let off = off_of(e);
        let seg = self.segs[seg_of(e) as usize].bytes_mut();
        // Only the policy and meta bits change in place; the rest describe the layout.
        seg[off] = (seg[off] & !crate::segment::MUTABLE_BITS) | bits;
    }

    /// Removes the index entry and the bookkeeping of a live item; frees its large block
    /// unless `keep_large` (the record is being rewritten with the same block).
    pub(crate) fn unlink(&mut self, h: u64, e: Loc, at: &ItemAt, keep_large: bool) {
        self.index.remove(h, |&x| x == e);
        let seg = seg_of(e) as usize;
        self.segs[seg].live_bytes -= at.len as u32;
        if !keep_large && let Some(handle) = at.large_handle(self.segs[seg].bytes()) {
            self.free_large(handle);
        }
        let size = at.header.logical_len();
        self.stats.curr_items -= 1;
        self.stats.bytes -= size as u64;
        let c = &mut self.classes[class_of(&self.cfg.class_sizes, size)];
        c.items -= 1;
        c.bytes -= size as u64;
    }

    pub(crate) fn unlink_dead(&mut self, h: u64, e: Loc, at: &ItemAt, why: &Dead) {
        self.unlink(h, e, at, false);
        self.stats.reclaimed += 1;
        let class = &mut self.classes[class_of(&self.cfg.class_sizes, at.header.logical_len())];
        class.reclaimed += 1;
        if matches!(why, Dead::Expired) && at.header.bits & FETCHED == 0 {
            self.stats.expired_unfetched += 1;
            class.counters.expired_unfetched += 1;
        }
    }

    /// The counters of the class an item of `len` stored bytes is in: one search of the
    /// ~40 class bounds, under the shard lock the command already holds.
    pub(crate) fn class_counters(&mut self, len: usize) -> &mut ClassCounters {
        &mut self.classes[class_of(&self.cfg.class_sizes, len)].counters
    }

    fn link(&mut self, h: u64, e: Loc, header: &Header) {
        let segs = &self.segs;
        let hasher = &self.hasher;
        self.index.insert(h, e, |&x| {
            let s = &segs[seg_of(x) as usize];
            hasher.hash_one(read_item(s.bytes(), off_of(x), s.base_seq).key(s.bytes()))
        });
        // An insert that crowds one home grows the table itself (see `Index::insert`): the
        // budget learns of it here, and the next `make_room` evicts for it.
        let index_bytes = self.index.bytes();
        if index_bytes != self.index_bytes {
            self.mapped = self.mapped + index_bytes - self.index_bytes;
            self.index_bytes = index_bytes;
        }
        let size = header.logical_len();
        self.stats.curr_items += 1;
        self.stats.bytes += size as u64;
        let c = &mut self.classes[class_of(&self.cfg.class_sizes, size)];
        c.items += 1;
        c.bytes += size as u64;
    }

    /// Writes a new version of `key` into the small head and points the index at it,
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
        hdr.large = crate::segment::large_for(vlen, self.cfg.seg_size);
        hdr.seq = self.seq + 1;
        let base = self
            .small_head
            .map_or(self.seq, |s| self.segs[s as usize].base_seq);
        self.make_room(
            hdr.total_len(base),
            if hdr.large { vlen } else { 0 },
            true,
            now,
        )?;
        if let Some(old) = self.find(h, key) {
            let at = self.item_at(old);
            self.unlink(h, old, &at, false);
        } else if self.ghost.take(h) {
            // Dropped by the small queue lately and wanted again: it already showed it is
            // reused, so it is promoted to main when its small segment is evicted.
            hdr.bits |= VISITED;
        }
        self.seq += 1;
        hdr.seq = self.seq;
        let handle;
        let stored: [&[u8]; 2] = if hdr.large {
            handle = self.alloc_large(value)?.to_le_bytes();
            [&handle, &[]]
        } else {
            value
        };
        let e = self.append_record(key, &hdr, stored);
        self.link(h, e, &hdr);
        self.stats.total_items += 1;
        Ok(self.cas_of(&hdr))
    }

    /// Appends a record to the small head, which [`Self::make_room`] made big enough.
    fn append_record(&mut self, key: &[u8], hdr: &Header, stored: [&[u8]; 2]) -> Loc {
        let head = self.small_head.expect("make_room leaves a small head");
        let seg = &mut self.segs[head as usize];
        let off = seg.write_pos as usize;
        let base = seg.base_seq;
        let n = write_item(&mut seg.bytes_mut()[off..], base, hdr, key, &stored);
        seg.write_pos += n as u32;
        seg.live_bytes += n as u32;
        seg.expiring += u32::from(hdr.exptime != 0);
        pack(head, off)
    }

    /// Rewrites a live item with a changed header (TTL, stale mark, new CAS), keeping its
    /// value (and large block). Returns the header written, or `None` if making room evicted
    /// the item after all.
    fn rewrite(
        &mut self,
        h: u64,
        key: &[u8],
        e: Loc,
        now: u32,
        change: impl FnOnce(&mut Header, u64),
    ) -> Result<Option<Header>> {
        let at = self.item_at(e);
        // Mark it visited so the eviction that makes room keeps it rather than drops it.
        self.set_bits(e, at.header.bits | VISITED);
        let mut hdr = at.header;
        change(&mut hdr, self.seq + 1);
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        scratch.extend_from_slice(at.stored_value(self.segs[seg_of(e) as usize].bytes()));
        let base = self
            .small_head
            .map_or(self.seq, |s| self.segs[s as usize].base_seq);
        let room = self.make_room(hdr.total_len(base), 0, false, now);
        let result = room.map(|()| {
            let cur = self.find(h, key)?;
            let cur_at = self.item_at(cur);
            self.unlink(h, cur, &cur_at, true);
            if hdr.seq > self.seq {
                self.seq = hdr.seq;
            }
            let e2 = self.append_record(key, &hdr, [&scratch, &[]]);
            self.link(h, e2, &hdr);
            Some(hdr)
        });
        self.scratch = scratch;
        result
    }

    // ---- commands ----

    /// `get`/`gets`/`gat`/`mg`: calls `f` with a view of the item while the lock is held.
    pub fn get<R>(
        &mut self,
        h: u64,
        key: &[u8],
        opts: &GetOptions,
        now: u32,
        exptime: impl Fn(memkit_types::Exptime) -> u32,
        f: impl FnOnce(ItemView<'_>) -> R,
    ) -> Result<Option<R>> {
        self.stats.cmd_get += 1;
        if opts.touch.is_some() {
            self.stats.cmd_touch += 1;
        }
        let (mut e, at) = match self.lookup(h, key, now) {
            Found::Live(e, at) => (e, at),
            found => {
                if let Found::Dead(d) = found {
                    match d {
                        Dead::Expired => self.stats.get_expired += 1,
                        Dead::Flushed => self.stats.get_flushed += 1,
                    }
                }
                self.stats.get_misses += 1;
                if opts.touch.is_some() {
                    self.stats.touch_misses += 1;
                }
                let Some(ttl) = opts.vivify else {
                    return Ok(None);
                };
                // `N`: a stub item whose creator wins the right to fill it.
                let bump = if opts.no_bump { 0 } else { FETCHED | VISITED };
                let hdr = Header {
                    bits: WIN_SENT | bump,
                    exptime: exptime(ttl),
                    ext_cas: opts.new_cas,
                    ..Header::default()
                };
                let cas = self.write_new(h, key, hdr, [&[], &[]], now)?;
                return Ok(Some(f(ItemView {
                    key,
                    value: &[],
                    flags: 0,
                    cas,
                    ttl: ttl_of(hdr.exptime, now),
                    ttl_before: Ttl::Never,
                    created: true,
                    fetched: false,
                    last_access: 0,
                    win: true,
                    stale: false,
                    win_taken: false,
                })));
            }
        };
        self.stats.get_hits += 1;
        let class = self.class_counters(at.header.logical_len());
        class.get_hits += 1;
        if opts.touch.is_some() {
            class.touch_hits += 1;
        }
        let ttl_before = ttl_of(at.header.exptime, now);
        let mut hdr = at.header;
        if let Some(t) = opts.touch {
            self.stats.touch_hits += 1;
            let new_exp = exptime(t);
            if let Some(new) = self.set_exptime(h, key, e, &at, new_exp, now)? {
                e = new;
            }
            hdr = self.item_at(e).header;
        }
        let win_taken = hdr.bits & WIN_SENT != 0;
        let stale = hdr.bits & STALE != 0;
        let mut win = false;
        // memcached compares `it->exptime < realtime(token)`: the token is an expiry time
        // like any other, so `R0` (realtime 0) never wins, nor does an item without a TTL.
        if let Some(r) = opts.recache_below
            && !win_taken
            && hdr.exptime != 0
            && hdr.exptime < exptime(memkit_types::Exptime(i64::from(r)))
        {
            win = true;
        }
        if stale && !win_taken && !opts.classic {
            win = true;
        }
        let mut bits = hdr.bits;
        if !opts.no_bump {
            if bits & VISITED != 0 {
                bits |= HOT;
            }
            bits |= FETCHED | VISITED;
        }
        if win {
            bits |= WIN_SENT;
        }
        if bits != hdr.bits {
            self.set_bits(e, bits);
        }
        let seg = &self.segs[seg_of(e) as usize];
        let last_access = now.saturating_sub(seg.created);
        let at = self.item_at(e);
        Ok(Some(f(ItemView {
            key,
            value: self.value_of(e, &at),
            flags: hdr.flags,
            cas: self.cas_of(&hdr),
            ttl: ttl_of(hdr.exptime, now),
            ttl_before,
            created: false,
            fetched: hdr.bits & FETCHED != 0,
            last_access,
            win,
            stale,
            win_taken,
        })))
    }

    /// Sets a new expiry: in place when the record already has an exptime field, else by
    /// rewriting the record. Returns the new location if it moved.
    fn set_exptime(
        &mut self,
        h: u64,
        key: &[u8],
        e: Loc,
        at: &ItemAt,
        new_exp: u32,
        now: u32,
    ) -> Result<Option<Loc>> {
        if new_exp != 0
            && let Some(field) = at.header.exptime_off(at.key_off - off_of(e))
        {
            let off = off_of(e) + field;
            self.segs[seg_of(e) as usize].bytes_mut()[off..off + 4]
                .copy_from_slice(&new_exp.to_le_bytes());
            return Ok(None);
        }
        if new_exp == at.header.exptime {
            return Ok(None);
        }
        self.rewrite(h, key, e, now, |hdr, _| hdr.exptime = new_exp)?;
        Ok(self.find(h, key))
    }

    /// `touch`.
    pub fn touch(&mut self, h: u64, key: &[u8], new_exp: u32, now: u32) -> Result<bool> {
        self.stats.cmd_touch += 1;
        match self.lookup(h, key, now) {
            Found::Live(e, at) => {
                self.stats.touch_hits += 1;
                self.class_counters(at.header.logical_len()).touch_hits += 1;
                // memcached's touch bumps the item, which marks it fetched.
                self.set_bits(e, at.header.bits | VISITED | FETCHED);
                self.set_exptime(h, key, e, &at, new_exp, now)?;
                Ok(true)
            }
            _ => {
                self.stats.touch_misses += 1;
                Ok(false)
            }
        }
    }

    /// Every storage command, following memcached's `do_store_item`.
    ///
    /// A CAS token makes a `set`/`replace` a `cas` command (memcached's `NREAD_CAS`); with
    /// append/prepend it is only compared, and `add` ignores it. A token of 0 means "none"
    /// to memcached, so a `cas` carrying it never matches.
    pub fn store(
        &mut self,
        h: u64,
        key: &[u8],
        value: &[u8],
        opts: &StoreOptions,
        t: Times,
    ) -> Result<Stored> {
        let Times {
            exptime,
            vivify: vivify_exptime,
            now,
        } = t;
        self.stats.cmd_set += 1;
        let not = |outcome| Ok(Stored { outcome, cas: 0 });
        let cas_mode =
            opts.cas.is_some() && matches!(opts.mode, StoreMode::Set | StoreMode::Replace);
        let mut hdr = Header {
            flags: opts.flags,
            exptime,
            ext_cas: opts.new_cas,
            ..Header::default()
        };
        // memcached counts a set in the class of the item the new data is read into.
        let incoming = Header {
            klen: key.len() as u8,
            vlen: value.len() as u32,
            ..hdr
        };
        self.class_counters(incoming.logical_len()).cmd_set += 1;
        let Found::Live(e, at) = self.lookup(h, key, now) else {
            match opts.mode {
                _ if cas_mode => {
                    self.stats.cas_misses += 1;
                    return not(StoreOutcome::NotFound);
                }
                StoreMode::Add | StoreMode::Set => {}
                StoreMode::Append | StoreMode::Prepend if vivify_exptime.is_some() => {
                    hdr.exptime = vivify_exptime.unwrap_or(0);
                }
                _ => return not(StoreOutcome::NotStored),
            }
            let cas = self.write_new(h, key, hdr, [value, &[]], now)?;
            return Ok(Stored {
                outcome: StoreOutcome::Stored,
                cas,
            });
        };
        let have = self.cas_of(&at.header);
        let cas_match = match opts.cas {
            None | Some(0) => None,
            Some(c) => Some(c == have),
        };
        match opts.mode {
            StoreMode::Add => {
                // memcached bumps the existing item on a failed add.
                self.set_bits(e, at.header.bits | VISITED);
                return not(StoreOutcome::NotStored);
            }
            _ if cas_mode => {
                // Per class: the class of the item replaced or kept, as memcached's old_it.
                let old_len = at.header.logical_len();
                if cas_match == Some(true) {
                    self.stats.cas_hits += 1;
                    self.class_counters(old_len).cas_hits += 1;
                } else if opts.invalidate && opts.cas.is_some_and(|c| c != 0 && c < have) {
                    // A late writer with an older version: accepted, but readers are told
                    // the value is stale; the TTL and any handed-out win token carry over.
                    self.stats.cas_hits += 1;
                    self.class_counters(old_len).cas_hits += 1;
                    hdr.bits |= STALE | (at.header.bits & WIN_SENT);
                    hdr.exptime = at.header.exptime;
                } else {
                    self.stats.cas_badval += 1;
                    self.class_counters(old_len).cas_badval += 1;
                    return not(StoreOutcome::Exists);
                }
            }
            StoreMode::Set | StoreMode::Replace => {}
            StoreMode::Append | StoreMode::Prepend => {
                if cas_match == Some(false) {
                    return not(StoreOutcome::Exists);
                }
                let joined = at.header.vlen as usize + value.len();
                // memcached allocates the joined item with one byte more than a set of the
                // same length would, and answers NOT_STORED when that does not fit.
                if !item_fits(
                    self.cfg.item_size_max,
                    key.len(),
                    joined + 1,
                    at.header.flags,
                ) {
                    return not(StoreOutcome::NotStored);
                }
                hdr.flags = at.header.flags;
                hdr.exptime = at.header.exptime;
                let mut scratch = std::mem::take(&mut self.scratch);
                scratch.clear();
                scratch.extend_from_slice(self.value_of(e, &at));
                let parts: [&[u8]; 2] = if opts.mode == StoreMode::Append {
                    [&scratch, value]
                } else {
                    [value, &scratch]
                };
                let r = self.write_new(h, key, hdr, parts, now);
                self.scratch = scratch;
                return r.map(|cas| Stored {
                    outcome: StoreOutcome::Stored,
                    cas,
                });
            }
        }
        let cas = self.write_new(h, key, hdr, [value, &[]], now)?;
        Ok(Stored {
            outcome: StoreOutcome::Stored,
            cas,
        })
    }

    /// Removes a key if present, with no statistics: the aftermath of a failed `set`.
    pub fn drop_key(&mut self, h: u64, key: &[u8], now: u32) {
        if let Found::Live(e, at) = self.lookup(h, key, now) {
            self.unlink(h, e, &at, false);
        }
    }

    /// `delete` and `md`.
    pub fn delete(
        &mut self,
        h: u64,
        key: &[u8],
        opts: &DeleteOptions,
        stale_exptime: Option<u32>,
        now: u32,
    ) -> Result<DeleteOutcome> {
        let Found::Live(e, at) = self.lookup(h, key, now) else {
            self.stats.delete_misses += 1;
            return Ok(DeleteOutcome::NotFound);
        };
        if let Some(want) = opts.cas
            && want != self.cas_of(&at.header)
        {
            self.stats.delete_misses += 1;
            return Ok(DeleteOutcome::Exists);
        }
        if opts.remove_value {
            // `x`: an empty tombstone in place of the value, same CAS unless `E` says.
            let hdr = Header {
                exptime: stale_exptime.unwrap_or(0),
                ext_cas: Some(opts.new_cas.unwrap_or(self.cas_of(&at.header))),
                ..Header::default()
            };
            self.write_new(h, key, hdr, [&[], &[]], now)?;
        }
        if opts.invalidate {
            let Some(e) = self.find(h, key) else {
                return Ok(DeleteOutcome::NotFound);
            };
            let new_cas = opts.new_cas;
            self.rewrite(h, key, e, now, |hdr, seq| {
                if let Some(t) = stale_exptime {
                    hdr.exptime = t;
                }
                hdr.bits = (hdr.bits | STALE) & !WIN_SENT;
                hdr.seq = seq;
                hdr.ext_cas = new_cas;
            })?;
            return Ok(DeleteOutcome::Deleted);
        }
        self.stats.delete_hits += 1;
        self.class_counters(at.header.logical_len()).delete_hits += 1;
        if !opts.remove_value {
            self.unlink(h, e, &at, false);
        }
        Ok(DeleteOutcome::Deleted)
    }

    /// `incr`/`decr`/`ma`.
    pub fn arithmetic(
        &mut self,
        h: u64,
        key: &[u8],
        opts: &ArithOptions,
        ttl_exptime: Option<u32>,
        t: Times,
    ) -> Result<ArithOutcome> {
        let Times {
            vivify: vivify_exptime,
            now,
            ..
        } = t;
        let incr = opts.mode == ArithMode::Incr;
        let miss = |s: &mut Self| {
            if incr {
                s.stats.incr_misses += 1;
            } else {
                s.stats.decr_misses += 1;
            }
        };
        let Found::Live(e, at) = self.lookup(h, key, now) else {
            miss(self);
            let (Some((initial, _)), Some(exp)) = (opts.vivify, vivify_exptime) else {
                return Ok(ArithOutcome::NotFound);
            };
            let digits = initial.to_string();
            // `T` on a vivified counter overrides `N`'s TTL.
            let exp = ttl_exptime.unwrap_or(exp);
            let hdr = Header {
                exptime: exp,
                ext_cas: opts.new_cas,
                ..Header::default()
            };
            let cas = self.write_new(h, key, hdr, [digits.as_bytes(), &[]], now)?;
            return Ok(ArithOutcome::Value {
                value: initial,
                cas,
                ttl: remaining(exp, now),
            });
        };
        let value = self.value_of(e, &at);
        // memcached refuses empty values and chunked items (over half the item size limit)
        // before looking at the CAS or the digits.
        let chunked = !item_fits(
            self.cfg.item_size_max / 2,
            key.len(),
            value.len(),
            at.header.flags,
        );
        if value.is_empty() || chunked {
            return Ok(ArithOutcome::NonNumeric);
        }
        if opts
            .cas
            .is_some_and(|c| c != 0 && c != self.cas_of(&at.header))
        {
            return Ok(ArithOutcome::Exists);
        }
        let old_len = value.len();
        let Some(old) = numeric::parse_u64(value) else {
            return Ok(ArithOutcome::NonNumeric);
        };
        let class = &mut self.classes[class_of(&self.cfg.class_sizes, at.header.logical_len())];
        let new = if incr {
            self.stats.incr_hits += 1;
            class.counters.incr_hits += 1;
            old.wrapping_add(opts.delta)
        } else {
            self.stats.decr_hits += 1;
            class.counters.decr_hits += 1;
            old.saturating_sub(opts.delta)
        };
        let mut digits = std::mem::take(&mut self.scratch);
        numeric::render(new, old_len, &mut digits);
        // When the digits fit, memcached rewrites in place: padded, keeping the item's
        // stale/win/fetched marks. A longer number is a new item without them.
        let in_place = digits.len() == old_len;
        let hdr = Header {
            bits: if in_place {
                at.header.bits & (FETCHED | STALE | WIN_SENT)
            } else {
                0
            },
            flags: at.header.flags,
            exptime: ttl_exptime.unwrap_or(at.header.exptime),
            ext_cas: opts.new_cas,
            ..Header::default()
        };
        let r = self.write_new(h, key, hdr, [&digits, &[]], now);
        self.scratch = digits;
        let cas = r?;
        Ok(ArithOutcome::Value {
            value: new,
            cas,
            ttl: remaining(hdr.exptime, now),
        })
    }

    /// Visits every live item (for `lru_crawler metadump`), oldest segments first.
    pub fn for_each_live(&self, now: u32, f: &mut ItemVisitor<'_>) {
        let order = self
            .small
            .iter()
            .chain(self.main.iter())
            .chain(self.small_head.iter());
        for &s in order.chain(self.main_head.iter()) {
            let seg = &self.segs[s as usize];
            let mut off = 0;
            while off < seg.write_pos as usize {
                let at = read_item(seg.bytes(), off, seg.base_seq);
                let key = at.key(seg.bytes());
                let h = self.hasher.hash_one(key);
                let e = pack(s, off);
                if self.index.find(h, |&x| x == e).is_some() && self.dead(&at.header, now).is_none()
                {
                    f(
                        key,
                        &at.header,
                        self.cas_of(&at.header),
                        now.saturating_sub(seg.created),
                    );
                }
                off += at.len;
            }
        }
    }
}

fn ttl_of(exptime: u32, now: u32) -> Ttl {
    match remaining(exptime, now) {
        None => Ttl::Never,
        Some(s) => Ttl::Secs(s),
    }
}

fn remaining(exptime: u32, now: u32) -> Option<u32> {
    (exptime != 0).then(|| exptime.saturating_sub(now))
}
