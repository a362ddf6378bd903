//! The hash index: key hash -> item location, one open-addressing table per shard.
//!
//! Robin Hood linear probing with backward-shift deletion. A bucket is five bytes: a 32-bit
//! word holding the item's location and a hash tag, and the entry's distance from its home
//! bucket plus one (zero marks an empty bucket).
//!
//! The word is split by the shard's [`Layout`]: a [`Loc`] names a segment (12 bits) and an
//! offset (20 bits), but a shard's segments are a power of two in size, usually 32 KiB (15
//! bits), and it has a few hundred of them (9 bits), so the location is stored in just the
//! bits it needs and the rest (up to 8) hold a tag. A probe compares a key in its segment
//! only for an entry whose distance says it shares our home bucket and whose tag matches:
//! with 8 tag bits, 1 in 256 such strangers. Shards of up to 8 MiB (memory up to 128 MiB)
//! keep 8 tag bits; the engine keeps shards at most 256 MiB, which leaves at least 3 up to
//! 64 GiB. (Without any, a lookup would compare the keys of the entries sharing its home:
//! under one on average at 7/8 full.) The tag shares the location's word rather than taking
//! a byte of its own, which would cost 1.2 bytes an item: 0.8% of the items at `-m 64`.
//!
//! Why not a SwissTable (hashbrown): a table that doubles sits anywhere between 44% and
//! 87.5% full, and a cache's table stops growing wherever its memory runs out; at the
//! bench's `-m` that is just past a doubling, where 12 of 17.5 bytes an item would be index.
//! This table grows in steps of an eighth (the home bucket is `hash * buckets >> 32`, so any
//! bucket count works) and therefore always sits between 78% and 87.5% full. A SwissTable
//! grown in small steps (through a second table) leaves tombstones at high load, and the
//! rebuilds that clear them cost 1.2x CPU per operation under churn. Backward-shift deletion
//! leaves none: a removal moves the following run of displaced entries one bucket back, so
//! the table never needs cleaning, only growing.
//!
//! Growth rehashes every entry by reading its key (the table keeps no full hashes: that
//! would be four more bytes a bucket). Growing by an eighth means about nine key reads an
//! item over a fill from empty, and none once the cache is full and evicting.
//!
//! Entries whose hashes share their low 32 bits share a home in a table of any size, so no
//! growth separates them, and more than [`MAX_DIST`] of them cannot all have a bucket. The
//! seeded hash makes that a matter of chance (none below billions of items), but the table
//! does not rely on it: an insert grows it past what its load needs only while it has fewer
//! than [`MAX_BUCKETS_PER_ENTRY`] buckets an entry, and past that hands back the entry left
//! without a bucket, which the shard then drops as an eviction.

use crate::arena::{Loc, MAX_SEGMENT_SIZE, MAX_SEGMENTS, off_of, pack, prefetch_line, seg_of};

/// A bucket: [`Layout`]'s word and the distance from the home bucket plus one (0: empty).
#[derive(Clone, Copy, Default, Debug)]
#[repr(C, packed)]
struct Slot {
    word: u32,
    dist: u8,
}

/// The largest `dist` stored: an insert that would displace an entry further grows the
/// table instead (with a seeded 64-bit hash this does not happen below 7/8 full).
const MAX_DIST: u8 = 254;

/// Tables this small double; larger ones grow by an eighth.
const DOUBLE_BELOW: usize = 1024;

/// A crowded home grows the table only while it has fewer buckets than this an entry: at
/// 7/8 full a table has 8/7, so crowding may cost up to 3.5 times the table's usual size
/// (and 20 bytes an entry), but never more.
const MAX_BUCKETS_PER_ENTRY: usize = 4;

/// The low `bits` bits.
fn mask(bits: u32) -> u32 {
    if bits >= 32 {
        u32::MAX
    } else {
        (1 << bits) - 1
    }
}

/// How a bucket's word splits: the segment id above the offset, each as wide as the shard
/// needs, and up to 8 bits of tag above both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    off_bits: u32,
    seg_bits: u32,
}

impl Default for Layout {
    /// Any [`Loc`], and no tag.
    fn default() -> Self {
        Layout::new(MAX_SEGMENT_SIZE, MAX_SEGMENTS)
    }
}

impl Layout {
    /// For segments of `seg_size` bytes with ids below `segments`.
    pub fn new(seg_size: usize, segments: usize) -> Layout {
        let bits = |n: usize| usize::BITS - n.saturating_sub(1).leading_zeros();
        Layout {
            off_bits: bits(seg_size.clamp(2, MAX_SEGMENT_SIZE)),
            seg_bits: bits(segments.clamp(2, MAX_SEGMENTS)),
        }
    }

    /// Segment ids this layout can name.
    pub fn max_segments(self) -> usize {
        1 << self.seg_bits
    }

    fn loc_bits(self) -> u32 {
        self.off_bits + self.seg_bits
    }

    fn tag_bits(self) -> u32 {
        (32 - self.loc_bits()).min(8)
    }

    /// The tag of a hash: its bits 48 and up (the shard was picked from bits 32 and up, the
    /// ghost's fingerprint is the top byte), as many as fit.
    fn tag(self, h: u64) -> u32 {
        (h >> 48) as u32 & mask(self.tag_bits())
    }

    fn word(self, loc: Loc, tag: u32) -> u32 {
        debug_assert!(
            (seg_of(loc) as usize) < self.max_segments() && off_of(loc) < 1 << self.off_bits,
            "{loc:#x} does not fit {self:?}"
        );
        let packed = (seg_of(loc) << self.off_bits) | off_of(loc) as u32;
        if self.tag_bits() == 0 {
            packed
        } else {
            packed | (tag << self.loc_bits())
        }
    }

    fn loc(self, word: u32) -> Loc {
        let packed = word & mask(self.loc_bits());
        pack(
            packed >> self.off_bits,
            (packed & mask(self.off_bits)) as usize,
        )
    }

    fn tag_of(self, word: u32) -> u32 {
        word.checked_shr(self.loc_bits()).unwrap_or(0)
    }
}

#[derive(Debug, Default)]
pub(crate) struct Index {
    slots: Box<[Slot]>,
    len: usize,
    layout: Layout,
}

/// Home bucket of a hash, from its low 32 bits.
fn home(h: u64, buckets: usize) -> usize {
    ((u64::from(h as u32) * buckets as u64) >> 32) as usize
}

/// Entries a table of `buckets` buckets takes before it has to grow: 7/8 of them.
fn capacity_of(buckets: usize) -> usize {
    buckets / 8 * 7
}

/// Buckets of the table after the one with `buckets`.
fn grown(buckets: usize) -> usize {
    if buckets < DOUBLE_BELOW {
        (buckets * 2).max(16)
    } else {
        (buckets + buckets / 8).next_multiple_of(8)
    }
}

fn table_bytes(buckets: usize) -> usize {
    buckets * size_of::<Slot>()
}

impl Index {
    /// An empty index whose buckets are split by `layout`.
    pub fn new(layout: Layout) -> Index {
        Index {
            layout,
            ..Index::default()
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Re-encodes every bucket for a layout with room for more segments (the shard's budget
    /// grew). Homes do not move and the narrower tag is the old one's low bits, so no key is
    /// read.
    pub fn relayout(&mut self, to: Layout) {
        let from = self.layout;
        debug_assert!(to.off_bits == from.off_bits && to.seg_bits >= from.seg_bits);
        for s in self.slots.iter_mut().filter(|s| s.dist != 0) {
            let w = s.word;
            s.word = to.word(from.loc(w), from.tag_of(w) & mask(to.tag_bits()));
        }
        self.layout = to;
    }

    /// Bytes the table holds.
    pub fn bytes(&self) -> usize {
        table_bytes(self.slots.len())
    }

    /// Entries the table takes before the next [`Self::grow`].
    pub fn capacity(&self) -> usize {
        capacity_of(self.slots.len())
    }

    /// Entries a table of at most `bytes` bytes takes.
    pub fn capacity_within(bytes: usize) -> usize {
        capacity_of(bytes / size_of::<Slot>())
    }

    /// Whether one more entry fits without [`Self::grow`].
    pub fn has_room(&self) -> bool {
        self.len < self.capacity()
    }

    /// Bytes and capacity of the table [`Self::grow`] will leave, so that they can be found
    /// in the budget before they are allocated.
    pub fn next_bytes_and_capacity(&self) -> (usize, usize) {
        let b = grown(self.slots.len());
        (table_bytes(b), capacity_of(b))
    }

    /// Moves every entry to a larger table, as [`Self::next_bytes_and_capacity`] says.
    /// `rehash` gives an entry's full hash (by reading its key). Returns the entries left
    /// without a bucket (see [`Self::insert`]): none unless a home is crowded.
    #[must_use]
    pub fn grow(&mut self, rehash: impl Fn(&Loc) -> u64) -> Vec<Loc> {
        self.rebuild(grown(self.slots.len()), &rehash, None)
    }

    /// Every entry's location, in bucket order.
    pub fn locs(&self) -> impl Iterator<Item = Loc> + '_ {
        let layout = self.layout;
        self.slots
            .iter()
            .filter(|s| s.dist != 0)
            .map(move |s| layout.loc(s.word))
    }

    // ---- the home order, for a crawl (`shard/crawl.rs`) ----

    /// Buckets in the table.
    pub fn buckets(&self) -> usize {
        self.slots.len()
    }

    /// The entry in bucket `i`, if any, and how many buckets past its home it sits.
    pub fn entry_at(&self, i: usize) -> Option<(usize, Loc)> {
        let s = self.slots[i];
        (s.dist != 0).then(|| (usize::from(s.dist - 1), self.layout.loc(s.word)))
    }

    /// The home bucket of the hashes whose low 32 bits are `low`.
    pub fn home_of(&self, low: u32) -> usize {
        home(u64::from(low), self.slots.len())
    }

    /// The least low 32 bits of a hash whose home is bucket `b` (of a table that has it):
    /// homes follow the low 32 bits in order, whatever the table's size.
    pub fn first_low_of(&self, b: usize) -> u32 {
        let n = self.slots.len() as u128;
        debug_assert!((b as u128) < n);
        ((b as u128) << 32).div_ceil(n) as u32
    }

    /// Grows an empty index in one step to the table that growing one step at a time would
    /// reach to hold `entries`: a warm restart sizes its shards up front instead of
    /// rehashing every key about nine times on the way.
    pub fn reserve(&mut self, entries: usize) {
        debug_assert_eq!(self.len, 0, "reserve is for an empty index");
        let mut buckets = self.slots.len();
        while capacity_of(buckets) < entries {
            buckets = grown(buckets);
        }
        if buckets > self.slots.len() {
            self.slots = vec![Slot::default(); buckets].into_boxed_slice();
        }
    }

    /// Places every entry, and `extra`, in a table of `buckets`, or of more while a crowded
    /// home may grow it ([`MAX_BUCKETS_PER_ENTRY`]; `self.len` counts `extra`). Returns the
    /// entries left without a bucket past that, no longer counted.
    fn rebuild(
        &mut self,
        mut buckets: usize,
        rehash: &impl Fn(&Loc) -> u64,
        extra: Option<Loc>,
    ) -> Vec<Loc> {
        let old = std::mem::take(&mut self.slots);
        let layout = self.layout;
        'retry: loop {
            self.slots = vec![Slot::default(); buckets].into_boxed_slice();
            let entries = old
                .iter()
                .filter(|s| s.dist != 0)
                .map(|s| layout.loc(s.word));
            let mut left = Vec::new();
            for loc in entries.chain(extra) {
                if let Err(out) = self.place(rehash(&loc), loc) {
                    if self.may_grow_for_crowding(buckets) {
                        buckets = grown(buckets);
                        continue 'retry;
                    }
                    left.push(out);
                }
            }
            self.len -= left.len();
            return left;
        }
    }

    /// Whether a crowded home may still grow a table of `buckets` buckets.
    fn may_grow_for_crowding(&self, buckets: usize) -> bool {
        buckets < self.len.saturating_mul(MAX_BUCKETS_PER_ENTRY)
    }

    /// Robin Hood insertion: an entry takes the bucket of any it meets that sits nearer its
    /// own home, and that one moves on. `Err` hands back the entry left without a bucket when
    /// a distance would pass [`MAX_DIST`].
    fn place(&mut self, h: u64, loc: Loc) -> Result<(), Loc> {
        let n = self.slots.len();
        let mut i = home(h, n);
        let mut cur = Slot {
            word: self.layout.word(loc, self.layout.tag(h)),
            dist: 1,
        };
        loop {
            let s = self.slots[i];
            if s.dist == 0 {
                self.slots[i] = cur;
                return Ok(());
            }
            if s.dist < cur.dist {
                self.slots[i] = cur;
                cur = s;
            }
            i = if i + 1 == n { 0 } else { i + 1 };
            if cur.dist == MAX_DIST {
                return Err(self.layout.loc(cur.word));
            }
            cur.dist += 1;
        }
    }

    /// The bucket of the entry `eq` picks. A probe stops at the first bucket whose entry is
    /// nearer its home than the probe is to ours: Robin Hood order says ours is not further on.
    fn position(&self, h: u64, eq: impl Fn(&Loc) -> bool) -> Option<usize> {
        let n = self.slots.len();
        if n == 0 {
            return None;
        }
        let layout = self.layout;
        let (mut i, tag) = (home(h, n), layout.tag(h));
        let mut d = 1u8;
        loop {
            let s = self.slots[i];
            if s.dist < d {
                return None;
            }
            if s.dist == d && layout.tag_of(s.word) == tag && eq(&layout.loc(s.word)) {
                return Some(i);
            }
            i = if i + 1 == n { 0 } else { i + 1 };
            // No entry is further than MAX_DIST from home, so `d` stops at MAX_DIST + 1,
            // where every bucket ends the probe.
            d += 1;
        }
    }

    /// Starts loading `h`'s home bucket into the cache, for a lookup or an insert soon after:
    /// independent prefetches overlap their cache misses.
    pub fn prefetch(&self, h: u64) {
        let n = self.slots.len();
        if n > 0 {
            prefetch_line(self.slots[home(h, n)..].as_ptr().cast());
        }
    }

    pub fn find(&self, h: u64, eq: impl Fn(&Loc) -> bool) -> Option<Loc> {
        self.position(h, eq)
            .map(|i| self.layout.loc(self.slots[i].word))
    }

    /// Points the entry `eq` picks at `to`; whether there was one.
    pub fn replace(&mut self, h: u64, eq: impl Fn(&Loc) -> bool, to: Loc) -> bool {
        match self.position(h, eq) {
            Some(i) => {
                self.slots[i].word = self.layout.word(to, self.layout.tag(h));
                true
            }
            None => false,
        }
    }

    /// Removes the entry `eq` picks; whether there was one. The displaced entries after it
    /// each move one bucket back (backward-shift deletion), so no tombstone is left.
    pub fn remove(&mut self, h: u64, eq: impl Fn(&Loc) -> bool) -> bool {
        let Some(mut i) = self.position(h, eq) else {
            return false;
        };
        let n = self.slots.len();
        loop {
            let j = if i + 1 == n { 0 } else { i + 1 };
            let mut s = self.slots[j];
            if s.dist <= 1 {
                self.slots[i] = Slot::default();
                break;
            }
            s.dist -= 1;
            self.slots[i] = s;
            i = j;
        }
        self.len -= 1;
        true
    }

    /// Adds an entry for a key not in the index. [`Self::has_room`] must hold. In the
    /// unlikely case that an entry would sit too far from home, the table grows here, past
    /// the bytes the shard made room for ([`Self::bytes`] says by how much), as far as
    /// [`MAX_BUCKETS_PER_ENTRY`] lets it; the entries still left without a bucket are
    /// returned (`e`, or one that `e` displaced), and the index no longer holds them.
    #[must_use]
    pub fn insert(&mut self, h: u64, e: Loc, rehash: impl Fn(&Loc) -> u64) -> Vec<Loc> {
        debug_assert!(self.has_room());
        self.len += 1;
        match self.place(h, e) {
            Ok(()) => Vec::new(),
            Err(left) if self.may_grow_for_crowding(self.slots.len()) => {
                self.rebuild(grown(self.slots.len()), &rehash, Some(left))
            }
            Err(left) => {
                self.len -= 1;
                vec![left]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// 24 bits of location (every id below 2^24 is one), 8 of tag.
    const TAGGED: Layout = Layout {
        off_bits: 20,
        seg_bits: 4,
    };

    #[test]
    fn layouts_fit_the_shard_and_round_trip() {
        let l = Layout::new(32 << 10, 256 + 3);
        assert_eq!((l.off_bits, l.seg_bits, l.tag_bits()), (15, 9, 8));
        assert_eq!(l.max_segments(), 512);
        let big = Layout::new(1 << 20, 2048 + 3);
        assert_eq!((big.loc_bits(), big.tag_bits()), (32, 0));
        assert_eq!(Layout::default(), Layout::new(1 << 20, 4096));
        let mid = Layout::new(256 << 10, 259);
        assert_eq!(mid.tag_bits(), 5);
        for layout in [l, big, mid, TAGGED] {
            let last_seg = layout.max_segments() as u32 - 1;
            let last_off = (1usize << layout.off_bits) - 1;
            for loc in [pack(0, 0), pack(last_seg, last_off), pack(last_seg / 2, 77)] {
                for h in [0u64, u64::MAX, 0x9E37_79B9_7F4A_7C15] {
                    let w = layout.word(loc, layout.tag(h));
                    assert_eq!(layout.loc(w), loc, "{layout:?}");
                    assert_eq!(layout.tag_of(w), layout.tag(h), "{layout:?}");
                }
            }
        }
    }

    // Locations are their own hashes here, mixed so that homes and tags vary.
    fn hash(e: &Loc) -> u64 {
        u64::from(*e).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    fn add_with(ix: &mut Index, e: Loc, h: fn(&Loc) -> u64) {
        if !ix.has_room() {
            let (bytes, cap) = ix.next_bytes_and_capacity();
            assert_eq!(ix.grow(h), []);
            assert_eq!(ix.bytes(), bytes);
            assert_eq!(ix.capacity(), cap);
        }
        assert_eq!(ix.insert(h(&e), e, h), []);
    }

    fn add(ix: &mut Index, e: Loc) {
        add_with(ix, e, hash);
    }

    /// Every entry is where Robin Hood order says: reachable from its home, at the distance
    /// its bucket records, no empty bucket between.
    fn check_invariants(ix: &Index, h: fn(&Loc) -> u64) {
        let n = ix.slots.len();
        let mut count = 0;
        for (i, s) in ix.slots.iter().enumerate() {
            if s.dist == 0 {
                continue;
            }
            count += 1;
            let loc = ix.layout.loc(s.word);
            assert_eq!(ix.layout.tag_of(s.word), ix.layout.tag(h(&loc)));
            let home = home(h(&loc), n);
            assert_eq!((home + s.dist as usize - 1) % n, i, "entry {loc}");
            let prev = ix.slots[(i + n - 1) % n];
            assert!(
                s.dist == 1 || prev.dist + 1 >= s.dist,
                "Robin Hood order at {i}"
            );
        }
        assert_eq!(count, ix.len);
    }

    #[test]
    fn grows_in_eighths_and_finds_everything() {
        let mut ix = Index::new(TAGGED);
        let mut sizes = vec![];
        for e in 0..100_000u32 {
            add(&mut ix, e);
            assert!(ix.len() <= ix.capacity());
            if sizes.last() != Some(&ix.slots.len()) {
                sizes.push(ix.slots.len());
            }
        }
        check_invariants(&ix, hash);
        // Doubling up to 1024 buckets, then an eighth at a time.
        assert_eq!(&sizes[..8], &[16, 32, 64, 128, 256, 512, 1024, 1152]);
        for w in sizes.windows(2).skip(7) {
            assert!(w[1] <= w[0] + w[0] / 8 + 8, "{w:?}");
        }
        let load = ix.len() as f64 / ix.slots.len() as f64;
        assert!((0.77..=0.875).contains(&load), "load {load}");
        for e in 0..100_000u32 {
            assert_eq!(ix.find(hash(&e), |&x| x == e), Some(e), "entry {e}");
        }
        assert_eq!(ix.find(hash(&300_000), |&x| x == 300_000), None);
    }

    #[test]
    fn removes_and_replaces() {
        let mut ix = Index::new(TAGGED);
        for e in 0..30_000u32 {
            add(&mut ix, e);
        }
        for e in (0..30_000u32).step_by(3) {
            assert!(ix.remove(hash(&e), |&x| x == e));
            assert!(!ix.remove(hash(&e), |&x| x == e), "removed once");
        }
        for e in (1..30_000u32).step_by(3) {
            assert!(ix.replace(hash(&e), |&x| x == e, e + 1_000_000));
        }
        assert!(!ix.replace(hash(&0), |&x| x == 0, 5), "a removed entry");
        assert_eq!(ix.len(), 20_000);
        for e in 0..30_000u32 {
            let got = ix.find(hash(&e), |&x| x == e || x == e + 1_000_000);
            let want = match e % 3 {
                0 => None,
                1 => Some(e + 1_000_000),
                _ => Some(e),
            };
            assert_eq!(got, want, "entry {e}");
        }
    }

    #[test]
    fn churn_at_full_load_neither_grows_nor_loses_entries() {
        // A full table has its entries replaced one by one, as a cache that evicts does:
        // removals leave no tombstones, so it never needs more room.
        let mut ix = Index::new(TAGGED);
        let mut e = 0u32;
        while ix.has_room() || ix.slots.len() < 4096 {
            add(&mut ix, e);
            e += 1;
        }
        let (bytes, live) = (ix.bytes(), e);
        for next in live..live + 200_000 {
            let old = next - live;
            assert!(ix.remove(hash(&old), |&x| x == old));
            assert!(ix.has_room());
            add(&mut ix, next);
        }
        assert_eq!(ix.bytes(), bytes);
        check_invariants(&ix, hash);
        for x in 200_000..200_000 + live {
            assert_eq!(ix.find(hash(&x), |&y| y == x), Some(x));
        }
    }

    #[test]
    fn relayout_for_more_segments_keeps_every_entry() {
        let mut ix = Index::new(TAGGED);
        for e in 0..50_000u32 {
            add(&mut ix, e * 300);
        }
        for to in [Layout::new(1 << 20, 1 << 10), Layout::default()] {
            let bytes = ix.bytes();
            ix.relayout(to);
            assert_eq!((ix.layout(), ix.bytes()), (to, bytes));
            check_invariants(&ix, hash);
            for e in 0..50_000u32 {
                assert_eq!(ix.find(hash(&(e * 300)), |&x| x == e * 300), Some(e * 300));
            }
        }
        // Segment ids the old layout could not name now fit.
        let far = pack(1000, 12_345);
        add(&mut ix, far);
        assert_eq!(ix.find(hash(&far), |&x| x == far), Some(far));
        assert!(ix.remove(hash(&0), |&x| x == 0));
        check_invariants(&ix, hash);
    }

    // Entries 0..1000 have the low half of their hashes squeezed into its lower half, so
    // their homes crowd the first half of the table: distances pass MAX_DIST, and the table
    // must grow to about twice what their number needs until they spread out.
    fn crowded(e: &Loc) -> u64 {
        (u64::from(*e) << 21) | (hash(e) & 0xFFFF_0000_0000_0000)
    }

    #[test]
    fn a_crowded_home_grows_the_table_and_keeps_every_entry() {
        let mut ix = Index::new(TAGGED);
        let mut forced = 0;
        for e in 0..1000u32 {
            if !ix.has_room() {
                assert_eq!(ix.grow(crowded), []);
            }
            let before = ix.bytes();
            assert_eq!(ix.insert(crowded(&e), e, crowded), [], "entry {e}");
            forced += usize::from(ix.bytes() != before);
        }
        assert!(forced > 0, "no insert had to grow the table");
        check_invariants(&ix, crowded);
        for e in 0..1000u32 {
            assert_eq!(ix.find(crowded(&e), |&x| x == e), Some(e));
        }
    }

    // Entries that share all 32 low bits of their hashes: one home in a table of any size.
    fn colliding(e: &Loc) -> u64 {
        (hash(e) & 0xFFFF_FFFF_0000_0000) | 0x1234_5678
    }

    #[test]
    fn entries_one_home_cannot_hold_are_handed_back_and_the_table_stays_bounded() {
        let mut ix = Index::new(TAGGED);
        let mut left = vec![];
        for e in 0..3000u32 {
            if !ix.has_room() {
                left.extend(ix.grow(colliding));
            }
            left.extend(ix.insert(colliding(&e), e, colliding));
            assert!(
                ix.slots.len() <= grown(MAX_BUCKETS_PER_ENTRY * ix.len()),
                "{} buckets for {} entries",
                ix.slots.len(),
                ix.len()
            );
        }
        // One home holds MAX_DIST entries; every later one is handed back as it comes.
        assert_eq!(ix.len(), usize::from(MAX_DIST));
        assert_eq!(left, (u32::from(MAX_DIST)..3000).collect::<Vec<_>>());
        check_invariants(&ix, colliding);
        for e in 0..u32::from(MAX_DIST) {
            assert_eq!(ix.find(colliding(&e), |&x| x == e), Some(e));
        }
        // A removal makes room for one more.
        assert!(ix.remove(colliding(&7), |&x| x == 7));
        assert_eq!(ix.insert(colliding(&5000), 5000, colliding), []);
        assert_eq!(ix.find(colliding(&5000), |&x| x == 5000), Some(5000));
        check_invariants(&ix, colliding);
    }

    #[test]
    fn agrees_with_a_map_under_random_operations() {
        // No tag (a shard too large for one), 2 bits, 8 bits.
        for layout in [Layout::default(), Layout::new(1 << 20, 1 << 10), TAGGED] {
            agrees_with_a_map(layout);
        }
    }

    fn agrees_with_a_map(layout: Layout) {
        // Few distinct homes (hashes share their low bits in groups), wrapping runs, and a
        // mix of inserts, removes and replaces, checked against a HashMap after every step.
        fn clustered(e: &Loc) -> u64 {
            let x = hash(&(*e % 4096));
            x ^ (u64::from(*e) << 40)
        }
        let mut ix = Index::new(layout);
        let mut model: HashMap<u32, u32> = HashMap::new();
        let mut rng = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        // Entries are their own ids while in the table; a replace adds 1 << 16 to the value
        // kept in the model only, so lookups use the id's hash.
        for step in 0..60_000 {
            let id = (next() % 6000) as u32;
            let h = clustered(&id);
            match next() % 3 {
                0 if !model.contains_key(&id) => {
                    if !ix.has_room() {
                        assert_eq!(ix.grow(|&x| clustered(&(x & 0xFFFF))), []);
                    }
                    assert_eq!(ix.insert(h, id, |&x| clustered(&(x & 0xFFFF))), []);
                    model.insert(id, id);
                }
                1 => {
                    let was = model.remove(&id);
                    assert_eq!(ix.remove(h, |&x| x & 0xFFFF == id), was.is_some());
                }
                _ => {
                    let to = id | ((step as u32 & 0x7F) << 16);
                    let had = model.contains_key(&id);
                    assert_eq!(ix.replace(h, |&x| x & 0xFFFF == id, to), had);
                    if had {
                        model.insert(id, to);
                    }
                }
            }
            assert_eq!(ix.len(), model.len());
            if step % 5000 == 0 {
                for (&k, &v) in &model {
                    assert_eq!(ix.find(clustered(&k), |&x| x & 0xFFFF == k), Some(v));
                }
            }
        }
        for id in 0..6000u32 {
            let got = ix.find(clustered(&id), |&x| x & 0xFFFF == id);
            assert_eq!(got, model.get(&id).copied(), "id {id}");
        }
    }
}
