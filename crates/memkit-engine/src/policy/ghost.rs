//! S3-FIFO's ghost queue: the keys the small queue dropped lately, remembered without their
//! data, so that a key which comes back soon after (a miss, then a set) skips the probation
//! it already failed once and goes to the main queue.
//!
//! A key is one byte of fingerprint in a table of sets of eight, newest first: remembering a
//! key pushes its set's oldest out, so each set is a small FIFO and the whole approximates
//! S3-FIFO's queue at 1 byte a key instead of a queue plus a hash set (8+ bytes a key). Sets
//! rather than single slots: in a direct-mapped table a newer key overwrites an older one
//! and some keys are forgotten much too early (on the bench's Zipf trace, sets of four or
//! eight miss about 0.3% less). The table holds 5/8 of a fingerprint per index entry (see
//! `s3fifo::ghost_slots`). A false positive (another key's fingerprint in the set, under 8
//! in 255 when it is full) only sends an item to main early.

const WAYS: usize = 8;

/// The fingerprint table; its bytes count against the shard's budget.
#[derive(Debug, Default)]
pub(crate) struct Ghost {
    slots: Vec<u8>,
}

impl Ghost {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.slots.capacity()
    }

    /// Bytes a ghost of `items` fingerprints holds.
    pub fn bytes_for(items: usize) -> usize {
        items.next_multiple_of(WAYS)
    }

    /// Grows to at least `items` fingerprints, forgetting what it held: called when the index
    /// grows, which is rare and means the shard holds more items than the ghost was sized for.
    pub fn grow_to(&mut self, items: usize) {
        let want = Self::bytes_for(items);
        if want > self.slots.len() {
            self.slots = vec![0; want];
        }
    }

    /// The set of `WAYS` slots the key maps to, and its fingerprint.
    fn set(&self, h: u64) -> Option<(usize, u8)> {
        let sets = self.slots.len() / WAYS;
        if sets == 0 {
            return None;
        }
        // Low bits pick the set, the top byte is the fingerprint: independent bits of the
        // same hash. Zero marks an empty slot, so fingerprints are never zero.
        let i = ((u128::from(h as u32) * sets as u128) >> 32) as usize * WAYS;
        Some((i, ((h >> 56) as u8).max(1)))
    }

    /// Remembers a key the small queue dropped: first in its set, the set's oldest
    /// forgotten.
    pub fn remember(&mut self, h: u64) {
        if let Some((i, fp)) = self.set(h) {
            self.slots.copy_within(i..i + WAYS - 1, i + 1);
            self.slots[i] = fp;
        }
    }

    /// Whether the key was dropped lately; forgets it either way.
    pub fn take(&mut self, h: u64) -> bool {
        let Some((i, fp)) = self.set(h) else {
            return false;
        };
        match self.slots[i..i + WAYS].iter().position(|&x| x == fp) {
            Some(j) => {
                // Close the gap so the set stays newest-first.
                self.slots.copy_within(i + j + 1..i + WAYS, i + j);
                self.slots[i + WAYS - 1] = 0;
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_until_taken_or_pushed_out() {
        let mut g = Ghost::default();
        assert!(!g.take(7), "an empty ghost knows nothing");
        g.grow_to(100);
        assert_eq!(g.bytes(), 104);
        let a = 0xAB00_0000_0000_0005u64;
        g.remember(a);
        assert!(g.take(a));
        assert!(!g.take(a), "taken once");
        // Nine keys of one set (same low bits, other fingerprints): the oldest is pushed out.
        let key = |i: u64| ((0x10 + i) << 56) | 5;
        for i in 0..9 {
            g.remember(key(i));
        }
        assert!(!g.take(key(0)), "pushed out by the ninth");
        assert!(g.take(key(4)), "taken from the middle of the set");
        // Taking closed the gap: one more key still leaves the second-oldest in.
        g.remember(key(9));
        assert!(g.take(key(1)));
        for i in [2, 3, 5, 6, 7, 8, 9] {
            assert!(g.take(key(i)), "key {i}");
        }
        // A zero top byte still makes a non-empty fingerprint.
        let z = 0x0000_0000_0000_0009u64;
        g.remember(z);
        assert!(g.take(z));
    }
}
