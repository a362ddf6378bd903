//! Statistics with memcached's names and meanings.
//!
//! Each shard keeps plain counters under its own lock in a `ShardStats` (no shared cache
//! line on the hot path); [`crate::Engine::stats`] adds them up. Size classes follow
//! memcached's default slab classes (96 bytes, factor 1.25, up to half the item size limit)
//! so that `stats slabs` and `stats items` read like memcached's and a memory-by-item-size
//! histogram can be drawn from them — but here a class only *counts*: no memory is reserved
//! per class, so nothing is lost to rounding.

use std::sync::Arc;

/// Counters of one shard, or of the whole engine once summed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct Counters {
    pub cmd_get: u64,
    pub cmd_set: u64,
    pub cmd_flush: u64,
    pub cmd_touch: u64,
    pub get_hits: u64,
    pub get_misses: u64,
    pub get_expired: u64,
    pub get_flushed: u64,
    pub delete_hits: u64,
    pub delete_misses: u64,
    pub incr_hits: u64,
    pub incr_misses: u64,
    pub decr_hits: u64,
    pub decr_misses: u64,
    pub cas_hits: u64,
    pub cas_misses: u64,
    pub cas_badval: u64,
    pub touch_hits: u64,
    pub touch_misses: u64,
    pub store_too_large: u64,
    pub store_no_memory: u64,
    pub total_items: u64,
    pub curr_items: u64,
    /// Bytes of live items as stored: header, key and value.
    pub bytes: u64,
    pub evictions: u64,
    pub evicted_unfetched: u64,
    /// Dead items (expired or flushed) whose memory was taken back by the engine.
    pub reclaimed: u64,
    pub expired_unfetched: u64,
    /// Live items an eviction kept by moving them (promotions and reinsertions).
    pub evict_retained: u64,
    /// Segments emptied by eviction or compaction.
    pub segments_evicted: u64,
    /// The flash tier (memcached's names): reads of a value on flash...
    pub get_extstore: u64,
    /// ... that found it gone (its page reclaimed) or unreadable...
    pub miss_from_extstore: u64,
    /// ... of which with a bad checksum (or another key, or short);
    pub badcrc_from_extstore: u64,
    /// values brought back to RAM by a read (`ext_recache_rate`);
    pub recache_from_extstore: u64,
    /// items whose value left RAM for flash, keeping their stub (not a memcached name:
    /// memcached counts `extstore_objects_written`, which includes compaction's rewrites).
    pub evicted_to_extstore: u64,
}

impl Counters {
    pub(crate) fn add(&mut self, o: &Counters) {
        macro_rules! sum { ($($f:ident),*) => { $( self.$f += o.$f; )* } }
        sum!(
            cmd_get,
            cmd_set,
            cmd_flush,
            cmd_touch,
            get_hits,
            get_misses,
            get_expired,
            get_flushed,
            delete_hits,
            delete_misses,
            incr_hits,
            incr_misses,
            decr_hits,
            decr_misses,
            cas_hits,
            cas_misses,
            cas_badval,
            touch_hits,
            touch_misses,
            get_extstore,
            miss_from_extstore,
            badcrc_from_extstore,
            recache_from_extstore,
            evicted_to_extstore,
            store_too_large,
            store_no_memory,
            total_items,
            curr_items,
            bytes,
            evictions,
            evicted_unfetched,
            reclaimed,
            expired_unfetched,
            evict_retained,
            segments_evicted
        );
    }
}

/// One size class: items whose stored size (header + key + value) falls in it.
///
/// The command counters are memcached's per-class `slab_stats`, counted where memcached
/// counts them (the class of the item found, or of the new item for `cmd_set`); they sum to
/// the engine's counters of the same names, except `cmd_set`, which leaves out stores the
/// engine refused before looking (too large).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// Upper bound of the class in bytes (memcached's `chunk_size`).
    pub size: u32,
    /// Live items in the class.
    pub items: u64,
    /// Their stored bytes (memcached's `mem_requested`).
    pub bytes: u64,
    /// Items of this class evicted.
    pub evicted: u64,
    /// Dead items of this class reclaimed.
    pub reclaimed: u64,
    /// Counters of the class, zeroed by `stats reset`.
    pub counters: ClassCounters,
}

/// The per-class counters `stats slabs` and `stats items` report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct ClassCounters {
    pub get_hits: u64,
    pub cmd_set: u64,
    pub delete_hits: u64,
    pub incr_hits: u64,
    pub decr_hits: u64,
    pub cas_hits: u64,
    pub cas_badval: u64,
    pub touch_hits: u64,
    /// Expired items reclaimed that were never fetched.
    pub expired_unfetched: u64,
    /// Items evicted that were never fetched.
    pub evicted_unfetched: u64,
    /// Items evicted that had an expiry time.
    pub evicted_nonzero: u64,
    /// Items evicted although the policy had seen them used (relocation found no room).
    pub evicted_active: u64,
}

impl ClassCounters {
    pub(crate) fn add(&mut self, o: &ClassCounters) {
        macro_rules! sum { ($($f:ident),*) => { $( self.$f += o.$f; )* } }
        sum!(
            get_hits,
            cmd_set,
            delete_hits,
            incr_hits,
            decr_hits,
            cas_hits,
            cas_badval,
            touch_hits,
            expired_unfetched,
            evicted_unfetched,
            evicted_nonzero,
            evicted_active
        );
    }
}

/// A snapshot of the engine's statistics.
#[derive(Debug, Clone, Default)]
pub struct EngineStats {
    /// Summed counters.
    pub counters: Counters,
    /// Per size class, only classes ever used are non-zero.
    pub classes: Vec<ClassStats>,
    /// The memory limit in bytes (`limit_maxbytes`).
    pub limit_maxbytes: u64,
    /// Bytes the engine holds from the OS: segments, large blocks, index and the eviction
    /// policy's metadata. At most `limit_maxbytes`, plus three segments for each shard that
    /// holds out-of-line values (for their stubs), outside an eviction.
    pub mapped_bytes: u64,
    /// Bytes taken by the hash index and the eviction policy's metadata (S3-FIFO's ghost).
    pub index_bytes: u64,
    /// Segment size in bytes.
    pub segment_size: u64,
    /// Mapped segments.
    pub segments: u64,
    /// Number of shards.
    pub shards: u64,
    /// Age in seconds of the oldest item's segment (memcached's `age` of the LRU tail).
    pub oldest_age: u32,
    /// Items whose value is on flash (their stubs are in RAM; `curr_items` counts them).
    pub flash_items: u64,
    /// Bytes of their records on flash (value, key and the record's header).
    pub flash_bytes: u64,
}

/// One shard's counters and size classes: what its commands and evictions count, the
/// snapshot [`crate::Engine::stats`] sums, and `stats reset`.
#[derive(Debug)]
pub(crate) struct ShardStats {
    pub counters: Counters,
    pub classes: Vec<ClassStats>,
    class_sizes: Arc<[u32]>,
}

impl ShardStats {
    pub fn new(class_sizes: Arc<[u32]>) -> ShardStats {
        let classes = class_sizes
            .iter()
            .map(|&size| ClassStats {
                size,
                ..Default::default()
            })
            .collect();
        ShardStats {
            counters: Counters::default(),
            classes,
            class_sizes,
        }
    }

    /// The class of an item of `len` stored bytes (see [`class_of`]).
    #[inline]
    pub fn class(&mut self, len: usize) -> &mut ClassStats {
        &mut self.classes[class_of(&self.class_sizes, len)]
    }

    /// The command counters of the class an item of `len` stored bytes is in.
    #[inline]
    pub fn class_counters(&mut self, len: usize) -> &mut ClassCounters {
        &mut self.class(len).counters
    }

    /// An item of `size` stored bytes became live.
    #[inline]
    pub fn linked(&mut self, size: usize) {
        self.counters.curr_items += 1;
        self.counters.bytes += size as u64;
        let c = self.class(size);
        c.items += 1;
        c.bytes += size as u64;
    }

    /// A live item of `size` stored bytes went away.
    #[inline]
    pub fn unlinked(&mut self, size: usize) {
        self.counters.curr_items -= 1;
        self.counters.bytes -= size as u64;
        let c = self.class(size);
        c.items -= 1;
        c.bytes -= size as u64;
    }

    /// A dead (expired or flushed) item's memory was taken back; `expired_unfetched`: it
    /// expired without ever being read.
    #[inline]
    pub fn reclaimed(&mut self, size: usize, expired_unfetched: bool) {
        self.counters.reclaimed += 1;
        if expired_unfetched {
            self.counters.expired_unfetched += 1;
        }
        let c = self.class(size);
        c.reclaimed += 1;
        if expired_unfetched {
            c.counters.expired_unfetched += 1;
        }
    }

    /// A live item was evicted: `fetched` if it was ever read, `with_ttl` if it had an
    /// expiry time, `active` if the policy had kept it but no segment could take it.
    #[inline]
    pub fn evicted(&mut self, size: usize, fetched: bool, with_ttl: bool, active: bool) {
        self.counters.evictions += 1;
        if !fetched {
            self.counters.evicted_unfetched += 1;
        }
        let c = self.class(size);
        c.evicted += 1;
        if !fetched {
            c.counters.evicted_unfetched += 1;
        }
        if with_ttl {
            c.counters.evicted_nonzero += 1;
        }
        // memcached's evicted_active: kept for its use, dropped for want of room.
        if active {
            c.counters.evicted_active += 1;
        }
    }

    /// `stats reset`: every counter to zero; the gauges (`curr_items`, `bytes`, each
    /// class's items and bytes) stay.
    pub fn reset(&mut self) {
        self.counters = Counters {
            curr_items: self.counters.curr_items,
            bytes: self.counters.bytes,
            ..Default::default()
        };
        for c in &mut self.classes {
            c.evicted = 0;
            c.reclaimed = 0;
            c.counters = ClassCounters::default();
        }
    }

    /// Adds this shard's counters and classes to an engine-wide snapshot.
    pub fn add_to(&self, out: &mut EngineStats) {
        out.counters.add(&self.counters);
        if out.classes.is_empty() {
            out.classes = (self.classes.iter())
                .map(|c| ClassStats {
                    size: c.size,
                    ..Default::default()
                })
                .collect();
        }
        for (sum, c) in out.classes.iter_mut().zip(&self.classes) {
            sum.items += c.items;
            sum.bytes += c.bytes;
            sum.evicted += c.evicted;
            sum.reclaimed += c.reclaimed;
            sum.counters.add(&c.counters);
        }
    }
}

/// memcached's default slab class sizes: 96 bytes growing by 1.25 (8-byte aligned) up to
/// `chunk_max`, then `chunk_max` itself.
pub(crate) fn class_sizes(chunk_max: usize) -> Vec<u32> {
    let mut sizes = Vec::new();
    let mut size = 96usize;
    while size < chunk_max && sizes.len() < 62 {
        sizes.push(size as u32);
        size = ((size as f64 * 1.25) as usize).next_multiple_of(8);
    }
    sizes.push(chunk_max as u32);
    sizes
}

/// The class for an item of `len` stored bytes: the first whose size holds it, else the last.
/// A scan from the smallest class: small items, the common ones, are found in a few
/// steps, where a binary search always takes six.
pub(crate) fn class_of(sizes: &[u32], len: usize) -> usize {
    sizes
        .iter()
        .position(|&s| s as usize >= len)
        .unwrap_or(sizes.len() - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_match_memcached_defaults() {
        let s = class_sizes(512 * 1024);
        assert_eq!(&s[..6], &[96, 120, 152, 192, 240, 304]);
        assert_eq!(*s.last().unwrap(), 524_288);
        assert_eq!(class_of(&s, 1), 0);
        assert_eq!(class_of(&s, 96), 0);
        assert_eq!(class_of(&s, 97), 1);
        assert_eq!(class_of(&s, 10 << 20), s.len() - 1);
    }
}
