//! Keys made to collide: what a client that chooses its keys can do to the index.
//!
//! Under foldhash with its public shared seeds, a key of 8 to 16 bytes whose last 8 bytes
//! are the public expansion seed hashes to one value whatever the per-hasher seed (the
//! folded multiply of its second word is by zero). The engine's hasher derives those seeds
//! from its secret one, so such keys spread; and were keys to collide anyway, the index
//! evicts what one home cannot hold rather than growing without bound.

use std::collections::HashSet;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};

use memkit_types::{DeleteOptions, Exptime, GetOptions, StoreMode, StoreOptions, StoreOutcome};

use super::{Engine, EngineConfig, KeyHasher};

const SEED: u64 = 0x0123_4567_89ab_cdef;

/// foldhash 0.1's `ARBITRARY5`, the expansion seed of its public `SharedSeed`.
const PUBLIC_EXPAND_SEED: u64 = 0xbe54_66cf_34e9_0c6c;

/// The `i`th key of the crafted family: 8 bytes of its own, then the public seed.
fn crafted(i: usize) -> Vec<u8> {
    let mut k = format!("k{i:07}").into_bytes();
    k.extend_from_slice(&PUBLIC_EXPAND_SEED.to_le_bytes());
    k
}

fn config() -> EngineConfig {
    EngineConfig {
        shards: Some(1),
        ..EngineConfig::with_memory(16 << 20)
    }
}

fn set(e: &Engine, key: &[u8], value: &[u8]) {
    let opts = StoreOptions::new(StoreMode::Set, 0, Exptime::NEVER);
    let r = e.store(key, value, &opts).unwrap();
    assert_eq!(r.outcome, StoreOutcome::Stored);
}

fn value_of(e: &Engine, key: &[u8]) -> Option<Vec<u8>> {
    let got = e.get(key, &GetOptions::default()).unwrap();
    got.map(|i| i.value.to_vec())
}

#[test]
fn keys_that_collide_under_public_seeds_spread_under_the_engines() {
    let public = KeyHasher::with_public_shared_seed(SEED);
    let one: HashSet<u64> = (0..2000).map(|i| public.hash_one(crafted(i))).collect();
    assert_eq!(
        one.len(),
        1,
        "the crafted keys collide under the public seeds"
    );

    let e = Engine::with_hash_seed(config(), SEED);
    let spread: HashSet<u64> = (0..2000).map(|i| e.hasher.hash_one(crafted(i))).collect();
    assert_eq!(spread.len(), 2000);
    for i in 0..2000 {
        set(&e, &crafted(i), &i.to_le_bytes());
    }
    for i in 0..2000 {
        assert_eq!(
            value_of(&e, &crafted(i)),
            Some(i.to_le_bytes().to_vec()),
            "key {i}"
        );
    }
    let st = e.stats();
    assert_eq!((st.counters.curr_items, st.counters.evictions), (2000, 0));
}

#[test]
fn keys_colliding_in_every_bit_are_evicted_past_one_home_and_the_index_stays_bounded() {
    let e = Engine::with_key_hasher(config(), KeyHasher::with_public_shared_seed(SEED));
    let evicted = Arc::new(Mutex::new(Vec::new()));
    let log = evicted.clone();
    e.set_evict_hook(move |ev| log.lock().unwrap().push(ev.key.to_vec()));
    // Ordinary keys between the crafted ones are unaffected.
    for i in 0..3000 {
        set(&e, &crafted(i), b"crafted");
        set(&e, format!("plain{i}").as_bytes(), b"plain");
    }
    let resident: Vec<usize> = (0..3000)
        .filter(|&i| value_of(&e, &crafted(i)).is_some())
        .collect();
    // One home holds 254 entries (the index's MAX_DIST); each crafted key past them was
    // evicted as it came.
    assert_eq!(resident, (0..254).collect::<Vec<_>>());
    let st = e.stats();
    assert_eq!(st.counters.curr_items, 3000 + 254);
    assert_eq!(st.counters.evictions, 3000 - 254);
    let logged: Vec<Vec<u8>> = (254..3000).map(crafted).collect();
    assert_eq!(*evicted.lock().unwrap(), logged);
    for i in 0..3000 {
        assert_eq!(
            value_of(&e, format!("plain{i}").as_bytes()).unwrap(),
            b"plain"
        );
    }
    // The crowd grows the table to at most 4 buckets an entry (and one growth step), where
    // an engine holding as many ordinary keys has 8/7 to 9/7: 3.5 times as large, not more.
    let plain = Engine::with_hash_seed(config(), SEED);
    for i in 0..3000 + 254 {
        set(&plain, format!("plain{i}").as_bytes(), b"plain");
    }
    let usual = plain.stats().index_bytes;
    assert!(
        st.index_bytes <= 4 * usual,
        "{} index bytes, {usual} usually",
        st.index_bytes
    );

    // A resident key can be rewritten, and a deleted one makes room for another.
    set(&e, &crafted(7), b"rewritten");
    assert_eq!(value_of(&e, &crafted(7)).unwrap(), b"rewritten");
    assert!(e.delete(&crafted(8), &DeleteOptions::default()).is_ok());
    set(&e, &crafted(5000), b"late");
    assert_eq!(value_of(&e, &crafted(5000)).unwrap(), b"late");
    assert_eq!(value_of(&e, &crafted(8)), None);
    let mut listed = 0;
    e.for_each_item(|_| listed += 1);
    assert_eq!(listed as u64, e.stats().counters.curr_items);
}
