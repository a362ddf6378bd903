//! The hash index: key hash -> item location, one hashbrown table per shard.
//!
//! A wrapper rather than a bare `HashTable` so that growth is explicit: the shard finds the
//! bytes of the next table in its budget (evicting if it must) before [`Index::grow`]
//! allocates them, and the ghost is sized from the same capacity.
//!
//! Tried and not kept: a second, smaller "spill" table growing in eighths so that the index
//! never sits at 44% load just past a power of two. It fit 3.8% more items on the bench's
//! Zipf trace, but at high load hashbrown leaves a tombstone for most removals, and the
//! rebuilds that clear them came every ~10k inserts, about six rehashes (key reads) per
//! insert: 1.2x CPU per operation when keys exceed memory (an in-process get-then-set loop,
//! 1207 vs 1002 ns). A table that deletes without tombstones would be needed first.

use hashbrown::HashTable;

use crate::shard::Loc;

#[derive(Debug, Default)]
pub(crate) struct Index {
    table: HashTable<Loc>,
    /// Buckets of the table (hashbrown does not say).
    buckets: usize,
}

/// Buckets hashbrown gives a table created for `capacity` entries.
fn buckets(capacity: usize) -> usize {
    match capacity {
        0 => 0,
        1..4 => 4,
        4..8 => 8,
        _ => (capacity * 8 / 7).next_power_of_two(),
    }
}

/// Entries a table of `buckets` buckets takes before it has to grow.
fn capacity_of(buckets: usize) -> usize {
    match buckets {
        0 => 0,
        1..8 => buckets - 1,
        _ => buckets / 8 * 7,
    }
}

/// Bytes hashbrown allocates for `buckets`: a 4-byte slot and a control byte each, plus one
/// group of trailing control bytes.
fn table_bytes(buckets: usize) -> usize {
    if buckets == 0 { 0 } else { buckets * 5 + 16 }
}

impl Index {
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Bytes the table holds.
    pub fn bytes(&self) -> usize {
        table_bytes(self.buckets)
    }

    /// Entries the table takes before the next [`Self::grow`].
    pub fn capacity(&self) -> usize {
        capacity_of(self.buckets)
    }

    /// Whether one more entry fits without [`Self::grow`].
    pub fn has_room(&self) -> bool {
        self.table.len() < self.table.capacity()
    }

    /// Buckets [`Self::grow`] will leave: hashbrown's own `reserve` rule, which rehashes in
    /// place when tombstones (left by removals from full groups) rather than entries fill the
    /// table and the entries fit in half of it, and otherwise doubles.
    fn next_buckets(&self) -> usize {
        let want = self.len() + 1;
        if self.buckets == 0 {
            buckets(want)
        } else if want <= capacity_of(self.buckets) / 2 {
            self.buckets
        } else {
            self.buckets * 2
        }
    }

    /// Bytes and capacity of the table [`Self::grow`] will leave, so that they can be found
    /// in the budget before they are allocated.
    pub fn next_bytes_and_capacity(&self) -> (usize, usize) {
        let b = self.next_buckets();
        (table_bytes(b), capacity_of(b))
    }

    /// Makes room for one more entry, as [`Self::next_buckets`] says.
    pub fn grow(&mut self, rehash: impl Fn(&Loc) -> u64) {
        self.buckets = self.next_buckets();
        self.table.reserve(1, rehash);
    }

    pub fn find(&self, h: u64, eq: impl Fn(&Loc) -> bool) -> Option<&Loc> {
        self.table.find(h, eq)
    }

    pub fn find_mut(&mut self, h: u64, eq: impl Fn(&Loc) -> bool) -> Option<&mut Loc> {
        self.table.find_mut(h, eq)
    }

    /// Removes the entry `eq` picks; whether there was one.
    pub fn remove(&mut self, h: u64, eq: impl Fn(&Loc) -> bool) -> bool {
        match self.table.find_entry(h, eq) {
            Ok(entry) => {
                entry.remove();
                true
            }
            Err(_) => false,
        }
    }

    /// Adds an entry for a key not in the index. [`Self::has_room`] must hold.
    pub fn insert(&mut self, h: u64, e: Loc, rehash: impl Fn(&Loc) -> u64) {
        debug_assert!(self.has_room());
        self.table.insert_unique(h, e, rehash);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Locations are their own hashes here, mixed so that hashbrown's tag bits vary.
    fn hash(e: &Loc) -> u64 {
        u64::from(*e).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    // Each run of 12,000 entries starts its probes in one of 16 regions of 1,024 buckets:
    // long runs of full groups, where hashbrown's removals leave tombstones, and later runs
    // insert elsewhere, so they do not reuse them.
    fn clustered(e: &Loc) -> u64 {
        let region = u64::from(*e / 12_000 % 16) << 11;
        (hash(e) & !0xFFFF) | region | u64::from(*e % 1024)
    }

    fn add(ix: &mut Index, e: Loc) {
        add_with(ix, e, hash);
    }

    fn add_with(ix: &mut Index, e: Loc, h: fn(&Loc) -> u64) {
        if !ix.has_room() {
            let (bytes, cap) = ix.next_bytes_and_capacity();
            ix.grow(h);
            // The budget is charged what hashbrown really allocated.
            assert_eq!(ix.table.allocation_size(), bytes);
            assert_eq!(ix.table.capacity(), cap);
        }
        ix.insert(h(&e), e, h);
    }

    #[test]
    fn grows_by_doubling_and_finds_everything() {
        let mut ix = Index::default();
        for e in 0..100_000u32 {
            add(&mut ix, e);
            assert!(ix.len() <= ix.capacity());
        }
        assert_eq!(ix.capacity(), 114_688, "131072 buckets at 7/8");
        assert_eq!(ix.bytes(), 131_072 * 5 + 16);
        for e in 0..100_000u32 {
            assert_eq!(ix.find(hash(&e), |&x| x == e), Some(&e), "entry {e}");
        }
        assert_eq!(ix.find(hash(&300_000), |&x| x == 300_000), None);
    }

    #[test]
    fn removes_and_updates() {
        let mut ix = Index::default();
        for e in 0..30_000u32 {
            add(&mut ix, e);
        }
        for e in (0..30_000u32).step_by(3) {
            assert!(ix.remove(hash(&e), |&x| x == e));
            assert!(!ix.remove(hash(&e), |&x| x == e), "removed once");
        }
        for e in (1..30_000u32).step_by(3) {
            *ix.find_mut(hash(&e), |&x| x == e).expect("present") = e + 1_000_000;
        }
        assert_eq!(ix.len(), 20_000);
        for e in 0..30_000u32 {
            let got = ix
                .find(hash(&e), |&x| x == e || x == e + 1_000_000)
                .copied();
            let want = match e % 3 {
                0 => None,
                1 => Some(e + 1_000_000),
                _ => Some(e),
            };
            assert_eq!(got, want, "entry {e}");
        }
    }

    #[test]
    fn churn_rehashes_tombstones_away_instead_of_doubling() {
        // A table grown for 25,000 entries keeps 12,000 and has them replaced one by one:
        // removals leave tombstones that use up its room, and growing must clear them in
        // place (same bytes) because the entries fit in half the table.
        let mut ix = Index::default();
        for e in 0..25_000u32 {
            add_with(&mut ix, e, clustered);
        }
        for e in 0..13_000u32 {
            assert!(ix.remove(clustered(&e), |&x| x == e));
        }
        let bytes = ix.bytes();
        assert_eq!(bytes, 32_768 * 5 + 16);
        let mut grown = 0;
        for e in 25_000..200_000u32 {
            let old = e - 12_000;
            assert!(ix.remove(clustered(&old), |&x| x == old));
            grown += usize::from(!ix.has_room());
            add_with(&mut ix, e, clustered);
        }
        assert!(grown > 0, "tombstones never filled the table");
        assert_eq!(ix.len(), 12_000);
        assert_eq!(ix.bytes(), bytes, "rehashed in place {grown} times");
        for e in 188_000..200_000u32 {
            assert_eq!(ix.find(clustered(&e), |&x| x == e), Some(&e));
        }
    }
}
