//! The shared conformance suite and the model-based property test, on the embedded store.

use std::sync::Arc;

use memkit_engine::{Embedded, EngineConfig, EvictionPolicy};
use memkit_types::ManualClock;
use memkit_types::blocking::block_on;
use proptest::prelude::*;

fn store(clock: &ManualClock) -> Embedded {
    // Large enough that nothing is evicted: the model never evicts.
    Embedded::new(EngineConfig::with_memory(64 << 20).clock(Arc::new(clock.clone())))
}

#[test]
fn embedded_store_passes_the_conformance_suite() {
    let clock = ManualClock::default();
    let s = store(&clock);
    block_on(memkit_testkit::suite::run(&s, &clock)).assert_all_passed();
}

#[test]
fn embedded_store_with_one_shard_and_tiny_segments_passes_too() {
    // One shard with small segments (16 KiB): commands cross segment boundaries often. The
    // budget still holds two near-limit items, as an append of one needs. Under each
    // eviction policy: the segments are queued by the policy even when nothing is evicted.
    for policy in [EvictionPolicy::S3Fifo, EvictionPolicy::Sieve] {
        let clock = ManualClock::default();
        let cfg = EngineConfig {
            shards: Some(1),
            eviction: policy,
            ..EngineConfig::with_memory(4 << 20)
        };
        let s = Embedded::new(cfg.clock(Arc::new(clock.clone())));
        block_on(memkit_testkit::suite::run(&s, &clock)).assert_all_passed();
    }
}

/// A store whose every value longer than 4 bytes goes to a flash file as it is stored
/// (`ext_item_size=0,ext_item_age=0`): every read of one, every append and incr of one, goes
/// through the flash tier.
fn flash_store(clock: &ManualClock, dir: &std::path::Path) -> Embedded {
    use memkit_engine::FlashTier;
    use memkit_engine::memkit_flash::{FileSpec, FlashConfig, FlashStore};
    let store = FlashStore::open(FlashConfig {
        files: vec![FileSpec {
            path: dir.join("flash"),
            size: 16 << 20,
        }],
        page_size: 1 << 20,
        wbuf_size: 256 << 10,
        ..FlashConfig::default()
    })
    .expect("a flash file");
    let tier = FlashTier {
        item_size: 0,
        item_age: 0,
        ..FlashTier::new(store)
    };
    let cfg = EngineConfig {
        flash: Some(tier),
        ..EngineConfig::with_memory(64 << 20)
    };
    Embedded::new(cfg.clock(Arc::new(clock.clone())))
}

#[test]
fn embedded_store_with_every_value_on_flash_passes_the_conformance_suite() {
    let dir = memkit_testkit::tempdir("conformance-flash");
    let clock = ManualClock::default();
    let s = flash_store(&clock, dir.path());
    block_on(memkit_testkit::suite::run(&s, &clock)).assert_all_passed();
    let stats = s.engine().stats().counters;
    assert!(
        stats.get_extstore > 0 && stats.recache_from_extstore > 0,
        "{stats:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn embedded_store_agrees_with_the_model(ops in memkit_testkit::ops::ops(1..80)) {
        let clock = ManualClock::default();
        let s = store(&clock);
        block_on(memkit_testkit::ops::compare(&s, &clock, &ops)).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn embedded_store_with_every_value_on_flash_agrees_with_the_model(
        ops in memkit_testkit::ops::ops(1..80),
    ) {
        let dir = memkit_testkit::tempdir("model-flash");
        let clock = ManualClock::default();
        let s = flash_store(&clock, dir.path());
        block_on(memkit_testkit::ops::compare(&s, &clock, &ops)).map_err(TestCaseError::fail)?;
    }
}

#[test]
fn a_plain_synchronous_program_uses_the_blocking_facade() {
    use memkit_types::{Blocking, Exptime, StoreOutcome};
    let cache = Blocking(Embedded::with_defaults());
    assert_eq!(cache.add(b"k", b"1", 7, Exptime::NEVER), Ok(true));
    assert_eq!(cache.add(b"k", b"2", 7, Exptime::NEVER), Ok(false));
    let item = cache.get(b"k").unwrap().unwrap();
    assert_eq!((&item.value[..], item.flags), (&b"1"[..], 7));
    assert_eq!(cache.incr(b"k", 41), Ok(Some(42)));
    assert_eq!(
        cache.cas(b"k", b"x", 0, Exptime::NEVER, item.cas),
        Ok(StoreOutcome::Exists)
    );
    assert_eq!(cache.delete(b"k"), Ok(true));
    assert_eq!(cache.get(b"k"), Ok(None));
    assert_eq!(
        cache.set(b"bad key", b"v", 0, Exptime::NEVER),
        Err(memkit_types::Error::InvalidKey)
    );
}

#[test]
fn the_background_reclaimer_frees_expired_items_and_stops_with_the_store() {
    let clock = ManualClock::default();
    let s = store(&clock);
    let b = memkit_types::Blocking(s.clone());
    for i in 0..1000 {
        b.set(
            format!("k{i}").as_bytes(),
            b"v",
            0,
            memkit_types::Exptime(5),
        )
        .unwrap();
    }
    clock.advance(6);
    let handle = s.spawn_reclaimer(std::time::Duration::from_millis(5));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while s.engine().stats().counters.curr_items > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "reclaimer did not run"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(s.engine().stats().counters.reclaimed, 1000);
    drop((b, s));
    handle.join().unwrap();
}
