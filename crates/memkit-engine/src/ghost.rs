//! S3-FIFO's ghost queue: the keys the small queue dropped lately, remembered without their
//! data, so that a key which comes back soon after (a miss, then a set) skips the probation
//! it already failed once and goes to the main queue.
//!
//! A key is one byte of fingerprint in a direct-mapped table with half as many slots as the
//! index has buckets, about 0.6 of the items the shard holds (S3-FIFO sizes its ghost like
//! the main queue; on the bench's Zipf trace half the buckets did better than all of them). Newer entries
//! overwrite older ones in their slot, which approximates FIFO order at 1 byte a key instead
//! of a queue plus a hash set (8+ bytes a key). A false positive (another key's fingerprint
//! in the slot, about 1 in 255 when the table is full) only sends an item to main early.

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

    /// Grows to at least `items` slots (a power of two), forgetting what it held: called
    /// when the index grows, which is rare and means the shard holds more items than the
    /// ghost was sized for.
    pub fn grow_to(&mut self, items: usize) {
        let want = items.next_power_of_two();
        if want > self.slots.len() {
            self.slots = vec![0; want];
        }
    }

    fn slot(&self, h: u64) -> Option<(usize, u8)> {
        if self.slots.is_empty() {
            return None;
        }
        // Low bits pick the slot, the top byte is the fingerprint: independent bits of the
        // same hash. Zero marks an empty slot, so fingerprints are never zero.
        let i = (h as usize) & (self.slots.len() - 1);
        Some((i, ((h >> 56) as u8).max(1)))
    }

    /// Remembers a key the small queue dropped.
    pub fn remember(&mut self, h: u64) {
        if let Some((i, fp)) = self.slot(h) {
            self.slots[i] = fp;
        }
    }

    /// Whether the key was dropped lately; forgets it either way.
    pub fn take(&mut self, h: u64) -> bool {
        match self.slot(h) {
            Some((i, fp)) if self.slots[i] == fp => {
                self.slots[i] = 0;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_until_taken_or_overwritten() {
        let mut g = Ghost::default();
        assert!(!g.take(7), "an empty ghost knows nothing");
        g.grow_to(100);
        assert_eq!(g.bytes(), 128);
        let a = 0xAB00_0000_0000_0005u64;
        g.remember(a);
        assert!(g.take(a));
        assert!(!g.take(a), "taken once");
        g.remember(a);
        // Same slot, other fingerprint: the newer key replaces the older.
        let b = 0xCD00_0000_0000_0005u64;
        g.remember(b);
        assert!(!g.take(a));
        assert!(g.take(b));
        // A zero top byte still makes a non-empty fingerprint.
        let z = 0x0000_0000_0000_0009u64;
        g.remember(z);
        assert!(g.take(z));
    }
}
