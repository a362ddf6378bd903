//! Dumps in batches (`Engine::crawl`) interleaved with what a server does between them:
//! writes, rewrites, deletes, evictions (which move the items they keep), expiry and the
//! index growing. Every key live for the whole dump is listed exactly once, no key twice,
//! and no batch lists more than it was allowed.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use memkit_engine::{DumpCursor, Engine, EngineConfig, EvictionPolicy};
use memkit_types::{DeleteOptions, Exptime, GetOptions, ManualClock, StoreMode, StoreOptions};
use proptest::prelude::*;

type Keys = Arc<Mutex<HashSet<Vec<u8>>>>;

/// An engine whose evictions are written down.
fn engine(mb: usize, shards: usize, policy: EvictionPolicy) -> (Engine, ManualClock, Keys) {
    let clock = ManualClock::default();
    let cfg = EngineConfig {
        shards: Some(shards),
        ..EngineConfig::with_memory(mb << 20)
            .clock(Arc::new(clock.clone()))
            .eviction(policy)
    };
    let e = Engine::new(cfg);
    let evicted = Keys::default();
    let log = evicted.clone();
    e.set_evict_hook(move |ev| {
        log.lock().unwrap().insert(ev.key.to_vec());
    });
    (e, clock, evicted)
}

fn set(e: &Engine, key: &str, len: usize, ttl: i64) {
    let opts = StoreOptions::new(StoreMode::Set, 0, Exptime(ttl));
    e.store(key.as_bytes(), &vec![b'v'; len], &opts).unwrap();
}

fn delete(e: &Engine, key: &str) {
    e.delete(key.as_bytes(), &DeleteOptions::default()).unwrap();
}

/// Runs a dump in batches of at most `max`, calling `between` after each batch but the
/// last; returns how many times each key was listed.
fn dump(e: &Engine, max: usize, mut between: impl FnMut(usize)) -> HashMap<String, usize> {
    let mut listed = HashMap::new();
    let mut cursor = DumpCursor::default();
    for batch in 0.. {
        assert!(batch < 1_000_000, "the dump makes no progress");
        let mut n = 0;
        let more = e.crawl(&mut cursor, max, |item| {
            n += 1;
            let key = String::from_utf8(item.key.to_vec()).unwrap();
            *listed.entry(key).or_default() += 1;
        });
        assert!(n <= max, "batch {batch} listed {n} of at most {max}");
        if !more {
            assert!(cursor.is_done(e));
            break;
        }
        between(batch);
    }
    listed
}

fn assert_none_twice(listed: &HashMap<String, usize>) {
    let twice: Vec<_> = listed.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "listed more than once: {twice:?}");
}

#[test]
fn a_dump_while_the_index_grows_lists_every_stable_key_once() {
    let (e, _, evicted) = engine(64, 4, EvictionPolicy::S3Fifo);
    for i in 0..500 {
        set(&e, &format!("stable{i}"), 50, 0);
        set(&e, &format!("doomed{i}"), 50, 0);
    }
    let before = e.stats().index_bytes;
    let listed = dump(&e, 7, |batch| {
        for j in 0..40 {
            set(&e, &format!("new{batch}-{j}"), 50, 0);
        }
        delete(&e, &format!("doomed{batch}"));
        // A rewrite moves the item; its key keeps its place in the dump's order.
        set(&e, &format!("stable{}", batch * 7 % 500), 60, 0);
    });
    assert!(
        e.stats().index_bytes > 2 * before,
        "the index grew during the dump"
    );
    assert!(evicted.lock().unwrap().is_empty());
    assert_none_twice(&listed);
    for i in 0..500 {
        assert_eq!(listed.get(&format!("stable{i}")), Some(&1), "stable{i}");
    }
    assert!(listed.keys().any(|k| k.starts_with("new")));
}

fn a_dump_through_evictions_and_expiry(policy: EvictionPolicy) {
    let (e, clock, evicted) = engine(2, 2, policy);
    for i in 0..2000 {
        set(&e, &format!("stable{i}"), 100, 0);
        set(&e, &format!("brief{i}"), 100, 30);
    }
    // Read once, half the stable keys are what an eviction keeps (and moves) first.
    for i in (0..2000).step_by(2) {
        e.get(format!("stable{i}").as_bytes(), &GetOptions::default())
            .unwrap();
    }
    let listed = dump(&e, 16, |batch| {
        // 10 KiB of new values a batch, 2.5 MiB over the dump: the cache evicts all along.
        for j in 0..10 {
            set(&e, &format!("churn{batch}-{j}"), 1000, 0);
        }
        if batch % 10 == 9 {
            clock.advance(2);
        }
    });
    assert_none_twice(&listed);
    let evicted = evicted.lock().unwrap();
    assert!(
        evicted.iter().any(|k| k.starts_with(b"stable")),
        "{policy:?}"
    );
    let mut kept = 0;
    for i in 0..2000 {
        let key = format!("stable{i}");
        if !evicted.contains(key.as_bytes()) {
            kept += 1;
            assert_eq!(listed.get(&key), Some(&1), "{policy:?}: {key}");
        }
    }
    assert!(kept > 100, "{policy:?}: only {kept} stable keys stayed");
    // Evictions moved kept items under the cursor.
    assert!(e.stats().counters.evict_retained > 0, "{policy:?}");
}

#[test]
fn a_dump_through_evictions_and_expiry_lists_every_key_that_stayed_once() {
    a_dump_through_evictions_and_expiry(EvictionPolicy::S3Fifo);
    a_dump_through_evictions_and_expiry(EvictionPolicy::Sieve);
}

#[test]
fn a_whole_dump_lists_what_for_each_item_does() {
    let (e, _, _) = engine(8, 4, EvictionPolicy::S3Fifo);
    for i in 0..3000 {
        set(&e, &format!("k{i}"), i % 700, 0);
    }
    for i in (0..3000).step_by(3) {
        delete(&e, &format!("k{i}"));
    }
    let mut all = Vec::new();
    e.for_each_item(|item| all.push(item.key.to_vec()));
    assert_eq!(all.len(), 2000);
    for max in [1, 5, 1000, usize::MAX] {
        let listed = dump(&e, max, |_| {});
        assert_eq!(listed.len(), 2000, "batches of {max}");
        assert_none_twice(&listed);
    }
    // A finished cursor lists nothing more.
    let mut cursor = DumpCursor::default();
    while e.crawl(&mut cursor, 100, |_| {}) {}
    assert!(!e.crawl(&mut cursor, 100, |_| panic!("listed after the end")));
}

#[derive(Debug, Clone)]
enum Op {
    Set(u16, u16),
    Delete(u16),
    Tick,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u16..400, 0u16..4000).prop_map(|(k, len)| Op::Set(k, len)),
        2 => (0u16..400).prop_map(Op::Delete),
        1 => Just(Op::Tick),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random writes (some with a TTL), deletes and clock ticks between batches of random
    /// sizes, in a cache small enough to evict: a key set before the dump and never
    /// rewritten with a TTL, deleted, evicted or expired is listed exactly once.
    #[test]
    fn random_work_between_batches(
        ops in proptest::collection::vec(proptest::collection::vec(op(), 0..12), 1..200),
        max in 1usize..24,
        sieve in any::<bool>(),
    ) {
        let policy = if sieve { EvictionPolicy::Sieve } else { EvictionPolicy::S3Fifo };
        let (e, clock, evicted) = engine(1, 2, policy);
        for k in 0..400 {
            set(&e, &format!("key{k}"), 100, if k % 5 == 0 { 3 } else { 0 });
        }
        // Keys whose stay was broken: a TTL, a delete (evictions are in the hook's log).
        let mut broken: HashSet<String> = (0..400).step_by(5).map(|k| format!("key{k}")).collect();
        let mut ops = ops.into_iter();
        let listed = dump(&e, max, |_| {
            for op in ops.next().unwrap_or_default() {
                match op {
                    Op::Set(k, len) => {
                        let ttl = if len % 3 == 0 { 2 } else { 0 };
                        set(&e, &format!("key{k}"), len as usize, ttl);
                        if ttl != 0 {
                            broken.insert(format!("key{k}"));
                        }
                    }
                    Op::Delete(k) => {
                        delete(&e, &format!("key{k}"));
                        broken.insert(format!("key{k}"));
                    }
                    Op::Tick => clock.advance(1),
                }
            }
        });
        let evicted = evicted.lock().unwrap();
        for (key, n) in &listed {
            prop_assert_eq!(*n, 1, "{} listed {} times", key, n);
        }
        for k in 0..400 {
            let key = format!("key{k}");
            if !broken.contains(&key) && !evicted.contains(key.as_bytes()) {
                prop_assert_eq!(listed.get(&key), Some(&1), "{}", key);
            }
        }
    }
}
