//! Warm-up fills: a cache written once, never read, must use its whole budget
//! before it evicts anything, whatever the value size, and hold at least as many items as
//! memcached's slab arithmetic gives at the same `-m`.
//!
//! The fills run at `-m 8`: one shard with 32 KiB segments, the shape every shard of a
//! `-m 64` engine has, so "the budget" here is exactly a shard's. A shard holding out-of-line
//! values may map three segments past it, for their stubs: every fill checks that bound.

use std::sync::Arc;

use memkit_engine::{Engine, EngineConfig, EvictionPolicy};
use memkit_types::{Exptime, ManualClock, StoreMode, StoreOptions};
use proptest::prelude::*;

const MB: usize = 1 << 20;
const BUDGET: usize = 8 * MB;
/// A `-m 8` shard's segment size.
const SEG: usize = 32 << 10;

/// What a shard may map: its budget, and three segments for the stubs of out-of-line values
/// (over a 32nd of a segment) while it holds any.
fn limit(biggest_value: usize) -> usize {
    BUDGET + if biggest_value > SEG / 32 { 3 * SEG } else { 0 }
}

/// memcached 1.6's arithmetic (-n 48, -f 1.25, 1 MiB pages, slab_chunk_max 512 KiB): how many
/// items of one shape `-m pages` holds. An item needs its 48-byte header, 8 bytes of CAS, the
/// key and its NUL, the value and "\r\n". Past 512 KiB an item is chunked: a header chunk,
/// full 512 KiB chunks and a last chunk in the class that fits what is left.
mod memcached {
    const PAGE: usize = 1 << 20;
    const CHUNK_MAX: usize = PAGE / 2;
    /// `sizeof(item_chunk)` on 64-bit: next, prev, head, size, used, orig_clsid + padding.
    const CHUNK_HEADER: usize = 48;

    pub fn classes() -> Vec<usize> {
        let mut sizes = Vec::new();
        let mut size = 96usize;
        while size < CHUNK_MAX {
            sizes.push(size);
            size = ((size as f64 * 1.25) as usize).next_multiple_of(8);
        }
        sizes.push(CHUNK_MAX);
        sizes
    }

    fn chunk_for(bytes: usize) -> usize {
        *classes()
            .iter()
            .find(|&&c| c >= bytes)
            .expect("up to 512 KiB")
    }

    pub fn items(pages: usize, klen: usize, vlen: usize) -> usize {
        let total = 48 + 8 + klen + 1 + vlen + 2;
        if total <= CHUNK_MAX {
            return pages * (PAGE / chunk_for(total));
        }
        // Chunked: each item takes a header chunk, `full` max-size chunks and a last one.
        let header = chunk_for(48 + 8 + klen + 1 + CHUNK_HEADER);
        let data = vlen + 2;
        let per_chunk = CHUNK_MAX - CHUNK_HEADER;
        let (full, rest) = (data / per_chunk, data % per_chunk);
        let last = (rest > 0).then(|| chunk_for(rest + CHUNK_HEADER));
        let pages_for = |n: usize| {
            let mut p = n.div_ceil(PAGE / header) + (n * full).div_ceil(PAGE / CHUNK_MAX);
            if let Some(c) = last {
                p += n.div_ceil(PAGE / c);
            }
            p
        };
        (0..)
            .take_while(|&n| pages_for(n) <= pages)
            .last()
            .unwrap_or(0)
    }
}

fn engine(mb: usize) -> Engine {
    engine_with(mb, EvictionPolicy::default())
}

fn engine_with(mb: usize, policy: EvictionPolicy) -> Engine {
    let clock = ManualClock::default();
    let cfg = EngineConfig::with_memory(mb * MB).clock(Arc::new(clock));
    Engine::new(cfg.eviction(policy))
}

fn key(i: usize) -> Vec<u8> {
    format!("fill:{i:010}").into_bytes()
}

/// What a fill saw: the store state just before the first eviction, and at the end.
struct Fill {
    items_at_first_eviction: usize,
    mapped_at_first_eviction: usize,
    items_at_end: usize,
    bytes_at_end: usize,
    /// The most mapped after any write.
    peak_mapped: usize,
}

/// Writes distinct keys with values of `size(i)` bytes, never read, until the first eviction
/// and then as many again.
fn fill(e: &Engine, size: impl Fn(usize) -> usize) -> Fill {
    let source = vec![b'v'; MB];
    let opts = StoreOptions::new(StoreMode::Set, 0, Exptime::NEVER);
    let mut before = e.stats();
    let mut first = None;
    let mut peak_mapped = 0;
    let mut i = 0;
    loop {
        e.store(&key(i), &source[..size(i)], &opts).expect("store");
        i += 1;
        let now = e.stats();
        peak_mapped = peak_mapped.max(now.mapped_bytes as usize);
        if first.is_none() && now.counters.evictions > 0 {
            first = Some((before.counters.curr_items, before.mapped_bytes, i));
        }
        if let Some((_, _, at)) = first
            && i >= 2 * at + 16
        {
            let (items, mapped, _) = first.unwrap();
            return Fill {
                items_at_first_eviction: items as usize,
                mapped_at_first_eviction: mapped as usize,
                items_at_end: now.counters.curr_items as usize,
                bytes_at_end: now.counters.bytes as usize,
                peak_mapped,
            };
        }
        before = now;
    }
}

/// The value sizes of the fill table, and the sizes either side of the out-of-line
/// threshold (a quarter of a 32 KiB segment).
const SIZES: &[usize] = &[
    6_600, 4_100, 1_420, 200_000, 400_000, 10, 100, 1_000, 4_000, 8_000, 8_200, 12_000, 20_000,
    33_000, 100_000, 500_000, 1_000_000,
];

#[test]
fn every_size_fills_the_budget_before_evicting_and_holds_memcacheds_items() {
    fills_hold_memcacheds_items(EvictionPolicy::S3Fifo, SIZES);
}

/// The same under SIEVE, at sizes either side of the out-of-line threshold: filling the
/// budget is the eviction mechanism's work, whatever the policy.
#[test]
fn sieve_fills_the_budget_before_evicting_too() {
    let sizes = [10, 100, 1_000, 4_000, 20_000, 200_000, 1_000_000];
    fills_hold_memcacheds_items(EvictionPolicy::Sieve, &sizes);
}

fn fills_hold_memcacheds_items(policy: EvictionPolicy, sizes: &[usize]) {
    let budget = BUDGET;
    for &size in sizes {
        let e = engine_with(8, policy);
        let f = fill(&e, |_| size);
        let memcached = memcached::items(8, key(0).len(), size);
        eprintln!(
            "{size:>9} B: first eviction at {} items, {:.1}% of the budget mapped; end {} \
             items ({:.2}x memcached's {memcached}), bytes {:.1}% of the budget",
            f.items_at_first_eviction,
            100.0 * f.mapped_at_first_eviction as f64 / budget as f64,
            f.items_at_end,
            f.items_at_end as f64 / memcached as f64,
            100.0 * f.bytes_at_end as f64 / budget as f64,
        );
        assert!(
            f.peak_mapped <= limit(size),
            "{size} B: {} B mapped, over the shard's limit",
            f.peak_mapped
        );
        // Nothing is evicted while the next item (rounded to pages, and the head segment a
        // write may need) still fits.
        let room = limit(size) - f.mapped_at_first_eviction;
        assert!(
            room < size.next_multiple_of(4096) + 32 * 1024 + budget / 64,
            "{size} B: evicted with {room} bytes of the budget unused"
        );
        assert!(
            f.items_at_first_eviction >= memcached && f.items_at_end >= memcached,
            "{size} B: {} items at the first eviction, {} at the end, memcached holds {memcached}",
            f.items_at_first_eviction,
            f.items_at_end
        );
    }
}

/// The hardest sizes for the comparison: values that fill a memcached chunk to the byte, one
/// per slab class, so memcached loses nothing to rounding. The 512 KiB class fits 16 items in
/// 8 MiB to within 1 KiB: it needs the stubs' segments outside the budget.
#[test]
fn values_that_fill_memcacheds_chunks_exactly_still_fit_as_many() {
    let klen = key(0).len();
    for chunk in memcached::classes() {
        let size = chunk - (48 + 8 + klen + 1 + 2);
        let e = engine(8);
        let f = fill(&e, |_| size);
        let memcached = memcached::items(8, klen, size);
        eprintln!(
            "chunk {chunk:>6}: {size:>6} B, {} items vs {memcached}",
            f.items_at_end
        );
        assert!(f.peak_mapped <= limit(size), "{size} B: over the limit");
        assert!(
            f.items_at_end >= memcached,
            "{size} B (chunk {chunk}): {} items, memcached holds {memcached}",
            f.items_at_end
        );
    }
}

/// At `-m 64`, eight shards, the 512 KiB class holds memcached's 128 items after every write
/// once every shard is full, under either policy: S3-FIFO opens a main head for a stub
/// whose key matches a ghost fingerprint by chance, a third segment of stubs in that shard.
/// (A shard holds 16 of them; it is full once 16 keys have hashed to it, which takes a
/// random number of writes: about one seed in 500 leaves a shard short after 256.)
#[test]
fn the_512_kib_class_holds_memcacheds_items_in_every_shard() {
    let klen = key(0).len();
    let size = (512 << 10) - (48 + 8 + klen + 1 + 2);
    let memcached = memcached::items(64, klen, size);
    assert_eq!(memcached, 128);
    let source = vec![b'v'; size];
    let opts = StoreOptions::new(StoreMode::Set, 0, Exptime::NEVER);
    for policy in [EvictionPolicy::S3Fifo, EvictionPolicy::Sieve] {
        let e = engine_with(64, policy);
        let (mut least, mut full) = (usize::MAX, false);
        for i in 0..8 * memcached {
            e.store(&key(i), &source, &opts).expect("store");
            let s = e.stats();
            let bound = 64 * MB + (s.shards * 3 * s.segment_size) as usize;
            assert!(
                s.mapped_bytes as usize <= bound,
                "{policy:?}: over the limit"
            );
            let items = s.counters.curr_items as usize;
            full |= items >= memcached;
            if full {
                least = least.min(items);
            }
        }
        assert!(
            full,
            "{policy:?}: never held {memcached} items in {i} writes",
            i = 8 * memcached
        );
        assert!(
            least >= memcached,
            "{policy:?}: {least} items at the least, memcached holds {memcached}"
        );
    }
}

/// The stubs' segments are a bound, not more budget: a shard that held out-of-line values
/// and then holds only small ones maps no more than its budget again.
#[test]
fn the_stubs_segments_go_with_the_last_out_of_line_value() {
    let e = engine(8);
    let f = fill(&e, |_| 100_000);
    assert!(f.peak_mapped > BUDGET && f.peak_mapped <= limit(100_000));
    // Deleted rather than evicted: S3-FIFO may keep a compacted large value in its main
    // queue for as long as new writes keep the small queue busy.
    for i in 0..10_000 {
        let _ = e.delete(&key(i), &Default::default());
    }
    let before = e.stats();
    assert_eq!(before.counters.curr_items, 0);
    let value = [b's'; 100];
    let opts = StoreOptions::new(StoreMode::Set, 0, Exptime::NEVER);
    let mut peak = 0;
    for i in 0..3 * BUDGET / 100 {
        let k = format!("small:{i:010}");
        e.store(k.as_bytes(), &value, &opts).expect("store");
        peak = peak.max(e.stats().mapped_bytes as usize);
    }
    let s = e.stats();
    assert!(peak <= limit(100_000), "{peak} B mapped");
    assert!(
        s.counters.evictions > before.counters.evictions + 1000,
        "the small values filled the budget"
    );
    assert!(
        s.mapped_bytes as usize <= BUDGET,
        "{} B mapped with only small values held",
        s.mapped_bytes
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Any mix of sizes from 1 B to 1 MB: no eviction while a good part of a large value
    /// would still fit, and the steady state keeps the budget in use.
    #[test]
    fn random_size_mixes_fill_the_budget_before_evicting(
        sizes in proptest::collection::vec(1usize..1_000_000, 1..6),
        seed in any::<u64>(),
    ) {
        let budget = BUDGET;
        let e = engine(8);
        let biggest = *sizes.iter().max().unwrap();
        let pick = |i: usize| {
            let x = (i as u64 ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
            sizes[x as usize % sizes.len()]
        };
        let f = fill(&e, pick);
        prop_assert!(f.peak_mapped <= limit(biggest), "sizes {:?}: over the limit", sizes);
        let room = limit(biggest) - f.mapped_at_first_eviction;
        prop_assert!(
            room < biggest.next_multiple_of(4096) + 32 * 1024 + budget / 64,
            "sizes {:?}: evicted with {} bytes unused", sizes, room
        );
        prop_assert!(
            f.bytes_at_end + biggest.next_multiple_of(4096) + budget / 8 >= budget,
            "sizes {:?}: {} bytes held at the end", sizes, f.bytes_at_end
        );
    }
}
