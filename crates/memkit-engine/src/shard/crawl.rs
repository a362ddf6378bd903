//! A shard's items in bounded batches (`Engine::crawl`), for dumps that release the lock
//! between batches.
//!
//! Items are listed in the order of their key's hash, low 32 bits first, then the key: an
//! order that nothing done to the shard between two batches changes. Not the segments'
//! order, which an eviction (moving kept items), a compaction or a recycled segment changes
//! under a cursor; not the buckets', which growth and Robin Hood's shifts change. The
//! index's home bucket follows the low 32 bits of the hash at every table size, so the
//! items after a point of this order are found by sweeping the index from that point's home
//! bucket on, entries of one home being next to each other. A batch sweeps whole homes
//! (sorting each by the rest of the order), so it can stop after any of them and say where
//! the next one starts.

use std::hash::BuildHasher;

use super::Shard;
use crate::arena::Loc;
use crate::segment::ItemAt;

/// A hash's place in the crawl order: its low 32 bits above its high 32.
pub(crate) fn crawl_order(h: u64) -> u64 {
    h.rotate_left(32)
}

/// Where the next batch of a shard's crawl starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resume {
    /// Every item has been listed.
    Done,
    /// At the items of this order and after.
    From(u64),
    /// After this item (its order and location; the caller keeps its key).
    After(u64, Loc),
}

/// What one batch did: the bound on the lock's hold is on these.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CrawlWork {
    /// Items handed to the visitor.
    pub listed: usize,
    /// Index entries whose key was read (hashed), listed or not.
    pub read: usize,
    /// Buckets looked at, empty or not.
    pub swept: usize,
}

/// Buckets a batch may look at for each item it may list, before it stops where it is: a
/// table left sparse by deletions is swept in bounded steps too.
const SWEEP_PER_ITEM: usize = 8;

impl Shard {
    /// Lists up to `max` live items (`max` >= 1) that come after the cursor in the crawl
    /// order: at order `from` unless the key is `after` or before it, then any greater
    /// order. Calls `f` with the shard and each item, in that order, and says where the next
    /// batch starts.
    ///
    /// Bounds: at most `max` calls of `f`; at most `max + 508` entries read (a home holds at
    /// most 254: the rest of the last home swept, and the first home's entries the cursor
    /// has passed); at most `SWEEP_PER_ITEM * max + 512` buckets looked at, and the rest of
    /// the last home.
    pub(crate) fn crawl(
        &mut self,
        now: u32,
        from: u64,
        after: Option<&[u8]>,
        max: usize,
        f: &mut dyn FnMut(&Shard, Loc, &ItemAt),
    ) -> (Resume, CrawlWork) {
        self.apply_flush(now);
        let mut work = CrawlWork::default();
        let n = self.index.buckets();
        if n == 0 {
            return (Resume::Done, work);
        }
        let max = max.max(1);
        let limit = max.saturating_mul(SWEEP_PER_ITEM).saturating_add(512);
        let h0 = self.index.home_of((from >> 32) as u32);
        let mut batch: Vec<(u64, Loc)> = Vec::new();
        let mut group = None;
        // The home bucket the sweep stopped at, all of whose items are still to come.
        let mut stop = None;
        // Positions run from h0 past the table's end (wrapping to its start), where the
        // entries that wrapped from the last homes sit and, after them, nothing is left.
        for u in h0..h0 + n + 256 {
            work.swept += 1;
            let Some((d, e)) = self.index.entry_at(u % n) else {
                if u >= n {
                    break;
                }
                if work.swept >= limit && u > h0 {
                    stop = Some(u);
                    break;
                }
                continue;
            };
            if u < h0 + d {
                continue; // homed before h0: listed by an earlier batch (or wrapped: later)
            }
            let home = u - d;
            if home >= n {
                break; // the start of the table's homes again
            }
            if group != Some(home) {
                if (batch.len() >= max || work.swept >= limit) && home > h0 {
                    stop = Some(home);
                    break;
                }
                group = Some(home);
            }
            work.read += 1;
            let at = self.arena.item_at(e);
            let key = self.arena.key_at(e, &at);
            let ord = crawl_order(self.hasher.hash_one(key));
            let before = ord < from || (ord == from && after.is_some_and(|a| key <= a));
            if !before {
                batch.push((ord, e));
            }
        }
        let arena = &self.arena;
        let key = |e: Loc| arena.key_at(e, &arena.item_at(e));
        batch.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| key(a.1).cmp(key(b.1))));
        let resume = if batch.len() > max {
            batch.truncate(max);
            let &(ord, e) = batch.last().expect("max >= 1");
            Resume::After(ord, e)
        } else {
            match stop {
                Some(b) => Resume::From(u64::from(self.index.first_low_of(b)) << 32),
                None => Resume::Done,
            }
        };
        for (_, e) in batch {
            let at = self.arena.item_at(e);
            if self.dead(&at.header, now).is_none() {
                work.listed += 1;
                f(self, e, &at);
            }
        }
        (resume, work)
    }
}
