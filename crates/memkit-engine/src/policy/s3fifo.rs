//! S3-FIFO (Yang et al., SOSP'23) at segment granularity.
//!
//! - New items are written to the *small* queue's head segment.
//! - When the small queue holds more than a tenth of the sealed segments, its oldest segment
//!   is the victim: items read since they were written (`VISITED`) are promoted to the
//!   *main* queue's head segment, the rest — mostly one-hit wonders — are dropped and
//!   remembered in the [`Ghost`].
//! - Otherwise the oldest *main* segment is the victim: visited items are reinserted at the
//!   main head with one access spent (a CLOCK lap), the rest are dropped. An item read twice
//!   since its last move (`HOT`) earns two laps: S3-FIFO's access counter, capped at 2.
//! - A new key the ghost remembers (dropped by probation lately, wanted again) starts with
//!   `VISITED` set, so its first eviction promotes it instead of failing it a second time.
//!
//! The small queue is the write head's queue and main the keep head's: promotion and
//! reinsertion are both "copy to the keep head".

use std::collections::VecDeque;

use super::ghost::Ghost;
use super::{Policy, Victim};
use crate::segment::{HOT, VISITED};

/// The small queue's share of the sealed segments is at most 1/`SMALL_SHARE`, S3-FIFO's
/// tenth. 1/25 missed 0.3% less on both Zipf benches but cost 1.45x CPU per operation when
/// keys exceed memory (an in-process get-then-set loop over 2M keys in 64 MiB: 1002 vs 688
/// ns): more items dropped early come back through the ghost and are copied.
const SMALL_SHARE: usize = 10;

/// Ghost fingerprints for an index of `capacity` entries: 5/8 of an entry each, between 0.6
/// and 1.2 bytes an item as the table fills. Of 1/4 to 3/2, 5/8 missed least on the 32 MiB
/// Zipf trace.
fn ghost_slots(capacity: usize) -> usize {
    capacity * 5 / 8
}

/// One lap spent by a kept item: `HOT` (read again while visited) first, then `VISITED`.
fn spend_lap(bits: u8) -> u8 {
    if bits & HOT != 0 {
        bits & !HOT
    } else {
        bits & !VISITED
    }
}

/// [`Victim::queue`] of a small-queue segment.
const SMALL: u8 = 0;
/// [`Victim::queue`] of a main-queue segment.
const MAIN: u8 = 1;

/// S3-FIFO's queues of segments, heads and ghost.
#[derive(Debug, Default)]
pub(crate) struct S3Fifo {
    /// Sealed segments, oldest first: probation.
    small: VecDeque<u32>,
    /// Sealed segments, oldest first: items that earned a place.
    main: VecDeque<u32>,
    /// Where new items are written.
    small_head: Option<u32>,
    /// Where promoted and reinserted items are copied.
    main_head: Option<u32>,
    /// Keys the small queue dropped lately.
    ghost: Ghost,
}

impl S3Fifo {
    fn queue(&mut self, tag: u8) -> &mut VecDeque<u32> {
        if tag == SMALL {
            &mut self.small
        } else {
            &mut self.main
        }
    }
}

impl Policy for S3Fifo {
    fn on_insert(&mut self, h: u64) -> u8 {
        if self.ghost.take(h) { VISITED } else { 0 }
    }

    #[inline]
    fn on_access(&self, bits: u8) -> u8 {
        let again = if bits & VISITED != 0 { HOT } else { 0 };
        bits | VISITED | again
    }

    #[inline]
    fn write_head(&self) -> Option<u32> {
        self.small_head
    }

    fn seal_write_head(&mut self) {
        if let Some(old) = self.small_head.take() {
            self.small.push_back(old);
        }
    }

    fn open_write_head(&mut self, fresh: u32) {
        if let Some(old) = self.small_head.replace(fresh) {
            self.small.push_back(old);
        }
    }

    #[inline]
    fn keep_head(&self) -> Option<u32> {
        self.main_head
    }

    fn open_keep_head(&mut self, fresh: u32) {
        if let Some(old) = self.main_head.replace(fresh) {
            self.main.push_back(old);
        }
    }

    fn next_victim(&mut self) -> Option<Victim> {
        loop {
            let sealed = self.small.len() + self.main.len();
            let from_small = !self.small.is_empty()
                && (self.main.is_empty() || self.small.len() * SMALL_SHARE > sealed);
            let (seg, queue) = if from_small {
                (self.small.pop_front(), SMALL)
            } else {
                (self.main.pop_front(), MAIN)
            };
            if let Some(seg) = seg {
                return Some(Victim { seg, queue });
            }
            // Nothing sealed: the heads are all there is; seal them and go round again.
            if let Some(m) = self.main_head.take() {
                self.main.push_back(m);
            } else if let Some(h) = self.small_head.take() {
                self.small.push_back(h);
            } else {
                return None;
            }
        }
    }

    #[inline]
    fn decide(&mut self, _victim: &Victim, bits: u8) -> Option<u8> {
        (bits & VISITED != 0).then(|| spend_lap(bits))
    }

    fn on_evicted(&mut self, victim: &Victim, h: u64) {
        if victim.queue == SMALL {
            self.ghost.remember(h);
        }
    }

    fn emptied(&mut self, _victim: &Victim) {}

    fn put_back(&mut self, victim: Victim) {
        self.queue(victim.queue).push_front(victim.seg);
    }

    #[inline]
    fn sealed_len(&self) -> usize {
        self.small.len() + self.main.len()
    }

    #[inline]
    fn sealed_at(&self, i: usize) -> u32 {
        match i.checked_sub(self.small.len()) {
            None => self.small[i],
            Some(j) => self.main[j],
        }
    }

    fn sealed_slices(&self) -> [&[u32]; 4] {
        let (a, b) = self.small.as_slices();
        let (c, d) = self.main.as_slices();
        [a, b, c, d]
    }

    fn take_sealed(&mut self, i: usize) -> Victim {
        let (queue, j) = match i.checked_sub(self.small.len()) {
            None => (SMALL, i),
            Some(j) => (MAIN, j),
        };
        let seg = self
            .queue(queue)
            .remove(j)
            .expect("a sealed segment's index");
        Victim { seg, queue }
    }

    fn heads(&self) -> [Option<u32>; 2] {
        [self.small_head, self.main_head]
    }

    fn tails(&self) -> [Option<u32>; 2] {
        [self.small.front().copied(), self.main.front().copied()]
    }

    fn bytes(&self) -> usize {
        self.ghost.bytes()
    }

    fn bytes_for(&self, capacity: usize) -> usize {
        Ghost::bytes_for(ghost_slots(capacity))
    }

    fn resize(&mut self, capacity: usize) {
        self.ghost.grow_to(ghost_slots(capacity));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_gives_way_to_main_past_its_share_and_heads_seal_last() {
        let mut p = S3Fifo::default();
        assert_eq!(p.next_victim(), None, "no segment at all");
        for s in 0..3 {
            p.open_write_head(s);
        }
        for s in 10..30 {
            p.open_keep_head(s);
        }
        // small: 0, 1 (2 is the head); main: 10..=28 (29 is the head). 2 of 21 sealed is
        // under a tenth: main's oldest goes first.
        assert_eq!(p.sealed_len(), 21);
        assert_eq!(
            p.next_victim(),
            Some(Victim {
                seg: 10,
                queue: MAIN
            })
        );
        for s in 3..6 {
            p.open_write_head(s);
        }
        // small: 0..=4 of 23 sealed, over a tenth.
        let v = p.next_victim().unwrap();
        assert_eq!(
            v,
            Victim {
                seg: 0,
                queue: SMALL
            }
        );
        p.put_back(v);
        assert_eq!(p.sealed_at(0), 0, "put back at the front of its queue");
        assert_eq!(
            p.take_sealed(5),
            Victim {
                seg: 11,
                queue: MAIN
            }
        );
        // Drain: the heads are sealed and handed out last.
        let mut order = vec![];
        while let Some(v) = p.next_victim() {
            order.push(v.seg);
        }
        assert_eq!(order.len(), 5 + 17 + 2);
        assert_eq!(&order[order.len() - 2..], &[29, 5]);
        assert_eq!(p.heads(), [None, None]);
    }

    #[test]
    fn visited_items_are_kept_with_a_lap_spent_and_probation_drops_are_remembered() {
        let mut p = S3Fifo::default();
        p.resize(1000);
        let small = Victim {
            seg: 0,
            queue: SMALL,
        };
        let main = Victim {
            seg: 1,
            queue: MAIN,
        };
        assert_eq!(p.decide(&small, 0), None);
        assert_eq!(p.decide(&main, VISITED), Some(0));
        let twice = p.on_access(p.on_access(0));
        assert_eq!(twice, VISITED | HOT);
        assert_eq!(
            p.decide(&main, twice),
            Some(VISITED),
            "two laps for two reads"
        );
        p.on_evicted(&main, 7);
        assert_eq!(p.on_insert(7), 0, "main's drops are not remembered");
        p.on_evicted(&small, 7);
        assert_eq!(
            p.on_insert(7),
            VISITED,
            "a probation drop comes back visited"
        );
        assert_eq!(p.on_insert(7), 0, "once");
    }
}
