//! The headline memory claims, small and deterministic, so a change that loses them fails
//! here rather than in a benchmark nobody re-ran: at 20-byte keys and 100-byte values a budget
//! holds at least 1.4x the items memcached's slab arithmetic gives, at about 12 bytes of
//! overhead an item (docs/BENCHMARKS.md, "Per-item overhead", measures the same at -m 64).
//!
//! `-m 8` is one shard of 32 KiB segments, the shape of every shard of a `-m 64` engine, so
//! the figures are a `-m 64` engine's per shard. Writes are single-threaded and the clock is
//! manual; the only variation between runs is the per-engine hash seed, which moves an item's
//! index bucket, not what the budget holds.

use std::sync::Arc;

use memkit_engine::{Engine, EngineConfig, EngineStats};
use memkit_types::{Exptime, ManualClock, StoreMode, StoreOptions};

const MB: usize = 1 << 20;
const KEY_LEN: usize = 20;
const VALUE_LEN: usize = 100;

/// memcached 1.6 at `-m 8` with these items: 48-byte header + 8 CAS + key + NUL + value +
/// "\r\n" = 179 bytes go in the 192-byte class, 5,461 chunks a 1 MiB page, 8 pages.
const MEMCACHED_ITEMS: usize = 8 * (MB / 192);

fn key(i: usize) -> [u8; KEY_LEN] {
    let mut k = [b'k'; KEY_LEN];
    let digits = format!("{i:012}");
    k[KEY_LEN - 12..].copy_from_slice(digits.as_bytes());
    k
}

/// Bytes held beyond keys and values, per item.
fn overhead(s: &EngineStats) -> f64 {
    let items = s.counters.curr_items as f64;
    (s.mapped_bytes as f64 - items * (KEY_LEN + VALUE_LEN) as f64) / items
}

#[test]
fn a_budget_holds_more_items_than_memcached_at_a_small_overhead() {
    let cfg = EngineConfig::with_memory(8 * MB).clock(Arc::new(ManualClock::default()));
    let e = Engine::new(cfg);
    let value = [b'v'; VALUE_LEN];
    let opts = StoreOptions::new(StoreMode::Set, 0, Exptime::NEVER);

    let mut i = 0;
    let mut first = e.stats();
    loop {
        e.store(&key(i), &value, &opts).expect("store");
        i += 1;
        let now = e.stats();
        if now.counters.evictions > 0 {
            break;
        }
        first = now;
        assert!(
            i < 4 * MEMCACHED_ITEMS,
            "no eviction after {i} items in -m 8"
        );
    }
    let written_at_first = i;
    while i < 3 * written_at_first {
        e.store(&key(i), &value, &opts).expect("store");
        i += 1;
    }
    let steady = e.stats();

    for (when, s) in [("first eviction", &first), ("steady state", &steady)] {
        let items = s.counters.curr_items as usize;
        let ratio = items as f64 / MEMCACHED_ITEMS as f64;
        let per_item = overhead(s);
        eprintln!(
            "{when}: {items} items ({ratio:.3}x memcached's {MEMCACHED_ITEMS}), \
             {per_item:.2} B an item over key + value, {} B mapped",
            s.mapped_bytes
        );
        assert!(
            ratio >= 1.40,
            "{when}: {items} items is {ratio:.3}x memcached's {MEMCACHED_ITEMS}, below 1.40x"
        );
        assert!(
            per_item <= 13.5,
            "{when}: {per_item:.2} B of overhead an item, over 13.5 B"
        );
        // Inline values only: the segments a shard may map past its budget for the stubs
        // of out-of-line values are not there to count.
        assert!(
            s.mapped_bytes as usize <= 8 * MB,
            "{when}: {} B mapped in an 8 MiB budget",
            s.mapped_bytes
        );
    }
}
