//! SIEVE (Zhang et al., NSDI'24) over segments.
//!
//! SIEVE keeps one FIFO queue and a hand. A hit sets the item's visited bit. To evict, the
//! hand moves from the tail (oldest) toward the head (newest): a visited item has its bit
//! cleared and stays where it is, the first unvisited item is evicted, and after the newest
//! item the hand goes back to the tail. New items arrive at the head, so the hand reaches an
//! unused newcomer within one lap (quick demotion), while an item in use is never moved
//! (lazy promotion).
//!
//! Memory here comes back a whole segment at a time, so the adaptation is:
//! - The queue holds sealed segments, oldest first; new items are appended to the write head,
//!   which is sealed at the newest end of the queue when it fills.
//! - The hand points at a segment. Emptying it takes its items oldest first, as the hand
//!   would pass them one by one: a visited item is kept with its bit cleared, an unvisited
//!   one is dropped. One step of the hand drops every unvisited item of the segment, not
//!   only the first: that is the unit of memory, and the eviction stops part way through
//!   when a write needs only a little room (see `Segment::evict_pos`).
//! - A kept item cannot stay in the segment's bytes, which must be emptied, so it is copied
//!   into the keep head, an open segment that belongs right behind the hand: the place in
//!   the order the item had, so it is examined again only after a full lap, as in SIEVE.
//!   Consecutive victims share one keep head until it fills; it joins the queue at the
//!   hand when a fresh one replaces it or the hand wraps to the oldest segment. Until then
//!   it is a head, out of the queue, like the write head (and like S3-FIFO's main head):
//!   compaction never picks an open head, whose copy would only fill another.
//! - Compaction (a sparse segment emptied keeping every live item, see `evict.rs`) copies
//!   into the same keep head. It only runs while dead bytes, not live data, fill the shard,
//!   so nothing is being evicted and the order it shifts is not in use.
//! - One bit: `HOT` is never set, and there is no ghost.
//!
//! With one item per segment this is SIEVE exactly (a test below replays a trace against an
//! item-level SIEVE and compares the evictions).

use std::collections::VecDeque;

use super::{Policy, Victim};
use crate::segment::{HOT, VISITED};

/// SIEVE's queue of segments, its hand and its heads.
///
/// Invariants: `hand <= queue.len()`, and `hand == queue.len()` only while a victim taken
/// from the newest end is out; the keep head, when open, goes in at `hand` when closed.
#[derive(Debug, Default)]
pub(crate) struct Sieve {
    /// Sealed segments, oldest first.
    queue: VecDeque<u32>,
    /// The index in `queue` of the next segment the hand examines.
    hand: usize,
    /// Where new items are written.
    head: Option<u32>,
    /// Where kept items are copied; it belongs right behind the hand.
    keep: Option<u32>,
}

impl Sieve {
    /// The keep head joins the queue behind the hand.
    fn close_keep(&mut self) {
        if let Some(k) = self.keep.take() {
            self.queue.insert(self.hand, k);
            self.hand += 1;
        }
    }

    /// Past the newest segment the hand goes back to the oldest.
    fn settle(&mut self) {
        if self.hand >= self.queue.len() {
            self.close_keep();
            self.hand = 0;
        }
    }
}

impl Policy for Sieve {
    fn on_insert(&mut self, _h: u64) -> u8 {
        0
    }

    #[inline]
    fn on_access(&self, bits: u8) -> u8 {
        bits | VISITED
    }

    #[inline]
    fn write_head(&self) -> Option<u32> {
        self.head
    }

    fn seal_write_head(&mut self) {
        if let Some(old) = self.head.take() {
            self.queue.push_back(old);
        }
    }

    fn open_write_head(&mut self, fresh: u32) {
        if let Some(old) = self.head.replace(fresh) {
            self.queue.push_back(old);
        }
    }

    #[inline]
    fn keep_head(&self) -> Option<u32> {
        self.keep
    }

    fn open_keep_head(&mut self, fresh: u32) {
        self.close_keep();
        self.keep = Some(fresh);
    }

    fn next_victim(&mut self) -> Option<Victim> {
        self.settle();
        if self.queue.is_empty() {
            // Nothing sealed (the keep head would have been): the write head is all there is.
            self.queue.push_back(self.head.take()?);
        }
        let seg = self.queue.remove(self.hand)?;
        Some(Victim { seg, queue: 0 })
    }

    #[inline]
    fn decide(&mut self, _victim: &Victim, bits: u8) -> Option<u8> {
        (bits & VISITED != 0).then_some(bits & !(VISITED | HOT))
    }

    fn on_evicted(&mut self, _victim: &Victim, _h: u64) {}

    fn emptied(&mut self, _victim: &Victim) {
        self.settle();
    }

    /// Back under the hand, which examines it next. (A compaction victim comes back only
    /// when no-evict mode could not move an item, where the order does not matter.)
    fn put_back(&mut self, victim: Victim) {
        self.queue.insert(self.hand, victim.seg);
    }

    #[inline]
    fn sealed_len(&self) -> usize {
        self.queue.len()
    }

    #[inline]
    fn sealed_at(&self, i: usize) -> u32 {
        self.queue[i]
    }

    fn sealed_slices(&self) -> [&[u32]; 4] {
        let (a, b) = self.queue.as_slices();
        [a, b, &[], &[]]
    }

    fn take_sealed(&mut self, i: usize) -> Victim {
        let seg = self.queue.remove(i).expect("a sealed segment's index");
        if i < self.hand {
            self.hand -= 1;
        }
        self.settle();
        Victim { seg, queue: 0 }
    }

    fn heads(&self) -> [Option<u32>; 2] {
        [self.head, self.keep]
    }

    fn tails(&self) -> [Option<u32>; 2] {
        [self.queue.front().copied(), None]
    }

    fn bytes(&self) -> usize {
        0
    }

    fn bytes_for(&self, _capacity: usize) -> usize {
        0
    }

    fn resize(&mut self, _capacity: usize) {}
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// Segments `ids` sealed in that order; the write head is left open and empty.
    fn sealed(ids: &[u32]) -> Sieve {
        let mut p = Sieve::default();
        for &s in ids {
            p.open_write_head(s);
        }
        p.open_write_head(999);
        p
    }

    #[test]
    fn the_hand_goes_oldest_to_newest_and_survivors_keep_their_place() {
        let mut p = sealed(&[1, 2, 3]);
        let a = p.next_victim().unwrap();
        assert_eq!(a.seg, 1, "the oldest first");
        // Something in 1 was visited: it is kept behind the hand, in 1's place.
        assert_eq!(p.decide(&a, VISITED), Some(0));
        p.open_keep_head(10);
        p.emptied(&a);
        assert_eq!(p.keep_head(), Some(10));
        let b = p.next_victim().unwrap();
        assert_eq!(b.seg, 2);
        p.emptied(&b);
        // A new write head seals 999 while the hand is on its way: ahead of the hand, it is
        // examined this lap.
        p.open_write_head(4);
        let order: Vec<u32> = (0..3)
            .map(|_| {
                let v = p.next_victim().unwrap();
                p.emptied(&v);
                v.seg
            })
            .collect();
        // 3, then 999 (sealed when 4 became the head), then the survivors' segment; 4 is the
        // open write head, which the hand never takes while anything is sealed.
        assert_eq!(
            order,
            vec![3, 999, 10],
            "survivors come round after the newest"
        );
        assert_eq!(p.keep_head(), None, "the wrap closed the keep head");
    }

    #[test]
    fn a_partly_emptied_victim_is_resumed_first() {
        let mut p = sealed(&[1, 2]);
        let v = p.next_victim().unwrap();
        p.open_keep_head(10);
        p.put_back(v);
        assert_eq!(p.next_victim().unwrap().seg, 1);
        assert_eq!((p.sealed_at(0), p.keep_head()), (2, Some(10)));
    }

    #[test]
    fn taking_a_sealed_segment_keeps_the_hand_on_the_same_one() {
        let mut p = sealed(&[1, 2, 3, 4]);
        for keep in [10, 11] {
            let v = p.next_victim().unwrap();
            p.open_keep_head(keep);
            p.emptied(&v);
        }
        // 10 was closed behind the hand when 11 replaced it: 10, [hand] 3, 4; 11 open.
        assert_eq!((p.sealed_len(), p.sealed_at(0)), (3, 10));
        assert_eq!(p.take_sealed(0).seg, 10);
        assert_eq!(p.take_sealed(1).seg, 4);
        assert_eq!(p.next_victim().unwrap().seg, 3);
        assert_eq!(
            p.heads(),
            [Some(999), Some(11)],
            "open heads are never sealed"
        );
    }

    /// Item-level SIEVE as the paper gives it: a list oldest first and a hand index.
    struct Reference {
        order: Vec<u32>,
        visited: HashMap<u32, bool>,
        hand: usize,
    }

    impl Reference {
        fn evict(&mut self) -> u32 {
            loop {
                if self.hand >= self.order.len() {
                    self.hand = 0;
                }
                let k = self.order[self.hand];
                if std::mem::take(self.visited.get_mut(&k).unwrap()) {
                    self.hand += 1;
                } else {
                    self.order.remove(self.hand);
                    self.visited.remove(&k);
                    // Past the newest item the hand goes back to the oldest, before the
                    // newcomer this eviction makes room for arrives.
                    if self.hand == self.order.len() {
                        self.hand = 0;
                    }
                    return k;
                }
            }
        }
    }

    /// The segment policy driven as a shard drives it, one item per segment: each write
    /// goes to an empty write head that the next write seals, each kept item to a fresh keep
    /// head.
    struct OnePerSegment {
        p: Sieve,
        item: HashMap<u32, u32>,
        bits: HashMap<u32, u8>,
        next_seg: u32,
    }

    impl OnePerSegment {
        fn fresh(&mut self) -> u32 {
            self.next_seg += 1;
            self.next_seg
        }

        fn insert(&mut self, k: u32) {
            let head = self.p.write_head().unwrap();
            self.item.insert(head, k);
            self.bits.insert(k, self.p.on_insert(u64::from(k)));
            let s = self.fresh();
            self.p.open_write_head(s);
        }

        fn evict(&mut self) -> u32 {
            loop {
                let v = self.p.next_victim().unwrap();
                let k = self.item.remove(&v.seg).unwrap();
                match self.p.decide(&v, self.bits[&k]) {
                    Some(b) => {
                        let s = self.fresh();
                        self.p.open_keep_head(s);
                        self.item.insert(s, k);
                        self.bits.insert(k, b);
                        self.p.emptied(&v);
                    }
                    None => {
                        self.p.on_evicted(&v, u64::from(k));
                        self.p.emptied(&v);
                        self.bits.remove(&k);
                        return k;
                    }
                }
            }
        }
    }

    #[test]
    fn with_one_item_per_segment_it_evicts_what_item_level_sieve_evicts() {
        let mut reference = Reference {
            order: vec![],
            visited: HashMap::new(),
            hand: 0,
        };
        let mut segs = OnePerSegment {
            p: Sieve::default(),
            item: HashMap::new(),
            bits: HashMap::new(),
            next_seg: 0,
        };
        segs.p.open_write_head(0);
        let capacity = 50;
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let (mut hits, mut evictions) = (0, 0);
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Skewed keys: a few hot ones, a long tail.
            let k = ((x % 1000) * (x % 1000) / 1000 % 200) as u32;
            if let Some(v) = reference.visited.get_mut(&k) {
                hits += 1;
                *v = true;
                let b = segs
                    .bits
                    .get_mut(&k)
                    .expect("both caches hold the same keys");
                *b = segs.p.on_access(*b);
                continue;
            }
            if reference.order.len() == capacity {
                evictions += 1;
                assert_eq!(segs.evict(), reference.evict(), "eviction {evictions}");
            }
            reference.order.push(k);
            reference.visited.insert(k, false);
            segs.insert(k);
        }
        assert!(
            hits > 5_000 && evictions > 5_000,
            "{hits} hits, {evictions} evictions"
        );
    }
}
