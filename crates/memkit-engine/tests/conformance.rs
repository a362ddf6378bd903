//! The shared conformance suite and the model-based property test, on the embedded store.

use std::sync::Arc;

use memkit_engine::{Embedded, EngineConfig};
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
    // One shard with small segments (64 KiB): commands cross segment boundaries often. The
    // budget still holds two near-limit items, as an append of one needs.
    let clock = ManualClock::default();
    let cfg = EngineConfig {
        shards: Some(1),
        ..EngineConfig::with_memory(4 << 20)
    };
    let s = Embedded::new(cfg.clock(Arc::new(clock.clone())));
    block_on(memkit_testkit::suite::run(&s, &clock)).assert_all_passed();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn embedded_store_agrees_with_the_model(ops in memkit_testkit::ops::ops(1..80)) {
        let clock = ManualClock::default();
        let s = store(&clock);
        block_on(memkit_testkit::ops::compare(&s, &clock, &ops)).map_err(TestCaseError::fail)?;
    }
}
