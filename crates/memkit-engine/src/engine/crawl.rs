//! Dumps (`lru_crawler metadump`, `mgdump`, `stats cachedump`) in bounded batches: each
//! [`Engine::crawl`] call holds one shard's lock for at most a batch of items and leaves a
//! [`DumpCursor`] where it stopped, so the caller formats and sends between calls with no
//! lock held. The order, and why it survives what happens between batches, are in
//! `shard/crawl.rs`.

use super::Engine;
use crate::arena::seg_of;
use crate::shard::crawl::Resume;

/// One live item as [`Engine::crawl`] lists them, for `lru_crawler metadump` and the size
/// histograms: the key and absolute times. Not the protocol's `ItemMeta`, which holds what
/// one meta reply reports of the item a request touched (relative TTL and idle time, the
/// `W`/`X`/`Z` tokens) and no key.
#[derive(Debug, Clone, Copy)]
pub struct CrawledItem<'a> {
    /// The key.
    pub key: &'a [u8],
    /// Absolute expiry, `None` for never.
    pub exptime_unix: Option<u64>,
    /// Approximate last access time (see `docs/protocol-notes.md`).
    pub last_access_unix: u64,
    /// CAS.
    pub cas: u64,
    /// Fetched since written.
    pub fetched: bool,
    /// Stored size: header, key, value.
    pub size: usize,
    /// Value length.
    pub value_len: usize,
    /// Client flags.
    pub flags: u32,
}

/// Where a dump stands between two [`Engine::crawl`] calls: a shard, and a point in that
/// shard's order of keys (by hash, then key). `DumpCursor::default()` is a dump's start.
///
/// The guarantee: a key that is live from the dump's start to its end is listed exactly
/// once, whatever happens between batches: writes, deletes, evictions (which move the items
/// they keep), compaction, segments recycled or appended, the index growing. Rewriting the
/// key does not change that (its place in the order is its key's), and it is listed with
/// whatever value it has when the dump reaches it. A key that comes or goes during the dump
/// is listed at most once: if it is live when the dump passes its place.
#[derive(Debug, Clone, Default)]
pub struct DumpCursor {
    shard: usize,
    /// In the shard's order: the items from here on are still to come...
    from: u64,
    /// ...but for those at `from` whose key is this one or before it.
    after: Option<Vec<u8>>,
}

impl DumpCursor {
    /// Whether the dump has listed every shard.
    pub fn is_done(&self, engine: &Engine) -> bool {
        self.shard >= engine.shards.len()
    }
}

/// Items a batch of [`Engine::for_each_item`] lists under one lock.
const FOR_EACH_BATCH: usize = 256;

impl Engine {
    /// Lists the next live items of a dump: at most `max_items` (at least 1) from one shard,
    /// handing each to `f` while that shard is locked, then releases it and moves `cursor`
    /// past them. Returns whether more may follow (`false` once every shard is done). The
    /// lock is held for a bounded batch whatever the shard holds: at most `max_items + 508`
    /// keys read and about `8 * max_items + 512` index buckets looked at.
    /// See [`DumpCursor`] for which items a dump lists.
    pub fn crawl(
        &self,
        cursor: &mut DumpCursor,
        max_items: usize,
        mut f: impl FnMut(CrawledItem<'_>),
    ) -> bool {
        let Some(slot) = self.shards.get(cursor.shard) else {
            return false;
        };
        let now = self.now();
        let now_unix = self.clock.now_secs();
        let mut shard = slot.0.lock();
        let from = cursor.from;
        let after = cursor.after.take();
        let (resume, _) = shard.crawl(
            now,
            from,
            after.as_deref(),
            max_items,
            &mut |shard, e, at| {
                let seg = shard.arena.seg(seg_of(e));
                let hdr = &at.header;
                f(CrawledItem {
                    key: at.key(seg.bytes()),
                    exptime_unix: (hdr.exptime != 0).then(|| self.epoch + u64::from(hdr.exptime)),
                    last_access_unix: now_unix
                        .saturating_sub(u64::from(now.saturating_sub(seg.created))),
                    cas: shard.cas_of(hdr),
                    fetched: hdr.bits & crate::segment::FETCHED != 0,
                    size: hdr.logical_len(),
                    value_len: hdr.vlen as usize,
                    flags: hdr.flags,
                })
            },
        );
        match resume {
            Resume::Done => {
                *cursor = DumpCursor {
                    shard: cursor.shard + 1,
                    ..DumpCursor::default()
                }
            }
            Resume::From(ord) => cursor.from = ord,
            Resume::After(ord, e) => {
                let mut key = after.unwrap_or_default();
                key.clear();
                key.extend_from_slice(shard.arena.key_of(e));
                (cursor.from, cursor.after) = (ord, Some(key));
            }
        }
        !cursor.is_done(self)
    }

    /// Visits every live item: key, metadata. A loop of [`Engine::crawl`] batches, so each
    /// shard is locked a batch at a time and the items listed are those [`DumpCursor`]
    /// promises; `f` runs under the lock and must not call back into the engine.
    pub fn for_each_item(&self, mut f: impl FnMut(CrawledItem<'_>)) {
        let mut cursor = DumpCursor::default();
        while self.crawl(&mut cursor, FOR_EACH_BATCH, &mut f) {}
    }
}

#[cfg(test)]
mod tests {
    use memkit_types::{DeleteOptions, Exptime, StoreMode, StoreOptions};

    use super::*;
    use crate::EngineConfig;
    use crate::shard::crawl::CrawlWork;

    fn one_shard() -> Engine {
        Engine::new(EngineConfig {
            shards: Some(1),
            ..EngineConfig::with_memory(32 << 20)
        })
    }

    fn set(e: &Engine, key: &str) {
        let opts = StoreOptions::new(StoreMode::Set, 0, Exptime::NEVER);
        e.store(key.as_bytes(), b"v", &opts).unwrap();
    }

    /// Crawls shard 0 to its end in batches of `max`, checking each batch's work against
    /// the bounds `Shard::crawl` states; returns the items listed and the batches taken.
    fn crawl_bounded(e: &Engine, max: usize) -> (usize, usize) {
        let (mut from, mut after, mut listed, mut batches) = (0, None::<Vec<u8>>, 0, 0);
        loop {
            let mut shard = e.shards[0].0.lock();
            let (resume, work) = shard.crawl(0, from, after.as_deref(), max, &mut |_, _, _| {});
            let CrawlWork {
                listed: n,
                read,
                swept,
            } = work;
            assert!(n <= max, "{work:?}");
            assert!(read <= max + 508, "{work:?}");
            assert!(swept <= 8 * max + 512 + 254, "{work:?}");
            (listed, batches) = (listed + n, batches + 1);
            match resume {
                Resume::Done => return (listed, batches),
                Resume::From(o) => (from, after) = (o, None),
                Resume::After(o, e) => (from, after) = (o, Some(shard.arena.key_of(e).to_vec())),
            }
        }
    }

    #[test]
    fn a_batch_reads_and_sweeps_a_bounded_part_of_the_shard() {
        let e = one_shard();
        for i in 0..20_000 {
            set(&e, &format!("key{i}"));
        }
        for max in [1, 3, 64] {
            let (listed, batches) = crawl_bounded(&e, max);
            assert_eq!(listed, 20_000);
            assert!(batches >= 20_000 / max, "{batches} batches of {max}");
        }
        // Deletions leave the table sparse: 20 items in 20,000 entries' buckets are still
        // crawled in bounded steps, and all of them found.
        for i in 20..20_000 {
            e.delete(format!("key{i}").as_bytes(), &DeleteOptions::default())
                .unwrap();
        }
        let (listed, batches) = crawl_bounded(&e, 1);
        assert_eq!(listed, 20);
        assert!(batches > 20, "the empty buckets took batches of their own");
    }
}
