//! The persistent engine keeps memcached's semantics: the shared conformance suite and the
//! model-based property test, run on an engine over a fresh store.

use std::sync::Arc;

use memkit_engine::{Embedded, EngineConfig};
use memkit_persist::{Durability, PersistOptions, Persistent};
use memkit_testkit::tempdir::{TempDir, tempdir};
use memkit_types::ManualClock;
use memkit_types::blocking::block_on;
use proptest::prelude::*;

fn open(dir: &TempDir, clock: &ManualClock, durability: Durability) -> Persistent {
    let opts = PersistOptions {
        durability,
        ..PersistOptions::new(dir.path().join("store"))
    };
    let cfg = EngineConfig::with_memory(64 << 20).clock(Arc::new(clock.clone()));
    memkit_persist::open(&opts, cfg).unwrap()
}

#[test]
fn persistent_engine_passes_the_conformance_suite() {
    let dir = tempdir("persist-suite");
    let clock = ManualClock::default();
    let p = open(&dir, &clock, Durability::Sync);
    let s = Embedded::from(p.engine.clone());
    block_on(memkit_testkit::suite::run(&s, &clock)).assert_all_passed();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn persistent_engine_agrees_with_the_model(ops in memkit_testkit::ops::ops(1..60)) {
        let dir = tempdir("persist-model");
        let clock = ManualClock::default();
        let p = open(&dir, &clock, Durability::None);
        let s = Embedded::from(p.engine.clone());
        block_on(memkit_testkit::ops::compare(&s, &clock, &ops)).map_err(TestCaseError::fail)?;
    }
}
