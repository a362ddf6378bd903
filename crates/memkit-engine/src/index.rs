//! The hash index: key hash -> item location, grown in eighths rather than doubled.
//!
//! A hashbrown table has a power-of-two number of buckets and is at most 7/8 full, so a
//! shard whose item count lands just past a power of two would hold an index at 44% load:
//! 11.4 bytes an item instead of 5.7, every byte of it charged to `-m`. On the bench's Zipf
//! trace at `-m 32` that is 1.3 MB of index where 8,000 more items could live.
//!
//! So the index is two tables. `main` holds most entries; when it is full, new entries go to
//! `spill`, which grows through 1/8, 1/4 and 1/2 of main's buckets before main doubles and
//! takes the spill's entries back. Total capacity steps by 12-33% instead of 100%, so the
//! index stays at least 66% full once it is past its first table. The price is a second
//! probe for keys that are not in main: the spill is small (and empty until main fills),
//! so misses pay a probe of a table an eighth to a half the size.
//!
//! Growing needs every moved entry's hash, which lives in its key in a segment: callers pass
//! a `rehash` function, as hashbrown's own `reserve` takes.

use hashbrown::HashTable;

use crate::shard::Loc;

#[derive(Debug, Default)]
pub(crate) struct Index {
    main: HashTable<Loc>,
    spill: HashTable<Loc>,
    /// Buckets of each table (hashbrown does not say).
    shape: Shape,
}

/// The smallest spill: smaller ones are not worth a second probe.
const MIN_SPILL: usize = 64;

/// Buckets hashbrown gives a table created for `capacity` entries.
pub(crate) fn buckets(capacity: usize) -> usize {
    match capacity {
        0 => 0,
        1..4 => 4,
        4..8 => 8,
        _ => (capacity * 8 / 7).next_power_of_two(),
    }
}

/// Entries a table of `buckets` buckets takes before it has to grow.
fn capacity_of(buckets: usize) -> usize {
    if buckets < 8 {
        buckets - 1
    } else {
        buckets / 8 * 7
    }
}

/// Bytes hashbrown allocates for `buckets`: a 4-byte slot and a control byte each, plus one
/// group of trailing control bytes.
pub(crate) fn table_bytes(buckets: usize) -> usize {
    if buckets == 0 { 0 } else { buckets * 5 + 16 }
}

/// The next shape of the index: buckets of main and of the spill.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Shape {
    pub main: usize,
    pub spill: usize,
}

impl Shape {
    pub fn bytes(self) -> usize {
        table_bytes(self.main) + table_bytes(self.spill)
    }

    /// Entries the tables take before the next [`Index::grow`].
    pub fn capacity(self) -> usize {
        [self.main, self.spill]
            .into_iter()
            .filter(|&b| b > 0)
            .map(capacity_of)
            .sum()
    }
}

impl Index {
    pub fn len(&self) -> usize {
        self.main.len() + self.spill.len()
    }

    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Whether one more entry fits without [`Self::grow`].
    pub fn has_room(&self) -> bool {
        self.main.len() < self.main.capacity() || self.spill.len() < self.spill.capacity()
    }

    /// The shape [`Self::grow`] will build, so that its bytes can be found in the budget
    /// before they are allocated.
    pub fn next_shape(&self) -> Shape {
        let now = self.shape;
        let want = self.len() + 1;
        if now.main == 0 {
            return Shape {
                main: buckets(want.max(14)),
                spill: 0,
            };
        }
        // Tombstones, not entries, fill the tables (hashbrown leaves one for most removals
        // from a full group, and they use up a table's room): rebuilt at their size, they
        // take everything with an eighth to spare.
        if want <= capacity_of(now.main) * 7 / 8 {
            return Shape {
                main: now.main,
                spill: 0,
            };
        }
        if now.spill > 0 && want <= (capacity_of(now.main) + capacity_of(now.spill)) * 7 / 8 {
            return now;
        }
        let spill = if now.spill == 0 {
            now.main / 8
        } else {
            now.spill * 2
        };
        if spill >= MIN_SPILL && spill <= now.main / 2 {
            Shape {
                main: now.main,
                spill,
            }
        } else {
            Shape {
                main: now.main * 2,
                spill: 0,
            }
        }
    }

    /// Grows (or rebuilds) to [`Self::next_shape`].
    pub fn grow(&mut self, rehash: impl Fn(&Loc) -> u64) {
        let next = self.next_shape();
        let old_spill = std::mem::take(&mut self.spill);
        let new_spill = || match next.spill {
            0 => HashTable::new(),
            b => HashTable::with_capacity(capacity_of(b)),
        };
        if next.main == self.shape.main && next.spill > self.shape.spill {
            // Only the spill grows: main keeps its entries where they are.
            self.spill = new_spill();
            for e in old_spill {
                self.spill.insert_unique(rehash(&e), e, &rehash);
            }
        } else {
            let old_main = std::mem::replace(
                &mut self.main,
                HashTable::with_capacity(capacity_of(next.main)),
            );
            self.spill = new_spill();
            for e in old_main.into_iter().chain(old_spill) {
                let table = if self.main.len() < self.main.capacity() {
                    &mut self.main
                } else {
                    &mut self.spill
                };
                table.insert_unique(rehash(&e), e, &rehash);
            }
        }
        self.shape = next;
    }

    pub fn find(&self, h: u64, eq: impl Fn(&Loc) -> bool) -> Option<&Loc> {
        match self.main.find(h, &eq) {
            Some(e) => Some(e),
            None if self.spill.is_empty() => None,
            None => self.spill.find(h, eq),
        }
    }

    pub fn find_mut(&mut self, h: u64, eq: impl Fn(&Loc) -> bool) -> Option<&mut Loc> {
        if self.spill.is_empty() {
            return self.main.find_mut(h, eq);
        }
        match self.main.find_mut(h, &eq) {
            Some(e) => Some(e),
            None => self.spill.find_mut(h, eq),
        }
    }

    /// Removes the entry `eq` picks; whether there was one.
    pub fn remove(&mut self, h: u64, eq: impl Fn(&Loc) -> bool) -> bool {
        if let Ok(entry) = self.main.find_entry(h, &eq) {
            entry.remove();
            return true;
        }
        match self.spill.find_entry(h, eq) {
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
        if self.main.len() < self.main.capacity() {
            self.main.insert_unique(h, e, rehash);
        } else {
            self.spill.insert_unique(h, e, rehash);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Locations are their own hashes here, mixed so that hashbrown's tag bits vary.
    fn hash(e: &Loc) -> u64 {
        u64::from(*e).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    fn add(ix: &mut Index, e: Loc) {
        if !ix.has_room() {
            ix.grow(hash);
        }
        ix.insert(hash(&e), e, hash);
    }

    #[test]
    fn grows_in_steps_of_an_eighth_to_a_third() {
        let mut ix = Index::default();
        let mut last = 0;
        let mut shapes = vec![];
        for e in 0..200_000u32 {
            add(&mut ix, e);
            let shape = ix.shape();
            let total = shape.main + shape.spill;
            if total != last {
                if last >= 1024 {
                    // No step more than a third once past the first table's doubling.
                    assert!(total * 3 <= last * 4, "{last} -> {total} buckets");
                }
                shapes.push(shape);
                last = total;
            }
            if e >= 1000 {
                // The index never drops under 5/8 full (7/8 of main, then each step <= 4/3).
                let load = ix.len() as f64 / total as f64;
                assert!(
                    load > 0.62,
                    "load {load:.3} at {} entries, {shape:?}",
                    ix.len()
                );
            }
        }
        assert!(shapes.iter().any(|s| s.spill == s.main / 8));
        assert!(shapes.iter().any(|s| s.spill == s.main / 2));
        for e in 0..200_000u32 {
            assert_eq!(ix.find(hash(&e), |&x| x == e), Some(&e), "entry {e}");
        }
        assert_eq!(ix.find(hash(&300_000), |&x| x == 300_000), None);
    }

    #[test]
    fn removes_and_updates_in_both_tables() {
        let mut ix = Index::default();
        for e in 0..30_000u32 {
            add(&mut ix, e);
        }
        assert!(
            ix.shape().spill > 0,
            "30k entries spill past a 32k-bucket main"
        );
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
    fn tombstones_are_rebuilt_away_not_doubled() {
        // Churn at a steady size: removals leave tombstones in full groups; the index must
        // rebuild at its size rather than grow without bound.
        let mut ix = Index::default();
        let live = 50_000u32;
        for e in 0..live {
            add(&mut ix, e);
        }
        let settled = ix.shape().main + ix.shape().spill;
        for e in live..live * 20 {
            let old = e - live;
            assert!(ix.remove(hash(&old), |&x| x == old));
            add(&mut ix, e);
        }
        assert_eq!(ix.len(), live as usize);
        let after = ix.shape().main + ix.shape().spill;
        assert!(
            after <= settled * 2,
            "{settled} -> {after} buckets under churn"
        );
        assert!(
            Shape {
                main: ix.shape().main,
                spill: ix.shape().spill
            }
            .bytes()
                < live as usize * 10,
            "{:?}",
            ix.shape()
        );
    }
}
